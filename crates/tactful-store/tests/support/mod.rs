//! Where a test's store lives: a SQLite file in a temporary folder, or a
//! schema of its own in a PostgreSQL database (`tactful_store::testing`),
//! dropped at the end.

#![allow(dead_code)]

use std::path::PathBuf;

use tactful_core::{
    AgentResult, Engine, EngineConfig, Message, MsgId, Output, PersonaSpec, Timestamp, TurnKind,
};
use tactful_store::testing::Schema;
use tactful_store::{LoadLimits, Location, Op, Reader, ShownMessage, Store};

/// A test's store.
pub enum Place {
    /// A SQLite file in a folder removed at the end.
    Sqlite(tempfile::TempDir, PathBuf),
    /// A schema of its own, dropped at the end.
    Postgres(Schema),
}

impl Place {
    /// A fresh SQLite file.
    pub fn sqlite() -> Place {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("tactful.db");
        Place::Sqlite(dir, path)
    }

    /// A fresh schema, or `None` (the test is skipped) without a database.
    pub fn postgres() -> Option<Place> {
        Schema::new().map(Place::Postgres)
    }

    /// Where the store is.
    pub fn location(&self) -> Location {
        match self {
            Place::Sqlite(_, path) => Location::File(path.clone()),
            Place::Postgres(schema) => schema.location(),
        }
    }

    /// Opens the store (again).
    pub fn open(&self) -> Store {
        Store::open_at(&self.location()).expect("opens")
    }

    /// A second, read-only connection.
    pub fn reader(&self) -> Reader {
        Reader::open(&self.location()).expect("reads")
    }

    /// The schema of a PostgreSQL place.
    pub fn schema(&self) -> Option<&str> {
        match self {
            Place::Postgres(schema) => Some(&schema.name),
            Place::Sqlite(..) => None,
        }
    }

    /// Runs `sql` (several statements) directly, as an operator would.
    pub fn exec(&self, sql: &str) {
        match self {
            Place::Sqlite(_, path) => rusqlite::Connection::open(path)
                .expect("opens")
                .execute_batch(sql)
                .expect("ran"),
            Place::Postgres(schema) => schema.exec(sql).expect("ran"),
        }
    }
}

/// How much of each room the tests read back.
pub const LIMITS: LoadLimits = LoadLimits {
    history: 3,
    own_ids: 10,
};

pub fn engine() -> Engine {
    Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("docs", "main")],
        ..EngineConfig::default()
    })
    .expect("valid config")
}

/// Runs `engine` on one message with an instant agent answering `answer`,
/// and returns the ops the runtime would save.
pub fn hear(engine: &mut Engine, msg: Message, answer: &str, confirm: bool) -> Vec<Op> {
    let now = msg.time;
    let mut ops = vec![Op::Heard(msg.clone())];
    engine.handle_message(now, msg);
    while let Some(out) = engine.poll_output() {
        match out {
            Output::Decision(d) => ops.push(Op::Decision(d)),
            Output::CallAgent(req) => {
                engine.handle_agent_result(now, req.turn, AgentResult::Output(answer.into()))
            }
            Output::Send(out) => {
                let heard = out.as_heard("Docs".into());
                ops.push(Op::Reply {
                    out: out.clone(),
                    heard,
                });
                if confirm {
                    let platform = MsgId::new(format!("p{}", out.id));
                    engine.handle_sent(&out.room, &out.id, platform.clone());
                    ops.push(Op::Delivered {
                        room: out.room.clone(),
                        local: out.id.clone(),
                        platform,
                    });
                }
            }
            _ => {}
        }
    }
    for room in engine.take_changed_rooms() {
        if let Some(s) = engine.snapshot_room(&room) {
            ops.push(Op::Snapshot(room, s));
        }
    }
    ops.push(Op::Counters(engine.counters()));
    ops
}

pub fn at(s: u64) -> Timestamp {
    Timestamp::from_millis(s * 1000)
}

pub fn shown(id: &str, key: Option<&str>, text: &str) -> ShownMessage {
    ShownMessage {
        id: MsgId::new(id),
        room: "lobby".into(),
        key: key.map(str::to_owned),
        sender: "docs".into(),
        sender_name: "Docs".into(),
        is_bot: true,
        text: text.to_owned(),
        reply_to: None,
        time: at(1),
        reactions: Vec::new(),
    }
}

pub fn call(turn: u64, kind: TurnKind, at_s: u64) -> Op {
    Op::CallStarted(tactful_store::CallStart {
        turn: tactful_core::TurnId(turn),
        kind,
        room: "lobby".into(),
        persona: "docs".into(),
        agent: "main".into(),
        msg: Some(format!("m{turn}")),
        at: at(at_s),
    })
}

pub fn ended(turn: u64, at_s: Option<u64>, outcome: &'static str, tokens: Option<(u64, u64, u64)>) -> Op {
    Op::CallEnded(tactful_store::CallEnd {
        turn: tactful_core::TurnId(turn),
        at: at_s.map(at),
        outcome: Some(outcome),
        error: (outcome == "error").then(|| "exit status 3: the tool crashed".to_owned()),
        prompt_tokens: tokens.map(|t| t.0),
        completion_tokens: tokens.map(|t| t.1),
        cached_tokens: tokens.map(|t| t.2),
    })
}

/// Runs each named test (a `fn(&Place)`) against SQLite and PostgreSQL.
#[macro_export]
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(#[test]
            fn $name() {
                super::$name(&super::support::Place::sqlite());
            })*
        }
        mod postgres {
            $(#[test]
            fn $name() {
                if let Some(place) = super::support::Place::postgres() {
                    super::$name(&place);
                }
            })*
        }
    };
}
