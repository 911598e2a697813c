//! IRC for tactful: every persona is a nick of its own on one network.
//!
//! Each persona keeps one connection (the `irc` crate does registration,
//! PING/PONG, NickServ identification and the `nick_` fallback on a
//! collision); a dropped connection comes back with exponential backoff.
//! The first persona's connection is the room's ears: it turns channel
//! messages into [`tactful_core::Message`]s, so a message is heard once
//! however many personas sit in the channel; each connection hears the
//! private messages sent to its own nick, which are DMs.
//!
//! IRC has no message ids, mention entities or replies, so this adapter
//! supplies them: ids are `i<start>-<n>` (unique across restarts), mentions
//! are the personas' nicks found in the text ([`text::mentioned`]), and a
//! reply is a `nick: ` prefix. Long text is cut into lines that fit a
//! 512-byte IRC line, each a part of its own, sent `send_interval` apart
//! so flood control never kicks in (`send`).
//!
//! Room ids are `irc:#channel` for channels and `irc:dm:<persona>:<nick>`
//! for private conversations; people are `irc:<nick>` (for
//! `allowed_users`), shown by their nick.

pub mod config;
mod send;
pub mod text;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use futures::future::BoxFuture;
use irc::client::prelude::{Client, Command, Config as IrcClientConfig, Sender as IrcSender};
use tactful_core::{Mentions, Message, MsgId, PersonaId, RoomId, Sender, UserId};
use tactful_runtime::Account;
use tactful_runtime::RoomScheme;
use tactful_runtime::account::Backoff;
use tactful_runtime::{Connected, Held, PlatformError, RuntimeHandle, wall_clock};

/// What people see when a persona leaves because tactful stops.
const QUIT_MESSAGE: &str = "tactful is stopping; back soon";

/// How long a reply waits for its persona's connection before it is given
/// up ([`Shared::sender_of`]).
const CONNECT_WAIT: Duration = Duration::from_secs(30);

/// Taking a persona's own nick back from a fallback one.
#[derive(Default)]
struct Reclaim {
    /// A NICK was sent and not answered yet.
    asked: bool,
    /// The server refused it although it looked free (a nick the network
    /// holds back): no more asking on a timer this connection.
    refused: bool,
}

impl Reclaim {
    fn ask(&mut self, client: &Client, nick: &str) -> Result<(), irc::error::Error> {
        if !self.asked {
            self.asked = true;
            client.send(Command::NICK(nick.to_owned()))?;
        }
        Ok(())
    }
}

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

/// Who wrote the line `id` names, from the nick its id carries (see
/// `Shared::heard`); `None` for a persona's own lines.
fn author_of(id: &MsgId) -> Option<&str> {
    id.as_str()
        .strip_prefix('i')?
        .split_once('.')
        .map(|(_, nick)| nick)
        .filter(|nick| !nick.is_empty())
}

/// A room id's IRC meaning.
enum Target {
    Channel(String),
    Private(String),
}

/// How IRC's rooms are named: `irc:#channel`, and `irc:dm:<persona>:<nick>`
/// for a private conversation.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "irc:",
    noun: "IRC channel or conversation",
};

fn target_of(room: &RoomId) -> Option<Target> {
    let rest = ROOMS.native(room)?;
    match rest.strip_prefix("dm:") {
        Some(dm) => dm
            .split_once(':')
            .map(|(_, nick)| Target::Private(nick.to_owned())),
        None => Some(Target::Channel(rest.to_owned())),
    }
}

struct Shared {
    settings: IrcSettings,
    /// Per persona: the live connection's sender and the nick it got.
    live: Mutex<HashMap<PersonaId, (IrcSender, String)>>,
    runtime: Mutex<Option<RuntimeHandle>>,
    epoch: u64,
    next: AtomicU64,
    /// Set by [`tactful_runtime::Platform::close`]: connections that end are not made again.
    closing: AtomicBool,
    /// Woken whenever a connection ends.
    ended: tokio::sync::Notify,
    /// Woken whenever a connection is registered.
    connected: tokio::sync::Notify,
    /// Per persona: when its connection may send its next line.
    pace: send::Pace,
}

/// The IRC platform: a [`Platform`] for the runtime and the connections.
#[derive(Clone)]
pub struct IrcPlatform {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for IrcPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IrcPlatform")
            .field("settings", &self.shared.settings)
            .finish()
    }
}

impl IrcPlatform {
    /// An IRC platform; nothing connects before [`IrcPlatform::start`].
    pub fn new(settings: IrcSettings) -> IrcPlatform {
        IrcPlatform {
            shared: Arc::new(Shared {
                settings,
                live: Mutex::new(HashMap::new()),
                runtime: Mutex::new(None),
                epoch: wall_clock().as_millis(),
                next: AtomicU64::new(1),
                closing: AtomicBool::new(false),
                ended: tokio::sync::Notify::new(),
                connected: tokio::sync::Notify::new(),
                pace: send::Pace::default(),
            }),
        }
    }

    /// Where heard messages go.
    pub fn connect_runtime(&self, handle: RuntimeHandle) {
        if let Ok(mut r) = self.shared.runtime.lock() {
            *r = Some(handle);
        }
    }

    /// Connects every persona (each reconnecting on its own until the
    /// returned tasks are aborted).
    pub fn start(&self) -> Vec<tokio::task::JoinHandle<()>> {
        (0..self.shared.settings.personas.len())
            .map(|i| {
                let shared = self.shared.clone();
                tokio::spawn(async move { shared.keep_connected(i).await })
            })
            .collect()
    }

    /// Whether every persona is connected and registered (for readiness).
    pub fn connected(&self) -> usize {
        self.shared.live.lock().map_or(0, |l| l.len())
    }

    /// One line for the start banner, naming the nick each persona really
    /// has (`docs_` when `docs` was taken): waits up to `wait` for the
    /// connections, and says which are still connecting.
    pub async fn describe(&self, wait: Duration) -> String {
        let shared = &self.shared;
        let everyone = async {
            loop {
                let changed = shared.connected.notified();
                if self.connected() == shared.settings.personas.len() {
                    return;
                }
                changed.await;
            }
        };
        let _ = tokio::time::timeout(wait, everyone).await;
        let live = shared.live.lock().map(|l| l.clone()).unwrap_or_default();
        let nicks: Vec<String> = shared
            .settings
            .personas
            .iter()
            .map(|p| match live.get(&p.id) {
                Some((_, nick)) if text::nick_eq(nick, &p.nick) => nick.clone(),
                Some((_, nick)) => format!("{nick} ({} was taken)", p.nick),
                None => format!("{} (still connecting)", p.nick),
            })
            .collect();
        config::banner(&shared.settings, &nicks)
    }
}

impl Shared {
    fn new_id(&self) -> MsgId {
        MsgId::new(format!(
            "i{}-{}",
            self.epoch,
            self.next.fetch_add(1, Ordering::SeqCst)
        ))
    }

    async fn keep_connected(self: Arc<Self>, i: usize) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = Backoff::of(
            &self.runtime,
            "IRC",
            persona.id.as_str(),
            self.settings.max_backoff,
        );
        loop {
            let result = self.session(i, &persona, backoff.account()).await;
            if let Ok(mut live) = self.live.lock() {
                live.remove(&persona.id);
            }
            self.ended.notify_waiters();
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            match result {
                // It was up: start the pauses afresh.
                Ok(()) => {
                    backoff.reset();
                    backoff.wait(&"the connection closed").await;
                }
                Err(e) => backoff.wait(&format!("connecting failed: {e}")).await,
            }
        }
    }

    /// One connection, until it drops.
    async fn session(
        &self,
        i: usize,
        persona: &IrcPersona,
        account: &Account,
    ) -> Result<(), irc::error::Error> {
        let s = &self.settings;
        let config = IrcClientConfig {
            nickname: Some(persona.nick.clone()),
            alt_nicks: vec![format!("{}_", persona.nick), format!("{}__", persona.nick)],
            username: Some(
                persona
                    .id
                    .as_str()
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .take(10)
                    .collect(),
            ),
            realname: Some(format!("tactful persona {}", persona.id)),
            nick_password: persona.password.clone(),
            server: Some(s.server.clone()),
            port: Some(s.port),
            use_tls: Some(s.tls),
            channels: s.channels.clone(),
            // tactful paces its own lines; the crate's burst limit would
            // only add a second, hidden queue.
            max_messages_in_burst: Some(u32::MAX),
            ..IrcClientConfig::default()
        };
        let mut client = Client::from_config(config).await?;
        client.identify()?;
        let mut stream = client.stream()?;
        // The nick this connection has: the crate's own idea of it does not
        // follow a NICK we send, so it is followed here.
        let mut nick = String::new();
        let mut reclaim = Reclaim::default();
        let mut retry = tokio::time::interval(s.nick_retry);
        retry.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let message = tokio::select! {
                next = stream.next() => match next.transpose()? {
                    Some(m) => m,
                    None => break,
                },
                _ = retry.tick() => {
                    // On a fallback nick: is ours free again?
                    if !nick.is_empty() && !text::nick_eq(&nick, &persona.nick) && !reclaim.refused {
                        client.send(Command::ISON(vec![persona.nick.clone()]))?;
                    }
                    continue;
                }
            };
            let from = message.source_nickname().unwrap_or("");
            match &message.command {
                Command::Response(irc::client::prelude::Response::RPL_WELCOME, _) => {
                    nick = client.current_nickname().to_owned();
                    if text::nick_eq(&nick, &persona.nick) {
                        tracing::info!(persona = %persona.id, %nick, "connected to IRC");
                    } else {
                        tracing::warn!(persona = %persona.id, %nick, "connected to IRC, but {} was taken; it takes it back once it is free", persona.nick);
                    }
                    self.set_live(persona, client.sender(), &nick);
                    account.connected();
                    self.connected.notify_waiters();
                }
                // Our own nick changed (taken back, or a fallback).
                Command::NICK(new) if !nick.is_empty() && text::nick_eq(from, &nick) => {
                    nick.clone_from(new);
                    reclaim.asked = false;
                    if text::nick_eq(&nick, &persona.nick) {
                        tracing::info!(persona = %persona.id, %nick, "took its nick back");
                    }
                    self.set_live(persona, client.sender(), &nick);
                }
                // Whoever held our nick left it, or the server says it is
                // not online: take it.
                Command::QUIT(_) | Command::NICK(_)
                    if text::nick_eq(from, &persona.nick) && !text::nick_eq(&nick, &persona.nick) =>
                {
                    reclaim.ask(&client, &persona.nick)?;
                }
                Command::Response(irc::client::prelude::Response::RPL_ISON, args)
                    if !text::nick_eq(&nick, &persona.nick)
                        && !args.last().is_some_and(|online| {
                            online.split(' ').any(|n| text::nick_eq(n, &persona.nick))
                        }) =>
                {
                    reclaim.ask(&client, &persona.nick)?;
                }
                // Refused after all (a nick held back by the network): stop
                // asking on a timer; someone leaving it still brings it back.
                Command::Response(irc::client::prelude::Response::ERR_NICKNAMEINUSE, _) if reclaim.asked => {
                    tracing::warn!(persona = %persona.id, "the server refused {} again; it stops asking every {:?}", persona.nick, s.nick_retry);
                    reclaim = Reclaim {
                        asked: false,
                        refused: true,
                    };
                }
                Command::PRIVMSG(target, body) if !from.is_empty() => {
                    let present = |chan: &str, who: &str| {
                        client
                            .list_users(chan)
                            .is_some_and(|users| users.iter().any(|u| text::nick_eq(u.get_nickname(), who)))
                    };
                    self.heard(i, persona, &nick, from, target, body, &present);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Records the nick persona's connection has now (what the others see,
    /// what mentions of it look like).
    /// The connection `persona` posts through, waiting up to
    /// [`CONNECT_WAIT`] while it is being made (at start, after a drop, or
    /// on a process that has just taken IRC over from one that died: the
    /// turns it carries on are delivered once it is connected, not lost).
    /// Nothing was sent when this fails, so the error is certain.
    async fn sender_of(&self, persona: &PersonaId) -> Result<IrcSender, PlatformError> {
        let deadline = tokio::time::Instant::now() + CONNECT_WAIT;
        loop {
            // Asked before looking: a connection made in between wakes it.
            let connected = self.connected.notified();
            if let Some(sender) = self
                .live
                .lock()
                .ok()
                .and_then(|l| l.get(persona).map(|(s, _)| s.clone()))
            {
                return Ok(sender);
            }
            if self.closing.load(Ordering::SeqCst)
                || tokio::time::timeout_at(deadline, connected).await.is_err()
            {
                return Err(PlatformError(format!(
                    "{persona} is not connected to {} (waited {} s)",
                    self.settings.server,
                    CONNECT_WAIT.as_secs()
                )));
            }
        }
    }

    fn set_live(&self, persona: &IrcPersona, sender: irc::client::Sender, nick: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.insert(persona.id.clone(), (sender, nick.to_owned()));
        }
    }

    /// A PRIVMSG reached persona `i`'s connection; `present(channel, nick)`
    /// says whether someone of that nick is in the channel.
    #[allow(clippy::too_many_arguments)]
    fn heard(
        &self,
        i: usize,
        persona: &IrcPersona,
        own_nick: &str,
        from: &str,
        target: &str,
        body: &str,
        present: &dyn Fn(&str, &str) -> bool,
    ) {
        // Each persona's nick as the network knows it now: the one its
        // connection got (maybe `nick_`), else the configured one.
        let nicks: Vec<(String, PersonaId, bool)> = {
            let Ok(live) = self.live.lock() else {
                return;
            };
            self.settings
                .personas
                .iter()
                .map(|p| match live.get(&p.id) {
                    Some((_, nick)) => (nick.clone(), p.id.clone(), true),
                    None => (p.nick.clone(), p.id.clone(), false),
                })
                .collect()
        };
        // On a fallback nick, a persona still answers to its own in a
        // channel where nobody of that name is (people keep typing
        // `docs:`); where the holder is present, the name is theirs.
        let fallbacks: Vec<(String, PersonaId, bool)> = self
            .settings
            .personas
            .iter()
            .filter(|p| {
                nicks
                    .iter()
                    .any(|(n, id, live)| *id == p.id && *live && !text::nick_eq(n, &p.nick))
                    && !present(target, &p.nick)
            })
            .map(|p| (p.nick.clone(), p.id.clone(), false))
            .collect();
        if nicks
            .iter()
            .any(|(nick, _, live)| *live && text::nick_eq(nick, from))
        {
            return; // A persona's own line: the engine heard it when it was sent.
        }
        let body = match body.strip_prefix('\u{1}') {
            // CTCP: only /me is conversation.
            Some(ctcp) => match ctcp.strip_prefix("ACTION ") {
                Some(action) => format!("* {from} {}", action.trim_end_matches('\u{1}')),
                None => return,
            },
            None => body.to_owned(),
        };
        let is_channel = target.starts_with(['#', '&', '+', '!']);
        let (room, is_dm, dm_to) = if is_channel {
            if i != 0 {
                return; // The first persona hears channels for everyone.
            }
            (RoomId::new(format!("irc:{target}")), false, None)
        } else if text::nick_eq(target, own_nick) {
            let room = format!(
                "irc:dm:{}:{}",
                persona.id,
                from.chars().map(text::irc_lower).collect::<String>()
            );
            (RoomId::new(room), true, Some(persona.id.clone()))
        } else {
            return;
        };
        let names: Vec<&str> = nicks
            .iter()
            .chain(&fallbacks)
            .map(|(n, _, _)| n.as_str())
            .collect();
        let mut mentions: Vec<UserId> = Vec::new();
        for n in text::mentioned(&body, &names) {
            if let Some((_, id, _)) = nicks.iter().chain(&fallbacks).find(|(nick, _, _)| nick == n)
                && !mentions.iter().any(|m| m.as_str() == id.as_str())
            {
                mentions.push(UserId::new(id.as_str()));
            }
        }
        // The author's nick travels in the id (a nick has no `.`): a reply
        // is addressed to them by whichever process sends it, after a
        // restart or on the process that took IRC over, not only by the
        // one that heard the line.
        let id = MsgId::new(format!("{}.{from}", self.new_id()));
        let msg = Message {
            id,
            room,
            thread: None,
            sender: Sender {
                // Namespaced: anyone may take a nick equal to a persona's id,
                // and must not be taken for the persona.
                id: UserId::new(format!("irc:{from}")),
                name: Arc::from(from),
                is_bot: false,
                handle: None,
            },
            text: Arc::from(body.as_str()),
            mentions: Mentions::Explicit(mentions),
            reply_to: None,
            is_dm,
            dm_to,
            time: wall_clock(),
        };
        if let Ok(r) = self.runtime.lock()
            && let Some(handle) = r.as_ref()
        {
            handle.inbound(msg);
        }
    }
}

impl Connected for IrcPlatform {
    /// Every account, whatever `held` says: the connection is held with
    /// the partition of every room of the platform.
    fn start(&self, runtime: RuntimeHandle, _held: &Held) -> Vec<tokio::task::JoinHandle<()>> {
        self.connect_runtime(runtime);
        IrcPlatform::start(self)
    }

    fn describe(&self) -> BoxFuture<'_, String> {
        Box::pin(IrcPlatform::describe(self, Duration::from_secs(5)))
    }

    /// Connects once under a nick of the doctor's own (the personas' are
    /// left to the running service), waits for the server's welcome, and
    /// quits. NickServ passwords are not tried: that would need the nick.
    fn probe(&self) -> BoxFuture<'_, Vec<tactful_runtime::Probe>> {
        Box::pin(async move {
            let s = &self.shared.settings;
            let what = format!("IRC {}:{}{}", s.server, s.port, if s.tls { " (TLS)" } else { "" });
            let fix = format!(
                "check platforms.irc server, port and tls, and that {} accepts connections from here",
                s.server
            );
            let probe = tactful_runtime::Probe::run(what, &fix, async {
                let config = IrcClientConfig {
                    // Nine characters at most: the RFC 1459 limit many servers keep.
                    nickname: Some(format!("tfdoc{}", std::process::id() % 10_000)),
                    username: Some("tactful".to_owned()),
                    realname: Some("tactful doctor".to_owned()),
                    server: Some(s.server.clone()),
                    port: Some(s.port),
                    use_tls: Some(s.tls),
                    ..IrcClientConfig::default()
                };
                let mut client = Client::from_config(config).await.map_err(|e| e.to_string())?;
                client.identify().map_err(|e| e.to_string())?;
                let mut stream = client.stream().map_err(|e| e.to_string())?;
                while let Some(message) = stream.next().await.transpose().map_err(|e| e.to_string())? {
                    if let Command::Response(irc::client::prelude::Response::RPL_WELCOME, _) =
                        &message.command
                    {
                        let _ = client.send_quit("tactful doctor");
                        return Ok(format!("the server welcomed {}", client.current_nickname()));
                    }
                }
                Err("the server closed the connection before its welcome".to_owned())
            })
            .await;
            vec![probe]
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heard_line_names_its_author_and_a_persona_line_does_not() {
        assert_eq!(author_of(&MsgId::new("i1764-3.alice")), Some("alice"));
        assert_eq!(author_of(&MsgId::new("i1764-3.[away]|bob")), Some("[away]|bob"));
        assert_eq!(author_of(&MsgId::new("i1764-4")), None, "a persona's own line");
        assert_eq!(author_of(&MsgId::new("i1764-5.")), None);
        assert_eq!(author_of(&MsgId::new("web-9.alice")), None, "not an IRC line");
    }
}
