//! The sans-I/O heart of tactful.
//!
//! This crate decides, for every chat message and every persona, whether
//! the persona speaks and why — and, when an agent answers, what (if
//! anything) gets posted. It performs no I/O: no async runtime, no clock
//! reads, no network, no files. Drivers (the `tactful replay` command, the
//! live runtime) feed it events with the current time and execute the
//! effects it returns. That is what makes a replay decide exactly what the
//! live service would, and what makes the engine cheap to benchmark and
//! fuzz.
//!
//! A driver's loop, in miniature:
//!
//! ```
//! use tactful_core::{AgentResult, Engine, EngineConfig, Message, Output, PersonaSpec, Timestamp};
//!
//! let mut engine = Engine::new(EngineConfig {
//!     personas: vec![PersonaSpec::new("docs", "main")],
//!     ..Default::default()
//! })?;
//! let now = Timestamp::from_millis(1_000);
//! engine.handle_message(now, Message::new("m1", "lobby", "alice", "@docs how do I reset?", now));
//!
//! let (mut reasons, mut sent) = (Vec::new(), Vec::new());
//! while let Some(output) = engine.poll_output() {
//!     match output {
//!         Output::Decision(d) => reasons.push(d.reason.as_str()),
//!         // A real driver calls the persona's agent here, asynchronously.
//!         Output::CallAgent(turn) => {
//!             engine.handle_agent_result(now, turn.turn, AgentResult::Output("Hold the button.".into()))
//!         }
//!         Output::Send(reply) => sent.push(reply.text),
//!         _ => {}
//!     }
//! }
//! assert_eq!(sent, ["Hold the button."]);
//! // The reply is heard back by the room: docs records it as its own.
//! assert_eq!(reasons, ["mention", "own_message"]);
//! # Ok::<(), tactful_core::EngineError>(())
//! ```
//!
//! Start at [`engine::Engine`]. Where each rule lives:
//!
//! | rule | module |
//! |---|---|
//! | inbound message model | [`message`] |
//! | mentions, `/command@`, reply-to addressing | [`addressing`] |
//! | room modes, bots, allowlist, policy layers | [`policy`], [`engine`] |
//! | rate limit reserve/commit/release | [`rate_limit`] |
//! | intentional silence | [`silence`] |
//! | `[[key:value]]` output directives | [`directives`] |
//! | transcript and speaker tags | [`transcript`] |
//! | what an agent sees | [`prompt`] |
//! | decision trace | [`decision`] |

pub mod addressing;
pub mod budget;
pub mod cause;
pub mod decision;
pub mod delivery;
pub mod directives;
pub mod engine;
pub mod hooks;
pub mod ids;
pub mod message;
pub mod persona;
pub mod policy;
pub mod prompt;
pub mod rate_limit;
pub mod reasoning;
pub mod rng;
pub mod schedule;
pub mod secrets;
pub mod silence;
pub mod small_talk;
pub mod time;
pub mod transcript;
pub mod turn;

pub use decision::{Decision, Outcome, Reason};
pub use engine::{
    AmbientEvent, AmbientNote, BudgetLeft, BudgetNote, CancelReason, ContextLimits, Counters, Engine,
    EngineConfig, EngineError, FloorNote, FloorWhy, LimitNote, MemberSnapshot, NotResumed, Outgoing, Output,
    PersonasChanged, ReactNote, RoomSnapshot, ScheduleEvent, ScheduleNote, SilenceKind, Spent, TurnEnd,
    WaitReason,
};
pub use ids::{MsgId, PersonaId, RoomId, ThreadId, TurnId, UserId};
pub use message::{Mentions, Message, Sender};
pub use persona::PersonaSpec;
pub use policy::{
    AmbientPatch, AmbientPolicy, GatePatch, GatePolicy, Mode, OnError, PolicyPatch, PolicyTable, RateLimit,
    RoomLayer, RoomPolicy,
};
pub use time::Timestamp;
pub use turn::{AgentResult, FlushTrigger, GateVerdict, TurnKind, TurnRequest};
