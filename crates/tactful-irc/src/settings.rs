//! The IRC section's settings: the server, and each persona's nick.

use super::*;

/// One persona's IRC identity.
#[derive(Clone, Debug)]
pub struct IrcPersona {
    /// The persona.
    pub id: PersonaId,
    /// Its nick.
    pub nick: String,
    /// NickServ password, if the nick is registered.
    pub password: Option<String>,
}

/// `[platforms.irc]`.
#[derive(Clone)]
pub struct IrcSettings {
    /// The server's host name.
    pub server: String,
    /// Its port.
    pub port: u16,
    /// Whether to use TLS.
    pub tls: bool,
    /// Channels every persona joins.
    pub channels: Vec<String>,
    /// The least pause between two lines one persona sends.
    pub send_interval: Duration,
    /// The personas present, first one listening for the channels.
    pub personas: Vec<IrcPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// How often a persona on a fallback nick (`docs_`) asks the server
    /// whether its own is free again, to take it back.
    pub nick_retry: Duration,
}

impl std::fmt::Debug for IrcSettings {
    // Passwords never reach a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IrcSettings")
            .field("server", &self.server)
            .field("port", &self.port)
            .field("tls", &self.tls)
            .field("channels", &self.channels)
            .finish_non_exhaustive()
    }
}
