//! A room moving between two running engines (two processes sharing a
//! database): the one that lets it go forgets it and stops its work there;
//! the one that adopts it, already busy with rooms of its own, picks it up
//! from what was saved and carries on (an ambient batch flushes at its old
//! deadline, a turn that was running is asked again).

use std::time::Duration;

use tactful_core::{
    AgentResult, Engine, EngineConfig, Message, Mode, Output, PersonaSpec, PolicyPatch, RoomId, Timestamp,
    TurnKind,
};

fn config() -> EngineConfig {
    let mut policies = tactful_core::PolicyTable::default();
    let mut guide = PolicyPatch {
        mode: Some(Mode::Ambient),
        ..PolicyPatch::default()
    };
    guide.ambient.flush_after = Some(Duration::from_secs(30));
    policies.default.personas.insert("guide".into(), guide);
    policies.default.personas.insert(
        "host".into(),
        PolicyPatch {
            mode: Some(Mode::Mention),
            ..PolicyPatch::default()
        },
    );
    EngineConfig {
        personas: vec![
            PersonaSpec::new("guide", "main"),
            PersonaSpec::new("host", "main"),
        ],
        policies,
        ..EngineConfig::default()
    }
}

fn at(s: u64) -> Timestamp {
    Timestamp::from_millis(s * 1000)
}

fn drain(e: &mut Engine) -> Vec<Output> {
    std::iter::from_fn(|| e.poll_output()).collect()
}

fn calls(outputs: &[Output]) -> Vec<(TurnKind, String)> {
    outputs
        .iter()
        .filter_map(|o| match o {
            Output::CallAgent(req) => Some((req.kind, req.room.to_string())),
            _ => None,
        })
        .collect()
}

#[test]
fn a_room_handed_over_is_forgotten_and_picked_up_where_it_was() {
    let lobby = RoomId::new("lobby");
    let mut old = Engine::new(config()).expect("valid");
    let mut new = Engine::new(config()).expect("valid");

    // The old owner: a question waiting in Guide's batch, Host thinking.
    let question = Message::new("m1", "lobby", "alice", "how do I deploy?", at(1));
    old.handle_message(at(1), question.clone());
    let mention = Message::new("m2", "lobby", "bob", "@host hi", at(2));
    old.handle_message(at(2), mention.clone());
    let out = drain(&mut old);
    let running: Vec<_> = out
        .iter()
        .filter_map(|o| match o {
            Output::CallAgent(req) => Some(req.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(running.len(), 1, "Host is asked: {out:?}");
    let due = old.poll_timeout().expect("Guide's batch is armed");
    // What the store holds for the room at this point.
    let snapshot = old.snapshot_room(&lobby).expect("known");

    // The new owner is busy elsewhere already.
    new.handle_message(
        at(1),
        Message::new("k1", "kitchen", "carol", "@host hello", at(1)),
    );
    let kitchen = drain(&mut new);
    assert_eq!(calls(&kitchen), [(TurnKind::Reply, "kitchen".to_owned())]);

    let stopped = old.hand_over_room(at(3), &lobby);
    assert_eq!(stopped, [running[0].turn], "Host's turn is stopped");
    assert!(!old.has_room(&lobby));
    assert_eq!(old.poll_timeout(), None, "no timer of the room is left");
    assert!(
        drain(&mut old).is_empty(),
        "nothing is said or recorded for the room by the engine that let it go"
    );
    assert!(!old.take_changed_rooms().contains(&lobby), "nothing to save");
    // A late answer for the stopped turn changes nothing.
    old.handle_agent_result(at(4), running[0].turn, AgentResult::Output("hello!".into()));
    assert!(drain(&mut old).is_empty());

    // The new owner adopts it from the store, while it runs.
    new.restore_message(question.clone());
    new.restore_message(mention.clone());
    new.restore_room(at(5), &lobby, snapshot);
    assert!(new.has_room(&lobby));
    let resumed = new.resume_turn(
        at(5),
        &lobby,
        &"host".into(),
        std::slice::from_ref(&mention.id),
        std::slice::from_ref(&mention),
        true,
    );
    assert!(resumed.is_ok(), "Host's turn is asked again: {resumed:?}");
    let out = drain(&mut new);
    assert_eq!(calls(&out), [(TurnKind::Reply, "lobby".to_owned())]);
    assert_eq!(new.poll_timeout(), Some(due), "Guide's batch keeps its deadline");
    new.handle_timeout(due);
    let out = drain(&mut new);
    assert_eq!(calls(&out), [(TurnKind::Ambient, "lobby".to_owned())], "{out:?}");
}

/// A schedule runs on the engine that owns its room, and only there: it
/// stops with the room handed over and starts with the room adopted,
/// making up a run the last owner missed while the room was between them.
#[test]
fn a_schedule_runs_only_where_its_room_is_owned_and_moves_with_it() {
    let schedule = |room: &str| tactful_core::schedule::Schedule {
        name: format!("standup-{room}").into(),
        expr: "0 * * * * *".into(),
        cron: tactful_core::schedule::parse_cron("0 * * * * *").expect("cron"),
        tz: chrono_tz::UTC,
        persona: "host".into(),
        room: RoomId::new(room),
        thread: None,
        prompt: "Say good morning.".into(),
        catch_up: Duration::from_secs(600),
    };
    let mut cfg = config();
    cfg.schedules = vec![schedule("lobby"), schedule("kitchen")];
    let (mut old, mut new) = (
        Engine::new(cfg.clone()).expect("valid"),
        Engine::new(cfg).expect("valid"),
    );
    let lobby = RoomId::new("lobby");
    let ran = |outs: &[Output]| -> Vec<String> {
        outs.iter()
            .filter_map(|o| match o {
                Output::Schedule(n) => Some(format!("{}@{}", n.room, n.due.as_millis() / 1000)),
                _ => None,
            })
            .collect()
    };
    old.start_schedules_for(at(1), &[], &|r| r == &lobby);
    new.start_schedules_for(at(1), &[], &|r| r != &lobby);
    old.handle_timeout(at(60));
    new.handle_timeout(at(60));
    assert_eq!(ran(&drain(&mut old)), ["lobby@60"]);
    assert_eq!(ran(&drain(&mut new)), ["kitchen@60"]);

    // The lobby moves; its run at 120 s falls while it is between owners.
    old.hand_over_room(at(61), &lobby);
    assert_eq!(old.poll_timeout(), None, "no schedule left on the old owner");
    new.handle_timeout(at(120));
    assert_eq!(ran(&drain(&mut new)), ["kitchen@120"]);
    let last = [("standup-lobby".into(), at(60))];
    new.start_schedules_for(at(130), &last, &|r| r == &lobby);
    let out = drain(&mut new);
    assert_eq!(ran(&out), ["lobby@120"], "the missed run is made up once");
    new.start_schedules_for(at(131), &[], &|r| r == &lobby);
    new.handle_timeout(at(180));
    let mut both = ran(&drain(&mut new));
    both.sort();
    assert_eq!(both, ["kitchen@180", "lobby@180"], "adopting twice arms it once");
}
