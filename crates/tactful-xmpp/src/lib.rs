//! XMPP for tactful: every persona is an XMPP account of its own.
//!
//! Each persona keeps one client connection (`tokio-xmpp`: STARTTLS,
//! SASL, resource binding, reconnecting by itself) and joins every room in
//! `rooms` under its nick. Whichever persona first hears a room's message
//! hands it in (by the room's stanza-id, XEP-0359), so a room several
//! personas sit in is heard once; each persona hears its own one-to-one
//! chats, which are DMs.
//!
//! - At a persona's first join of a room, the history the room sends is
//!   backlog (context, never answered). The last stanza-id handed in is
//!   saved per room ([`RuntimeHandle::save_state`], after the message), so
//!   after a restart or a reconnect the room's archive (XEP-0313) is read
//!   from there: what was said meanwhile is answered once if it is recent
//!   (`answer_missed_minutes`), else context. Live messages that arrive
//!   while the archive is read wait behind it.
//! - A taken nick becomes `Nick_` in that room and the persona tries its
//!   own again every `nick_retry_seconds`; meanwhile it still answers to
//!   its own nick. Kicked, it rejoins; banned (301), it stays out and says
//!   so; every `self_ping_seconds` it checks it is still in each room
//!   (XEP-0410) and rejoins if not.
//! - Addressed: its nick opening a line (`Docs: …`, `Docs, …`), a mention
//!   (XEP-0372, its bare JID or its occupant JID), a reply to its message
//!   (XEP-0461), a DM.
//! - Answers: replies with the quote fallback (XEP-0461, XEP-0428),
//!   streaming as corrections of one message (XEP-0308), typing
//!   (XEP-0085), reactions (XEP-0444), a silent turn's placeholder
//!   retracted (XEP-0424), Markdown as the plain text XMPP clients style
//!   (XEP-0393).
//!
//! Room ids are `xmpp:<room jid>` and `xmpp:dm:<persona>:<bare jid>`;
//! message ids are the room's stanza-ids (in a DM, the message's id).

pub mod config;
mod doctor;
mod hear;
mod muc;
mod rooms;
mod send;
mod session;
mod settings;
mod stanzas;
pub mod text;

pub use rooms::ROOMS;
pub use settings::{Tls, XmppPersona, XmppSettings};

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{MsgId, PersonaId, RoomId, UserId};
use tactful_runtime::account::{HeardOnce, Recent};
use tactful_runtime::{Connected, Held, PlatformError, RoomScheme, Roster, RuntimeHandle, wall_clock};
use tokio_xmpp::jid::BareJid;

use rooms::{Target, target_of};

/// How many message ids are remembered: to hear a shared room once, and
/// where each of a persona's recent posts came from.
const REMEMBERED: usize = 4096;

/// How long a reply waits for its persona's connection.
const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// The saved-state key of the last stanza-id handed in from `room`.
pub fn state_key(room: &BareJid) -> String {
    format!("xmpp:last:{room}")
}

struct Shared {
    settings: XmppSettings,
    roster: Roster,
    /// Per persona: the running session's command channel.
    live: Mutex<HashMap<PersonaId, tokio::sync::mpsc::Sender<session::Command>>>,
    /// Per room and persona: the nick it has there now.
    nicks: Mutex<HashMap<(BareJid, PersonaId), String>>,
    /// Per room and persona: since when it has been in the room (this
    /// connection), so a room-history copy of a message another persona
    /// heard live is left to that persona's session.
    joined: Mutex<HashMap<(BareJid, PersonaId), tactful_core::Timestamp>>,
    /// Per room: the last stanza-id handed in (from the store at start).
    last: Mutex<HashMap<BareJid, String>>,
    /// Message ids heard already (a room several personas sit in).
    seen: Mutex<HeardOnce<String>>,
    /// What recent messages said and who wrote them: a reply's quote.
    texts: Mutex<Recent<String, (String, String)>>,
    /// A persona's recent posts: the id a room gave each (its stanza-id,
    /// which replies and reactions name) to the id tactful gave it (which
    /// corrections and retractions name).
    posts: Mutex<Recent<String, send::Post>>,
    epoch: u64,
    next: AtomicU64,
    closing: AtomicBool,
    /// Woken whenever a session comes online.
    connected: tokio::sync::Notify,
}

/// The XMPP platform: a [`tactful_runtime::Platform`] for the runtime and
/// the sessions.
#[derive(Clone)]
pub struct XmppPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for XmppPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XmppPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

impl XmppPlatform {
    /// An XMPP platform resuming from `saved` (the store's platform state);
    /// nothing connects before [`Connected::start`].
    pub fn new(settings: XmppSettings, saved: &BTreeMap<String, String>) -> XmppPlatform {
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("XMPP", personas, settings.max_backoff);
        let last = saved
            .iter()
            .filter_map(|(k, v)| Some((BareJid::new(k.strip_prefix("xmpp:last:")?).ok()?, v.clone())))
            .collect();
        XmppPlatform {
            shared: Arc::new(Shared {
                settings,
                roster,
                live: Mutex::new(HashMap::new()),
                nicks: Mutex::new(HashMap::new()),
                joined: Mutex::new(HashMap::new()),
                last: Mutex::new(last),
                seen: Mutex::new(HeardOnce::new(REMEMBERED)),
                texts: Mutex::new(Recent::new(REMEMBERED)),
                posts: Mutex::new(Recent::new(REMEMBERED)),
                epoch: wall_clock().as_millis(),
                next: AtomicU64::new(1),
                closing: AtomicBool::new(false),
                connected: tokio::sync::Notify::new(),
            }),
        }
    }

    /// How many personas are online.
    pub fn connected(&self) -> usize {
        self.shared.live.lock().map_or(0, |l| l.len())
    }
}

impl Shared {
    /// A new id for a stanza tactful sends (its origin-id too): unique
    /// across restarts, and with a random part nobody can guess, since
    /// echoes and IQ answers are matched by it.
    fn new_id(&self) -> String {
        format!(
            "tf{}-{}-{:016x}",
            self.epoch,
            self.next.fetch_add(1, Ordering::SeqCst),
            rand::random::<u64>()
        )
    }

    /// The nick `persona` has in `room` now, if it is in.
    /// Whether a persona other than `me` joined `room` before `me` did
    /// (this connection): it heard live what was said since it joined,
    /// and took the room's history as it joined, so a history copy `me`
    /// gets is its to hand in.
    fn joined_before(&self, room: &BareJid, me: &PersonaId) -> bool {
        let Ok(joined) = self.joined.lock() else {
            return false;
        };
        joined_before(&joined, room, me)
    }

    fn nick_in(&self, room: &BareJid, persona: &PersonaId) -> Option<String> {
        self.nicks
            .lock()
            .ok()
            .and_then(|n| n.get(&(room.clone(), persona.clone())).cloned())
    }

    fn persona(&self, id: &PersonaId) -> Result<&XmppPersona, PlatformError> {
        self.settings
            .personas
            .iter()
            .find(|p| &p.id == id)
            .ok_or_else(|| PlatformError(format!("{id} has no XMPP account")))
    }
}

impl Connected for XmppPlatform {
    /// Every account, whatever `held` says: the connections are held with
    /// the partition of every XMPP room.
    fn start(&self, runtime: RuntimeHandle, _held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared.roster.keep_runtime(runtime);
        shared
            .roster
            .start_every(|i| Box::pin(shared.clone().keep_connected(i)))
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(async move {
            let shared = &self.shared;
            let everyone = shared.settings.personas.len();
            tactful_runtime::waiting::until(&shared.connected, Duration::from_secs(5), || {
                (self.connected() == everyone).then_some(())
            })
            .await;
            let live = shared
                .live
                .lock()
                .map(|l| l.keys().cloned().collect::<Vec<_>>())
                .unwrap_or_default();
            let nicks: Vec<String> = shared
                .settings
                .personas
                .iter()
                .map(|p| {
                    let taken: Vec<String> = shared
                        .settings
                        .rooms
                        .iter()
                        .filter_map(|r| shared.nick_in(r, &p.id).filter(|n| n != &p.nick))
                        .collect();
                    match (live.contains(&p.id), taken.first()) {
                        (false, _) => format!("{} (still connecting)", p.nick),
                        (true, Some(n)) => format!("{n} ({} was taken)", p.nick),
                        (true, None) => p.nick.clone(),
                    }
                })
                .collect();
            config::banner(&shared.settings, &nicks)
        })
    }

    /// Logs each account in on a connection of its own and joins each room
    /// under a nick of the doctor's (the persona's own is left to the
    /// running service), then leaves.
    fn probe(&self) -> BoxFuture<'_, Vec<tactful_runtime::Probe>> {
        Box::pin(doctor::probe_all(&self.shared))
    }
}

/// Whether a persona other than `me` joined `room` (in `joined`) before
/// `me` (ties go by persona id, so of two, one hands the history in).
fn joined_before(
    joined: &HashMap<(BareJid, PersonaId), tactful_core::Timestamp>,
    room: &BareJid,
    me: &PersonaId,
) -> bool {
    let mine = joined.get(&(room.clone(), me.clone())).copied();
    joined.iter().any(|((r, p), since)| {
        r == room
            && p != me
            && mine.is_none_or(|mine| (since.as_millis(), p.as_str()) < (mine.as_millis(), me.as_str()))
    })
}

#[cfg(test)]
mod joined_tests {
    use super::*;
    use tactful_core::Timestamp;

    #[test]
    fn a_history_copy_is_left_to_a_persona_that_joined_first() {
        let room = BareJid::new("story@conference.localhost").expect("jid");
        let other = BareJid::new("other@conference.localhost").expect("jid");
        let (docs, chef, amb) = (
            PersonaId::from("docs"),
            PersonaId::from("chef"),
            PersonaId::from("amb"),
        );
        let mut joined = HashMap::new();
        joined.insert((room.clone(), docs.clone()), Timestamp::from_millis(10_000));
        joined.insert((room.clone(), chef.clone()), Timestamp::from_millis(10_009));
        // Chef joined 9 ms after docs: whatever chef's history holds, docs
        // heard live or took as its own history.
        assert!(joined_before(&joined, &room, &chef));
        // Docs was first: its history copies are the ones handed in.
        assert!(!joined_before(&joined, &room, &docs));
        // Not joined yet (the history comes before the nick is noted):
        // another persona is in.
        assert!(joined_before(&joined, &room, &amb));
        // Another room.
        assert!(!joined_before(&joined, &other, &amb));
        // A tie goes by persona id: one of the two takes the history.
        joined.insert((room.clone(), amb.clone()), Timestamp::from_millis(10_000));
        assert!(!joined_before(&joined, &room, &amb));
        assert!(joined_before(&joined, &room, &docs));
    }
}
