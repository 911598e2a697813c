//! Zulip for tactful: every persona is a bot of its own, all in one
//! process, each with REST calls under its email and API key ([`api`])
//! and a real-time events queue (`POST /register`, then long polls of
//! `GET /events`).
//!
//! - A bot learns who it is (`users/me`), checks it is subscribed to each
//!   configured stream and says so when not (a WARN and `/healthz`: a bot
//!   not subscribed hears nothing there), and reads the server's longest
//!   message from its queue's registration, which long answers are cut
//!   under.
//! - Each message is heard once, whichever bots received it; the
//!   personas' own are left out. Message ids grow across the organisation,
//!   so each bot saves the id of the last message it handed in, behind the
//!   message (`RuntimeHandle::save_state`), and after a restart or an
//!   expired queue (`BAD_EVENT_QUEUE_ID`) registers again and fetches
//!   every message after it (`GET /messages`): nothing missed, nothing
//!   twice.
//! - Topics are threads. A message in a topic replies to the last persona
//!   message there (learnt from what the personas post, or asked once of
//!   the topic after a restart), so a follow-up in a topic a persona
//!   answered in addresses it. A topic renamed or moved keeps its
//!   messages (`update_message` moves what is known of them), and answers
//!   go where the message answered is now.
//! - Out ([`send`]): messages, streaming by `PATCH /messages/{id}`, silence
//!   by deleting the placeholder, reactions by emoji name, typing;
//!   wildcard mentions in an answer are written so they notify nobody. A
//!   429 pauses every call of the bot until its reset.
//!
//! Rooms are `zulip:<stream id>` and `zulip:dm:<user ids>`; people are
//! `zulip:<user id>`, with their email as handle; message ids are
//! Zulip's.

pub mod api;
pub mod config;
pub mod inbound;
mod listen;
pub mod model;
pub mod send;
mod settings;

pub use settings::{ZulipPersona, ZulipSettings};

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_runtime::account::{HeardOnce, Recent};
use tactful_runtime::{Connected, Held, Probe, Roster, RuntimeHandle};

use crate::api::Api;
use crate::inbound::KnownBot;
use crate::model::Me;

/// How many recent messages are remembered, to hear each once.
const REMEMBERED_MESSAGES: usize = 4096;

/// How many topics and messages' places are remembered.
const REMEMBERED: usize = 10_000;

/// The longest message before the server has said (Zulip's default).
pub const DEFAULT_MAX_MESSAGE: usize = 10_000;

/// How long a bot waits for the others to say who they are before it
/// listens (their names are how mentions of them are read).
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);

/// A stream's topic, by stream id and the topic's name as Zulip compares
/// it (case aside).
type TopicKey = (u64, String);

/// The key of a topic.
fn topic_key(stream: u64, topic: &str) -> TopicKey {
    (stream, topic.to_lowercase())
}

/// The Zulip platform: a [`tactful_runtime::Platform`] for the runtime and
/// the event queues.
#[derive(Clone)]
pub struct ZulipPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for ZulipPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZulipPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

struct Shared {
    settings: ZulipSettings,
    /// One client per persona, in settings order.
    apis: Vec<Api>,
    /// Each bot, once `users/me` said who it is.
    bots: RwLock<Vec<Option<Me>>>,
    /// The bots' accounts: the runtime, their tasks, who said who it is.
    roster: Roster,
    /// Messages handed in.
    seen: Mutex<HeardOnce<u64>>,
    /// The configured streams' ids, as found (any bot subscribed).
    listened: RwLock<HashSet<u64>>,
    /// The bot that hands in each stream's messages (the first in the
    /// config subscribed to it).
    readers: Mutex<std::collections::HashMap<u64, usize>>,
    /// Each bot's configured streams it is not subscribed to, by name
    /// (lower case): reported until a message there shows it was
    /// subscribed since.
    unsubscribed: Mutex<Vec<HashSet<String>>>,
    /// Where recent messages are now (stream, topic), by id.
    places: Mutex<Recent<u64, (u64, String)>>,
    /// The last persona message in each topic (0: none).
    last_in_topic: Mutex<Recent<TopicKey, u64>>,
    /// The server's longest message, in characters.
    max_message: AtomicUsize,
    /// The platform state the store held at start (each bot's last
    /// message).
    saved: tactful_runtime::saved::SavedCursors,
}

impl ZulipPlatform {
    /// A Zulip platform; nothing connects before [`Connected::start`].
    /// `saved`: the platforms' state the store kept.
    pub fn new(settings: ZulipSettings, saved: &BTreeMap<String, String>) -> Result<ZulipPlatform, String> {
        // Several TLS providers are in the build; name the one to use.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let apis = settings
            .personas
            .iter()
            .map(|p| Api::new(&settings.site, &p.email, &p.api_key))
            .collect::<Result<Vec<_>, _>>()?;
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("Zulip", personas, settings.max_backoff);
        let saved = tactful_runtime::saved::SavedCursors::new(listen::STATE_PREFIX, saved);
        Ok(ZulipPlatform {
            shared: Arc::new(Shared {
                bots: RwLock::new(vec![None; settings.personas.len()]),
                unsubscribed: Mutex::new(vec![HashSet::new(); settings.personas.len()]),
                settings,
                apis,
                roster,
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                listened: RwLock::new(HashSet::new()),
                readers: Mutex::new(std::collections::HashMap::new()),
                places: Mutex::new(Recent::new(REMEMBERED)),
                last_in_topic: Mutex::new(Recent::new(REMEMBERED)),
                max_message: AtomicUsize::new(DEFAULT_MAX_MESSAGE),
                saved,
            }),
        })
    }
}

impl Shared {
    /// Every bot known so far, for reading mentions and own messages.
    fn known(&self) -> Vec<KnownBot> {
        let bots = self.bots.read().map(|b| b.clone()).unwrap_or_default();
        self.settings
            .personas
            .iter()
            .zip(bots)
            .filter_map(|(p, me)| {
                me.map(|m| KnownBot {
                    persona: p.id.clone(),
                    user_id: m.user_id,
                    full_name: m.full_name,
                })
            })
            .collect()
    }

    /// Bot `i`'s user id, once known.
    fn bot_user(&self, i: usize) -> Option<u64> {
        self.bots
            .read()
            .ok()
            .and_then(|b| b.get(i).cloned().flatten())
            .map(|m| m.user_id)
    }

    fn max_message(&self) -> usize {
        self.max_message.load(Ordering::Relaxed)
    }

    /// A persona's message `id` in topic `topic` of `stream`: the topic's
    /// last persona message from now on.
    fn note_persona_message(&self, id: u64, stream: u64, topic: &str) {
        if let Ok(mut places) = self.places.lock() {
            places.insert(id, (stream, topic.to_owned()));
        }
        if let Ok(mut last) = self.last_in_topic.lock() {
            last.insert(topic_key(stream, topic), id);
        }
    }
}

impl Connected for ZulipPlatform {
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared.roster.start(runtime, held, |i, listening| {
            Box::pin(shared.clone().keep_connected(i, listening))
        })
    }

    fn change_held(
        &self,
        held: &Held,
        saved: &BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        // An account taken over starts from what its last holder saved.
        shared.saved.refresh(saved);
        Some(shared.roster.change(held, |i, listening| {
            Box::pin(shared.clone().keep_connected(i, listening))
        }))
    }

    fn probe(&self) -> BoxFuture<'_, Vec<Probe>> {
        Box::pin(async move {
            let settings = &self.shared.settings;
            let fix = format!(
                "check the persona's zulip.email and zulip.api_key (Personal settings → Bots) and that {} answers",
                settings.site
            );
            let mut out = Vec::new();
            for (i, persona) in settings.personas.iter().enumerate() {
                let what = format!("Zulip {} (users/me)", persona.id);
                let api = &self.shared.apis[i];
                out.push(
                    Probe::run(what, &fix, async {
                        let me: Me = api.get("/users/me", &Vec::new()).await?;
                        Ok::<_, api::ApiError>(me.full_name)
                    })
                    .await,
                );
            }
            out
        })
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let bots = self.shared.bots.read().map(|b| b.clone()).unwrap_or_default();
            let shown = bots.into_iter().map(|b| b.map(|m| m.full_name)).collect();
            self.shared.roster.banner_line(shown).await
        })
    }
}
