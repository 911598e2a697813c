//! Golden replays of every shipped example.
//!
//! Each `examples/<name>/` holds `tactful.toml`, `conversation.jsonl` and
//! the expected trace `expected.jsonl` (and `expected-prompts.jsonl` when
//! the example is meant to be read with `--prompts`). A change in engine
//! behaviour shows up here as a diff of the trace. After an intended
//! change, regenerate with `UPDATE_GOLDEN=1 cargo test -p tactful --test it examples::`
//! and review the diff like code.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tactful::config::Config;
use tactful::replay::{self, ReplayOptions};
use tactful::scenario;
use tactful_core::Reason;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

fn example_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(examples_dir())
        .expect("examples/ exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.join("conversation.jsonl").exists())
        .collect();
    dirs.sort();
    dirs
}

/// The seed an example is replayed with: the one its `# Replay:` line
/// gives (`--seed 7`), else the command's default, 0, so the golden is
/// what the documented command prints (`documented_commands.rs` runs
/// them).
fn seed(dir: &Path) -> u64 {
    let config = std::fs::read_to_string(dir.join("tactful.toml")).expect("readable config");
    config
        .lines()
        .filter(|l| l.starts_with('#') && l.contains("replay"))
        .find_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "--seed")?;
            words.next()?.parse().ok()
        })
        .unwrap_or(0)
}

fn replay_dir(dir: &Path, options: ReplayOptions) -> (String, replay::Summary, Config) {
    let config = Config::load(&dir.join("tactful.toml")).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join("conversation.jsonl");
    let src = std::fs::read_to_string(&path).expect("readable scenario");
    let ids: Vec<&str> = config.engine.personas.iter().map(|p| p.id.as_str()).collect();
    let events = scenario::parse(&src, &path, &ids).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    let options = ReplayOptions {
        seed: seed(dir),
        ..options
    };
    let summary = replay::run(&config, events, options, &mut out).expect("replay runs");
    (String::from_utf8(out).expect("utf-8"), summary, config)
}

fn trace(dir: &Path, options: ReplayOptions) -> String {
    replay_dir(dir, options).0
}

/// Large scenarios keep a golden of their statistics, not of every line.
fn stats_only(dir: &Path) -> bool {
    dir.join("expected-stats.md").exists() || dir.ends_with("busy-room")
}

fn check_golden(dir: &Path, file: &str, actual: &str) {
    let path = dir.join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, actual).expect("write golden file");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "{} is missing; run with UPDATE_GOLDEN=1 to create it",
            path.display()
        )
    });
    if expected != actual {
        let first = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{} differs from the replay at line {}:\n  expected: {}\n  actual:   {}\n(UPDATE_GOLDEN=1 regenerates after an intended change)",
            path.display(),
            first + 1,
            expected.lines().nth(first).unwrap_or("<end>"),
            actual.lines().nth(first).unwrap_or("<end>"),
        );
    }
}

#[test]
fn every_example_replays_to_its_golden_trace() {
    let dirs = example_dirs();
    assert!(dirs.len() >= 6, "examples are found: {dirs:?}");
    for dir in dirs {
        if stats_only(&dir) {
            let (_, summary, config) = replay_dir(
                &dir,
                ReplayOptions {
                    stats: true,
                    ..Default::default()
                },
            );
            check_golden(&dir, "expected-stats.md", &summary.stats_table(&config));
            continue;
        }
        check_golden(&dir, "expected.jsonl", &trace(&dir, ReplayOptions::default()));
        if dir.join("expected-prompts.jsonl").exists() || dir.ends_with("transcript") {
            check_golden(
                &dir,
                "expected-prompts.jsonl",
                &trace(
                    &dir,
                    ReplayOptions {
                        prompts: true,
                        ..Default::default()
                    },
                ),
            );
        }
    }
}

#[test]
fn the_examples_show_every_reason_and_turn_ending() {
    let mut reasons = BTreeSet::new();
    let mut types = BTreeSet::new();
    for dir in example_dirs() {
        for line in trace(&dir, ReplayOptions::default()).lines() {
            let v: serde_json::Value = serde_json::from_str(line).expect("json");
            types.insert(v["type"].as_str().unwrap_or_default().to_owned());
            // A hook's cancel is a reason a turn is withheld, never a
            // decision's.
            if v["type"] == "decision" || v["type"] == "withheld" {
                reasons.insert(v["reason"].as_str().unwrap_or_default().to_owned());
            }
        }
    }
    let missing: Vec<_> = Reason::ALL
        .iter()
        .map(|r| r.as_str())
        .filter(|r| !reasons.contains(*r))
        .collect();
    assert!(missing.is_empty(), "no shipped example shows: {missing:?}");
    for ty in [
        "decision",
        "agent_call",
        "hook",
        "schedule",
        "send",
        "silent",
        "error",
        "withheld",
        "cancelled",
        "flush_wait",
        "buffer_cleared",
        "flush_skipped",
    ] {
        assert!(types.contains(ty), "no shipped example shows a {ty} line");
    }
}

/// The busy room: ambient costs at most one agent call per 8 unaddressed
/// messages, while every addressed message is still answered by every mode.
#[test]
fn busy_room_ambient_is_cheap_and_nothing_addressed_is_missed() {
    let dir = examples_dir().join("busy-room");
    let (_, summary, _) = replay_dir(
        &dir,
        ReplayOptions {
            stats: true,
            ..Default::default()
        },
    );
    assert!(summary.messages >= 500, "{} messages", summary.messages);
    for (id, s) in &summary.personas {
        assert!(s.addressed > 0, "{id} is addressed in the scenario");
        assert_eq!(s.answered, s.addressed, "{id} answered every addressed message");
    }
    let guide = &summary.personas["guide"];
    let unaddressed = summary.messages - guide.addressed;
    assert!(
        guide.unaddressed_calls * 8 <= unaddressed,
        "ambient: {} calls for {unaddressed} unaddressed messages",
        guide.unaddressed_calls
    );
    // And the other modes really are dearer: the comparison means something.
    assert!(summary.personas["chatty"].calls > 4 * guide.calls);
}

/// The busy floor: three `all` personas in one busy room, floor passing on.
/// Goal: at most 1.1 reply calls per unaddressed question, and every such
/// question answered exactly once.
#[test]
fn busy_floor_asks_one_persona_per_question_and_answers_each_once() {
    let dir = examples_dir().join("busy-floor");
    let (_, summary, _) = replay_dir(
        &dir,
        ReplayOptions {
            stats: true,
            ..Default::default()
        },
    );
    let q = summary.questions();
    assert!(q.count >= 40, "{q:?}");
    let per_question = q.calls as f64 / q.count as f64;
    assert!(per_question <= 1.1, "{per_question:.2} calls per question: {q:?}");
    assert_eq!(q.answered_once, q.count, "{q:?}");
}
