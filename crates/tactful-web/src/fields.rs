//! Limits on every field a client sends, counted in characters.
//!
//! A client is anyone who can open a WebSocket to the room: its fields are
//! kept in the history every later joiner is sent and handed to the engine,
//! so each is bounded (six 8 MB `reply_to`s once cost 250 MB and a 50 MB
//! history frame per joiner) and checked for characters that would garble
//! what others see.

use crate::identity::has_controls;

/// The longest room name, in characters.
pub const MAX_ROOM_CHARS: usize = 64;
/// The longest message id (`reply_to`, `thread`) or mention id.
pub const MAX_ID_CHARS: usize = 128;
/// The most mentions one message may carry.
pub const MAX_MENTIONS: usize = 32;

/// A room name: trimmed, 1 to [`MAX_ROOM_CHARS`] characters, no control or
/// direction characters.
pub fn room_name(raw: &str) -> Result<String, String> {
    let room = raw.trim();
    if room.is_empty() || room.chars().count() > MAX_ROOM_CHARS {
        return Err(format!("a room name has 1 to {MAX_ROOM_CHARS} characters"));
    }
    if has_controls(room) || room.chars().any(|c| c == '\u{200B}' || c == '\u{FEFF}') {
        return Err("a room name cannot contain control, invisible or text-direction characters".to_owned());
    }
    // Other platforms' rooms are named `tg:<chat>`, `discord:<channel>`,
    // `irc:#chan`…: a web room of that name would be their room, its
    // messages heard as theirs and the personas' replies posted there.
    if room.contains(':') {
        return Err("a room name cannot contain ':' (other platforms' rooms are named with it)".to_owned());
    }
    // Direct rooms are opened from the member list, never by name.
    if crate::direct::is_direct(room) {
        return Err(format!(
            "rooms starting with {} are direct conversations: open one from the member list",
            crate::direct::PREFIX
        ));
    }
    Ok(room.to_owned())
}

/// A message id a client refers to (`reply_to`, `thread`).
pub fn message_id(field: &str, id: &str) -> Result<(), String> {
    if id.is_empty() || id.chars().count() > MAX_ID_CHARS || !id.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!(
            "`{field}` must be a message id: 1 to {MAX_ID_CHARS} visible ASCII characters"
        ));
    }
    Ok(())
}

/// The ids a message mentions.
pub fn mentions(ids: &[String]) -> Result<(), String> {
    if ids.len() > MAX_MENTIONS {
        return Err(format!("a message mentions at most {MAX_MENTIONS} members"));
    }
    for id in ids {
        if id.is_empty() || id.chars().count() > MAX_ID_CHARS || has_controls(id) {
            return Err(format!(
                "a mention is a member id of 1 to {MAX_ID_CHARS} characters"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_is_bounded_in_characters() {
        assert_eq!(room_name("  lobby ").as_deref(), Ok("lobby"));
        assert!(
            room_name(&"é".repeat(64)).is_ok(),
            "counted in characters, not bytes"
        );
        for bad in [
            "",
            "   ",
            "a\u{202E}b",
            "tab\there",
            "zero\u{200B}width",
            "tg:-1001234567",
            "discord:123",
            "irc:#ops",
            "@guide.0011223344556677",
        ] {
            assert!(room_name(bad).is_err(), "{bad:?}");
        }
        assert!(room_name(&"x".repeat(65)).is_err());
        assert!(message_id("reply_to", "w12").is_ok());
        assert!(message_id("reply_to", &"w".repeat(8 * 1024 * 1024)).is_err());
        assert!(message_id("thread", "has space").is_err());
        assert!(mentions(&vec!["docs".to_owned(); 33]).is_err());
        assert!(mentions(&["web:Alice".to_owned()]).is_ok());
        assert!(mentions(&["x".repeat(129)]).is_err());
    }
}
