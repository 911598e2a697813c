//! Issue 3: ambient rooms, the reply-decision gate, and floor control, each
//! shown through a replay.

use serde_json::Value;

use super::tests::{dec, decision, line, of_type};
use super::{ReplayOptions, replay_str};

fn replay(config: &str, scenario: &[String]) -> Vec<Value> {
    replay_str(config, &scenario.join("\n"), ReplayOptions::default())
}

fn replay_seeded(config: &str, scenario: &[String], seed: u64) -> Vec<Value> {
    replay_str(
        config,
        &scenario.join("\n"),
        ReplayOptions {
            seed,
            ..Default::default()
        },
    )
}

fn at(v: &Value) -> f64 {
    v["at"].as_f64().expect("at")
}

/// One ambient persona `guide` whose agent answers questions and is silent
/// otherwise, after `delay_ms`.
fn ambient(delay_ms: u64, room: &str) -> String {
    format!(
        r#"
[[persona]]
id = "guide"
agent = "guide"

[agents.guide]
kind = "script"
rules = [
  {{ when = "\\?", reply = "About {{msg_id}}: see the docs.", delay_ms = {delay_ms} }},
  {{ when = "", reply = "NO_REPLY", delay_ms = {delay_ms} }},
]

[rooms.default]
mode = "ambient"
rate_limit = "off"
{room}
"#
    )
}

fn chatter(n: usize, start: f64, step: f64) -> Vec<String> {
    (0..n)
        .map(|i| {
            line(
                start + i as f64 * step,
                "bob",
                &format!("chatter {i}"),
                &format!(r#", "id": "c{i}""#),
            )
        })
        .collect()
}

// Ambient: triggers -----------------------------------------------------------

#[test]
fn unaddressed_messages_are_buffered_not_answered_one_by_one() {
    let t = replay(
        &ambient(0, "ambient = { flush_messages = 5 }"),
        &chatter(4, 0.0, 1.0),
    );
    for i in 0..4 {
        assert_eq!(decision(&t, &format!("c{i}"), "guide"), dec("record", "buffered"));
    }
    // Four messages, under the count: one timer flush later, one call.
    let calls = of_type(&t, "agent_call");
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["kind"], "ambient");
    assert_eq!(calls[0]["trigger"], "timer");
    assert_eq!(calls[0]["msgs"].as_array().map(Vec::len), Some(4));
    assert_eq!(of_type(&t, "silent").len(), 1, "chatter ends in silence");
}

#[test]
fn the_timer_fires_within_the_jitter_band_and_the_seed_repeats_it() {
    let cfg = ambient(0, "ambient = { flush_seconds = 60, jitter = 0.2 }");
    let scenario = chatter(1, 10.0, 1.0);
    let mut times = Vec::new();
    for seed in 0..20 {
        let t = replay_seeded(&cfg, &scenario, seed);
        let call = at(of_type(&t, "agent_call")[0]);
        assert!((10.0 + 48.0..=10.0 + 72.0).contains(&call), "seed {seed}: {call}");
        let again = replay_seeded(&cfg, &scenario, seed);
        assert_eq!(t, again, "the same seed replays identically");
        times.push(call);
    }
    times.sort_by(f64::total_cmp);
    times.dedup();
    assert!(times.len() > 10, "seeds spread the flush: {times:?}");
}

#[test]
fn the_count_trigger_flushes_at_once() {
    let t = replay(
        &ambient(0, "ambient = { flush_messages = 3 }"),
        &chatter(3, 0.0, 1.0),
    );
    let call = of_type(&t, "agent_call")[0];
    assert_eq!((call["trigger"].as_str(), at(call)), (Some("count"), 2.0));
}

#[test]
fn the_hard_cap_flushes_even_in_cooldown_and_never_drops() {
    let cfg = ambient(
        0,
        "ambient = { flush_messages = 3, hard_cap = 5, cooldown_seconds = 600 }",
    );
    let mut s = vec![line(0.0, "alice", "@guide hi?", r#", "id": "hi""#)];
    s.extend(chatter(7, 1.0, 1.0));
    let t = replay(&cfg, &s);
    // The count trigger at c2 waits for the cooldown...
    let waits = of_type(&t, "flush_wait");
    assert_eq!(
        (waits[0]["trigger"].as_str(), waits[0]["reason"].as_str()),
        (Some("count"), Some("cooldown"))
    );
    assert_eq!(waits[0]["until"], 600.0);
    // ...but the fifth buffered message forces a flush of all five.
    let flush = of_type(&t, "agent_call")
        .into_iter()
        .find(|c| c["kind"] == "ambient")
        .expect("a flush");
    assert_eq!(flush["trigger"], "hard_cap");
    assert_eq!(at(flush), 5.0);
    let msgs: Vec<&str> = flush["msgs"]
        .as_array()
        .expect("msgs")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(msgs, ["c0", "c1", "c2", "c3", "c4"]);
    // c5 and c6 start the next buffer and flush when the cooldown ends.
    let last = of_type(&t, "agent_call").into_iter().last().expect("calls");
    assert_eq!(last["msgs"], serde_json::json!(["c5", "c6"]));
    assert_eq!(at(last), 600.0);
}

#[test]
fn an_addressed_message_preempts_and_cancels_an_inflight_flush() {
    let cfg = ambient(5000, "ambient = { flush_messages = 3 }");
    let mut s = chatter(2, 0.0, 1.0);
    s.push(line(
        2.0,
        "carol",
        "does anyone know the wifi password?",
        r#", "id": "q""#,
    ));
    s.push(line(3.0, "dave", "me neither", r#", "id": "c3""#));
    s.push(line(
        4.0,
        "alice",
        "@guide where is the wifi password?",
        r#", "id": "addr""#,
    ));
    let t = replay_str(
        &cfg,
        &s.join("\n"),
        ReplayOptions {
            prompts: true,
            ..Default::default()
        },
    );
    let flush = of_type(&t, "agent_call")
        .into_iter()
        .find(|c| c["kind"] == "ambient")
        .expect("flush");
    assert_eq!(at(flush), 2.0);
    let cancelled = of_type(&t, "cancelled");
    assert_eq!(cancelled.len(), 1);
    assert_eq!(
        (cancelled[0]["reason"].as_str(), at(cancelled[0])),
        (Some("addressed"), 4.0)
    );
    assert_eq!(cancelled[0]["turn"], flush["turn"]);
    let cleared = of_type(&t, "buffer_cleared");
    assert_eq!(cleared[0]["msgs"], serde_json::json!(["c3"]));
    // Exactly one post: the addressed reply; the flush's late answer is dropped.
    let sends = of_type(&t, "send");
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0]["msgs"], serde_json::json!(["addr"]));
    // The addressed reply saw the buffered messages as context.
    let reply_call = of_type(&t, "agent_call")
        .into_iter()
        .find(|c| c["kind"] == "reply")
        .expect("reply");
    let convo = reply_call["prompt"]["messages"].to_string();
    assert!(
        convo.contains("me neither") && convo.contains("wifi password?"),
        "{convo}"
    );
}

#[test]
fn cooldown_delays_the_flush_after_the_persona_spoke() {
    let cfg = ambient(0, "ambient = { flush_messages = 2, cooldown_seconds = 30 }");
    let mut s = vec![line(0.0, "alice", "@guide hello?", r#", "id": "hi""#)];
    s.extend(chatter(2, 5.0, 1.0));
    let t = replay(&cfg, &s);
    let wait = of_type(&t, "flush_wait")[0];
    assert_eq!(
        (wait["reason"].as_str(), wait["until"].as_f64()),
        (Some("cooldown"), Some(30.0))
    );
    let flush = of_type(&t, "agent_call")
        .into_iter()
        .find(|c| c["kind"] == "ambient")
        .expect("flush");
    assert_eq!((at(flush), flush["trigger"].as_str()), (30.0, Some("count")));
}

#[test]
fn concurrent_flushes_are_bounded_process_wide() {
    let cfg = ambient(
        10_000,
        "ambient = { flush_messages = 1, max_concurrent_flushes = 2 }",
    );
    let s: Vec<String> = (0..4)
        .map(|i| line(1.0, "bob", "psst", &format!(r#", "id": "m{i}", "room": "r{i}""#)))
        .collect();
    let t = replay(&cfg, &s);
    let flushes: Vec<f64> = of_type(&t, "agent_call").into_iter().map(at).collect();
    assert_eq!(
        flushes,
        [1.0, 1.0, 11.0, 11.0],
        "two at a time, the rest wait their turn"
    );
    let waits = of_type(&t, "flush_wait");
    assert_eq!(waits.len(), 2);
    assert!(waits.iter().all(|w| w["reason"] == "concurrency"));
}

#[test]
fn bot_messages_are_buffered_only_when_bots_are_not_ignored() {
    let bot = vec![line(0.0, "ci", "build failed", r#", "id": "b", "bot": true"#)];
    let t = replay(&ambient(0, ""), &bot);
    assert_eq!(decision(&t, "b", "guide"), dec("record", "bot_author"));
    let t = replay(&ambient(0, "ignore_bots = false"), &bot);
    assert_eq!(decision(&t, "b", "guide"), dec("record", "buffered"));
}

#[test]
fn ambient_settings_are_checked() {
    use crate::config::Config;
    use std::path::Path;
    let bad = [
        ("ambient = { flush_seconds = 0 }", "flush_seconds"),
        ("ambient = { jitter = 1.0 }", "jitter"),
        ("ambient = { flush_messages = 0 }", "flush_messages"),
        ("ambient = { hard_cap = 0 }", "hard_cap"),
        ("ambient = { cooldown_seconds = -1 }", "cooldown_seconds"),
        (
            "ambient = { max_concurrent_flushes = 0 }",
            "max_concurrent_flushes",
        ),
        ("ambient = { flush_messages = 60 }", "exceeds ambient.hard_cap"),
        ("allow_silence = false", "needs allow_silence"),
    ];
    for (room, expect) in bad {
        let err = Config::parse(&ambient(0, room), Path::new("t.toml"), &|_| None).expect_err(room);
        assert!(err.to_string().contains(expect), "{room}: {err}");
    }
    let cfg = format!(
        "{}\n[rooms.lobby]\nambient = {{ max_concurrent_flushes = 2 }}\n",
        ambient(0, "")
    );
    let err = Config::parse(&cfg, Path::new("t.toml"), &|_| None).expect_err("per-room bound");
    assert!(err.to_string().contains("process-wide"), "{err}");
}

// The reply-decision gate -------------------------------------------------------

/// `docs` in `all` mode behind a classifier that SKIPs "lunch", fails on
/// "boom", mumbles on "hmm", hangs on "slow", and says REPLY otherwise.
fn gated(room: &str) -> String {
    format!(
        r#"
[[persona]]
id = "docs"
agent = "main"
prompt = "Answers product questions."

[[persona]]
id = "chef"
agent = "main"

[agents.main]
kind = "script"
rules = [{{ when = "", reply = "answer to {{msg_id}}" }}]

[agents.classifier]
kind = "script"
rules = [
  {{ when = "lunch", reply = "SKIP" }},
  {{ when = "boom", fail = true }},
  {{ when = "hmm", reply = "maybe?" }},
  {{ when = "slow", reply = "REPLY", delay_ms = 10000 }},
  {{ when = "", reply = "REPLY, it is a product question" }},
]

[rooms.default]
mode = "mention"

[rooms.default.personas.docs]
mode = "all"
reply_gate = {{ enabled = true, agent = "classifier", timeout_ms = 3000 }}
{room}
"#
    )
}

#[test]
fn the_gate_decides_reply_or_skip() {
    let s = [
        line(0.0, "alice", "how do I export a report", r#", "id": "q""#),
        line(1.0, "alice", "anyone for lunch", r#", "id": "l""#),
    ];
    let t = replay(&gated(""), &s);
    assert_eq!(decision(&t, "q", "docs"), dec("reply", "gate_reply"));
    assert_eq!(decision(&t, "l", "docs"), dec("skip", "gate_skip"));
    let kinds: Vec<_> = of_type(&t, "agent_call")
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        kinds,
        ["gate", "reply", "gate"],
        "a SKIP costs one cheap call and nothing else"
    );
    let gate_call = of_type(&t, "agent_call")[0];
    assert_eq!(gate_call["agent"], "classifier");
}

#[test]
fn the_gate_fails_open_on_error_garbage_and_timeout() {
    let s = [
        line(0.0, "alice", "boom", r#", "id": "e""#),
        line(1.0, "alice", "hmm", r#", "id": "g""#),
        line(2.0, "alice", "slow question", r#", "id": "s""#),
    ];
    let t = replay(&gated(""), &s);
    for id in ["e", "g", "s"] {
        assert_eq!(decision(&t, id, "docs"), dec("reply", "gate_failed_open"), "{id}");
    }
    let c = of_type(&t, "cancelled");
    assert_eq!(
        (c[0]["reason"].as_str(), c[0]["kind"].as_str(), at(c[0])),
        (Some("gate_timeout"), Some("gate"), 5.0)
    );
    // The classifier's late REPLY at t=12 changes nothing.
    assert_eq!(of_type(&t, "send").len(), 3);
}

#[test]
fn gate_slots_are_reserved_first_and_released_on_skip() {
    let cfg = gated("rate_limit = { replies = 1, per_seconds = 600 }");
    let s = [
        line(0.0, "alice", "lunch?", r#", "id": "l1""#),
        line(1.0, "alice", "lunch again", r#", "id": "l2""#),
        line(2.0, "alice", "how do I export", r#", "id": "q1""#),
        line(3.0, "alice", "how do I import", r#", "id": "q2""#),
    ];
    let t = replay(&cfg, &s);
    assert_eq!(decision(&t, "l1", "docs"), dec("skip", "gate_skip"));
    assert_eq!(
        decision(&t, "l2", "docs"),
        dec("skip", "gate_skip"),
        "the SKIP gave the slot back"
    );
    assert_eq!(decision(&t, "q1", "docs"), dec("reply", "gate_reply"));
    assert_eq!(decision(&t, "q2", "docs"), dec("skip", "rate_limited"));
    let gates = of_type(&t, "agent_call")
        .into_iter()
        .filter(|c| c["kind"] == "gate")
        .count();
    assert_eq!(gates, 3, "a rate-limited room does not even call the gate");
}

#[test]
fn addressed_messages_and_dms_are_never_gated() {
    let s = [
        line(0.0, "alice", "@docs lunch menu?", r#", "id": "m""#),
        line(1.0, "alice", "lunch?", r#", "id": "d", "dm": true, "to": "docs""#),
    ];
    let t = replay(&gated(""), &s);
    assert_eq!(decision(&t, "m", "docs"), dec("reply", "mention"));
    assert_eq!(decision(&t, "d", "docs"), dec("reply", "dm"));
    assert!(of_type(&t, "agent_call").iter().all(|c| c["kind"] != "gate"));
}

#[test]
fn ambient_flushes_can_be_gated() {
    let cfg = r#"
[[persona]]
id = "guide"
agent = "main"

[agents.main]
kind = "script"
rules = [{ when = "", reply = "here is a tip" }]

[agents.classifier]
kind = "script"
rules = [{ when = "lunch", reply = "SKIP" }, { when = "", reply = "REPLY" }]

[rooms.default]
mode = "ambient"
ambient = { flush_messages = 2 }
reply_gate = { enabled = true, agent = "classifier", in_ambient = true }
"#;
    let s = [
        line(0.0, "bob", "lunch at noon", ""),
        line(1.0, "bob", "lunch at one", ""),
        line(2.0, "bob", "how do I deploy", ""),
        line(3.0, "bob", "anyone?", ""),
    ];
    let t = replay(cfg, &s);
    let kinds: Vec<_> = of_type(&t, "agent_call")
        .iter()
        .map(|c| c["kind"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["gate", "gate", "ambient"]);
    assert_eq!(of_type(&t, "flush_skipped")[0]["reason"], "gate_skip");
    assert_eq!(of_type(&t, "send").len(), 1);
}

#[test]
fn a_gate_needs_an_agent() {
    use crate::config::Config;
    use std::path::Path;
    let cfg = gated("").replace(", agent = \"classifier\"", "");
    let err = Config::parse(&cfg, Path::new("t.toml"), &|_| None).expect_err("no agent");
    assert!(err.to_string().contains("reply_gate.agent"), "{err}");
    let cfg = gated("").replace("agent = \"classifier\"", "agent = \"nope\"");
    let err = Config::parse(&cfg, Path::new("t.toml"), &|_| None).expect_err("unknown agent");
    assert!(err.to_string().contains("names no [agents.nope]"), "{err}");
}

// Floor control -------------------------------------------------------------------

/// Three personas in `all` mode, each answering after its own delay.
fn three(extra: &str, gate: bool) -> String {
    let mut cfg = String::new();
    for (id, delay) in [("docs", 300), ("chef", 100), ("bard", 200)] {
        cfg.push_str(&format!(
            "[[persona]]\nid = \"{id}\"\nagent = \"{id}\"\n\n[agents.{id}]\nkind = \"script\"\nrules = [{{ when = \"\", reply = \"{id} says hi\", delay_ms = {delay} }}]\n\n"
        ));
    }
    cfg.push_str(
        "[agents.yes]\nkind = \"script\"\nrules = [{ when = \"\", reply = \"REPLY\", delay_ms = 150 }]\n\n",
    );
    cfg.push_str(&format!("[rooms.default]\nmode = \"all\"\n{extra}\n"));
    if gate {
        cfg.push_str("reply_gate = { enabled = true, agent = \"yes\" }\n");
    }
    cfg
}

#[test]
fn one_persona_takes_the_floor_and_the_others_are_withheld() {
    let t = replay(
        &three("floor = { strategy = \"race\" }", false),
        &[line(0.0, "alice", "hello everyone", r#", "id": "q""#)],
    );
    let sends = of_type(&t, "send");
    assert_eq!(sends.len(), 1);
    assert_eq!(sends[0]["persona"], "chef", "the first real reply wins");
    let withheld = of_type(&t, "withheld");
    assert_eq!(withheld.len(), 2);
    assert!(withheld.iter().all(|w| w["reason"] == "floor_taken"));
}

#[test]
fn a_taken_floor_stops_agents_before_they_are_called() {
    let s = [line(0.0, "alice", "hello everyone", r#", "id": "q""#)];
    // Racing, all three gates say REPLY at 0.15 s, so all three replies
    // start; chef's (0.1 s) lands first and the other two are withheld.
    let race = "floor = { strategy = \"race\" }";
    let t = replay(&three(race, true), &s);
    assert_eq!(of_type(&t, "send").len(), 1);
    assert_eq!(of_type(&t, "withheld").len(), 2);
    // With a slower gate, bard's verdict arrives after chef spoke: bard's
    // agent is never called.
    let cfg = three(race, true).replace(
        "[rooms.default]",
        "[agents.slow]\nkind = \"script\"\nrules = [{ when = \"\", reply = \"REPLY\", delay_ms = 1000 }]\n\n[rooms.default.personas.bard]\nreply_gate = { agent = \"slow\" }\n\n[rooms.default]",
    );
    let t = replay(&cfg, &s);
    assert_eq!(decision(&t, "q", "bard"), dec("skip", "floor_taken"));
    let bard_calls: Vec<_> = of_type(&t, "agent_call")
        .into_iter()
        .filter(|c| c["persona"] == "bard")
        .collect();
    assert_eq!(bard_calls.len(), 1, "only bard's gate ran: {bard_calls:?}");
    assert_eq!(bard_calls[0]["kind"], "gate");
}

#[test]
fn addressed_personas_always_answer() {
    let t = replay(
        &three("", false),
        &[line(
            0.0,
            "alice",
            "@docs @bard what do you think?",
            r#", "id": "q""#,
        )],
    );
    let mut who: Vec<_> = of_type(&t, "send")
        .iter()
        .map(|s| s["persona"].as_str().unwrap_or("").to_owned())
        .collect();
    who.sort();
    assert_eq!(who, ["bard", "docs"]);
    assert_eq!(decision(&t, "q", "chef"), dec("record", "addressed_to_other"));
}

#[test]
fn max_speakers_allows_more_than_one() {
    let t = replay(
        &three("floor = { max_speakers = 2, strategy = \"race\" }", false),
        &[line(0.0, "alice", "hello", "")],
    );
    assert_eq!(of_type(&t, "send").len(), 2);
    assert_eq!(of_type(&t, "withheld").len(), 1);
    // Passing, the second speaker is asked once the first answered: two
    // calls, nothing paid for and withheld.
    let t = replay(
        &three("floor = { max_speakers = 2 }", false),
        &[line(0.0, "alice", "hello", "")],
    );
    assert_eq!(of_type(&t, "send").len(), 2);
    assert_eq!(of_type(&t, "agent_call").len(), 2);
    assert!(of_type(&t, "withheld").is_empty());
}

#[test]
fn passing_asks_one_persona_per_question_and_the_trace_says_who() {
    let t = replay(
        &three("", false),
        &[line(0.0, "alice", "hello everyone", r#", "id": "q""#)],
    );
    assert_eq!(of_type(&t, "agent_call").len(), 1, "one call for one question");
    let offers = of_type(&t, "floor_offer");
    assert_eq!(offers.len(), 1);
    assert_eq!(offers[0]["persona"], "docs");
    assert_eq!(offers[0]["reason"], "first");
    assert_eq!(offers[0]["waiting"], serde_json::json!(["chef", "bard"]));
    assert_eq!(decision(&t, "q", "chef"), dec("skip", "floor_taken"));
    assert_eq!(decision(&t, "q", "bard"), dec("skip", "floor_taken"));
}

fn fast_and_guide(flush_messages: u32) -> String {
    fast_and_guide_answering("", flush_messages)
}

/// `fast` (all mode) answers messages matching `fast_when`, else stays
/// silent; `guide` is ambient.
fn fast_and_guide_answering(fast_when: &str, flush_messages: u32) -> String {
    format!(
        r#"
[[persona]]
id = "fast"
agent = "fast"

[[persona]]
id = "guide"
agent = "guide"

[agents.fast]
kind = "script"
rules = [{{ when = "{fast_when}", reply = "I know this one" }}]

[agents.guide]
kind = "script"
rules = [{{ when = "", reply = "me too" }}]

[rooms.default]
mode = "all"
rate_limit = "off"

[rooms.default.personas.guide]
mode = "ambient"
ambient = {{ flush_messages = {flush_messages} }}
"#
    )
}

#[test]
fn an_ambient_batch_already_answered_is_skipped_before_the_call() {
    let s = [
        line(0.0, "alice", "question one?", r#", "id": "q1""#),
        line(1.0, "alice", "question two?", r#", "id": "q2""#),
    ];
    // The timer flush comes long after fast answered both questions.
    let t = replay(&fast_and_guide(10), &s);
    let skipped = of_type(&t, "flush_skipped");
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["reason"], "floor_taken");
    assert_eq!(skipped[0]["msgs"], serde_json::json!(["q1", "q2"]));
    assert!(
        of_type(&t, "agent_call").iter().all(|c| c["kind"] != "ambient"),
        "no agent call at all"
    );
}

#[test]
fn an_ambient_answer_overtaken_by_another_persona_is_withheld() {
    let s = [line(0.0, "alice", "question one?", r#", "id": "q1""#)];
    // The count flush starts with q1 before fast's reply lands.
    let t = replay(&fast_and_guide(1), &s);
    assert_eq!(of_type(&t, "send").len(), 1);
    let w = of_type(&t, "withheld");
    assert_eq!(
        (
            w[0]["persona"].as_str(),
            w[0]["kind"].as_str(),
            w[0]["reason"].as_str()
        ),
        (Some("guide"), Some("ambient"), Some("floor_taken"))
    );
}

#[test]
fn answered_messages_leave_a_batch_and_the_rest_still_flush() {
    let mut s = vec![line(0.0, "alice", "question one?", r#", "id": "q1""#)];
    s.extend(chatter(2, 1.0, 1.0));
    let t = replay(&fast_and_guide_answering("question", 3), &s);
    // fast answered q1 at once and let the chatter pass; the guide's batch
    // shows only what nobody has answered.
    let call = of_type(&t, "agent_call")
        .into_iter()
        .find(|c| c["kind"] == "ambient")
        .expect("a flush");
    assert_eq!(call["msgs"], serde_json::json!(["c0", "c1"]));
}

#[test]
fn a_burst_of_50_with_cap_6_gives_exactly_6_replies_in_all_mode_with_a_gate() {
    let cfg = gated("rate_limit = { replies = 6, per_seconds = 120 }");
    let s: Vec<String> = (0..50)
        .map(|i| line(1.0, &format!("u{i}"), "how do I export", ""))
        .collect();
    let t = replay(&cfg, &s);
    assert_eq!(
        of_type(&t, "send")
            .iter()
            .filter(|s| s["persona"] == "docs")
            .count(),
        6
    );
    let gates = of_type(&t, "agent_call")
        .into_iter()
        .filter(|c| c["kind"] == "gate")
        .count();
    assert_eq!(gates, 6);
}

// Property: random configs and conversations never break the engine's
// invariants (ARCHITECTURE.md), whatever mix of modes, gates, floors,
// delays and failures.

mod invariants {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{HashMap, HashSet};

    #[derive(Debug, Clone)]
    struct PersonaCfg {
        mode: &'static str,
        delay: u64,
        fails: bool,
        gate: Option<(u64, bool)>,
    }

    fn persona_cfg() -> impl Strategy<Value = PersonaCfg> {
        (
            prop::sample::select(vec!["mention", "all", "command", "observe", "ambient"]),
            0u64..4000,
            any::<bool>(),
            prop::option::of((0u64..5000, any::<bool>())),
        )
            .prop_map(|(mode, delay, fails, gate)| PersonaCfg {
                mode,
                delay,
                fails,
                gate,
            })
    }

    fn config(personas: &[PersonaCfg], speakers: u32, flush: u32, cap: u32, ignore_bots: bool) -> String {
        let mut cfg = String::new();
        for (i, p) in personas.iter().enumerate() {
            let fail = if p.fails {
                r#"{ when = "boom", fail = true }, "#
            } else {
                ""
            };
            cfg.push_str(&format!(
                "[[persona]]\nid = \"p{i}\"\nagent = \"a{i}\"\n\n[agents.a{i}]\nkind = \"script\"\nrules = [{fail}{{ when = \"\\\\?\", reply = \"[[reply_to:{{msg_id}}]]\\nyes\", delay_ms = {d} }}, {{ when = \"\", reply = \"NO_REPLY\", delay_ms = {d} }}]\n\n",
                d = p.delay
            ));
            if let Some((gd, _)) = p.gate {
                cfg.push_str(&format!(
                    "[agents.g{i}]\nkind = \"script\"\nrules = [{{ when = \"x\", reply = \"SKIP\", delay_ms = {gd} }}, {{ when = \"\", reply = \"REPLY\", delay_ms = {gd} }}]\n\n"
                ));
            }
        }
        cfg.push_str(&format!(
            "[rooms.default]\nignore_bots = {ignore_bots}\nmax_bot_turns = 2\nrate_limit = {{ replies = 4, per_seconds = 30 }}\nfloor = {{ max_speakers = {speakers} }}\nambient = {{ flush_seconds = 5, flush_messages = {flush}, hard_cap = {cap}, cooldown_seconds = 3, max_concurrent_flushes = 2 }}\n\n"
        ));
        for (i, p) in personas.iter().enumerate() {
            cfg.push_str(&format!("[rooms.default.personas.p{i}]\nmode = \"{}\"\n", p.mode));
            if let Some((_, in_ambient)) = p.gate {
                cfg.push_str(&format!(
                    "reply_gate = {{ enabled = true, agent = \"g{i}\", timeout_ms = 2500, in_ambient = {in_ambient} }}\n"
                ));
            }
            cfg.push('\n');
        }
        cfg
    }

    #[derive(Debug, Clone)]
    struct Msg {
        gap_ms: u64,
        from: u8,
        room: u8,
        text: u8,
        mention: Option<u8>,
        reply_to_persona: Option<u8>,
        dm_to: Option<u8>,
        bot: bool,
    }

    fn msg() -> impl Strategy<Value = Msg> {
        (
            prop::sample::select(vec![0u64, 0, 100, 500, 1000, 3000, 8000]),
            0u8..4,
            0u8..2,
            0u8..4,
            prop::option::weighted(0.2, 0u8..4),
            prop::option::weighted(0.15, 0u8..4),
            prop::option::weighted(0.08, 0u8..4),
            prop::bool::weighted(0.15),
        )
            .prop_map(
                |(gap_ms, from, room, text, mention, reply_to_persona, dm_to, bot)| Msg {
                    gap_ms,
                    from,
                    room,
                    text,
                    mention,
                    reply_to_persona,
                    dm_to,
                    bot,
                },
            )
    }

    fn scenario(msgs: &[Msg], personas: usize) -> String {
        let texts = ["hello", "what now?", "boom?", "x marks it"];
        let mut at = 0u64;
        let mut out = Vec::new();
        for (i, m) in msgs.iter().enumerate() {
            at += m.gap_ms;
            let mut text = texts[m.text as usize].to_owned();
            if let Some(p) = m.mention {
                text = format!("@p{} {text}", p as usize % personas);
            }
            let mut extra = format!(r#", "id": "m{i}""#);
            match m.dm_to {
                Some(p) => extra.push_str(&format!(r#", "dm": true, "to": "p{}""#, p as usize % personas)),
                None => extra.push_str(&format!(r#", "room": "r{}""#, m.room)),
            }
            if let Some(p) = m.reply_to_persona {
                extra.push_str(&format!(r#", "reply_to": "p{}:1""#, p as usize % personas));
            }
            if m.bot {
                extra.push_str(r#", "bot": true"#);
            }
            out.push(line(at as f64 / 1000.0, &format!("u{}", m.from), &text, &extra));
        }
        out.join("\n")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(160))]

        #[test]
        fn the_engine_keeps_its_invariants(
            personas in prop::collection::vec(persona_cfg(), 1..5),
            speakers in 1u32..3,
            (flush, cap) in (1u32..5).prop_flat_map(|f| (Just(f), f..8)),
            ignore_bots in any::<bool>(),
            msgs in prop::collection::vec(msg(), 1..40),
            seed in any::<u64>(),
        ) {
            let cfg = config(&personas, speakers, flush, cap, ignore_bots);
            let t = replay_str(&cfg, &scenario(&msgs, personas.len()), ReplayOptions { seed, ..Default::default() });

            // One decision per (room, message, persona).
            let mut seen = HashSet::new();
            for d in of_type(&t, "decision") {
                let key = (d["room"].to_string(), d["msg"].to_string(), d["persona"].to_string());
                prop_assert!(seen.insert(key), "decided twice: {d}");
            }
            prop_assert_eq!(seen.len() % personas.len(), 0, "every message is decided for every persona");

            // Every reply or ambient turn ends exactly once.
            let mut ends: HashMap<String, usize> = HashMap::new();
            let mut errors = HashSet::new();
            for l in &t {
                if l["notice"] == true {
                    // An error notice follows its turn's error; it is not a second ending.
                    prop_assert!(errors.contains(&l["turn"].to_string()), "notice without an error: {l}");
                    continue;
                }
                if l["type"] == "error" {
                    errors.insert(l["turn"].to_string());
                }
                if matches!(l["type"].as_str(), Some("send" | "silent" | "withheld" | "error" | "cancelled")) {
                    *ends.entry(l["turn"].to_string()).or_default() += 1;
                }
            }
            for call in of_type(&t, "agent_call") {
                let n = ends.get(&call["turn"].to_string()).copied().unwrap_or(0);
                if call["kind"] == "gate" {
                    prop_assert!(n <= 1, "a gate ends at most once: {call}");
                } else {
                    prop_assert_eq!(n, 1, "turn {} ends exactly once", call["turn"]);
                }
                if call["kind"] == "ambient" {
                    prop_assert!(call["msgs"].as_array().map_or(0, Vec::len) <= cap as usize);
                }
            }

            // Unaddressed replies per message never exceed the floor.
            let addressed: HashSet<(String, String)> = of_type(&t, "decision")
                .iter()
                .filter(|d| matches!(d["reason"].as_str(), Some("dm" | "mention" | "command" | "reply_to_me")))
                .map(|d| (d["msg"].to_string(), d["persona"].to_string()))
                .collect();
            let mut speakers_per_msg: HashMap<String, u32> = HashMap::new();
            for s in of_type(&t, "send") {
                for m in s["msgs"].as_array().into_iter().flatten() {
                    if !addressed.contains(&(m.to_string(), s["persona"].to_string())) {
                        *speakers_per_msg.entry(m.to_string()).or_default() += 1;
                    }
                }
            }
            for (m, n) in speakers_per_msg {
                prop_assert!(n <= speakers, "{n} unaddressed replies to {m}");
            }
        }
    }
}

#[test]
fn an_ambient_agent_reads_the_batches_and_the_main_agent_answers_when_addressed() {
    let cfg = r#"
[[persona]]
id = "guide"
agent = "main"
ambient_agent = "listener"

[agents.main]
kind = "script"
rules = [{ when = "", reply = "main answers" }]

[agents.listener]
kind = "script"
rules = [{ when = "", reply = "NO_REPLY" }]

[rooms.default]
mode = "ambient"
ambient = { flush_messages = 1, cooldown_seconds = 0 }
"#;
    let t = replay(
        cfg,
        &[
            line(0.0, "alice", "nice weather today", r#", "id": "a""#),
            line(10.0, "alice", "@guide where is room 4?", r#", "id": "b""#),
        ],
    );
    let calls = of_type(&t, "agent_call");
    let by_kind: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["kind"].as_str().unwrap_or(""),
                c["agent"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(by_kind, [("ambient", "listener"), ("reply", "main")], "{calls:?}");
    use crate::config::Config;
    use std::path::Path;
    let bad = cfg.replace("ambient_agent = \"listener\"", "ambient_agent = \"nope\"");
    let e = Config::parse(&bad, Path::new("t.toml"), &|_| None)
        .expect_err("unknown agent")
        .to_string();
    assert!(
        e.starts_with("t.toml:5:")
            && e.contains("`persona[0].ambient_agent` = \"nope\" names no [agents.nope] table"),
        "{e}"
    );
}
