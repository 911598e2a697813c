//! `tactful eval` on the hand-made labelled set in `examples/eval`: its
//! figures exactly, and clear errors for labels that cannot be scored.

use std::process::Command;

use crate::common::{json_of, said};

fn eval(config: &str, labelled: &str, format: &str) -> std::process::Output {
    eval_with(config, labelled, format, &[])
}

fn eval_with(config: &str, labelled: &str, format: &str, more: &[&str]) -> std::process::Output {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    Command::new(env!("CARGO_BIN_EXE_tactful"))
        .current_dir(&root)
        .args(["eval", "-c", config, labelled, "--format", format])
        .args(more)
        .env_remove("TACTFUL_LOG")
        .env_remove("OPENAI_API_KEY")
        .output()
        .expect("tactful runs")
}

fn json_out(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", said(o));
    json_of(&String::from_utf8_lossy(&o.stdout))
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

/// A config whose two personas are programs (`kind = "command"`, so a real
/// backend as far as eval knows): each call is counted in `calls.log`;
/// `fail` in a message makes the program fail; `both` waits (up to 3 s,
/// on the other's marker file, not a fixed sleep) until the other persona's
/// call is running too, and stays silent if it never is.
fn command_config(dir: &std::path::Path, mode: &str) -> String {
    let agent = dir.join("agent.sh");
    std::fs::write(
        &agent,
        r#"#!/bin/sh
set -e
me="$1"; other="$2"; dir="$3"
turn=$(cat)
echo "$me" >> "$dir/calls.log"
case "$turn" in *fail*) echo "broken" >&2; exit 3;; esac
case "$turn" in *both*)
  touch "$dir/running-$me"
  i=0
  while [ ! -e "$dir/running-$other" ]; do
    i=$((i + 1)); [ $i -gt 60 ] && { echo NO_REPLY; exit 0; }
    sleep 0.05
  done
  echo "we are both here";;
*) echo "an answer from $me";; esac
"#,
    )
    .expect("write the agent");
    let d = dir.display();
    let config = format!(
        r#"
[[persona]]
id = "docs"
agent = "docs"

[[persona]]
id = "chef"
agent = "chef"

[agents.docs]
kind = "command"
command = "sh"
args = ["{d}/agent.sh", "docs", "chef", "{d}"]

[agents.chef]
kind = "command"
command = "sh"
args = ["{d}/agent.sh", "chef", "docs", "{d}"]

[rooms.default]
mode = "{mode}"
rate_limit = "off"
on_error = "silent"
"#
    );
    let path = dir.join(format!("{mode}.toml"));
    std::fs::write(&path, config).expect("write the config");
    path.display().to_string()
}

fn calls(dir: &std::path::Path) -> usize {
    std::fs::read_to_string(dir.join("calls.log"))
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

#[test]
fn a_cache_pays_only_for_prompts_it_has_not_seen() {
    let dir = tempfile::tempdir().expect("temp dir");
    let labelled = dir.path().join("l.jsonl");
    std::fs::write(
        &labelled,
        concat!(
            r#"{"at": 0, "from": "alice", "text": "@docs where is the router?", "expect": {"docs": "reply", "chef": "silent"}}"#,
            "\n",
            r#"{"at": 10, "from": "bob", "text": "@chef lunch ideas?", "expect": {"docs": "silent", "chef": "reply"}}"#,
            "\n",
            r#"{"at": 20, "from": "bob", "text": "@docs this will fail", "expect": {"docs": "reply"}}"#,
            "\n",
            r#"{"at": 30, "from": "carol", "text": "nice weather", "expect": {"docs": "silent", "chef": "silent"}}"#,
            "\n",
        ),
    )
    .expect("write");
    let mention = command_config(dir.path(), "mention");
    let cache = dir.path().join("answers.jsonl");
    let cache_arg = cache.display().to_string();
    let l = labelled.display().to_string();
    let first = json_out(&eval_with(&mention, &l, "json", &["--cache", &cache_arg]));
    assert_eq!(first["cache"], serde_json::json!({"calls": 3, "hits": 0}));
    assert_eq!(calls(dir.path()), 3);
    // The failed turn is reported apart, not counted as silence.
    assert_eq!(first["all"]["failed_turns"], 1);
    assert_eq!(
        (first["all"]["hits"].as_u64(), first["all"]["misses"].as_u64()),
        (Some(2), Some(0))
    );
    // Again: the two answers come from the cache; the failure is asked
    // again (a provider's error is not an answer to keep).
    let o = eval_with(&mention, &l, "text", &["--cache", &cache_arg]);
    assert!(o.status.success(), "{}", said(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with("3 real agent calls, 2 from the cache\n"),
        "{text}"
    );
    assert_eq!(calls(dir.path()), 4);
    // The file holds no prompt text: keys and answers only.
    let kept = std::fs::read_to_string(&cache).expect("the cache");
    assert_eq!(kept.lines().count(), 2, "{kept}");
    assert!(
        !kept.contains("router") && kept.contains("an answer from docs"),
        "{kept}"
    );
    // Under another policy (every message to both), the prompts already
    // answered are not paid for again; only the new ones are.
    let all = command_config(dir.path(), "all");
    let third = json_out(&eval_with(&all, &l, "json", &["--cache", &cache_arg]));
    let c = &third["cache"];
    let (made, hits) = (c["calls"].as_u64().unwrap_or(0), c["hits"].as_u64().unwrap_or(0));
    assert!(hits >= 1 && made > hits, "{c}");
    assert_eq!(calls(dir.path()) as u64, 4 + made - hits);
    // A cache that is not a file is a clear error, not a panic.
    let o = eval_with(
        &mention,
        &l,
        "text",
        &["--cache", dir.path().to_str().expect("utf-8")],
    );
    assert!(!o.status.success());
    assert!(said(&o).contains("cannot read the cache"), "{}", said(&o));
}

#[test]
fn calls_asked_for_at_one_moment_run_together_under_jobs() {
    let dir = tempfile::tempdir().expect("temp dir");
    let labelled = dir.path().join("l.jsonl");
    // One message addressing both personas: two calls at one instant.
    std::fs::write(
        &labelled,
        r#"{"at": 0, "from": "alice", "text": "@docs @chef both of you, please", "expect": {"docs": "reply", "chef": "reply"}}"#,
    )
    .expect("write");
    let config = command_config(dir.path(), "mention");
    let l = labelled.display().to_string();
    // Together, each sees the other running and answers.
    let r = json_out(&eval_with(&config, &l, "json", &["--jobs", "2"]));
    assert_eq!(r["all"]["hits"], 2, "{r}");
    // One at a time, the first waits for the second in vain and stays
    // silent: the test can tell the two apart.
    for f in ["running-docs", "running-chef"] {
        let _ = std::fs::remove_file(dir.path().join(f));
    }
    let r = json_out(&eval_with(&config, &l, "json", &["--jobs", "1"]));
    assert_eq!(
        (r["all"]["hits"].as_u64(), r["all"]["misses"].as_u64()),
        (Some(1), Some(1)),
        "{r}"
    );
    let o = eval_with(&config, &l, "json", &["--jobs", "0"]);
    assert!(!o.status.success() && said(&o).contains("--jobs"), "{}", said(&o));
}

#[test]
fn compare_puts_two_configs_side_by_side_with_what_changed() {
    let o = eval_with(
        "examples/eval/mention.toml",
        "examples/eval/handmade.jsonl",
        "text",
        &["--compare", "examples/eval/all.toml"],
    );
    assert!(o.status.success(), "{}", said(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("| all | 1.00 → 1.00 | 0.40 → 1.00 | 0.57 → 1.00 | 33.3 → 122.2 |"),
        "{text}"
    );
    assert!(text.contains("Outcomes that differ: 3\n"), "{text}");
    assert!(
        text.contains("- line 7 docs: \"Does anyone know how to reset the router?\"\n    A wrong: quiet, record (not_addressed)\n    B right: answered \"Settings → Network; hold reset for 5 s.\""),
        "{text}"
    );
    let r = json_out(&eval_with(
        "examples/eval/mention.toml",
        "examples/eval/handmade.jsonl",
        "json",
        &["--compare", "examples/eval/all.toml"],
    ));
    let differs: Vec<(u64, &str)> = r["differs"]
        .as_array()
        .expect("differs")
        .iter()
        .map(|d| {
            (
                d["line"].as_u64().unwrap_or(0),
                d["persona"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(differs, [(7, "docs"), (12, "docs"), (14, "chef")]);
    // A second config without a labelled persona is refused with the line.
    let dir = tempfile::tempdir().expect("temp dir");
    let other = dir.path().join("one.toml");
    std::fs::write(
        &other,
        "[[persona]]\nid = \"docs\"\nagent = \"a\"\n[agents.a]\nkind = \"script\"\nrules = []\n",
    )
    .expect("write");
    let o = eval_with(
        "examples/eval/mention.toml",
        "examples/eval/handmade.jsonl",
        "text",
        &["--compare", other.to_str().expect("utf-8")],
    );
    assert!(!o.status.success());
    assert!(
        said(&o).contains("\"chef\", which is not a persona") && said(&o).contains("--compare"),
        "{}",
        said(&o)
    );
}

#[test]
fn the_ubuntu_irc_set_scores_as_documented() {
    // Figures in docs/eval.md and BENCHMARKS.md.
    let r = json_out(&eval(
        "examples/eval/ubuntu-mention.toml",
        "examples/eval/ubuntu-dev.jsonl",
        "json",
    ));
    let a = &r["all"];
    assert_eq!(r["messages"], 2334);
    assert_eq!(
        (
            a["scored"].as_u64(),
            a["hits"].as_u64(),
            a["misses"].as_u64(),
            a["false_alarms"].as_u64()
        ),
        (Some(1900), Some(64), Some(188), Some(44))
    );
    let r = json_out(&eval(
        "examples/eval/ubuntu-gate.toml",
        "examples/eval/ubuntu-dev.jsonl",
        "json",
    ));
    let a = &r["all"];
    assert_eq!(
        (
            a["scored"].as_u64(),
            a["hits"].as_u64(),
            a["misses"].as_u64(),
            a["false_alarms"].as_u64()
        ),
        (Some(1900), Some(130), Some(122), Some(414))
    );
}

#[test]
fn a_reader_that_stops_reading_ends_the_run_quietly() {
    // `tactful eval … | head -3`: the pipe is closed before anything is
    // written, so the write fails for sure (no race with the reader).
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    for args in [
        &[
            "eval",
            "-c",
            "examples/eval/ubuntu-mention.toml",
            "examples/eval/ubuntu-dev.jsonl",
        ][..],
        &[
            "replay",
            "-c",
            "examples/eval/ubuntu-mention.toml",
            "examples/eval/ubuntu-dev.jsonl",
        ][..],
    ] {
        let (reader, writer) = std::io::pipe().expect("a pipe");
        drop(reader);
        let o = Command::new(env!("CARGO_BIN_EXE_tactful"))
            .current_dir(&root)
            .args(args)
            .env_remove("TACTFUL_LOG")
            .stdout(writer)
            .output()
            .expect("tactful runs");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("error"),
            "{args:?}: {err}"
        );
    }
}
