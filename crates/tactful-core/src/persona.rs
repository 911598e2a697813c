//! Personas: the assistants one tactful process hosts.

use std::sync::Arc;

use crate::ids::{PersonaId, UserId};

/// The most personas one engine hosts. Persona sets are bitsets so the per
/// message work stays allocation-free; 64 is far above any real room.
pub const MAX_PERSONAS: usize = 64;

/// What the engine needs to know about a persona.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersonaSpec {
    /// The config id, also its default `@handle`.
    pub id: PersonaId,
    /// Display name, used in speaker tags other personas see.
    pub name: Arc<str>,
    /// Other account ids or handles that mean this persona (its Matrix user
    /// id, its IRC nick...). Matched case-insensitively.
    pub aliases: Vec<UserId>,
    /// The `[agents]` key whose backend speaks for it; passed through to the
    /// driver untouched.
    pub agent: Arc<str>,
    /// The persona's own instructions.
    pub prompt: Arc<str>,
    /// The `[agents]` key that reads its ambient batches, when not
    /// [`PersonaSpec::agent`]: a cheap model can listen while the main one
    /// answers when the persona is addressed.
    pub ambient_agent: Option<Arc<str>>,
    /// What it may spend on model calls across all rooms (a room's
    /// [`crate::policy::RoomPolicy::budget`] may give it one of its own
    /// there instead); `None` means no limit.
    pub budget: Option<crate::budget::TokenBudget>,
}

impl PersonaSpec {
    /// A persona with no aliases, the id as its name, and an empty prompt.
    pub fn new(id: &str, agent: &str) -> Self {
        PersonaSpec {
            id: PersonaId::new(id),
            name: Arc::from(id),
            aliases: Vec::new(),
            agent: Arc::from(agent),
            prompt: Arc::from(""),
            ambient_agent: None,
            budget: None,
        }
    }

    /// Whether `handle` (an account id or an `@handle` without the `@`)
    /// names this persona.
    pub fn answers_to(&self, handle: &str) -> bool {
        crate::addressing::handle_eq(self.id.as_str(), handle)
            || self
                .aliases
                .iter()
                .any(|a| crate::addressing::handle_eq(a.as_str(), handle))
    }
}

/// Index of a persona in the engine's persona list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PersonaIdx(pub u8);

/// A set of personas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PersonaSet(u64);

impl PersonaSet {
    /// Adds a persona.
    pub fn insert(&mut self, p: PersonaIdx) {
        self.0 |= 1 << p.0;
    }

    /// Whether the persona is in the set.
    pub fn contains(self, p: PersonaIdx) -> bool {
        self.0 & (1 << p.0) != 0
    }

    /// Whether the set is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Whether the set holds a persona other than `p`.
    pub fn has_other_than(self, p: PersonaIdx) -> bool {
        self.0 & !(1 << p.0) != 0
    }
}
