//! Which room ids the console takes for a change: one a platform can
//! name, and one tactful has heard of.
//!
//! A policy is set for a room by its id (`?room=`), typed or pasted by a
//! person. An id no platform can have (a control character, 300
//! characters, `@alice`) would be stored and audited for a room that can
//! never speak, and a typo (`looby`) for a room nobody is in: each looks
//! applied and changes nothing. So an id is first read against the ways
//! platforms name their rooms (400 when none can), then looked for where
//! tactful keeps what it heard (404 when it is nowhere).

/// The longest room id the console takes, in bytes. The longest a
/// platform makes is well under it (a Matrix room id with its server
/// name, an IRC direct conversation's `irc:dm:<persona>:<nick>`); the web
/// room's names are 64 characters at most.
pub const MAX_ROOM_BYTES: usize = 256;

/// The room prefixes of the chat platforms tactful has, built into this
/// binary or not (each crate's `ROOMS`; a test checks they agree): a
/// room of another build's platform is still a room the store may hold.
pub const PLATFORM_PREFIXES: &[&str] = &[
    "irc:", "matrix:", "tg:", "discord:", "slack:", "xmpp:", "email:", "mm:", "zulip:",
];

/// Why no platform can have a room `room`; `None` when one can. `default`
/// (the console's default layer) is taken.
pub fn impossible(room: &str) -> Option<String> {
    if room == crate::config::DEFAULT_LAYER {
        return None;
    }
    if room.is_empty() {
        return Some("a room id is required: a room id from /console/api/rooms".to_owned());
    }
    if room.len() > MAX_ROOM_BYTES {
        return Some(format!(
            "a room id has at most {MAX_ROOM_BYTES} bytes; this one has {}: no platform names a room so",
            room.len()
        ));
    }
    if tactful_web::identity::has_controls(room) {
        return Some("a room id has no control, line-break or text-direction characters".to_owned());
    }
    if room.trim() != room {
        return Some(format!(
            "{room:?} starts or ends with a space: no platform names a room so"
        ));
    }
    if let Some((prefix, rest)) = room.split_once(':') {
        let prefix = format!("{prefix}:");
        if !PLATFORM_PREFIXES.contains(&prefix.as_str()) {
            return Some(format!("{room:?} is no platform's room: {}", schemes()));
        }
        if rest.is_empty() || rest.chars().any(char::is_whitespace) {
            return Some(format!(
                "{room:?} is not a room {prefix} names: its id follows the prefix, without spaces"
            ));
        }
        return None;
    }
    if tactful_web::direct::is_direct(room) {
        return (!is_direct_room(room)).then(|| {
            format!(
                "{room:?} is not a room: an id starting with {} is only a web room's direct conversation, \
                 `{}<persona>.<16 hex digits>` (a person is not a room)",
                tactful_web::direct::PREFIX,
                tactful_web::direct::PREFIX
            )
        });
    }
    // No prefix: a web room's name, with the web room's own rules.
    tactful_web::fields::room_name(room)
        .err()
        .map(|why| format!("{room:?} is no platform's room: {why}"))
}

/// Whether `room` is named as the web room names a direct conversation
/// (`tactful_web::direct::room_of`): `@<persona>.<16 hex digits>`.
fn is_direct_room(room: &str) -> bool {
    let Some(persona) = tactful_web::direct::persona_of(room) else {
        return false;
    };
    let tag = room.rsplit_once('.').map_or("", |(_, t)| t);
    !persona.is_empty()
        && tag.len() == 16
        && tag
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
}

/// How rooms are named, for the error.
fn schemes() -> String {
    let named: Vec<String> = PLATFORM_PREFIXES.iter().map(|p| format!("`{p}<id>`")).collect();
    format!(
        "rooms are named {}, or by a web room's name (no `:`)",
        named.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_no_platform_can_have_are_named_as_such() {
        for good in [
            "lobby",
            "team room",
            "default",
            "tg:-1001234",
            "discord:123456789012345678",
            "slack:C0123ABC",
            "matrix:!abc:example.org",
            "irc:#tactful",
            "irc:dm:docs:alice",
            "xmpp:lounge@conference.example.org",
            // A mailing list's room was refused until email's prefix was
            // listed here: its policy could not be set in the console.
            "email:dev@lists.example.org",
            "mm:4xp9fdt77pncbef59f4k1qe83o",
            "zulip:42",
            "zulip:dm:3,10",
            "@guide.0123456789abcdef",
        ] {
            assert_eq!(impossible(good), None, "{good}");
        }
        let long = "x".repeat(300);
        for bad in [
            "",
            "lob\u{7}by",
            "lobby\n",
            long.as_str(),
            "@alice",
            "@guide.XYZ",
            " lobby",
            "lobby ",
            "web:lobby",
            "nope:1",
            "tg:",
            "tg:12 34",
        ] {
            assert!(impossible(bad).is_some(), "{bad:?}");
        }
        assert!(
            impossible(&"é".repeat(200)).is_some_and(|e| e.contains("256 bytes")),
            "counted in bytes"
        );
    }

    #[test]
    fn the_direct_room_ids_the_web_room_makes_are_taken() {
        let room = tactful_web::direct::room_of("some-key", "guide");
        assert_eq!(impossible(&room), None, "{room}");
    }
}

/// The prefixes above are the ones the platforms' crates name their rooms
/// with.
#[cfg(all(
    test,
    feature = "irc",
    feature = "matrix",
    feature = "telegram",
    feature = "discord",
    feature = "slack",
    feature = "xmpp",
    feature = "email",
    feature = "mattermost",
    feature = "zulip"
))]
mod prefix_tests {
    #[test]
    fn every_platforms_prefix_is_known() {
        let prefixes = [
            tactful_irc::ROOMS.prefix,
            tactful_matrix::event::ROOMS.prefix,
            tactful_telegram::inbound::ROOMS.prefix,
            tactful_discord::inbound::ROOMS.prefix,
            tactful_slack::inbound::ROOMS.prefix,
            tactful_xmpp::ROOMS.prefix,
            tactful_email::ROOMS.prefix,
            tactful_mattermost::inbound::ROOMS.prefix,
            tactful_zulip::inbound::ROOMS.prefix,
        ];
        assert_eq!(prefixes.as_slice(), super::PLATFORM_PREFIXES);
    }
}
