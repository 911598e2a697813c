//! The email section's settings: the IMAP and SMTP servers, the lists,
//! and each persona's mailbox.

use super::*;

/// How a connection to a mail server is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tls {
    /// TLS from the first byte (IMAPS on 993, SMTPS on 465): the default.
    Required,
    /// A plain connection upgraded with STARTTLS before anything is sent
    /// (IMAP on 143, submission on 587); refused if the server cannot.
    StartTls,
    /// No TLS: only to a loopback address, which the config checks.
    None,
}

impl Tls {
    /// The word the config uses for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Tls::Required => "required",
            Tls::StartTls => "starttls",
            Tls::None => "none",
        }
    }
}

/// One server: where and how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or address.
    pub host: String,
    /// Port.
    pub port: u16,
    /// How the connection is protected.
    pub tls: Tls,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// One persona's mailbox.
#[derive(Clone)]
pub struct EmailPersona {
    /// The persona.
    pub id: PersonaId,
    /// Its address, lower case (`docs@example.org`).
    pub address: String,
    /// The name people open a mail to it with ("Hi Docs,"), and its From
    /// name.
    pub name: String,
    /// Its login on both servers.
    pub username: String,
    /// Its password on both servers.
    pub password: String,
    /// A signature put under its answers, after `-- `.
    pub signature: Option<String>,
}

impl std::fmt::Debug for EmailPersona {
    // The password never reaches a log.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailPersona")
            .field("id", &self.id)
            .field("address", &self.address)
            .field("name", &self.name)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

/// `[platforms.email]`.
#[derive(Clone, Debug)]
pub struct EmailSettings {
    /// Where the mailboxes are read.
    pub imap: Endpoint,
    /// Where answers are submitted.
    pub smtp: Endpoint,
    /// The lists the personas are subscribed to, lower case: each a room.
    pub lists: Vec<String>,
    /// A mail that arrived while tactful was away is answered if it
    /// arrived at most this long ago; older ones are context only.
    pub answer_missed: Duration,
    /// How often a mailbox is looked at again without news from IDLE
    /// (servers end an IDLE after 30 minutes; some drop it silently).
    pub recheck: Duration,
    /// The personas with a mailbox, in order.
    pub personas: Vec<EmailPersona>,
    /// The longest wait between reconnection attempts.
    pub max_backoff: Duration,
}

impl EmailSettings {
    /// The persona whose address `address` is.
    pub(crate) fn persona_at(&self, address: &str) -> Option<&EmailPersona> {
        self.personas
            .iter()
            .find(|p| p.address.eq_ignore_ascii_case(address))
    }
}
