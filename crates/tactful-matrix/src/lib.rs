//! Matrix for tactful: every persona is a Matrix account of its own.
//!
//! Each persona logs in (password or access token) and runs its own sync
//! loop with `matrix-sdk`; the personas see each other as bots. What a sync
//! brings is handed to the runtime in order, and only then is the sync
//! token saved behind it ([`RuntimeHandle::save_state`]), so after a
//! restart the next sync starts exactly after the last message the store
//! holds: nothing is answered twice, nothing is missed.
//!
//! - The very first sync of an account (no saved token) is backlog: it is
//!   recorded as context and never answered. So is the history of a room a
//!   persona has just joined, up to its own join.
//! - A room several personas share is heard once: the first persona to
//!   see an event hands it in.
//! - Invites are accepted from `invites_from` (users or whole servers) and
//!   to `rooms`, and ignored otherwise; `rooms` are joined at start.
//! - A two-member room, or one marked `m.direct`, is a DM with the persona
//!   in it.
//! - Replies are real Matrix replies (`m.in_reply_to`, with the mention of
//!   the author), thread messages stay in their thread, streaming edits
//!   are `m.replace`, a silent turn redacts its placeholder. Every reply
//!   and edit carries the agent's Markdown as `org.matrix.custom.html`
//!   beside the text ([`format`]).
//! - When the homeserver goes away, each loop retries with exponential
//!   backoff from the token it holds: the messages sent meanwhile arrive
//!   with the next sync.
//!
//! Room ids are `matrix:<room id>`; people are their Matrix user ids
//! (`@alice:example.org`, for `allowed_users`); message ids are event ids.
//! Encrypted rooms are not supported: their messages are not readable
//! without end-to-end encryption, which this build leaves out.

pub mod config;
pub mod event;
pub mod format;
mod send;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use matrix_sdk::authentication::matrix::MatrixSession;
use matrix_sdk::config::{SyncSettings, SyncToken};
use matrix_sdk::ruma::api::client::filter::{FilterDefinition, RoomEventFilter};
use matrix_sdk::ruma::api::client::sync::sync_events::v3::Filter;
use matrix_sdk::ruma::events::room::member::MembershipState;
use matrix_sdk::ruma::events::{
    AnySyncMessageLikeEvent, AnySyncStateEvent, AnySyncTimelineEvent, SyncMessageLikeEvent, SyncStateEvent,
};
use matrix_sdk::ruma::{OwnedRoomId, OwnedUserId, RoomOrAliasId, UInt};
use matrix_sdk::{Client, Room, RoomState, SessionMeta, SessionTokens};
use tactful_core::{PersonaId, RoomId};
use tactful_runtime::account::{Backoff, HeardOnce};
use tactful_runtime::{Connected, Connections, Held, PlatformError, RuntimeHandle};

use crate::event::{KnownPersona, Seen, localpart, room_id, to_message};

/// How many recent event ids are remembered to hear a shared room once.
const REMEMBERED_EVENTS: usize = 4096;

/// How long a send waits for its persona to log in.
const LOGIN_WAIT: Duration = Duration::from_secs(60);

/// Events per room and sync: enough that a short outage leaves no gap.
const TIMELINE_LIMIT: u32 = 100;

/// How a persona proves who it is.
#[derive(Clone)]
pub enum MatrixAuth {
    /// Logs in with the account's password (a device named after the
    /// persona, the same on every start).
    Password(String),
    /// Uses an access token made elsewhere.
    AccessToken(String),
}

/// One persona's Matrix account.
#[derive(Clone)]
pub struct MatrixPersona {
    /// The persona.
    pub id: PersonaId,
    /// Its full Matrix user id, `@name:server`.
    pub user_id: String,
    /// Its credentials.
    pub auth: MatrixAuth,
}

/// `[platforms.matrix]` and the personas' accounts.
#[derive(Clone)]
pub struct MatrixSettings {
    /// The homeserver's base URL (`https://matrix.example.org`).
    pub homeserver: String,
    /// Whose invites are accepted: user ids (`@alice:example.org`) or whole
    /// servers (`example.org`).
    pub invites_from: Vec<String>,
    /// Rooms (ids or aliases) every persona joins at start and accepts
    /// invites to.
    pub rooms: Vec<String>,
    /// The personas on Matrix.
    pub personas: Vec<MatrixPersona>,
    /// Where the SDK keeps each account's room state between starts
    /// (`None`: in memory, re-read from the server on start).
    pub state_dir: Option<PathBuf>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// How long one sync request waits for news.
    pub sync_timeout: Duration,
}

impl std::fmt::Debug for MatrixSettings {
    // Passwords and tokens never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixSettings")
            .field("homeserver", &self.homeserver)
            .field("invites_from", &self.invites_from)
            .field("rooms", &self.rooms)
            .field(
                "personas",
                &self.personas.iter().map(|p| &p.user_id).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

/// The store key of an account's sync token.
pub fn state_key(user_id: &str) -> String {
    format!("matrix:sync:{user_id}")
}

/// The Matrix platform: a [`Platform`] for the runtime and the sync loops.
#[derive(Clone)]
pub struct MatrixPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for MatrixPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

struct Shared {
    settings: MatrixSettings,
    known: Vec<KnownPersona>,
    clients: Mutex<HashMap<PersonaId, Client>>,
    /// Woken when a persona logs in.
    logged_in: tokio::sync::Notify,
    /// Saved sync tokens, by persona, taken by its loop at start.
    saved: Mutex<HashMap<PersonaId, String>>,
    seen: Mutex<HeardOnce<String>>,
    runtime: Mutex<Option<RuntimeHandle>>,
    synced: AtomicUsize,
}

impl MatrixPlatform {
    /// A Matrix platform; nothing connects before [`MatrixPlatform::start`].
    /// `saved` is the platform state the store holds (sync tokens under
    /// [`state_key`]).
    pub fn new(settings: MatrixSettings, saved: &BTreeMap<String, String>) -> MatrixPlatform {
        let known = settings
            .personas
            .iter()
            .map(|p| KnownPersona {
                id: p.id.clone(),
                user_id: p.user_id.clone(),
                names: vec![localpart(&p.user_id).to_owned()],
            })
            .collect();
        let tokens = settings
            .personas
            .iter()
            .filter_map(|p| Some((p.id.clone(), saved.get(&state_key(&p.user_id))?.clone())))
            .collect();
        MatrixPlatform {
            shared: Arc::new(Shared {
                settings,
                known,
                clients: Mutex::new(HashMap::new()),
                logged_in: tokio::sync::Notify::new(),
                saved: Mutex::new(tokens),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_EVENTS)),
                runtime: Mutex::new(None),
                synced: AtomicUsize::new(0),
            }),
        }
    }

    /// Where heard messages go.
    pub fn connect_runtime(&self, handle: RuntimeHandle) {
        if let Ok(mut r) = self.shared.runtime.lock() {
            *r = Some(handle);
        }
    }

    /// Logs every persona in and starts its sync loop (each retrying on
    /// its own until the returned tasks are aborted).
    pub fn start(&self) -> Vec<tokio::task::JoinHandle<()>> {
        (0..self.shared.settings.personas.len())
            .map(|i| {
                let shared = self.shared.clone();
                tokio::spawn(async move { shared.keep_syncing(i).await })
            })
            .collect()
    }

    /// How many personas have finished their first sync (for readiness).
    pub fn synced(&self) -> usize {
        self.shared.synced.load(Ordering::SeqCst)
    }
}

/// Why a persona could not get going; retried with backoff.
#[derive(Debug, thiserror::Error)]
enum SessionError {
    #[error("the homeserver URL {0:?} is not usable: {1}")]
    Build(String, String),
    #[error("login as {0} failed: {1}")]
    Login(String, String),
    #[error("the access token belongs to {found}, not {want}")]
    WrongUser { want: String, found: String },
    #[error("sync failed: {0}")]
    Sync(String),
}

impl Shared {
    async fn keep_syncing(self: Arc<Self>, i: usize) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = Backoff::of(
            &self.runtime,
            "Matrix",
            persona.id.as_str(),
            self.settings.max_backoff,
        );
        let client = loop {
            match self.login(&persona).await {
                Ok(c) => break c,
                Err(e) => backoff.wait(&e).await,
            }
        };
        tracing::info!(persona = %persona.id, user = %persona.user_id, "logged in to Matrix");
        if let Ok(mut clients) = self.clients.lock() {
            clients.insert(persona.id.clone(), client.clone());
        }
        self.logged_in.notify_waiters();
        self.join_configured(&persona, &client).await;
        let mut token = self.saved.lock().ok().and_then(|mut s| s.remove(&persona.id));
        let mut first = true;
        backoff.reset();
        loop {
            match self.sync(&persona, &client, token.as_deref(), first).await {
                Ok(next) => {
                    if first {
                        first = false;
                        self.synced.fetch_add(1, Ordering::SeqCst);
                        tracing::info!(persona = %persona.id, rooms = client.joined_rooms().len(), "Matrix sync is live");
                    }
                    token = Some(next);
                    backoff.connected();
                }
                Err(e) => backoff.wait(&e).await,
            }
        }
    }

    /// `tactful doctor`'s check of one account, with a client of its own
    /// (no state store: a running service's is left alone). An access
    /// token is checked with `whoami`; a password by logging in as a
    /// device of the doctor's own, logged out again (logging in as the
    /// service's device would end the running service's session).
    async fn probe(&self, persona: &MatrixPersona) -> tactful_runtime::Probe {
        let s = &self.settings;
        let what = format!("Matrix {} ({})", persona.id, persona.user_id);
        let fix = format!(
            "check {}'s access_token or password, and that {} is its homeserver and answers",
            persona.user_id, s.homeserver
        );
        tactful_runtime::Probe::run(what, &fix, async {
            let client = Client::builder()
                .homeserver_url(&s.homeserver)
                .build()
                .await
                .map_err(|e| format!("{}: {e}", s.homeserver))?;
            let found = match &persona.auth {
                MatrixAuth::Password(password) => {
                    let device = format!("TACTFUL_DOCTOR_{}", persona.id.as_str().to_uppercase());
                    let me = client
                        .matrix_auth()
                        .login_username(&persona.user_id, password)
                        .device_id(&device)
                        .initial_device_display_name("tactful doctor")
                        .send()
                        .await
                        .map_err(|e| tactful_core::cause::explain(&e, &s.homeserver))?;
                    let _ = client.matrix_auth().logout().await;
                    me.user_id.to_string()
                }
                MatrixAuth::AccessToken(token) => token_whoami(&client, &persona.user_id, token).await?,
            };
            if found != persona.user_id {
                return Err(format!(
                    "the credentials are {found}'s, not {}'s",
                    persona.user_id
                ));
            }
            Ok(format!("signed in as {found}"))
        })
        .await
    }

    async fn login(&self, persona: &MatrixPersona) -> Result<Client, SessionError> {
        let s = &self.settings;
        // Network failures are retried with backoff (the SDK does not by
        // default): a reply decided while the homeserver restarts is sent
        // when it is back, with the same transaction id, so never twice.
        let retries = matrix_sdk::config::RequestConfig::new()
            .retry_limit(10)
            .max_retry_time(Duration::from_secs(10));
        let mut builder = Client::builder()
            .homeserver_url(&s.homeserver)
            .request_config(retries);
        if let Some(dir) = &s.state_dir {
            let name: String = persona
                .user_id
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            builder = builder.sqlite_store(dir.join(name), None);
        }
        let client = builder
            .build()
            .await
            .map_err(|e| SessionError::Build(s.homeserver.clone(), e.to_string()))?;
        match &persona.auth {
            MatrixAuth::Password(password) => {
                // The same device on every start: no pile of devices on the
                // account.
                let device = format!("TACTFUL_{}", persona.id.as_str().to_uppercase());
                client
                    .matrix_auth()
                    .login_username(&persona.user_id, password)
                    .device_id(&device)
                    .initial_device_display_name(&format!("tactful ({})", persona.id))
                    .send()
                    .await
                    .map_err(|e| SessionError::Login(persona.user_id.clone(), e.to_string()))?;
            }
            MatrixAuth::AccessToken(token) => {
                let me = token_whoami(&client, &persona.user_id, token)
                    .await
                    .map_err(|e| SessionError::Login(persona.user_id.clone(), e))?;
                if me != persona.user_id {
                    return Err(SessionError::WrongUser {
                        want: persona.user_id.clone(),
                        found: me,
                    });
                }
            }
        }
        Ok(client)
    }

    /// Joins `rooms` (ids or aliases); failures are logged, not fatal.
    async fn join_configured(&self, persona: &MatrixPersona, client: &Client) {
        for r in &self.settings.rooms {
            let Ok(id) = <&RoomOrAliasId>::try_from(r.as_str()) else {
                tracing::warn!(persona = %persona.id, room = %r, "Matrix: not a room id or alias");
                continue;
            };
            if let Err(e) = client.join_room_by_id_or_alias(id, &[]).await {
                tracing::warn!(persona = %persona.id, room = %r, "Matrix: cannot join: {e}");
            }
        }
    }

    /// One sync: hands its messages in, accepts invites, then saves the
    /// token behind them. Returns the next token.
    async fn sync(
        &self,
        persona: &MatrixPersona,
        client: &Client,
        token: Option<&str>,
        first: bool,
    ) -> Result<String, SessionError> {
        let mut timeline = RoomEventFilter::default();
        timeline.limit = Some(UInt::from(TIMELINE_LIMIT));
        let mut filter = FilterDefinition::default();
        filter.room.timeline = timeline;
        let mut settings = SyncSettings::default()
            .filter(Filter::FilterDefinition(filter))
            .timeout(if first {
                Duration::ZERO
            } else {
                self.settings.sync_timeout
            });
        settings = match token {
            Some(t) => settings.token(t).full_state(first),
            None => settings.token(SyncToken::NoToken),
        };
        let response = client
            .sync_once(settings)
            .await
            .map_err(|e| SessionError::Sync(e.to_string()))?;
        // With no token at all this is the account's history: context only.
        let backlog_only = token.is_none();
        for (room_id, update) in &response.rooms.joined {
            let Some(room) = client.get_room(room_id) else {
                continue;
            };
            // Events before this persona's own join are the room's history.
            let join_at = update.timeline.events.iter().rposition(|e| {
                matches!(
                    e.raw().deserialize(),
                    Ok(AnySyncTimelineEvent::State(AnySyncStateEvent::RoomMember(SyncStateEvent::Original(m))))
                        if m.state_key.as_str() == persona.user_id
                            && m.content.membership == MembershipState::Join
                )
            });
            for (n, ev) in update.timeline.events.iter().enumerate() {
                let backlog = backlog_only || join_at.is_some_and(|j| n < j);
                self.heard(persona, &room, ev.raw(), backlog).await;
            }
        }
        for room in client.invited_rooms() {
            self.consider_invite(persona, room).await;
        }
        if let Ok(r) = self.runtime.lock()
            && let Some(handle) = r.as_ref()
        {
            handle.save_state(state_key(&persona.user_id), response.next_batch.clone());
        }
        Ok(response.next_batch)
    }

    /// One timeline event seen by `persona` in `room`.
    async fn heard(
        &self,
        persona: &MatrixPersona,
        room: &Room,
        raw: &matrix_sdk::ruma::serde::Raw<AnySyncTimelineEvent>,
        backlog: bool,
    ) {
        let ev = match raw.deserialize() {
            Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
                SyncMessageLikeEvent::Original(ev),
            ))) => ev,
            Ok(_) => return, // State, reactions, redactions: not conversation.
            Err(e) => {
                tracing::warn!(persona = %persona.id, room = %room.room_id(), "Matrix: skipped an event that does not parse: {e}");
                return;
            }
        };
        // The personas' own events: the engine heard them when they were sent.
        if self.known.iter().any(|p| p.user_id == ev.sender.as_str()) {
            return;
        }
        if !self.first_sight(ev.event_id.as_str()) {
            return;
        }
        let (is_dm, dm_to) = if self.is_dm(room).await {
            (true, Some(persona.id.clone()))
        } else {
            (false, None)
        };
        let name = match room.get_member_no_sync(&ev.sender).await {
            Ok(Some(m)) => m.display_name().map(str::to_owned),
            _ => None,
        };
        let seen = Seen {
            room: room_id(room.room_id().as_str()),
            is_dm,
            dm_to,
            sender_name: name.as_deref(),
            personas: &self.known,
        };
        let Some(msg) = to_message(&ev, &seen) else {
            return;
        };
        if let Ok(r) = self.runtime.lock()
            && let Some(handle) = r.as_ref()
        {
            if backlog {
                handle.backlog(msg);
            } else {
                handle.inbound(msg);
            }
        }
    }

    /// Whether this is the first persona to see `event` (a shared room is
    /// heard once).
    fn first_sight(&self, event: &str) -> bool {
        self.seen.lock().is_ok_and(|mut s| s.first(event.to_owned()))
    }

    /// A DM: marked `m.direct`, or just this persona and one other member.
    async fn is_dm(&self, room: &Room) -> bool {
        if room.is_direct().await.unwrap_or(false) {
            return true;
        }
        room.joined_members_count() + room.invited_members_count() == 2
    }

    /// Accepts an invite from an allowed inviter or to a configured room.
    async fn consider_invite(&self, persona: &MatrixPersona, room: Room) {
        if room.state() != RoomState::Invited {
            return;
        }
        let inviter = match room.invite_details().await {
            Ok(invite) => invite.inviter_id.to_string(),
            Err(e) => {
                tracing::warn!(persona = %persona.id, room = %room.room_id(), "Matrix: cannot read an invite: {e}");
                return;
            }
        };
        let room_ok =
            self.settings.rooms.iter().any(|r| {
                r == room.room_id().as_str() || room.canonical_alias().is_some_and(|a| a.as_str() == r)
            });
        if !(room_ok || invited_by_allowed(&self.settings.invites_from, &inviter)) {
            tracing::info!(persona = %persona.id, room = %room.room_id(), %inviter, "Matrix: ignored an invite (not in platforms.matrix.invites_from)");
            return;
        }
        match room.join().await {
            Ok(()) => {
                tracing::info!(persona = %persona.id, room = %room.room_id(), %inviter, "Matrix: joined on invite")
            }
            Err(e) => {
                tracing::warn!(persona = %persona.id, room = %room.room_id(), "Matrix: cannot join: {e}")
            }
        }
    }

    /// The persona's client, waiting a while for its login: replies that
    /// were decided before a restart are sent again at start, before the
    /// accounts have logged in.
    async fn client(&self, persona: &PersonaId) -> Result<Client, PlatformError> {
        let deadline = tokio::time::Instant::now() + LOGIN_WAIT;
        loop {
            let login = self.logged_in.notified();
            if let Some(c) = self.clients.lock().ok().and_then(|c| c.get(persona).cloned()) {
                return Ok(c);
            }
            if tokio::time::timeout_at(deadline, login).await.is_err() {
                return Err(PlatformError(format!(
                    "{persona} is not logged in to Matrix right now"
                )));
            }
        }
    }

    async fn room(&self, persona: &PersonaId, room: &RoomId) -> Result<Room, PlatformError> {
        let client = self.client(persona).await?;
        let id = event::ROOMS.parse(room, |r| OwnedRoomId::try_from(r).ok())?;
        client
            .get_room(&id)
            .filter(|r| r.state() == RoomState::Joined)
            .ok_or_else(|| PlatformError(format!("{persona} is not in {room}: invite it there")))
    }
}

/// Whether `inviter` is in `invites_from` (a user id, or its server).
pub fn invited_by_allowed(invites_from: &[String], inviter: &str) -> bool {
    let server = inviter.split_once(':').map(|(_, s)| s);
    invites_from.iter().any(|allowed| {
        let allowed = allowed.trim();
        allowed == inviter || Some(allowed.trim_start_matches(':')) == server
    })
}

/// Signs `client` in with an access token (as device `TACTFUL`) and asks
/// the homeserver whose it is: the user id `whoami` gives.
async fn token_whoami(client: &Client, user_id: &str, token: &str) -> Result<String, String> {
    let url = client.homeserver().to_string();
    let user: OwnedUserId = user_id.try_into().map_err(|e| format!("{e}"))?;
    let session = MatrixSession {
        meta: SessionMeta {
            user_id: user,
            device_id: "TACTFUL".into(),
        },
        tokens: SessionTokens {
            access_token: token.to_owned(),
            refresh_token: None,
        },
    };
    client
        .matrix_auth()
        .restore_session(session, Default::default())
        .await
        .map_err(|e| tactful_core::cause::explain(&e, &url))?;
    Ok(client
        .whoami()
        .await
        .map_err(|e| tactful_core::cause::explain(&e, &url))?
        .user_id
        .to_string())
}

impl Connected for MatrixPlatform {
    /// Every account, whatever `held` says: the connection is held with
    /// the partition of every room of the platform.
    fn start(&self, runtime: RuntimeHandle, _held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        self.connect_runtime(runtime);
        MatrixPlatform::start(self)
    }

    fn probe(&self) -> BoxFuture<'_, Vec<tactful_runtime::Probe>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for persona in &self.shared.settings.personas {
                out.push(self.shared.probe(persona).await);
            }
            out
        })
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            // A few seconds for the first syncs: an account not syncing
            // yet is said to be connecting, not shown as live.
            let s = &self.shared.settings;
            let personas: Vec<&str> = s.personas.iter().map(|p| p.id.as_str()).collect();
            let states = Connections::for_banner(&self.shared.runtime, "Matrix", &personas).await;
            let users: Vec<String> = s
                .personas
                .iter()
                .zip(states)
                .map(|(p, state)| match state.banner_note() {
                    None => p.user_id.clone(),
                    Some(note) => format!("{} ({note})", p.user_id),
                })
                .collect();
            config::describe(s, &users)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invites_from_users_or_servers() {
        let allowed = vec![
            "@alice:hs.test".to_owned(),
            "team.org".to_owned(),
            ":corp.example".to_owned(),
        ];
        assert!(invited_by_allowed(&allowed, "@alice:hs.test"));
        assert!(!invited_by_allowed(&allowed, "@mallory:hs.test"));
        assert!(invited_by_allowed(&allowed, "@anyone:team.org"));
        assert!(invited_by_allowed(&allowed, "@x:corp.example"));
        assert!(!invited_by_allowed(&[], "@alice:hs.test"));
    }

    #[test]
    fn settings_debug_shows_no_secret() {
        let s = MatrixSettings {
            homeserver: "http://127.0.0.1:8008".into(),
            invites_from: vec![],
            rooms: vec![],
            personas: vec![MatrixPersona {
                id: "chef".into(),
                user_id: "@chef:hs.test".into(),
                auth: MatrixAuth::Password("hunter2".into()),
            }],
            state_dir: None,
            max_backoff: Duration::from_secs(60),
            sync_timeout: Duration::from_secs(30),
        };
        let shown = format!("{s:?}");
        assert!(
            shown.contains("@chef:hs.test") && !shown.contains("hunter2"),
            "{shown}"
        );
    }
}
