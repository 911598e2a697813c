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
mod invites;
mod send;
mod session;
mod settings;
mod sync;

pub use invites::invited_by_allowed;
pub use settings::{MatrixAuth, MatrixPersona, MatrixSettings};
pub use sync::state_key;

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
use tactful_runtime::account::HeardOnce;
use tactful_runtime::{Connected, Held, PlatformError, Roster, RuntimeHandle};

use crate::event::{KnownPersona, Seen, localpart, room_id, to_message};

/// How many recent event ids are remembered to hear a shared room once.
const REMEMBERED_EVENTS: usize = 4096;

/// How long a send waits for its persona to log in.
const LOGIN_WAIT: Duration = Duration::from_secs(60);

/// Events per room and sync: enough that a short outage leaves no gap.
const TIMELINE_LIMIT: u32 = 100;

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
    /// The accounts: the runtime kept, and each one's backoff.
    roster: Roster,
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
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("Matrix", personas, settings.max_backoff);
        MatrixPlatform {
            shared: Arc::new(Shared {
                settings,
                known,
                clients: Mutex::new(HashMap::new()),
                logged_in: tokio::sync::Notify::new(),
                saved: Mutex::new(tokens),
                seen: Mutex::new(HeardOnce::new(REMEMBERED_EVENTS)),
                roster,
                synced: AtomicUsize::new(0),
            }),
        }
    }

    /// Where heard messages go.
    pub fn connect_runtime(&self, handle: RuntimeHandle) {
        self.shared.roster.keep_runtime(handle);
    }

    /// Logs every persona in and starts its sync loop (each retrying on
    /// its own until the returned tasks are aborted).
    pub fn start(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared
            .roster
            .start_every(|i| Box::pin(shared.clone().keep_syncing(i)))
    }

    /// How many personas have finished their first sync (for readiness).
    pub fn synced(&self) -> usize {
        self.shared.synced.load(Ordering::SeqCst)
    }
}

impl Shared {
    async fn room(&self, persona: &PersonaId, room: &RoomId) -> Result<Room, PlatformError> {
        let client = self.client(persona).await?;
        let id = event::ROOMS.parse(room, |r| OwnedRoomId::try_from(r).ok())?;
        client
            .get_room(&id)
            .filter(|r| r.state() == RoomState::Joined)
            .ok_or_else(|| PlatformError(format!("{persona} is not in {room}: invite it there")))
    }
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
            let states = self.shared.roster.banner_states().await;
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
