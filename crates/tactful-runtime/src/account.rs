//! What every platform does for each persona's account: connect, and when
//! the connection drops or cannot be made, try again after a pause that
//! doubles up to a cap, until the service stops ([`Backoff`]); hear a
//! message that several accounts receive once ([`HeardOnce`]); wait for
//! every account to say who it is before listening ([`Roll`]); remember
//! where recent messages went ([`Recent`]).
//!
//! Written once here so every platform retries the same way and says so
//! the same way in the log.

use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::PersonaId;

use crate::connections::Account;
use crate::handle::RuntimeHandle;
use crate::platform::Held;

/// A boxed account task: what a platform runs for persona `i`'s account,
/// listening or only identifying it ([`AccountTasks::start`]).
pub type AccountTask = BoxFuture<'static, ()>;

/// The task of each account of a platform whose accounts connect one by
/// one (Telegram, Discord, Slack: one bot token each), and whether it
/// listens. Kept so that when the accounts a process holds change
/// (processes sharing a store share them out again as one joins or
/// dies), only the accounts that changed are stopped and started: the
/// others keep their connections ([`crate::Connected::change_held`]).
#[derive(Debug, Default)]
pub struct AccountTasks {
    /// By account: whether it listens, and its task.
    tasks: std::sync::Mutex<Vec<(bool, tokio::task::AbortHandle)>>,
}

impl AccountTasks {
    /// Starts a platform's accounts: keeps `runtime` in `kept` (the
    /// platform's handle, set before any account connects, see
    /// [`Backoff::of`]), then runs `account(i, listening)` for each of
    /// `personas` on a task of its own, `listening` saying whether this
    /// process holds that account ([`Held`]). Every account is started,
    /// held or not, so each says who it is and mentions of it are
    /// recognised.
    pub fn start<'a>(
        &self,
        kept: &std::sync::Mutex<Option<RuntimeHandle>>,
        runtime: RuntimeHandle,
        personas: impl IntoIterator<Item = &'a PersonaId>,
        held: &Held,
        account: impl Fn(usize, bool) -> AccountTask,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        if let Ok(mut r) = kept.lock() {
            *r = Some(runtime);
        }
        self.spawn_all(personas, held, account)
    }

    /// [`AccountTasks::start`] once the runtime is kept.
    fn spawn_all<'a>(
        &self,
        personas: impl IntoIterator<Item = &'a PersonaId>,
        held: &Held,
        account: impl Fn(usize, bool) -> AccountTask,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let started: Vec<(bool, tokio::task::JoinHandle<()>)> = personas
            .into_iter()
            .enumerate()
            .map(|(i, persona)| {
                let listening = held.includes(persona);
                (listening, tokio::spawn(account(i, listening)))
            })
            .collect();
        let mut tasks = self
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (_, old) in tasks.drain(..) {
            old.abort();
        }
        tasks.extend(started.iter().map(|(l, t)| (*l, t.abort_handle())));
        started.into_iter().map(|(_, t)| t).collect()
    }

    /// Whether this process listens with any of the accounts: a
    /// listening task still running (all of them are stopped when the
    /// process lets the platform go).
    pub fn any_listening(&self) -> bool {
        self.first_listening().is_some()
    }

    /// The first account (by index) that listens here, if any: state a
    /// platform's listeners share is saved under that account's key, so
    /// processes listening with different accounts do not overwrite what
    /// each other saved.
    pub fn first_listening(&self) -> Option<usize> {
        self.tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .position(|(listening, task)| *listening && !task.is_finished())
    }

    /// Changes which accounts listen to those `held` names: each account
    /// whose part changed has its task stopped, is forgotten by the
    /// runtime's connection states (`platform` as the log names it: an
    /// account listened with elsewhere now is not shown here), and is
    /// started again by `account(i, listening)`; the others are left
    /// running. Returns the tasks started, which the caller stops with
    /// the rest.
    pub fn change<'a>(
        &self,
        kept: &std::sync::Mutex<Option<RuntimeHandle>>,
        platform: &str,
        personas: impl IntoIterator<Item = &'a PersonaId>,
        held: &Held,
        account: impl Fn(usize, bool) -> AccountTask,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        let runtime = kept.lock().ok().and_then(|r| r.clone());
        let mut tasks = self
            .tasks
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut started = Vec::new();
        for (i, ((listening, task), persona)) in tasks.iter_mut().zip(personas).enumerate() {
            let now = held.includes(persona);
            if *listening == now {
                continue;
            }
            task.abort();
            if let Some(r) = &runtime {
                r.connections().forget_account(platform, persona.as_str());
            }
            let new = tokio::spawn(account(i, now));
            *listening = now;
            *task = new.abort_handle();
            started.push(new);
        }
        started
    }
}

#[cfg(test)]
mod account_tasks_tests {
    use std::collections::BTreeSet;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[tokio::test]
    async fn only_the_accounts_whose_part_changed_are_started_again() {
        let personas: Vec<PersonaId> = ["docs", "chef", "host"].map(PersonaId::from).to_vec();
        let only =
            |ids: &[&str]| Held::Only(ids.iter().map(|p| PersonaId::from(*p)).collect::<BTreeSet<_>>());
        let started: Arc<Mutex<Vec<(usize, bool)>>> = Arc::default();
        let account = |i: usize, listening: bool| -> AccountTask {
            started.lock().expect("list").push((i, listening));
            Box::pin(std::future::pending())
        };
        let tasks = AccountTasks::default();
        let kept = std::sync::Mutex::new(None);
        assert!(!tasks.any_listening(), "nothing started");
        let first = tasks.spawn_all(&personas, &only(&["docs"]), account);
        assert_eq!(
            *started.lock().expect("list"),
            [(0, true), (1, false), (2, false)]
        );
        assert!(tasks.any_listening());
        assert_eq!(tasks.first_listening(), Some(0));

        // chef is taken over: only chef starts again, listening now.
        let second = tasks.change(&kept, "Test", &personas, &only(&["docs", "chef"]), account);
        assert_eq!(second.len(), 1);
        assert_eq!(started.lock().expect("list")[3..], [(1, true)]);
        tokio::task::yield_now().await;
        assert!(!first[0].is_finished(), "docs kept its connection");
        assert!(first[1].is_finished(), "chef's first task stopped");

        // docs goes to another process: docs alone starts again, only
        // identifying; the same set again changes nothing.
        let third = tasks.change(&kept, "Test", &personas, &only(&["chef"]), account);
        assert_eq!(third.len(), 1);
        let none = tasks.change(&kept, "Test", &personas, &only(&["chef"]), account);
        assert!(none.is_empty());
        assert_eq!(tasks.first_listening(), Some(1), "chef, the only one listening");
        tasks.change(&kept, "Test", &personas, &only(&[]), account);
        assert!(!tasks.any_listening(), "chef let go too");
        tasks.change(&kept, "Test", &personas, &only(&["chef"]), account);
        assert_eq!(
            started.lock().expect("list")[4..],
            [(0, false), (1, false), (1, true)]
        );
        tokio::task::yield_now().await;
        assert!(first[0].is_finished(), "docs's listening task stopped");
        assert!(second[0].is_finished(), "chef's second task stopped when let go");
        assert!(!first[2].is_finished(), "host untouched throughout");

        // A start of a new connection stops every task of the old one.
        let fourth = tasks.spawn_all(&personas, &Held::Every, account);
        tokio::task::yield_now().await;
        assert!(third[0].is_finished() && first[2].is_finished());
        assert!(fourth.iter().all(|t| !t.is_finished()));

        // The process lets the platform go (its tasks stopped where they
        // were started): it listens with nothing.
        for t in &fourth {
            t.abort();
        }
        tokio::task::yield_now().await;
        assert!(!tasks.any_listening());
    }
}

/// The first pause after a failure.
pub const FIRST_RETRY: Duration = Duration::from_millis(500);

/// Capped exponential backoff for one account's connection, which also
/// keeps the account's [`crate::connections`] state: a failure waited out
/// here is the account down, [`Backoff::connected`] the account up.
#[derive(Clone, Debug)]
pub struct Backoff {
    next: Duration,
    max: Duration,
    account: Account,
}

impl Backoff {
    /// Starts at [`FIRST_RETRY`], doubling up to `max`.
    pub fn new(account: Account, max: Duration) -> Backoff {
        Backoff {
            next: FIRST_RETRY.min(max),
            max,
            account,
        }
    }

    /// [`Backoff::new`] for `persona`'s account on `platform`, reporting
    /// to the runtime's connections once the platform has one (platforms
    /// keep their [`RuntimeHandle`] so: set in `start`, before any
    /// account connects).
    pub fn of(
        runtime: &std::sync::Mutex<Option<RuntimeHandle>>,
        platform: &str,
        persona: &str,
        max: Duration,
    ) -> Backoff {
        let account = match runtime.lock().ok().and_then(|r| r.clone()) {
            Some(r) => r.account(platform, persona),
            None => Account::detached(platform, persona),
        };
        Backoff::new(account, max)
    }

    /// [`Backoff::of`] for an account this process listens with
    /// (`listening`); for one it only identifies (another process holds
    /// it, see [`Held`]), reporting to nothing: `/healthz` and the metrics
    /// name only the accounts this process connects.
    pub fn of_held(
        runtime: &std::sync::Mutex<Option<RuntimeHandle>>,
        platform: &str,
        persona: &str,
        max: Duration,
        listening: bool,
    ) -> Backoff {
        if listening {
            Backoff::of(runtime, platform, persona, max)
        } else {
            Backoff::new(Account::detached(platform, persona), max)
        }
    }

    /// Back to the first pause, after a step that worked (the account may
    /// not be connected yet).
    pub fn reset(&mut self) {
        self.next = FIRST_RETRY.min(self.max);
    }

    /// The account is connected: back to the first pause.
    pub fn connected(&mut self) {
        self.reset();
        self.account.connected();
    }

    /// The account's handle on its state.
    pub fn account(&self) -> &Account {
        &self.account
    }

    /// The pause the next [`Backoff::wait`] takes.
    pub fn next(&self) -> Duration {
        self.next
    }

    /// Runs `step` until it succeeds, waiting (and saying why, see
    /// [`Backoff::wait`]) between tries: an account's "who am I" or
    /// login, which nothing can go on without.
    pub async fn until_ok<T, E, F>(&mut self, mut step: impl FnMut() -> F) -> T
    where
        E: std::fmt::Display + Sync,
        F: std::future::Future<Output = Result<T, E>>,
    {
        loop {
            match step().await {
                Ok(done) => return done,
                Err(e) => self.wait(&e).await,
            }
        }
    }

    /// Marks the account down for `why`, logs it at WARN with the pause,
    /// waits, and doubles the next pause (up to the cap).
    pub async fn wait(&mut self, why: &(dyn std::fmt::Display + Sync)) {
        let pause = self.next;
        let why = why.to_string();
        self.account.down(&why);
        let (platform, persona) = (self.account.platform(), self.account.persona());
        tracing::warn!(%persona, "{platform}: {why}; retrying in {pause:?}");
        tokio::time::sleep(pause).await;
        self.next = (self.next * 2).min(self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connections::Connections;

    #[tokio::test(start_paused = true)]
    async fn pauses_double_up_to_the_cap_and_reset_after_success() {
        let connections = Connections::default();
        let mut b = Backoff::new(connections.account("Test", "docs"), Duration::from_secs(3));
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(b.next());
            let before = tokio::time::Instant::now();
            b.wait(&"down").await;
            assert_eq!(before.elapsed(), *seen.last().expect("a pause"));
        }
        assert_eq!(connections.down(), ["Test docs: down"]);
        assert_eq!(
            seen,
            [500, 1000, 2000, 3000, 3000].map(Duration::from_millis),
            "doubling, capped"
        );
        b.connected();
        assert_eq!(b.next(), FIRST_RETRY);
        assert!(connections.down().is_empty());
        assert_eq!(
            Backoff::new(Account::detached("Test", "docs"), Duration::from_millis(100)).next(),
            Duration::from_millis(100)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn until_ok_tries_again_after_each_pause_and_says_why() {
        let connections = Connections::default();
        let mut b = Backoff::new(connections.account("Test", "docs"), Duration::from_secs(60));
        let mut tries = 0;
        let before = tokio::time::Instant::now();
        let got = b
            .until_ok(|| {
                tries += 1;
                let n = tries;
                async move { if n < 3 { Err(format!("refused {n}")) } else { Ok(n) } }
            })
            .await;
        assert_eq!(got, 3);
        assert_eq!(before.elapsed(), Duration::from_millis(500 + 1000), "two pauses");
        assert_eq!(
            connections.down(),
            ["Test docs: refused 2"],
            "the last cause is shown"
        );
    }
}

/// The last few thousand ids a platform handed in, so that a message
/// several personas' accounts receive (one group, several bots) is heard
/// once. Bounded: the oldest id is forgotten first.
#[derive(Debug)]
pub struct HeardOnce<K>(Recent<K, ()>);

impl<K: std::hash::Hash + Eq + Clone> HeardOnce<K> {
    /// Remembers up to `cap` ids.
    pub fn new(cap: usize) -> Self {
        HeardOnce(Recent::new(cap))
    }

    /// Whether `id` is new (and remembers it).
    pub fn first(&mut self, id: K) -> bool {
        if self.contains(&id) {
            return false;
        }
        self.0.insert(id, ());
        true
    }

    /// Whether `id` was heard (and is still remembered).
    pub fn contains(&self, id: &K) -> bool {
        self.0.get(id).is_some()
    }

    /// Forgets `id`, so that it is new again: for a message that could not
    /// be taken after all (the store refused it), whose platform will
    /// deliver it again.
    pub fn forget(&mut self, id: &K) {
        self.0.remove(id);
    }
}

/// The last few thousand entries of a map a platform keeps about recent
/// messages (which channel or thread each of its posts went to). Bounded:
/// the oldest entry is forgotten first, and what is forgotten is only a
/// cache miss.
#[derive(Debug)]
pub struct Recent<K, V> {
    map: std::collections::HashMap<K, V>,
    order: std::collections::VecDeque<K>,
    cap: usize,
}

impl<K: std::hash::Hash + Eq + Clone, V> Recent<K, V> {
    /// Remembers up to `cap` entries.
    pub fn new(cap: usize) -> Self {
        Recent {
            map: std::collections::HashMap::new(),
            order: std::collections::VecDeque::new(),
            cap: cap.max(1),
        }
    }

    /// Sets `key` to `value` (a key set again keeps its place in line).
    pub fn insert(&mut self, key: K, value: V) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
            if self.order.len() > self.cap
                && let Some(old) = self.order.pop_front()
            {
                self.map.remove(&old);
            }
        }
    }

    /// The value of `key`, if still remembered.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// Forgets `key`.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let v = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(v)
    }
}

#[cfg(test)]
mod recent_tests {
    use super::Recent;

    #[test]
    fn entries_are_kept_up_to_the_bound_oldest_first_out() {
        let mut r = Recent::new(2);
        r.insert("a", 1);
        r.insert("b", 2);
        r.insert("a", 3);
        assert_eq!(r.get(&"a"), Some(&3), "updated in place");
        r.insert("c", 4);
        assert_eq!(r.get(&"a"), None, "the oldest went first");
        assert_eq!((r.get(&"b"), r.get(&"c")), (Some(&2), Some(&4)));
        assert_eq!(r.map.len(), 2);
        assert_eq!(r.remove(&"b"), Some(2));
        assert_eq!((r.get(&"b"), r.map.len(), r.order.len()), (None, 1, 1));
        assert_eq!(r.remove(&"b"), None);
    }
}

#[cfg(test)]
mod heard_once_tests {
    use super::HeardOnce;

    #[test]
    fn an_id_is_new_once_and_memory_stays_bounded() {
        let mut h = HeardOnce::new(2);
        assert!(h.first(1));
        assert!(!h.first(1));
        assert!(h.first(2));
        assert!(h.first(3));
        // 1 was forgotten to keep the bound.
        assert!(h.first(1));
        assert_eq!(h.0.map.len(), 2);
        assert!(h.contains(&1));
        h.forget(&1);
        assert!(!h.contains(&1));
        assert!(h.first(1), "new again once forgotten");
        assert_eq!((h.0.map.len(), h.0.order.len()), (2, 2));
    }
}

/// How many of a platform's accounts have said who they are (a bot's own
/// user id and name, learnt at connect). Mentions of a persona's account
/// can only be recognised once it is known, so listening waits a while
/// for all of them, and the start banner waits a little to name them.
#[derive(Debug, Default)]
pub struct Roll {
    /// The accounts known, by index: an account that says who it is again
    /// (its connection started again) is not counted twice.
    known: std::sync::Mutex<std::collections::BTreeSet<usize>>,
    changed: tokio::sync::Notify,
}

impl Roll {
    /// Account `account` is known.
    pub fn add(&self, account: usize) {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(account);
        self.changed.notify_waiters();
    }

    /// How many are known.
    pub fn count(&self) -> usize {
        self.known
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    /// Waits until `all` are known, `within` at most; whether they are.
    pub async fn wait_for(&self, all: usize, within: Duration) -> bool {
        crate::waiting::until(&self.changed, within, || (self.count() >= all).then_some(()))
            .await
            .is_some()
    }
}

#[cfg(test)]
mod roll_tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::Roll;

    #[tokio::test(start_paused = true)]
    async fn waiting_ends_when_all_are_known_or_time_is_up() {
        let roll = Arc::new(Roll::default());
        assert!(
            !roll.wait_for(1, Duration::from_secs(5)).await,
            "nobody known in time"
        );
        let r = roll.clone();
        let waiter = tokio::spawn(async move { r.wait_for(2, Duration::from_secs(60)).await });
        roll.add(0);
        roll.add(0);
        assert_eq!(roll.count(), 1, "an account known again counts once");
        roll.add(1);
        assert!(waiter.await.expect("joins"));
        assert_eq!(roll.count(), 2);
    }
}
