//! tactful on a real IRC server: Debian's ngircd on 127.0.0.1, a person
//! played by a plain IRC client over a socket, `tactful run` with two
//! personas as two nicks.

#![cfg(feature = "irc")]

use crate::common;
use crate::irc_setup;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Reaper, free_port};
use irc_setup::{Person, join_with, start_ngircd, start_ngircd_on};

/// A running `tactful run` and the lines it printed (the start banner).
struct Tactful {
    process: Reaper,
    printed: std::sync::mpsc::Receiver<String>,
}

impl Tactful {
    /// The first printed line `want` accepts; 30 s at most.
    fn printed(&self, want: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.printed.recv_timeout(left) {
                Ok(line) if want(&line) => return line,
                Ok(_) => {}
                Err(e) => panic!("tactful did not print the line: {e}"),
            }
        }
    }
}

/// Starts `tactful run` on `config`.
fn start_tactful(dir: &Path, config: &str) -> Tactful {
    use std::io::BufRead as _;
    let cfg = dir.join("tactful.toml");
    std::fs::write(&cfg, config).expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["run", "-c"])
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("tactful starts");
    let out = child.stdout.take().expect("stdout");
    let (tx, printed) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    Tactful {
        process: Reaper(child),
        printed,
    }
}

fn config(port: u16, long: &str) -> String {
    format!(
        r##"
[store]
path = ":memory:"

[[persona]]
id = "docs"
name = "Docs"
agent = "docs"

[[persona]]
id = "chef"
name = "Chef"
agent = "chef"
irc = {{ nick = "Chef[bot]" }}

[agents.docs]
kind = "script"
rules = [
  {{ when = "(?i)long", reply = "[[reply_to:{{msg_id}}]]\nHere is the long story.\n\n{long}\nThe end." }},
  {{ when = "(?i)reset", reply = "[[reply_to:{{msg_id}}]]\nHold the button for 5 s." }},
  {{ when = "(?i)never mind", reply = "NO_REPLY" }},
  {{ when = "(?i)format", reply = "[[reply_to:{{msg_id}}]]\nUse **mode** = `mention`, see [the docs](https://e.test/d)." }},
]

[agents.chef]
kind = "script"
rules = [{{ when = "", reply = "Soup is ready." }}]

[rooms.default]
mode = "mention"

[platforms.irc]
server = "127.0.0.1"
port = {port}
channels = ["#tactful"]
send_interval_ms = 20
"##
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn personas_answer_on_a_real_irc_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    let long = "word ".repeat(150).trim_end().to_owned() + " last";
    let tactful = start_tactful(dir.path(), &config(port, &long));
    let mut alice = Person::connect(port, "alice").await;
    join_with(&mut alice, "#tactful", &["docs", "Chef[bot]"]).await;

    // Chatter first, a nick said in passing, then a question by nick: the
    // first thing docs says is the answer, addressed to alice by nick (IRC
    // has no replies).
    alice
        .send("PRIVMSG #tactful :just chatting about lunch, nothing for the bots")
        .await;
    alice
        .send("PRIVMSG #tactful :I read the docs yesterday, the reset part too")
        .await;
    alice.send("PRIVMSG #tactful :docs: how do I reset it?").await;
    let (text, _) = alice.said_by("docs", "#tactful").await;
    assert_eq!(text, "alice: Hold the button for 5 s.");

    // Asked by nick, docs chooses silence: IRC has no reactions, so it
    // says the notice, addressed to alice by nick.
    alice.send("PRIVMSG #tactful :docs: never mind").await;
    let (text, _) = alice.said_by("docs", "#tactful").await;
    assert_eq!(text, "alice: I read this, but I have nothing to add.");

    // Markdown reads as plain text: no stars, no backticks.
    alice.send("PRIVMSG #tactful :docs: which format?").await;
    let (text, _) = alice.said_by("docs", "#tactful").await;
    assert_eq!(
        text,
        "alice: Use mode = mention, see the docs (https://e.test/d)."
    );

    // The nick with IRC specials, in the other case mapping.
    alice.send("PRIVMSG #tactful :chef{bot}, what's cooking?").await;
    let (text, _) = alice.said_by("Chef[bot]", "#tactful").await;
    assert_eq!(text, "Soup is ready.");

    // A long reply: line by line, each within 512 bytes, nothing lost.
    alice
        .send("PRIVMSG #tactful :docs, the long version please")
        .await;
    let mut got = Vec::new();
    loop {
        let (text, raw) = alice.said_by("docs", "#tactful").await;
        assert!(
            raw.len() + 2 <= 512,
            "an IRC line is at most 512 bytes: {} bytes",
            raw.len() + 2
        );
        let done = text == "The end.";
        got.push(text);
        if done {
            break;
        }
    }
    assert_eq!(got[0], "alice: Here is the long story.");
    assert!(got.len() >= 4, "the long line was split: {got:?}");
    let middle = got[1..got.len() - 1].join(" ");
    assert_eq!(middle, long, "the long line arrives whole, in order");

    // A private message is a DM: answered privately, without a nick.
    alice.send("PRIVMSG docs :how do I reset it?").await;
    let line = alice
        .until(|l| l.starts_with(":docs!") && l.contains(" PRIVMSG alice :"))
        .await;
    assert!(
        line.ends_with(" PRIVMSG alice :Hold the button for 5 s."),
        "{line}"
    );

    // Stopping, the personas say why they leave.
    let quit = tokio::spawn(async move {
        let line = alice
            .until(|l| l.starts_with(":docs!") && l.contains(" QUIT "))
            .await;
        (alice, line)
    });
    tactful.process.terminate().await;
    let (_, line) = quit.await.expect("join");
    // ngircd quotes the reason it relays.
    assert!(line.contains("tactful is stopping; back soon"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_taken_nick_falls_back_and_a_restarted_server_is_rejoined() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    // Someone already uses the nick "docs": the persona becomes docs_.
    let mut squatter = Person::connect(port, "docs").await;
    squatter.send("JOIN #tactful").await;
    let tactful = start_tactful(dir.path(), &config(port, "unused"));
    // The banner names the nick in use, not the one configured.
    let banner = tactful.printed(|l| l.contains("on IRC at"));
    assert!(
        banner.contains(" as docs_ (docs was taken), Chef[bot]"),
        "{banner}"
    );
    let mut alice = Person::connect(port, "alice").await;
    join_with(&mut alice, "#tactful", &["docs_", "Chef[bot]"]).await;
    alice.send("PRIVMSG #tactful :docs_: how do I reset it?").await;
    let (text, _) = alice.said_by("docs_", "#tactful").await;
    assert_eq!(text, "alice: Hold the button for 5 s.");
    // The person holding "docs" is a person, not the persona: heard, and
    // "docs" in text names them, not the persona.
    squatter
        .send("PRIVMSG #tactful :docs here, @Chef[bot] anything to eat?")
        .await;
    let (text, _) = alice.said_by("Chef[bot]", "#tactful").await;
    assert_eq!(text, "Soup is ready.");
    alice
        .send("PRIVMSG #tactful :docs: how do I reset it, as a person?")
        .await;
    squatter.send("PRIVMSG #tactful :docs_: how do I reset it?").await;
    let (text, _) = alice.said_by("docs_", "#tactful").await;
    assert_eq!(
        text, "docs: Hold the button for 5 s.",
        "the question to the person named docs was not taken for the persona"
    );

    // The server goes away and comes back on the same port: the personas
    // reconnect by themselves (and docs gets its own nick back).
    drop(server);
    drop((alice, squatter));
    let Some((_server, _)) = start_ngircd_on(dir.path(), port) else {
        return;
    };
    let mut alice = Person::connect(port, "alice").await;
    join_with(&mut alice, "#tactful", &["docs", "Chef[bot]"]).await;
    alice.send("PRIVMSG #tactful :docs: reset again?").await;
    let (text, _) = alice.said_by("docs", "#tactful").await;
    assert_eq!(text, "alice: Hold the button for 5 s.");
}

/// The nick is held by someone who is not in the channel (a ghost of an
/// earlier connection, say): the persona, on `docs_`, still answers to
/// `docs:` there, and takes `docs` back once it is free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_persona_answers_to_its_nick_on_a_fallback_and_takes_it_back() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    let mut ghost = Person::connect(port, "docs").await;
    let config = config(port, "unused").replace(
        "send_interval_ms = 20",
        "send_interval_ms = 20\nnick_retry_seconds = 1",
    );
    let tactful = start_tactful(dir.path(), &config);
    let banner = tactful.printed(|l| l.contains("on IRC at"));
    assert!(banner.contains(" as docs_ (docs was taken)"), "{banner}");
    let mut alice = Person::connect(port, "alice").await;
    join_with(&mut alice, "#tactful", &["docs_", "Chef[bot]"]).await;
    alice.send("PRIVMSG #tactful :docs: how do I reset it?").await;
    let (text, _) = alice.said_by("docs_", "#tactful").await;
    assert_eq!(
        text, "alice: Hold the button for 5 s.",
        "answered to its own nick"
    );

    // The ghost goes: within a retry the persona is docs again.
    ghost.send("QUIT :bye").await;
    let line = alice
        .until(|l| l.starts_with(":docs_!") && l.contains(" NICK "))
        .await;
    assert!(line.ends_with(":docs") || line.ends_with(" docs"), "{line}");
    alice.send("PRIVMSG #tactful :docs: reset again?").await;
    let (text, _) = alice.said_by("docs", "#tactful").await;
    assert_eq!(text, "alice: Hold the button for 5 s.");
}

/// `tactful doctor` on IRC: a real server welcomes the doctor's own nick
/// (the personas' are left alone); a server that is not there is named
/// with the cause and a fix.
#[test]
fn doctor_is_welcomed_by_a_real_server_and_names_one_that_is_not_there() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    let doctor = |port: u16| {
        let path = dir.path().join("doctor.toml");
        std::fs::write(&path, config(port, "")).expect("config");
        let out = Command::new(env!("CARGO_BIN_EXE_tactful"))
            .args(["doctor", "-c"])
            .arg(&path)
            .output()
            .expect("runs");
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, table) = doctor(port);
    assert_eq!(code, Some(0), "{table}");
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("IRC 127.0.0.1:{port}")))
        .unwrap_or_else(|| panic!("an IRC row: {table}"));
    assert!(line.contains("the server welcomed tfdoc"), "{table}");

    let closed = free_port();
    let (code, table) = doctor(closed);
    assert_eq!(code, Some(1), "{table}");
    assert!(table.contains("FAIL"), "{table}");
    assert!(
        table.contains("fix:  check platforms.irc server, port and tls"),
        "{table}"
    );
}

/// A 40-line answer, the process killed with `kill -9` once a person has
/// seen its 10th line, then started again on the same store: the answer
/// is finished, no line is lost and at most the one line in flight at the
/// kill is said twice. (Each line is a part of its own, recorded before
/// the next goes; when a reply's lines went out inside one send, all ten
/// were said again.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_answer_cut_by_a_kill_is_finished_without_saying_its_lines_twice() {
    const LINES: usize = 40;
    const KILL_AFTER: usize = 10;
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    let story: String = (0..LINES).map(|n| format!("L{n:02} of the story\\n")).collect();
    let config = format!(
        r##"
[store]
path = "state.db"

[[persona]]
id = "docs"
name = "Docs"
agent = "docs"

[agents.docs]
kind = "script"
rules = [{{ when = "(?i)story", reply = "[[reply_to:{{msg_id}}]]\n{story}" }}]

[rooms.default]
mode = "mention"

[platforms.irc]
server = "127.0.0.1"
port = {port}
channels = ["#tactful"]
send_interval_ms = 50
"##
    );
    let first = start_tactful(dir.path(), &config);
    let mut alice = Person::connect(port, "alice").await;
    join_with(&mut alice, "#tactful", &["docs"]).await;
    alice.send("PRIVMSG #tactful :docs: tell me the story").await;
    let mut heard = Vec::new();
    while heard.len() < KILL_AFTER {
        heard.push(alice.said_by("docs", "#tactful").await.0);
    }
    let mut process = first.process;
    process.kill().expect("kill -9");
    process.wait().expect("reaped");
    assert!(heard[0].starts_with("alice: L00"), "{heard:?}");

    // Started again on the same store: it rejoins and finishes the answer.
    let _second = start_tactful(dir.path(), &config);
    loop {
        let (text, _) = alice.said_by("docs", "#tactful").await;
        let last = text.starts_with(&format!("L{:02}", LINES - 1));
        heard.push(text);
        if last {
            break;
        }
    }
    let line_of = |text: &str| {
        let n = text.trim_start_matches("alice: ");
        n[1..3]
            .parse::<usize>()
            .unwrap_or_else(|_| panic!("a story line: {text}"))
    };
    let mut times = [0usize; LINES];
    for text in &heard {
        times[line_of(text)] += 1;
    }
    assert!(times.iter().all(|&n| n >= 1), "no line lost: {heard:#?}");
    let doubled = times.iter().filter(|&&n| n > 1).count();
    assert!(
        doubled <= 1 && times.iter().all(|&n| n <= 2),
        "at most the line in flight said twice, {doubled} were: {heard:#?}"
    );
    // Nothing after the end: the next thing docs says answers a new question.
    alice.send("PRIVMSG #tactful :docs: the story once more").await;
    let (text, _) = alice.said_by("docs", "#tactful").await;
    assert!(text.starts_with("alice: L00"), "{text}");
}

/// Lines of the Ubuntu IRC logs' kinds, through a real server to a
/// persona in `mention` mode: a nick closing a sentence as whom it is said
/// to is answered ("thanks docs :)", "what was wrong, docs ?"); a nick
/// said in passing is not ("I agree with docs", "check the link docs gave
/// you"). Each line the persona must leave alone is followed by one it
/// must answer, so the next answer shows nothing was said in between.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nick_closing_a_sentence_addresses_it_and_one_said_in_passing_does_not() {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_server, port)) = start_ngircd(dir.path()) else {
        return;
    };
    let config = format!(
        r##"
[store]
path = ":memory:"

[[persona]]
id = "docs"
name = "Docs"
agent = "docs"

[agents.docs]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]]\nheard: {{text}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[platforms.irc]
server = "127.0.0.1"
port = {port}
channels = ["#tactful"]
send_interval_ms = 20
"##
    );
    let _tactful = start_tactful(dir.path(), &config);
    let mut alice = Person::connect(port, "alice").await;
    join_with(&mut alice, "#tactful", &["docs"]).await;
    for (passing, addressed) in [
        ("I agree with docs", "thanks docs :)"),
        ("check the link docs gave you", "how'd you do that docs ?"),
        ("docs said it was fine", "what was wrong, docs ?"),
        ("I read the docs yesterday", "No problem docs"),
        ("ask docs.", "yes docs"),
    ] {
        alice.send(&format!("PRIVMSG #tactful :{passing}")).await;
        alice.send(&format!("PRIVMSG #tactful :{addressed}")).await;
        let (text, _) = alice.said_by("docs", "#tactful").await;
        assert_eq!(text, format!("alice: heard: {addressed}"), "after {passing:?}");
    }
}
