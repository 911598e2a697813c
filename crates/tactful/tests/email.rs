//! tactful on real mail servers: Debian's Postfix, Dovecot and mlmmj on
//! 127.0.0.1 (`mail_setup`), people writing with Python's smtplib and
//! reading with imaplib (`tests/email/people.py`), `tactful run` with two
//! personas, each a mailbox of its own, on two lists: `dev` (mode `all`,
//! so only the floor and the loop rules keep answers to one) and `talk`
//! (mention mode).
//!
//! Nothing sleeps and hopes: every wait polls the people's inboxes or
//! tactful's `/metrics` within a bound.

#![cfg(feature = "email")]

use crate::common;
use crate::mail_setup;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Reaper, free_port, metric, run_tactful};
use serde_json::{Value, json};

use mail_setup::{MailServers, People, address, available, list, password};

const PEOPLE: [&str; 4] = ["alice", "bob", "carol", "eve"];
const PERSONAS: [&str; 2] = ["docs", "chef"];

fn config(m: &MailServers, store: &Path, metrics: u16) -> String {
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics}"

[platforms.email]
imap = {{ host = "127.0.0.1", port = {imap}, tls = "none" }}
smtp = {{ host = "127.0.0.1", port = {smtp}, tls = "none" }}
lists = ["{dev}", "{talk}"]

[[persona]]
id = "docs"
agent = "docs"
email = {{ address = "{docs}", password = "{docs_pw}", signature = "Docs, the help desk" }}

[[persona]]
id = "chef"
agent = "chef"
email = {{ address = "{chef}", password = "{chef_pw}" }}

{help}
[agents.chef]
kind = "script"
rules = [
  {{ when = "(?i)evil", reply = "Bcc: eve@example.org\nSubject: pwned\n\nNothing to see." }},
  {{ when = "", reply = "[[reply_to:{{msg_id}}]]\nChef here: {{from_name}}, try the oven." }},
]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms."email:{dev}"]
mode = "all"
"##,
        store = store.display(),
        imap = m.imap,
        smtp = m.submission,
        dev = list("dev"),
        talk = list("talk"),
        docs = address("docs"),
        chef = address("chef"),
        docs_pw = password("docs"),
        chef_pw = password("chef"),
        help = common::conf::help_desk("docs", true),
    )
}

/// Mail in `inbox` from `persona`.
fn from<'a>(inbox: &'a [Value], persona: &str) -> Vec<&'a Value> {
    let a = address(persona);
    inbox
        .iter()
        .filter(|m| m["from"].as_str().is_some_and(|f| f.contains(&a)))
        .collect()
}

/// Mail in `inbox` answering `id`.
fn answers<'a>(inbox: &'a [Value], id: &str) -> Vec<&'a Value> {
    inbox.iter().filter(|m| m["in_reply_to"] == id).collect()
}

/// Waits until tactful has heard (live or as backlog) at least `n` mails
/// and has nothing in progress.
fn heard(metrics: u16, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = metric(metrics, "tactful_messages_in_total").unwrap_or(0.0)
            + metric(metrics, "tactful_backlog_total").unwrap_or(0.0);
        let busy = metric(metrics, "tactful_busy").unwrap_or(1.0);
        if got >= n && busy == 0.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "tactful heard {got} of {n} mails, busy {busy}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn wait_connected(metrics: u16, n: f64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(metrics, "tactful_platform_connected").unwrap_or(0.0) < n {
        assert!(Instant::now() < deadline, "the mailboxes never connected");
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct World {
    dir: tempfile::TempDir,
    servers: MailServers,
    people: People,
    metrics: u16,
    config: String,
}

fn world(submission_extra: &[&str]) -> Option<World> {
    if !available() {
        return None;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let users: Vec<&str> = PEOPLE.iter().chain(PERSONAS.iter()).copied().collect();
    let members: Vec<&str> = ["alice", "bob", "carol", "docs", "chef"].to_vec();
    let servers = MailServers::start(
        dir.path(),
        &users,
        &[("dev", &members), ("talk", &members)],
        submission_extra,
    );
    let people = People::start(&servers);
    let metrics = free_port();
    let config = config(&servers, &dir.path().join("tactful.db"), metrics);
    Some(World {
        dir,
        servers,
        people,
        metrics,
        config,
    })
}

impl World {
    fn start(&self) -> Reaper {
        let t = run_tactful(self.dir.path(), &self.config, &[]);
        wait_connected(self.metrics, 2.0);
        t
    }

    /// Every person's inbox has every list post delivered (the queue is
    /// empty), so counting answers is final.
    fn delivered(&self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.servers.queue_empty() {
            assert!(Instant::now() < deadline, "Postfix's queue never emptied");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn lists_threads_and_direct_mail_are_answered_once_by_the_right_persona() {
    let Some(mut w) = world(&[]) else {
        return;
    };
    // Before tactful ever ran: what the mailboxes hold is backlog.
    let old = w.people.send(json!({
        "from": "alice", "to": [list("dev")], "subject": "Old question",
        "body": "Hi Docs,\nhow do I reset it?"
    }));
    w.people.wait_inbox("docs", "the old post", |m| m.len() == 1);
    w.people.wait_inbox("chef", "the old post", |m| m.len() == 1);
    let _tactful = w.start();
    heard(w.metrics, 1.0);

    // A question to the dev list (mode all): answered once, by one
    // persona (the floor), threaded under it.
    let q = w.people.send(json!({
        "from": "alice", "to": [list("dev")], "subject": "Router trouble",
        "body": "How do I reset the router?"
    }));
    let inbox = w.people.wait_inbox("alice", "an answer to the question", |m| {
        !answers(m, &q).is_empty()
    });
    let a = answers(&inbox, &q);
    assert_eq!(a.len(), 1, "{inbox:#?}");
    let answer = a[0];
    assert_eq!(answer["subject"], "Re: Router trouble");
    assert!(
        answer["references"].as_str().is_some_and(|r| r.contains(&q)),
        "{answer:#?}"
    );
    assert_eq!(answer["auto_submitted"], "auto-replied");
    assert!(
        answer["content_type"]
            .as_str()
            .is_some_and(|c| c.contains("flowed")),
        "{answer:#?}"
    );
    assert_eq!(
        answer["list_id"],
        format!("<dev.{}>", mail_setup::LISTS),
        "it went through the list"
    );
    let body = answer["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("> How do I reset the router?"),
        "the question is quoted: {body}"
    );

    // A direct mail to docs: answered by docs alone, to bob alone.
    let dm = w.people.send(json!({
        "from": "bob", "to": [address("docs")], "subject": "wifi",
        "body": "Can you tell me the wifi password?"
    }));
    let inbox = w
        .people
        .wait_inbox("bob", "docs's direct answer", |m| !answers(m, &dm).is_empty());
    let a = answers(&inbox, &dm);
    assert_eq!(a.len(), 1, "{inbox:#?}");
    assert!(
        a[0]["from"]
            .as_str()
            .is_some_and(|f| f.contains(&address("docs")))
    );
    assert!(
        a[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("fridge") && b.contains("-- \nDocs, the help desk")),
        "{:#?}",
        a[0]
    );
    assert!(a[0]["to"].as_str().is_some_and(|t| t.contains(&address("bob"))));

    // Chatter on the talk list (mention mode): nobody answers; a post
    // opening with a persona's name there is answered by it.
    let chatter = w.people.send(json!({
        "from": "carol", "to": [list("talk")], "subject": "lunch", "body": "Lunch anyone? Pizza at noon."
    }));
    let named = w.people.send(json!({
        "from": "carol", "to": [list("talk")], "subject": "oven", "body": "Chef: what temperature for pizza?"
    }));
    let inbox = w.people.wait_inbox("carol", "chef's answer on talk", |m| {
        !answers(m, &named).is_empty()
    });
    assert_eq!(answers(&inbox, &named).len(), 1);
    assert!(
        from(
            &answers(&inbox, &named).into_iter().cloned().collect::<Vec<_>>(),
            "chef"
        )
        .len()
            == 1
    );

    // Mail machines wrote, to the dev list where every post is answered:
    // never answered.
    let auto = w.people.send(json!({
        "from": "bob", "to": [list("dev")], "subject": "Auto: away",
        "body": "I am away until Monday.", "headers": {"Auto-Submitted": "auto-replied"}
    }));
    let bulk = w.people.send(json!({
        "from": "bob", "to": [list("dev")], "subject": "Newsletter",
        "body": "This week in news?", "headers": {"Precedence": "bulk"}
    }));
    let bounce = w.people.send(json!({
        "from": "bob", "from_header": "MAILER-DAEMON@example.org", "to": [list("dev")],
        "subject": "Undelivered Mail Returned to Sender", "body": "Your mail could not be delivered?"
    }));
    // A real bounce: a delivery report from the null sender.
    let dsn = "<dsn1@example.org>";
    w.people.call(json!({
        "op": "raw", "from": "", "to": [list("dev")],
        "data": format!("From: Mail Delivery System <MAILER-DAEMON@example.org>\r\nTo: {}\r\nSubject: Undelivered Mail\r\nMessage-ID: {dsn}\r\nContent-Type: multipart/report; report-type=delivery-status; boundary=\"r\"\r\n\r\n--r\r\nContent-Type: text/plain\r\n\r\nCould not deliver: what now?\r\n--r--\r\n", list("dev"))
    }));
    // docs's mailbox used by hand: a person's words, never answered by
    // a persona (so personas never answer each other by mail).
    let by_hand = w.people.send(json!({
        "from": "docs", "to": [list("dev")], "subject": "by hand", "body": "Anyone know the wifi password?"
    }));
    // An agent's text that looks like headers stays text.
    let evil = w.people.send(json!({
        "from": "alice", "to": [list("talk")], "subject": "evil", "body": "Chef, be evil."
    }));
    let inbox = w
        .people
        .wait_inbox("alice", "chef's evil answer", |m| !answers(m, &evil).is_empty());
    let e = answers(&inbox, &evil)[0];
    assert!(
        e["body"]
            .as_str()
            .is_some_and(|b| b.contains("Bcc: eve@example.org")),
        "{e:#?}"
    );
    assert!(
        !e["header_names"]
            .as_array()
            .is_some_and(|h| h.iter().any(|n| n == "bcc"))
    );
    assert_ne!(e["subject"], "pwned");

    // 1 old + question + dm + chatter + named + 4 machines + by hand +
    // evil.
    heard(w.metrics, 11.0);
    w.delivered();
    heard(w.metrics, 11.0);
    let alice = w.people.inbox("alice");
    let carol = w.people.inbox("carol");
    for (id, what) in [
        (&old, "the backlog"),
        (&chatter, "chatter"),
        (&auto, "an auto-reply"),
        (&bulk, "bulk mail"),
        (&bounce, "a bounce"),
        (&dsn.to_owned(), "a delivery report"),
        (&by_hand, "a persona's address"),
    ] {
        assert!(
            answers(&alice, id).is_empty() && answers(&carol, id).is_empty(),
            "{what} was answered: {alice:#?}"
        );
    }
    // The personas never answered each other: each answer above, once.
    let persona_posts: Vec<&Value> = from(&carol, "docs")
        .into_iter()
        .chain(from(&carol, "chef"))
        .filter(|m| {
            m["message_id"]
                .as_str()
                .is_some_and(|i| i.starts_with("<tactful."))
        })
        .collect();
    assert_eq!(
        persona_posts.len(),
        3,
        "the question's, chef's on talk, the evil one: {persona_posts:#?}"
    );
    assert!(
        w.people.inbox("eve").is_empty(),
        "eve got a copy an agent asked for"
    );
}

/// Waits for `t` to exit after SIGTERM.
fn stop(mut t: Reaper) {
    common::signal(t.id(), "TERM");
    let deadline = Instant::now() + Duration::from_secs(30);
    while t.try_wait().ok().flatten().is_none() {
        assert!(Instant::now() < deadline, "tactful did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_restart_and_a_kill_mid_send_answer_nothing_twice_and_miss_nothing() {
    // Submission pauses before taking a mail's text: time to kill tactful
    // in the middle of a send.
    let Some(mut w) = world(&["-o", "smtpd_data_restrictions=sleep,3"]) else {
        return;
    };
    let mut tactful = w.start();
    let q1 = w.people.send(json!({
        "from": "alice", "to": [list("talk")], "subject": "reset", "body": "Docs: how do I reset it?"
    }));
    // docs is submitting its answer: kill it there.
    w.servers.wait_postfix_log("docs logging in to submit", |l| {
        l.contains("sasl_username=docs@example.org")
    });
    let _ = tactful.0.kill();
    let _ = tactful.0.wait();
    tactful = w.start();
    let inbox = w.people.wait_inbox("alice", "the answer after the kill", |m| {
        !answers(m, &q1).is_empty()
    });
    assert!(
        answers(&inbox, &q1)[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("reset"))
    );

    // Settled before it stops: connected, nothing in progress. Whether it
    // heard the question again (as backlog) depends on whether the killed
    // process had saved its mailbox mark past it: either is right, and a
    // fixed count of mails heard made this wait fail in a loaded CI run.
    wait_connected(w.metrics, 2.0);
    heard(w.metrics, 0.0);
    // Down for a while: one question arrives meanwhile, and one that the
    // mailbox holds from two days ago (context only).
    stop(tactful);
    let q2 = w.people.send(json!({
        "from": "bob", "to": [list("talk")], "subject": "wifi", "body": "Docs: what is the wifi password?"
    }));
    w.people
        .wait_inbox("docs", "the question sent while tactful was down", |m| {
            m.iter().any(|x| x["message_id"] == q2)
        });
    let stale = "<stale@example.org>";
    w.people.call(json!({
        "op": "append", "user": "docs", "days_ago": 2,
        "data": format!("From: carol@example.org\r\nTo: docs@example.org\r\nSubject: old\r\nMessage-ID: {stale}\r\n\r\nDocs, can you reset my password?\r\n")
    }));
    let _tactful = w.start();
    let inbox = w.people.wait_inbox("bob", "the missed question's answer", |m| {
        !answers(m, &q2).is_empty()
    });
    assert!(
        answers(&inbox, &q2)[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("fridge"))
    );

    w.delivered();
    heard(w.metrics, 2.0);
    w.delivered();
    let alice = w.people.inbox("alice");
    assert_eq!(
        answers(&alice, &q1).len(),
        1,
        "the answer cut by the kill went once: {alice:#?}"
    );
    assert_eq!(answers(&alice, &q2).len(), 1, "{alice:#?}");
    assert_eq!(
        from(&alice, "docs").len(),
        2,
        "nothing else was answered: {alice:#?}"
    );
    assert!(
        answers(&w.people.inbox("carol"), stale).is_empty(),
        "mail from two days ago is context"
    );
}

#[test]
fn broken_and_huge_mail_never_stops_the_service() {
    let Some(mut w) = world(&[]) else {
        return;
    };
    let mut tactful = w.start();
    let to = [address("docs")];
    // Broken MIME, an unknown charset, bytes that are not UTF-8, a header
    // line of 200 kB, no sender at all.
    for data in [
        "From: bob@example.org\r\nTo: docs@example.org\r\nSubject: broken\r\nContent-Type: multipart/mixed; boundary=\"b\"\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nunfinished".to_owned(),
        "From: bob@example.org\r\nTo: docs@example.org\r\nSubject: charset\r\nContent-Type: text/plain; charset=x-no-such-charset\r\n\r\nabc \u{ff}\u{fe} def".to_owned(),
        format!("From: bob@example.org\r\nTo: docs@example.org\r\nX-Long: {}\r\nSubject: long\r\n\r\nbody", "a".repeat(200_000)),
        "To: docs@example.org\r\nSubject: nobody\r\n\r\nno sender".to_owned(),
    ] {
        w.people.call(json!({"op": "raw", "from": "bob", "to": to, "data": data}));
    }
    // A 20 MB attachment under a question: only the first megabyte is
    // fetched, and the question is answered.
    let big = w.people.call(json!({
        "op": "big", "from": "bob", "to": to, "subject": "attached", "megabytes": 20,
        "body": "How do I reset it? Logs attached."
    }));
    let big = big.as_str().expect("an id").to_owned();
    let inbox = w.people.wait_inbox("bob", "the answer under the big mail", |m| {
        !answers(m, &big).is_empty()
    });
    assert!(
        answers(&inbox, &big)[0]["body"]
            .as_str()
            .is_some_and(|b| b.contains("reset"))
    );
    assert!(
        tactful.try_wait().ok().flatten().is_none(),
        "tactful is still running"
    );
    let after = w
        .people
        .send(json!({"from": "bob", "to": to, "subject": "still there?", "body": "wifi?"}));
    let inbox = w.people.wait_inbox("bob", "an answer after the bad mail", |m| {
        !answers(m, &after).is_empty()
    });
    assert_eq!(answers(&inbox, &after).len(), 1);
}

#[test]
fn a_list_gets_a_few_answers_an_hour_from_each_persona() {
    let Some(mut w) = world(&[]) else {
        return;
    };
    let _tactful = w.start();
    // `[rooms.default]` says rate_limit = "off", but a list's default is
    // stricter (4 an hour per persona) unless its own table says so.
    let asked: Vec<String> = (1..=6)
        .map(|n| {
            w.people.send(json!({
                "from": "alice", "to": [list("talk")], "subject": format!("q{n}"),
                "body": format!("Chef: question {n}?")
            }))
        })
        .collect();
    w.people
        .wait_inbox("alice", "four answers", |m| from(m, "chef").len() >= 4);
    heard(w.metrics, 6.0);
    w.delivered();
    let inbox = w.people.inbox("alice");
    assert_eq!(from(&inbox, "chef").len(), 4, "{inbox:#?}");
    assert_eq!(
        asked.iter().filter(|q| answers(&inbox, q).len() == 1).count(),
        4,
        "the first four were answered, once each"
    );
    let limited = metric(w.metrics, "tactful_decisions_total").unwrap_or(0.0);
    assert!(limited >= 6.0, "every post was decided on");
}

/// `/healthz` as text, with its status.
fn healthz(port: u16) -> (u16, String) {
    common::http_get(port, "/healthz").unwrap_or((0, String::new()))
}

#[test]
fn doctor_names_the_login_that_failed_and_healthz_follows_each_mailbox() {
    let Some(mut w) = world(&[]) else {
        return;
    };
    let (code, out, err) = common::doctor(w.dir.path(), &w.config);
    assert_eq!(code, Some(0), "{out}{err}");
    for p in PERSONAS {
        assert!(
            out.contains(&format!("IMAP {} at 127.0.0.1:{}", address(p), w.servers.imap)),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "SMTP {} at 127.0.0.1:{}",
                address(p),
                w.servers.submission
            )),
            "{out}"
        );
    }
    assert!(out.contains("IDLE") && out.contains("logged in"), "{out}");
    let wrong = w.config.replace(&password("chef"), "not-chefs-password");
    let (code, out, err) = common::doctor(w.dir.path(), &wrong);
    assert_ne!(code, Some(0), "{out}{err}");
    let said = format!("{out}{err}");
    assert!(!said.contains("not-chefs-password"), "{said}");
    let failed: Vec<&str> = said.lines().filter(|l| l.contains("chef@example.org")).collect();
    assert!(
        failed.iter().any(|l| l.contains("IMAP")) && failed.iter().any(|l| l.contains("SMTP")),
        "{said}"
    );

    // Running: every mailbox connected. Dovecot dies: /healthz says which
    // mailboxes are down, and once it is back a question is answered.
    let _tactful = w.start();
    assert_eq!(healthz(w.metrics), (200, "ok\n".to_owned()));
    w.servers.kill_dovecot();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = healthz(w.metrics);
        if status == 503 && PERSONAS.iter().all(|p| body.contains(p)) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz never said the mailboxes were down: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    w.servers.start_dovecot();
    wait_connected(w.metrics, 2.0);
    let q = w.people.send(json!({
        "from": "alice", "to": [list("talk")], "subject": "back?", "body": "Docs: how do I reset it?"
    }));
    w.people
        .wait_inbox("alice", "an answer after Dovecot came back", |m| {
            !answers(m, &q).is_empty()
        });
    assert_eq!(healthz(w.metrics), (200, "ok\n".to_owned()));
}

#[test]
fn mailbox_passwords_stay_out_of_a_trace_level_log() {
    let Some(mut w) = world(&[]) else {
        return;
    };
    let (_tactful, logs) = common::run_tactful_logged(w.dir.path(), &w.config, &[("TACTFUL_LOG", "trace")]);
    wait_connected(w.metrics, 2.0);
    let q = w.people.send(json!({
        "from": "alice", "to": [list("talk")], "subject": "reset", "body": "Docs: how do I reset it?"
    }));
    w.people
        .wait_inbox("alice", "the answer", |m| !answers(m, &q).is_empty());
    let all = logs.lines().join("\n");
    assert!(all.contains("TRACE"), "the log is at trace level");
    for p in PERSONAS {
        assert!(!all.contains(&password(p)), "{p}'s password is in the log");
        let plain = format!("\0{}\0{}", address(p), password(p));
        use base64::Engine as _;
        let wire = base64::engine::general_purpose::STANDARD.encode(plain);
        assert!(!all.contains(&wire), "{p}'s SASL PLAIN is in the log");
    }
}

#[test]
fn allowed_users_takes_a_whole_domain() {
    let Some(mut w) = world(&[]) else {
        return;
    };
    w.config = w.config.replace(
        "[rooms.default]",
        &format!(
            "[rooms.\"email:{}\"]\nallowed_users = [\"@example.org\"]\n\n[rooms.default]",
            list("talk")
        ),
    );
    let _tactful = w.start();
    let stranger = w.people.send(json!({
        "from": "mallory@elsewhere.example", "to": [list("talk")], "subject": "hi", "body": "Docs: how do I reset it?"
    }));
    let ours = w.people.send(json!({
        "from": "alice", "to": [list("talk")], "subject": "hello", "body": "Docs: how do I reset it?"
    }));
    w.people
        .wait_inbox("alice", "the answer to alice", |m| !answers(m, &ours).is_empty());
    heard(w.metrics, 2.0);
    w.delivered();
    let inbox = w.people.inbox("alice");
    assert_eq!(answers(&inbox, &ours).len(), 1);
    assert!(
        answers(&inbox, &stranger).is_empty(),
        "a sender outside the domain was answered: {inbox:#?}"
    );
}
