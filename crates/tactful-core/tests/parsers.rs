//! Property tests: the text parsers never panic and behave the same on any
//! input, since every byte of them comes from users or models.

use proptest::prelude::*;
use tactful_core::addressing::{parse_command, text_mentions};
use tactful_core::delivery::{Visible, visible};
use tactful_core::directives::{self, valid_reply_to};
use tactful_core::silence::{DEFAULT_TOKEN, is_silence};
use tactful_core::transcript::{MAX_NAME_CHARS, sanitize_name};

/// Strings biased towards the characters the parsers care about.
fn tricky() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("[[".to_owned()),
            Just("]]".to_owned()),
            Just(":".to_owned()),
            Just("\n".to_owned()),
            Just("\r\n".to_owned()),
            Just("@".to_owned()),
            Just("/".to_owned()),
            Just(".".to_owned()),
            Just("-".to_owned()),
            Just(" ".to_owned()),
            Just("reply_to".to_owned()),
            Just("NO_REPLY".to_owned()),
            Just("é".to_owned()),
            Just("🦀".to_owned()),
            "[a-z0-9_]{1,6}",
            any::<char>().prop_map(String::from),
        ],
        0..24,
    )
    .prop_map(|parts| parts.concat())
}

fn id() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,64}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn directive_parsing_is_total_and_keeps_the_body(s in tricky()) {
        let (d, body) = directives::parse(&s);
        prop_assert!(s.ends_with(body), "the body is a suffix of the output");
        if !d.present {
            prop_assert_eq!(body, s.as_str());
        }
        if let Some(r) = &d.reply_to {
            prop_assert!(valid_reply_to(r));
        }
        // Deterministic.
        prop_assert_eq!(directives::parse(&s), (d.clone(), body));
    }

    #[test]
    fn directive_headers_round_trip(
        ids in prop::collection::vec(id(), 1..4),
        crlf in any::<bool>(),
        body in "[A-Za-z][A-Za-z0-9 ,.!?]{0,40}",
    ) {
        let nl = if crlf { "\r\n" } else { "\n" };
        let header: String = ids.iter().map(|i| format!("[[reply_to:{i}]]{nl}")).collect();
        let output = format!("{header}{body}");
        let (d, rest) = directives::parse(&output);
        prop_assert_eq!(rest, body.as_str());
        prop_assert_eq!(d.reply_to.as_deref(), ids.last().map(String::as_str));
    }

    #[test]
    fn mention_scanning_is_total(s in tricky()) {
        for m in text_mentions(&s) {
            prop_assert!(!m.is_empty());
            let needle = format!("@{m}");
            prop_assert!(s.contains(&needle));
            prop_assert!(!m.contains(char::is_whitespace));
            prop_assert!(!m.ends_with(['.', '-']));
        }
        let _ = parse_command(&s);
    }

    #[test]
    fn a_spaced_mention_is_always_found(
        before in "[a-z ,!?]{0,20}",
        handle in "[a-z][a-z0-9_]{0,10}",
        // A boundary: space or punctuation, or a full stop that ends the
        // text or is followed by a space (`@a.b` is the handle `a.b`).
        after in prop_oneof!["[ ,!?][a-z ,.!?]{0,20}", Just(".".to_owned()), "[.] [a-z]{0,8}"],
    ) {
        let text = format!("{before} @{handle}{after}");
        prop_assert!(text_mentions(&text).any(|m| m == handle));
    }

    #[test]
    fn silence_is_exact(prefix in "[A-Za-z]{1,10}", s in tricky()) {
        prop_assert!(is_silence(DEFAULT_TOKEN, DEFAULT_TOKEN));
        let prose = format!("{prefix} {DEFAULT_TOKEN}");
        prop_assert!(!is_silence(&prose, DEFAULT_TOKEN));
        let _ = is_silence(&s, DEFAULT_TOKEN);
    }

    #[test]
    fn a_silent_answer_never_shows_while_it_streams(
        header in prop::sample::select(vec!["", "[[reply_to:m1]]\n", "[[reply_to:m1]] ", "[[a:b]][[c:d]]\r\n"]),
        spaces in prop::collection::vec("[ \t\n]{0,2}", 4),
        bracketed in any::<bool>(),
        upper in prop::collection::vec(any::<bool>(), 8),
    ) {
        let token: String = DEFAULT_TOKEN
            .chars()
            .zip(&upper)
            .map(|(c, u)| if *u { c } else { c.to_ascii_lowercase() })
            .collect();
        let (open, close) = if bracketed { ("[", "]") } else { ("", "") };
        let answer = format!("{header}{}{open}{}{token}{}{close}{}", spaces[0], spaces[1], spaces[2], spaces[3]);
        let (_, body) = directives::parse(&answer);
        prop_assert!(is_silence(body, DEFAULT_TOKEN), "{:?}", answer);
        for (i, _) in answer.char_indices().chain([(answer.len(), ' ')]) {
            let shown = visible(&answer[..i], Some(DEFAULT_TOKEN), true);
            prop_assert_eq!(shown, Visible::Hold, "{:?} of {:?}", &answer[..i], answer);
        }
    }

    #[test]
    fn sanitised_names_are_one_safe_line(s in tricky()) {
        let n = sanitize_name(&s);
        prop_assert!(n.chars().count() <= MAX_NAME_CHARS);
        prop_assert!(!n.contains(|c: char| c.is_control() || c == '[' || c == ']'));
        prop_assert_eq!(n.trim(), n.as_str());
    }
}

mod splitting {
    use proptest::prelude::*;
    use tactful_core::delivery::split_message;

    fn non_ws(s: &str) -> String {
        s.chars().filter(|c| !c.is_whitespace()).collect()
    }

    fn prose() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                "[a-zé]{1,12}",
                Just(" ".to_owned()),
                Just("\n".to_owned()),
                "[a-z]{20,80}"
            ],
            0..60,
        )
        .prop_map(|v| v.concat())
    }

    fn fenced() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                prose().prop_map(|p| format!("{p}\n")),
                // Backticks in the middle of a line are text, not a fence.
                ("[a-z ]{0,30}", "[a-z ]{0,30}").prop_map(|(a, b)| format!("{a}```{b}\n")),
                (
                    prop_oneof![
                        prop::sample::select(vec!["", "rust", "sh"]).prop_map(str::to_owned),
                        // An info string longer than a part.
                        "[a-z]{150,300}",
                    ],
                    prop::collection::vec("[a-z(){};]{0,40}", 0..12)
                )
                    .prop_map(|(lang, lines)| format!("```{lang}\n{}\n```\n", lines.join("\n"))),
            ],
            0..6,
        )
        .prop_map(|v| v.concat())
    }

    /// Whether a code block is open after `text`, reading fence lines the
    /// way the splitter (and Markdown renderers) do.
    fn open_after(text: &str) -> bool {
        let mut open = false;
        for line in text.lines() {
            let t = line.trim();
            if t.starts_with("```") {
                open = if open { t != "```" } else { true };
            }
        }
        open
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn parts_fit_and_nothing_is_lost(text in prose(), limit in 16usize..200) {
            let parts = split_message(&text, limit);
            for p in &parts {
                prop_assert!(p.chars().count() <= limit, "{} > {limit}: {p:?}", p.chars().count());
            }
            prop_assert_eq!(non_ws(&parts.concat()), non_ws(&text));
        }

        #[test]
        fn code_fences_balance_in_every_part(text in fenced(), limit in 24usize..200) {
            let parts = split_message(&text, limit);
            for (i, p) in parts.iter().enumerate() {
                prop_assert!(p.chars().count() <= limit, "{} > {limit}: {p:?}", p.chars().count());
                let last = i + 1 == parts.len();
                let expected = last && open_after(&text);
                prop_assert_eq!(open_after(p), expected, "part {} of {:?}: {:?}", i, parts, p);
            }
        }
    }
}
