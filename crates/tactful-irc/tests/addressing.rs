//! How people address each other on IRC, both ways: whatever the rest of
//! the line says, a nick after a greeting or in a leading list of nicks,
//! or thanked or asked at the end of the line, is addressed, and a nick
//! that is the subject of the sentence, or an object said in passing, is
//! not.

use proptest::prelude::*;
use tactful_irc::text::mentioned;

/// A persona's nick: IRC nick characters, not an English word the rules
/// read (so "docs" stays "docs", never "is").
fn nick() -> impl Strategy<Value = String> {
    "[a-zA-Z][a-zA-Z0-9_\\-\\[\\]{}|^`]{2,11}".prop_filter("not a word the rules read", |n| {
        ![
            "hey", "and", "but", "yes", "now", "the", "hello", "thanks", "well", "okay", "sorry",
        ]
        .contains(&n.to_lowercase().as_str())
    })
}

/// The rest of a line: words and punctuation, without an `@`.
fn rest() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z]{1,8}",
            Just("?".to_owned()),
            Just(",".to_owned()),
            Just("it's".to_owned())
        ],
        1..12,
    )
    .prop_map(|w| w.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn a_nick_after_a_greeting_or_an_interjection_is_addressed(
        nick in nick(),
        lead in prop::sample::select(vec!["hi", "Hi", "hey", "okay", "ok", "but", "so", "well", "thanks,", "yes,", "Hello"]),
        sep in prop::sample::select(vec![":", ","]),
        rest in rest(),
    ) {
        let line = format!("{lead} {nick}{sep} {rest}");
        prop_assert_eq!(mentioned(&line, &[nick.as_str()]), [nick.as_str()], "{}", line);
    }

    #[test]
    fn every_nick_of_a_leading_list_is_addressed(
        others in prop::collection::vec("[a-z][a-z0-9_]{2,8}", 0..3),
        nick in nick(),
        rest in rest(),
    ) {
        let mut lead: Vec<String> = others.iter().map(|o| format!("{o},")).collect();
        lead.push(format!("{nick},"));
        let line = format!("{} {rest}", lead.join(" "));
        prop_assert_eq!(mentioned(&line, &[nick.as_str()]), [nick.as_str()], "{}", line);
    }

    #[test]
    fn a_nick_as_the_subject_or_an_object_is_not_addressed(
        nick in nick(),
        verb in prop::sample::select(vec!["gave", "is down", "said", "told", "was gone", "knows", "helped", "mentioned"]),
        object in prop::sample::select(vec!["the", "with", "ask", "to", "like", "than"]),
        before in rest(),
        rest in rest(),
    ) {
        let subject = format!("{nick} {verb} {rest}");
        prop_assert!(mentioned(&subject, &[nick.as_str()]).is_empty(), "{}", subject);
        // An object said in passing, closing the line or not.
        let passing = format!("i think {before} {object} {nick}{}", if rest.len() % 2 == 0 { "" } else { "." });
        prop_assert!(mentioned(&passing, &[nick.as_str()]).is_empty(), "{}", passing);
    }

    #[test]
    fn a_nick_thanked_or_asked_at_the_end_of_a_line_is_addressed(
        nick in nick(),
        close in prop::sample::select(vec!["", " :)", " ?", "!", " lol", "."]),
        before in rest(),
    ) {
        let thanked = format!("i said {before} thanks {nick}{close}");
        prop_assert_eq!(mentioned(&thanked, &[nick.as_str()]), [nick.as_str()], "{}", thanked);
        let asked = format!("what was wrong, {nick}{close}");
        prop_assert_eq!(mentioned(&asked, &[nick.as_str()]), [nick.as_str()], "{}", asked);
    }
}
