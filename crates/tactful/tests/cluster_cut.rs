//! A process cut off from the database but still running (its network to
//! PostgreSQL fails; the chat platform still answers it): once its lease
//! has run out, another process takes its bot, and the cut-off one stops
//! polling it, so the bot is never listened with twice (Telegram answers
//! two pollers of one token with `409 Conflict`; on IRC two connections
//! would fight over one nick). Back in reach, it takes nothing the other
//! holds, and every question is answered once throughout.
//!
//! The cut is a proxy between the process and PostgreSQL that drops every
//! connection and refuses new ones, as a firewall would.

#![cfg(feature = "telegram")]

mod cluster_setup;
mod common;
mod telegram_double;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use cluster_setup::{DOCS_ACCOUNT, TOKEN, bot, config, holder, mention, shares, wait_db};
use common::{free_port, listening, run_tactful};
use tactful_store::testing::Schema;
use telegram_double::Double;

const CHAT: i64 = -7001;

/// A TCP proxy to PostgreSQL that can be cut and healed.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    links: Arc<Mutex<Vec<tokio::task::AbortHandle>>>,
}

impl Proxy {
    async fn start(target: String) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let port = listener.local_addr().expect("address").port();
        let cut = Arc::new(AtomicBool::new(false));
        let links: Arc<Mutex<Vec<tokio::task::AbortHandle>>> = Arc::default();
        let (is_cut, all) = (cut.clone(), links.clone());
        tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if is_cut.load(Ordering::SeqCst) {
                    // Refused: closed at once.
                    continue;
                }
                let target = target.clone();
                let link = tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
                all.lock().expect("links").push(link.abort_handle());
            }
        });
        Proxy { port, cut, links }
    }

    /// Drops every connection through it and refuses new ones.
    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for link in self.links.lock().expect("links").drain(..) {
            link.abort();
        }
    }

    fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
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
    let Some(schema) = Schema::new() else { return };
    let double = Double::start(vec![bot()]).await;
    let (_, target) = through(&schema.url, 0);
    let proxy = Proxy::start(target).await;
    let (proxied, _) = through(&schema.url, proxy.port);
    let node = |url: &str, server: u16| {
        let dir = tempfile::tempdir().expect("temp dir");
        let text = format!(
            "{}\n[server]\nlisten = \"127.0.0.1:{server}\"\n",
            config(url, &double.url, 2, 0)
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
    proxy.cut();
    wait_db("the other process polling the bot", || {
        holder(&schema, DOCS_ACCOUNT) == Some(other.1.id())
    });
    wait_db("the cut-off process no longer listening", || {
        listening(cut_off.2).is_empty()
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
    assert!(listening(cut_off.2).is_empty(), "{:?}", listening(cut_off.2));
    assert_eq!(holder(&schema, DOCS_ACCOUNT), Some(other.1.id()));
}
