//! Passing the floor (`floor.strategy = "pass"`): one model call per
//! unaddressed question when several personas could answer it; the floor
//! passes on when the one asked declines, fails or takes too long.

use crate::common;

use common::{calls, drain, ms};
use std::time::Duration;

use tactful_core::policy::{FloorStrategy, PolicyPatch};
use tactful_core::{
    AgentResult, Engine, EngineConfig, Message, Mode, Outcome, Output, PersonaSpec, PolicyTable, Reason,
    TurnRequest,
};

fn engine(ids: &[&str], patch: PolicyPatch) -> Engine {
    let mut policies = PolicyTable::default();
    policies.default.all = PolicyPatch {
        mode: Some(Mode::All),
        rate_limit: Some(None),
        ..patch
    };
    Engine::new(EngineConfig {
        personas: ids.iter().map(|p| PersonaSpec::new(p, "a")).collect(),
        policies,
        ..Default::default()
    })
    .expect("valid engine config")
}

fn ask(e: &mut Engine, at: u64, id: &str, text: &str) -> Vec<Output> {
    e.handle_message(ms(at), Message::new(id, "lobby", "alice", text, ms(at)));
    drain(e)
}

fn answer(e: &mut Engine, at: u64, r: &TurnRequest, text: &str) -> Vec<Output> {
    e.handle_agent_result(ms(at), r.turn, AgentResult::Output(text.into()));
    drain(e)
}

fn decisions(out: &[Output], msg: &str) -> Vec<(String, Outcome, Reason)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Decision(d) if d.msg.as_str() == msg => {
                Some((d.persona.to_string(), d.outcome, d.reason))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn three_personas_one_question_one_call() {
    let mut e = engine(&["docs", "chef", "bard"], PolicyPatch::default());
    let out = ask(&mut e, 0, "q1", "what should I do this afternoon");
    let asked = calls(&out);
    assert_eq!(asked.len(), 1, "{out:?}");
    assert_eq!(
        asked[0].persona.as_str(),
        "docs",
        "config order when nobody spoke yet"
    );
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Floor(n) if n.persona.as_str() == "docs"
        && n.waiting.iter().map(|p| p.as_str()).collect::<Vec<_>>() == ["chef", "bard"]))
    );
    assert_eq!(
        decisions(&out, "q1"),
        [("docs".into(), Outcome::Reply, Reason::All)]
    );
    let out = answer(&mut e, 1_000, &asked[0], "Read a book.");
    assert!(calls(&out).is_empty(), "nobody else is called: {out:?}");
    assert_eq!(
        decisions(&out, "q1"),
        [
            ("chef".into(), Outcome::Skip, Reason::FloorTaken),
            ("bard".into(), Outcome::Skip, Reason::FloorTaken)
        ]
    );
    assert_eq!(e.turns_in_flight(), 0);
}

#[test]
fn a_decline_or_a_failure_passes_the_floor_on() {
    let mut e = engine(&["docs", "chef", "bard"], PolicyPatch::default());
    let first = calls(&ask(&mut e, 0, "q1", "anyone?"))[0].clone();
    let out = answer(&mut e, 1_000, &first, "NO_REPLY");
    let second = calls(&out);
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].persona.as_str(), "chef");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Floor(n) if n.why.as_str() == "declined"))
    );
    e.handle_agent_result(ms(2_000), second[0].turn, AgentResult::Failed("boom".into()));
    let out = drain(&mut e);
    let third = calls(&out);
    assert_eq!(third[0].persona.as_str(), "bard", "{out:?}");
    let out = answer(&mut e, 3_000, &third[0], "NO_REPLY");
    assert!(
        calls(&out).is_empty(),
        "nobody is left: the question stays unanswered, no loop"
    );
    assert_eq!(e.turns_in_flight(), 0);
}

#[test]
fn a_slow_holder_is_passed_by_after_the_timeout_and_only_one_answer_goes_out() {
    let mut e = engine(
        &["docs", "chef"],
        PolicyPatch {
            floor_pass_timeout: Some(Duration::from_secs(10)),
            ..PolicyPatch::default()
        },
    );
    let first = calls(&ask(&mut e, 0, "q1", "anyone?"))[0].clone();
    assert_eq!(e.poll_timeout(), Some(ms(10_000)));
    e.handle_timeout(ms(10_000));
    let out = drain(&mut e);
    let second = calls(&out);
    assert_eq!(second[0].persona.as_str(), "chef", "{out:?}");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Floor(n) if n.why.as_str() == "timeout"))
    );
    // The slow one answers after all: it takes the floor; chef's later
    // answer is withheld.
    let out = answer(&mut e, 11_000, &first, "Late but here.");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Send(s) if s.text == "Late but here."))
    );
    let out = answer(&mut e, 12_000, &second[0], "Me too.");
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Withheld(_, Reason::FloorTaken))),
        "{out:?}"
    );
    assert!(!out.iter().any(|o| matches!(o, Output::Send(_))));
}

#[test]
fn whoever_spoke_least_recently_is_asked_first() {
    let mut e = engine(&["docs", "chef"], PolicyPatch::default());
    let first = calls(&ask(&mut e, 0, "q1", "anyone?"))[0].clone();
    assert_eq!(first.persona.as_str(), "docs");
    answer(&mut e, 1_000, &first, "Docs here.");
    let next = calls(&ask(&mut e, 5_000, "q2", "and now?"));
    assert_eq!(next[0].persona.as_str(), "chef", "docs spoke last");
}

#[test]
fn race_calls_everyone_as_before() {
    let mut e = engine(
        &["docs", "chef", "bard"],
        PolicyPatch {
            floor_strategy: Some(FloorStrategy::Race),
            ..PolicyPatch::default()
        },
    );
    let out = ask(&mut e, 0, "q1", "anyone?");
    assert_eq!(calls(&out).len(), 3);
    assert!(!out.iter().any(|o| matches!(o, Output::Floor(_))));
}

#[test]
fn addressed_personas_never_wait_for_the_floor() {
    let mut e = engine(&["docs", "chef", "bard"], PolicyPatch::default());
    let out = ask(&mut e, 0, "q1", "@docs @chef your views?");
    assert_eq!(calls(&out).len(), 2);
    assert!(!out.iter().any(|o| matches!(o, Output::Floor(_))));
}

#[test]
fn a_persona_removed_while_waiting_is_passed_over() {
    let mut e = engine(&["docs", "chef", "bard"], PolicyPatch::default());
    let first = calls(&ask(&mut e, 0, "q1", "anyone?"))[0].clone();
    e.set_personas(
        ms(500),
        vec![PersonaSpec::new("docs", "a"), PersonaSpec::new("bard", "a")],
        Vec::new(),
    )
    .expect("accepted");
    drain(&mut e);
    let out = answer(&mut e, 1_000, &first, "NO_REPLY");
    let next = calls(&out);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].persona.as_str(), "bard", "chef is gone: {out:?}");
}

#[test]
fn the_pass_state_is_bounded_by_the_history_window() {
    use tactful_core::ContextLimits;
    let mut policies = PolicyTable::default();
    policies.default.all = PolicyPatch {
        mode: Some(Mode::All),
        rate_limit: Some(None),
        ..PolicyPatch::default()
    };
    let mut e = Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("docs", "a"), PersonaSpec::new("chef", "a")],
        policies,
        context: ContextLimits {
            history: 4,
            max_turns: 4,
            ..ContextLimits::default()
        },
        ..Default::default()
    })
    .expect("valid");
    // Agents never answer: every question leaves a pass behind until it
    // leaves the window, and its timer with it.
    for i in 0..50 {
        ask(&mut e, i * 1_000, &format!("q{i}"), "anyone?");
    }
    assert!(e.poll_timeout().is_some());
    let mut timers = 0;
    while let Some(t) = e.poll_timeout() {
        e.handle_timeout(t);
        drain(&mut e);
        timers += 1;
        assert!(timers < 100, "timers are bounded");
    }
}
