//! One bot's WebSocket to `/api/v4/websocket`: opened with the token in
//! its `Authorization` header (the server resumes a connection only for a
//! socket authenticated when it opens, not by `authentication_challenge`
//! later), resuming the last connection by its id and the next sequence
//! number when there was one, and read frame by frame. A gap in the
//! sequence or a quiet socket ends the connection; the listener then
//! opens another and fetches what the gap may have held over REST.

use std::time::Duration;

use futures::{SinkExt as _, StreamExt as _};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::model::Frame;

/// How long opening the socket may take.
const OPEN_TIMEOUT: Duration = Duration::from_secs(15);

/// How often a ping goes out (the server's own clients ping every 30 s).
const PING_EVERY: Duration = Duration::from_secs(30);

/// A socket that says nothing, not even a pong, for this long is dead.
const QUIET_FOR: Duration = Duration::from_secs(75);

/// The largest frame read: a post is at most 65,535 characters (four
/// bytes each at worst), and an event carries one. A larger frame ends
/// the connection, and the next one starts afresh rather than resuming
/// (the server would send it again).
const MAX_FRAME: usize = 4 << 20;

/// Where a connection's events have got to, for resuming it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Resume {
    /// The server's id for the connection (`hello`), empty before one.
    pub connection_id: String,
    /// The sequence number of the next event expected.
    pub next_seq: u64,
}

/// An open, authenticated socket.
pub struct Socket {
    ws: WebSocketStream<MaybeTlsStream<TcpStream>>,
    /// Whether a frame too large to read ended the connection.
    pub oversized: bool,
    last_heard: Instant,
    ping: tokio::time::Interval,
}

/// The socket's address for the server at `url` (`http` → `ws`), with the
/// connection to resume.
pub fn address(url: &str, resume: &Resume) -> String {
    let base = if let Some(rest) = url.strip_prefix("https://") {
        format!("wss://{rest}")
    } else if let Some(rest) = url.strip_prefix("http://") {
        format!("ws://{rest}")
    } else {
        url.to_owned()
    };
    let mut out = format!("{}/api/v4/websocket", base.trim_end_matches('/'));
    if !resume.connection_id.is_empty() {
        out.push_str(&format!(
            "?connection_id={}&sequence_number={}",
            resume.connection_id, resume.next_seq
        ));
    }
    out
}

impl Socket {
    /// Opens the socket, authenticated by `token`.
    pub async fn open(url: &str, token: &str, resume: &Resume) -> Result<Socket, String> {
        let address = address(url, resume);
        let shown = tactful_core::cause::shown_url(&address);
        let mut request = address
            .as_str()
            .into_client_request()
            .map_err(|e| format!("{shown}: {e}"))?;
        let bearer = format!("Bearer {token}")
            .parse()
            .map_err(|_| "the token cannot be sent in a header".to_owned())?;
        request.headers_mut().insert("Authorization", bearer);
        let config = tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
            .max_message_size(Some(MAX_FRAME))
            .max_frame_size(Some(MAX_FRAME));
        let (ws, _) = tokio::time::timeout(
            OPEN_TIMEOUT,
            tokio_tungstenite::connect_async_with_config(request, Some(config), false),
        )
        .await
        .map_err(|_| {
            format!(
                "the event stream did not open within {} s: {shown}",
                OPEN_TIMEOUT.as_secs()
            )
        })?
        .map_err(|e| {
            format!(
                "the event stream did not open: {}",
                tactful_core::cause::explain(&e, &shown)
            )
        })?;
        let mut ping = tokio::time::interval_at(Instant::now() + PING_EVERY, PING_EVERY);
        ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Ok(Socket {
            ws,
            oversized: false,
            last_heard: Instant::now(),
            ping,
        })
    }

    /// Counts the socket as heard from now: after a wait that was not the
    /// socket's (what was missed, fetched before its first frame is read).
    pub fn heard_now(&mut self) {
        self.last_heard = Instant::now();
    }

    /// The next frame the server sends: an event or an answer. `Ok(None)`
    /// when the server closed the socket; frames that are not JSON are
    /// logged and skipped.
    pub async fn next(&mut self) -> Result<Option<Frame>, String> {
        loop {
            let quiet_until = self.last_heard + QUIET_FOR;
            let msg = tokio::select! {
                msg = self.ws.next() => msg,
                _ = self.ping.tick() => {
                    self.ws
                        .send(WsMessage::Ping(Vec::new().into()))
                        .await
                        .map_err(|e| format!("the event stream broke: {e}"))?;
                    continue;
                }
                _ = tokio::time::sleep_until(quiet_until) => {
                    return Err(format!("the event stream was silent for {} s", QUIET_FOR.as_secs()));
                }
            };
            let Some(msg) = msg else {
                return Ok(None);
            };
            let msg = match msg {
                Ok(m) => m,
                Err(tokio_tungstenite::tungstenite::Error::Capacity(e)) => {
                    self.oversized = true;
                    return Err(format!("the event stream sent a frame too large to read ({e})"));
                }
                Err(e) => return Err(format!("the event stream broke: {e}")),
            };
            self.last_heard = Instant::now();
            let text = match msg {
                WsMessage::Text(t) => t,
                WsMessage::Close(_) => return Ok(None),
                // Pings are answered by the library; pongs only show life.
                _ => continue,
            };
            match serde_json::from_str::<Frame>(text.as_str()) {
                Ok(frame) => return Ok(Some(frame)),
                Err(e) => {
                    tracing::warn!("Mattermost: skipped a frame that is not an event ({e})");
                }
            }
        }
    }

    /// Closes the socket politely.
    pub async fn close(mut self) {
        let _ = self.ws.close(None).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_address_follows_the_servers_scheme_and_names_the_connection_resumed() {
        assert_eq!(
            address("https://chat.example.org", &Resume::default()),
            "wss://chat.example.org/api/v4/websocket"
        );
        let resume = Resume {
            connection_id: "abc".into(),
            next_seq: 7,
        };
        assert_eq!(
            address("http://127.0.0.1:8065/", &resume),
            "ws://127.0.0.1:8065/api/v4/websocket?connection_id=abc&sequence_number=7"
        );
    }
}
