//! The Matrix section's settings: the homeserver, and how each persona
//! logs in (a password, or an access token and its device).

use super::*;

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
