//! The ACP backend against real ACP peers: a test agent written with the
//! official TypeScript SDK (`tests/acp/agent.mjs`) and, for a handshake, the
//! published claude-code-acp. `scripts/test` installs both with npm; a plain
//! `cargo test` without them skips these tests with a message, and
//! `TACTFUL_REQUIRE_PEERS=1` (set by `scripts/test`) turns the skip into a
//! failure so CI never skips them.

use crate::common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tactful_agents::acp::{AcpAgent, AcpConfig};
use tactful_agents::{Agent, AgentError, NoDeltas};
use tactful_core::TurnRequest;

fn peers_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/acp")
}

/// Whether the npm peers are installed; skips (or fails, when required).
fn peers_ready() -> bool {
    let ready = peers_dir()
        .join("node_modules/@agentclientprotocol/sdk/package.json")
        .exists()
        && std::process::Command::new("node")
            .arg("--version")
            .output()
            .is_ok();
    if !ready {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "the ACP test peers are not installed: run scripts/test"
        );
        eprintln!("skipping: ACP test peers not installed (scripts/test installs them into tests/acp)");
    }
    ready
}

fn config() -> AcpConfig {
    AcpConfig {
        command: "node".to_owned(),
        args: vec![peers_dir().join("agent.mjs").to_string_lossy().into_owned()],
        env: BTreeMap::new(),
        working_dir: Some(std::env::temp_dir()),
        session_ttl: Duration::from_secs(600),
        max_sessions: 8,
        allow_permissions: vec![],
        inactivity_timeout: Duration::from_secs(20),
    }
}

fn agent(config: AcpConfig) -> AcpAgent {
    AcpAgent::new(config, Arc::from(tactful_core::prompt::DEFAULT_CONTRACT))
}

fn turn_in(room: &str, text: &str) -> TurnRequest {
    let mut t = common::turn();
    t.room = room.into();
    let mut trigger = (*t.triggers[0]).clone();
    trigger.text = text.into();
    t.triggers = vec![Arc::new(trigger)];
    t
}

#[derive(Default)]
struct Pieces(Vec<String>);

impl tactful_agents::Deltas for Pieces {
    fn delta(&mut self, text: &str) {
        self.0.push(text.to_owned());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_stream_and_sessions_are_kept_per_room() {
    if !peers_ready() {
        return;
    }
    let a = agent(config());
    let mut pieces = Pieces::default();
    let first = a
        .run(&turn_in("main", "@docs how do I reset?"), &mut pieces)
        .await
        .expect("turn 1");
    let cwd = std::env::temp_dir();
    assert_eq!(
        first.text,
        format!(
            "session s1 prompt 1 context full cwd {} | [from Alice · m3] @docs how do I reset?",
            cwd.display()
        )
    );
    assert!(pieces.0.len() > 2, "chunks stream as they come: {:?}", pieces.0);
    assert_eq!(pieces.0.concat(), first.text);
    let second = a
        .run(&turn_in("main", "@docs and then?"), &mut NoDeltas)
        .await
        .expect("turn 2");
    assert!(
        second.text.starts_with("session s1 prompt 2 context delta"),
        "{}",
        second.text
    );
    let other = a
        .run(&turn_in("ops", "@docs hello ops"), &mut NoDeltas)
        .await
        .expect("other room");
    assert!(
        other.text.starts_with("session s2 prompt 1 context full"),
        "{}",
        other.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permissions_are_denied_unless_the_tool_kind_is_allowed() {
    if !peers_ready() {
        return;
    }
    let a = agent(config());
    let r = a
        .run(&turn_in("main", "PERMISSION:edit"), &mut NoDeltas)
        .await
        .expect("turn");
    assert_eq!(r.text, "permission edit: reject");
    let a = agent(AcpConfig {
        allow_permissions: vec!["read".to_owned(), "edit".to_owned()],
        ..config()
    });
    let r = a
        .run(&turn_in("main", "PERMISSION:edit"), &mut NoDeltas)
        .await
        .expect("turn");
    assert_eq!(r.text, "permission edit: allow");
    let r = a
        .run(&turn_in("main", "PERMISSION:execute"), &mut NoDeltas)
        .await
        .expect("turn");
    assert_eq!(r.text, "permission execute: reject");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_turn_is_cancelled_and_frees_its_session() {
    if !peers_ready() {
        return;
    }
    let a = agent(AcpConfig {
        inactivity_timeout: Duration::from_millis(800),
        ..config()
    });
    let err = a
        .run(&turn_in("main", "HANG"), &mut NoDeltas)
        .await
        .expect_err("hang");
    assert_eq!(err, AgentError::Timeout(Duration::from_millis(800)));
    // The session is not held: the next turn in the room uses it at once.
    let next = a
        .run(&turn_in("main", "@docs still there?"), &mut NoDeltas)
        .await
        .expect("next turn");
    assert!(next.text.starts_with("session s1 prompt 2"), "{}", next.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_turn_is_recovered_on_the_next_turn_with_full_context() {
    if !peers_ready() {
        return;
    }
    let a = agent(config());
    a.run(&turn_in("main", "@docs hi"), &mut NoDeltas)
        .await
        .expect("turn 1");
    let err = a
        .run(&turn_in("main", "CRASH"), &mut NoDeltas)
        .await
        .expect_err("crash");
    let text = err.to_string();
    assert!(text.contains("exited with exit status: 3"), "{text}");
    // A new process, a new session, and the whole context sent again.
    let r = a
        .run(&turn_in("main", "@docs are you back?"), &mut NoDeltas)
        .await
        .expect("recovered");
    assert!(
        r.text.starts_with("session s1 prompt 1 context full"),
        "{}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_evicted_by_age_and_by_count() {
    if !peers_ready() {
        return;
    }
    let a = agent(AcpConfig {
        max_sessions: 1,
        ..config()
    });
    a.run(&turn_in("a", "@docs one"), &mut NoDeltas).await.expect("a");
    a.run(&turn_in("b", "@docs two"), &mut NoDeltas)
        .await
        .expect("b evicts a");
    let r = a
        .run(&turn_in("a", "@docs three"), &mut NoDeltas)
        .await
        .expect("a again");
    assert!(
        r.text.starts_with("session s3 prompt 1 context full"),
        "{}",
        r.text
    );

    let a = agent(AcpConfig {
        session_ttl: Duration::from_millis(200),
        ..config()
    });
    a.run(&turn_in("a", "@docs one"), &mut NoDeltas).await.expect("a");
    // Idle longer than the TTL: the session is forgotten.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = a
        .run(&turn_in("a", "@docs two"), &mut NoDeltas)
        .await
        .expect("a again");
    assert!(
        r.text.starts_with("session s2 prompt 1 context full"),
        "{}",
        r.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_acp_answers_the_handshake() {
    if !peers_ready() {
        return;
    }
    let script = peers_dir().join("node_modules/@zed-industries/claude-code-acp/dist/index.js");
    assert!(script.exists(), "claude-code-acp is installed with the peers");
    let a = agent(AcpConfig {
        args: vec![script.to_string_lossy().into_owned()],
        inactivity_timeout: Duration::from_secs(30),
        ..config()
    });
    let info = a.handshake().await.expect("initialize answers without a login");
    assert!(info.to_lowercase().contains("claude"), "{info}");
}
