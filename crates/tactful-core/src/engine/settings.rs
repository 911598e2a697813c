//! What the engine is built from ([`EngineConfig`], with its
//! [`ContextLimits`]) and why a config cannot run ([`EngineError`]): the
//! engine's settings, apart from the code that runs on them.

use std::sync::Arc;

use crate::hooks::HookScope;
use crate::ids::PersonaId;
use crate::persona::{MAX_PERSONAS, PersonaSpec};
use crate::policy::PolicyTable;
use crate::schedule::Schedule;

/// How much of a room the engine keeps and shows agents.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextLimits {
    /// Messages retained per room (for context, duplicate detection and
    /// `reply_to` validation).
    pub history: usize,
    /// Earlier messages an agent sees in one turn.
    pub max_turns: usize,
    /// Character budget of the rendered conversation in one turn.
    pub max_chars: usize,
    /// Own message ids remembered per (room, persona), so a reply to an old
    /// message of the persona still addresses it.
    pub own_ids: usize,
}

impl Default for ContextLimits {
    fn default() -> Self {
        ContextLimits {
            history: 200,
            max_turns: 30,
            max_chars: 12_000,
            own_ids: 1024,
        }
    }
}

/// Everything the engine is built from.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// The personas this process hosts, in config order.
    pub personas: Vec<PersonaSpec>,
    /// Room policy layers.
    pub policies: PolicyTable,
    /// Context bounds.
    pub context: ContextLimits,
    /// Ambient flushes allowed to run at once, process-wide.
    pub max_concurrent_flushes: usize,
    /// Seed for ambient flush jitter.
    pub seed: u64,
    /// The `[agents]` keys whose answers keep a leading reasoning block
    /// (`strip_reasoning = false`); every other agent's is stripped.
    pub reasoning_kept: Vec<Arc<str>>,
    /// The before-send hooks, in the order replies pass through them.
    pub hooks: Vec<HookScope>,
    /// The scheduled turns (run once [`super::Engine::start_schedules`] is called).
    pub schedules: Vec<Schedule>,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            personas: Vec::new(),
            policies: PolicyTable::default(),
            context: ContextLimits::default(),
            max_concurrent_flushes: 3,
            seed: 0,
            reasoning_kept: Vec::new(),
            hooks: Vec::new(),
            schedules: Vec::new(),
        }
    }
}

/// A config the engine cannot run with.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum EngineError {
    /// No personas at all.
    #[error("no personas are configured")]
    NoPersonas,
    /// More personas than [`MAX_PERSONAS`].
    #[error("{0} personas are configured; one process hosts at most {MAX_PERSONAS}")]
    TooManyPersonas(usize),
    /// Two personas answer to the same handle.
    #[error("personas `{0}` and `{1}` answer to the same handle `{2}`")]
    DuplicateHandle(PersonaId, PersonaId, String),
    /// `max_concurrent_flushes` is zero: no ambient flush could ever run.
    #[error("max_concurrent_flushes must be at least 1")]
    NoFlushSlots,
}
