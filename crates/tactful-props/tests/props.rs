//! The fuzz targets' properties on stable, in every CI run: proptest over
//! inputs biased towards what each parser cares about, plus the inputs the
//! fuzzers found (each failed before its fix).

use proptest::prelude::*;
use tactful_props as props;

/// Strings built from the pieces the parsers react to.
fn tricky(pieces: &'static [&'static str]) -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(pieces).prop_map(str::to_owned),
            "[a-z0-9_ ]{1,8}",
            any::<char>().prop_map(String::from),
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

const MARKUP: &[&str] = &[
    "[[", "]]", "[", "]", ":", "\n", "\r\n", "\r", " ", "\t", "reply_to", "NO_REPLY", "no_reply", "N", "NO_",
    "@", "/", "```", "```rust", "`", "é", "🦀", "\0",
];

fn with_prefix(prefix: Vec<u8>, s: String) -> Vec<u8> {
    let mut v = prefix;
    v.extend_from_slice(s.as_bytes());
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1500))]

    #[test]
    fn directives(s in tricky(MARKUP)) {
        props::directives(s.as_bytes());
    }

    #[test]
    fn streaming(mode in any::<u8>(), s in tricky(MARKUP)) {
        props::streaming(&with_prefix(vec![mode], s));
    }

    #[test]
    fn addressing(s in tricky(MARKUP)) {
        props::addressing(s.as_bytes());
    }

    #[test]
    fn split(a in any::<u8>(), b in any::<u8>(), s in tricky(MARKUP)) {
        props::split(&with_prefix(vec![a, b], s));
    }

    #[test]
    fn irc_text(m in any::<u8>(), s in tricky(MARKUP)) {
        props::irc_text(&with_prefix(vec![m], s));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn config(s in tricky(&[
        "[[persona]]\n", "id = \"docs\"\n", "agent = \"a\"\n", "[agents.a]\n", "kind = \"script\"\n",
        "rules = []\n", "[platforms.web]\n", "auth_token = \"hunter2-secret\"\n",
        "api_key = \"sk-abcdef123456\"\n", "password = 42\n", "=", "\"", "\n", "[rooms.default]\n",
        "mode = \"shout\"\n", "matrix = { user_id = \"@a:b\", password = \"pw-123456\", x = 1 }\n",
    ])) {
        props::config(s.as_bytes());
    }

    #[test]
    fn replay(lines in prop::collection::vec(
        (0u32..50, prop::sample::select(vec!["alice", "bob", "docs", "chef"]),
         tricky(&["@docs", "@chef", "@guide", "?", "fail", "silence", "/help@docs", " "]),
         any::<bool>()),
        0..12,
    )) {
        let mut at = 0;
        let scenario: String = lines
            .into_iter()
            .map(|(gap, from, text, bot)| {
                at += gap;
                serde_json::json!({ "at": at, "from": from, "text": text, "bot": bot }).to_string() + "\n"
            })
            .collect();
        props::replay(scenario.as_bytes());
    }
}

#[test]
fn what_the_fuzzers_found_holds_now() {
    // `[ NO_REPLY ]` is silence, so `[ N` must not show while it streams.
    props::streaming(b"\x00[ NO_REPLY ]");
    props::streaming(b"\x00[\nNO_REPLY]");
    // Without silence, a lone `[` after a header could still be a header.
    props::streaming(b"\x01[[reply_to:m1]]\n[[tone:dry]]\nhi");
    // A fence line longer than a part; a cut before a mid-line fence.
    let long_fence = format!("```{}\ncode\n```\nafter", "x".repeat(300));
    props::split(&[[20u8, 0].as_slice(), long_fence.as_bytes()].concat());
    let mid = format!("{}```x and more words", "a".repeat(20));
    for limit in 0u8..30 {
        props::split(&[[limit, 0].as_slice(), mid.as_bytes()].concat());
    }
    // A run of backticks cut after, with another fence one space on: the
    // next part started with ` ```` (found by `scripts/fuzz`, session 45).
    props::split(&[
        0, 0, 0, 20, 0, 43, 114, 96, 10, 125, 10, 102, 110, 32, 98, 40, 32, 32, 32, 32, 32, 32, 32, 32, 0, 0,
        0, 0, 0, 35, 114, 117, 0, 10, 93, 110, 32, 98, 40, 32, 32, 32, 0, 0, 126, 101, 114, 242, 146, 144,
        141, 110, 10, 96, 101, 13, 13, 125, 10, 96, 101, 40, 40, 0, 93, 72, 101, 107, 101, 58, 96, 96, 10,
        96, 242, 146, 144, 141, 32, 32, 32, 96, 96, 96, 32, 32, 32, 32, 32, 32, 32, 32, 32, 96, 96, 96, 32,
        32, 116, 10, 110, 110,
    ]);
    // A lone CR in an IRC reply.
    props::irc_text(b"\x00first part\rQUIT :bye\nsecond");
}

#[test]
fn a_matrix_event_converts() {
    let ev = serde_json::json!({
        "type": "m.room.message",
        "event_id": "$abc:example.org",
        "sender": "@alice:example.org",
        "origin_server_ts": 1_700_000_000_000u64,
        "content": { "msgtype": "m.text", "body": "hi @docs", "m.mentions": { "user_ids": ["@docs:example.org"] } },
    });
    props::matrix_event(ev.to_string().as_bytes());
    let edit = serde_json::json!({
        "type": "m.room.message",
        "event_id": "$e:example.org",
        "sender": "@alice:example.org",
        "origin_server_ts": 1,
        "content": {
            "msgtype": "m.text", "body": "* fixed",
            "m.new_content": { "msgtype": "m.text", "body": "fixed" },
            "m.relates_to": { "rel_type": "m.replace", "event_id": "$abc:example.org" },
        },
    });
    props::matrix_event(edit.to_string().as_bytes());
    props::matrix_event(b"{not json");
}

/// Every seed of every fuzz target (the inputs the fuzzers found are kept
/// there) still holds, on stable.
#[test]
fn every_fuzz_seed_holds() {
    let seeds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    let mut ran = 0;
    for (name, check) in props::TARGETS {
        let dir = seeds.join(name);
        let files = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for file in files {
            let path = file.expect("dir entry").path();
            let data = std::fs::read(&path).expect("seed");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "{} fails its property", path.display());
            ran += 1;
        }
    }
    assert!(ran >= props::TARGETS.len(), "every target has a seed ({ran} run)");
}
