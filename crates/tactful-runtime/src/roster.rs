//! A platform's accounts, one per persona, as every platform with a bot
//! account per persona (Telegram, Discord, Slack) keeps them: the runtime
//! handle it reports to, the task of each account (listening or not, when
//! several processes share the store), which accounts said who they are,
//! and the backoff each one reconnects with. One place, so a platform
//! crate holds only its protocol: how to connect an account and read what
//! it hears.
//!
//! What stays in each platform: what it logs (a line says its platform's
//! module), its error texts, when a backoff is reset, and what an account
//! does on its task.

use std::sync::Mutex;
use std::time::Duration;

use tactful_core::PersonaId;

use crate::account::{AccountTask, AccountTasks, Backoff, Roll};
use crate::connections::{BANNER_WAIT, LinkState};
use crate::handle::RuntimeHandle;
use crate::platform::Held;

/// A platform's accounts: see the module's documentation.
pub struct Roster {
    /// The platform as logs, `/healthz` and metrics name it ("Discord").
    platform: &'static str,
    /// The personas with an account, in the settings' order: an account's
    /// index is its persona's place here.
    personas: Vec<PersonaId>,
    max_backoff: Duration,
    /// The runtime, kept from `start` on (before any account connects).
    runtime: Mutex<Option<RuntimeHandle>>,
    tasks: AccountTasks,
    identified: Roll,
}

impl Roster {
    /// The accounts of `personas` on `platform`; nothing runs before
    /// [`Roster::start`].
    pub fn new(platform: &'static str, personas: Vec<PersonaId>, max_backoff: Duration) -> Roster {
        Roster {
            platform,
            personas,
            max_backoff,
            runtime: Mutex::new(None),
            tasks: AccountTasks::default(),
            identified: Roll::default(),
        }
    }

    /// The personas with an account, in order.
    pub fn personas(&self) -> &[PersonaId] {
        &self.personas
    }

    /// The runtime, once started.
    pub fn runtime(&self) -> Option<RuntimeHandle> {
        self.runtime.lock().ok().and_then(|r| r.clone())
    }

    /// Keeps `runtime` and runs `account(i, listening)` for each account
    /// on a task of its own (see [`AccountTasks::start`]).
    pub fn start(
        &self,
        runtime: RuntimeHandle,
        held: &Held,
        account: impl Fn(usize, bool) -> AccountTask,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.tasks
            .start(&self.runtime, runtime, &self.personas, held, account)
    }

    /// Restarts the accounts whose part in `held` changed (see
    /// [`AccountTasks::change`]).
    pub fn change(
        &self,
        held: &Held,
        account: impl Fn(usize, bool) -> AccountTask,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.tasks
            .change(&self.runtime, self.platform, &self.personas, held, account)
    }

    /// Keeps `runtime` without starting anything (a platform whose accounts
    /// all connect whatever is held: IRC, Matrix).
    pub fn keep_runtime(&self, runtime: RuntimeHandle) {
        if let Ok(mut r) = self.runtime.lock() {
            *r = Some(runtime);
        }
    }

    /// Runs `account(i)` for every account on a task of its own, held or
    /// not (IRC and Matrix keep their connection with their rooms'
    /// partition, not per account).
    pub fn start_every(&self, account: impl Fn(usize) -> AccountTask) -> Vec<tokio::task::JoinHandle<()>> {
        (0..self.personas.len())
            .map(|i| tokio::spawn(account(i)))
            .collect()
    }

    /// The first account that listens here, if any (see
    /// [`AccountTasks::first_listening`]).
    pub fn first_listening(&self) -> Option<usize> {
        self.tasks.first_listening()
    }

    /// The backoff account `i` reconnects with: reporting to the runtime's
    /// connection states when it listens here, detached when another
    /// process listens with it (see [`Backoff::of_held`]).
    pub fn backoff(&self, i: usize, listening: bool) -> Backoff {
        Backoff::of_held(
            &self.runtime,
            self.platform,
            self.personas[i].as_str(),
            self.max_backoff,
            listening,
        )
    }

    /// The backoff account `i` reconnects with, always reporting to the
    /// runtime's connection states (see [`Backoff::of`]).
    pub fn backoff_always(&self, i: usize) -> Backoff {
        Backoff::of(
            &self.runtime,
            self.platform,
            self.personas[i].as_str(),
            self.max_backoff,
        )
    }

    /// Account `i` said who it is.
    pub fn identified(&self, i: usize) {
        self.identified.add(i);
    }

    /// Waits up to `within` until every account said who it is; whether
    /// they all did.
    pub async fn all_identified(&self, within: Duration) -> bool {
        self.identified.wait_for(self.personas.len(), within).await
    }

    /// The start banner's line for accounts that say who they are by a
    /// name: `on Zulip as Docs Bot (docs), chef (connecting…)`, each
    /// account's `shown` name once it is connected, else its persona and
    /// why not. Waits as [`Roster::banner_states`] does.
    pub async fn banner_line(&self, shown: Vec<Option<String>>) -> String {
        let states = self.banner_states().await;
        let names: Vec<String> = self
            .personas
            .iter()
            .zip(states)
            .zip(shown.into_iter().chain(std::iter::repeat(None)))
            .map(|((p, state), name)| match (state.banner_note(), name) {
                (None, Some(name)) => format!("{name} ({p})"),
                (note, _) => format!("{p} ({})", note.unwrap_or("connecting…")),
            })
            .collect();
        format!("on {} as {}", self.platform, names.join(", "))
    }

    /// For the start banner: waits a few seconds (at most
    /// [`BANNER_WAIT`]) until every account is connected; each one's state
    /// then (connecting, before a runtime is kept).
    pub async fn banner_states(&self) -> Vec<LinkState> {
        let personas: Vec<&str> = self.personas.iter().map(PersonaId::as_str).collect();
        match self.runtime() {
            Some(r) => {
                r.connections()
                    .settle(self.platform, &personas, BANNER_WAIT)
                    .await
            }
            None => vec![LinkState::Connecting; personas.len()],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn every_account_starts_and_the_roll_waits_for_each_once() {
        let personas = vec![PersonaId::from("docs"), PersonaId::from("chef")];
        let roster = Roster::new("Test", personas, Duration::from_secs(60));
        let started: Arc<Mutex<Vec<usize>>> = Arc::default();
        let tasks = roster.start_every(|i| {
            started.lock().expect("list").push(i);
            Box::pin(async {})
        });
        for task in tasks {
            task.await.expect("ran");
        }
        assert_eq!(*started.lock().expect("list"), [0, 1]);

        roster.identified(0);
        roster.identified(0);
        assert!(
            !roster.all_identified(Duration::from_secs(30)).await,
            "docs twice is not chef"
        );
        roster.identified(1);
        assert!(roster.all_identified(Duration::ZERO).await);

        // Before a runtime is kept: no handle, every account connecting.
        assert!(roster.runtime().is_none());
        assert_eq!(roster.banner_states().await, vec![LinkState::Connecting; 2]);
        assert_eq!(
            roster.banner_line(vec![Some("Docs Bot".into())]).await,
            "on Test as docs (connecting…), chef (connecting…)"
        );
    }
}
