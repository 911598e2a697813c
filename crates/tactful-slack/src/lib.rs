//! Slack for tactful: every persona is a Slack app of its own, all in one
//! process, each with a Socket Mode connection (opened with its app-level
//! token through `apps.connections.open`, so no public URL is needed) and
//! Web API calls under its bot token, on `slack-morphism`.
//!
//! - Every envelope is acknowledged after the message it carries is
//!   stored (within 2.5 s of its arrival, inside Slack's 3 s): an envelope
//!   tactful could not take is not acknowledged, and Slack delivers it
//!   again. A message Slack delivers twice (a late ack, a retry, two
//!   personas' apps in one channel, a `message` and an `app_mention`
//!   event) is heard once, and a copy of one still being stored is
//!   acknowledged only once it is (`listen`).
//! - A `disconnect` envelope, a dropped socket or missed pongs open a new
//!   socket (slack-morphism does it); what Slack sent meanwhile is
//!   redelivered because it was not acknowledged.
//! - A persona's bot learns its own user id with `auth.test` before
//!   listening, so its mentions and its own messages are recognised; its
//!   app-level token is tried once, so a wrong one is said plainly.
//! - People's display names (and whether they are bots, which an
//!   `app_mention` does not say) come from `users.info`: cached, bounded,
//!   waited for 0.6 s at most, slower answers filling the cache for next
//!   time; a lookup that fails leaves the user id.
//! - Threads: `thread_ts` is tactful's thread. A reply in a thread is
//!   tactful's reply to the last persona message in it (else its parent),
//!   so a reply in a persona's thread addresses that persona, after a
//!   restart too ([`threads`], saved in the store). Answers go into the
//!   thread, every part of a long one, and never escape to the channel.
//! - Out (`send`): `chat.postMessage` (in the thread, or starting one
//!   under the message answered; in line in a DM), streaming by
//!   `chat.update`, silence by `chat.delete`, the agent's Markdown as
//!   mrkdwn with `&`, `<`, `>` escaped so no output can ping `<!channel>`
//!   ([`mrkdwn`]), a 429 waited out for its `Retry-After`.
//!
//! Rooms are `slack:<channel id>`; people are `slack:<team>:<user>`, with
//! their bare user id as handle; message ids are `ts` values.

mod allowance;
pub mod config;
pub mod inbound;
mod listen;
pub mod mrkdwn;
mod own;
mod send;
pub mod threads;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper_rustls::HttpsConnectorBuilder;
use slack_morphism::prelude::*;
use tactful_runtime::account::{HeardOnce, Recent};
use tactful_runtime::{Connected, Held, Roster, RuntimeHandle};

use crate::allowance::WaitAllowance;
use crate::threads::Threads;

/// The HTTP client every app's calls go through.
type Client = SlackClient<SlackClientHyperHttpsConnector>;

/// How many recent messages are remembered, to hear a message once.
const REMEMBERED_MESSAGES: usize = 4096;

/// How many people are remembered.
const REMEMBERED_PEOPLE: usize = 10_000;

/// One persona's Slack app.
#[derive(Clone)]
pub struct SlackPersona {
    /// The persona.
    pub id: tactful_core::PersonaId,
    /// The bot token (`xoxb-…`), for the Web API.
    pub bot_token: String,
    /// The app-level token (`xapp-…`), for Socket Mode.
    pub app_token: String,
}

/// `[platforms.slack]` and the personas' apps.
#[derive(Clone)]
pub struct SlackSettings {
    /// The Web API's base (`https://slack.com/api`; calls go to
    /// `<base>/<method>`).
    pub api_url: String,
    /// Whether `<!channel>`/`<!here>`/`<!everyone>` in a person's message
    /// address every persona.
    pub everyone_addresses: bool,
    /// The personas on Slack.
    pub personas: Vec<SlackPersona>,
    /// The longest wait between attempts to identify a bot.
    pub max_backoff: Duration,
}

impl std::fmt::Debug for SlackSettings {
    // Tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackSettings")
            .field("api_url", &self.api_url)
            .field(
                "personas",
                &self.personas.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// The Slack platform: a [`tactful_runtime::Platform`] for the runtime and
/// the Socket Mode listeners.
#[derive(Clone)]
pub struct SlackPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for SlackPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlackPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

/// What `auth.test` says of a bot.
#[derive(Clone, Debug)]
struct Identity {
    user: String,
    bot_id: Option<String>,
    name: String,
}

/// What `users.info` says of someone.
#[derive(Clone, Debug)]
struct Person {
    name: String,
    is_bot: bool,
}

/// A message being stored, and what came of it (`Some(true)`: stored).
type Pending = tokio::sync::watch::Receiver<Option<bool>>;

struct Shared {
    settings: SlackSettings,
    client: Arc<Client>,
    /// Each persona's bot token, for its Web API sessions.
    tokens: Vec<SlackApiToken>,
    /// Each bot's identity, once known, in settings order.
    bots: RwLock<Vec<Option<Identity>>>,
    /// The apps' accounts: the runtime, each one's task (and whether it
    /// listens), who said who it is.
    roster: Roster,
    /// Messages handed in, by channel and `ts`.
    seen: Mutex<HeardOnce<(String, String)>>,
    /// Messages being stored: another copy waits for the outcome before
    /// its envelope is acknowledged.
    pending: Mutex<HashMap<(String, String), Pending>>,
    /// People by user id.
    people: Mutex<Recent<String, Person>>,
    /// Each app's allowance for waiting on `users.info` ([`allowance`]).
    name_waits: Vec<Mutex<WaitAllowance>>,
    /// Where messages are, thread-wise (saved in the store).
    threads: Mutex<Threads>,
    /// Each listening app's Socket Mode listener, by account, for a
    /// graceful close (at most one per app: a task started again replaces
    /// its entry).
    listeners: Mutex<HashMap<usize, Arc<SlackClientSocketModeListener<SlackClientHyperHttpsConnector>>>>,
}

impl SlackPlatform {
    /// A Slack platform; nothing connects before [`Connected::start`].
    /// `saved`: the platforms' state the store kept (the thread state
    /// each app's listener saved, [`threads::state_key`]).
    pub fn new(
        settings: SlackSettings,
        saved: &std::collections::BTreeMap<String, String>,
    ) -> Result<SlackPlatform, String> {
        // Several TLS providers are in the build; name the one to use.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        // slack-morphism's own connector is HTTPS only; this one also
        // speaks plain HTTP, for a local double or proxy at `api_url`.
        let https = HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .build();
        let connector =
            SlackClientHyperConnector::with_connector(https).with_slack_api_url(&settings.api_url);
        let bots = vec![None; settings.personas.len()];
        let tokens = settings
            .personas
            .iter()
            .map(|p| SlackApiToken::new(p.bot_token.clone().into()))
            .collect();
        let name_waits = settings
            .personas
            .iter()
            .map(|_| {
                let now = tokio::time::Instant::now();
                Mutex::new(WaitAllowance::new(
                    listen::NAMES_WITHIN,
                    listen::NAMES_REFILL,
                    now,
                ))
            })
            .collect();
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("Slack", personas, settings.max_backoff);
        Ok(SlackPlatform {
            shared: Arc::new(Shared {
                settings,
                client: Arc::new(SlackClient::new(connector)),
                tokens,
                bots: RwLock::new(bots),
                roster,
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                pending: Mutex::new(HashMap::new()),
                people: Mutex::new(Recent::new(REMEMBERED_PEOPLE)),
                name_waits,
                threads: Mutex::new(Threads::restore_all(saved)),
                listeners: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl Shared {
    /// Changes the thread state with `change`, and saves it when that says
    /// it changed what is saved. Saved under the lock, so two rooms' saves
    /// reach the store in the order of their changes.
    fn update_threads(&self, change: impl FnOnce(&mut Threads) -> bool) {
        let handle = self.roster.runtime();
        if let Ok(mut threads) = self.threads.lock()
            && change(&mut threads)
            && let Some(handle) = handle
            && let Some(app) = self
                .roster
                .first_listening()
                .and_then(|i| self.settings.personas.get(i))
        {
            // Saved by the processes listening with an app only: they
            // follow every persona's posts from the events, wherever they
            // were posted from; a process that only posts knows its own,
            // and saving them would overwrite what a listener saved. Under
            // the key of its first app listening: a process listening with
            // other apps saves under theirs ([`threads::state_key`]).
            // Not `save_state`: this covers no incoming message, so it may
            // be saved even after one was refused.
            let key = threads::state_key(app.id.as_str());
            handle.save_note(key, threads.to_saved());
        }
    }
}

impl Connected for SlackPlatform {
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared.roster.start(runtime, held, |i, listening| {
            Box::pin(shared.clone().keep_connected(i, listening))
        })
    }

    fn change_held(
        &self,
        held: &Held,
        saved: &std::collections::BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        // What the last listener with an app taken over saw of the
        // threads joins what this process knows.
        if let Ok(mut threads) = shared.threads.lock() {
            threads.merge_all(saved);
        }
        Some(shared.roster.change(held, |i, listening| {
            Box::pin(shared.clone().keep_connected(i, listening))
        }))
    }

    fn probe(&self) -> BoxFuture<'_, Vec<tactful_runtime::Probe>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for i in 0..self.shared.settings.personas.len() {
                out.extend(self.shared.probe(i).await);
            }
            out
        })
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            self.shared.roster.all_identified(Duration::from_secs(5)).await;
            let bots = self.shared.bots.read().map(|b| b.clone()).unwrap_or_default();
            let names: Vec<String> = self
                .shared
                .settings
                .personas
                .iter()
                .zip(bots)
                .map(|(p, id)| match id {
                    Some(id) => format!("{} ({})", id.name, p.id),
                    None => format!("{} (not connected yet)", p.id),
                })
                .collect();
            format!("on Slack as {}", names.join(", "))
        })
    }
}
