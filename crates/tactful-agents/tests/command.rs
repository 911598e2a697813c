//! The command backend with real subprocesses.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ends, turn};
use tactful_agents::command::{CommandAgent, CommandConfig};
use tactful_agents::{Agent, AgentError, NoDeltas};

fn sh(script: &str, env: &[(&str, &str)], timeout: Duration) -> CommandAgent {
    CommandAgent::new(
        CommandConfig {
            command: "sh".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            working_dir: None,
            timeout,
        },
        Arc::from(tactful_core::prompt::DEFAULT_CONTRACT),
    )
}

fn temp(name: &str) -> std::path::PathBuf {
    common::temp("tactful-cmd", name)
}

#[tokio::test]
async fn the_turn_goes_in_as_json_and_stdout_comes_back() {
    let input = temp("input.json");
    let a = sh(
        r#"cat > "$OUT"; printf '[[reply_to:m3]]\nHello from %s' "$WHO""#,
        &[("OUT", input.to_str().expect("utf-8 path")), ("WHO", "a script")],
        Duration::from_secs(10),
    );
    let mut streamed = String::new();
    let reply = a.run(&turn(), &mut streamed).await.expect("a reply");
    assert_eq!(reply.text, "[[reply_to:m3]]\nHello from a script");
    assert_eq!(streamed, reply.text);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&input).expect("input")).expect("json");
    assert_eq!(json["persona"]["id"], "docs");
    assert_eq!(json["kind"], "reply");
    assert_eq!(json["silence_token"], "NO_REPLY");
    assert_eq!(json["triggers"][0]["message_id"], "m3");
    assert_eq!(json["triggers"][0]["sender_name"], "Alice");
    assert_eq!(json["transcript"][1]["own"], true);
    assert!(
        json["prompt"]["system"]
            .as_str()
            .unwrap_or("")
            .contains("[[reply_to:<message id>]]")
    );
}

#[tokio::test]
async fn a_failing_program_reports_its_exit_and_stderr_tail() {
    let a = sh(
        "cat >/dev/null; echo 'model not found: llama9' >&2; exit 3",
        &[],
        Duration::from_secs(10),
    );
    let err = a.run(&turn(), &mut NoDeltas).await.expect_err("exit 3");
    match err {
        AgentError::Exit {
            status, stderr_tail, ..
        } => {
            assert!(status.contains('3'), "{status}");
            assert_eq!(stderr_tail, "model not found: llama9");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_slow_program_is_killed_at_the_timeout() {
    let pidfile = temp("pid");
    let a = sh(
        r#"echo $$ > "$PIDFILE"; exec sleep 30"#,
        &[("PIDFILE", pidfile.to_str().expect("utf-8 path"))],
        Duration::from_millis(300),
    );
    let start = Instant::now();
    let err = a.run(&turn(), &mut NoDeltas).await.expect_err("timeout");
    assert_eq!(err, AgentError::Timeout(Duration::from_millis(300)));
    assert!(start.elapsed() < Duration::from_secs(5));
    let pid = std::fs::read_to_string(&pidfile).expect("pid");
    assert!(ends(pid.trim()).await, "the timed-out program was killed");
}

/// Whether process `pid` ends (is gone, or a zombie awaiting its reaper)
/// within 2 s: the kill is synchronous, this only waits for the kernel.

#[tokio::test]
async fn a_timed_out_program_takes_its_children_with_it() {
    let pidfile = temp("child-pid");
    let a = sh(
        r#"sleep 1000 & echo $! > "$PIDFILE"; sleep 1000"#,
        &[("PIDFILE", pidfile.to_str().expect("utf-8 path"))],
        Duration::from_millis(300),
    );
    let err = a.run(&turn(), &mut NoDeltas).await.expect_err("timeout");
    assert!(matches!(err, AgentError::Timeout(_)), "{err}");
    let child = std::fs::read_to_string(&pidfile).expect("the child's pid");
    assert!(ends(child.trim()).await, "the agent's own child was killed too");
}

#[tokio::test]
async fn endless_output_is_cut_at_the_reply_cap_and_the_program_stopped() {
    let pidfile = temp("flood-pid");
    // 50 MB on stdout, then it would linger.
    let a = sh(
        r#"echo $$ > "$PIDFILE"; head -c 50000000 /dev/zero | tr '\0' x; sleep 1000"#,
        &[("PIDFILE", pidfile.to_str().expect("utf-8 path"))],
        Duration::from_secs(30),
    );
    let mut t = turn();
    t.max_reply_chars = 1000;
    let mut streamed = String::new();
    let started = Instant::now();
    let reply = a.run(&t, &mut streamed).await.expect("the start of the answer");
    assert_eq!(
        reply.text.len(),
        1000 * 4 + 4096,
        "read up to the output cap only"
    );
    assert!(started.elapsed() < Duration::from_secs(10), "not read to the end");
    let pid = std::fs::read_to_string(&pidfile).expect("pid");
    assert!(ends(pid.trim()).await, "the flooding program was stopped");
}

#[tokio::test]
async fn a_flood_on_stderr_is_drained_but_only_its_end_kept() {
    let a = sh(
        "cat >/dev/null; head -c 100000000 /dev/zero | tr '\\0' e >&2; echo 'the real reason' >&2; exit 1",
        &[],
        Duration::from_secs(60),
    );
    let err = a.run(&turn(), &mut NoDeltas).await.expect_err("exit 1");
    let AgentError::Exit { stderr_tail, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(stderr_tail.ends_with("the real reason"), "{stderr_tail}");
    assert!(
        stderr_tail.starts_with("[100000016 bytes, the end shown]"),
        "{stderr_tail}"
    );
    assert!(stderr_tail.len() < 1000, "{} bytes", stderr_tail.len());
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let a = CommandAgent::new(
        CommandConfig {
            command: "/nonexistent/agent".to_owned(),
            args: vec![],
            env: BTreeMap::new(),
            working_dir: None,
            timeout: Duration::from_secs(1),
        },
        Arc::from(""),
    );
    let err = a.run(&turn(), &mut NoDeltas).await.expect_err("spawn");
    assert!(matches!(err, AgentError::Spawn { .. }), "{err:?}");
    assert!(err.to_string().starts_with("could not start /nonexistent/agent"));
}

#[tokio::test]
async fn output_before_input_is_read_does_not_deadlock() {
    // Prints 1 MB before reading stdin: the pipes are drained concurrently.
    let a = sh(
        "head -c 1000000 /dev/zero | tr '\\0' x; cat > /dev/null",
        &[],
        Duration::from_secs(10),
    );
    let mut t = turn();
    t.max_reply_chars = 1_000_000;
    let reply = a.run(&t, &mut NoDeltas).await.expect("a reply");
    assert_eq!(reply.text.len(), 1_000_000);
}
