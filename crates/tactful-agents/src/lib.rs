//! Agent backends: what speaks for a persona when the engine starts a turn.
//!
//! The engine hands out [`tactful_core::TurnRequest`]s and expects an
//! [`tactful_core::AgentResult`] back; backends live here, outside the
//! sans-I/O core. For now there is the deterministic `script` backend,
//! which tests and replays use in place of a model.

pub mod script;

pub use script::{ScriptAgent, ScriptAnswer, ScriptRule};
