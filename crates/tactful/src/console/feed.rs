//! The console's live transcript: what the runtime traces, as JSON lines
//! per room, for `GET /console/api/live` (Server-Sent Events).
//!
//! Every line has the shape `tactful replay` prints (see
//! [`crate::trace_lines`]), plus `message` lines for what people said and
//! `answered` lines for an agent's latency and tokens. A bounded broadcast
//! ring holds the newest [`RING`] lines: a console that reads too slowly
//! is told how many it missed (and reloads the room from the store)
//! instead of holding memory for it.

use std::sync::Arc;

use serde_json::{Value, json};
use tactful_runtime::TraceEvent;
use tokio::sync::broadcast;

use super::elsewhere::{Elsewhere, Watching};

/// Lines held for slow readers.
pub const RING: usize = 1024;
/// The longest message text a live line carries (the store has the rest).
const MAX_TEXT: usize = 2000;

/// One line of the live transcript.
#[derive(Clone, Debug)]
pub struct FeedLine {
    /// The room it is about.
    pub room: Arc<str>,
    /// The line, as JSON text.
    pub json: Arc<str>,
}

/// Where the runtime's trace is turned into live lines; cheap to clone.
#[derive(Clone, Debug)]
pub struct Feed {
    tx: broadcast::Sender<FeedLine>,
    /// With several processes: the consoles of the others.
    elsewhere: Option<Arc<Elsewhere>>,
}

impl Default for Feed {
    fn default() -> Self {
        Feed {
            tx: broadcast::channel(RING).0,
            elsewhere: None,
        }
    }
}

impl Feed {
    /// A feed that also sends its lines to the consoles of the other
    /// processes sharing the store when they watch, and shows theirs.
    pub fn shared(elsewhere: Arc<Elsewhere>) -> Feed {
        Feed {
            elsewhere: Some(elsewhere),
            ..Feed::default()
        }
    }

    /// Publishes `event` when someone is watching (here, or in another
    /// process's console) and it is about a room.
    pub fn observe(&self, event: &TraceEvent) {
        let elsewhere = self.elsewhere.as_deref().filter(|e| e.anyone_watching());
        let here = self.tx.receiver_count() > 0;
        if !here && elsewhere.is_none() {
            return;
        }
        if let Some((room, line)) = line(event) {
            let json = line.to_string();
            if let Some(e) = elsewhere
                && e.watches(&room)
            {
                e.send_line(&room, &json);
            }
            if here {
                self.publish(&room, &json);
            }
        }
    }

    /// Shows a line about `room` to this process's consoles (a line of
    /// its own, or one another process sent).
    pub fn publish(&self, room: &str, json: &str) {
        if self.tx.receiver_count() > 0 {
            let _ = self.tx.send(FeedLine {
                room: Arc::from(room),
                json: Arc::from(json),
            });
        }
    }

    /// Every line from now on, and, with several processes, the watch that
    /// asks the others for theirs (held as long as the lines are read).
    pub fn subscribe(&self, room: Option<String>) -> (broadcast::Receiver<FeedLine>, Option<Watching>) {
        let rx = self.tx.subscribe();
        (rx, self.elsewhere.as_ref().map(|e| e.watch(room)))
    }
}

fn cut(text: &str) -> &str {
    match text.char_indices().nth(MAX_TEXT) {
        Some((i, _)) => &text[..i],
        None => text,
    }
}

/// The room and line for a trace event, if it is one the console shows.
fn line(event: &TraceEvent) -> Option<(String, Value)> {
    let v = match event {
        TraceEvent::Inbound { msg } => json!({
            "at": msg.time.as_secs_f64(),
            "type": "message",
            "room": msg.room,
            "msg": msg.id,
            "sender": &*msg.sender.name,
            "is_bot": msg.sender.is_bot,
            "text": cut(&msg.text),
            "reply_to": msg.reply_to,
        }),
        TraceEvent::Answered {
            turn,
            kind,
            room,
            persona,
            agent,
            latency,
            usage,
            error,
        } => json!({
            "type": "answered",
            "turn": turn.to_string(),
            "kind": kind.as_str(),
            "room": room,
            "persona": persona,
            "agent": agent.as_ref(),
            "latency_ms": latency.as_millis() as u64,
            "usage": usage,
            "error": error,
        }),
        TraceEvent::Delivered {
            room,
            local,
            platform,
        } => json!({ "type": "delivered", "room": room, "id": local, "platform_id": platform }),
        TraceEvent::Engine(output) => crate::trace_lines::line(output)?,
        _ => return None,
    };
    let room = v["room"].as_str()?.to_owned();
    Some((room, v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tactful_core::{Message, Timestamp};

    #[test]
    fn lines_are_published_only_while_watched_and_cut_to_size() {
        let feed = Feed::default();
        let long = "é".repeat(MAX_TEXT + 10);
        let msg = Message::new("m1", "lobby", "alice", &long, Timestamp(1_000));
        let event = TraceEvent::Inbound { msg: Box::new(msg) };
        // No one watching: nothing is built or held.
        feed.observe(&event);
        let (mut rx, _) = feed.subscribe(None);
        assert!(rx.try_recv().is_err());
        feed.observe(&event);
        let got = rx.try_recv().expect("a line");
        assert_eq!(&*got.room, "lobby");
        let v: Value = serde_json::from_str(&got.json).expect("json");
        assert_eq!(v["type"], "message");
        assert_eq!(v["sender"], "alice");
        assert_eq!(v["text"].as_str().map(|t| t.chars().count()), Some(MAX_TEXT));
    }

    #[test]
    fn a_slow_reader_is_told_what_it_missed() {
        let feed = Feed::default();
        let (mut rx, _) = feed.subscribe(None);
        let msg = Message::new("m", "lobby", "alice", "hi", Timestamp(0));
        let event = TraceEvent::Inbound { msg: Box::new(msg) };
        for _ in 0..RING + 5 {
            feed.observe(&event);
        }
        assert!(matches!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(5))
        ));
    }
}
