//! An answer's latency through a real chat server, as a person there sees
//! it: XMPP through Prosody beside IRC through ngircd, and mail through
//! Postfix, Dovecot and mlmmj, one tactful serving all three, one persona
//! answering at once (a script agent).
//!
//! `cargo bench -p tactful --bench chat_latency` (with ngircd and Prosody
//! installed, as scripts/test does) asks `docs: ping N` one at a time in
//! each network and times it until the answer's text reaches the asker:
//! on IRC the reply line; on XMPP the message (or the correction of the
//! placeholder) that holds it. By mail, from the question's delivery into
//! the persona's mailbox (which tactful watches in IMAP IDLE) to the
//! answer's delivery into the asker's, both seen in the Maildirs; for a
//! direct mail and for a list post (through mlmmj both ways). Median, p99
//! and max per network.
//!
//! Pings are 150 ms apart, so IRC's pacing of one persona's lines
//! (`send_interval_ms`, set to 100 here) never holds an answer back: what
//! is measured is the path, not flood control.
//!
//! Under `cargo test`/`cargo nextest` the same code runs a few pings as a
//! smoke test, so the benchmark cannot rot.

use std::time::{Duration, Instant};

use futures::StreamExt;
use tactful::config::Config;
use tactful::live::Service;
use tokio_xmpp::Stanza;
use tokio_xmpp::connect::{DnsConfig, TcpServerConnector};
use tokio_xmpp::jid::{BareJid, Jid};
use tokio_xmpp::minidom::Element;
use tokio_xmpp::parsers::message::{Lang, Message};
use tokio_xmpp::parsers::presence::Presence;
use tokio_xmpp::stanzastream::{Event, StanzaStream, StreamEvent};
use tokio_xmpp::xmlstream::Timeouts;

mod harness;

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/irc_setup/mod.rs"]
mod irc_setup;
#[path = "../tests/mail_setup/mod.rs"]
mod mail_setup;
#[path = "../tests/xmpp_setup/mod.rs"]
mod xmpp_setup;

const GAP: Duration = Duration::from_millis(150);

fn main() {
    let Some(bench) = harness::mode() else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(measure(if bench { 300 } else { 5 }));
}

async fn measure(pings: usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let Some((_ngircd, irc_port)) = irc_setup::start_ngircd(dir.path()) else {
        return;
    };
    if xmpp_setup::available().is_none() {
        return;
    }
    let prosody = xmpp_setup::Prosody::start(dir.path(), &["alice", "docs"]);
    let room = xmpp_setup::room("bench");
    // Mail needs root (Postfix does): measured where the servers can run.
    let mail = mail_setup::available().then(|| {
        mail_setup::MailServers::start(
            dir.path(),
            &["alice", "docs"],
            &[("bench", &["alice", "docs"])],
            &[],
        )
    });
    let (email_persona, email_platform) = match &mail {
        Some(m) => (
            format!(
                "email = {{ address = \"{}\", password = \"{}\" }}",
                mail_setup::address("docs"),
                mail_setup::password("docs")
            ),
            format!(
                "[platforms.email]\nimap = {{ host = \"127.0.0.1\", port = {}, tls = \"none\" }}\n\
                 smtp = {{ host = \"127.0.0.1\", port = {}, tls = \"none\" }}\nlists = [\"{list}\"]\n\n\
                 [rooms.\"email:{list}\"]\nrate_limit = \"off\"\n",
                m.imap,
                m.submission,
                list = mail_setup::list("bench")
            ),
        ),
        None => (String::new(), String::new()),
    };
    let text = format!(
        r##"
[store]
path = "{store}"

[[persona]]
id = "docs"
agent = "instant"
irc = {{ nick = "docs" }}
xmpp = {{ jid = "{jid}", password = "{pw}", nick = "docs" }}
{email_persona}

[agents.instant]
kind = "script"
rules = [{{ when = "ping", reply = "pong {{text}}" }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[platforms.irc]
server = "127.0.0.1"
port = {irc_port}
channels = ["#bench"]
send_interval_ms = 100

[platforms.xmpp]
rooms = ["{room}"]
server = "127.0.0.1"
port = {xmpp_port}
tls = "none"

{email_platform}
"##,
        store = dir.path().join("bench.db").display(),
        jid = xmpp_setup::jid("docs"),
        pw = xmpp_setup::password("docs"),
        xmpp_port = prosody.port,
    );
    let path = dir.path().join("tactful.toml");
    std::fs::write(&path, &text).expect("config");
    let config = Config::parse(&text, &path, &|_| None).expect("valid config");
    let _service = Service::start(&config).await.expect("the service starts");

    let irc = irc_latency(irc_port, pings).await;
    print("IRC through ngircd", &irc);
    let xmpp = xmpp_latency(prosody.port, &room, pings).await;
    print("XMPP through Prosody", &xmpp);
    if let Some(m) = &mail {
        let mut people = mail_setup::People::start(m);
        let direct = mail_latency(m, &mut people, false, pings).await;
        print("a direct mail through Postfix and Dovecot", &direct);
        let listed = mail_latency(m, &mut people, true, pings).await;
        print("a list post through Postfix, mlmmj and Dovecot", &listed);
    }
}

/// The mails in a Maildir (`new/` and `cur/`), by file name.
fn mails_in(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    ["new", "cur"]
        .iter()
        .filter_map(|sub| std::fs::read_dir(dir.join(sub)).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()))
        .collect()
}

/// From each question's delivery into docs's mailbox to its answer's
/// delivery into alice's (a direct mail, or a post to the bench list).
async fn mail_latency(
    m: &mail_setup::MailServers,
    people: &mut mail_setup::People,
    list: bool,
    pings: usize,
) -> Vec<f64> {
    let (docs, alice) = (m.maildir("docs"), m.maildir("alice"));
    let mut seen: std::collections::HashSet<std::path::PathBuf> = mails_in(&alice).into_iter().collect();
    let to = if list {
        mail_setup::list("bench")
    } else {
        mail_setup::address("docs")
    };
    let mut out = Vec::with_capacity(pings);
    for n in 0..pings {
        tokio::time::sleep(GAP).await;
        let before = mails_in(&docs).len();
        let want = format!("pong Docs: ping {n}");
        tokio::task::block_in_place(|| {
            people.send(serde_json::json!({
                "from": "alice", "to": [to], "subject": format!("ping {n}"), "body": format!("Docs: ping {n}")
            }))
        });
        let deadline = Instant::now() + Duration::from_secs(60);
        while mails_in(&docs).len() == before {
            assert!(
                Instant::now() < deadline,
                "the question never reached docs's mailbox"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let start = Instant::now();
        'answer: loop {
            assert!(Instant::now() < deadline, "no answer to ping {n}");
            for f in mails_in(&alice) {
                if seen.insert(f.clone()) && std::fs::read_to_string(&f).is_ok_and(|t| t.contains(&want)) {
                    break 'answer;
                }
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        out.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    out.sort_by(f64::total_cmp);
    out
}

/// Latencies in ms, sorted.
fn print(what: &str, ms: &[f64]) {
    let at = |q: f64| ms[((ms.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{what}: {} answers, median {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        ms.len(),
        at(0.5),
        at(0.99),
        ms[ms.len() - 1]
    );
}

async fn irc_latency(port: u16, pings: usize) -> Vec<f64> {
    let mut alice = irc_setup::Person::connect(port, "alice").await;
    irc_setup::join_with(&mut alice, "#bench", &["docs"]).await;
    let mut out = Vec::with_capacity(pings);
    for n in 0..pings {
        tokio::time::sleep(GAP).await;
        let want = format!("pong docs: ping {n}");
        let start = Instant::now();
        alice.send(&format!("PRIVMSG #bench :docs: ping {n}")).await;
        alice
            .until(|l| l.starts_with(":docs!") && l.ends_with(&want))
            .await;
        out.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    out.sort_by(f64::total_cmp);
    out
}

/// The stream's next event (30 s at most).
async fn next(s: &mut StanzaStream) -> Event {
    tokio::time::timeout(Duration::from_secs(30), s.next())
        .await
        .expect("the server answers")
        .expect("the stream stays open")
}

async fn xmpp_latency(port: u16, room: &str, pings: usize) -> Vec<f64> {
    let room = BareJid::new(room).expect("room jid");
    let mut alice = StanzaStream::new_c2s(
        TcpServerConnector::from(DnsConfig::addr(&format!("127.0.0.1:{port}"))),
        Jid::new(&xmpp_setup::jid("alice")).expect("jid"),
        xmpp_setup::password("alice"),
        Timeouts::default(),
        16,
    );
    while !matches!(next(&mut alice).await, Event::Stream(StreamEvent::Reset { .. })) {}
    let join: Element = "<x xmlns='http://jabber.org/protocol/muc'><history maxchars='0'/></x>"
        .parse()
        .expect("element");
    let me = room.with_resource_str("alice").expect("occupant jid");
    drop(
        alice
            .send(Box::new(
                Presence::available().with_to(me).with_payloads(vec![join]).into(),
            ))
            .await,
    );
    // Joined once the room lists docs (its presence comes before ours).
    loop {
        if let Event::Stanza(Stanza::Presence(p)) = next(&mut alice).await
            && p.from
                .as_ref()
                .and_then(|f| f.resource())
                .is_some_and(|r| r.as_str() == "docs")
        {
            break;
        }
    }
    let mut out = Vec::with_capacity(pings);
    for n in 0..pings {
        tokio::time::sleep(GAP).await;
        let want = format!("pong docs: ping {n}");
        let start = Instant::now();
        let mut m = Message::groupchat(Jid::from(room.clone()));
        m.bodies.insert(Lang::default(), format!("docs: ping {n}"));
        drop(alice.send(Box::new(m.into())).await);
        loop {
            if let Event::Stanza(Stanza::Message(m)) = next(&mut alice).await
                && m.from
                    .as_ref()
                    .and_then(|f| f.resource())
                    .is_some_and(|r| r.as_str() == "docs")
                && m.bodies.values().any(|b| b.ends_with(&want))
            {
                break;
            }
        }
        out.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    out.sort_by(f64::total_cmp);
    out
}
