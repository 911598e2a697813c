//! tactful on a real XMPP server: Debian's Prosody on 127.0.0.1, people
//! played by slixmpp (`tests/xmpp/people.py`), `tactful run` with three
//! personas as three XMPP accounts in one multi-user chat.
//!
//! Nothing here sleeps and hopes: every wait polls what the people's
//! clients received or tactful's `/metrics` (`tactful_busy` is 0 once
//! every decided turn, batch and delivery is done) within a bound.

#![cfg(feature = "xmpp")]

use crate::common;
use crate::xmpp_setup;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{Reaper, free_port, metric, run_tactful, settle};
use serde_json::{Value, json};

use xmpp_setup::{People, Prosody, available, jid, password, room};

const PERSONAS: [(&str, &str); 3] = [("docs", "Docs"), ("chef", "Chef"), ("ambient", "Amb")];

/// The messages `nick` posted that are still shown (not retracted).
fn shown_by<'a>(messages: &'a [Value], nick: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["nick"] == nick && m["retracted"] == false)
        .collect()
}

/// `nick`'s shown replies to message `id`.
fn replies_to<'a>(messages: &'a [Value], nick: &str, id: &str) -> Vec<&'a Value> {
    shown_by(messages, nick)
        .into_iter()
        .filter(|m| m["reply_id"] == id)
        .collect()
}

fn config(port: u16, store: &Path, rooms: &[String], metrics_port: u16) -> String {
    let mut personas = String::new();
    for (p, nick) in PERSONAS {
        personas += &*format!(
            "[[persona]]\nid = \"{p}\"\nagent = \"{p}\"\nxmpp = {{ jid = \"{j}\", password = \"{pw}\", nick = \"{nick}\" }}\n\n",
            j = jid(p),
            pw = password(p)
        );
    }
    let rooms: Vec<String> = rooms.iter().map(|r| format!("\"{r}\"")).collect();
    format!(
        r##"
[store]
path = "{store}"

[server]
listen = "127.0.0.1:{metrics_port}"

[platforms.xmpp]
rooms = [{rooms}]
server = "127.0.0.1"
port = {port}
tls = "none"
nick_retry_seconds = 1
invites_from = ["localhost"]

{personas}
{docs}
[agents.chef]
kind = "script"
rules = [{{ when = "", reply = "[[reply_to:{{msg_id}}]]\nChef here: {{from_name}}, try the oven." }}]

[agents.ambient]
kind = "script"
rules = [{{ when = "\\?", reply = "Amb says: the keys are in the drawer." }}]

[rooms.default]
mode = "mention"
rate_limit = "off"

[rooms.default.personas.ambient]
mode = "ambient"
ambient = {{ flush_messages = 1, cooldown_seconds = 0 }}
"##,
        rooms = rooms.join(", "),
        store = store.display(),
        docs = common::conf::help_desk("docs", true),
    )
}

fn wait_metric(port: u16, name: &str, at_least: f64, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(port, name).unwrap_or(0.0) < at_least {
        assert!(
            Instant::now() < deadline,
            "{what}: {name} never reached {at_least}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

struct World {
    dir: tempfile::TempDir,
    prosody: Prosody,
    people: People,
    metrics: u16,
    config: String,
}

/// Prosody with alice, bob and the personas' accounts; alice and bob
/// logged in.
fn world() -> Option<World> {
    world_with("")
}

/// [`world`] with `extra` lines in Prosody's config.
fn world_with(extra: &str) -> Option<World> {
    let venv = available()?;
    let dir = tempfile::tempdir().expect("temp dir");
    let users: Vec<&str> = ["alice", "bob"]
        .into_iter()
        .chain(PERSONAS.iter().map(|(p, _)| *p))
        .collect();
    let prosody = Prosody::start_with(dir.path(), &users, extra);
    let mut people = People::start(&venv, prosody.port);
    people.login("alice");
    people.login("bob");
    let metrics = free_port();
    Some(World {
        metrics,
        config: String::new(),
        prosody,
        people,
        dir,
    })
}

impl World {
    fn start(&mut self, rooms: &[String]) -> Reaper {
        let store = self.dir.path().join("tactful.db");
        self.config = config(self.prosody.port, &store, rooms, self.metrics);
        run_tactful(self.dir.path(), &self.config, &[])
    }
}

#[test]
fn personas_behave_in_a_real_xmpp_room() {
    let Some(mut w) = world() else {
        return;
    };
    let team = room("team");
    // Before tactful ever runs: a question for Docs. It is the room's
    // history at the personas' first join: context, never answered.
    w.people.join("alice", &team, "alice");
    w.people.join("bob", &team, "bob");
    let old = w.people.say("alice", &team, "Docs: what is the wifi password?");
    let mut tactful = w.start(std::slice::from_ref(&team));
    let people = &mut w.people;
    let metrics = w.metrics;
    people.wait_occupants("alice", &team, &["Docs", "Chef", "Amb"]);
    wait_metric(
        metrics,
        "tactful_backlog_total",
        1.0,
        "the question from before start is backlog",
    );
    let mut heard = 0.0;

    // The nick opening the line: one answer, from Docs, a XEP-0461 reply
    // to the question with its quote, streamed as corrections of one
    // message, in XEP-0393 styling.
    let q = people.say("alice", &team, "Docs: how do I reset the router?");
    heard += 1.0;
    people.wait_messages("alice", &team, "Docs' answer", |m| {
        !replies_to(m, "Docs", &q).is_empty()
    });
    settle(metrics, heard);
    let m = people.messages("alice", &team);
    let replies = replies_to(&m, "Docs", &q);
    assert_eq!(replies.len(), 1, "one reply: {m:#?}");
    let body = replies[0]["body"].as_str().unwrap_or_default();
    assert!(
        body.ends_with("Hold the *reset* button for `5 s`."),
        "styled for XMPP: {body:?}"
    );
    assert!(
        body.starts_with("> alice: Docs: how do I reset the router?\n"),
        "the fallback quote: {body:?}"
    );
    assert_eq!(
        replies[0]["reply_to"],
        format!("{team}/alice"),
        "{:#?}",
        replies[0]
    );
    assert!(
        replies[0]["corrections"].as_u64().unwrap_or(0) >= 1,
        "the placeholder was corrected into the answer: {:#?}",
        replies[0]
    );
    assert!(
        shown_by(&m, "Chef").is_empty() && shown_by(&m, "Amb").is_empty(),
        "{m:#?}"
    );
    assert!(replies_to(&m, "Docs", &old).is_empty(), "history is not answered");
    let composing = people.call(json!({"op": "composing", "as": "alice", "room": team}));
    assert!(
        composing
            .as_array()
            .is_some_and(|c| c.iter().any(|n| n == "Docs")),
        "Docs showed it was typing (XEP-0085): {composing}"
    );

    // A reference (XEP-0372) to Chef's bare JID, and one to Docs' occupant
    // JID: each answered by the one named.
    let r1 = people.send(
        "bob",
        &team,
        "can you look at this?",
        json!(format!("xmpp:{}", jid("chef"))),
        Value::Null,
    );
    let r2 = people.send(
        "bob",
        &team,
        "and you, the wifi",
        json!(format!("xmpp:{team}/Docs")),
        Value::Null,
    );
    heard += 2.0;
    people.wait_messages("alice", &team, "answers to the references", |m| {
        !replies_to(m, "Chef", &r1).is_empty() && !replies_to(m, "Docs", &r2).is_empty()
    });

    // A reply (XEP-0461) to Docs' message, naming it by its stanza-id.
    let docs_reply = replies[0]["stanza_id"]
        .as_str()
        .expect("the room's id")
        .to_owned();
    let r3 = people.send(
        "alice",
        &team,
        "thanks! and the wifi?",
        Value::Null,
        json!({"to": format!("{team}/Docs"), "id": docs_reply, "quote": "Docs: Hold the reset button"}),
    );
    heard += 1.0;
    people.wait_messages("alice", &team, "the answer to a reply", |m| {
        !replies_to(m, "Docs", &r3).is_empty()
    });
    settle(metrics, heard);
    let m = people.messages("alice", &team);
    for (nick, id) in [("Chef", &r1), ("Docs", &r2), ("Docs", &r3)] {
        assert_eq!(
            replies_to(&m, nick, id).len(),
            1,
            "{nick} answered {id} once: {m:#?}"
        );
    }
    assert_eq!(
        shown_by(&m, "Chef").len(),
        1,
        "Chef answered only its own: {m:#?}"
    );

    // Chatter: nobody answers (mention mode; the ambient persona's agent
    // has nothing to say). An open question: the ambient persona.
    people.say("bob", &team, "nice weather today");
    let open = people.say("bob", &team, "does anyone know where the spare keys are?");
    heard += 2.0;
    people.wait_messages("alice", &team, "the ambient answer", |m| {
        !shown_by(m, "Amb").is_empty()
    });
    settle(metrics, heard);
    let m = people.messages("alice", &team);
    assert_eq!(shown_by(&m, "Amb").len(), 1, "{m:#?}");
    assert_eq!(
        shown_by(&m, "Docs").len(),
        3,
        "chatter got nothing from Docs: {m:#?}"
    );
    let _ = open;

    // Addressed, Docs chooses silence: a reaction (XEP-0444) on the
    // message, no reply.
    let hush = people.say("alice", &team, "Docs, never mind");
    heard += 1.0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = people.call(json!({"op": "reactions", "as": "alice", "room": team}));
        let found = r.as_array().is_some_and(|all| {
            all.iter()
                .any(|x| x["nick"] == "Docs" && x["target"] == hush.as_str() && x["emojis"][0] == "👀")
        });
        if found {
            break;
        }
        assert!(Instant::now() < deadline, "no reaction from Docs: {r:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    settle(metrics, heard);
    assert!(replies_to(&people.messages("alice", &team), "Docs", &hush).is_empty());

    // A DM: answered without a mention, in the one-to-one chat.
    people.call(json!({"op": "dm", "as": "bob", "to": jid("docs"), "body": "got a minute?"}));
    heard += 1.0;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let d = people.dms("bob");
        if d.iter()
            .any(|x| x["from"] == jid("docs") && x["body"] == "Happy to help, bob.")
        {
            break;
        }
        assert!(Instant::now() < deadline, "no DM answer: {d:#?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    // Bad input: a 1 MB body (answered once, like any message addressed
    // to Docs), a payload nobody knows and a reply that names nothing with
    // a fallback range backwards (read as plain messages), a presence the
    // client library cannot parse (it skips it). Nothing crashes, and the
    // next question is answered once.
    let big = people.say("bob", &team, &format!("Docs: {}", "x".repeat(1_000_000)));
    people.call(json!({"op": "raw", "as": "bob", "xml": format!(
        "<message type='groupchat' to='{team}' id='odd-1'><body>odd payload</body><gizmo xmlns='urn:example:gizmo'><part a='1'/></gizmo></message>")}));
    people.call(json!({"op": "raw", "as": "bob", "xml": format!(
        "<message type='groupchat' to='{team}' id='odd-2'><body>bad reply</body><reply xmlns='urn:xmpp:reply:0'/><fallback xmlns='urn:xmpp:fallback:0' for='urn:xmpp:reply:0'><body start='9' end='2'/></fallback><stanza-id xmlns='urn:xmpp:sid:0'/></message>")}));
    people.call(json!({"op": "raw", "as": "bob", "xml": format!(
        "<presence to='{team}/bob'><priority>999</priority></presence>")}));
    // bob dresses a message up as an archive result in which alice asks:
    // only the room's answer to a query being read is an archive result.
    people.call(json!({"op": "raw", "as": "bob", "xml": format!(
        "<message type='groupchat' to='{team}' id='odd-4'><body>innocent</body>\
         <result xmlns='urn:xmpp:mam:2' queryid='q' id='forged-1'><forwarded xmlns='urn:xmpp:forward:0'>\
         <delay xmlns='urn:xmpp:delay' stamp='2099-01-01T00:00:00Z'/>\
         <message xmlns='jabber:client' from='{team}/alice' type='groupchat'><body>Docs: forged as alice</body></message>\
         </forwarded></result></message>")}));
    let after_bad = people.say("alice", &team, "Docs: still there? the wifi");
    heard += 4.0;
    people.wait_messages("alice", &team, "an answer after bad input", |m| {
        !replies_to(m, "Docs", &after_bad).is_empty()
    });
    settle(metrics, heard);
    let m = people.messages("alice", &team);
    assert_eq!(
        replies_to(&m, "Docs", &big).len(),
        1,
        "the 1 MB message is answered once"
    );
    assert_eq!(replies_to(&m, "Docs", &after_bad).len(), 1);
    assert!(
        !shown_by(&m, "Docs")
            .iter()
            .any(|r| r["body"].as_str().is_some_and(|b| b.contains("forged"))),
        "the forged archive result was not heard as alice's: {m:#?}"
    );

    // Kicked, Docs rejoins and answers.
    people.call(json!({"op": "kick", "as": "alice", "room": team, "nick": "Docs"}));
    people.wait_occupants("alice", &team, &["Docs"]);
    let back = people.say("alice", &team, "Docs: back? reset please");
    heard += 1.0;
    people.wait_messages("alice", &team, "an answer after the kick", |m| {
        !replies_to(m, "Docs", &back).is_empty()
    });

    // tactful is killed and started again: nothing answered twice, and
    // what was said meanwhile is caught up from the room's archive and
    // answered once.
    let before = people.messages("alice", &team);
    drop(tactful); // SIGKILL
    let missed = people.say("alice", &team, "Docs: reset, while you were away?");
    tactful = run_tactful(w.dir.path(), &w.config, &[]);
    let people = &mut w.people;
    people.wait_messages(
        "alice",
        &team,
        "the answer to what was said while tactful was down",
        |m| !replies_to(m, "Docs", &missed).is_empty(),
    );
    let _ = heard;
    settle(metrics, 1.0);
    let after = people.messages("alice", &team);
    for (_, nick) in PERSONAS {
        let extra = shown_by(&after, nick).len() - shown_by(&before, nick).len();
        assert_eq!(
            extra,
            usize::from(nick == "Docs"),
            "{nick} said {extra} new things after the restart: {after:#?}"
        );
    }
    drop(tactful);
}

#[test]
fn a_taken_nick_is_used_with_a_suffix_and_taken_back() {
    let Some(mut w) = world() else {
        return;
    };
    let kitchen = room("kitchen");
    w.people.join("alice", &kitchen, "alice");
    // bob sits on Chef's nick before tactful starts.
    w.people.join("bob", &kitchen, "Chef");
    let tactful = w.start(std::slice::from_ref(&kitchen));
    let people = &mut w.people;
    people.wait_occupants("alice", &kitchen, &["Docs", "Chef_", "Amb"]);
    // On `Chef_`, chef still answers to its own nick where bob is not it?
    // bob is: the name is bob's, so `Chef:` is bob's and not answered.
    let to_bob = people.say("alice", &kitchen, "Chef: are you the real one?");
    settle(w.metrics, 1.0);
    assert!(
        replies_to(&people.messages("alice", &kitchen), "Chef_", &to_bob).is_empty(),
        "the nick belongs to bob while he holds it"
    );
    // Its fallback nick addresses it.
    let q = people.say("alice", &kitchen, "Chef_: what now?");
    people.wait_messages("alice", &kitchen, "Chef_'s answer", |m| {
        !replies_to(m, "Chef_", &q).is_empty()
    });
    // bob leaves: chef takes its nick back (once `Chef_` is gone from the
    // room: `Chef` alone may still be bob, as alice's client sees it).
    people.call(json!({"op": "leave", "as": "bob", "room": kitchen}));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let present = people.call(json!({"op": "occupants", "as": "alice", "room": kitchen}));
        let has = |n: &str| present.as_array().is_some_and(|p| p.iter().any(|x| x == n));
        if has("Chef") && !has("Chef_") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "chef never took its nick back: {present}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let q2 = people.say("alice", &kitchen, "Chef: and now?");
    people.wait_messages("alice", &kitchen, "Chef's answer", |m| {
        !replies_to(m, "Chef", &q2).is_empty()
    });
    drop(tactful);
}

/// An answer in about eight messages, the process killed with `kill -9`
/// as soon as a person sees its second one, then started again on the
/// same store: the answer is finished, nothing is lost, and at most the
/// message in flight at the kill is shown twice. Prosody reads each
/// client at 8 kB/s (mod_limits), so each 8,000-character message takes
/// about a second to go in, and the kill surely falls in the middle.
#[test]
fn a_split_answer_cut_by_a_kill_is_finished_and_doubles_at_most_one_part() {
    use common::split;
    let Some(mut w) = world_with(
        "modules_enabled = { \"roster\"; \"saslauth\"; \"disco\"; \"ping\"; \"mam\"; \"offline\"; \"presence\"; \"message\"; \"limits\" }\nlimits = { c2s = { rate = \"8kb/s\"; burst = \"1s\" } }",
    ) else {
        return;
    };
    let story = room("story");
    w.people.join("alice", &story, "alice");
    let store = w.dir.path().join("tactful.db");
    let config = config(w.prosody.port, &store, std::slice::from_ref(&story), w.metrics)
        .replace(
            "[agents.docs]\nkind = \"script\"\nrules = [\n",
            &format!(
                "[agents.docs]\nkind = \"script\"\nrules = [\n  {{ when = \"(?i)story\", reply = \"{}\" }},\n",
                split::story(split::LONG)
            ),
        )
        .replace("rate_limit = \"off\"", "rate_limit = \"off\"\nmax_reply_chars = 100000");
    // Its log is shown if the test fails. The first answer was once seen
    // not to come at all in a loaded CI run: alice spoke while Amb was
    // still joining, Amb's copy from the room's history was heard first,
    // as context, and Docs's live copy was then dropped as heard already
    // (the room's history is now taken from the persona that joined
    // first: `joined_before` in tactful-xmpp).
    let (first, first_logs) = common::run_tactful_logged(w.dir.path(), &config, &[]);
    let _shown = common::ShownOnPanic(first_logs);
    let people = &mut w.people;
    people.wait_occupants("alice", &story, &["Docs"]);
    people.say("alice", &story, "Docs: the story please");
    let second = split::marker(250);
    // Docs' posts, under its nick or its fallback: the killed process's
    // session can hold `Docs` for a moment after the kill (Prosody, reading
    // it at 8 kB/s, sees it end only once it has read what was in flight),
    // and the new one then joins as `Docs_` until it takes `Docs` back.
    let bodies = |m: &[Value]| -> Vec<String> {
        m.iter()
            .filter(|r| {
                r["retracted"] == false
                    && r["nick"]
                        .as_str()
                        .is_some_and(|n| n.trim_end_matches('_') == "Docs")
            })
            .filter_map(|r| r["body"].as_str().map(str::to_owned))
            .collect()
    };
    people.wait_messages("alice", &story, "the second message", |m| {
        bodies(m).iter().any(|b| b.contains(&second))
    });
    drop(first); // SIGKILL
    let (_second, logs) = common::run_tactful_logged(w.dir.path(), &config, &[]);
    let restored = logs.wait_for("the restore", |l| l.contains("restored from the store"));
    assert!(
        !restored.contains("resumed=0 unsent=0"),
        "the kill fell after the answer, not in it: {restored}"
    );
    let m = people.wait_messages("alice", &story, "the answer finished", |m| {
        split::finished(&bodies(m), split::LONG)
    });
    split::once_but_the_part_in_flight(&bodies(&m), split::LONG);
}

/// Someone posts XML the client library refuses outright (a prefix bound
/// to XML's own namespace: Prosody passes it on, and it ends the stream
/// of every client that reads it). The personas' connections drop and
/// come back, and do not fall into a loop of joining, reading the stanza
/// again in the room's history, and dropping: they join without the
/// history, and go on answering.
#[test]
fn a_stanza_that_ends_the_stream_does_not_keep_the_personas_out() {
    let Some(mut w) = world() else {
        return;
    };
    let bad = room("bad");
    let (tactful, logs) = {
        let store = w.dir.path().join("tactful.db");
        w.config = config(w.prosody.port, &store, std::slice::from_ref(&bad), w.metrics);
        common::run_tactful_logged(w.dir.path(), &w.config, &[])
    };
    let people = &mut w.people;
    people.join("bob", &bad, "bob");
    people.wait_occupants("bob", &bad, &["Docs", "Chef", "Amb"]);
    // bob's own client reads it too and drops: he is not needed after.
    people.call(json!({"op": "raw", "as": "bob", "xml": format!(
        "<message type='groupchat' to='{bad}' id='poison'><body xml:lang='en' xml:lang2='x'>Docs: poison</body></message>")}));
    logs.wait_for("the pause before joining again", |l| {
        l.contains("joining again in")
    });
    // alice comes in without the room's history (her client would drop
    // on it as well) and asks.
    people.join("alice", &bad, "alice");
    people.wait_occupants("alice", &bad, &["Docs"]);
    let q = people.say("alice", &bad, "Docs: still with us?");
    people.wait_messages("alice", &bad, "an answer after the poison", |m| {
        !replies_to(m, "Docs", &q).is_empty()
    });
    let connects = logs
        .lines()
        .iter()
        .filter(|l| l.contains("connected to XMPP") && l.contains("persona=docs"))
        .count();
    assert!(
        connects <= 4,
        "docs connected {connects} times: a loop, not a pause\n{}",
        logs.lines().join("\n")
    );
    drop(tactful);
}

/// `/healthz` as text, with its status.
fn healthz(port: u16) -> (u16, String) {
    common::http_get(port, "/healthz").unwrap_or((0, String::new()))
}

/// The room forgets Docs without a word (as a room service restarted on
/// its own would): Docs' self-ping (XEP-0410) notices and it joins again.
/// Then the whole server is killed: `/healthz` says which accounts are
/// down while it is, and once it is back every persona is in the room
/// again and answers.
#[test]
fn a_persona_dropped_by_the_room_or_the_server_comes_back() {
    let Some(mut w) = world() else {
        return;
    };
    let team = room("team");
    w.people.join("alice", &team, "alice");
    let (tactful, logs) = {
        let store = w.dir.path().join("tactful.db");
        w.config = config(w.prosody.port, &store, std::slice::from_ref(&team), w.metrics).replace(
            "nick_retry_seconds = 1",
            "nick_retry_seconds = 1\nself_ping_seconds = 1",
        );
        common::run_tactful_logged(w.dir.path(), &w.config, &[])
    };
    w.people.wait_occupants("alice", &team, &["Docs", "Chef", "Amb"]);
    assert_eq!(healthz(w.metrics), (200, "ok\n".to_owned()));

    w.prosody.forget_occupant(&team, "Docs");
    logs.wait_for("the self-ping noticing", |l| {
        l.contains("no longer in the room (self-ping)") && l.contains("persona=docs")
    });
    logs.wait_for("docs joining again", |l| {
        l.contains("joined the XMPP room")
            && l.contains("persona=docs")
            && logs
                .lines()
                .iter()
                .filter(|x| x.contains("joined the XMPP room") && x.contains("persona=docs"))
                .count()
                >= 2
    });
    let q = w.people.say("alice", &team, "Docs: are you back? reset");
    w.people
        .wait_messages("alice", &team, "Docs' answer after the room forgot it", |m| {
            !replies_to(m, "Docs", &q).is_empty()
        });

    // The server dies: every account is down, and says so.
    w.prosody.kill();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = healthz(w.metrics);
        if status == 503
            && ["docs", "chef", "ambient"]
                .iter()
                .all(|p| body.contains(&format!("XMPP {p}")))
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "/healthz never said the accounts were down: {status} {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // It comes back: the personas reconnect, join, and answer.
    w.prosody.run();
    let venv = available().expect("checked");
    let mut people = People::start(&venv, w.prosody.port);
    people.login("alice");
    people.join("alice", &team, "alice");
    people.wait_occupants("alice", &team, &["Docs", "Chef", "Amb"]);
    let q = people.say("alice", &team, "Docs: and after the restart? reset");
    people.wait_messages("alice", &team, "Docs' answer after the server restart", |m| {
        !replies_to(m, "Docs", &q).is_empty()
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while healthz(w.metrics) != (200, "ok\n".to_owned()) {
        assert!(
            Instant::now() < deadline,
            "/healthz never recovered: {:?}",
            healthz(w.metrics)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(tactful);
}

/// `tactful doctor`: each account logs in and joins each room (under a
/// nick of the doctor's, so a running service keeps its own), and a
/// wrong password fails that account with a fix, the password unshown.
#[test]
fn doctor_logs_each_account_in_and_joins_each_room() {
    let Some(mut w) = world() else {
        return;
    };
    let team = room("team");
    let store = w.dir.path().join("tactful.db");
    let config = config(w.prosody.port, &store, std::slice::from_ref(&team), w.metrics);
    let (code, table, _) = common::doctor(w.dir.path(), &config);
    assert_eq!(code, Some(0), "{table}");
    for (p, _) in PERSONAS {
        let row = table
            .lines()
            .find(|l| l.starts_with(&format!("XMPP {} (1 room)", jid(p))))
            .unwrap_or_else(|| panic!("no row for {p}: {table}"));
        assert!(
            row.contains(&format!("logged in as {}, joined 1 room", jid(p))),
            "{table}"
        );
    }
    // The doctor left: nobody of its nicks is in the room.
    w.people.join("alice", &team, "alice");
    let present = w
        .people
        .call(json!({"op": "occupants", "as": "alice", "room": team}));
    assert_eq!(present, json!(["alice"]), "the doctor left the room");

    let wrong = config.replace(&password("chef"), "pw-not-the-right-secret");
    let (code, table, _) = common::doctor(w.dir.path(), &wrong);
    assert_eq!(code, Some(1), "{table}");
    let row = table
        .lines()
        .find(|l| l.starts_with(&format!("XMPP {}", jid("chef"))))
        .unwrap_or_else(|| panic!("no row for chef: {table}"));
    assert!(row.contains("FAIL"), "{table}");
    assert!(
        table.contains("check persona chef's xmpp jid and password"),
        "{table}"
    );
    assert!(!table.contains("pw-"), "{table}");
}

/// Invitations are taken from `invites_from` only; a banned persona stays
/// out and says so; the metrics name each account's connection.
#[test]
fn invites_from_the_allowed_are_taken_and_a_ban_keeps_a_persona_out() {
    let Some(mut w) = world() else {
        return;
    };
    let lobby = room("lobby");
    w.people.join("alice", &lobby, "alice");
    let (tactful, logs) = {
        let store = w.dir.path().join("tactful.db");
        w.config = config(w.prosody.port, &store, std::slice::from_ref(&lobby), w.metrics).replace(
            "invites_from = [\"localhost\"]",
            "invites_from = [\"alice@localhost\"]",
        );
        common::run_tactful_logged(w.dir.path(), &w.config, &[])
    };
    let people = &mut w.people;
    people.wait_occupants("alice", &lobby, &["Docs", "Chef", "Amb"]);
    assert_eq!(
        metric(w.metrics, "tactful_platform_connected"),
        Some(3.0),
        "one per account"
    );

    // alice may invite: Docs comes into her side room and answers there.
    let side = room("side");
    people.join("alice", &side, "alice");
    people.call(json!({"op": "invite", "as": "alice", "room": side, "to": jid("docs")}));
    people.wait_occupants("alice", &side, &["Docs"]);
    let q = people.say("alice", &side, "Docs: hello in here? reset");
    people.wait_messages(
        "alice",
        &side,
        "Docs' answer in the room it was invited to",
        |m| !replies_to(m, "Docs", &q).is_empty(),
    );
    // bob may not: Chef stays out of his room.
    let bobs = room("bobs");
    people.join("bob", &bobs, "bob");
    people.call(json!({"op": "invite", "as": "bob", "room": bobs, "to": jid("chef")}));
    logs.wait_for("the refused invite", |l| {
        l.contains("ignored an invite") && l.contains("persona=chef") && l.contains("bob@localhost")
    });
    let present = people.call(json!({"op": "occupants", "as": "bob", "room": bobs}));
    assert_eq!(present, json!(["bob"]), "Chef did not join bob's room");

    // bob forges a room's invitation from alice, sent from his own
    // client: not believed. (chef answers his next DM, so it has read the
    // forgery by then.)
    people.call(json!({"op": "raw", "as": "bob", "xml": format!(
        "<message to='{}' type='normal'><x xmlns='http://jabber.org/protocol/muc#user'>\
         <invite from='alice@localhost/phone'/></x></message>", jid("chef"))}));
    people.call(json!({"op": "dm", "as": "bob", "to": jid("chef"), "body": "any news?"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while !people.dms("bob").iter().any(|d| d["from"] == jid("chef")) {
        assert!(Instant::now() < deadline, "chef never answered bob's DM");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !logs
            .lines()
            .iter()
            .any(|l| l.contains("invited; joining") && l.contains("persona=chef")),
        "a forged invitation was believed:\n{}",
        logs.lines().join("\n")
    );

    // alice bans Chef from the lobby: it says so and does not come back.
    people.call(json!({"op": "ban", "as": "alice", "room": lobby, "jid": jid("chef")}));
    logs.wait_for("the ban", |l| {
        l.contains("banned from the room") && l.contains("persona=chef")
    });
    let q = people.say("alice", &lobby, "Docs: still here after the ban? reset");
    people.wait_messages("alice", &lobby, "Docs' answer after the ban", |m| {
        !replies_to(m, "Docs", &q).is_empty()
    });
    let joins = logs
        .lines()
        .iter()
        .filter(|l| l.contains("joined the XMPP room") && l.contains("persona=chef") && l.contains(&lobby))
        .count();
    assert_eq!(joins, 1, "Chef did not try to join again after the ban");
    let present = people.call(json!({"op": "occupants", "as": "alice", "room": lobby}));
    assert!(
        !present.as_array().is_some_and(|p| p.iter().any(|n| n == "Chef")),
        "{present}"
    );
    drop(tactful);
}
