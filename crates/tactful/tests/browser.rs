//! The demo in a real browser: `tests/browser/demo.mjs` drives Debian's
//! Chromium through `tactful demo` with playwright-core, as a newcomer and
//! a colleague would: the join form at desktop and phone sizes, chit-chat
//! and a docs question, typed and picked mentions, Shift+Enter, Markdown
//! and typed HTML, an over-long message, two tabs and a name taken, the
//! decision view, the server stopping and coming back, a reload; then a
//! service whose agent cannot start. Screenshots are kept under the target
//! folder (`tmp/browser-artifacts`).
//!
//! `scripts/test` installs Chromium and playwright-core; without them a
//! plain `cargo test` skips this test with a message (and fails instead
//! when `TACTFUL_REQUIRE_PEERS` is set, as `scripts/test` does).

mod common;

use std::path::PathBuf;
use std::process::Command;

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
    let dir = tempfile::tempdir().expect("temp dir");
    let store = dir.path().join("demo.db");
    // A persona whose agent cannot start, for the decision view.
    let broken = dir.path().join("broken.toml");
    std::fs::write(
        &broken,
        "[[persona]]\nid = \"helper\"\nname = \"Helper\"\nagent = \"broken\"\n\n\
         [agents.broken]\nkind = \"command\"\ncommand = \"python3\"\nargs = [\"missing.py\"]\n\n\
         [platforms.web]\nlisten = \"127.0.0.1:0\"\n\n[store]\npath = \":memory:\"\n",
    )
    .expect("config");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts");
    let out = Command::new("node")
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_tactful"))
        .arg(common::free_port().to_string())
        .arg(&store)
        .arg(&broken)
        .arg(&shots)
        .current_dir(root.join("tests/browser"))
        .output()
        .expect("node runs");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser checks failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for must in [
        "ok: 1280×720: the name and room inputs are wide",
        "ok: a typed @Host is a mention and is answered",
        "ok: the decision view shows why an agent failed",
        "ok: the page reconnects by itself",
    ] {
        assert!(report.contains(must), "{must:?} missing from:\n{report}");
    }
    for shot in [
        "join-desktop.png",
        "join-phone.png",
        "room-bob-desktop.png",
        "room-phone.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot} is kept");
    }
}
