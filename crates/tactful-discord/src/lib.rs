//! Discord for tactful: every persona is a bot application of its own, all
//! in one process, each with a gateway connection (`twilight-gateway`) and
//! an HTTP client (`twilight-http`).
//!
//! - The gateway connection resumes after a drop (twilight does it, from
//!   the session and sequence it holds), so the messages sent meanwhile
//!   arrive; a session Discord no longer accepts starts over with backoff.
//! - Discord shows every bot the messages of the others, so a guild
//!   message reaches each persona's bot: it is handed in once, and the
//!   personas' own messages are left out (the engine heard them when they
//!   were sent).
//! - Which channel is a thread, and which roles a persona's bot holds, is
//!   learnt from the gateway (`GUILD_CREATE`, thread events) and, for what
//!   it did not say, asked once over HTTP.
//! - A persona mentioned in a thread joins it, so it hears the rest.
//! - Out: every message is sent with `allowed_mentions` that parse nothing
//!   (unless configured), so an agent's output never pings `@everyone`, a
//!   role or a user; replies are message references that do not fail when
//!   the target is gone; streaming edits the placeholder; silence deletes
//!   it; typing shows while a turn runs. twilight's rate limiter waits out
//!   429s (`retry_after`, per route and global); every call has an overall
//!   deadline so a server that keeps refusing cannot stall a room.
//!
//! Rooms are `discord:<channel id>` (a thread is a thread in its parent's
//! room); people are `discord:<user id>`; message ids are snowflakes.

pub mod config;
pub mod gate;
mod gateway;
mod guild;
pub mod inbound;
mod send;
mod settings;

pub use settings::{DiscordPersona, DiscordSettings, Pings};

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{Mentions, PersonaId};
use tactful_runtime::account::{HeardOnce, Recent};
use tactful_runtime::{Connected, Held, Probe, Roster, RuntimeHandle};
use twilight_gateway::{ConfigBuilder, Event, EventTypeFlags, Intents, Shard, ShardId, StreamExt as _};
use twilight_http::Client;
use twilight_model::channel::Channel;
use twilight_model::gateway::payload::incoming::GuildCreate;
use twilight_model::id::Id;
use twilight_model::id::marker::{ChannelMarker, GuildMarker, RoleMarker, UserMarker};

use crate::gate::Gate;
use crate::inbound::{KnownBot, Seen, to_message};

/// How many recent message ids are remembered to hear a guild once.
const REMEMBERED_MESSAGES: usize = 4096;

/// Messages waiting for their worker, per bot.
const MESSAGE_QUEUE: usize = 1024;

/// Channels and threads remembered; past this the memory starts over (it
/// is a cache: what is missing is asked again).
const REMEMBERED_CHANNELS: usize = 10_000;

/// How long the roles of a persona's bot in a guild are trusted before
/// they are asked again (roles change; a failed lookup is retried too).
const ROLES_FOR: Duration = Duration::from_secs(600);

/// How long a bot waits for the others to say who they are.
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);

/// The Discord platform: a [`tactful_runtime::Platform`] for the runtime
/// and the gateway loops.
#[derive(Clone)]
pub struct DiscordPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for DiscordPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

struct Shared {
    settings: DiscordSettings,
    /// One HTTP client per persona, in settings order.
    clients: Vec<Arc<Client>>,
    /// The clients' gates, serving while the platform lives.
    _gates: Vec<Gate>,
    /// Each bot's user id and name, once known.
    bots: RwLock<Vec<(PersonaId, Option<BotUser>)>>,
    /// The bots' accounts: the runtime, their tasks, who said who it is.
    roster: Roster,
    /// The roles each persona's bot holds, by guild.
    roles: Mutex<HashMap<(usize, Id<GuildMarker>), RolesSince>>,
    /// Channels seen: a thread's parent, `None` for a channel that is not
    /// a thread.
    parents: Mutex<HashMap<Id<ChannelMarker>, Option<Id<ChannelMarker>>>>,
    /// Threads each persona joined.
    joined: Mutex<HashSet<(usize, Id<ChannelMarker>)>>,
    seen: Mutex<HeardOnce<u64>>,
    /// The channel of each message the bots posted lately (a thread's
    /// messages are edited and deleted in the thread).
    posted: Mutex<Recent<String, Id<ChannelMarker>>>,
}

/// A bot's user id and name.
type BotUser = (Id<UserMarker>, String);

/// The roles a bot holds in one guild.
type Roles = Vec<Id<RoleMarker>>;

/// Roles, and since when they are known.
type RolesSince = (tokio::time::Instant, Roles);

impl DiscordPlatform {
    /// A Discord platform; nothing connects before [`Connected::start`].
    /// Must be called inside the tokio runtime (twilight's rate limiter
    /// runs a task).
    pub fn new(settings: DiscordSettings) -> Result<DiscordPlatform, String> {
        // Several TLS providers are in the build; name the one to use.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        // Every REST request of a bot goes through its gate (global rate
        // limits, invalid-request counting, `api_url` whole).
        let mut gates = Vec::new();
        let mut clients = Vec::new();
        for p in &settings.personas {
            let gate = Gate::start(p.id.as_str(), &settings.api_url)
                .map_err(|e| format!("cannot open the Discord request gate on loopback: {e}"))?;
            let client = Client::builder()
                .token(p.token.clone())
                .proxy(gate.authority(), true)
                // A 401 is counted by the gate; twilight would otherwise
                // refuse every later request of the bot until a restart,
                // though a token can come back (a transient 401, a proxy
                // restarting).
                .remember_invalid_token(false)
                .timeout(Duration::from_secs(15))
                .build();
            clients.push(Arc::new(client));
            gates.push(gate);
        }
        let bots = settings.personas.iter().map(|p| (p.id.clone(), None)).collect();
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("Discord", personas, settings.max_backoff);
        Ok(DiscordPlatform {
            shared: Arc::new(Shared {
                settings,
                clients,
                _gates: gates,
                bots: RwLock::new(bots),
                roster,
                roles: Mutex::new(HashMap::new()),
                parents: Mutex::new(HashMap::new()),
                joined: Mutex::new(HashSet::new()),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                posted: Mutex::new(Recent::new(REMEMBERED_MESSAGES)),
            }),
        })
    }
}

impl Connected for DiscordPlatform {
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared.roster.start(runtime, held, |i, listening| {
            Box::pin(shared.clone().keep_connected(i, listening))
        })
    }

    fn change_held(
        &self,
        held: &Held,
        _saved: &std::collections::BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        Some(shared.roster.change(held, |i, listening| {
            Box::pin(shared.clone().keep_connected(i, listening))
        }))
    }

    fn probe(&self) -> BoxFuture<'_, Vec<Probe>> {
        Box::pin(async move {
            let settings = &self.shared.settings;
            let fix = format!(
                "check the persona's discord.token (the Bot page of the application) and that {} answers",
                settings.api_url
            );
            let mut out = Vec::new();
            for (i, persona) in settings.personas.iter().enumerate() {
                let what = format!("Discord {} (users/@me)", persona.id);
                out.push(
                    Probe::run(what, &fix, async {
                        let me = send::deadline(self.shared.clients[i].current_user())
                            .await
                            .map_err(|e| e.0)?
                            .model()
                            .await
                            .map_err(|e| e.to_string())?;
                        Ok::<_, String>(me.name)
                    })
                    .await,
                );
            }
            out
        })
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            // A few seconds for the gateways: a bot is named once its
            // gateway said READY, and "connecting…" until then.
            let personas: Vec<&str> = self
                .shared
                .settings
                .personas
                .iter()
                .map(|p| p.id.as_str())
                .collect();
            let states = self.shared.roster.banner_states().await;
            let names: Vec<Option<String>> = self
                .shared
                .bots
                .read()
                .map(|b| {
                    b.iter()
                        .map(|(_, user)| user.as_ref().map(|(_, n)| n.clone()))
                        .collect()
                })
                .unwrap_or_default();
            let bots: Vec<String> = personas
                .iter()
                .zip(states)
                .zip(names)
                .map(|((p, state), name)| match (state.banner_note(), name) {
                    (None, Some(name)) => format!("{name} ({p})"),
                    (note, _) => format!("{p} ({})", note.unwrap_or("connecting…")),
                })
                .collect();
            format!("on Discord as {}", bots.join(", "))
        })
    }
}
