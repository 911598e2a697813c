//! What the engine's test files share: the clock, draining outputs, the
//! calls among them, and a message said in the `lobby`.
#![allow(dead_code)] // each test file uses some of these

use tactful_core::{Engine, Message, Output, Timestamp, TurnRequest};

/// `n` milliseconds after the epoch.
pub fn ms(n: u64) -> Timestamp {
    Timestamp::from_millis(n)
}

/// Every output waiting.
pub fn drain(e: &mut Engine) -> Vec<Output> {
    std::iter::from_fn(|| e.poll_output()).collect()
}

/// The agent calls among `out`.
pub fn calls(out: &[Output]) -> Vec<TurnRequest> {
    out.iter()
        .filter_map(|o| match o {
            Output::CallAgent(r) => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

/// Alice says `text` (id `id`) in the lobby at `at` ms; what followed.
pub fn ask(e: &mut Engine, at: u64, id: &str, text: &str) -> Vec<Output> {
    e.handle_message(ms(at), Message::new(id, "lobby", "alice", text, ms(at)));
    drain(e)
}

/// tactful's own notices among `out` (not the agents' replies): text, and
/// the message each replies to.
pub fn notices(out: &[Output]) -> Vec<(String, Option<String>)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send(s) if s.notice => {
                Some((s.text.clone(), s.reply_to.as_ref().map(ToString::to_string)))
            }
            _ => None,
        })
        .collect()
}
