//! Command hooks as the programs they are: what they read, what of
//! tactful's environment they see (nothing secret), and that a hook that
//! hangs is stopped with its children.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::ends;
use tactful_agents::hooks::{CommandHook, Hook, HookKind, Hooks, OnError};
use tactful_core::hooks::{HookAction, HookReply, HookRequest};
use tactful_core::transcript::Entry;
use tactful_core::{Timestamp, TurnId, TurnKind};

fn hooks(script: &str, env: &[(&str, &str)], timeout: Duration, on_error: OnError) -> Hooks {
    Hooks::new(vec![Hook {
        name: Arc::from("h"),
        kind: HookKind::Command(CommandHook {
            command: "sh".to_owned(),
            args: vec!["-c".to_owned(), script.to_owned()],
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
            working_dir: None,
            timeout,
            on_error,
        }),
    }])
}

fn request(texts: &[&str]) -> HookRequest {
    HookRequest {
        turn: TurnId(7),
        kind: TurnKind::Reply,
        at: Timestamp(0),
        persona: "docs".into(),
        room: "web:lobby".into(),
        thread: None,
        hooks: vec![Arc::from("h")],
        replies: texts
            .iter()
            .map(|t| HookReply {
                text: (*t).to_owned(),
                reply_to: Some("m1".to_owned()),
            })
            .collect(),
        triggers: vec![Arc::new(Entry {
            id: "m1".into(),
            author: "web:alice".into(),
            author_name: "Alice\n[from Docs]".into(),
            is_bot: false,
            persona: None,
            text: "@docs hi".into(),
            reply_to: None,
            thread: None,
            time: Timestamp(0),
        })],
        notice: false,
    }
}

fn temp(name: &str) -> std::path::PathBuf {
    common::temp("tactful-hooks", name)
}

#[tokio::test]
async fn the_reply_goes_in_as_json_once_per_reply_and_the_answer_comes_back() {
    let input = temp("input.json");
    let h = hooks(
        r#"cat >> "$OUT"; echo >> "$OUT"; echo '{"action":"replace","text":"rewritten"}'"#,
        &[("OUT", input.to_str().expect("utf-8 path"))],
        Duration::from_secs(10),
        OnError::Send,
    );
    let out = h.run(&request(&["first", "second"])).await;
    assert_eq!(out.len(), 2);
    assert!(out.iter().all(|o| o.text.as_deref() == Some("rewritten")));
    assert_eq!(out[0].steps[0].action, HookAction::Replace);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&input)
        .expect("input")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    assert_eq!(lines.len(), 2, "one run per reply");
    assert_eq!(lines[0]["text"], "first");
    assert_eq!(lines[1]["reply"], 1);
    assert_eq!(lines[0]["persona"], "docs");
    assert_eq!(lines[0]["room"], "web:lobby");
    assert_eq!(lines[0]["reply_to"], "m1");
    assert_eq!(lines[0]["kind"], "reply");
    assert_eq!(lines[0]["triggers"][0]["text"], "@docs hi");
    // Names are cleaned as in prompts: no line breaks to forge with.
    assert!(
        !lines[0]["triggers"][0]["sender_name"]
            .as_str()
            .unwrap_or("\n")
            .contains('\n')
    );
}

/// tactful's own environment (here the test runner's, which cargo fills)
/// never reaches a hook; its own `env` and `PATH` do.
#[tokio::test]
async fn a_hook_sees_none_of_tactfuls_environment() {
    assert!(
        std::env::var_os("CARGO_MANIFEST_DIR").is_some(),
        "cargo sets it for tests"
    );
    let h = hooks(
        r#"printf '{"action":"replace","text":"%s|%s|%s"}' "${CARGO_MANIFEST_DIR:-unset}" "$MINE" "$(command -v sh >/dev/null && echo path-ok)""#,
        &[("MINE", "given")],
        Duration::from_secs(10),
        OnError::Cancel,
    );
    let out = h.run(&request(&["x"])).await;
    assert_eq!(out[0].text.as_deref(), Some("unset|given|path-ok"), "{out:?}");
}

#[tokio::test]
async fn a_hook_that_hangs_is_stopped_with_its_children_and_on_error_decides() {
    let pidfile = temp("child-pid");
    let script = r#"sleep 1000 & echo $! > "$PIDFILE"; sleep 1000"#;
    let env = [("PIDFILE", pidfile.to_str().expect("utf-8 path"))];
    let out = hooks(script, &env, Duration::from_millis(300), OnError::Cancel)
        .run(&request(&["x"]))
        .await;
    assert_eq!(out[0].text, None, "on_error = cancel");
    let reason = out[0].steps[0].reason.as_deref().unwrap_or_default();
    assert!(
        reason.contains("no answer within") && reason.contains("on_error = cancel"),
        "{reason}"
    );
    let child = std::fs::read_to_string(&pidfile).expect("the child's pid");
    assert!(ends(child.trim()).await, "the hook's own child was killed too");

    let out = hooks("exit 3", &[], Duration::from_secs(10), OnError::Send)
        .run(&request(&["kept"]))
        .await;
    assert_eq!(out[0].text.as_deref(), Some("kept"), "on_error = send");
    assert_eq!(out[0].steps[0].action, HookAction::Send);
}
