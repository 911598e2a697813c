//! Telegram for tactful: every persona is a bot of its own, all in one
//! process, each long-polling the Bot API (`getUpdates`) with
//! `teloxide-core`'s typed requests.
//!
//! - What a poll brings is handed to the runtime in order, and only then
//!   is the bot's update offset saved behind it
//!   ([`RuntimeHandle::save_state`]): after a restart the next poll starts
//!   right after the last update the store holds, so nothing is answered
//!   twice and nothing is missed (Telegram keeps updates for 24 hours).
//! - A bot's very first poll (no saved offset) may bring up to a day of
//!   old updates: what was written before the service started is recorded
//!   as context, never answered.
//! - Telegram does not show a bot the messages of other bots, so the
//!   personas never hear each other through Telegram: they hear each
//!   other inside the engine, which records every reply as it is sent. A
//!   group message several bots receive is handed in once.
//! - Edited messages are not new messages: the bots subscribe to new
//!   messages only, so edits never arrive (and are not in the transcript).
//! - Out: replies are real replies (`reply_parameters`, sent even if the
//!   target is gone), stay in their forum topic, stream by editing the
//!   placeholder, are rendered from Markdown to Telegram HTML (plain text
//!   when Telegram cannot parse it), and "typing…" shows while a turn
//!   runs. A 429 is waited out as `retry_after` says; a refused
//!   connection is retried.
//!
//! Rooms are `tg:<chat id>` (a DM: `tg:<chat id>:<bot id>`); people are
//! `tg:<user id>`, with their `@username` as a handle `allowed_users` may
//! name; message ids are Telegram's.

pub mod config;
pub mod html;
pub mod inbound;
mod send;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{PersonaId, RoomId};
use tactful_runtime::account::{AccountTasks, Backoff, HeardOnce, Roll};
use tactful_runtime::{Connected, Held, Probe, RuntimeHandle};
use teloxide_core::Bot;
use teloxide_core::payloads::GetUpdatesSetters as _;
use teloxide_core::requests::{Request as _, Requester as _};
use teloxide_core::types::{AllowedUpdate, UpdateKind};

use crate::inbound::{KnownBot, Receiver, to_message};

/// How many recent messages are remembered to hear a shared group once.
const REMEMBERED_MESSAGES: usize = 4096;

/// The least time between two polls that brought nothing: a server that
/// answers at once instead of holding the poll (a proxy, an emulator) is
/// not hammered.
const EMPTY_POLL_PAUSE: Duration = Duration::from_millis(500);

/// How long a bot waits for the others to say who they are before it
/// starts listening (mentions of a bot not yet known are not recognised).
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);

/// One persona's bot.
#[derive(Clone)]
pub struct TelegramPersona {
    /// The persona.
    pub id: PersonaId,
    /// The bot token BotFather gave (`123456789:AAE...`).
    pub token: String,
    /// The bot's user id: the number before the token's colon.
    pub bot_id: u64,
}

/// `[platforms.telegram]` and the personas' bots.
#[derive(Clone)]
pub struct TelegramSettings {
    /// The Bot API's base URL (`https://api.telegram.org`, or a
    /// self-hosted `telegram-bot-api`, or a test double).
    pub api_url: String,
    /// The personas on Telegram.
    pub personas: Vec<TelegramPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// How long one `getUpdates` waits for news.
    pub poll_timeout: Duration,
}

impl std::fmt::Debug for TelegramSettings {
    // Tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("api_url", &self.api_url)
            .field(
                "personas",
                &self
                    .personas
                    .iter()
                    .map(|p| (p.id.as_str(), p.bot_id))
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// The store key of a bot's update offset.
pub fn state_key(bot_id: u64) -> String {
    format!("telegram:offset:{bot_id}")
}

/// The offset `saved` holds for bot `bot_id`, if any.
fn saved_offset(saved: &BTreeMap<String, String>, bot_id: u64) -> Option<i32> {
    saved.get(&state_key(bot_id))?.parse().ok()
}

/// The store key of when tactful first polled a bot (Unix seconds): what
/// a first poll takes as history is what is older than this, however often
/// the poller started since (a restart before any update came, another
/// process taking the bot over, a reconnect), not older than the poller's
/// own start; else a question asked meanwhile was dropped as history.
pub fn since_key(bot_id: u64) -> String {
    format!("telegram:since:{bot_id}")
}

/// The Telegram platform: a [`tactful_runtime::Platform`] for the runtime
/// and the polling loops.
#[derive(Clone)]
pub struct TelegramPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TelegramPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

struct Shared {
    settings: TelegramSettings,
    /// One client per persona, in settings order.
    bots: Vec<Bot>,
    /// What each bot is called, once `getMe` answered.
    known: RwLock<Vec<KnownBot>>,
    identified: Roll,
    /// Each bot's polling task, and whether it polls.
    tasks: AccountTasks,
    /// Saved offsets by bot id, taken by each loop at start.
    saved: Mutex<HashMap<u64, i32>>,
    /// When each bot was first polled, by bot id, as saved ([`since_key`]).
    since: Mutex<HashMap<u64, i64>>,
    /// Recently heard (room, message id), so a group message several bots
    /// receive is handed in once.
    seen: Mutex<HeardOnce<(RoomId, i32)>>,
    runtime: Mutex<Option<RuntimeHandle>>,
    /// Unix seconds at start: older updates of a first poll are history,
    /// unless a bot was first polled earlier ([`since_key`]).
    started: i64,
}

/// Why a bot could not poll; retried with backoff.
#[derive(Debug, thiserror::Error)]
enum PollError {
    #[error("getMe failed: {0}")]
    Identify(String),
    #[error("the token belongs to bot {found}, not {want}")]
    WrongBot { want: u64, found: u64 },
    #[error("getUpdates failed: {0}")]
    Poll(String),
    #[error("updates not confirmed, as they could not be saved: {0}")]
    NotSaved(String),
}

impl TelegramPlatform {
    /// A Telegram platform; nothing connects before [`Connected::start`].
    /// `saved` is the platform state the store holds (offsets under
    /// [`state_key`]). Fails only on an `api_url` that is not a URL, which
    /// config loading already refuses.
    pub fn new(
        settings: TelegramSettings,
        saved: &BTreeMap<String, String>,
    ) -> Result<TelegramPlatform, String> {
        let url = url::Url::parse(&settings.api_url).map_err(|e| format!("{}: {e}", settings.api_url))?;
        // The client waits longer than a long poll, or every quiet poll
        // would end as a timeout error.
        let client = teloxide_core::net::default_reqwest_settings()
            .timeout(settings.poll_timeout + Duration::from_secs(15))
            .build()
            .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
        let bots = settings
            .personas
            .iter()
            .map(|p| Bot::with_client(p.token.clone(), client.clone()).set_api_url(url.clone()))
            .collect();
        let known = settings
            .personas
            .iter()
            .map(|p| KnownBot {
                persona: p.id.clone(),
                bot_id: p.bot_id,
                username: None,
            })
            .collect();
        let offsets = settings
            .personas
            .iter()
            .filter_map(|p| Some((p.bot_id, saved_offset(saved, p.bot_id)?)))
            .collect();
        let since = settings
            .personas
            .iter()
            .filter_map(|p| Some((p.bot_id, saved.get(&since_key(p.bot_id))?.parse().ok()?)))
            .collect();
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        Ok(TelegramPlatform {
            shared: Arc::new(Shared {
                settings,
                bots,
                known: RwLock::new(known),
                identified: Roll::default(),
                tasks: AccountTasks::default(),
                saved: Mutex::new(offsets),
                since: Mutex::new(since),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                runtime: Mutex::new(None),
                started,
            }),
        })
    }
}

impl Shared {
    fn known(&self) -> Vec<KnownBot> {
        self.known.read().map(|k| k.clone()).unwrap_or_default()
    }

    /// Identifies persona `i`'s bot, then, if this process holds it
    /// (`listening`), polls until the service stops.
    async fn keep_polling(self: Arc<Self>, i: usize, listening: bool) {
        let persona = self.settings.personas[i].clone();
        let bot = self.bots[i].clone();
        let mut backoff = Backoff::of_held(
            &self.runtime,
            "Telegram",
            persona.id.as_str(),
            self.settings.max_backoff,
            listening,
        );
        loop {
            match self.identify(i, &persona, &bot).await {
                Ok(()) => break,
                Err(e) => backoff.wait(&e).await,
            }
        }
        if !listening {
            return;
        }
        self.wait_for_the_others().await;
        let mut offset = self.saved.lock().ok().and_then(|mut s| s.remove(&persona.bot_id));
        // Without a saved offset, Telegram may hold a day of updates, more
        // than one poll brings: all of them dated before the bot was first
        // polled are history, whichever poll brings them.
        let history_before = match offset {
            Some(_) => None,
            None => Some(self.first_polled(&persona).await),
        };
        backoff.reset();
        tracing::info!(persona = %persona.id, "Telegram: listening");
        loop {
            let asked = tokio::time::Instant::now();
            match self.poll(&persona, &bot, offset, history_before).await {
                Ok(Some(next)) => {
                    offset = Some(next);
                    backoff.connected();
                }
                Ok(None) => {
                    backoff.connected();
                    tokio::time::sleep_until(asked + EMPTY_POLL_PAUSE).await;
                }
                Err(e) => backoff.wait(&e).await,
            }
        }
    }

    /// `getMe`: learns the bot's username (mentions name it); `i` is its
    /// place among the personas.
    async fn identify(&self, i: usize, persona: &TelegramPersona, bot: &Bot) -> Result<(), PollError> {
        let me = bot
            .get_me()
            .send()
            .await
            .map_err(|e| PollError::Identify(send::describe(&e)))?;
        if me.user.id.0 != persona.bot_id {
            return Err(PollError::WrongBot {
                want: persona.bot_id,
                found: me.user.id.0,
            });
        }
        let username = me.user.username.clone();
        if username.is_none() {
            tracing::warn!(persona = %persona.id, "Telegram: the bot has no username; people cannot @mention it");
        }
        if let Ok(mut known) = self.known.write()
            && let Some(k) = known.iter_mut().find(|k| k.bot_id == persona.bot_id)
        {
            k.username = username.clone();
        }
        self.identified.add(i);
        tracing::info!(persona = %persona.id, username = ?username, "Telegram: bot identified");
        Ok(())
    }

    /// Waits (a while) until every bot is known, so a mention of any of
    /// them is recognised from the first message on.
    async fn wait_for_the_others(&self) {
        let all = self.settings.personas.len();
        if !self.identified.wait_for(all, IDENTIFY_WAIT).await {
            tracing::warn!(
                "Telegram: not every bot could say who it is; mentions of the missing ones are not recognised yet"
            );
        }
    }

    /// When `persona`'s bot was first polled: as saved, else this start
    /// (the service's, when processes share the store), saved for the
    /// pollers after this one (a restart,
    /// another process taking it over). Not saved (the store cannot
    /// write): this start, as before there was a marker.
    async fn first_polled(&self, persona: &TelegramPersona) -> i64 {
        let handle = self.runtime.lock().ok().and_then(|r| r.clone());
        // Sharing the store, a platform is built when its lease comes,
        // maybe seconds after the service started: from the start. (Alone,
        // from when it was built: a bot a reload adds starts then.)
        let started = handle
            .as_ref()
            .filter(|h| h.id_block().is_some())
            .map_or(self.started, |h| (h.started().as_millis() / 1000) as i64)
            .min(self.started);
        let known = self
            .since
            .lock()
            .ok()
            .and_then(|s| s.get(&persona.bot_id).copied());
        if let Some(since) = known {
            return since.min(started);
        }
        if let Ok(mut s) = self.since.lock() {
            s.insert(persona.bot_id, started);
        }
        if let Some(handle) = handle
            && let Err(e) = handle
                .save_state_saved(since_key(persona.bot_id), started.to_string())
                .await
        {
            tracing::warn!(persona = %persona.id, "Telegram: when the bot was first polled could not be saved: {e}");
        }
        started
    }

    /// One `getUpdates`: hands its messages in, then saves the offset
    /// behind them. Returns the next offset, if there were updates.
    /// Without a saved offset, messages dated before `history_before` are
    /// history.
    async fn poll(
        &self,
        persona: &TelegramPersona,
        bot: &Bot,
        offset: Option<i32>,
        history_before: Option<i64>,
    ) -> Result<Option<i32>, PollError> {
        let mut req = bot
            .get_updates()
            .timeout(self.settings.poll_timeout.as_secs() as u32)
            .allowed_updates([AllowedUpdate::Message]);
        if let Some(o) = offset {
            req = req.offset(o);
        }
        let updates = req
            .send()
            .await
            .map_err(|e| PollError::Poll(send::describe(&e)))?;
        let Some(last) = updates.last() else {
            return Ok(None);
        };
        let next = last.id.as_offset();
        let known = self.known();
        let Some(me) = known.iter().find(|k| k.bot_id == persona.bot_id) else {
            return Ok(Some(next));
        };
        let mut taking = Vec::new();
        for update in &updates {
            let msg = match &update.kind {
                UpdateKind::Message(m) => m,
                UpdateKind::Error(raw) => {
                    tracing::warn!(persona = %persona.id, update = update.id.0, "Telegram: skipped an update that does not parse: {}", send::clip(&raw.to_string()));
                    continue;
                }
                // Edits and everything else: not new messages.
                _ => continue,
            };
            let receiver = Receiver {
                bot: me,
                bots: &known,
            };
            let Some(heard) = to_message(msg, receiver) else {
                continue;
            };
            if !self.first_sight(&heard.room, msg.id.0) {
                continue;
            }
            let backlog = history_before.is_some_and(|before| msg.date.timestamp() < before);
            if let Ok(r) = self.runtime.lock()
                && let Some(handle) = r.as_ref()
            {
                if backlog {
                    handle.backlog(heard);
                } else {
                    taking.push((
                        heard.room.clone(),
                        msg.id.0,
                        handle.inbound_saved(heard, Vec::new()),
                    ));
                }
            }
        }
        // The next poll confirms these updates to Telegram, which then
        // drops them for good: first they and the offset are stored, so a
        // crash in between never loses one (they come again instead, and
        // are recognised). A message the store refused (it could not
        // write) is not confirmed: it is forgotten here, and the next poll,
        // from the same offset, brings it again.
        let mut refused = None;
        for (room, id, taken) in taking {
            if let Err(e) = taken.await {
                self.forget_sight(&room, id);
                refused.get_or_insert(e);
            }
        }
        if let Some(e) = refused {
            return Err(PollError::NotSaved(e.to_string()));
        }
        let handle = self.runtime.lock().ok().and_then(|r| r.clone());
        if let Some(handle) = handle {
            handle
                .save_state_saved(state_key(persona.bot_id), next.to_string())
                .await
                .map_err(|e| PollError::NotSaved(e.to_string()))?;
        }
        Ok(Some(next))
    }

    /// A message handed in but not stored: the next poll hands it again.
    fn forget_sight(&self, room: &RoomId, id: i32) {
        if let Ok(mut s) = self.seen.lock() {
            s.forget(&(room.clone(), id));
        }
    }

    /// Whether this is the first bot to hand in this message.
    fn first_sight(&self, room: &RoomId, id: i32) -> bool {
        self.seen.lock().is_ok_and(|mut s| s.first((room.clone(), id)))
    }

    fn bot(&self, persona: &PersonaId) -> Result<&Bot, tactful_runtime::PlatformError> {
        let ids = self.settings.personas.iter().map(|p| &p.id);
        let i = tactful_runtime::account_index(ids, persona, "Telegram bot")?;
        self.bots
            .get(i)
            .ok_or_else(|| tactful_runtime::PlatformError(format!("{persona}'s Telegram bot is not running")))
    }
}

impl Connected for TelegramPlatform {
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        let personas = shared.settings.personas.iter().map(|p| &p.id);
        shared
            .tasks
            .start(&shared.runtime, runtime, personas, held, |i, listening| {
                Box::pin(shared.clone().keep_polling(i, listening))
            })
    }

    fn change_held(
        &self,
        held: &Held,
        saved: &BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        let personas = shared.settings.personas.iter().map(|p| &p.id);
        Some(
            shared
                .tasks
                .change(&shared.runtime, "Telegram", personas, held, |i, listening| {
                    if listening {
                        // A bot taken over polls on from where its last poller
                        // saved.
                        let bot_id = shared.settings.personas[i].bot_id;
                        if let Ok(mut offsets) = shared.saved.lock() {
                            match saved_offset(saved, bot_id) {
                                Some(o) => offsets.insert(bot_id, o),
                                None => offsets.remove(&bot_id),
                            };
                        }
                        let since = saved.get(&since_key(bot_id)).and_then(|s| s.parse().ok());
                        if let (Ok(mut known), Some(since)) = (shared.since.lock(), since) {
                            known.insert(bot_id, since);
                        }
                    }
                    Box::pin(shared.clone().keep_polling(i, listening))
                }),
        )
    }

    fn probe(&self) -> BoxFuture<'_, Vec<Probe>> {
        Box::pin(async move {
            let settings = &self.shared.settings;
            let fix = format!(
                "check the persona's telegram.token (from @BotFather: /token) and that {} answers",
                settings.api_url
            );
            let mut out = Vec::new();
            for (persona, bot) in settings.personas.iter().zip(&self.shared.bots) {
                let what = format!("Telegram {} (getMe)", persona.id);
                out.push(
                    Probe::run(what, &fix, async {
                        let me = bot.get_me().send().await.map_err(|e| match &e {
                            teloxide_core::RequestError::Network(n) => {
                                tactful_core::cause::reaching(n, &settings.api_url)
                            }
                            _ => send::describe(&e),
                        })?;
                        if me.user.id.0 != persona.bot_id {
                            return Err(format!(
                                "the token belongs to bot {}, not {}",
                                me.user.id.0, persona.bot_id
                            ));
                        }
                        Ok(match &me.user.username {
                            Some(u) => format!("@{u}"),
                            None => "a bot without a username: people cannot @mention it".to_owned(),
                        })
                    })
                    .await,
                );
            }
            out
        })
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            // A few seconds for the bots to say who they are, so the banner
            // shows the usernames people will type.
            let all = self.shared.settings.personas.len();
            self.shared.identified.wait_for(all, Duration::from_secs(5)).await;
            let names: Vec<(String, Option<String>)> = self
                .shared
                .known()
                .into_iter()
                .map(|k| (k.persona.to_string(), k.username))
                .collect();
            config::describe(&self.shared.settings, &names)
        })
    }
}
