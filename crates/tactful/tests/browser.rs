//! The demo in a real browser: `tactful demo` serves the room, and
//! `tests/browser/demo.mjs` drives Debian's Chromium through it with
//! playwright-core (two people, chit-chat, a docs question, an @mention
//! chosen from the autocomplete, a reload). Screenshots are kept under the
//! target folder (`tmp/browser-artifacts`).
//!
//! `scripts/test` installs Chromium and playwright-core; without them a
//! plain `cargo test` skips this test with a message (and fails instead
//! when `TACTFUL_REQUIRE_PEERS` is set, as `scripts/test` does).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

#[test]
fn the_demo_works_in_a_real_browser() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let script = root.join("tests/browser/demo.mjs");
    let ready = root
        .join("tests/browser/node_modules/playwright-core/package.json")
        .exists()
        && PathBuf::from("/usr/bin/chromium").exists();
    if !ready {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "Chromium or playwright-core is missing: run scripts/test"
        );
        eprintln!("skipping: Chromium and playwright-core are not installed (scripts/test installs them)");
        return;
    }
    let mut demo = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["demo", "--listen", "127.0.0.1:0", "--store", ":memory:"])
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tactful demo starts");
    let mut line = String::new();
    // Keep the pipe open for the demo's whole life.
    let mut stdout = BufReader::new(demo.stdout.take().expect("stdout"));
    stdout.read_line(&mut line).expect("the ready line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_owned();
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts");
    let out = Command::new("node")
        .arg(&script)
        .arg(&url)
        .arg(&shots)
        .current_dir(root.join("tests/browser"))
        .output()
        .expect("node runs");
    let _ = demo.kill();
    let _ = demo.wait();
    drop(stdout);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser checks failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("ok: chit-chat gets no reply"), "{report}");
    assert!(shots.join("demo-bob.png").exists(), "a screenshot is kept");
}
