//! Every `tactful replay` command the docs print, run exactly as printed,
//! and what the docs say it prints, checked against what it does print.
//!
//! Commands are found in `README.md`, `BENCHMARKS.md`, `docs/*.md` and the
//! examples' own files (their `# Replay:` lines): a line or a backtick span
//! that starts `tactful replay` or `cargo run -p tactful -- replay`. Those
//! with placeholders (`CONFIG`), pipes or redirections are left out: the
//! rest must run, and
//! - an example's command prints exactly its golden (`expected.jsonl`,
//!   `expected-prompts.jsonl` or `expected-stats.md` by its flags), so a
//!   golden made with other flags than the docs give fails here;
//! - a trace line shown in a ```json block is printed by the replay
//!   command before it in the same file;
//! - a row of a per-persona cost table shown after a `--stats` command is
//!   a row that command prints.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files that document commands, repo-relative.
fn documents() -> Vec<PathBuf> {
    let root = repo();
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("BENCHMARKS.md")];
    for dir in ["docs", "examples"] {
        let mut stack = vec![root.join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).expect("readable folder") {
                let p = e.expect("entry").path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "md" || x == "toml") {
                    files.push(p.strip_prefix(&root).expect("inside the repo").to_owned());
                }
            }
        }
    }
    files.sort();
    files
}

/// The replay command a line of a document holds, as its arguments after
/// `replay`; `None` when there is none, or one that cannot run as printed.
fn command_in(line: &str) -> Option<Vec<String>> {
    let start = ["cargo run -p tactful -- replay ", "tactful replay "]
        .iter()
        .find_map(|p| line.find(p).map(|i| i + p.len()))?;
    let rest = &line[start..];
    let end = rest.find(['`', ')']).unwrap_or(rest.len());
    let args = rest[..end].trim();
    let placeholder = ["CONFIG", "SCENARIO", "FILE", "|", ">", "/tmp/", "…", "..."];
    let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
    // A mention of a flag (`tactful replay --stats`) is not a command.
    let runnable = args.iter().any(|a| a == "-c" || a == "--config");
    if !runnable || placeholder.iter().any(|p| args.iter().any(|a| a.contains(p))) {
        return None;
    }
    Some(args)
}

struct Run {
    args: Vec<String>,
    stdout: String,
}

fn replay(args: &[String]) -> Run {
    let out = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .arg("replay")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("tactful runs");
    assert!(
        out.status.success(),
        "`tactful replay {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    Run {
        args: args.to_vec(),
        stdout: String::from_utf8(out.stdout).expect("utf-8"),
    }
}

/// The golden an example's command must print, if the command replays an
/// example's own conversation with its own config.
fn golden(args: &[String]) -> Option<PathBuf> {
    let config = args.iter().position(|a| a == "-c" || a == "--config")?;
    let config = Path::new(args.get(config + 1)?);
    let dir = config.parent()?;
    let scenario = dir.join("conversation.jsonl");
    if !dir.starts_with("examples") || !args.iter().any(|a| Path::new(a) == scenario) {
        return None;
    }
    let has = |flag: &str| args.iter().any(|a| a == flag);
    let file = if has("--stats") {
        "expected-stats.md"
    } else if has("--format") {
        return None;
    } else if has("--prompts") {
        "expected-prompts.jsonl"
    } else {
        "expected.jsonl"
    };
    Some(repo().join(dir).join(file))
}

#[test]
fn every_documented_replay_command_prints_what_the_docs_say() {
    let mut ran: Vec<(String, Run)> = Vec::new();
    let mut checked_goldens = 0;
    let mut checked_lines = 0;
    let mut checked_rows = 0;
    for doc in documents() {
        let text = std::fs::read_to_string(repo().join(&doc)).expect("readable document");
        let mut last: Option<usize> = None;
        let mut in_json = false;
        // Whether the table being read is a per-persona cost table (its
        // header is the one `--stats` prints).
        let mut cost_table = false;
        for (n, line) in text.lines().enumerate() {
            let place = format!("{}:{}", doc.display(), n + 1);
            if let Some(args) = command_in(line) {
                let i = match ran.iter().position(|(_, r)| r.args == args) {
                    Some(i) => i,
                    None => {
                        let run = replay(&args);
                        if let Some(g) = golden(&args) {
                            let want = std::fs::read_to_string(&g)
                                .unwrap_or_else(|e| panic!("{place}: {}: {e}", g.display()));
                            assert!(
                                run.stdout == want,
                                "{place}: `tactful replay {}` does not print {}",
                                args.join(" "),
                                g.display()
                            );
                            checked_goldens += 1;
                        }
                        ran.push((place.clone(), run));
                        ran.len() - 1
                    }
                };
                last = Some(i);
                continue;
            }
            if line.trim_start().starts_with("```") {
                in_json = line.trim() == "```json";
                continue;
            }
            // A new section says other things: what follows is not the
            // output of a command above it.
            if !in_json && line.starts_with('#') && doc.extension().is_none_or(|x| x != "toml") {
                last = None;
                continue;
            }
            if !line.starts_with('|') {
                cost_table = false;
            } else if line.starts_with("| persona | mode |") {
                cost_table = true;
                continue;
            }
            let Some(i) = last else { continue };
            let (from, run) = &ran[i];
            let trace_line = in_json
                && serde_json::from_str::<serde_json::Value>(line)
                    .is_ok_and(|v| v.get("at").is_some() && v.get("type").is_some());
            if trace_line {
                assert!(
                    run.stdout.lines().any(|l| l == line),
                    "{place}: this trace line is not printed by the command at {from}:\n{line}"
                );
                checked_lines += 1;
            }
            let cost_row = cost_table && !line.starts_with("|---") && run.args.iter().any(|a| a == "--stats");
            if cost_row {
                assert!(
                    run.stdout.lines().any(|l| l == line),
                    "{place}: this row is not what the command at {from} prints:\n{line}\nit prints:\n{}",
                    run.stdout
                );
                checked_rows += 1;
            }
        }
    }
    // The docs hold these today; fewer means the search broke, not that
    // the docs are fine.
    assert!(ran.len() >= 15, "{} commands found", ran.len());
    assert!(checked_goldens >= 15, "{checked_goldens} goldens checked");
    assert!(checked_lines >= 3, "{checked_lines} trace lines checked");
    assert!(checked_rows >= 4, "{checked_rows} table rows checked");
}

#[test]
fn commands_are_found_as_the_docs_write_them() {
    let a = |s: &str| command_in(s).map(|v| v.join(" "));
    assert_eq!(
        a("# Replay: tactful replay --seed 7 -c examples/ambient/tactful.toml examples/ambient/conversation.jsonl").as_deref(),
        Some("--seed 7 -c examples/ambient/tactful.toml examples/ambient/conversation.jsonl")
    );
    assert_eq!(
        a("(`tactful replay -c examples/floor/tactful.toml examples/floor/conversation.jsonl`),").as_deref(),
        Some("-c examples/floor/tactful.toml examples/floor/conversation.jsonl")
    );
    assert_eq!(a("tactful replay -c CONFIG SCENARIO.jsonl [--prompts]"), None);
    assert_eq!(
        a("tactful replay --prompts -c x.toml y.jsonl | scripts/prefix-reuse.py"),
        None
    );
    assert_eq!(a("`tactful replay` runs a config"), None);
    assert_eq!(a("from `tactful replay --stats` on the room"), None);
}
