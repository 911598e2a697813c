//! The one outbound interface every chat platform implements.
//!
//! A platform adapter turns its events into [`tactful_core::Message`]s (the
//! inbound chokepoint) and implements [`Platform`] for everything that goes
//! out (the outbound chokepoint). Streaming placeholders, silence, reply
//! targeting, chunking and retries are decided once, in
//! the delivery path (`delivery.rs`), in terms of these few calls.

use futures::future::BoxFuture;
use tactful_core::{MsgId, PersonaId, RoomId, ThreadId};

use crate::handle::RuntimeHandle;

/// What a send comes to: the platform's id for the message, or why not.
pub type Sent<'a> = BoxFuture<'a, Result<MsgId, PlatformError>>;

/// What an edit, a deletion or a reaction comes to.
pub type Done<'a> = BoxFuture<'a, Result<(), PlatformError>>;

/// Where a call about a posted message goes: who speaks, the room, and
/// the thread (Discord and Slack address a thread's messages through it).
/// One value, so every platform's `edit`, `react`, `delete` and `typing`
/// take the same three things the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At<'a> {
    /// The persona whose account acts.
    pub persona: &'a PersonaId,
    /// The room.
    pub room: &'a RoomId,
    /// The thread, if the message is in one.
    pub thread: Option<&'a ThreadId>,
}

impl<'a> At<'a> {
    /// `persona` in `room`, in `thread` if any.
    pub fn new(persona: &'a PersonaId, room: &'a RoomId, thread: Option<&'a ThreadId>) -> At<'a> {
        At {
            persona,
            room,
            thread,
        }
    }
}

/// What a platform can do with messages, and how its rooms are named: one
/// constant per platform, which the delivery path and the driver read
/// instead of asking each platform the same questions in code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Messages can be edited (streaming shows a placeholder that grows).
    pub can_edit: bool,
    /// Messages can be deleted (a silent turn removes its placeholder).
    pub can_delete: bool,
    /// Replies to a specific message exist natively.
    pub native_replies: bool,
    /// The longest message, in characters.
    pub max_message_chars: usize,
    /// Whether [`Platform::react`] works here. Where it does not (IRC), a
    /// persona that chose silence on an addressed message says a short
    /// notice instead (see `addressed_silence`).
    pub reactions: bool,
    /// Where there are no reactions, whether the notice may stand in for
    /// one. Not by mail, where every message reaches a list's inboxes
    /// and a notice is noise: an addressed silence stays silent there.
    pub silence_notices: bool,
    /// Whether posting the same [`OutMessage::key`] twice makes one
    /// message (the web room, Matrix). Where it does not (IRC, Telegram,
    /// Discord, Slack), a failed send may still have arrived, so delivery
    /// does not try it again: the platform retries only what surely did
    /// not reach the server.
    pub deduplicates_sends: bool,
    /// How the platform's rooms are named, so that [`Platform::owns`]
    /// needs no code of its own; `None` for the web room, which takes the
    /// rooms no other platform claims.
    pub rooms: Option<RoomScheme>,
}

impl Capabilities {
    /// A platform that can only post: no edits, deletes, native replies
    /// or reactions; posts deduplicated by key; every room its own. Test
    /// doubles start from it (`..Capabilities::PLAIN`).
    pub const PLAIN: Capabilities = Capabilities {
        can_edit: false,
        can_delete: false,
        native_replies: false,
        max_message_chars: 2000,
        reactions: false,
        silence_notices: true,
        deduplicates_sends: true,
        rooms: None,
    };
}

/// How a platform turns its own channel ids into tactful room ids and
/// back: a fixed prefix (`discord:`, `slack:`, `tg:`, `matrix:`, `irc:`)
/// before the platform's id, so rooms of several platforms never clash
/// and every platform refuses a room that is not its own with the same
/// words ("web:main is not a Discord channel").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoomScheme {
    /// The prefix, colon included.
    pub prefix: &'static str,
    /// What one room is called on the platform, for errors: `Discord
    /// channel`, `Telegram chat`.
    pub noun: &'static str,
}

impl RoomScheme {
    /// The tactful room of the platform's `native` id.
    pub fn room(&self, native: impl std::fmt::Display) -> RoomId {
        RoomId::new(format!("{}{native}", self.prefix))
    }

    /// The platform's id of `room`, if it is one of this platform's.
    pub fn native<'r>(&self, room: &'r RoomId) -> Option<&'r str> {
        room.as_str().strip_prefix(self.prefix)
    }

    /// The platform's id of `room` read by `parse`, or the error that says
    /// `room` is not one of this platform's (or not a well-formed one).
    pub fn parse<'r, T>(
        &self,
        room: &'r RoomId,
        parse: impl FnOnce(&'r str) -> Option<T>,
    ) -> Result<T, PlatformError> {
        self.native(room)
            .and_then(parse)
            .ok_or_else(|| PlatformError(format!("{room} is not a {}", self.noun)))
    }
}

/// The longest one outbound call may take, rate-limit waits included
/// (HTTP clients retry a 429 by themselves, without end if the server
/// keeps refusing). Past it the call fails and the delivery path decides
/// what to do, as for any other failure.
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// The error of a call that ran past [`CALL_DEADLINE`], the same words on
/// every platform.
pub fn past_deadline(platform: &str) -> PlatformError {
    PlatformError(format!(
        "{platform}: no answer within {}s (rate limited all along?)",
        CALL_DEADLINE.as_secs()
    ))
}

/// Runs one outbound call under [`CALL_DEADLINE`], its error prefixed
/// with the platform's name.
pub async fn within_deadline<T, E: std::fmt::Display>(
    platform: &str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, PlatformError> {
    match tokio::time::timeout(CALL_DEADLINE, call).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(PlatformError(format!("{platform}: {e}"))),
        Err(_) => Err(past_deadline(platform)),
    }
}

/// A platform call that failed. The text is logged: it is shown through
/// [`tactful_core::secrets::redact`], since a server's error may quote a
/// credential back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", tactful_core::secrets::redact(.0))]
pub struct PlatformError(pub String);

/// Where `persona`'s account is among a platform's accounts, which each
/// platform keeps in the order of its settings (`ids`): every outbound
/// call starts with this lookup, and a persona without an account there
/// gets the same error on every platform ("docs has no Discord bot").
pub fn account_index<'a>(
    ids: impl IntoIterator<Item = &'a PersonaId>,
    persona: &PersonaId,
    account: &str,
) -> Result<usize, PlatformError> {
    ids.into_iter()
        .position(|id| id == persona)
        .ok_or_else(|| PlatformError(format!("{persona} has no {account}")))
}

/// A message to post.
#[derive(Clone, Copy, Debug)]
pub struct OutMessage<'a> {
    /// Who speaks (platforms with one account per persona post as it).
    pub persona: &'a PersonaId,
    /// Where.
    pub room: &'a RoomId,
    /// In which thread, if any.
    pub thread: Option<&'a ThreadId>,
    /// The text.
    pub text: &'a str,
    /// The message this one replies to, if any. A platform without native
    /// replies addresses its author another way (IRC: a `nick: ` prefix).
    pub reply_to: Option<&'a MsgId>,
    /// An idempotency key for a reply's part or a placeholder: the same
    /// key sent again (after a crash, say) means the same message. A
    /// platform that can deduplicate returns the message it already made
    /// instead of posting another (the web room remembers keys; Matrix
    /// uses it as the transaction id).
    pub key: Option<&'a str>,
    /// Whether this is a placeholder: a message that stands for an answer
    /// still being written, edited into it or deleted later (Slack counts
    /// a thread as a persona's only once it holds an answer there).
    pub placeholder: bool,
    /// For a later part of a split reply: the platform id of the reply's
    /// first part. Where a reply's place is not given by `thread` alone
    /// (Slack answers in a thread under the message answered), the part
    /// goes where the first one went, not to the channel. `None` otherwise.
    pub follows: Option<&'a MsgId>,
    /// For a later part: what the reply's first part replied to, so a
    /// process with no record of where the first part went (another
    /// process posted it, before dying) can still tell (Slack: the thread
    /// under the message answered). `None` otherwise.
    pub first_replied_to: Option<&'a MsgId>,
}

/// A chat platform as the service runs it: the outbound side ([`Platform`])
/// and the accounts it connects, started once the runtime exists (the
/// runtime is given its platforms before it starts, and they need its
/// handle to hand in what people say). Every platform but the built-in web
/// room implements it, and the binary starts them all the same way.
pub trait Connected: Platform {
    /// Connects the accounts `held` names, handing what is heard to
    /// `runtime`; the tasks run (reconnecting as needed) until aborted.
    /// Every other account is only identified (its bot id and username,
    /// without listening), so a mention of a bot another process listens
    /// with is still recognised in what this one hears. A platform whose
    /// connection is held with its rooms' partition (IRC, Matrix: see
    /// `tactful_store::CONNECTION_BOUND`) is always given [`Held::Every`].
    /// Spawns its tasks and returns: it runs under the connections' lock
    /// of processes sharing a store (see `PlatformConfig::build`).
    fn start(&self, runtime: RuntimeHandle, held: &Held) -> Vec<tokio::task::JoinHandle<()>>;

    /// Changes the accounts this running connection listens with to those
    /// `held` names, leaving the others connected as they are: when
    /// processes sharing a store share the accounts out again (one joined
    /// or died), an account that stays put keeps its connection (a
    /// Discord gateway session started again misses what is said
    /// meanwhile) and what the platform remembers (Slack's threads).
    /// `saved` is the platform state the store holds now: what the last
    /// holder of an account taken over saved (Telegram's offsets). The
    /// tasks started, which the caller stops with the others; `None` when
    /// this platform's accounts do not change one by one (IRC, Matrix:
    /// held with their rooms' partition), and a new connection is started
    /// instead.
    fn change_held(
        &self,
        held: &Held,
        saved: &std::collections::BTreeMap<String, String>,
    ) -> Option<Vec<tokio::task::JoinHandle<()>>> {
        let _ = (held, saved);
        None
    }

    /// The start banner's line, as connected: may wait a few seconds for
    /// the accounts, to name what they really got (IRC's nick in use).
    fn describe(&self) -> BoxFuture<'_, String>;

    /// Checks each account against the platform without listening or
    /// joining anything (a credential check, the server answering): one
    /// [`Probe`] per check, for `tactful doctor`. Each check gives up
    /// after [`PROBE_TIMEOUT`].
    fn probe(&self) -> BoxFuture<'_, Vec<Probe>>;
}

/// Which of a platform's accounts this process listens with. Alone with
/// its store a process holds every one; processes sharing a store hold a
/// bot account each at a time (one `getUpdates` poller per Telegram
/// token, one Socket Mode listener per Slack app, one gateway session per
/// Discord bot), by lease.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Held {
    /// Every account.
    #[default]
    Every,
    /// These personas' accounts only.
    Only(std::collections::BTreeSet<PersonaId>),
}

impl Held {
    /// Whether this process listens with `persona`'s account.
    pub fn includes(&self, persona: &PersonaId) -> bool {
        match self {
            Held::Every => true,
            Held::Only(set) => set.contains(persona),
        }
    }
}

/// How long one [`Connected::probe`] check waits for the platform.
pub const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// One check `tactful doctor` ran against a platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Probe {
    /// What was checked: `Telegram docs (getMe)`.
    pub what: String,
    /// What it found (`@docs_bot`), or why it failed and what to do.
    pub outcome: Result<String, ProbeFailed>,
}

/// A failed check: the cause as the platform gave it (secrets masked by
/// the caller) and the fix to try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeFailed {
    /// What went wrong: `401 Unauthorized`, `connection refused: http://…`.
    pub cause: String,
    /// What to do about it.
    pub fix: String,
}

impl Probe {
    /// A check that passed.
    pub fn ok(what: impl Into<String>, found: impl Into<String>) -> Probe {
        Probe {
            what: what.into(),
            outcome: Ok(found.into()),
        }
    }

    /// A check that failed.
    pub fn failed(what: impl Into<String>, cause: impl Into<String>, fix: impl Into<String>) -> Probe {
        Probe {
            what: what.into(),
            outcome: Err(ProbeFailed {
                cause: cause.into(),
                fix: fix.into(),
            }),
        }
    }

    /// Runs `check` within [`PROBE_TIMEOUT`]: its error, or the time
    /// running out, fails the probe with `fix`.
    pub async fn run<F, E>(what: String, fix: &str, check: F) -> Probe
    where
        F: std::future::Future<Output = Result<String, E>>,
        E: std::fmt::Display,
    {
        match tokio::time::timeout(PROBE_TIMEOUT, check).await {
            Ok(Ok(found)) => Probe::ok(what, found),
            Ok(Err(e)) => Probe::failed(what, e.to_string(), fix),
            Err(_) => Probe::failed(
                what,
                format!("no answer within {} s", PROBE_TIMEOUT.as_secs()),
                fix,
            ),
        }
    }
}

/// One chat platform, outbound.
pub trait Platform: Send + Sync + std::fmt::Debug {
    /// What the platform supports.
    fn capabilities(&self) -> Capabilities;

    /// Whether `room` is one of this platform's rooms, when several
    /// platforms serve one runtime: read off [`Capabilities::rooms`].
    fn owns(&self, room: &RoomId) -> bool {
        self.capabilities()
            .rooms
            .is_none_or(|scheme| scheme.native(room).is_some())
    }

    /// Cuts a reply into the parts the delivery path sends one by one,
    /// recording each before the next goes, so that a crash sends again
    /// at most the part in flight. `reply_to` is what the first part will
    /// answer. The default cuts the Markdown to
    /// [`Capabilities::max_message_chars`] with code fences balanced, and
    /// [`Platform::send`] renders each part. A platform whose `send` would
    /// post one part as several messages of its own (IRC's lines) cuts
    /// here instead, one message per part, in the form its `send` posts
    /// as it is: otherwise a crash in the middle of a 40-line answer sends
    /// the lines before it again.
    fn parts(&self, room: &RoomId, reply_to: Option<&MsgId>, text: &str) -> Vec<String> {
        let _ = (room, reply_to);
        tactful_core::delivery::split_message(text, self.capabilities().max_message_chars)
    }

    /// Posts a message, one part as [`Platform::parts`] cut it; returns
    /// its platform id.
    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a>;

    /// Replaces the text of a message this persona posted, in `thread`
    /// when it was posted in one (Discord addresses a thread's messages
    /// through the thread; the others need only the room).
    /// Platforms without edits ([`Capabilities::can_edit`] false) keep the
    /// default, which the delivery path never calls.
    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        let _ = (persona, room, thread, id, text);
        Box::pin(async { Err(PlatformError("messages cannot be edited here".into())) })
    }

    /// Shows that `persona` is writing in `room` (Telegram's "typing…"
    /// status). Called when a reply turn starts and every few seconds
    /// while it runs, since platforms let the status lapse by itself; a
    /// failure only costs the status, so there is nothing to return.
    /// Platforms without such a status keep the default.
    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        let _ = (persona, room, thread);
        Box::pin(async {})
    }

    /// The service is stopping and every reply has been delivered: leave
    /// politely (IRC sends `QUIT` with a reason, so people see the persona
    /// left on purpose rather than "connection closed"). Called once, on a
    /// graceful shutdown only.
    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Puts `emoji` (one Unicode emoji) on message `msg` of `room`, as
    /// `persona`: the sign that it read a message addressed to it and
    /// chose not to answer. Platforms without reactions
    /// ([`Capabilities::reactions`] false) keep the default.
    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        let _ = (persona, room, thread, msg, emoji);
        Box::pin(async { Err(PlatformError("there are no reactions here".into())) })
    }

    /// Deletes a message this persona posted (in `thread`, as for
    /// [`Platform::edit`]). Platforms without deletes keep the default.
    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let (persona, room, thread) = (at.persona, at.room, at.thread);
        let _ = (persona, room, thread, id);
        Box::pin(async { Err(PlatformError("messages cannot be deleted here".into())) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOMS: RoomScheme = RoomScheme {
        prefix: "chat:",
        noun: "Chat channel",
    };

    #[derive(Debug)]
    struct Named(Option<RoomScheme>);

    impl Platform for Named {
        fn capabilities(&self) -> Capabilities {
            Capabilities {
                rooms: self.0,
                ..Capabilities::PLAIN
            }
        }

        fn send<'a>(&'a self, _: OutMessage<'a>) -> Sent<'a> {
            Box::pin(async { Err(PlatformError("unused".into())) })
        }
    }

    #[test]
    fn a_room_scheme_names_rooms_and_refuses_others_in_one_way() {
        let room = ROOMS.room(42);
        assert_eq!(room.as_str(), "chat:42");
        assert_eq!(ROOMS.native(&room), Some("42"));
        assert_eq!(ROOMS.parse(&room, |s| s.parse::<u64>().ok()), Ok(42));
        let other = RoomId::new("main");
        assert_eq!(
            ROOMS.parse(&other, |s| s.parse::<u64>().ok()),
            Err(PlatformError("main is not a Chat channel".into()))
        );
        // Its own prefix but not an id it can read: the same refusal.
        assert_eq!(
            ROOMS.parse(&RoomId::new("chat:abc"), |s| s.parse::<u64>().ok()),
            Err(PlatformError("chat:abc is not a Chat channel".into()))
        );
    }

    #[test]
    fn a_platform_owns_the_rooms_its_scheme_names_and_the_web_room_the_rest() {
        let named = Named(Some(ROOMS));
        assert!(named.owns(&RoomId::new("chat:1")));
        assert!(!named.owns(&RoomId::new("main")));
        assert!(!named.owns(&RoomId::new("chatter:1")));
        assert!(Named(None).owns(&RoomId::new("main")));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_past_the_deadline_fails_with_the_platforms_name() {
        let stuck = within_deadline("Chat", std::future::pending::<Result<(), String>>()).await;
        assert_eq!(
            stuck,
            Err(PlatformError(
                "Chat: no answer within 60s (rate limited all along?)".into()
            ))
        );
        let refused = within_deadline("Chat", async { Err::<(), _>("403 Forbidden") }).await;
        assert_eq!(refused, Err(PlatformError("Chat: 403 Forbidden".into())));
    }
}
