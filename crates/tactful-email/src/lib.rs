//! Email for tactful: a mailing list is a room, a thread is a thread,
//! and every persona is a mailbox of its own.
//!
//! Each persona's mailbox is watched over IMAP with IDLE (`async-imap`);
//! answers are submitted over SMTP with the persona's own login
//! (`lettre`). Mail is read with `mail-parser` (broken MIME, every
//! charset) in [`read`](crate::read), and answers are written in
//! [`write`](crate::write).
//!
//! - Rooms: a configured list (known by `List-Post`, `List-Id`, else its
//!   address among the recipients) is `email:<list address>`; other mail
//!   to a persona is a DM, `email:dm:<persona>:<sender>`. A thread is its
//!   first message's Message-ID (by `References`, `In-Reply-To`, else the
//!   subject without `Re:`). A list post reaches every persona's mailbox:
//!   it is heard once, by Message-ID.
//! - Addressed: the persona's address in To or Cc, a reply to its mail,
//!   its name opening the body ("Hi Docs,", "Docs:"), a DM.
//! - Never answered, heard as context: mail a machine wrote
//!   (`Auto-Submitted` other than `no`, `Precedence: bulk`/`junk`,
//!   bounces and delivery reports, out-of-office replies) and any mail
//!   from a persona's address, so personas never answer each other by
//!   mail. Every answer carries `Auto-Submitted: auto-replied`.
//! - Restart: the last UID handed in per mailbox (with the mailbox's
//!   UIDVALIDITY) is saved after the mail it covers. What a mailbox holds
//!   at its first start is backlog; mail that arrived while tactful was
//!   away is answered if it arrived within `answer_missed_minutes`.
//! - Answers go once, complete (no streaming: a mail cannot be edited),
//!   with a Message-ID made from the reply's idempotency key, so the one
//!   send a crash can repeat reaches people's clients as the same mail.

pub mod config;
mod doctor;
mod hear;
mod imap;
mod mailbox;
pub mod read;
pub mod rooms;
mod send;
mod settings;
pub mod write;

pub use rooms::ROOMS;
pub use settings::{EmailPersona, EmailSettings, Endpoint, Tls};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{PersonaId, RoomId};
use tactful_runtime::account::{HeardOnce, Recent};
use tactful_runtime::{Connected, Held, PlatformError, RoomScheme, Roster, RuntimeHandle};

/// How many mails are remembered: to hear a list post once, and to
/// thread an answer under the mail it answers.
const REMEMBERED: usize = 4096;

/// The saved-state key of the last UID handed in from `persona`'s
/// mailbox; its value is `<uidvalidity>:<uid>`.
pub fn state_key(persona: &PersonaId) -> String {
    format!("email:uid:{persona}")
}

/// Where a mailbox stands: its UIDVALIDITY and the last UID handed in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    validity: u32,
    uid: u32,
}

impl Mark {
    fn parse(s: &str) -> Option<Mark> {
        let (v, u) = s.split_once(':')?;
        Some(Mark {
            validity: v.parse().ok()?,
            uid: u.parse().ok()?,
        })
    }

    fn to_saved(self) -> String {
        format!("{}:{}", self.validity, self.uid)
    }
}

/// What tactful remembers of a recent mail: what an answer to it needs.
#[derive(Clone, Debug)]
pub(crate) struct Known {
    subject: String,
    references: Vec<String>,
    author: String,
    text: String,
    /// The thread it is in.
    root: String,
}

struct Shared {
    settings: EmailSettings,
    roster: Roster,
    /// Per persona: where its mailbox stands (from the store at start).
    marks: Mutex<HashMap<PersonaId, Mark>>,
    /// Mail heard already (`<room> <Message-ID>`): a list post reaches
    /// every persona's mailbox.
    seen: Mutex<HeardOnce<String>>,
    /// Recent mail by Message-ID.
    known: Mutex<Recent<String, Known>>,
    /// Per room and subject (without `Re:`): the thread, for mail whose
    /// client dropped the threading headers.
    subjects: Mutex<Recent<(RoomId, String), String>>,
    /// Per thread: its latest mail (an answer without a mail to answer
    /// goes under it).
    latest: Mutex<Recent<String, String>>,
    closing: AtomicBool,
    /// Submission connections, one per persona, made on first use.
    smtp: Mutex<HashMap<PersonaId, send::Transport>>,
}

/// The email platform: a [`tactful_runtime::Platform`] for the runtime
/// and the mailboxes.
#[derive(Clone)]
pub struct EmailPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for EmailPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

/// Reads the marks in `saved` (the store's platform state).
fn marks_of(saved: &BTreeMap<String, String>) -> HashMap<PersonaId, Mark> {
    saved
        .iter()
        .filter_map(|(k, v)| Some((PersonaId::from(k.strip_prefix("email:uid:")?), Mark::parse(v)?)))
        .collect()
}

impl EmailPlatform {
    /// An email platform resuming from `saved` (the store's platform
    /// state); nothing connects before [`Connected::start`].
    pub fn new(settings: EmailSettings, saved: &BTreeMap<String, String>) -> EmailPlatform {
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("email", personas, settings.max_backoff);
        EmailPlatform {
            shared: Arc::new(Shared {
                settings,
                roster,
                marks: Mutex::new(marks_of(saved)),
                seen: Mutex::new(HeardOnce::new(REMEMBERED)),
                known: Mutex::new(Recent::new(REMEMBERED)),
                subjects: Mutex::new(Recent::new(REMEMBERED)),
                latest: Mutex::new(Recent::new(REMEMBERED)),
                closing: AtomicBool::new(false),
                smtp: Mutex::new(HashMap::new()),
            }),
        }
    }
}

impl Shared {
    fn persona(&self, id: &PersonaId) -> Result<&EmailPersona, PlatformError> {
        self.settings
            .personas
            .iter()
            .find(|p| &p.id == id)
            .ok_or_else(|| PlatformError(format!("{id} has no mailbox")))
    }
}

impl Connected for EmailPlatform {
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared.roster.start(runtime, held, |i, listening| {
            Box::pin(shared.clone().keep_watching(i, listening))
        })
    }

    fn change_held(
        &self,
        held: &Held,
        saved: &BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let shared = &self.shared;
        Some(shared.roster.change(held, |i, listening| {
            if listening {
                // A mailbox taken over goes on from where its last
                // watcher saved.
                let id = shared.settings.personas[i].id.clone();
                if let Ok(mut marks) = shared.marks.lock() {
                    match saved.get(&state_key(&id)).and_then(|v| Mark::parse(v)) {
                        Some(m) => marks.insert(id, m),
                        None => marks.remove(&id),
                    };
                }
            }
            Box::pin(shared.clone().keep_watching(i, listening))
        }))
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let shared = &self.shared;
            let states = shared.roster.banner_states().await;
            let names: Vec<String> = shared
                .settings
                .personas
                .iter()
                .zip(states)
                .map(|(p, s)| match s {
                    tactful_runtime::LinkState::Connected => p.address.clone(),
                    tactful_runtime::LinkState::Connecting => format!("{} (still connecting)", p.address),
                    tactful_runtime::LinkState::Down(why) => format!("{} (down: {why})", p.address),
                })
                .collect();
            config::banner(&shared.settings, &names)
        })
    }

    fn probe(&self) -> BoxFuture<'_, Vec<tactful_runtime::Probe>> {
        Box::pin(doctor::probe_all(&self.shared))
    }
}

/// Whether a wait of `d` has passed since `t` (wall clock).
fn within(t: tactful_core::Timestamp, d: Duration) -> bool {
    tactful_runtime::wall_clock().saturating_since(t) <= d
}
