//! Personas changed while the engine runs (a config reload): added ones
//! take part from the next message, changed ones keep their turns in
//! flight, removed ones end theirs and decide nothing more.

use std::sync::Arc;

use tactful_core::engine::ContextLimits;
use tactful_core::policy::{PolicyPatch, RoomLayer};
use tactful_core::{
    AgentResult, CancelReason, Engine, EngineConfig, EngineError, Message, Mode, Output, PersonaSpec,
    PolicyTable, Timestamp, TurnRequest,
};

fn specs(ids: &[&str]) -> Vec<PersonaSpec> {
    ids.iter().map(|p| PersonaSpec::new(p, "a")).collect()
}

fn engine(ids: &[&str], policies: PolicyTable) -> Engine {
    Engine::new(EngineConfig {
        personas: specs(ids),
        policies,
        context: ContextLimits::default(),
        ..Default::default()
    })
    .expect("valid engine config")
}

fn drain(e: &mut Engine) -> Vec<Output> {
    std::iter::from_fn(|| e.poll_output()).collect()
}

fn calls(outputs: &[Output]) -> Vec<TurnRequest> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::CallAgent(r) => Some((**r).clone()),
            _ => None,
        })
        .collect()
}

fn said(e: &mut Engine, at: u64, id: &str, text: &str) -> Vec<Output> {
    e.handle_message(
        Timestamp(at),
        Message::new(id, "lobby", "alice", text, Timestamp(at)),
    );
    drain(e)
}

fn deciders(outputs: &[Output]) -> Vec<String> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::Decision(d) => Some(d.persona.to_string()),
            _ => None,
        })
        .collect()
}

#[test]
fn an_added_persona_answers_in_a_room_known_before_it() {
    let mut e = engine(&["docs"], PolicyTable::default());
    assert_eq!(deciders(&said(&mut e, 0, "m1", "hello")), ["docs"]);
    let changed = e
        .set_personas(Timestamp(1), specs(&["docs", "chef"]), Vec::new())
        .expect("accepted");
    assert_eq!(changed.added, ["chef".into()]);
    assert!(changed.changed.is_empty() && changed.removed.is_empty());
    let out = said(&mut e, 2, "m2", "@chef what is for dinner?");
    assert_eq!(deciders(&out), ["docs", "chef"], "slot order: the added one last");
    let c = calls(&out);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].persona.as_str(), "chef");
    assert_eq!(
        c[0].history.len(),
        1,
        "it reads what the room said before it came"
    );
}

#[test]
fn a_changed_persona_keeps_its_turn_in_flight_and_uses_the_new_prompt_next() {
    let mut e = engine(&["docs"], PolicyTable::default());
    let first = calls(&said(&mut e, 0, "m1", "@docs one"));
    let mut new = specs(&["docs"]);
    new[0].prompt = Arc::from("Answer in French.");
    let changed = e.set_personas(Timestamp(1), new, Vec::new()).expect("accepted");
    assert_eq!(changed.changed, ["docs".into()]);
    assert!(drain(&mut e).is_empty(), "nothing in flight is touched");
    e.handle_agent_result(Timestamp(2), first[0].turn, AgentResult::Output("one".into()));
    assert!(
        drain(&mut e)
            .iter()
            .any(|o| matches!(o, Output::Send(s) if s.text == "one"))
    );
    let second = calls(&said(&mut e, 3, "m2", "@docs two"));
    assert_eq!(&*second[0].prompt, "Answer in French.");
    let same = e
        .set_personas(Timestamp(4), e.personas().to_vec(), Vec::new())
        .expect("accepted");
    assert!(same.is_empty(), "{same:?}");
}

#[test]
fn a_removed_persona_ends_its_turns_and_decides_nothing_more() {
    let mut e = engine(&["docs", "chef"], PolicyTable::default());
    let turn = calls(&said(&mut e, 0, "m1", "@chef soup?"))[0].turn;
    let changed = e
        .set_personas(Timestamp(1), specs(&["docs"]), Vec::new())
        .expect("accepted");
    assert_eq!(changed.removed, ["chef".into()]);
    let out = drain(&mut e);
    assert!(
        matches!(out.as_slice(), [Output::Cancelled(end, CancelReason::PersonaRemoved)] if end.turn == turn),
        "{out:?}"
    );
    assert_eq!(e.turns_in_flight(), 0);
    e.handle_agent_result(Timestamp(2), turn, AgentResult::Output("soup!".into()));
    assert!(drain(&mut e).is_empty(), "a late answer never posts");
    assert!(e.persona_index("chef").is_none());
    // A mention of it addresses nobody; the others do not see it as a bot
    // in the room.
    let out = said(&mut e, 3, "m2", "@chef @docs hi");
    assert_eq!(deciders(&out), ["docs"]);
    let c = calls(&out);
    assert!(c[0].room_bots.is_empty(), "{:?}", c[0].room_bots);
}

#[test]
fn a_persona_that_comes_back_takes_its_old_slot() {
    let mut e = engine(&["docs", "chef"], PolicyTable::default());
    e.set_personas(Timestamp(0), specs(&["docs"]), Vec::new())
        .expect("accepted");
    let back = e
        .set_personas(Timestamp(1), specs(&["docs", "chef"]), Vec::new())
        .expect("accepted");
    assert_eq!(back.added, ["chef".into()]);
    assert_eq!(e.personas().len(), 2, "no new slot");
    assert_eq!(calls(&said(&mut e, 2, "m1", "@chef hi")).len(), 1);
}

#[test]
fn a_removed_ambient_persona_drops_its_batch() {
    let mut policies = PolicyTable::default();
    policies.rooms.insert(
        "lobby".into(),
        RoomLayer {
            all: PolicyPatch {
                mode: Some(Mode::Ambient),
                ..PolicyPatch::default()
            },
            ..Default::default()
        },
    );
    let mut e = engine(&["docs", "chef"], policies);
    said(&mut e, 0, "m1", "anyone know a good soup?");
    assert!(e.pending_work() > 0, "batches armed");
    e.set_personas(Timestamp(1), specs(&["docs"]), Vec::new())
        .expect("accepted");
    drain(&mut e);
    // Only docs's batch flushes, however long we wait.
    let mut flushed = Vec::new();
    let mut now = 1;
    while let Some(t) = e.poll_timeout() {
        now = t.0.max(now);
        e.handle_timeout(t);
        let out = drain(&mut e);
        flushed.extend(calls(&out).into_iter().map(|c| c.persona.to_string()));
        for c in calls(&out) {
            e.handle_agent_result(Timestamp(now), c.turn, AgentResult::Output("NO_REPLY".into()));
        }
        drain(&mut e);
        if now > 3_600_000 {
            break;
        }
    }
    assert_eq!(flushed, ["docs"]);
}

#[test]
fn a_refused_persona_list_changes_nothing() {
    let mut e = engine(&["docs", "chef"], PolicyTable::default());
    let mut clash = specs(&["docs", "cook"]);
    clash[1].aliases = vec!["docs".into()];
    assert!(matches!(
        e.set_personas(Timestamp(0), clash, Vec::new()),
        Err(EngineError::DuplicateHandle(..))
    ));
    assert_eq!(
        e.set_personas(Timestamp(0), Vec::new(), Vec::new()),
        Err(EngineError::NoPersonas)
    );
    let many: Vec<String> = (0..64).map(|i| format!("p{i}")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(matches!(
        e.set_personas(Timestamp(0), specs(&many), Vec::new()),
        Err(EngineError::TooManyPersonas(66))
    ));
    assert_eq!(e.personas().len(), 2);
    assert_eq!(deciders(&said(&mut e, 1, "m1", "@chef hi")), ["docs", "chef"]);
}
