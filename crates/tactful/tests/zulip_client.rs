//! The Zulip double, checked by Zulip's own Python client
//! (`tests/zulip/check.py`, PyPI `zulip`) and the fields Zulip's API
//! description gives, so a field the real server sends and the double
//! forgot fails here.

#![cfg(feature = "zulip")]

use crate::zulip_double;

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use zulip_double::{Double, GENERAL};

const PERSON: (&str, &str, &str) = ("Alice", "alice@example.org", "alicekey0000000000000000000000ab");
const BOT: (&str, &str, &str) = (
    "Docs Bot",
    "docs-bot@example.org",
    "docskey00000000000000000000000ab",
);

/// The virtualenv with the `zulip` client scripts/test makes, if here.
fn venv() -> Option<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let found = [
        std::env::var_os("TACTFUL_ZULIP_VENV").map(PathBuf::from),
        Some(root.join("target/zulip-venv")),
    ]
    .into_iter()
    .flatten()
    .find(|v| v.join("bin/python").exists() && v.join(".tactful-installed").exists());
    if found.is_none() {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "the zulip client is missing: run scripts/test"
        );
        eprintln!("skipping: no virtualenv with the zulip client (scripts/test makes it)");
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_double_passes_the_vendors_client() {
    let Some(venv) = venv() else { return };
    let double = Double::start(&[BOT], &[PERSON]).await;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/zulip");
    let mut child = Command::new(venv.join("bin/python"))
        .arg(root.join("check.py"))
        .args([&double.url, PERSON.1, PERSON.2, BOT.1, BOT.2])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python runs");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (lines_tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    let mut said = Vec::new();
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let line = tokio::time::timeout_at(deadline, lines.recv()).await;
        let Ok(Some(line)) = line else {
            let err = child
                .wait_with_output()
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned());
            panic!("the check stopped: {said:#?}\n{err:?}");
        };
        assert!(
            !line.starts_with("FAIL"),
            "the vendor's client found the double wanting: {line}\n{said:#?}"
        );
        said.push(line.clone());
        if line == "ready for the queue to expire" {
            break;
        }
    }
    // The client's loop has its queue; the server forgets it; the loop
    // registers another.
    double
        .wait_until("the client's loop registered", |d| {
            d.registered("Docs Bot") >= 2 && d.has_queue("Docs Bot")
        })
        .await;
    let before = double.registered("Docs Bot");
    double.forget_queues();
    double
        .wait_until("the client's loop registered again", |d| {
            d.registered("Docs Bot") > before
        })
        .await;
    writeln!(stdin, "go").expect("stdin");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output().expect("python ends"))
        .await
        .expect("joined");
    while let Ok(line) = lines.try_recv() {
        said.push(line);
    }
    let all = said.join("\n");
    assert!(
        out.status.success(),
        "the vendor's client found the double wanting:\n{all}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for check in [
        "ok server settings",
        "ok users/me and subscriptions",
        "ok register, send, a message event with its mention",
        "ok edits, reactions, typing, a direct message",
        "ok messages by anchor and by topic",
        "ok a wrong key",
        "ok a stream that is not there",
        "ok a queue that is not there",
        "ok a new queue after BAD_EVENT_QUEUE_ID",
    ] {
        assert!(all.contains(check), "{check} missing from:\n{all}");
    }
    assert!(
        double
            .messages(Some(GENERAL))
            .iter()
            .any(|m| m.content == "an answer, edited"),
        "the client's edit is what the double holds"
    );
}
