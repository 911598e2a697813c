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
mod hear;
mod rooms;
mod send;
mod session;
mod settings;
pub mod text;

pub use rooms::ROOMS;
use rooms::{Target, author_of, target_of};
pub use settings::{IrcPersona, IrcSettings};

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
use tactful_runtime::{Connected, Held, PlatformError, Roster, RuntimeHandle, wall_clock};

/// What people see when a persona leaves because tactful stops.
const QUIT_MESSAGE: &str = "tactful is stopping; back soon";

/// How long a reply waits for its persona's connection before it is given
/// up ([`Shared::sender_of`]).
const CONNECT_WAIT: Duration = Duration::from_secs(30);

struct Shared {
    settings: IrcSettings,
    /// Per persona: the live connection's sender and the nick it got.
    live: Mutex<HashMap<PersonaId, (IrcSender, String)>>,
    /// The accounts: the runtime kept, and each one's backoff.
    roster: Roster,
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
        let personas = settings.personas.iter().map(|p| p.id.clone()).collect();
        let roster = Roster::new("IRC", personas, settings.max_backoff);
        IrcPlatform {
            shared: Arc::new(Shared {
                settings,
                live: Mutex::new(HashMap::new()),
                roster,
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
        self.shared.roster.keep_runtime(handle);
    }

    /// Connects every persona (each reconnecting on its own until the
    /// returned tasks are aborted).
    pub fn start(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let shared = &self.shared;
        shared
            .roster
            .start_every(|i| Box::pin(shared.clone().keep_connected(i)))
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
        let everyone = shared.settings.personas.len();
        tactful_runtime::waiting::until(&shared.connected, wait, || {
            (self.connected() == everyone).then_some(())
        })
        .await;
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
