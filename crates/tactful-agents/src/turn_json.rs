//! The JSON view of a turn, for backends that take the turn as data
//! (`kind = "command"` reads it on stdin).
//!
//! ```json
//! {
//!   "turn": "t3", "kind": "reply",
//!   "persona": { "id": "docs", "name": "Docs" },
//!   "room": "main", "thread": null, "is_dm": false, "silence_token": "NO_REPLY",
//!   "prompt": { "system": "...", "messages": [{ "role": "user", "content": "[from Alice] ..." }] },
//!   "triggers": [{ "message_id": "m4", "sender_id": "alice", "sender_name": "Alice", "is_bot": false,
//!                  "text": "...", "reply_to": null, "thread": null, "time": "..." }],
//!   "transcript": [{ "message_id": "m2", "sender_id": "bob", "sender_name": "Bob", "is_bot": false,
//!                    "own": false, "text": "...", "reply_to": null, "thread": null, "time": "..." }]
//! }
//! ```
//!
//! `prompt` is what a chat model would be sent; the other fields let a
//! program make its own choices (`triggers` carry the sender context:
//! message ids for `[[reply_to:…]]`).

use serde_json::{Value, json};
use tactful_core::TurnRequest;
use tactful_core::prompt;
use tactful_core::transcript::{Entry, sanitize_name};

fn message(e: &Entry, turn: &TurnRequest) -> Value {
    json!({
        "message_id": e.id.as_str(),
        "sender_id": e.author.as_str(),
        "sender_name": sanitize_name(&e.author_name),
        "is_bot": e.is_bot,
        "own": e.persona == Some(turn.persona_idx),
        "text": e.text.as_ref(),
        "reply_to": e.reply_to.as_ref().map(|r| r.as_str()),
        "thread": e.thread.as_ref().map(|t| t.as_str()),
        "time": e.time.to_rfc3339(),
    })
}

/// The turn as JSON, its prompt rendered with `contract`.
pub fn turn_json(turn: &TurnRequest, contract: &str) -> Value {
    json!({
        "turn": turn.turn.to_string(),
        "kind": turn.kind.as_str(),
        "persona": { "id": turn.persona.as_str(), "name": turn.persona_name.as_ref() },
        "room": turn.room.as_str(),
        "thread": turn.thread.as_ref().map(|t| t.as_str()),
        "is_dm": turn.is_dm,
        "silence_token": turn.silence_token.as_deref(),
        "prompt": prompt::render(turn, contract),
        "triggers": turn.triggers.iter().map(|e| message(e, turn)).collect::<Vec<_>>(),
        "transcript": turn.history.iter().map(|e| message(e, turn)).collect::<Vec<_>>(),
    })
}
