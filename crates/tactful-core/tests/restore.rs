//! A restarted engine decides like one that never stopped.
//!
//! One engine hears a random conversation; at a random point a second
//! engine is rebuilt the way the live runtime does it after a restart
//! (counters, the last `history` messages per room, older own ids, platform
//! aliases, room snapshots). Both then hear the same rest of the
//! conversation and must decide, call and send exactly the same things.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use tactful_core::{
    AgentResult, ContextLimits, Engine, EngineConfig, Message, Mode, MsgId, Output, PersonaSpec, PolicyPatch,
    RateLimit, RoomId, Sender, Timestamp, TurnKind, UserId,
};

const HISTORY: usize = 12;

fn config() -> EngineConfig {
    let mut policies = tactful_core::PolicyTable::default();
    let patch = |mode: Mode| PolicyPatch {
        mode: Some(mode),
        ..PolicyPatch::default()
    };
    policies
        .default
        .personas
        .insert("ada".into(), patch(Mode::Mention));
    let mut bo = patch(Mode::All);
    bo.rate_limit = Some(Some(RateLimit {
        replies: 2,
        per: Duration::from_secs(30),
    }));
    policies.default.personas.insert("bo".into(), bo);
    let mut cy = patch(Mode::Ambient);
    cy.ambient.flush_after = Some(Duration::from_secs(5));
    cy.ambient.flush_messages = Some(3);
    cy.ambient.cooldown = Some(Duration::from_secs(8));
    cy.floor_max_speakers = Some(1);
    policies.default.personas.insert("cy".into(), cy);
    EngineConfig {
        personas: ["ada", "bo", "cy"]
            .iter()
            .map(|p| PersonaSpec::new(p, "main"))
            .collect(),
        policies,
        context: ContextLimits {
            history: HISTORY,
            own_ids: 40,
            ..ContextLimits::default()
        },
        max_concurrent_flushes: 2,
        seed: 11,
        reasoning_kept: Vec::new(),
        hooks: Vec::new(),
        schedules: Vec::new(),
    }
}

#[derive(Clone, Debug)]
enum Step {
    Say {
        room: u8,
        author: u8,
        mention: Option<u8>,
        reply_back: Option<u8>,
    },
    Wait(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u8..3, 0u8..3, proptest::option::of(0u8..3), proptest::option::of(0u8..6)).prop_map(
            |(room, author, mention, reply_back)| Step::Say { room, author, mention, reply_back }
        ),
        1 => (1u16..12_000).prop_map(Step::Wait),
    ]
}

/// What the runtime would have saved: every message heard, in order, and
/// the platform id each reply got.
#[derive(Default)]
struct Saved {
    heard: Vec<Message>,
    aliases: Vec<(RoomId, MsgId, MsgId)>,
}

struct Sim {
    engine: Engine,
    now: Timestamp,
    seq: u32,
    log: Vec<String>,
    saved: Saved,
}

impl Sim {
    fn new(engine: Engine, now: Timestamp) -> Sim {
        Sim {
            engine,
            now,
            seq: 0,
            log: Vec::new(),
            saved: Saved::default(),
        }
    }

    fn run(&mut self, steps: &[Step]) {
        for s in steps {
            match *s {
                Step::Wait(ms) => {
                    let until = self.now + Duration::from_millis(u64::from(ms));
                    while let Some(t) = self.engine.poll_timeout().filter(|&t| t <= until) {
                        self.now = self.now.max(t);
                        self.engine.handle_timeout(self.now);
                        self.drain();
                    }
                    self.now = until;
                }
                Step::Say {
                    room,
                    author,
                    mention,
                    reply_back,
                } => {
                    self.seq += 1;
                    self.now = self.now + Duration::from_millis(300);
                    let who = ["alice", "bob", "robot"][author as usize];
                    let mut text = format!("message {}", self.seq);
                    if let Some(m) = mention {
                        text = format!("@{} {text}", ["ada", "bo", "cy"][m as usize]);
                    }
                    let room_id = format!("r{room}");
                    let mut msg =
                        Message::new(format!("h{}", self.seq), room_id.as_str(), who, &text, self.now);
                    msg.sender.is_bot = who == "robot";
                    let earlier: Vec<&Message> = self
                        .saved
                        .heard
                        .iter()
                        .rev()
                        .filter(|m| m.room.as_str() == room_id)
                        .collect();
                    msg.reply_to = reply_back
                        .and_then(|k| earlier.get(k as usize))
                        .map(|m| m.id.clone());
                    self.saved.heard.push(msg.clone());
                    self.engine.handle_message(self.now, msg);
                    self.drain();
                }
            }
        }
    }

    /// Acts on every output the way a driver with instant agents would, and
    /// logs what must be the same for both engines.
    fn drain(&mut self) {
        // As the runtime's driver does after every event; debug builds
        // check its count of ambient work against a scan of every room.
        let _ = self.engine.pending_work();
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::Decision(d) => self.log.push(format!(
                    "{} {} {} {} {}",
                    d.room,
                    d.msg,
                    d.persona,
                    d.outcome.as_str(),
                    d.reason.as_str()
                )),
                Output::CallAgent(req) => {
                    let ids: Vec<&str> = req.triggers.iter().map(|e| e.id.as_str()).collect();
                    self.log
                        .push(format!("call {:?} {} {:?}", req.kind, req.persona, ids));
                    let n: usize = ids.iter().map(|i| i.len()).sum::<usize>() + req.persona.as_str().len();
                    let answer = match req.kind {
                        TurnKind::Gate => "YES".to_owned(),
                        _ if n.is_multiple_of(3) => "NO_REPLY".to_owned(),
                        _ => format!("[[reply_to:{}]] answering {}", ids[0], ids.join(",")),
                    };
                    self.engine
                        .handle_agent_result(self.now, req.turn, AgentResult::Output(answer));
                }
                Output::Send(o) => {
                    self.log.push(format!(
                        "send {} {} {} {:?} {:?}",
                        o.room, o.persona, o.id, o.text, o.reply_to
                    ));
                    // The runtime stores the reply as the room heard it and
                    // learns its platform id on delivery.
                    let mut echo =
                        Message::new(o.id.clone(), o.room.clone(), o.persona.as_str(), &o.text, o.at);
                    echo.sender = Sender {
                        id: UserId::new(o.persona.as_str()),
                        name: Arc::from(o.persona.as_str()),
                        is_bot: true,
                        handle: None,
                    };
                    echo.reply_to = o.reply_to.clone();
                    self.saved.heard.push(echo);
                    let platform = MsgId::new(format!("p-{}", o.id));
                    self.saved
                        .aliases
                        .push((o.room.clone(), o.id.clone(), platform.clone()));
                    self.engine.handle_sent(&o.room, &o.id, platform);
                }
                Output::Silent(end, kind) => {
                    self.log.push(format!("silent {} {}", end.persona, kind.as_str()))
                }
                Output::Withheld(end, why) => {
                    self.log
                        .push(format!("withheld {} {}", end.persona, why.as_str()))
                }
                Output::Error(end, e) => self.log.push(format!("error {} {e}", end.persona)),
                Output::Cancelled(end, why) => {
                    self.log
                        .push(format!("cancelled {} {}", end.persona, why.as_str()))
                }
                Output::Ambient(note) => self.log.push(format!("ambient {} {}", note.persona, note.room)),
                Output::Limited(note) => self.log.push(format!("limited {} {}", note.persona, note.msg)),
                Output::React(note) => self.log.push(format!("react {} {}", note.persona, note.msg)),
                Output::OverBudget(note) => self
                    .log
                    .push(format!("over budget {} {}", note.persona, note.msg)),
                Output::Floor(note) => self.log.push(format!("floor {} {}", note.persona, note.msg)),
                // No hooks are configured here.
                Output::RunHooks(_) | Output::Hook(_) | Output::Schedule(_) => {
                    unreachable!("no hooks or schedules configured")
                }
                Output::Dropped { msg, reason, .. } => self.log.push(format!("dropped {msg} {reason}")),
            }
        }
    }

    /// A second engine rebuilt from what was saved, the way the runtime
    /// restores after a restart.
    fn restarted(&mut self) -> Sim {
        let mut engine = Engine::new(config()).expect("valid config");
        engine.restore_counters(&self.engine.counters());
        let mut by_room: BTreeMap<RoomId, Vec<&Message>> = BTreeMap::new();
        for m in &self.saved.heard {
            by_room.entry(m.room.clone()).or_default().push(m);
        }
        for (room, msgs) in &by_room {
            let cut = msgs.len().saturating_sub(HISTORY);
            for old in &msgs[..cut] {
                if let Some(p) = engine.persona_index(old.sender.id.as_str()) {
                    let persona = engine.personas()[p.0 as usize].id.clone();
                    engine.restore_own(room, &persona, old.id.clone());
                }
            }
            for m in &msgs[cut..] {
                engine.restore_message((*m).clone());
            }
        }
        for (room, local, platform) in &self.saved.aliases {
            engine.handle_sent(room, local, platform.clone());
            let persona = local.as_str().split(':').next().unwrap_or_default();
            engine.restore_own(room, &persona.into(), platform.clone());
        }
        for room in by_room.keys() {
            let snapshot = self.engine.snapshot_room(room).expect("a heard room has state");
            engine.restore_room(self.now, room, snapshot);
        }
        assert!(engine.poll_output().is_none(), "restoring decides nothing");
        let mut sim = Sim::new(engine, self.now);
        sim.seq = self.seq;
        sim.saved.heard = self.saved.heard.clone();
        sim
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_restored_engine_decides_like_the_original(
        before in proptest::collection::vec(step(), 1..60),
        after in proptest::collection::vec(step(), 1..60),
    ) {
        let mut original = Sim::new(Engine::new(config()).expect("valid config"), Timestamp::from_millis(1_000));
        original.run(&before);
        let mut restored = original.restarted();
        original.log.clear();
        original.run(&after);
        restored.run(&after);
        prop_assert_eq!(&original.log, &restored.log);
    }
}

#[test]
fn a_turn_running_at_the_restart_is_asked_again_with_its_trigger() {
    let mut a = Engine::new(config()).expect("valid config");
    let now = Timestamp::from_millis(1_000);
    a.handle_message(
        now,
        Message::new("m1", "lobby", "alice", "@ada are you there?", now),
    );
    let mut pending = None;
    while let Some(out) = a.poll_output() {
        if let Output::CallAgent(req) = out {
            pending = Some(req);
        }
    }
    let pending = pending.expect("ada was called");

    let mut b = Engine::new(config()).expect("valid config");
    b.restore_counters(&a.counters());
    b.restore_message(Message::new("m1", "lobby", "alice", "@ada are you there?", now));
    let ids: Vec<MsgId> = pending.triggers.iter().map(|e| e.id.clone()).collect();
    let later = now + Duration::from_secs(5);
    let turn = b
        .resume_turn(
            later,
            &"lobby".into(),
            &pending.persona,
            &ids,
            &[],
            pending.addressed,
        )
        .expect("the trigger is known");
    assert!(turn > pending.turn, "a resumed turn gets a fresh id");
    let Some(Output::CallAgent(req)) = b.poll_output() else {
        panic!("the resumed turn calls the agent");
    };
    assert_eq!(req.persona.as_str(), "ada");
    assert_eq!(req.triggers[0].id.as_str(), "m1");
    assert!(req.addressed);
    b.handle_agent_result(later, req.turn, AgentResult::Output("Here.".into()));
    let sends: Vec<String> = std::iter::from_fn(|| b.poll_output())
        .filter_map(|o| match o {
            Output::Send(s) => Some(s.id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(sends, ["ada:1"], "reply ids continue from the saved counters");
    assert_eq!(
        b.resume_turn(
            later,
            &"lobby".into(),
            &pending.persona,
            &[MsgId::new("gone")],
            &[],
            true
        ),
        Err(tactful_core::NotResumed::NoTriggers),
        "a turn whose triggers are gone is not resumed"
    );
    assert_eq!(
        b.resume_turn(later, &"lobby".into(), &"nobody".into(), &ids, &[], true),
        Err(tactful_core::NotResumed::UnknownPersona)
    );
    // A trigger that left the history window is taken from the store's copy.
    let old = Message::new("m0", "lobby", "bob", "@ada an old question", now);
    let turn = b
        .resume_turn(
            later,
            &"lobby".into(),
            &pending.persona,
            std::slice::from_ref(&old.id),
            std::slice::from_ref(&old),
            true,
        )
        .expect("resumed from the stored message");
    let call = std::iter::from_fn(|| b.poll_output()).find_map(|o| match o {
        Output::CallAgent(req) if req.turn == turn => Some(req),
        _ => None,
    });
    let call = call.expect("the agent is asked");
    assert_eq!(call.triggers[0].text.as_ref(), "@ada an old question");
    assert_eq!(call.triggers[0].author.as_str(), "bob");
}
