//! One bot's WebSocket to `/api/v4/websocket`: opened (resuming the last
//! connection by its id and the next sequence number when there was one),
//! authenticated with `authentication_challenge`, and read frame by frame
//! with the sequence checked. A gap in the sequence, a quiet socket or a
//! refused challenge ends the connection; the listener then opens another
//! and fetches what the gap may have held over REST.

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

/// The largest frame read: a post is at most 65,535 characters, and an
/// event carries one.
const MAX_FRAME: usize = 1 << 20;

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
    /// The next request's `seq`.
    request_seq: u64,
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
    /// Opens the socket and sends the token in `authentication_challenge`.
    pub async fn open(url: &str, token: &str, resume: &Resume) -> Result<Socket, String> {
        let address = address(url, resume);
        let shown = tactful_core::cause::shown_url(&address);
        let request = address
            .as_str()
            .into_client_request()
            .map_err(|e| format!("{shown}: {e}"))?;
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
        let mut socket = Socket {
            ws,
            request_seq: 1,
            last_heard: Instant::now(),
            ping,
        };
        socket
            .request("authentication_challenge", serde_json::json!({ "token": token }))
            .await?;
        Ok(socket)
    }

    /// Sends a request (`action`, `data`) with the next `seq`.
    async fn request(&mut self, action: &str, data: serde_json::Value) -> Result<(), String> {
        let frame = serde_json::json!({ "seq": self.request_seq, "action": action, "data": data });
        self.request_seq += 1;
        self.ws
            .send(WsMessage::text(frame.to_string()))
            .await
            .map_err(|e| format!("the event stream broke: {e}"))
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
            let msg = msg.map_err(|e| format!("the event stream broke: {e}"))?;
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
