//! What the HTTP doubles of Discord, Slack and Telegram share: their state
//! behind a lock with a signal when it changes, a loopback server stopped
//! when the double is dropped, and the bounded wait for what a test
//! expects the double to see. Each double keeps its own API, its own
//! view for waits and its own words when a wait fails.
#![allow(dead_code)] // the benches that borrow the Telegram double use some of these

use std::sync::Mutex;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// A double's state: what it holds, a signal for waits when it changes,
/// and its base URL (`http://127.0.0.1:port`).
pub struct State<I> {
    pub inner: Mutex<I>,
    pub changed: Notify,
    pub url: String,
}

impl<I> State<I> {
    pub fn new(inner: I, url: &str) -> State<I> {
        State {
            inner: Mutex::new(inner),
            changed: Notify::new(),
            url: url.to_owned(),
        }
    }
}

/// A request a bot made of the Slack or Telegram double (by method name),
/// and how it was answered.
#[derive(Clone, Debug)]
pub struct Call {
    /// The bot's token.
    pub token: String,
    pub method: String,
    pub body: serde_json::Value,
    pub status: u16,
    /// When the double answered it (the benchmarks' clock).
    pub at: Instant,
}

/// A double's HTTP server, stopped when dropped.
pub struct Server(tokio::task::JoinHandle<()>);

impl Drop for Server {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A listener on a free loopback port, and its `http://` URL.
pub async fn bind() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    (listener, url)
}

/// Serves `app` on `listener` until the returned [`Server`] is dropped.
pub fn serve(listener: tokio::net::TcpListener, app: axum::Router) -> Server {
    Server(tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    }))
}

/// Waits (60 s at most) until `holds`, looking again whenever `changed`
/// is signalled (and every half second); fails saying `what` was never
/// seen, with `dump` of what was.
pub async fn wait_until(
    changed: &Notify,
    what: &str,
    mut holds: impl FnMut() -> bool,
    dump: impl Fn() -> String,
) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let signalled = changed.notified();
        if holds() {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(!left.is_zero(), "{what}{}", dump());
        let _ = tokio::time::timeout(left.min(Duration::from_millis(500)), signalled).await;
    }
}
