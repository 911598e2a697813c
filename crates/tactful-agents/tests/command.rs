//! The command backend with real subprocesses.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::turn;
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
    let dir = std::env::temp_dir().join(format!("tactful-cmd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
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
    // The process is gone (or a zombie awaiting its reaper), not sleeping on.
    let pid = std::fs::read_to_string(&pidfile).expect("pid").trim().to_owned();
    let mut alive = true;
    for _ in 0..50 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("");
        if stat.is_empty() || state == "Z" {
            alive = false;
            break;
        }
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
    assert!(!alive, "the timed-out program was killed");
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
    let reply = a.run(&turn(), &mut NoDeltas).await.expect("a reply");
    assert_eq!(reply.text.len(), 1_000_000);
}
