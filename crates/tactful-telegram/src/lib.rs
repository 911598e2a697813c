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
mod poll;
mod send;
mod settings;

use poll::saved_offset;
pub use poll::{since_key, state_key};
pub use settings::{TelegramPersona, TelegramSettings};

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{PersonaId, RoomId};
use tactful_runtime::account::HeardOnce;
use tactful_runtime::{Connected, Held, Probe, Roster, RuntimeHandle};
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
    /// The bots' accounts: the runtime, each bot's polling task (and
    /// whether it polls), who said who it is.
    roster: Roster,
    /// Saved offsets by bot id, taken by each loop at start.
    saved: Mutex<HashMap<u64, i32>>,
    /// When each bot was first polled, by bot id, as saved ([`since_key`]).
    since: Mutex<HashMap<u64, i64>>,
    /// Recently heard (room, message id), so a group message several bots
    /// receive is handed in once.
    seen: Mutex<HeardOnce<(RoomId, i32)>>,
    /// Unix seconds at start: older updates of a first poll are history,
    /// unless a bot was first polled earlier ([`since_key`]).
    started: i64,
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
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("Telegram", personas, settings.max_backoff);
        Ok(TelegramPlatform {
            shared: Arc::new(Shared {
                settings,
                bots,
                known: RwLock::new(known),
                roster,
                saved: Mutex::new(offsets),
                since: Mutex::new(since),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                started,
            }),
        })
    }
}

impl Shared {
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
        shared.roster.start(runtime, held, |i, listening| {
            Box::pin(shared.clone().keep_polling(i, listening))
        })
    }

    fn change_held(
        &self,
        held: &Held,
        saved: &BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        Some(shared.roster.change(held, |i, listening| {
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
        }))
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
            self.shared.roster.all_identified(Duration::from_secs(5)).await;
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
