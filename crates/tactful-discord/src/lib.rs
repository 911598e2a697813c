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
pub mod inbound;
mod send;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{Mentions, PersonaId};
use tactful_runtime::account::{AccountTasks, Backoff, HeardOnce, Recent, Roll};
use tactful_runtime::{Connected, Connections, Held, Probe, RuntimeHandle};
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

/// A task aborted when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How long a bot waits for the others to say who they are.
const IDENTIFY_WAIT: Duration = Duration::from_secs(30);

/// One persona's bot.
#[derive(Clone)]
pub struct DiscordPersona {
    /// The persona.
    pub id: PersonaId,
    /// The bot token (the Bot page of the application).
    pub token: String,
}

/// What an agent's output may ping (`allowed_mentions`). Nothing, unless
/// configured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Pings {
    /// `<@user>` in the output pings the user.
    pub users: bool,
    /// `<@&role>` pings the role.
    pub roles: bool,
    /// `@everyone` and `@here` ping.
    pub everyone: bool,
}

/// `[platforms.discord]` and the personas' bots.
#[derive(Clone)]
pub struct DiscordSettings {
    /// The REST API's base (`https://discord.com`; requests go to
    /// `<base>/api/v10/...`).
    pub api_url: String,
    /// The gateway's URL (`wss://gateway.discord.gg`).
    pub gateway_url: String,
    /// Whether `@everyone`/`@here` in a person's message address every
    /// persona.
    pub everyone_addresses: bool,
    /// What agents' output may ping.
    pub pings: Pings,
    /// The personas on Discord.
    pub personas: Vec<DiscordPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
}

impl std::fmt::Debug for DiscordSettings {
    // Tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("api_url", &self.api_url)
            .field("gateway_url", &self.gateway_url)
            .field(
                "personas",
                &self.personas.iter().map(|p| p.id.as_str()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

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
    identified: Roll,
    /// Each account's task, and whether it listens.
    tasks: AccountTasks,
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
    runtime: Mutex<Option<RuntimeHandle>>,
}

/// A bot's user id and name.
type BotUser = (Id<UserMarker>, String);

/// The roles a bot holds in one guild.
type Roles = Vec<Id<RoleMarker>>;

/// Roles, and since when they are known.
type RolesSince = (tokio::time::Instant, Roles);

/// Why a bot could not connect; retried with backoff.
#[derive(Debug, thiserror::Error)]
enum ConnectError {
    #[error("cannot read the bot's user (is the token right?): {0}")]
    Identify(String),
    #[error("{}", closed(.0))]
    Closed(Option<(u16, String)>),
}

impl ConnectError {
    /// Whether twilight gives the connection up after this (it resumes or
    /// reconnects after every other close).
    fn is_final(&self) -> bool {
        matches!(self, ConnectError::Closed(Some((code, _))) if matches!(code, 4004 | 4010..=4014))
    }
}

/// What a gateway close means, and what to check.
fn closed(frame: &Option<(u16, String)>) -> String {
    let Some((code, reason)) = frame else {
        return "the gateway connection ended".to_owned();
    };
    let what = match code {
        4004 => "Discord refused the bot token (4004 Authentication failed): check the persona's discord.token (the Bot page of the application)".to_owned(),
        4014 => "Discord refused the intents (4014 Disallowed intents): turn on the Message Content intent on the Bot page of the application".to_owned(),
        4013 => "Discord refused the intents (4013 Invalid intents)".to_owned(),
        4010..=4012 => format!("Discord refused the connection ({code}: a shard or API version it does not take)"),
        _ => format!("the gateway closed the connection ({code})"),
    };
    if reason.trim().is_empty() {
        what
    } else {
        format!(
            "{what}; Discord said: {}",
            reason.chars().take(200).collect::<String>()
        )
    }
}

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
        Ok(DiscordPlatform {
            shared: Arc::new(Shared {
                settings,
                clients,
                _gates: gates,
                bots: RwLock::new(bots),
                identified: Roll::default(),
                tasks: AccountTasks::default(),
                roles: Mutex::new(HashMap::new()),
                parents: Mutex::new(HashMap::new()),
                joined: Mutex::new(HashSet::new()),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_MESSAGES)),
                posted: Mutex::new(Recent::new(REMEMBERED_MESSAGES)),
                runtime: Mutex::new(None),
            }),
        })
    }
}

impl Shared {
    /// Identifies persona `i`'s bot, then, if this process holds it
    /// (`listening`), keeps its gateway session until the service stops.
    async fn keep_connected(self: Arc<Self>, i: usize, listening: bool) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = Backoff::of_held(
            &self.runtime,
            "Discord",
            persona.id.as_str(),
            self.settings.max_backoff,
            listening,
        );
        loop {
            match self.identify(i).await {
                Ok(()) => break,
                Err(e) => backoff.wait(&e).await,
            }
        }
        if !listening {
            return;
        }
        self.wait_for_the_others().await;
        backoff.reset();
        // Messages are worked on (thread and role lookups over HTTP) by a
        // task of their own, in order: the gateway loop must keep polling,
        // or twilight cannot send its heartbeats and Discord drops the
        // session. The queue is bounded: a worker that far behind slows
        // the reading down rather than growing.
        let (queue, mut work) =
            tokio::sync::mpsc::channel::<Box<twilight_model::channel::Message>>(MESSAGE_QUEUE);
        let worker = {
            let shared = self.clone();
            tokio::spawn(async move {
                while let Some(msg) = work.recv().await {
                    shared.heard(i, &msg).await;
                }
            })
        };
        let _worker = AbortOnDrop(worker);
        loop {
            let intents = Intents::GUILDS
                | Intents::GUILD_MESSAGES
                | Intents::DIRECT_MESSAGES
                | Intents::MESSAGE_CONTENT;
            let mut config = ConfigBuilder::new(persona.token.clone(), intents);
            if self.settings.gateway_url != config::DEFAULT_GATEWAY_URL {
                config = config.proxy_url(self.settings.gateway_url.clone());
            }
            let mut shard = Shard::with_config(ShardId::ONE, config.build());
            tracing::info!(persona = %persona.id, "Discord: connecting to the gateway");
            let mut closed = ConnectError::Closed(None);
            while let Some(item) = shard.next_event(EventTypeFlags::all()).await {
                match item {
                    Ok(Event::MessageCreate(m)) => {
                        let _ = queue.send(Box::new(m.message)).await;
                    }
                    Ok(Event::GatewayClose(Some(frame))) => {
                        let why = ConnectError::Closed(Some((frame.code, frame.reason.to_string())));
                        if why.is_final() {
                            // The stream ends next: said once there.
                            closed = why;
                        } else {
                            // twilight resumes or reconnects by itself.
                            tracing::info!(persona = %persona.id, "Discord: {why}; reconnecting");
                        }
                    }
                    Ok(event) => {
                        if matches!(event, Event::Ready(_) | Event::Resumed) {
                            backoff.connected();
                        }
                        self.event(i, event);
                    }
                    // twilight tries again by itself (after 1, 2, 4… s), so
                    // this is said at most that often.
                    Err(e) => {
                        let why = format!("cannot reach the gateway at {}: {e}", self.settings.gateway_url);
                        backoff.account().down(&why);
                        tracing::warn!(
                            persona = %persona.id,
                            "Discord: {why}; retrying (is the address right, and reachable through the firewall or proxy?)"
                        );
                    }
                }
            }
            backoff.wait(&closed).await;
        }
    }

    /// Learns the bot's user id (mentions name it).
    async fn identify(&self, i: usize) -> Result<(), ConnectError> {
        let me = send::deadline(self.clients[i].current_user())
            .await
            .map_err(|e| ConnectError::Identify(e.0))?
            .model()
            .await
            .map_err(|e| ConnectError::Identify(e.to_string()))?;
        tracing::info!(persona = %self.settings.personas[i].id, bot = %me.name, "Discord: bot identified");
        if let Ok(mut bots) = self.bots.write() {
            bots[i].1 = Some((me.id, me.name));
        }
        self.identified.add(i);
        Ok(())
    }

    async fn wait_for_the_others(&self) {
        let all = self.settings.personas.len();
        if !self.identified.wait_for(all, IDENTIFY_WAIT).await {
            tracing::warn!(
                "Discord: not every bot could say who it is; mentions of the missing ones are not recognised yet"
            );
        }
    }

    fn note_thread(&self, ch: &Channel) {
        if let Ok(mut p) = self.parents.lock() {
            if p.len() > REMEMBERED_CHANNELS {
                p.clear();
            }
            p.insert(ch.id, ch.kind.is_thread().then_some(ch.parent_id).flatten());
        }
    }

    fn event(&self, i: usize, event: Event) {
        match event {
            Event::Ready(r) => {
                tracing::info!(persona = %self.settings.personas[i].id, guilds = r.guilds.len(), "Discord gateway is live")
            }
            Event::GuildCreate(g) => {
                if let GuildCreate::Available(guild) = *g {
                    let me = self.user_of(i);
                    if let Some(m) = guild.members.iter().find(|m| Some(m.user.id) == me)
                        && let Ok(mut roles) = self.roles.lock()
                    {
                        roles.insert((i, guild.id), (tokio::time::Instant::now(), m.roles.clone()));
                    }
                    guild.threads.iter().for_each(|t| self.note_thread(t));
                    guild.channels.iter().for_each(|c| self.note_thread(c));
                }
            }
            Event::ThreadCreate(t) => self.note_thread(&t.0),
            Event::ThreadUpdate(t) => self.note_thread(&t.0),
            Event::ThreadListSync(s) => s.threads.iter().for_each(|t| self.note_thread(t)),
            _ => {}
        }
    }

    fn user_of(&self, i: usize) -> Option<Id<UserMarker>> {
        self.bots
            .read()
            .ok()
            .and_then(|b| b[i].1.as_ref().map(|(id, _)| *id))
    }

    /// A thread's parent channel, asked over HTTP the first time.
    async fn parent_of(&self, i: usize, channel: Id<ChannelMarker>) -> Option<Id<ChannelMarker>> {
        if let Some(known) = self.parents.lock().ok().and_then(|p| p.get(&channel).copied()) {
            return known;
        }
        match send::deadline(self.clients[i].channel(channel)).await {
            Ok(r) => match r.model().await {
                Ok(ch) => {
                    self.note_thread(&ch);
                    ch.kind.is_thread().then_some(ch.parent_id).flatten()
                }
                Err(e) => {
                    tracing::warn!(%channel, "Discord: cannot read a channel: {e}");
                    None
                }
            },
            Err(e) => {
                tracing::warn!(%channel, "Discord: cannot read a channel: {}", e.0);
                None
            }
        }
    }

    /// The roles persona `j`'s bot holds in `guild`, asked over HTTP the
    /// first time.
    async fn roles_of(&self, j: usize, guild: Id<GuildMarker>) -> Vec<Id<RoleMarker>> {
        let cached = self.roles.lock().ok().and_then(|r| r.get(&(j, guild)).cloned());
        if let Some((at, r)) = &cached
            && at.elapsed() < ROLES_FOR
        {
            return r.clone();
        }
        let Some(me) = self.user_of(j) else {
            return Vec::new();
        };
        let member = match send::deadline(self.clients[j].guild_member(guild, me)).await {
            Ok(r) => r.model().await.ok(),
            Err(e) => {
                tracing::debug!(%guild, "Discord: cannot read the bot's roles: {}", e.0);
                None
            }
        };
        // A failure (the bot is not in that guild, or Discord did not
        // answer) counts as no roles until the next refresh, so a flood of
        // role mentions cannot turn into a flood of lookups.
        let roles = member.map(|m| m.roles).unwrap_or_default();
        if let Ok(mut all) = self.roles.lock() {
            if all.len() > REMEMBERED_CHANNELS {
                all.clear();
            }
            all.insert((j, guild), (tokio::time::Instant::now(), roles.clone()));
        }
        roles
    }

    async fn heard(&self, i: usize, msg: &twilight_model::channel::Message) {
        if !self.seen.lock().is_ok_and(|mut s| s.first(msg.id.get())) {
            return;
        }
        let parent = match msg.guild_id {
            Some(_) => self.parent_of(i, msg.channel_id).await,
            None => None,
        };
        let mut known: Vec<KnownBot> = self
            .bots
            .read()
            .map(|b| {
                b.iter()
                    .map(|(persona, user)| KnownBot {
                        persona: persona.clone(),
                        user: user.as_ref().map(|(id, _)| *id),
                        roles: Vec::new(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(guild) = msg.guild_id
            && !msg.mention_roles.is_empty()
        {
            for (j, k) in known.iter_mut().enumerate() {
                k.roles = self.roles_of(j, guild).await;
            }
        }
        let seen = Seen {
            receiver: &self.settings.personas[i].id,
            bots: &known,
            parent,
            everyone_addresses: self.settings.everyone_addresses,
        };
        let Some(heard) = to_message(msg, seen) else {
            return;
        };
        if parent.is_some() {
            self.join_mentioned(&heard.mentions, msg.channel_id).await;
        }
        if let Ok(r) = self.runtime.lock()
            && let Some(handle) = r.as_ref()
        {
            handle.inbound(heard);
        }
    }

    /// Personas mentioned in a thread join it, to hear what follows.
    async fn join_mentioned(&self, mentions: &Mentions, thread: Id<ChannelMarker>) {
        let Mentions::Explicit(ids) = mentions else {
            return;
        };
        for (j, p) in self.settings.personas.iter().enumerate() {
            if !ids.iter().any(|u| u.as_str() == p.id.as_str()) {
                continue;
            }
            if self.joined.lock().is_ok_and(|s| s.contains(&(j, thread))) {
                continue;
            }
            match send::deadline(self.clients[j].join_thread(thread)).await {
                // Remembered once joined: a failure is tried again next time.
                Ok(_) => {
                    if let Ok(mut s) = self.joined.lock() {
                        if s.len() > REMEMBERED_CHANNELS {
                            s.clear();
                        }
                        s.insert((j, thread));
                    }
                }
                Err(e) => {
                    tracing::warn!(persona = %p.id, %thread, "Discord: cannot join the thread: {}", e.0)
                }
            }
        }
    }
}

impl Connected for DiscordPlatform {
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        let personas = shared.settings.personas.iter().map(|p| &p.id);
        shared
            .tasks
            .start(&shared.runtime, runtime, personas, held, |i, listening| {
                Box::pin(shared.clone().keep_connected(i, listening))
            })
    }

    fn change_held(
        &self,
        held: &Held,
        _saved: &std::collections::BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        let personas = shared.settings.personas.iter().map(|p| &p.id);
        Some(
            shared
                .tasks
                .change(&shared.runtime, "Discord", personas, held, |i, listening| {
                    Box::pin(shared.clone().keep_connected(i, listening))
                }),
        )
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
            let states = Connections::for_banner(&self.shared.runtime, "Discord", &personas).await;
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
