//! A process cut off from the database but still running (its network to
//! PostgreSQL fails; the chat platform still answers it): once its lease
//! has run out, another process takes its bot, and the cut-off one stops
//! polling it, so the bot is never listened with twice (Telegram answers
//! two pollers of one token with `409 Conflict`; on IRC two connections
//! would fight over one nick). Back in reach, it takes nothing the other
//! holds, and every question is answered once throughout.
//!
//! The cut is a proxy between the process and PostgreSQL that drops every
//! connection and refuses new ones, as a firewall would; or one that keeps
//! every connection open and forwards nothing (a path that went silent
//! while the kernels still acknowledge, a frozen server): there the
//! process's calls to the store hang with no end, and only the watchdog on
//! its lease's clock stops it listening.

#![cfg(feature = "telegram")]

use crate::cluster_setup;
use crate::common;
use crate::telegram_double;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};

use cluster_setup::{DOCS_ACCOUNT, TOKEN, bot, config, holder, mention, shares, wait_db};
use common::{free_port, listening, reported_listening, run_tactful};
use tactful_store::testing::Schema;
use telegram_double::Double;

const CHAT: i64 = -7001;

/// How the proxy treats its connections.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Path {
    /// Forwards both ways.
    Open = 0,
    /// Refuses connections (closed at once).
    Cut = 1,
    /// Accepts and keeps connections, forwards nothing.
    Silent = 2,
}

/// A TCP proxy to PostgreSQL that can be cut, silenced and healed.
struct Proxy {
    port: u16,
    path: Arc<AtomicU8>,
    silent: tokio::sync::watch::Sender<bool>,
    links: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let port = listener.local_addr().expect("address").port();
        let path = Arc::new(AtomicU8::new(Path::Open as u8));
        let (silent, _) = tokio::sync::watch::channel(false);
        let links: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (now, all, hush) = (path.clone(), links.clone(), silent.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                // The state read and the link kept under the lock `heal`
                // drains under: no link outlives a change unseen.
                let mut links = all.lock().expect("links");
                let state = now.load(Ordering::SeqCst);
                if state == Path::Cut as u8 {
                    // Refused: closed at once.
                    continue;
                }
                let (target, mut hushed) = (target.clone(), hush.subscribe());
                let link = tokio::spawn(async move {
                    if state == Path::Silent as u8 {
                        // Held open, never answered.
                        std::future::pending::<()>().await;
                    }
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let hush = async { hushed.wait_for(|s| *s).await.is_ok() };
                        let silenced = tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => false,
                            silenced = hush => silenced,
                        };
                        if silenced {
                            // Both ends stay open, silent.
                            std::future::pending::<()>().await;
                        }
                    }
                    drop(inbound);
                });
                links.push(link.abort_handle());
            }
        });
        Proxy {
            port,
            path,
            silent,
            links,
        }
    }

    /// Drops every connection through it and refuses new ones.
    fn cut(&self) {
        self.set(Path::Cut);
    }

    /// Keeps every connection open and forwards nothing more, new ones
    /// too.
    fn silence(&self) {
        let _links = self.links.lock().expect("links");
        self.path.store(Path::Silent as u8, Ordering::SeqCst);
        self.silent.send_replace(true);
    }

    /// Forwards again; silenced connections are closed (their calls fail,
    /// and the process connects anew).
    fn heal(&self) {
        self.set(Path::Open);
    }

    /// Moves to `path` and closes every connection made before.
    fn set(&self, path: Path) {
        let mut links = self.links.lock().expect("links");
        self.path.store(path as u8, Ordering::SeqCst);
        self.silent.send_replace(false);
        for link in links.drain(..) {
            link.abort();
        }
    }
}

/// `url` with its `host:port` replaced by `127.0.0.1:port`, and the
/// `host:port` it named.
fn through(url: &str, port: u16) -> (String, String) {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let (user, host) = match authority.rsplit_once('@') {
        Some((u, h)) => (format!("{u}@"), h),
        None => (String::new(), authority),
    };
    let host = if host.contains(':') {
        host.to_owned()
    } else {
        format!("{host}:5432")
    };
    (format!("{scheme}://{user}127.0.0.1:{port}{tail}"), host)
}

/// The bot's answers to message `id`, placeholders aside.
fn answers(double: &Double, id: i64) -> Vec<String> {
    double
        .bot_messages(CHAT)
        .into_iter()
        .filter(|m| m.reply_to == Some(id) && m.text != "…" && !m.deleted)
        .map(|m| m.text)
        .collect()
}

fn answered_once(double: &Double, id: i64) {
    wait_db(&format!("message {id} answered"), || {
        !answers(double, id).is_empty()
    });
    assert_eq!(answers(double, id), [format!("docs answers {id}")]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_cut_off_from_the_database_stops_listening_once_its_lease_runs_out() {
    cut_off_and_back(Path::Cut).await;
}

/// The store's calls hang without end (nothing refused, nothing
/// answered): without a watchdog apart from them, the process would poll
/// beside the bot's new holder for as long as the path stays silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_whose_database_falls_silent_stops_listening_once_its_lease_runs_out() {
    cut_off_and_back(Path::Silent).await;
}

/// The cut-off process polls the bot first; `how` cuts it off: past its
/// lease the other process takes the bot, the cut-off one lets it go, and
/// healed it takes nothing back; each question is answered once.
async fn cut_off_and_back(how: Path) {
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let (_, target) = through(&schema.url, 0);
    let proxy = Proxy::start(target).await;
    let (proxied, _) = through(&schema.url, proxy.port);
    let node = |url: &str, server: u16| {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = format!(
            "{}\n[server]\nlisten = \"127.0.0.1:{server}\"\n",
            // Leases of 4 s: short, yet longer than a debug build's first
            // round under load (about 2 s beside two busy processes), which
            // with 2 s let the watchdog disconnect a bot just connected.
            config(url, &double.url, 4, 0)
        );
        let p = run_tactful(dir.path(), &text, &[("DOCS_TOKEN", TOKEN)]);
        (dir, p, server)
    };

    // The process behind the proxy starts first and polls the bot.
    let cut_off = node(&proxied, free_port());
    wait_db("the first process polling the bot", || {
        holder(&schema, DOCS_ACCOUNT) == Some(cut_off.1.id())
    });
    let other = node(&schema.url, free_port());
    wait_db("two processes sharing the partitions", || {
        shares(&schema).len() == 2
    });
    let before = mention(&double, CHAT, "before the cut");
    answered_once(&double, before);
    // Read over HTTP, which a loaded machine may answer late.
    wait_db("the first process reporting the bot", || {
        listening(cut_off.2) == ["docs"]
    });

    // Cut: past its lease, the other process takes the bot, and the
    // cut-off one lets it go (it reports no account, and polls no more).
    match how {
        Path::Cut => proxy.cut(),
        Path::Silent => proxy.silence(),
        Path::Open => {}
    }
    wait_db("the other process polling the bot", || {
        holder(&schema, DOCS_ACCOUNT) == Some(other.1.id())
    });
    // Said by the process itself: one that stopped answering is not one
    // that stopped listening.
    wait_db("the cut-off process no longer listening", || {
        reported_listening(cut_off.2).is_some_and(|l| l.is_empty())
    });
    let during = mention(&double, CHAT, "during the cut");
    answered_once(&double, during);
    wait_db("the other process reporting the bot", || {
        listening(other.2) == ["docs"]
    });

    // Healed: back among the processes, it takes nothing the other holds.
    proxy.heal();
    wait_db("both processes sharing the partitions again", || {
        shares(&schema).len() == 2
    });
    let after = mention(&double, CHAT, "after the cut");
    answered_once(&double, after);
    assert_eq!(reported_listening(cut_off.2), Some(Vec::new()));
    assert_eq!(holder(&schema, DOCS_ACCOUNT), Some(other.1.id()));
}
