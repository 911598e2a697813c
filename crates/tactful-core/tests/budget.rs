//! Spend budgets (`budget = { tokens, per_seconds }`): held before the call
//! from an estimate, settled with the usage the backend reports, so a burst
//! of turns cannot spend the same tokens twice; over it, unaddressed
//! messages and batches are skipped and an addressed one gets one notice;
//! kept across a restart; a room may have its own or none.

use crate::common;

use common::{ask, calls, ms, notices};
use std::time::Duration;

use tactful_core::budget::{DEFAULT_BUDGET_NOTICE, TokenBudget};
use tactful_core::policy::{BudgetScope, FloorStrategy, PolicyPatch};
use tactful_core::{
    AgentResult, AmbientEvent, Engine, EngineConfig, Mode, Outcome, Output, PersonaSpec, PolicyTable, Reason,
    TurnRequest,
};

const HOUR: Duration = Duration::from_secs(3600);

fn budget(tokens: u64) -> TokenBudget {
    TokenBudget {
        tokens,
        per: HOUR,
        notice: DEFAULT_BUDGET_NOTICE.into(),
    }
}

/// `docs` (and any other ids) in `all` mode, no rate limit; `docs` may
/// spend `tokens` an hour.
fn engine_with(ids: &[&str], tokens: u64, patch: PolicyPatch) -> Engine {
    let mut policies = PolicyTable::default();
    policies.default.all = PolicyPatch {
        mode: patch.mode.or(Some(Mode::All)),
        rate_limit: Some(None),
        floor_strategy: Some(FloorStrategy::Race),
        floor_max_speakers: Some(4),
        ..patch
    };
    let personas = ids
        .iter()
        .map(|id| PersonaSpec {
            budget: (*id == "docs").then(|| budget(tokens)),
            ..PersonaSpec::new(id, "a")
        })
        .collect();
    Engine::new(EngineConfig {
        personas,
        policies,
        ..Default::default()
    })
    .expect("valid engine config")
}

fn engine(tokens: u64) -> Engine {
    engine_with(&["docs"], tokens, PolicyPatch::default())
}

fn reason(out: &[Output], msg: &str) -> Option<(Outcome, Reason)> {
    out.iter().find_map(|o| match o {
        Output::Decision(d) if d.msg.as_str() == msg && d.persona.as_str() == "docs" => {
            Some((d.outcome, d.reason))
        }
        _ => None,
    })
}

fn answer(e: &mut Engine, at: u64, r: &TurnRequest, text: &str, usage: Option<u64>) -> Vec<Output> {
    if let Some(tokens) = usage {
        e.handle_usage(r.turn, tokens);
    }
    e.handle_agent_result(ms(at), r.turn, AgentResult::Output(text.into()));
    std::iter::from_fn(|| e.poll_output()).collect()
}

fn left(e: &mut Engine, at: u64) -> u64 {
    e.budgets_left(ms(at))[0].remaining
}

#[test]
fn a_burst_sees_each_others_holds_and_the_rest_is_skipped_without_a_call() {
    // One short call is estimated at about 1,200 tokens: 2,000 pay for one.
    let mut e = engine(2_000);
    let first = ask(&mut e, 0, "q1", "the build is red");
    assert_eq!(reason(&first, "q1"), Some((Outcome::Reply, Reason::All)));
    let held = 2_000 - left(&mut e, 0);
    assert!(
        (1_000..2_000).contains(&held),
        "the call holds its estimate: {held}"
    );
    // While it runs, the next message cannot be paid for.
    let second = ask(&mut e, 100, "q2", "still red");
    assert_eq!(
        reason(&second, "q2"),
        Some((Outcome::Skip, Reason::BudgetExhausted))
    );
    assert!(calls(&second).is_empty(), "no call over budget");
    assert!(notices(&second).is_empty(), "nobody asked docs: no notice");
}

#[test]
fn the_reported_usage_settles_the_hold() {
    let mut e = engine(2_000);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    answer(&mut e, 1_000, &c[0], "Looking.", Some(300));
    assert_eq!(left(&mut e, 1_000), 1_700, "what it cost, not what was held");
    let c = calls(&ask(&mut e, 2_000, "q2", "still red"));
    assert_eq!(c.len(), 1, "300 spent: another call fits");
    answer(&mut e, 3_000, &c[0], "Still looking.", Some(1_500));
    assert_eq!(left(&mut e, 3_000), 200);
    let out = ask(&mut e, 4_000, "q3", "red again");
    assert_eq!(reason(&out, "q3"), Some((Outcome::Skip, Reason::BudgetExhausted)));
    // An hour (and a bucket) after the spend, it is free again.
    let later = 3_000 + 3_600_000 + 75_000;
    assert_eq!(left(&mut e, later), 2_000);
    assert_eq!(calls(&ask(&mut e, later, "q4", "red once more")).len(), 1);
}

#[test]
fn without_usage_an_answer_costs_its_estimate_and_a_failure_nothing() {
    let mut e = engine(10_000);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    let held = 10_000 - left(&mut e, 0);
    e.handle_agent_result(
        ms(500),
        c[0].turn,
        AgentResult::Failed("connection refused".into()),
    );
    while e.poll_output().is_some() {}
    assert_eq!(left(&mut e, 500), 10_000, "a call that failed is not counted");
    let c = calls(&ask(&mut e, 1_000, "q2", "still red"));
    answer(&mut e, 2_000, &c[0], "NO_REPLY", None);
    let spent = 10_000 - left(&mut e, 2_000);
    assert!(
        spent > 0 && spent.abs_diff(held) < 50,
        "the estimate: {spent} vs {held}"
    );
}

#[test]
fn an_addressed_message_gets_one_notice_as_a_reply() {
    let mut e = engine(2_000);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    answer(&mut e, 1_000, &c[0], "Looking.", Some(1_900));
    let out = ask(&mut e, 2_000, "q2", "@docs are you there?");
    assert_eq!(reason(&out, "q2"), Some((Outcome::Skip, Reason::BudgetExhausted)));
    assert!(calls(&out).is_empty());
    assert_eq!(
        notices(&out),
        [(DEFAULT_BUDGET_NOTICE.to_owned(), Some("q2".to_owned()))]
    );
    // Asking again a minute later: skipped, and not told twice.
    let again = ask(&mut e, 62_000, "q3", "@docs hello??");
    assert_eq!(
        reason(&again, "q3"),
        Some((Outcome::Skip, Reason::BudgetExhausted))
    );
    assert!(notices(&again).is_empty(), "{again:#?}");
    // The notice cost nothing.
    assert_eq!(left(&mut e, 62_000), 100);
}

#[test]
fn the_spend_is_kept_across_a_restart() {
    let mut e = engine(2_000);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    answer(&mut e, 1_000, &c[0], "Looking.", Some(1_500));
    let snapshot = e.snapshot_room(&"lobby".into()).expect("a snapshot");
    let json = serde_json::to_string(&snapshot).expect("json");
    let mut fresh = engine(2_000);
    fresh.restore_room(
        ms(2_000),
        &"lobby".into(),
        serde_json::from_str(&json).expect("back"),
    );
    assert_eq!(left(&mut fresh, 2_000), 500);
    let out = ask(&mut fresh, 3_000, "q2", "still red");
    assert_eq!(reason(&out, "q2"), Some((Outcome::Skip, Reason::BudgetExhausted)));
}

#[test]
fn a_room_budget_is_counted_apart_and_off_means_none() {
    let own = PolicyPatch {
        budget: Some(BudgetScope::Room(budget(1_500))),
        ..PolicyPatch::default()
    };
    let mut e = engine_with(&["docs"], 100_000, own);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    answer(&mut e, 1_000, &c[0], "Looking.", Some(1_000));
    assert_eq!(
        left(&mut e, 1_000),
        100_000,
        "the persona's own budget is untouched"
    );
    let out = ask(&mut e, 2_000, "q2", "still red");
    assert_eq!(reason(&out, "q2"), Some((Outcome::Skip, Reason::BudgetExhausted)));

    let off = PolicyPatch {
        budget: Some(BudgetScope::Off),
        ..PolicyPatch::default()
    };
    let mut e = engine_with(&["docs"], 100, off);
    for i in 0..5 {
        let at = i * 10_000;
        let c = calls(&ask(&mut e, at, &format!("q{i}"), "the build is red"));
        assert_eq!(c.len(), 1, "no budget in this room");
        answer(&mut e, at + 1_000, &c[0], "Looking.", Some(5_000));
    }
}

#[test]
fn an_ambient_batch_over_budget_is_skipped_and_a_persona_without_one_answers() {
    let ambient = PolicyPatch {
        mode: Some(Mode::Ambient),
        allow_silence: Some(true),
        ..PolicyPatch::default()
    };
    let mut e = engine_with(&["docs", "chef"], 150, ambient);
    let mut out = ask(&mut e, 0, "m1", "the build is red");
    // Both buffers flush within ten minutes.
    while let Some(at) = e.poll_timeout().filter(|&t| t < ms(600_000)) {
        e.handle_timeout(at);
        out.extend(std::iter::from_fn(|| e.poll_output()));
    }
    let skipped: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::Ambient(n) if n.persona.as_str() == "docs" => match &n.event {
                AmbientEvent::Skipped { reason, .. } => Some(*reason),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(skipped, [Reason::BudgetExhausted]);
    let who: Vec<_> = calls(&out).iter().map(|r| r.persona.to_string()).collect();
    assert_eq!(who, ["chef"], "chef has no budget");
}

/// `docs` in `all` mode behind a gate (agent `g`), with `tokens` an hour.
fn gated(tokens: u64) -> Engine {
    engine_with(
        &["docs"],
        tokens,
        PolicyPatch {
            reply_gate: tactful_core::GatePatch {
                enabled: Some(true),
                agent: Some("g".into()),
                ..Default::default()
            },
            ..PolicyPatch::default()
        },
    )
}

#[test]
fn a_gate_that_lets_a_reply_through_is_counted_and_its_reply_checked_again() {
    // Room for one reply: two gated messages arrive together, both gates
    // are asked (they hold nothing), both say REPLY.
    let mut e = gated(2_000);
    let g1 = calls(&ask(&mut e, 0, "q1", "the build is red"));
    let g2 = calls(&ask(&mut e, 10, "q2", "still red"));
    assert_eq!((g1.len(), g2.len()), (1, 1), "two gate calls");
    e.handle_usage(g1[0].turn, 50);
    e.handle_agent_result(ms(100), g1[0].turn, AgentResult::Output("REPLY".into()));
    let out: Vec<Output> = std::iter::from_fn(|| e.poll_output()).collect();
    assert_eq!(reason(&out, "q1"), Some((Outcome::Reply, Reason::GateReply)));
    let reply = calls(&out);
    assert_eq!(reply.len(), 1, "the reply's call");
    // The first reply holds its estimate: the second no longer fits.
    e.handle_agent_result(ms(110), g2[0].turn, AgentResult::Output("REPLY".into()));
    let out: Vec<Output> = std::iter::from_fn(|| e.poll_output()).collect();
    assert_eq!(reason(&out, "q2"), Some((Outcome::Skip, Reason::BudgetExhausted)));
    assert!(calls(&out).is_empty(), "no reply call over budget");
    assert!(out.iter().any(|o| matches!(o, Output::OverBudget(_))), "{out:#?}");
    // The reply costs 300: with the gate's 50, 350 are spent.
    e.handle_usage(reply[0].turn, 300);
    e.handle_agent_result(ms(200), reply[0].turn, AgentResult::Output("Looking.".into()));
    while e.poll_output().is_some() {}
    assert_eq!(left(&mut e, 200), 2_000 - 350, "the gate's call is counted too");
}

#[test]
fn a_persona_asked_with_another_decides_before_the_notice() {
    let mut e = engine_with(
        &["docs", "chef"],
        2_000,
        PolicyPatch {
            mode: Some(Mode::Mention),
            ..PolicyPatch::default()
        },
    );
    let c = calls(&ask(&mut e, 0, "q1", "@docs hi"));
    e.handle_usage(c[0].turn, 1_900);
    e.handle_agent_result(ms(100), c[0].turn, AgentResult::Output("Hi.".into()));
    while e.poll_output().is_some() {}
    let out = ask(&mut e, 1_000, "q2", "@docs @chef lunch?");
    let chef_call = out
        .iter()
        .position(|o| matches!(o, Output::CallAgent(r) if r.persona.as_str() == "chef"))
        .expect("chef is asked");
    let notice = out
        .iter()
        .position(|o| matches!(o, Output::Send(s) if s.notice))
        .expect("docs's notice");
    assert!(
        chef_call < notice,
        "chef's turn starts before docs's notice is heard: {out:#?}"
    );
}

/// Several processes holding a persona's rooms: what the others' rooms
/// spent counts against its own budget here, what this engine's rooms
/// spend is handed out for them, and a room handed over takes its share
/// with it (its new owner counts it, and says so).
#[test]
fn a_persona_budget_is_one_across_processes() {
    let mut here = engine(2_000);
    here.share_spend();
    let c = calls(&ask(&mut here, 0, "q1", "the build is red"));
    // The call's hold is handed out as it starts: a call starting at once
    // in another process sees it.
    let held = here.take_spent();
    assert_eq!(held.len(), 1, "{held:?}");
    let estimate = 2_000 - left(&mut here, 0);
    assert_eq!(
        (held[0].room.as_str(), held[0].persona.as_str(), held[0].tokens),
        ("lobby", "docs", estimate as i64)
    );
    answer(&mut here, 1_000, &c[0], "Looking.", Some(700));
    // Then what it cost instead of its hold.
    let settled = here.take_spent();
    assert_eq!(settled.len(), 1, "{settled:?}");
    assert_eq!(settled[0].tokens, 700 - estimate as i64);
    let spent = [held, settled].concat();
    assert_eq!(spent.iter().map(|s| s.tokens).sum::<i64>(), 700);
    assert_eq!(
        spent[1].bucket_end,
        tactful_core::budget::bucket_end(ms(1_000), HOUR)
    );
    assert!(here.take_spent().is_empty(), "handed out once");

    // Another process's rooms spent 1,000: 300 left here, too few for a
    // call, and the note says where the spend was.
    here.spent_elsewhere(&[
        ("docs".into(), spent[0].bucket_end, 1_000),
        ("gone".into(), ms(0), 9),
    ]);
    assert_eq!(left(&mut here, 2_000), 300);
    let out = ask(&mut here, 2_000, "q2", "still red");
    assert_eq!(reason(&out, "q2"), Some((Outcome::Skip, Reason::BudgetExhausted)));
    let note = out
        .iter()
        .find_map(|o| match o {
            Output::OverBudget(n) => Some(n.clone()),
            _ => None,
        })
        .expect("a budget note");
    assert_eq!((note.used, note.elsewhere), (1_700, 1_000));

    // The others' rooms went quiet (their spend left the window, or was
    // never there): this process's own spend is all that counts.
    here.spent_elsewhere(&[]);
    assert_eq!(left(&mut here, 3_000), 1_300);

    // The lobby moves to another process: its 700 go with it.
    assert!(here.hand_over_room(ms(4_000), &"lobby".into()).is_empty());
    assert_eq!(left(&mut here, 4_000), 2_000);

    // An engine alone hands out nothing (nobody takes it).
    let mut alone = engine(2_000);
    let c = calls(&ask(&mut alone, 0, "q1", "the build is red"));
    answer(&mut alone, 1_000, &c[0], "Looking.", Some(700));
    assert!(alone.take_spent().is_empty());
}

/// A room's own budget is the room's, counted where the room is held:
/// nothing of it is handed out, and spend elsewhere does not touch it.
#[test]
fn a_rooms_own_budget_is_not_shared() {
    let own = PolicyPatch {
        budget: Some(BudgetScope::Room(budget(1_500))),
        ..PolicyPatch::default()
    };
    let mut e = engine_with(&["docs"], 100_000, own);
    e.share_spend();
    e.spent_elsewhere(&[("docs".into(), ms(60_000), 99_000)]);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    assert_eq!(c.len(), 1, "the room's own budget pays");
    answer(&mut e, 1_000, &c[0], "Looking.", Some(1_000));
    assert!(e.take_spent().is_empty());
}

/// A room handed to another process while its call runs: the call's hold
/// on the persona's budget is given back here (the new owner asks again,
/// and holds there), not kept until a restart.
#[test]
fn a_room_handed_over_mid_call_gives_its_hold_back() {
    let mut here = engine(2_000);
    here.share_spend();
    let c = calls(&ask(&mut here, 0, "q1", "the build is red"));
    assert_eq!(c.len(), 1);
    assert!(left(&mut here, 100) < 2_000, "held while it runs");
    let ended = here.hand_over_room(ms(200), &"lobby".into());
    assert_eq!(ended, [c[0].turn]);
    assert_eq!(left(&mut here, 300), 2_000, "the hold is given back");
}
