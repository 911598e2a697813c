//! Slack for tactful: every persona is a Slack app of its own, all in one
//! process, each with a Socket Mode connection (opened with its app-level
//! token through `apps.connections.open`, so no public URL is needed) and
//! Web API calls under its bot token, on `slack-morphism`.
//!
//! - Every envelope is acknowledged after the message it carries is
//!   stored (well within Slack's 3 s): an envelope tactful could not take
//!   is not acknowledged, and Slack delivers it again. A message Slack
//!   delivers twice (a late ack, a retry, two personas' apps in one
//!   channel, a `message` and an `app_mention` event) is heard once.
//! - A `disconnect` envelope, a dropped socket or missed pongs open a new
//!   socket (slack-morphism does it); what Slack sent meanwhile is
//!   redelivered because it was not acknowledged.
//! - A persona's bot learns its own user id with `auth.test` before
//!   listening, so its mentions and its own messages are recognised.
//! - People's display names are looked up with `users.info` (cached,
//!   bounded, under a deadline so the ack is never late); a lookup that
//!   fails leaves the user id.
//! - Threads: `thread_ts` is tactful's thread. A reply in a thread is
//!   tactful's reply to the last persona message in it (else its parent),
//!   so a reply in a persona's thread addresses that persona; answers go
//!   into the thread and never escape to the channel root.
//! - Out: `chat.postMessage` (in the thread, or starting one under the
//!   message replied to), streaming by `chat.update`, silence by
//!   `chat.delete`, the agent's Markdown as mrkdwn with `&`, `<`, `>`
//!   escaped so no output can ping `<!channel>`, a 429 waited out for its
//!   `Retry-After`.
//!
//! Rooms are `slack:<channel id>`; people are `slack:<team>:<user>`;
//! message ids are `ts` values.

pub mod config;
pub mod inbound;
pub mod mrkdwn;
mod send;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use hyper_rustls::HttpsConnectorBuilder;
use slack_morphism::prelude::*;
use tactful_runtime::account::{Backoff, HeardOnce, Recent, Roll};
use tactful_runtime::{Connected, RuntimeHandle};

use crate::inbound::{KnownBot, Raw, Seen, to_message};

/// The HTTP client every app's calls go through.
type Client = SlackClient<SlackClientHyperHttpsConnector>;

/// How many recent messages are remembered: to hear a message once, and
/// which thread each is in.
const REMEMBERED_MESSAGES: usize = 4096;

/// How many people's names are remembered.
const REMEMBERED_NAMES: usize = 10_000;

/// How long a bot waits for the others to say who they are.
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);

/// How long a message may take to be stored before its envelope goes
/// unacknowledged (Slack waits 3 s, then delivers it again).
const SAVE_WITHIN: Duration = Duration::from_millis(2000);

/// How long the names of a message's people may take to look up.
const NAMES_WITHIN: Duration = Duration::from_millis(600);

/// At most this many names are looked up for one message.
const NAMES_PER_MESSAGE: usize = 8;

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

struct Shared {
    settings: SlackSettings,
    client: Arc<Client>,
    /// Each persona's bot token, for its Web API sessions.
    tokens: Vec<SlackApiToken>,
    /// Each bot's identity, once known, in settings order.
    bots: RwLock<Vec<Option<Identity>>>,
    identified: Roll,
    /// Messages handed in, by channel and `ts`.
    seen: Mutex<HeardOnce<(String, String)>>,
    /// People's display names by user id.
    names: Mutex<Recent<String, String>>,
    /// The last message a persona posted in each thread (by channel and
    /// the thread's `ts`).
    last_in_thread: Mutex<Recent<(String, String), String>>,
    /// The thread each recent threaded message is in (by channel and `ts`).
    thread_of: Mutex<Recent<(String, String), String>>,
    listeners: Mutex<Vec<Arc<SlackClientSocketModeListener<SlackClientHyperHttpsConnector>>>>,
    runtime: Mutex<Option<RuntimeHandle>>,
}

/// Why a bot could not connect; retried with backoff.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("auth.test refused the bot token (is it the Bot User OAuth Token of an installed app?): {0}")]
    Identify(String),
    #[error(
        "apps.connections.open refused the app-level token (it needs the connections:write scope, and Socket Mode on in the app's settings): {0}"
    )]
    AppToken(String),
}

/// Why an envelope is left unacknowledged (Slack delivers it again).
#[derive(Debug, thiserror::Error)]
enum NotTaken {
    #[error("the message could not be stored ({0}); Slack will deliver it again")]
    Refused(String),
    #[error("the message was not stored within {0:?}; Slack will deliver it again")]
    Late(Duration),
}

/// What a listener's callbacks get: the platform and which persona's app
/// heard the event.
#[derive(Clone)]
struct Listening {
    shared: Arc<Shared>,
    index: usize,
}

impl SlackPlatform {
    /// A Slack platform; nothing connects before [`Connected::start`].
    pub fn new(settings: SlackSettings) -> Result<SlackPlatform, String> {
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
        Ok(SlackPlatform {
            shared: Arc::new(Shared {
                settings,
                client: Arc::new(SlackClient::new(connector)),
                tokens,
                bots: RwLock::new(bots),
                identified: Roll::default(),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                names: Mutex::new(Recent::new(REMEMBERED_NAMES)),
                last_in_thread: Mutex::new(Recent::new(REMEMBERED_MESSAGES)),
                thread_of: Mutex::new(Recent::new(REMEMBERED_MESSAGES)),
                listeners: Mutex::new(Vec::new()),
                runtime: Mutex::new(None),
            }),
        })
    }
}

/// Socket Mode's push events: every `events_api` envelope. The envelope is
/// acknowledged when this returns `Ok`.
async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<Client>,
    state: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let listening = state.read().await.get_user_state::<Listening>().cloned();
    match listening {
        Some(l) => l.shared.heard(l.index, event).await.map_err(|e| e.into()),
        None => Ok(()),
    }
}

/// Every error of the listener: a frame that does not parse (acknowledged
/// by slack-morphism, since it never parses better) or a message tactful
/// could not take (not acknowledged, so Slack delivers it again).
fn on_error(
    err: Box<dyn std::error::Error + Send + Sync>,
    _: Arc<Client>,
    _: SlackClientEventsUserState,
) -> HttpStatusCode {
    // Clipped: the error quotes the whole frame.
    tracing::warn!("Slack: {}", send::one_line(&err.to_string()));
    HttpStatusCode::SERVICE_UNAVAILABLE
}

/// Shuts a listener's sockets down when its task ends (the service
/// stopping aborts it).
struct ShutdownOnDrop(Arc<SlackClientSocketModeListener<SlackClientHyperHttpsConnector>>);

impl Drop for ShutdownOnDrop {
    fn drop(&mut self) {
        let listener = self.0.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move { listener.shutdown().await });
        }
    }
}

impl Shared {
    async fn keep_connected(self: Arc<Self>, i: usize) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = Backoff::new(self.settings.max_backoff);
        loop {
            match self.identify(i).await {
                Ok(()) => break,
                Err(e) => backoff.wait("Slack", persona.id.as_str(), &e).await,
            }
        }
        loop {
            match self.check_app_token(i).await {
                Ok(()) => break,
                Err(e) => backoff.wait("Slack", persona.id.as_str(), &e).await,
            }
        }
        self.wait_for_the_others().await;
        let env = SlackClientEventsListenerEnvironment::new(self.client.clone())
            .with_error_handler(on_error)
            .with_user_state(Listening {
                shared: self.clone(),
                index: i,
            });
        let callbacks = SlackSocketModeListenerCallbacks::new()
            // slack-morphism does not export the hello event's type; its
            // own hello callback logs at debug.
            .with_push_events(on_push);
        // One socket per app, so envelopes are taken in order; a lost
        // socket is opened again at once, then every 5 s while Slack
        // refuses.
        let config = SlackClientSocketModeConfig::new()
            .with_max_connections_count(1)
            .with_initial_backoff_in_seconds(0)
            .with_reconnect_timeout_in_seconds(5);
        let listener = Arc::new(SlackClientSocketModeListener::new(
            &config,
            Arc::new(env),
            callbacks,
        ));
        let app_token = SlackApiToken::new(persona.app_token.clone().into());
        if let Err(e) = listener.listen_for(&app_token).await {
            tracing::error!(persona = %persona.id, "Slack: cannot listen: {}", send::one_line(&e.to_string()));
            return;
        }
        tracing::info!(persona = %persona.id, "Slack: opening Socket Mode");
        listener.start().await;
        if let Ok(mut l) = self.listeners.lock() {
            l.push(listener.clone());
        }
        let _stop = ShutdownOnDrop(listener);
        std::future::pending::<()>().await;
    }

    /// Learns the bot's user id (mentions name it) with `auth.test`.
    async fn identify(&self, i: usize) -> Result<(), ConnectError> {
        let persona = &self.settings.personas[i];
        let me = send::with_retry(|| async { self.session(i).auth_test().await })
            .await
            .map_err(|e| ConnectError::Identify(e.0))?;
        let name = me.user.clone().unwrap_or_else(|| me.user_id.to_string());
        tracing::info!(persona = %persona.id, bot = %name, team = %me.team_id, "Slack: bot identified");
        if let Ok(mut bots) = self.bots.write() {
            bots[i] = Some(Identity {
                user: me.user_id.to_string(),
                bot_id: me.bot_id.map(|b| b.to_string()),
                name,
            });
        }
        self.identified.add();
        Ok(())
    }

    /// Checks the app-level token: the listener only logs a refusal and
    /// retries; asked once here, a wrong one is said plainly.
    async fn check_app_token(&self, i: usize) -> Result<(), ConnectError> {
        let app_token = SlackApiToken::new(self.settings.personas[i].app_token.clone().into());
        send::with_retry(|| async {
            self.client
                .open_session(&app_token)
                .apps_connections_open(&SlackApiAppsConnectionOpenRequest::new())
                .await
        })
        .await
        .map(|_| ())
        .map_err(|e| ConnectError::AppToken(e.0))
    }

    async fn wait_for_the_others(&self) {
        let all = self.settings.personas.len();
        if !self.identified.wait_for(all, IDENTIFY_WAIT).await {
            tracing::warn!(
                "Slack: not every bot could say who it is; mentions of the missing ones are not recognised yet"
            );
        }
    }

    /// A Web API session under persona `i`'s bot token.
    fn session(&self, i: usize) -> SlackClientSession<'_, SlackClientHyperHttpsConnector> {
        self.client.open_session(&self.tokens[i])
    }

    fn known_bots(&self) -> Vec<KnownBot> {
        let bots = self.bots.read().map(|b| b.clone()).unwrap_or_default();
        self.settings
            .personas
            .iter()
            .zip(bots)
            .map(|(p, id)| KnownBot {
                persona: p.id.clone(),
                user: id.as_ref().map(|i| i.user.clone()),
                bot_id: id.and_then(|i| i.bot_id),
            })
            .collect()
    }

    /// The display names of the people `raw` is from or mentions, looked
    /// up (with persona `i`'s token) where not remembered, all within
    /// [`NAMES_WITHIN`].
    async fn names_for(&self, i: usize, raw: &Raw, bots: &[KnownBot]) -> HashMap<String, String> {
        let mut wanted: Vec<String> = raw.user.iter().cloned().collect();
        wanted.extend(inbound::mentioned_users(&raw.text));
        wanted.retain(|u| !bots.iter().any(|b| b.user.as_deref() == Some(u)));
        wanted.truncate(NAMES_PER_MESSAGE);
        let mut names = HashMap::new();
        let mut missing = Vec::new();
        if let Ok(cache) = self.names.lock() {
            for u in wanted {
                match cache.get(&u) {
                    Some(n) => {
                        names.insert(u, n.clone());
                    }
                    None => missing.push(u),
                }
            }
        }
        let lookups = missing.into_iter().map(|u| async move {
            let req = SlackApiUsersInfoRequest::new(u.clone().into());
            let found = self.session(i).users_info(&req).await;
            (u, found)
        });
        let Ok(found) = tokio::time::timeout(NAMES_WITHIN, futures::future::join_all(lookups)).await else {
            tracing::debug!("Slack: users.info was too slow; names stay ids for now");
            return names;
        };
        for (u, res) in found {
            match res {
                Ok(r) => {
                    let name = display_name(&r.user);
                    if let Ok(mut cache) = self.names.lock() {
                        cache.insert(u.clone(), name.clone());
                    }
                    names.insert(u, name);
                }
                Err(e) => {
                    tracing::debug!(user = %u, "Slack: users.info failed: {}", send::one_line(&e.to_string()))
                }
            }
        }
        names
    }

    /// One push event, heard by persona `i`'s app: handed in, once, and
    /// stored before it is acknowledged.
    async fn heard(&self, i: usize, ev: SlackPushEventCallback) -> Result<(), NotTaken> {
        let raw = match &ev.event {
            SlackEventCallbackBody::Message(m) => match inbound::from_message(m) {
                Some(raw) => raw,
                None => return Ok(()),
            },
            SlackEventCallbackBody::AppMention(m) => inbound::from_app_mention(m),
            _ => return Ok(()),
        };
        let key = raw.key();
        if !self.seen.lock().is_ok_and(|mut s| s.first(key.clone())) {
            return Ok(());
        }
        if let Some(t) = raw.thread()
            && let Ok(mut threads) = self.thread_of.lock()
        {
            threads.insert(key.clone(), t.to_owned());
        }
        let bots = self.known_bots();
        let names = self.names_for(i, &raw, &bots).await;
        let reply_to = raw.thread().map(|t| {
            self.last_in_thread
                .lock()
                .ok()
                .and_then(|l| l.get(&(raw.channel.clone(), t.to_owned())).cloned())
                .unwrap_or_else(|| t.to_owned())
        });
        let team = ev.team_id.to_string();
        let seen = Seen {
            receiver: &self.settings.personas[i].id,
            team: &team,
            bots: &bots,
            names: &names,
            thread_reply_to: reply_to.as_deref(),
            everyone_addresses: self.settings.everyone_addresses,
        };
        let Some(msg) = to_message(&raw, seen) else {
            return Ok(());
        };
        let handle = self.runtime.lock().ok().and_then(|r| r.clone());
        let Some(handle) = handle else {
            return Ok(());
        };
        let outcome = match tokio::time::timeout(SAVE_WITHIN, handle.inbound_saved(msg, Vec::new())).await {
            Ok(Ok(())) => return Ok(()),
            Ok(Err(e)) => NotTaken::Refused(e.to_string()),
            Err(_) => NotTaken::Late(SAVE_WITHIN),
        };
        // Heard again when Slack delivers it again (the engine drops it
        // then if it was stored after all).
        if let Ok(mut s) = self.seen.lock() {
            s.forget(&key);
        }
        Err(outcome)
    }

    /// Remembers where persona messages went: the last one in a thread is
    /// what a reply there answers.
    fn posted(&self, channel: &str, ts: &str, thread: Option<&str>) {
        let Some(thread) = thread else {
            return;
        };
        if let Ok(mut l) = self.last_in_thread.lock() {
            l.insert((channel.to_owned(), thread.to_owned()), ts.to_owned());
        }
        if let Ok(mut t) = self.thread_of.lock() {
            t.insert((channel.to_owned(), ts.to_owned()), thread.to_owned());
        }
    }

    /// The thread a message is in: its parent's `ts`, or its own for a
    /// message that is not in a thread (or not remembered).
    fn root_of(&self, channel: &str, ts: &str) -> String {
        self.thread_of
            .lock()
            .ok()
            .and_then(|t| t.get(&(channel.to_owned(), ts.to_owned())).cloned())
            .unwrap_or_else(|| ts.to_owned())
    }
}

/// How a person is shown: their display name, else their full name, else
/// their user name.
fn display_name(u: &SlackUser) -> String {
    let profile = u.profile.as_ref();
    [
        profile.and_then(|p| p.display_name.clone()),
        profile.and_then(|p| p.real_name.clone()),
        u.real_name.clone(),
        u.name.clone(),
    ]
    .into_iter()
    .flatten()
    .find(|n| !n.trim().is_empty())
    .unwrap_or_else(|| u.id.to_string())
}

impl Connected for SlackPlatform {
    fn start(&self, runtime: RuntimeHandle) -> Vec<tokio::task::JoinHandle<()>> {
        if let Ok(mut r) = self.shared.runtime.lock() {
            *r = Some(runtime);
        }
        (0..self.shared.settings.personas.len())
            .map(|i| {
                let shared = self.shared.clone();
                tokio::spawn(async move { shared.keep_connected(i).await })
            })
            .collect()
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let all = self.shared.settings.personas.len();
            self.shared.identified.wait_for(all, Duration::from_secs(5)).await;
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
