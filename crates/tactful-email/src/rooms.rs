//! How mail is named in tactful: a list is `email:<list address>`, a
//! persona's direct mail with someone is `email:dm:<persona>:<address>`;
//! a person is their address; a thread is its first message's
//! Message-ID.

use super::*;

/// How email's rooms are named.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "email:",
    noun: "mailing list or mail conversation",
};

/// A room id's meaning by mail.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A list, by its address.
    List(String),
    /// Persona `.0`'s direct mail with address `.1`.
    Direct(PersonaId, String),
}

/// The room of a list.
pub(crate) fn list_room(list: &str) -> RoomId {
    ROOMS.room(list)
}

/// The room of `persona`'s direct mail with `with`.
pub(crate) fn direct_room(persona: &PersonaId, with: &str) -> RoomId {
    ROOMS.room(format!("dm:{persona}:{with}"))
}

/// What `room` names, or why it is not a mail room.
pub(crate) fn target_of(room: &RoomId) -> Result<Target, PlatformError> {
    ROOMS.parse(room, |rest| match rest.strip_prefix("dm:") {
        Some(dm) => {
            let (persona, with) = dm.split_once(':')?;
            is_address(with).then(|| Target::Direct(PersonaId::from(persona), with.to_owned()))
        }
        None => is_address(rest).then(|| Target::List(rest.to_owned())),
    })
}

/// Whether `s` looks like one plain address (`local@domain`): no spaces,
/// brackets or line breaks, one `@` with text on both sides.
pub fn is_address(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && !s
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || "<>()[],;:\"\\".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_direct_mail_read_back_as_what_they_name() {
        let list = list_room("dev@lists.example.org");
        assert_eq!(list.as_str(), "email:dev@lists.example.org");
        assert_eq!(target_of(&list), Ok(Target::List("dev@lists.example.org".into())));
        let dm = direct_room(&PersonaId::from("docs"), "alice@example.org");
        assert_eq!(dm.as_str(), "email:dm:docs:alice@example.org");
        assert_eq!(
            target_of(&dm),
            Ok(Target::Direct(
                PersonaId::from("docs"),
                "alice@example.org".into()
            ))
        );
        assert!(target_of(&RoomId::new("xmpp:a@b.c")).is_err());
        assert!(target_of(&RoomId::new("email:not an address")).is_err());
        assert!(target_of(&RoomId::new("email:dm:docs:a@b.c\r\nBcc: x@y.z")).is_err());
        assert!(!is_address("a@b"), "a domain has a dot");
        assert!(!is_address("<a@b.c>"));
    }
}
