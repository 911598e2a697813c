//! Direct conversations: one person and one persona, in a room nobody else
//! can open.
//!
//! The web room has no accounts, so a direct room cannot belong to a name
//! (whoever types "Alice" after Alice leaves would read her conversations).
//! It belongs to the key Alice's browser was given for her name and keeps:
//! the room is named after the persona and a hash of that key
//! (`@guide.3f9a…`), so only a connection that shows the key is put in it.
//! Rooms whose names start with `@` are never joined by name.

use sha2::{Digest, Sha256};

/// What every direct room's name starts with, and no other room's.
pub const PREFIX: char = '@';

/// The direct room of the person holding `key` with persona `persona`.
pub fn room_of(key: &str, persona: &str) -> String {
    let digest = Sha256::new()
        .chain_update(b"tactful direct room\0")
        .chain_update(key.as_bytes())
        .finalize();
    let tag: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    format!("{PREFIX}{persona}.{tag}")
}

/// The persona a direct room is with, or `None` for any other room.
pub fn persona_of(room: &str) -> Option<&str> {
    let rest = room.strip_prefix(PREFIX)?;
    rest.rsplit_once('.').map(|(persona, _)| persona)
}

/// Whether `room` is a direct room's name.
pub fn is_direct(room: &str) -> bool {
    room.starts_with(PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_room_is_the_keys_and_the_personas_and_no_one_elses() {
        let alice = room_of("0123456789abcdef0123456789abcdef", "guide");
        assert!(alice.starts_with("@guide."), "{alice}");
        assert_eq!(persona_of(&alice), Some("guide"));
        assert_eq!(
            alice,
            room_of("0123456789abcdef0123456789abcdef", "guide"),
            "the same every time"
        );
        assert_ne!(
            alice,
            room_of("fedcba9876543210fedcba9876543210", "guide"),
            "another key, another room"
        );
        assert_ne!(
            alice,
            room_of("0123456789abcdef0123456789abcdef", "host"),
            "another persona, another room"
        );
        assert!(
            !alice.contains("0123456789abcdef"),
            "the key itself is not in the name: {alice}"
        );
        assert_eq!(persona_of("lobby"), None);
        assert_eq!(persona_of("@odd.persona.id.00ff"), Some("odd.persona.id"));
    }
}
