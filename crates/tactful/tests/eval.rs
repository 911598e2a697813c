//! `tactful eval` on the hand-made labelled set in `examples/eval`: its
//! figures exactly, and clear errors for labels that cannot be scored.

use std::process::Command;

use crate::common::{json_of, said};

fn eval(config: &str, labelled: &str, format: &str) -> std::process::Output {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_tactful"))
        .current_dir(&root)
        .args(["eval", "-c", config, labelled, "--format", format])
        .env_remove("TACTFUL_LOG")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("tactful runs")
}

#[test]
fn the_handmade_set_scores_as_documented() {
    let o = eval(
        "examples/eval/mention.toml",
        "examples/eval/handmade.jsonl",
        "json",
    );
    assert!(o.status.success(), "{}", said(&o));
    let r = json_of(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(r["messages"], 9);
    // Mention mode: never a false alarm, but the room's questions and the
    // thread's follow-up go unanswered.
    let all = &r["all"];
    assert_eq!(
        (
            all["scored"].as_u64(),
            all["hits"].as_u64(),
            all["misses"].as_u64(),
            all["false_alarms"].as_u64()
        ),
        (Some(16), Some(2), Some(3), Some(0))
    );
    assert_eq!(all["precision"], 1.0);
    assert_eq!(all["recall"], 0.4);
    assert_eq!(
        r["personas"]["docs"]["recall"]
            .as_f64()
            .map(|x| (x * 100.0).round()),
        Some(33.0)
    );
    assert_eq!(r["personas"]["chef"]["recall"], 0.5);
    let missed: Vec<(u64, &str, &str)> = r["misses"]
        .as_array()
        .expect("misses")
        .iter()
        .map(|c| {
            (
                c["line"].as_u64().unwrap_or(0),
                c["persona"].as_str().unwrap_or(""),
                c["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        missed,
        [
            (7, "docs", "not_addressed"),
            (12, "docs", "not_addressed"),
            (14, "chef", "not_addressed")
        ]
    );
    // Every message to both agents: all right, at four times the calls.
    let o = eval("examples/eval/all.toml", "examples/eval/handmade.jsonl", "json");
    assert!(o.status.success(), "{}", said(&o));
    let r = json_of(&String::from_utf8_lossy(&o.stdout));
    assert_eq!(
        (r["all"]["precision"].as_f64(), r["all"]["recall"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    let calls = r["all"]["calls_per_100"].as_f64().unwrap_or(0.0);
    assert!((calls - 122.2).abs() < 0.1, "{calls}");
    // The text report names each miss with its line and reason.
    let o = eval(
        "examples/eval/mention.toml",
        "examples/eval/handmade.jsonl",
        "text",
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("| all | 16 | 1.00 | 0.40 | 0.57 |"), "{text}");
    assert!(
        text.contains(
            "- line 7 docs: \"Does anyone know how to reset the router?\" → record (not_addressed)"
        ),
        "{text}"
    );
}

#[test]
fn labels_that_cannot_be_scored_are_refused_with_their_line() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cases = [
        (
            r#"{"at": 0, "from": "a", "text": "hi", "expect": {"nobody": "reply"}}"#,
            ":1: `expect` names \"nobody\", which is not a persona",
        ),
        (
            r#"{"at": 0, "from": "a", "text": "hi", "expect": {"docs": "yes"}}"#,
            ":1: `expect.docs` = \"yes\": write \"reply\", \"silent\" or \"any\"",
        ),
        (
            r#"{"at": 0, "from": "a", "text": "hi"}"#,
            "no message has an `expect` label",
        ),
    ];
    for (line, want) in cases {
        let path = dir.path().join("l.jsonl");
        std::fs::write(&path, format!("{line}\n")).expect("write");
        let o = eval(
            "examples/eval/mention.toml",
            path.to_str().expect("utf-8"),
            "text",
        );
        assert!(!o.status.success(), "{line}");
        assert!(said(&o).contains(want), "want {want:?} in {}", said(&o));
    }
}
