//! How XMPP's rooms and people are named in tactful: `xmpp:<room jid>`
//! for a multi-user chat, `xmpp:dm:<persona>:<bare jid>` for a one-to-one
//! chat with a persona; a person is their bare JID where the room shows
//! it, else `xmpp:<room jid>/<nick>`.

use super::*;

/// How XMPP's rooms are named.
pub const ROOMS: RoomScheme = RoomScheme {
    prefix: "xmpp:",
    noun: "XMPP room or chat",
};

/// A room id's XMPP meaning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// A multi-user chat.
    Muc(BareJid),
    /// A one-to-one chat of persona `.0` with `.1`.
    Direct(PersonaId, BareJid),
}

impl Target {
    /// The JID stanzas for this room go to.
    pub(crate) fn jid(&self) -> &BareJid {
        match self {
            Target::Muc(j) | Target::Direct(_, j) => j,
        }
    }
}

/// The room id of a multi-user chat.
pub(crate) fn muc_room(room: &BareJid) -> RoomId {
    ROOMS.room(room)
}

/// The room id of `persona`'s one-to-one chat with `with`.
pub(crate) fn direct_room(persona: &PersonaId, with: &BareJid) -> RoomId {
    ROOMS.room(format!("dm:{persona}:{with}"))
}

/// What `room` names, or why it is not an XMPP room.
pub(crate) fn target_of(room: &RoomId) -> Result<Target, PlatformError> {
    ROOMS.parse(room, |rest| match rest.strip_prefix("dm:") {
        Some(dm) => {
            let (persona, jid) = dm.split_once(':')?;
            Some(Target::Direct(PersonaId::from(persona), BareJid::new(jid).ok()?))
        }
        None => BareJid::new(rest)
            .ok()
            .filter(|j| j.node().is_some())
            .map(Target::Muc),
    })
}

/// Someone in a room, as `allowed_users` and the transcript know them:
/// their bare JID when the room shows it, else the occupant JID.
pub(crate) fn person_in_room(room: &BareJid, nick: &str, real: Option<&BareJid>) -> UserId {
    match real {
        Some(jid) => UserId::new(jid.as_str()),
        None => UserId::new(format!("xmpp:{room}/{nick}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_and_chats_read_back_as_what_they_name() {
        let room = BareJid::new("team@conference.example.org").expect("jid");
        let id = muc_room(&room);
        assert_eq!(id.as_str(), "xmpp:team@conference.example.org");
        assert_eq!(target_of(&id), Ok(Target::Muc(room.clone())));
        let alice = BareJid::new("alice@example.org").expect("jid");
        let dm = direct_room(&PersonaId::from("docs"), &alice);
        assert_eq!(dm.as_str(), "xmpp:dm:docs:alice@example.org");
        assert_eq!(target_of(&dm), Ok(Target::Direct(PersonaId::from("docs"), alice)));
        assert!(target_of(&RoomId::new("irc:#x")).is_err());
        assert!(
            target_of(&RoomId::new("xmpp:conference.example.org")).is_err(),
            "a room has a name"
        );
        assert_eq!(
            person_in_room(&room, "Al", None).as_str(),
            "xmpp:team@conference.example.org/Al"
        );
    }
}
