//! Mattermost for tactful: every persona is a bot account of its own, all
//! in one process, each with REST API v4 calls under its token ([`api`])
//! and a WebSocket event stream ([`socket`]).
//!
//! - A bot learns who it is (`users/me`), finds the configured channels
//!   (`team/channel` or an id), checks it is a member of each and says so
//!   when not (a WARN and `/healthz`: a bot left out of a channel hears
//!   nothing there), and reads the server's longest post
//!   (`config/client`), which long answers are cut under.
//! - Each post is heard once, whichever bots received it; the personas'
//!   own posts are left out (the engine heard them when they were sent).
//!   Each bot saves the time of the last post it handed in, behind the
//!   post (`RuntimeHandle::save_state`); after a restart or a dropped
//!   socket it fetches every post since then from its channels and its
//!   direct and group messages (`channels/{id}/posts?since=`), so nothing
//!   is missed, and what was already heard is heard once. A dropped socket
//!   is resumed by its connection id and sequence number, so the server
//!   sends again what it still holds.
//! - Threads: `root_id` is tactful's thread. A post in a thread replies to
//!   the last persona post in it (learnt from what the personas post, or
//!   asked once from the thread after a restart), so a reply in a persona's
//!   thread addresses that persona. Answers go into the thread they were
//!   asked in, or start one under the post answered; in a direct message
//!   they stay in line.
//! - Out ([`send`]): posts, streaming by `posts/{id}/patch`, silence by
//!   deleting the placeholder, reactions by emoji name, typing; `@channel`,
//!   `@all` and `@here` in an answer are written so they notify nobody.
//!   A 429 pauses every bot's calls until its reset (the server limits by
//!   address).
//!
//! Rooms are `mm:<channel id>`; people are `mm:<user id>`, with their
//! username as handle; message ids are post ids.

pub mod api;
pub mod config;
pub mod inbound;
mod listen;
pub mod model;
mod send;
mod settings;
pub mod socket;

pub use settings::{ChannelRef, MattermostPersona, MattermostSettings};

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_runtime::account::{HeardOnce, Recent};
use tactful_runtime::{Connected, Held, Probe, Roster, RuntimeHandle};

use crate::api::Api;
use crate::inbound::KnownBot;
use crate::model::User;

/// How many recent posts are remembered, to hear each once.
const REMEMBERED_POSTS: usize = 4096;

/// How many threads, channels and people are remembered.
const REMEMBERED: usize = 10_000;

/// The longest post before the server has said (Mattermost's limit
/// before 5.0; newer servers take 16,383 characters and say so).
pub const DEFAULT_MAX_POST: usize = 4000;

/// The Mattermost platform: a [`tactful_runtime::Platform`] for the runtime
/// and the event streams.
#[derive(Clone)]
pub struct MattermostPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MattermostPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MattermostPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

struct Shared {
    settings: MattermostSettings,
    /// One client per persona, in settings order.
    apis: Vec<Api>,
    /// Each bot, once `users/me` said who it is.
    bots: RwLock<Vec<Option<User>>>,
    /// The bots' accounts: the runtime, their tasks, who said who it is.
    roster: Roster,
    /// Posts handed in.
    seen: Mutex<HeardOnce<String>>,
    /// The configured channels' ids, as found.
    listened: RwLock<std::collections::HashSet<String>>,
    /// The bot that hands in each configured channel's posts (the first
    /// in the config that is a member).
    readers: Mutex<std::collections::HashMap<String, usize>>,
    /// Each channel's type (`O`, `P`, `D`, `G`), by id.
    kinds: Mutex<Recent<String, String>>,
    /// The last persona post in each thread, by the thread's root.
    last_in_thread: Mutex<Recent<String, String>>,
    /// The thread each persona post went to ("" for none), by post id.
    roots: Mutex<Recent<String, String>>,
    /// People by user id.
    people: Mutex<Recent<String, User>>,
    /// The server's longest post, in characters.
    max_post: AtomicUsize,
    /// The platform state the store held at start (each bot's last post).
    saved: tactful_runtime::saved::SavedCursors,
}

impl MattermostPlatform {
    /// A Mattermost platform; nothing connects before [`Connected::start`].
    /// `saved`: the platforms' state the store kept.
    pub fn new(
        settings: MattermostSettings,
        saved: &BTreeMap<String, String>,
    ) -> Result<MattermostPlatform, String> {
        // Several TLS providers are in the build; name the one to use.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let pause = Arc::new(tactful_runtime::rate_pause::RatePause::default());
        let apis = settings
            .personas
            .iter()
            .map(|p| Api::new(&settings.url, &p.token, pause.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("Mattermost", personas, settings.max_backoff);
        let saved = tactful_runtime::saved::SavedCursors::new(listen::STATE_PREFIX, saved);
        Ok(MattermostPlatform {
            shared: Arc::new(Shared {
                bots: RwLock::new(vec![None; settings.personas.len()]),
                settings,
                apis,
                roster,
                seen: Mutex::new(HeardOnce::new(REMEMBERED_POSTS)),
                listened: RwLock::new(std::collections::HashSet::new()),
                readers: Mutex::new(std::collections::HashMap::new()),
                kinds: Mutex::new(Recent::new(REMEMBERED)),
                last_in_thread: Mutex::new(Recent::new(REMEMBERED)),
                roots: Mutex::new(Recent::new(REMEMBERED)),
                people: Mutex::new(Recent::new(REMEMBERED)),
                max_post: AtomicUsize::new(DEFAULT_MAX_POST),
                saved,
            }),
        })
    }
}

impl Shared {
    /// Every bot known so far, for reading mentions and own posts.
    fn known(&self) -> Vec<KnownBot> {
        let bots = self.bots.read().map(|b| b.clone()).unwrap_or_default();
        self.settings
            .personas
            .iter()
            .zip(bots)
            .filter_map(|(p, user)| {
                user.map(|u| KnownBot {
                    persona: p.id.clone(),
                    user_id: u.id,
                    username: u.username.to_ascii_lowercase(),
                })
            })
            .collect()
    }

    /// Bot `i`'s user id, once known.
    fn bot_user(&self, i: usize) -> Option<String> {
        self.bots
            .read()
            .ok()
            .and_then(|b| b.get(i).cloned().flatten())
            .map(|u| u.id)
    }

    fn max_post(&self) -> usize {
        self.max_post.load(Ordering::Relaxed)
    }
}

impl Connected for MattermostPlatform {
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
                "check the persona's mattermost.token (the bot account's access token) and that {} answers",
                settings.url
            );
            let mut out = Vec::new();
            for (i, persona) in settings.personas.iter().enumerate() {
                let what = format!("Mattermost {} (users/me)", persona.id);
                let api = &self.shared.apis[i];
                out.push(
                    Probe::run(what, &fix, async {
                        let me: User = api.get("/users/me").await?;
                        Ok::<_, api::ApiError>(format!("@{}", me.username))
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
            let shown = bots
                .into_iter()
                .map(|b| b.map(|u| format!("@{}", u.username)))
                .collect();
            self.shared.roster.banner_line(shown).await
        })
    }
}

/// How long a bot waits for the others to say who they are before it
/// listens (their usernames are how mentions of them are read).
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);
