//! One persona's connection: made and made again with backoff; online, it
//! sends its presence and joins the rooms; it keeps its nick, notices a
//! kick or a lost room and rejoins, and sends what the platform asks.

use super::*;

use futures::StreamExt;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_xmpp::Stanza;
use tokio_xmpp::connect::{DnsConfig, StartTlsServerConnector, TcpServerConnector};
use tokio_xmpp::jid::Jid;
use tokio_xmpp::minidom::Element;
use tokio_xmpp::parsers::iq::Iq;
use tokio_xmpp::parsers::message::Message as Stanza_;
use tokio_xmpp::parsers::presence::Presence;
use tokio_xmpp::stanzastream::{Event, StanzaStage, StanzaState, StanzaStream, StreamEvent};
use tokio_xmpp::xmlstream::Timeouts;

use crate::stanzas::{self, NS_MAM, NS_RSM};

/// Stanzas of a room's history asked for at a persona's first join.
pub(crate) const HISTORY: u32 = 20;

/// Archive results asked for per page.
const PAGE: usize = 100;

/// How long an IQ (a self-ping, an archive page) may take.
const IQ_WAIT: Duration = Duration::from_secs(30);

/// A stream that is online again this soon after it last came online
/// dropped quickly (the client reconnects by itself, and says only that
/// it is online again).
const QUICK: Duration = Duration::from_secs(30);

/// After this many quick drops in a row, the rooms are joined without
/// their history or archive, and the joins wait longer each time: a
/// stanza `tokio-xmpp` cannot read ends the stream (a stream error, or an
/// I/O error for XML it refuses), and one sitting in a room's history or
/// archive, or in an occupant's presence, would otherwise end every
/// connection as soon as it joins, many times a second.
const QUICK_DROPS: u32 = 2;

/// What the platform asks a session to do.
pub(crate) enum Command {
    /// Send a message. For a room message, `echo` is its origin-id, and
    /// `done` gets the stanza-id the room's echo of it carries.
    Send {
        stanza: Box<Stanza_>,
        echo: Option<String>,
        done: oneshot::Sender<Result<Option<String>, String>>,
    },
    /// Leave every room and close the stream.
    Close(oneshot::Sender<()>),
}

/// Live messages that may wait behind a room's archive being read, in
/// bytes of text; past it the oldest are dropped (the archive has them).
const MAX_WAITING_BYTES: usize = 8 << 20;

/// What an IQ in flight was for.
pub(crate) enum Pending {
    /// A page of `room`'s archive.
    Archive(BareJid),
    /// A self-ping of the persona's occupant JID in `room` (XEP-0410).
    Ping(BareJid),
}

/// Word back to the session from a task of its own.
enum Answer {
    /// Join the rooms now (after a pause for quick drops).
    Join,
    /// A room post never left: its send fails.
    Unsent { origin: String, error: String },
}

/// Where a persona stands in one room on this connection.
#[derive(Debug, Default)]
pub(crate) struct RoomState {
    /// The nick it holds (when `joined`) or is joining under.
    pub(crate) nick: String,
    pub(crate) joined: bool,
    /// The nick asked for by a nick change in flight.
    pub(crate) asking: Option<String>,
    pub(crate) banned: bool,
    /// Live messages waiting behind the archive being read, and the
    /// bytes of text they hold.
    pub(crate) waiting: Option<std::collections::VecDeque<Stanza_>>,
    pub(crate) waiting_bytes: usize,
    /// The archive query being read: its IQ id and its query id (results
    /// carry it; anything else claiming to be a result is not one).
    pub(crate) catching: Option<(String, String)>,
    /// When a join was last asked for and not answered (a refused one is
    /// asked again at the next self-ping).
    pub(crate) joining_at: Option<Instant>,
    /// Occupants' real JIDs, where the room shows them.
    pub(crate) occupants: HashMap<String, Option<BareJid>>,
}

/// One connection's state.
pub(crate) struct Session<'a> {
    pub(crate) shared: &'a Shared,
    pub(crate) persona: &'a XmppPersona,
    account: &'a tactful_runtime::Account,
    stream: StanzaStream,
    pub(crate) rooms: HashMap<BareJid, RoomState>,
    /// Room messages sent and not echoed yet: origin-id to the waiting send.
    pub(crate) echoes: HashMap<String, oneshot::Sender<Result<Option<String>, String>>>,
    answers: mpsc::UnboundedSender<Answer>,
    /// IQs sent and not answered yet, by id: what for, to whom (only
    /// they may answer), and when.
    iqs: HashMap<String, (Pending, Jid, Instant)>,
    /// When the stream last came online, and how many times in a row it
    /// dropped within [`QUICK`] of that.
    last_online: Option<Instant>,
    quick_drops: u32,
    /// Whether the stream is up now (joins wait for it).
    pub(crate) online: bool,
}

/// The stream for `persona`, connecting as the settings say: it
/// reconnects by itself after a drop, and says so (suspended, then reset
/// or resumed), so the session can tell `/healthz` and rejoin.
pub(crate) fn stream(s: &XmppSettings, persona: &XmppPersona) -> StanzaStream {
    let dns = match &s.server {
        Some(host) => match host.parse::<std::net::IpAddr>() {
            Ok(ip) => DnsConfig::addr(&std::net::SocketAddr::new(ip, s.port).to_string()),
            Err(_) => DnsConfig::no_srv(host, s.port),
        },
        None => DnsConfig::srv_default_client(persona.jid.domain().as_str()),
    };
    let timeouts = Timeouts {
        read_timeout: Duration::from_secs(60),
        response_timeout: Duration::from_secs(30),
    };
    let jid = Jid::from(persona.jid.clone());
    let password = persona.password.clone();
    match s.tls {
        Tls::Required => {
            StanzaStream::new_c2s(StartTlsServerConnector::from(dns), jid, password, timeouts, 64)
        }
        Tls::None => StanzaStream::new_c2s(TcpServerConnector::from(dns), jid, password, timeouts, 64),
    }
}

/// Waits until `token`'s stanza is written to the stream; why not, if it
/// never is (within [`IQ_WAIT`]).
pub(crate) async fn written(mut token: tokio_xmpp::stanzastream::StanzaToken) -> Result<(), String> {
    match tokio::time::timeout(IQ_WAIT, token.wait_for(StanzaStage::Sent)).await {
        Ok(Some(StanzaState::Sent { .. } | StanzaState::Acked { .. })) => Ok(()),
        Ok(Some(StanzaState::Failed { error })) => Err(error.to_string()),
        Ok(_) => Err("the stream closed before the stanza was sent".to_owned()),
        Err(_) => Err(format!("not sent within {} s (no connection)", IQ_WAIT.as_secs())),
    }
}

/// A task aborted when its handle is dropped (the persona's task was).
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    async fn wait(mut self) -> Result<T, tokio::task::JoinError> {
        (&mut self.0).await
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Shared {
    pub(crate) async fn keep_connected(self: Arc<Self>, i: usize) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = self.roster.backoff_always(i);
        loop {
            // On a task of its own, so a panic in the client library ends
            // this connection, not the persona's presence on XMPP.
            let (me, who, account) = (self.clone(), persona.clone(), backoff.account().clone());
            let task = AbortOnDrop(tokio::spawn(async move { me.session(&who, &account).await }));
            let result = match task.wait().await {
                Ok(r) => r,
                Err(e) => Err(format!("the connection's task failed: {e}")),
            };
            if let Ok(mut live) = self.live.lock() {
                live.remove(&persona.id);
            }
            if let Ok(mut joined) = self.joined.lock() {
                joined.retain(|(_, p), _| p != &persona.id);
            }
            if let Ok(mut nicks) = self.nicks.lock() {
                nicks.retain(|(_, p), _| p != &persona.id);
            }
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            match result {
                Ok(()) => {
                    backoff.reset();
                    backoff.wait(&"the connection closed").await;
                }
                Err(e) => backoff.wait(&e).await,
            }
        }
    }

    /// One client, until it ends (the client reconnects by itself after a
    /// drop; each time it is online again the rooms are joined again).
    async fn session(&self, persona: &XmppPersona, account: &tactful_runtime::Account) -> Result<(), String> {
        let (tx, mut commands) = mpsc::channel(64);
        let (answers, mut answered) = mpsc::unbounded_channel();
        let mut s = Session {
            shared: self,
            persona,
            account,
            stream: stream(&self.settings, persona),
            rooms: self
                .settings
                .rooms
                .iter()
                .map(|r| (r.clone(), RoomState::default()))
                .collect(),
            echoes: HashMap::new(),
            answers,
            iqs: HashMap::new(),
            last_online: None,
            quick_drops: 0,
            online: false,
        };
        let mut retry = tokio::time::interval(self.settings.nick_retry);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut ping = tokio::time::interval(self.settings.self_ping);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut closed = None;
        let result = loop {
            tokio::select! {
                event = s.stream.next() => match event {
                    Some(Event::Stream(StreamEvent::Reset { .. })) => s.online(false, &tx).await,
                    Some(Event::Stream(StreamEvent::Resumed)) => s.online(true, &tx).await,
                    Some(Event::Stream(StreamEvent::Suspended)) => s.suspended(),
                    Some(Event::Stanza(Stanza::Message(m))) => s.message(m, None).await,
                    Some(Event::Stanza(Stanza::Presence(p))) => s.presence(p).await,
                    Some(Event::Stanza(Stanza::Iq(iq))) => s.iq(iq).await,
                    None => break Ok(()),
                },
                Some(command) = commands.recv() => match command {
                    Command::Send { stanza, echo, done } => s.send_for(*stanza, echo, done).await,
                    Command::Close(done) => {
                        closed = Some(done);
                        break Ok(());
                    }
                },
                Some(answer) = answered.recv() => match answer {
                    Answer::Join => s.join_all().await,
                    Answer::Unsent { origin, error } => {
                        if let Some(done) = s.echoes.remove(&origin) {
                            let _ = done.send(Err(error));
                        }
                    }
                },
                _ = retry.tick() => s.reclaim_nicks().await,
                _ = ping.tick() => {
                    s.expire_iqs().await;
                    s.self_ping().await;
                }
            }
        };
        if closed.is_some() {
            s.leave_rooms().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(3), s.stream.close()).await;
        if let Some(done) = closed {
            let _ = done.send(());
        }
        result
    }

    /// Records the nick `persona` holds in `room` (or that it holds none).
    pub(crate) fn set_nick(&self, room: &BareJid, persona: &PersonaId, nick: Option<&str>) {
        let key = (room.clone(), persona.clone());
        if let Ok(mut nicks) = self.nicks.lock() {
            match nick {
                Some(n) => nicks.insert(key.clone(), n.to_owned()),
                None => nicks.remove(&key),
            };
        }
        if let Ok(mut joined) = self.joined.lock() {
            match nick {
                Some(_) => {
                    joined.entry(key).or_insert_with(tactful_runtime::wall_clock);
                }
                None => {
                    joined.remove(&key);
                }
            }
        }
    }
}

impl Session<'_> {
    /// Queues `stanza` on the stream (sent once it is up), without waiting.
    pub(crate) async fn send(&mut self, stanza: impl Into<Stanza>) {
        drop(self.stream.send(Box::new(stanza.into())).await);
    }

    /// Sends what the platform asked for: `done` learns once it is
    /// written (a room post: once the room echoes it, with the room's id).
    async fn send_for(
        &mut self,
        stanza: Stanza_,
        echo: Option<String>,
        done: oneshot::Sender<Result<Option<String>, String>>,
    ) {
        let token = self.stream.send(Box::new(Stanza::Message(stanza))).await;
        match echo {
            Some(origin) => {
                self.echoes.retain(|_, d| !d.is_closed());
                self.echoes.insert(origin.clone(), done);
                let answers = self.answers.clone();
                tokio::spawn(async move {
                    if let Err(error) = written(token).await {
                        let _ = answers.send(Answer::Unsent { origin, error });
                    }
                });
            }
            None => {
                tokio::spawn(async move {
                    let _ = done.send(written(token).await.map(|()| None));
                });
            }
        }
    }

    /// Sends an IQ to `to`, remembering what it is for.
    pub(crate) async fn send_iq(&mut self, to: Jid, set: bool, payload: Element, pending: Pending) -> String {
        let id = self.shared.new_id();
        let from = to.clone();
        let iq = if set {
            Iq::Set {
                from: None,
                to: Some(to),
                id: id.clone(),
                payload,
            }
        } else {
            Iq::Get {
                from: None,
                to: Some(to),
                id: id.clone(),
                payload,
            }
        };
        self.send(iq).await;
        self.iqs.insert(id.clone(), (pending, from, Instant::now()));
        id
    }

    /// IQs unanswered for [`IQ_WAIT`] count as failed.
    async fn expire_iqs(&mut self) {
        let now = Instant::now();
        let stale: Vec<String> = self
            .iqs
            .iter()
            .filter(|(_, (_, _, at))| now.duration_since(*at) > IQ_WAIT)
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if let Some((pending, _, _)) = self.iqs.remove(&id) {
                self.answered(
                    &id,
                    pending,
                    Err(format!("no answer within {} s", IQ_WAIT.as_secs())),
                )
                .await;
            }
        }
    }

    /// The connection dropped; the stream is making it again.
    fn suspended(&mut self) {
        let persona = self.persona;
        self.online = false;
        tracing::warn!(persona = %persona.id, "XMPP: the connection to the server was lost; reconnecting");
        self.account
            .down("the connection to the server was lost; reconnecting");
        if let Ok(mut live) = self.shared.live.lock() {
            live.remove(&persona.id);
        }
    }

    /// Online (again): presence, rooms, and the platform may send.
    async fn online(&mut self, resumed: bool, tx: &mpsc::Sender<Command>) {
        let persona = self.persona;
        self.online = true;
        if !resumed {
            let now = tokio::time::Instant::now();
            self.quick_drops = match self.last_online {
                Some(t) if now.duration_since(t) < QUICK => self.quick_drops + 1,
                _ => 0,
            };
            self.last_online = Some(now);
            // A new stream: the rooms know nothing of this session, and
            // what was asked on the old one is not answered.
            self.iqs.clear();
            self.send(Presence::available()).await;
            let careful = self.quick_drops >= QUICK_DROPS;
            let rooms: Vec<BareJid> = self.rooms.keys().cloned().collect();
            for room in &rooms {
                let Some(r) = self.rooms.get_mut(room) else {
                    continue;
                };
                r.joined = false;
                r.asking = None;
                r.occupants.clear();
                r.catching = None;
                r.joining_at = None;
                r.waiting_bytes = 0;
                let waiting = r.waiting.take();
                self.shared.set_nick(room, &persona.id, None);
                // Live messages that waited behind the archive: read again
                // from it after the join, unless the archive is skipped now.
                if careful {
                    for m in waiting.unwrap_or_default() {
                        self.message(m, None).await;
                    }
                }
            }
            match self.quick_drops.checked_sub(QUICK_DROPS) {
                None => self.join_all().await,
                Some(n) => {
                    let pause = Duration::from_secs(1 << n.min(6));
                    tracing::warn!(persona = %persona.id, drops = self.quick_drops, "XMPP: the connection dropped right after joining the rooms, again (most likely a stanza the XMPP library cannot read, in a room's history or archive or an occupant's presence); joining again in {} s, without history or catching up", pause.as_secs());
                    let answers = self.answers.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep(pause).await;
                        let _ = answers.send(Answer::Join);
                    });
                }
            }
        }
        tracing::info!(persona = %persona.id, jid = %persona.jid, "connected to XMPP");
        self.account.connected();
        if let Ok(mut live) = self.shared.live.lock() {
            live.insert(persona.id.clone(), tx.clone());
        }
        self.shared.connected.notify_waiters();
    }

    /// Whether the stream has dropped quickly too often to risk a room's
    /// history or archive again.
    pub(crate) fn careful(&self) -> bool {
        self.quick_drops >= QUICK_DROPS
    }

    /// Reads the room's archive after the last id handed in, if there is
    /// one; live messages wait meanwhile.
    pub(crate) async fn catch_up(&mut self, room: &BareJid) {
        if self.careful() {
            return;
        }
        let Some(after) = self.shared.last.lock().ok().and_then(|l| l.get(room).cloned()) else {
            return;
        };
        if let Some(state) = self.rooms.get_mut(room) {
            state.waiting.get_or_insert_with(Default::default);
        }
        self.query_archive(room, &after).await;
    }

    async fn query_archive(&mut self, room: &BareJid, after: &str) {
        let queryid = self.shared.new_id();
        let id = self
            .send_iq(
                Jid::from(room.clone()),
                true,
                stanzas::mam_query(&queryid, after, PAGE),
                Pending::Archive(room.clone()),
            )
            .await;
        if let Some(state) = self.rooms.get_mut(room) {
            state.catching = Some((id, queryid));
        }
    }

    /// Holds a live message of `room` behind the archive being read, if
    /// it is; gives it back otherwise.
    pub(crate) fn wait_behind_archive(&mut self, room: &BareJid, m: Stanza_) -> Option<Stanza_> {
        let Some(state) = self.rooms.get_mut(room) else {
            return Some(m);
        };
        let Some(waiting) = state.waiting.as_mut() else {
            return Some(m);
        };
        state.waiting_bytes += m.bodies.values().map(String::len).sum::<usize>();
        waiting.push_back(m);
        while state.waiting_bytes > MAX_WAITING_BYTES {
            let Some(old) = waiting.pop_front() else {
                break;
            };
            state.waiting_bytes = state
                .waiting_bytes
                .saturating_sub(old.bodies.values().map(String::len).sum::<usize>());
        }
        None
    }

    /// An IQ came back: `Ok` with its payload, or the error's condition.
    async fn answered(&mut self, id: &str, pending: Pending, result: Result<Option<Element>, String>) {
        match pending {
            Pending::Archive(room) => {
                // Only the query being read now (an older one, from before a
                // kick and a new join, is over).
                match self.rooms.get_mut(&room) {
                    Some(r) if r.catching.as_ref().is_some_and(|(q, _)| q == id) => r.catching = None,
                    _ => return,
                }
                let more = match &result {
                    Ok(Some(fin)) if fin.is("fin", NS_MAM) && fin.attr("complete") != Some("true") => fin
                        .get_child("set", NS_RSM)
                        .and_then(|s| s.get_child("last", NS_RSM))
                        .map(Element::text),
                    Ok(_) => None,
                    Err(e) => {
                        tracing::warn!(persona = %self.persona.id, %room, "XMPP: the room's archive (XEP-0313) could not be read ({e}): what was said while tactful was away is not caught up");
                        None
                    }
                };
                match more {
                    Some(last) => self.query_archive(&room, &last).await,
                    None => {
                        let waiting = self.rooms.get_mut(&room).and_then(|r| {
                            r.waiting_bytes = 0;
                            r.waiting.take()
                        });
                        for m in waiting.unwrap_or_default() {
                            self.message(m, None).await;
                        }
                    }
                }
            }
            Pending::Ping(room) => {
                // XEP-0410: an answer, or these errors, say the persona is
                // in the room (the last: its nick changed); a remote server
                // that cannot be reached says nothing; any other error says
                // it is not.
                let gone = match result.as_ref().err().map(String::as_str) {
                    None | Some("service-unavailable" | "feature-not-implemented" | "item-not-found") => {
                        false
                    }
                    Some("remote-server-not-found" | "remote-server-timeout") => false,
                    Some(e) => !e.starts_with("no answer within"),
                };
                match self.rooms.get_mut(&room) {
                    Some(r) if gone && r.joined => {
                        r.joined = false;
                        r.occupants.clear();
                    }
                    _ => return,
                }
                tracing::warn!(persona = %self.persona.id, %room, "XMPP: no longer in the room (self-ping); joining again");
                self.shared.set_nick(&room, &self.persona.id, None);
                let own = self.persona.nick.clone();
                self.join(&room, &own).await;
            }
        }
    }

    /// An IQ: the answer to one of ours, or a ping to answer (servers
    /// and rooms check clients are alive).
    async fn iq(&mut self, iq: Iq) {
        match iq {
            Iq::Result {
                id, payload, from, ..
            } => {
                if let Some(pending) = self.answer_to(&id, from.as_ref()) {
                    self.answered(&id, pending, Ok(payload)).await;
                }
            }
            Iq::Error { id, error, from, .. } => {
                if let Some(pending) = self.answer_to(&id, from.as_ref()) {
                    self.answered(&id, pending, Err(condition_name(&error.defined_condition)))
                        .await;
                }
            }
            Iq::Get {
                from, id, payload, ..
            } if payload.is("ping", stanzas::NS_PING) => {
                self.send(Iq::Result {
                    from: None,
                    to: from,
                    id,
                    payload: None,
                })
                .await;
            }
            // RFC 6120: a request nobody here serves gets an error.
            Iq::Get { from, id, .. } | Iq::Set { from, id, .. } => {
                use tokio_xmpp::parsers::stanza_error::{DefinedCondition, ErrorType, StanzaError};
                self.send(Iq::Error {
                    from: None,
                    to: from,
                    id,
                    payload: None,
                    error: StanzaError::new(
                        ErrorType::Cancel,
                        DefinedCondition::ServiceUnavailable,
                        "en",
                        "",
                    ),
                })
                .await;
            }
        }
    }

    /// The IQ of ours `id` answers, if `from` is whom it was sent to (a
    /// guessed id from anyone else answers nothing).
    fn answer_to(&mut self, id: &str, from: Option<&Jid>) -> Option<Pending> {
        let (_, to, _) = self.iqs.get(id)?;
        if from != Some(to) {
            tracing::debug!(persona = %self.persona.id, "XMPP: an IQ answer from someone it was not asked of");
            return None;
        }
        self.iqs.remove(id).map(|(pending, _, _)| pending)
    }
}

/// An IQ error's condition as XMPP names it (`not-acceptable`).
fn condition_name(c: &tokio_xmpp::parsers::stanza_error::DefinedCondition) -> String {
    let debug = format!("{c:?}");
    let mut out = String::new();
    for (i, ch) in debug.chars().enumerate() {
        if ch.is_ascii_uppercase() {
            if i > 0 {
                out.push('-');
            }
            out.push(ch.to_ascii_lowercase());
        } else {
            out.push(ch);
        }
    }
    out
}
