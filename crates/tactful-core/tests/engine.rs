//! Engine behaviour driven directly, for what a scripted replay cannot
//! express: redelivered events, late agent results, and bounds.

use tactful_core::engine::ContextLimits;
use tactful_core::{
    AgentResult, Engine, EngineConfig, EngineError, Message, Outcome, Output, PersonaSpec, Reason, Timestamp,
    TurnId,
};

fn engine(personas: &[&str], context: ContextLimits) -> Engine {
    Engine::new(EngineConfig {
        personas: personas.iter().map(|p| PersonaSpec::new(p, "a")).collect(),
        context,
        ..Default::default()
    })
    .expect("valid engine config")
}

fn drain(e: &mut Engine) -> Vec<Output> {
    std::iter::from_fn(|| e.poll_output()).collect()
}

fn turns(outputs: &[Output]) -> Vec<TurnId> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::CallAgent(r) => Some(r.turn),
            _ => None,
        })
        .collect()
}

#[test]
fn a_redelivered_message_is_decided_once() {
    let mut e = engine(&["docs"], ContextLimits::default());
    let m = Message::new("m1", "room", "alice", "@docs hi", Timestamp(0));
    e.handle_message(Timestamp(0), m.clone());
    assert_eq!(turns(&drain(&mut e)).len(), 1);
    e.handle_message(Timestamp(5), m);
    let out = drain(&mut e);
    assert!(
        matches!(
            out.as_slice(),
            [Output::Dropped {
                reason: "duplicate",
                ..
            }]
        ),
        "{out:?}"
    );
}

#[test]
fn work_is_pending_until_every_output_is_polled() {
    // What a message makes may be only outputs (a decision, a notice
    // decided without a call): until they are polled the engine is not
    // idle, so a service that reports `busy` from it never shows a
    // message heard while the room looks idle.
    let mut e = engine(&["docs"], ContextLimits::default());
    e.handle_message(
        Timestamp(0),
        Message::new("m1", "room", "alice", "lunch anyone?", Timestamp(0)),
    );
    assert!(e.pending_work() > 0, "a decision not polled yet is work");
    let out = drain(&mut e);
    assert!(!out.is_empty());
    assert_eq!(e.pending_work(), 0, "only a record: nothing more to do");
}

#[test]
fn a_result_for_an_ended_turn_is_ignored() {
    let mut e = engine(&["docs"], ContextLimits::default());
    e.handle_message(
        Timestamp(0),
        Message::new("m1", "room", "alice", "@docs hi", Timestamp(0)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(Timestamp(1), t, AgentResult::Output("hello".into()));
    assert!(drain(&mut e).iter().any(|o| matches!(o, Output::Send(_))));
    e.handle_agent_result(Timestamp(2), t, AgentResult::Output("hello again".into()));
    assert!(drain(&mut e).is_empty(), "a second result cannot post twice");
    e.handle_agent_result(Timestamp(3), TurnId(999), AgentResult::Failed("x".into()));
    assert!(drain(&mut e).is_empty());
    assert_eq!(e.turns_in_flight(), 0);
}

#[test]
fn replies_to_old_own_messages_still_address_beyond_the_history_window() {
    let limits = ContextLimits {
        history: 3,
        max_turns: 2,
        ..Default::default()
    };
    let mut e = engine(&["docs"], limits);
    e.handle_message(
        Timestamp(0),
        Message::new("q", "room", "alice", "@docs hi", Timestamp(0)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(Timestamp(0), t, AgentResult::Output("hello".into()));
    drain(&mut e);
    for i in 0..10 {
        e.handle_message(
            Timestamp(i),
            Message::new(format!("c{i}").as_str(), "room", "bob", "chatter", Timestamp(i)),
        );
    }
    drain(&mut e);
    let mut reply = Message::new("r", "room", "alice", "thanks, and then?", Timestamp(20));
    reply.reply_to = Some("docs:1".into());
    e.handle_message(Timestamp(20), reply);
    let out = drain(&mut e);
    let d = out
        .iter()
        .find_map(|o| match o {
            Output::Decision(d) => Some(d),
            _ => None,
        })
        .expect("a decision");
    assert_eq!((d.outcome, d.reason), (Outcome::Reply, Reason::ReplyToMe));
    // The turn sees only the bounded window.
    let req = out
        .iter()
        .find_map(|o| match o {
            Output::CallAgent(r) => Some(r),
            _ => None,
        })
        .expect("a call");
    assert_eq!(req.history.len(), 2);
}

#[test]
fn invalid_engine_configs_are_errors() {
    assert_eq!(
        Engine::new(EngineConfig::default()).err(),
        Some(EngineError::NoPersonas)
    );
    let mut a = PersonaSpec::new("docs", "x");
    a.aliases.push("helper".into());
    let b = PersonaSpec::new("Helper", "x");
    let err = Engine::new(EngineConfig {
        personas: vec![a, b],
        ..Default::default()
    })
    .err();
    assert!(matches!(err, Some(EngineError::DuplicateHandle(..))), "{err:?}");
    let many = (0..65).map(|i| PersonaSpec::new(&format!("p{i}"), "x")).collect();
    assert_eq!(
        Engine::new(EngineConfig {
            personas: many,
            ..Default::default()
        })
        .err(),
        Some(EngineError::TooManyPersonas(65))
    );
}

#[test]
fn aliases_identify_a_persona_and_its_own_messages() {
    let mut docs = PersonaSpec::new("docs", "a");
    docs.aliases.push("@docs:example.org".into());
    let mut e = Engine::new(EngineConfig {
        personas: vec![docs],
        ..Default::default()
    })
    .expect("valid");
    let mut m = Message::new("m1", "room", "alice", "hi there", Timestamp(0));
    m.mentions = tactful_core::Mentions::Explicit(vec!["@docs:example.org".into()]);
    e.handle_message(Timestamp(0), m);
    let out = drain(&mut e);
    assert!(matches!(&out[0], Output::Decision(d) if d.reason == Reason::Mention));
    // A message from the persona's own account is its own.
    e.handle_message(
        Timestamp(1),
        Message::new("m2", "room", "@docs:example.org", "echo", Timestamp(1)),
    );
    assert!(matches!(&drain(&mut e)[0], Output::Decision(d) if d.reason == Reason::OwnMessage));
}

#[test]
fn a_platform_id_for_a_sent_reply_is_an_alias() {
    let mut e = engine(&["docs"], ContextLimits::default());
    e.handle_message(
        Timestamp(0),
        Message::new("q", "room", "alice", "@docs hi", Timestamp(0)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(Timestamp(1), t, AgentResult::Output("hello".into()));
    drain(&mut e);
    e.handle_sent(&"room".into(), &"docs:1".into(), "$evt42".into());
    // The platform echoes our message with its own id: already heard.
    let mut echo = Message::new("$evt42", "room", "docs", "hello", Timestamp(2));
    echo.sender.is_bot = true;
    e.handle_message(Timestamp(2), echo);
    assert!(matches!(
        drain(&mut e).as_slice(),
        [Output::Dropped {
            reason: "duplicate",
            ..
        }]
    ));
    // A human replies to the platform id: it addresses docs.
    let mut reply = Message::new("r", "room", "alice", "and?", Timestamp(3));
    reply.reply_to = Some("$evt42".into());
    e.handle_message(Timestamp(3), reply);
    let out = drain(&mut e);
    assert!(
        matches!(&out[0], Output::Decision(d) if d.reason == Reason::ReplyToMe),
        "{out:?}"
    );
    // The agent is shown the reply as replay shows it: to `docs:1`, the
    // answer in its history, not to an id it has never seen (a `kb`
    // agent's "say more" looks its answer up so).
    let request = out
        .iter()
        .find_map(|o| match o {
            Output::CallAgent(r) => Some(r),
            _ => None,
        })
        .expect("a turn");
    assert_eq!(request.triggers[0].reply_to, Some("docs:1".into()));
    assert!(request.history.iter().any(|h| h.id.as_str() == "docs:1"));
    let t = request.turn;
    e.handle_agent_result(Timestamp(4), t, AgentResult::Output("more".into()));
    drain(&mut e);
    // Later turns show the history's replies the same way; the room keeps
    // what it was told.
    e.handle_message(
        Timestamp(5),
        Message::new("q2", "room", "alice", "@docs and then?", Timestamp(5)),
    );
    let out = drain(&mut e);
    let request = out
        .iter()
        .find_map(|o| match o {
            Output::CallAgent(r) => Some(r),
            _ => None,
        })
        .expect("a turn");
    let follow_up = request
        .history
        .iter()
        .find(|h| h.id.as_str() == "r")
        .expect("in history");
    assert_eq!(follow_up.reply_to, Some("docs:1".into()));
}

/// One output answering several messages of the room separately: one
/// `Send` each, in order, each a reply to its message; an unknown id is
/// not sent; past the rate limit the rest is held back and the trace says
/// how many.
#[test]
fn one_turn_may_answer_several_messages_each_with_its_own_reply() {
    use tactful_core::policy::{PolicyPatch, RateLimit};
    let mut config = EngineConfig {
        personas: vec![PersonaSpec::new("docs", "a")],
        ..Default::default()
    };
    config.policies.default.all = PolicyPatch {
        rate_limit: Some(Some(RateLimit {
            replies: 2,
            per: std::time::Duration::from_secs(60),
        })),
        ..Default::default()
    };
    let mut e = Engine::new(config).expect("engine");
    for (id, text) in [
        ("m1", "how do I reset?"),
        ("m2", "and the light?"),
        ("m3", "@docs both please"),
    ] {
        e.handle_message(
            Timestamp(0),
            Message::new(id, "room", "alice", text, Timestamp(0)),
        );
    }
    let t = turns(&drain(&mut e))[0];
    let out = "[[reply_to:m3]]\nBoth below.\n\n[[reply_to:m1]]\nHold it.\n\n[[reply_to:nope]]\nLost.\n\n[[reply_to:m2]]\nIt blinks.";
    e.handle_agent_result(Timestamp(1), t, AgentResult::Output(out.into()));
    let sends: Vec<_> = drain(&mut e)
        .into_iter()
        .filter_map(|o| match o {
            Output::Send(s) => Some(s),
            _ => None,
        })
        .collect();
    let seen: Vec<(Option<&str>, &str, u32)> = sends
        .iter()
        .map(|s| {
            (
                s.reply_to.as_ref().map(|m| m.as_str()),
                s.text.as_str(),
                s.more_withheld,
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(Some("m3"), "Both below.", 0), (Some("m1"), "Hold it.", 1)],
        "two replies fit the limit of 2; m2's is held back and counted"
    );
    assert!(sends.iter().all(|s| s.turn == t));
    assert_ne!(sends[0].id, sends[1].id, "each reply has its own id");
    assert_eq!(e.turns_in_flight(), 0, "the turn ended once");
}

/// The decisions of one message, as (persona, reason).
fn reasons(outputs: &[Output]) -> Vec<(String, Reason)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Decision(d) => Some((d.persona.to_string(), d.reason)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_bare_command_is_for_every_persona_in_command_mode_only() {
    use tactful_core::policy::{Mode, PolicyPatch, PolicyTable};
    let mut policies = PolicyTable::default();
    policies.default.all.mode = Some(Mode::Command);
    policies.default.personas.insert(
        "chef".into(),
        PolicyPatch {
            mode: Some(Mode::Mention),
            ..Default::default()
        },
    );
    let mut e = Engine::new(EngineConfig {
        personas: ["docs", "ops", "chef"]
            .iter()
            .map(|p| PersonaSpec::new(p, "a"))
            .collect(),
        policies,
        ..Default::default()
    })
    .expect("valid engine config");
    e.handle_message(
        Timestamp(0),
        Message::new("m1", "room", "alice", "/reset", Timestamp(0)),
    );
    assert_eq!(
        reasons(&drain(&mut e)),
        [
            ("docs".to_owned(), Reason::Command),
            ("ops".to_owned(), Reason::Command),
            ("chef".to_owned(), Reason::NotAddressed),
        ]
    );
    // Aimed at one persona (or at a bot elsewhere), it is for that one only.
    e.handle_message(
        Timestamp(1),
        Message::new("m2", "room", "alice", "/reset@ops", Timestamp(1)),
    );
    let r = reasons(&drain(&mut e));
    assert_eq!(r[0], ("docs".to_owned(), Reason::NotCommand));
    assert_eq!(r[1], ("ops".to_owned(), Reason::Command));
    e.handle_message(
        Timestamp(2),
        Message::new("m3", "room", "alice", "/reset@other_bot", Timestamp(2)),
    );
    assert!(reasons(&drain(&mut e)).iter().all(|(_, r)| *r != Reason::Command));
    // A path is not a command.
    e.handle_message(
        Timestamp(3),
        Message::new("m4", "room", "alice", "/usr/bin is full", Timestamp(3)),
    );
    assert!(reasons(&drain(&mut e)).iter().all(|(_, r)| *r != Reason::Command));
}

/// Found by the restore property test: a message that scrolled out of the
/// history while it waited in an ambient batch lost its floor count, and
/// the ambient persona answered what another had already answered.
#[test]
fn a_message_that_leaves_the_history_leaves_the_ambient_batch_too() {
    use std::time::Duration;
    use tactful_core::{Mode, PolicyPatch};
    let mut policies = tactful_core::PolicyTable::default();
    let all = PolicyPatch {
        mode: Some(Mode::All),
        ..PolicyPatch::default()
    };
    let mut ambient = PolicyPatch {
        mode: Some(Mode::Ambient),
        ..PolicyPatch::default()
    };
    ambient.ambient.flush_after = Some(Duration::from_secs(5));
    ambient.ambient.flush_messages = Some(3);
    ambient.floor_max_speakers = Some(1);
    policies.default.personas.insert("bo".into(), all);
    policies.default.personas.insert("cy".into(), ambient);
    let mut e = Engine::new(EngineConfig {
        personas: ["bo", "cy"].iter().map(|p| PersonaSpec::new(p, "a")).collect(),
        policies,
        context: ContextLimits {
            history: 3,
            ..ContextLimits::default()
        },
        ..Default::default()
    })
    .expect("valid engine config");
    // bo answers the question; cy buffers it.
    e.handle_message(
        Timestamp(0),
        Message::new("q", "room", "alice", "where are the keys?", Timestamp(0)),
    );
    let bo = turns(&drain(&mut e));
    assert_eq!(bo.len(), 1);
    e.handle_agent_result(Timestamp(10), bo[0], AgentResult::Output("In the drawer.".into()));
    drain(&mut e);
    // A bot's chatter pushes the question out of the three-message window.
    for i in 0..3 {
        let mut m = Message::new(format!("b{i}"), "room", "robot", "beep", Timestamp(20 + i));
        m.sender.is_bot = true;
        e.handle_message(Timestamp(20 + i), m);
    }
    drain(&mut e);
    // cy's flush timer fires: nothing is left to answer.
    let mut calls = Vec::new();
    while let Some(t) = e.poll_timeout() {
        e.handle_timeout(t);
        calls.extend(turns(&drain(&mut e)));
    }
    assert!(calls.is_empty(), "cy must not answer what bo answered: {calls:?}");
}

/// Reasoning a server sent beside the answer (`AgentResult::Reasoned`) and
/// a leading `<think>` block are added up on the turn's end; the block is
/// taken off before silence is read, so what follows it decides.
#[test]
fn reasoning_is_counted_and_taken_off_before_silence_is_read() {
    let mut e = engine(&["docs"], ContextLimits::default());
    e.handle_message(
        Timestamp(0),
        Message::new("m1", "room", "alice", "@docs hi", Timestamp(0)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(
        Timestamp(1),
        t,
        AgentResult::Reasoned {
            text: "<think>\nnothing\n</think>\nNO_REPLY".to_owned(),
            reasoning_chars: 100,
        },
    );
    let out = drain(&mut e);
    assert!(
        // Silence on a mention leaves a reaction (`addressed_silence`).
        matches!(out.as_slice(), [Output::Silent(end, _), Output::React(_)] if end.reasoning_chars == 107),
        "{out:?}"
    );

    // After a block, the text is the answer; the block is counted.
    e.handle_message(
        Timestamp(2),
        Message::new("m2", "room", "alice", "@docs and now?", Timestamp(2)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(
        Timestamp(3),
        t,
        AgentResult::Output("<think>ok</think>Sure.".into()),
    );
    let out = drain(&mut e);
    let sent: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send(s) => Some((s.text.as_str(), s.reasoning_chars)),
            _ => None,
        })
        .collect();
    assert_eq!(sent, [("Sure.", 2)]);
}

/// Before-send hooks: only replies in scope wait for them; a reply the
/// hooks cancel (here: no outcome came back for it, which must fail
/// closed) is withheld and gives its rate-limit slot back; a result for a
/// turn not waiting for hooks changes nothing.
#[test]
fn hooked_replies_wait_for_their_hooks_and_a_cancel_frees_the_slot() {
    use tactful_core::hooks::{HookAction, HookOutcome, HookScope, HookStep};
    use tactful_core::policy::{PolicyPatch, RateLimit};
    let mut config = EngineConfig {
        personas: vec![PersonaSpec::new("docs", "a")],
        hooks: vec![HookScope {
            name: "guard".into(),
            personas: Vec::new(),
            rooms: vec!["x".into()],
        }],
        ..Default::default()
    };
    config.policies.default.all = PolicyPatch {
        rate_limit: Some(Some(RateLimit {
            replies: 1,
            per: std::time::Duration::from_secs(600),
        })),
        ..PolicyPatch::default()
    };
    let mut e = Engine::new(config).expect("valid");
    let ask = |e: &mut Engine, id: &str, room: &str, at: u64| {
        e.handle_message(
            Timestamp(at),
            Message::new(id, room, "alice", "@docs hi", Timestamp(at)),
        );
        let out = drain(e);
        out.iter()
            .find_map(|o| match o {
                Output::CallAgent(r) => Some((r.turn, r.hooked)),
                _ => None,
            })
            .unwrap_or_else(|| panic!("a turn: {out:?}"))
    };
    // Out of scope: sent at once.
    let (t, hooked) = ask(&mut e, "m1", "y", 0);
    assert!(!hooked);
    e.handle_agent_result(Timestamp(1), t, AgentResult::Output("Hi.".into()));
    assert!(drain(&mut e).iter().any(|o| matches!(o, Output::Send(_))));

    // In scope: the reply waits for the hooks.
    let (t, hooked) = ask(&mut e, "m2", "x", 2);
    assert!(hooked, "the delivery path must hold its streamed text");
    e.handle_agent_result(Timestamp(3), t, AgentResult::Output("Hi.".into()));
    let out = drain(&mut e);
    assert!(
        matches!(out.as_slice(), [Output::RunHooks(r)] if r.hooks.len() == 1 && r.replies[0].text == "Hi."),
        "{out:?}"
    );
    e.handle_hook_result(Timestamp(4), t, Vec::new());
    let out = drain(&mut e);
    assert!(
        matches!(out.as_slice(), [Output::Withheld(_, Reason::Hook)]),
        "{out:?}"
    );
    e.handle_hook_result(Timestamp(4), t, Vec::new());
    assert!(drain(&mut e).is_empty(), "a second result is ignored");

    // The slot came back: the next message is answered, and this time the
    // hook rewrites it.
    let (t, _) = ask(&mut e, "m3", "x", 5);
    e.handle_agent_result(Timestamp(6), t, AgentResult::Output("Hi.".into()));
    drain(&mut e);
    let step = HookStep {
        hook: "guard".into(),
        action: HookAction::Replace,
        reason: None,
    };
    e.handle_hook_result(
        Timestamp(7),
        t,
        vec![HookOutcome {
            steps: vec![step],
            text: Some("Hello.".into()),
        }],
    );
    let out = drain(&mut e);
    let sent: Vec<&str> = out
        .iter()
        .filter_map(|o| match o {
            Output::Send(s) => Some(s.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(sent, ["Hello."]);
    assert!(
        matches!(&out[0], Output::Hook(n) if n.step.action == HookAction::Replace),
        "{out:?}"
    );
}

/// New policies apply to a room the engine already knows from its next
/// message on (a config reload).
#[test]
fn new_policies_apply_to_known_rooms_at_the_next_message() {
    use tactful_core::policy::PolicyPatch;
    let mut e = engine(&["docs"], ContextLimits::default());
    e.handle_message(
        Timestamp(0),
        Message::new("m1", "lobby", "alice", "hello all", Timestamp(0)),
    );
    assert!(turns(&drain(&mut e)).is_empty(), "mention mode: no turn");
    assert!(e.knows_room(&"lobby".into()) && !e.knows_room(&"elsewhere".into()));
    let mut table = e.policies().clone();
    table.rooms.insert(
        "lobby".into(),
        tactful_core::policy::RoomLayer {
            all: PolicyPatch {
                mode: Some(tactful_core::Mode::All),
                ..PolicyPatch::default()
            },
            ..Default::default()
        },
    );
    e.set_policies(table);
    e.handle_message(
        Timestamp(1),
        Message::new("m2", "lobby", "alice", "hello again", Timestamp(1)),
    );
    assert_eq!(turns(&drain(&mut e)).len(), 1, "all mode now");
}

/// A message skipped for the rate limit says which limit, and when it
/// frees: when the oldest reply leaves the window.
#[test]
fn a_rate_limited_skip_says_when_the_limit_frees() {
    use tactful_core::policy::{PolicyPatch, RateLimit};
    let mut e = engine(&["docs"], ContextLimits::default());
    let mut table = e.policies().clone();
    table.default.all = PolicyPatch {
        rate_limit: Some(Some(RateLimit {
            replies: 1,
            per: std::time::Duration::from_secs(120),
        })),
        ..PolicyPatch::default()
    };
    e.set_policies(table);
    e.handle_message(
        Timestamp(0),
        Message::new("m1", "room", "alice", "@docs one", Timestamp(0)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(
        Timestamp::from_millis(10_000),
        t,
        AgentResult::Output("one".into()),
    );
    drain(&mut e);
    let at = Timestamp::from_millis(50_000);
    e.handle_message(at, Message::new("m2", "room", "alice", "@docs two", at));
    let out = drain(&mut e);
    let note = out
        .iter()
        .find_map(|o| match o {
            Output::Limited(n) => Some(n.clone()),
            _ => None,
        })
        .expect("a limit note");
    assert!(
        matches!(&out[0], Output::Decision(d) if d.reason == Reason::RateLimited),
        "the decision comes first: {out:?}"
    );
    assert_eq!((note.msg.as_str(), note.replies), ("m2", 1));
    assert_eq!(
        note.frees_at,
        Some(Timestamp::from_millis(130_000)),
        "sent at 10 s + 120 s"
    );
}

/// `[[reply_to_current]]` answers the message the turn was for, without
/// the agent copying its id; an ambient batch's newest.
#[test]
fn reply_to_current_answers_the_turns_own_message() {
    let mut e = engine(&["docs"], ContextLimits::default());
    e.handle_message(
        Timestamp(0),
        Message::new("m7", "room", "alice", "@docs how do I reset?", Timestamp(0)),
    );
    let t = turns(&drain(&mut e))[0];
    e.handle_agent_result(
        Timestamp(1),
        t,
        AgentResult::Output("[[reply_to_current]]\nHold it for 5 s.".into()),
    );
    let sent: Vec<_> = drain(&mut e)
        .into_iter()
        .filter_map(|o| match o {
            Output::Send(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].text, "Hold it for 5 s.");
    assert_eq!(sent[0].reply_to.as_ref().map(|m| m.as_str()), Some("m7"));
    assert!(sent[0].unknown_directives.is_empty());
}

/// The pre-gate: unaddressed small talk in an `all` room costs no call;
/// the same words addressed to a persona, or with a question, are
/// answered as before.
#[test]
fn small_talk_is_recorded_without_a_call_and_addressed_messages_are_untouched() {
    use tactful_core::policy::PolicyPatch;
    let mut e = engine(&["docs"], ContextLimits::default());
    let mut table = e.policies().clone();
    table.default.all = PolicyPatch {
        mode: Some(tactful_core::Mode::All),
        rate_limit: Some(None),
        ..PolicyPatch::default()
    };
    e.set_policies(table.clone());
    let mut said = |id: &str, text: &str| {
        e.handle_message(
            Timestamp(0),
            Message::new(id, "room", "alice", text, Timestamp(0)),
        );
        let out = drain(&mut e);
        let d = out
            .iter()
            .find_map(|o| match o {
                Output::Decision(d) if d.msg.as_str() == id => Some((d.outcome, d.reason)),
                _ => None,
            })
            .expect("a decision");
        (d, turns(&out).len())
    };
    assert_eq!(said("a", "thanks!"), ((Outcome::Record, Reason::PreGate), 0));
    assert_eq!(said("b", "👍"), ((Outcome::Record, Reason::PreGate), 0));
    assert_eq!(said("c", "@docs thanks!"), ((Outcome::Reply, Reason::Mention), 1));
    assert_eq!(
        said("d", "thanks, but how do I reset it?"),
        ((Outcome::Reply, Reason::All), 1)
    );
    // A room may switch it off.
    table.default.all.pre_gate_enabled = Some(false);
    e.set_policies(table);
    e.handle_message(
        Timestamp(1),
        Message::new("e", "room", "alice", "thanks!", Timestamp(1)),
    );
    assert_eq!(turns(&drain(&mut e)).len(), 1);
}

/// The history a turn sees moves in blocks of half its size, so
/// consecutive prompts start the same (a provider's prompt cache serves
/// that part): with 30 turns of history, the oldest message shown changes
/// once every 15 messages, never by one each time.
#[test]
fn the_history_window_moves_in_blocks() {
    let limits = ContextLimits {
        max_turns: 30,
        ..Default::default()
    };
    let mut e = engine(&["docs"], limits);
    let mut oldest = Vec::new();
    for i in 0..100u64 {
        e.handle_message(
            Timestamp(i),
            Message::new(
                format!("m{i}").as_str(),
                "room",
                "alice",
                "@docs hi",
                Timestamp(i),
            ),
        );
        for o in drain(&mut e) {
            if let Output::CallAgent(r) = o {
                assert!(
                    r.history.len() <= 30 && (i < 30 || r.history.len() >= 15),
                    "{}",
                    r.history.len()
                );
                oldest.push(r.history.first().map(|h| h.id.to_string()));
                e.handle_agent_result(Timestamp(i), r.turn, AgentResult::Output("NO_REPLY".into()));
            }
        }
        drain(&mut e);
    }
    let changes = oldest.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(
        (5..=7).contains(&changes),
        "the start moved {changes} times in 100 turns: {oldest:?}"
    );
}

/// In `all` mode, `@bob` read from the text makes a message someone
/// else's, and `@everyone` (or `@here`, `@all`, `@channel`, `@room`)
/// leaves it the room's: a room-wide handle names nobody in particular.
#[test]
fn a_room_wide_handle_names_nobody_and_a_person_someone_else() {
    use tactful_core::{Mode, PolicyPatch};
    let mut policies = tactful_core::PolicyTable::default();
    policies.default.all = PolicyPatch {
        mode: Some(Mode::All),
        rate_limit: Some(None),
        ..PolicyPatch::default()
    };
    let mut e = Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("docs", "a")],
        policies,
        ..Default::default()
    })
    .expect("engine");
    let reason = |e: &mut Engine, id: &str, text: &str| {
        e.handle_message(
            Timestamp(0),
            Message::new(id, "room", "alice", text, Timestamp(0)),
        );
        drain(e)
            .into_iter()
            .find_map(|o| match o {
                Output::Decision(d) => Some(d.reason),
                _ => None,
            })
            .expect("a decision")
    };
    assert_eq!(
        reason(&mut e, "m1", "@bob are you coming?"),
        Reason::AddressedToOther
    );
    for (i, handle) in ["everyone", "Here", "all", "channel", "room"].iter().enumerate() {
        assert_eq!(
            reason(&mut e, &format!("w{i}"), &format!("@{handle} lunch?")),
            Reason::All,
            "@{handle}"
        );
    }
}
