//! The room's budget for replies nobody asked for (`unprompted`): shared
//! by every persona of the room, reserved before the call, given back by a
//! turn that stays silent, kept across a restart; addressed messages are
//! never limited by it.

use crate::common;

use common::{ask, calls, ms};
use std::time::Duration;

use tactful_core::policy::{FloorStrategy, PolicyPatch, RateLimit};
use tactful_core::{
    AgentResult, Engine, EngineConfig, Mode, Outcome, Output, PersonaSpec, PolicyTable, Reason, TurnRequest,
};

fn engine(ids: &[&str]) -> Engine {
    let mut policies = PolicyTable::default();
    policies.default.all = PolicyPatch {
        mode: Some(Mode::All),
        rate_limit: Some(None),
        floor_strategy: Some(FloorStrategy::Race),
        floor_max_speakers: Some(4),
        unprompted: Some(Some(RateLimit {
            replies: 1,
            per: Duration::from_secs(3600),
        })),
        ..PolicyPatch::default()
    };
    Engine::new(EngineConfig {
        personas: ids.iter().map(|p| PersonaSpec::new(p, "a")).collect(),
        policies,
        ..Default::default()
    })
    .expect("valid engine config")
}

fn reasons(out: &[Output], msg: &str) -> Vec<(String, Reason)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Decision(d) if d.msg.as_str() == msg && d.outcome != Outcome::Record => {
                Some((d.persona.to_string(), d.reason))
            }
            _ => None,
        })
        .collect()
}

fn answer(e: &mut Engine, at: u64, r: &TurnRequest, text: &str) {
    e.handle_agent_result(ms(at), r.turn, AgentResult::Output(text.into()));
    while e.poll_output().is_some() {}
}

#[test]
fn the_budget_is_the_rooms_shared_by_its_personas() {
    let mut e = engine(&["docs", "chef"]);
    let out = ask(&mut e, 0, "q1", "the build is red");
    assert_eq!(
        reasons(&out, "q1"),
        [
            ("docs".into(), Reason::All),
            ("chef".into(), Reason::UnpromptedBudget)
        ],
        "one slot for the whole room"
    );
    let c = calls(&out);
    answer(&mut e, 1_000, &c[0], "Looking.");
    let out = ask(&mut e, 5_000, "q2", "still red");
    assert_eq!(
        reasons(&out, "q2"),
        [
            ("docs".into(), Reason::UnpromptedBudget),
            ("chef".into(), Reason::UnpromptedBudget)
        ]
    );
    // Addressed: answered whatever the budget.
    let out = ask(&mut e, 6_000, "q3", "@chef is it lunch?");
    assert_eq!(reasons(&out, "q3"), [("chef".into(), Reason::Mention)]);
    // An hour after the reply the slot is free again.
    let out = ask(&mut e, 3_601_000, "q4", "the build is green");
    assert_eq!(reasons(&out, "q4")[0], ("docs".into(), Reason::All));
}

#[test]
fn a_silent_turn_gives_its_slot_back() {
    let mut e = engine(&["docs"]);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    answer(&mut e, 1_000, &c[0], "NO_REPLY");
    let out = ask(&mut e, 2_000, "q2", "still red");
    assert_eq!(reasons(&out, "q2"), [("docs".into(), Reason::All)]);
}

#[test]
fn the_budget_spent_is_kept_across_a_restart() {
    let mut e = engine(&["docs"]);
    let c = calls(&ask(&mut e, 0, "q1", "the build is red"));
    answer(&mut e, 1_000, &c[0], "Looking.");
    let snapshot = e.snapshot_room(&"lobby".into()).expect("a snapshot");
    assert_eq!(snapshot.unprompted, [ms(1_000)]);
    let json = serde_json::to_string(&snapshot).expect("json");
    let mut fresh = engine(&["docs"]);
    fresh.restore_room(
        ms(2_000),
        &"lobby".into(),
        serde_json::from_str(&json).expect("back"),
    );
    let out = ask(&mut fresh, 3_000, "q2", "still red");
    assert_eq!(reasons(&out, "q2"), [("docs".into(), Reason::UnpromptedBudget)]);
    // A snapshot from before the budget existed reads as none spent.
    let old: tactful_core::RoomSnapshot =
        serde_json::from_str(r#"{"bot_streak":0,"bots":[],"is_dm":false,"floor":[],"members":[]}"#)
            .expect("old snapshot");
    assert!(old.unprompted.is_empty());
}
