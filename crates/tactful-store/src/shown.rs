//! Messages exactly as a platform that keeps its history in tactful (the
//! web room) shows them.
//!
//! The web room writes each message here before anyone sees it, so what
//! people saw survives `kill -9`, and a reply part sent again after a
//! restart is recognised by its idempotency key instead of being shown
//! twice.

use tactful_core::{MsgId, RoomId, Timestamp, UserId};

/// A message as a room shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShownMessage {
    /// The id the platform knows it by.
    pub id: MsgId,
    /// The room.
    pub room: RoomId,
    /// For a persona's reply part: its idempotency key (see the runtime's
    /// delivery path), so a resend is recognised.
    pub key: Option<String>,
    /// The author's account id (a persona's id for replies).
    pub sender: UserId,
    /// The author's display name.
    pub sender_name: String,
    /// Whether the author is a bot.
    pub is_bot: bool,
    /// The text.
    pub text: String,
    /// What it replies to, by platform id.
    pub reply_to: Option<MsgId>,
    /// When.
    pub time: Timestamp,
    /// Reactions on it, in the order they came: each emoji with who put
    /// it there.
    pub reactions: Vec<(String, Vec<String>)>,
}

/// The most distinct reactions kept on one message.
const MAX_REACTIONS: usize = 20;

/// `stored` reactions (as the column holds them) with `by`'s `emoji`
/// added: the new column value, or `None` when nothing changes (`by`
/// already put it there, or the message has [`MAX_REACTIONS`] kinds).
pub(crate) fn add_reaction(stored: Option<&str>, emoji: &str, by: &str) -> Option<String> {
    let mut all = parse_reactions(stored);
    let kinds = all.len();
    match all.iter_mut().find(|(e, _)| e == emoji) {
        Some((_, who)) if who.iter().any(|w| w == by) => return None,
        Some((_, who)) => who.push(by.to_owned()),
        None if kinds >= MAX_REACTIONS => return None,
        None => all.push((emoji.to_owned(), vec![by.to_owned()])),
    }
    Some(serde_json::to_string(&all).unwrap_or_default())
}

/// Stored reactions; what cannot be read is none.
pub(crate) fn parse_reactions(stored: Option<&str>) -> Vec<(String, Vec<String>)> {
    stored
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default()
}
