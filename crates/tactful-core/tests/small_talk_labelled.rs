//! The pre-gate against a labelled set it was not written from: the
//! Guide's chat lines (`tests/guide/labelled.jsonl`, written by hand by an
//! earlier session for the demo's Guide). No line that needs an answer may
//! be taken for small talk; the share of chatter it does take is what the
//! pre-gate saves there (BENCHMARKS.md).

use tactful_core::small_talk::{DEFAULT_MAX_CHARS, default_phrases, is_small_talk};

#[test]
fn no_line_that_needs_an_answer_is_small_talk() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/guide/labelled.jsonl");
    let src = std::fs::read_to_string(path).expect("the labelled set");
    let phrases = default_phrases();
    let (mut chatter, mut caught) = (0, 0);
    for line in src.lines().filter(|l| !l.trim().is_empty()) {
        let row: serde_json::Value = serde_json::from_str(line).expect("json");
        let text = row["text"].as_str().expect("text");
        let needs_answer = row["answer"].as_array().is_some_and(|a| !a.is_empty());
        let small = is_small_talk(text, &phrases, DEFAULT_MAX_CHARS);
        assert!(
            !(needs_answer && small),
            "a question taken for small talk: {text:?}"
        );
        if !needs_answer {
            chatter += 1;
            caught += usize::from(small);
        }
    }
    assert!(chatter > 100, "{chatter}");
    // What the pre-gate saves on this set, printed for BENCHMARKS.md.
    eprintln!("pre-gate: {caught} of {chatter} chatter lines taken for small talk");
    assert!(
        caught * 10 >= chatter,
        "it still catches some chatter: {caught} of {chatter}"
    );
}
