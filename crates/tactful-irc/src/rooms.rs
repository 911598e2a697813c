//! How IRC's rooms and lines are named: `irc:#channel`,
//! `irc:dm:<persona>:<nick>`, and a heard line's id that carries its author.

use super::*;

/// Who wrote the line `id` names, from the nick its id carries (see
/// `Shared::heard`); `None` for a persona's own lines.
pub(crate) fn author_of(id: &MsgId) -> Option<&str> {
    id.as_str()
        .strip_prefix('i')?
        .split_once('.')
        .map(|(_, nick)| nick)
        .filter(|nick| !nick.is_empty())
}

/// A room id's IRC meaning.
pub(crate) enum Target {
    Channel(String),
    Private(String),
}

/// How IRC's rooms are named: `irc:#channel`, and `irc:dm:<persona>:<nick>`
/// for a private conversation.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "irc:",
    noun: "IRC channel or conversation",
};

pub(crate) fn target_of(room: &RoomId) -> Option<Target> {
    let rest = ROOMS.native(room)?;
    match rest.strip_prefix("dm:") {
        Some(dm) => dm
            .split_once(':')
            .map(|(_, nick)| Target::Private(nick.to_owned())),
        None => Some(Target::Channel(rest.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heard_line_names_its_author_and_a_persona_line_does_not() {
        assert_eq!(author_of(&MsgId::new("i1764-3.alice")), Some("alice"));
        assert_eq!(author_of(&MsgId::new("i1764-3.[away]|bob")), Some("[away]|bob"));
        assert_eq!(author_of(&MsgId::new("i1764-4")), None, "a persona's own line");
        assert_eq!(author_of(&MsgId::new("i1764-5.")), None);
        assert_eq!(author_of(&MsgId::new("web-9.alice")), None, "not an IRC line");
    }
}
