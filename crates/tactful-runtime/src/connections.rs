//! Whether each platform account is connected, in one place every
//! platform reports to and every operator-facing view reads from: the log
//! (WARN with the cause), `/healthz` (degraded, the account named), the
//! metric `tactful_platform_connected{platform,persona}`, and the start
//! banner ("connecting…" until the first success).
//!
//! Without it a bot whose gateway is blocked looks exactly like a healthy
//! one that nobody speaks to.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a start banner waits for its platform's accounts.
pub const BANNER_WAIT: Duration = Duration::from_secs(5);

/// Where one account stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected yet, nothing failed.
    Connecting,
    /// Connected (the platform hears its messages).
    Connected,
    /// Not connected: the last failure, as logged.
    Down(String),
}

type Key = (String, String);

/// Every account's state, by platform and persona. Cheap to clone: the
/// clones share one table.
#[derive(Clone, Debug, Default)]
pub struct Connections {
    table: Arc<Mutex<BTreeMap<Key, LinkState>>>,
}

impl Connections {
    /// The account of `persona` on `platform` (as the log names it:
    /// "Discord"), registered as connecting.
    pub fn account(&self, platform: &str, persona: &str) -> Account {
        let key = (platform.to_owned(), persona.to_owned());
        if let Ok(mut t) = self.table.lock() {
            t.entry(key.clone()).or_insert(LinkState::Connecting);
        }
        Account {
            connections: self.clone(),
            key,
        }
    }

    /// Forgets every account of `platform` (`telegram` or `Telegram`: the
    /// `[platforms]` key or the log's name): their connections stopped
    /// (another process holds them now, or they are being started again
    /// with the accounts this one holds). A stopped task's late report
    /// does not bring its account back: only [`Connections::account`]
    /// registers one.
    pub fn forget(&self, platform: &str) {
        if let Ok(mut t) = self.table.lock() {
            t.retain(|(p, _), _| !p.eq_ignore_ascii_case(platform));
        }
    }

    /// Forgets `persona`'s account of `platform` (named as for
    /// [`Connections::forget`]): its connection stopped here, the
    /// platform's other accounts stay.
    pub fn forget_account(&self, platform: &str, persona: &str) {
        if let Ok(mut t) = self.table.lock() {
            t.retain(|(p, who), _| !(p.eq_ignore_ascii_case(platform) && who == persona));
        }
    }

    /// Every account: platform, persona, state; in that order.
    pub fn all(&self) -> Vec<(String, String, LinkState)> {
        self.table
            .lock()
            .map(|t| {
                t.iter()
                    .map(|((p, q), s)| (p.clone(), q.clone(), s.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The accounts that failed and are not connected, one line each
    /// ("Discord docs: why"), for `/healthz`.
    pub fn down(&self) -> Vec<String> {
        self.all()
            .into_iter()
            .filter_map(|(p, q, s)| match s {
                LinkState::Down(why) => Some(format!("{p} {q}: {why}")),
                _ => None,
            })
            .collect()
    }

    /// Waits up to `wait` until every account of `personas` on `platform`
    /// is connected; each one's state then.
    pub async fn settle(&self, platform: &str, personas: &[&str], wait: Duration) -> Vec<LinkState> {
        let states = || -> Vec<LinkState> {
            personas
                .iter()
                .map(|p| self.state(platform, p).unwrap_or(LinkState::Connecting))
                .collect()
        };
        let deadline = tokio::time::Instant::now() + wait;
        while tokio::time::Instant::now() < deadline && !states().iter().all(|s| *s == LinkState::Connected) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        states()
    }

    /// The state of one account, if registered.
    pub fn state(&self, platform: &str, persona: &str) -> Option<LinkState> {
        self.table
            .lock()
            .ok()
            .and_then(|t| t.get(&(platform.to_owned(), persona.to_owned())).cloned())
    }
}

impl LinkState {
    /// How the start banner shows an account not connected yet:
    /// `None` once connected.
    pub fn banner_note(&self) -> Option<&'static str> {
        match self {
            LinkState::Connected => None,
            LinkState::Connecting => Some("connecting…"),
            LinkState::Down(_) => Some("not connected: see the log"),
        }
    }
}

/// One account's handle on its state.
#[derive(Clone, Debug)]
pub struct Account {
    connections: Connections,
    key: Key,
}

impl Account {
    /// An account reporting to nothing (a platform driven without a
    /// runtime, in tests).
    pub fn detached(platform: &str, persona: &str) -> Account {
        Connections::default().account(platform, persona)
    }

    /// The platform, as the log names it.
    pub fn platform(&self) -> &str {
        &self.key.0
    }

    /// The persona.
    pub fn persona(&self) -> &str {
        &self.key.1
    }

    /// Connected; said at INFO when it was not.
    pub fn connected(&self) {
        if self.set(LinkState::Connected) {
            tracing::info!(persona = %self.key.1, "{}: connected", self.key.0);
        }
    }

    /// Not connected, because of `why` (the caller logs it: a platform
    /// knows best what to tell the user to check).
    pub fn down(&self, why: &str) {
        let why = tactful_core::secrets::redact_clipped(why, 300);
        self.set(LinkState::Down(why));
    }

    /// Sets the state of a registered account; whether it changed.
    fn set(&self, state: LinkState) -> bool {
        let Ok(mut t) = self.connections.table.lock() else {
            return false;
        };
        match t.get_mut(&self.key) {
            Some(now) => std::mem::replace(now, state.clone()) != state,
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accounts_go_from_connecting_to_connected_or_down_and_back() {
        let c = Connections::default();
        let docs = c.account("Discord", "docs");
        let chef = c.account("Discord", "chef");
        assert_eq!(c.state("Discord", "docs"), Some(LinkState::Connecting));
        assert!(c.down().is_empty(), "connecting is not down");
        docs.down("the gateway is unreachable");
        chef.connected();
        assert_eq!(c.down(), ["Discord docs: the gateway is unreachable"]);
        docs.connected();
        assert!(c.down().is_empty());
        assert_eq!(
            c.all().into_iter().map(|(_, p, s)| (p, s)).collect::<Vec<_>>(),
            [
                ("chef".to_owned(), LinkState::Connected),
                ("docs".to_owned(), LinkState::Connected)
            ]
        );
        // Registering again keeps the state.
        c.account("Discord", "docs");
        assert_eq!(c.state("Discord", "docs"), Some(LinkState::Connected));

        // Another process holds the platform's accounts now: gone from
        // every view, and a stopped task's late report does not bring one
        // back.
        let other = c.account("Slack", "docs");
        c.forget("discord");
        docs.down("a late report of a stopped task");
        assert_eq!(c.state("Discord", "docs"), None);
        assert!(c.down().is_empty());
        other.connected();
        assert_eq!(
            c.state("Slack", "docs"),
            Some(LinkState::Connected),
            "other platforms kept"
        );

        // One account of a platform moves to another process: the
        // platform's others stay.
        let chef = c.account("Slack", "chef");
        chef.connected();
        c.forget_account("slack", "docs");
        other.down("a late report of a stopped task");
        assert_eq!(c.state("Slack", "docs"), None);
        assert_eq!(c.state("Slack", "chef"), Some(LinkState::Connected));
    }
}
