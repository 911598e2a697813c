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

use crate::common;

use std::path::PathBuf;
use std::process::Command;

/// Whether Chromium and playwright-core are here; without them the test is
/// skipped with a message (a failure when `TACTFUL_REQUIRE_PEERS` is set).
fn browser_ready(root: &std::path::Path) -> bool {
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
    }
    ready
}

/// Runs `tests/browser/<script>` with `args` under Node; every check must
/// pass and each of `musts` be among them.
fn run_script(root: &std::path::Path, script: &str, args: &[&std::ffi::OsStr], musts: &[&str]) {
    let out = Command::new("node")
        .arg(root.join("tests/browser").join(script))
        .args(args)
        .current_dir(root.join("tests/browser"))
        .output()
        .expect("node runs");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{script}: checks failed:\n{report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for must in musts {
        assert!(report.contains(must), "{must:?} missing from:\n{report}");
    }
}

#[test]
fn the_demo_works_in_a_real_browser() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !browser_ready(&root) {
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
    run_script(
        &root,
        "demo.mjs",
        &[
            env!("CARGO_BIN_EXE_tactful").as_ref(),
            common::free_port().to_string().as_ref(),
            store.as_os_str(),
            broken.as_os_str(),
            shots.as_os_str(),
        ],
        &[
            "ok: 1280×720: the name and room inputs are wide",
            "ok: a typed @Host is a mention and is answered",
            "ok: the decision view shows why an agent failed",
            "ok: the page reconnects by itself",
            "ok: the introduction says what each persona does",
            "ok: phone: a click on an example sends it, and Host answers",
            "ok: Guide answers in the direct room",
            "ok: Bob's direct room's address gives Alice her own, not his",
            "ok: a message naming you is marked",
            "ok: a bare address is a safe link",
            "ok: a quote is rendered, not raw backticks",
            "ok: phone: no ☰ before joining",
            "ok: phone: ☰ opens the rooms and members",
            "ok: a reload keeps the name, the room and the rooms joined",
            "ok: a join that cannot reach the room gives the button back",
        ],
    );
    for shot in [
        "join-desktop.png",
        "join-phone.png",
        "room-bob-desktop.png",
        "room-phone.png",
        "intro-desktop.png",
        "intro-phone.png",
        "direct-desktop.png",
        "mention-link-quote.png",
        "menu-phone.png",
    ] {
        assert!(shots.join(shot).exists(), "{shot} is kept");
    }
}

const CONSOLE_TOKEN: &str = "browser-console-token-31337";

/// The service `tests/browser/console.mjs` runs: a persona whose script
/// stays silent when asked to, one whose agent fails, one behind a reply
/// gate that always says SKIP, one listening in ambient mode whose batch
/// waits ten minutes, and a hook that stops a reply telling a secret.
fn console_config(web: u16, server: u16, store: &std::path::Path) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
name = "Docs"
agent = "main"

[[persona]]
id = "broken"
name = "Broken"
agent = "bad"

[[persona]]
id = "scout"
name = "Scout"
agent = "main"

[[persona]]
id = "owl"
name = "Owl"
agent = "main"

[agents.main]
kind = "script"
rules = [
  {{ when = "quiet", reply = "NO_REPLY" }},
  {{ when = "secret", reply = "the secret is 42" }},
  {{ when = "", reply = "hi there" }},
]

[agents.gatekeeper]
kind = "script"
rules = [{{ when = "", reply = "SKIP" }}]

[agents.bad]
kind = "command"
command = "sh"
args = ["-c", "echo 'the tool crashed' >&2; exit 3"]

[rooms.default.personas.scout]
mode = "all"
reply_gate = {{ enabled = true, agent = "gatekeeper" }}

[rooms.default.personas.owl]
mode = "ambient"
ambient = {{ flush_seconds = 600, flush_messages = 40, jitter = 0 }}

[[hook]]
name = "no-secrets"
on = "before_send"
kind = "block"
patterns = ['(?i)the secret is']

[platforms.web]
listen = "127.0.0.1:{web}"

[store]
path = "{}"

[server]
listen = "127.0.0.1:{server}"
console_token = "{CONSOLE_TOKEN}"
"#,
        store.display()
    )
}

#[test]
fn the_console_works_in_a_real_browser() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !browser_ready(&root) {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let (web, server) = (common::free_port(), common::free_port());
    let config = dir.path().join("tactful.toml");
    std::fs::write(
        &config,
        console_config(web, server, &dir.path().join("tactful.db")),
    )
    .expect("config");
    let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("browser-artifacts");
    run_script(
        &root,
        "console.mjs",
        &[
            env!("CARGO_BIN_EXE_tactful").as_ref(),
            config.as_os_str(),
            web.to_string().as_ref(),
            server.to_string().as_ref(),
            CONSOLE_TOKEN.as_ref(),
            shots.as_os_str(),
        ],
        &[
            "ok: a silent persona's reason is shown live",
            "ok: a failed agent's error is shown, in its own words",
            "ok: a reply gate's SKIP is shown live",
            "ok: an ambient batch counts down to its flush",
            "ok: a hook's cancel is shown live",
            "ok: an invalid edit is refused with the config check's message",
            "ok: an empty policy is refused: use Revert",
            "ok: the API refuses an empty policy with JSON saying to use Revert",
            "ok: the dry run lists a decision that would change",
            "ok: a decision is marked: should have answered",
            "ok: the marks export as a labelled file",
            "ok: Try scores the policy on the room's marks",
            "ok: the mark survives a restart",
            "ok: pressed again, the mark is cleared",
            "ok: a draft survives the refresh after Try",
            "ok: Apply waits for a Try of the text as it is",
            "ok: Apply shows the difference it made",
            "ok: mention → all takes effect on the next message",
            "ok: the edit survives a restart",
            "ok: a wrong token is refused",
            "ok: another site's page is refused by the server",
        ],
    );
    assert!(
        shots.join("console-desktop.png").exists(),
        "the screenshot is kept"
    );
}
