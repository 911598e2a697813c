//! The Mattermost double, checked by Mattermost's own client library and
//! types (`tests/mattermost/check.mjs`, npm `@mattermost/client` and
//! `@mattermost/types`), so a field the real server sends and the double
//! forgot fails here, not in production.

#![cfg(feature = "mattermost")]

use crate::mattermost_double;

use std::path::PathBuf;
use std::process::Command;

use mattermost_double::{Double, TOWN};

const ALICE: &str = "alicetoken0000000000000003";
const BOT: &str = "docstoken00000000000000001";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_double_passes_the_vendors_client_and_types() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/mattermost");
    if !root.join("node_modules/@mattermost/client/package.json").exists() {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "@mattermost/client is missing: run scripts/test"
        );
        eprintln!("skipping: @mattermost/client is not installed (scripts/test installs it)");
        return;
    }
    let double = Double::start(&[("docs-bot", BOT)], &[("alice", ALICE)]).await;
    let url = double.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg("check.mjs")
            .args([&url, ALICE, BOT])
            .current_dir(&root)
            .output()
            .expect("node runs")
    })
    .await
    .expect("the check ran");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "the vendor's client found the double wanting:\n{said}"
    );
    for check in [
        "ok users/me",
        "ok channels",
        "ok posts, threads, patches, reactions, deletions, the client config",
        "ok a wrong token",
        "ok hello and posted",
        "ok a resume by sequence number",
        "ok a resume the server cannot make",
        "ok no resume without a token on the upgrade",
    ] {
        assert!(said.contains(check), "{check} missing from:\n{said}");
    }
    // The client resumed a connection (a socket opened naming one the
    // double still held), and what it did is what the double holds.
    assert!(
        double.opened("alice").contains(&true),
        "{:?}",
        double.opened("alice")
    );
    let posts = double.posts(TOWN);
    assert!(
        posts.iter().any(|p| p.message == "checked by @mattermost/client"),
        "{posts:#?}"
    );
    assert!(
        double.reactions().iter().any(|r| r.emoji_name == "eyes"),
        "the client's reaction"
    );
}

/// A 429 as the server sends it: plain text, with the headers a client
/// waits by.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_carries_the_servers_headers() {
    let double = Double::start(&[("docs-bot", BOT)], &[("alice", ALICE)]).await;
    double.storm(3.0);
    let addr = double.url.trim_start_matches("http://").to_owned();
    let raw = tokio::task::spawn_blocking(move || {
        use std::io::{Read as _, Write as _};
        let mut s = std::net::TcpStream::connect(&addr).expect("connect");
        let req = format!(
            "GET /api/v4/users/me HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {ALICE}\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).expect("request");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    })
    .await
    .expect("an answer");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let head = head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 429"), "{head}");
    assert!(head.contains("content-type: text/plain"), "{head}");
    assert!(head.contains("x-ratelimit-remaining: 0"), "{head}");
    let header = |n: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(&format!("{n}: ")))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    let reset = header("x-ratelimit-reset").expect("a reset");
    assert!((1..=3).contains(&reset), "{reset}");
    assert_eq!(header("retry-after"), Some(reset));
    assert!(body.contains("limit exceeded"), "{body}");
}
