//! The XMPP section's settings: where to connect, the rooms, and each
//! persona's account.

use super::*;

/// How the connection to the server is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tls {
    /// STARTTLS, required (the default): the server's certificate is
    /// checked against the system's roots.
    Required,
    /// No TLS at all: only to a loopback address (a test server, or a
    /// server on the same machine), which the config checks.
    None,
}

/// One persona's XMPP account.
#[derive(Clone)]
pub struct XmppPersona {
    /// The persona.
    pub id: PersonaId,
    /// Its account's bare JID (`docs@example.org`).
    pub jid: BareJid,
    /// The account's password.
    pub password: String,
    /// The nick it takes in rooms.
    pub nick: String,
}

impl std::fmt::Debug for XmppPersona {
    // The password never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XmppPersona")
            .field("id", &self.id)
            .field("jid", &self.jid)
            .field("nick", &self.nick)
            .finish_non_exhaustive()
    }
}

/// `[platforms.xmpp]`.
#[derive(Clone, Debug)]
pub struct XmppSettings {
    /// The multi-user chats every persona joins (bare room JIDs).
    pub rooms: Vec<BareJid>,
    /// The host to connect to; `None`: the JID's domain, by its SRV
    /// records.
    pub server: Option<String>,
    /// The port, with `server`.
    pub port: u16,
    /// STARTTLS or nothing.
    pub tls: Tls,
    /// Who may invite a persona into a room: bare JIDs or whole domains.
    pub invites_from: Vec<String>,
    /// How often a persona on a fallback nick (`Docs_`) tries its own
    /// again.
    pub nick_retry: Duration,
    /// How often a persona checks it is still in each room (XEP-0410
    /// self-ping): a server restart or a kick it missed is noticed then.
    pub self_ping: Duration,
    /// A message said while tactful was away is answered if it is at most
    /// this old; older ones are context only.
    pub answer_missed: Duration,
    /// The personas with an account, in order.
    pub personas: Vec<XmppPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
}
