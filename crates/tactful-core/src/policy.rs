//! Room policy: how a persona behaves in a room.
//!
//! Policies are layered so a config can say "everywhere" once and override
//! per room and per persona. Resolution order, later wins key by key:
//!
//! 1. built-in defaults ([`RoomPolicy::default`]),
//! 2. `[rooms.default]`,
//! 3. `[rooms.default.personas.<persona>]`,
//! 4. `[rooms."<room id>"]`,
//! 5. `[rooms."<room id>".personas.<persona>]`.
//!
//! A room-specific setting beats a persona-wide one: an operator who sets
//! `#announcements` to `observe` means it for every persona.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rustc_hash::FxHashSet;

use crate::ids::{PersonaId, RoomId};

/// When a persona may reply in a room.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Reply only when addressed: DM, mention, `/command@persona`, or a reply
    /// to one of the persona's own messages.
    #[default]
    Mention,
    /// Any human message may get a reply, except one plainly meant for
    /// someone else.
    All,
    /// Reply only to `/command@persona` and DMs.
    Command,
    /// Never reply, not even to DMs; keep listening as context.
    Observe,
}

impl Mode {
    /// The config spelling of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Mention => "mention",
            Mode::All => "all",
            Mode::Command => "command",
            Mode::Observe => "observe",
        }
    }

    /// Parses the config spelling.
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "mention" => Mode::Mention,
            "all" => Mode::All,
            "command" => Mode::Command,
            "observe" => Mode::Observe,
            _ => return None,
        })
    }
}

/// `rate_limit = { replies = N, per_seconds = S }`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Replies allowed in one window. At least 1.
    pub replies: u32,
    /// Length of the sliding window. At least one second.
    pub per: Duration,
}

/// The resolved behaviour of one persona in one room.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RoomPolicy {
    /// When the persona may reply.
    pub mode: Mode,
    /// Whether the agent may answer with the silence token to send nothing.
    pub allow_silence: bool,
    /// The silence token, `NO_REPLY` unless configured.
    pub silence_token: Arc<str>,
    /// Record bot messages but never answer them.
    pub ignore_bots: bool,
    /// With `ignore_bots = false`: how many consecutive bot messages a room
    /// may have since the last human message before every persona stops
    /// answering bots there.
    pub max_bot_turns: u32,
    /// Senders allowed to get replies; empty means everyone.
    pub allowed_users: Arc<FxHashSet<Arc<str>>>,
    /// Per room and persona reply budget; `None` means unlimited.
    pub rate_limit: Option<RateLimit>,
}

impl Default for RoomPolicy {
    fn default() -> Self {
        RoomPolicy {
            mode: Mode::Mention,
            allow_silence: true,
            silence_token: Arc::from(crate::silence::DEFAULT_TOKEN),
            ignore_bots: true,
            max_bot_turns: 3,
            allowed_users: Arc::default(),
            rate_limit: Some(RateLimit {
                replies: 6,
                per: Duration::from_secs(120),
            }),
        }
    }
}

impl RoomPolicy {
    /// Whether `sender` may get a reply under the allowlist.
    pub fn allows(&self, sender: &str) -> bool {
        self.allowed_users.is_empty() || self.allowed_users.contains(sender)
    }
}

/// A partial policy: the keys one config layer sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyPatch {
    /// See [`RoomPolicy::mode`].
    pub mode: Option<Mode>,
    /// See [`RoomPolicy::allow_silence`].
    pub allow_silence: Option<bool>,
    /// See [`RoomPolicy::silence_token`].
    pub silence_token: Option<Arc<str>>,
    /// See [`RoomPolicy::ignore_bots`].
    pub ignore_bots: Option<bool>,
    /// See [`RoomPolicy::max_bot_turns`].
    pub max_bot_turns: Option<u32>,
    /// See [`RoomPolicy::allowed_users`].
    pub allowed_users: Option<Vec<String>>,
    /// See [`RoomPolicy::rate_limit`]; `Some(None)` switches the limit off.
    pub rate_limit: Option<Option<RateLimit>>,
}

impl PolicyPatch {
    fn apply(&self, p: &mut RoomPolicy) {
        if let Some(v) = self.mode {
            p.mode = v;
        }
        if let Some(v) = self.allow_silence {
            p.allow_silence = v;
        }
        if let Some(v) = &self.silence_token {
            p.silence_token = v.clone();
        }
        if let Some(v) = self.ignore_bots {
            p.ignore_bots = v;
        }
        if let Some(v) = self.max_bot_turns {
            p.max_bot_turns = v;
        }
        if let Some(v) = &self.allowed_users {
            p.allowed_users = Arc::new(v.iter().map(|s| Arc::from(s.as_str())).collect());
        }
        if let Some(v) = self.rate_limit {
            p.rate_limit = v;
        }
    }
}

/// One `[rooms.*]` table: the room's own keys and per-persona overrides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoomLayer {
    /// Keys for every persona in the room.
    pub all: PolicyPatch,
    /// Keys for one persona in the room.
    pub personas: BTreeMap<PersonaId, PolicyPatch>,
}

/// Every policy layer of a config; resolves (room, persona) pairs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicyTable {
    /// `[rooms.default]`.
    pub default: RoomLayer,
    /// `[rooms."<room id>"]`.
    pub rooms: BTreeMap<RoomId, RoomLayer>,
}

impl PolicyTable {
    /// The policy of `persona` in `room`, following the order in the module
    /// docs.
    pub fn resolve(&self, room: &RoomId, persona: &PersonaId) -> RoomPolicy {
        let mut p = RoomPolicy::default();
        self.default.all.apply(&mut p);
        if let Some(patch) = self.default.personas.get(persona) {
            patch.apply(&mut p);
        }
        if let Some(layer) = self.rooms.get(room) {
            layer.all.apply(&mut p);
            if let Some(patch) = layer.personas.get(persona) {
                patch.apply(&mut p);
            }
        }
        p
    }

    /// Whether `room` has a layer of its own (else it resolves like any
    /// unnamed room, and the engine can share one policy among them).
    pub fn has_room(&self, room: &RoomId) -> bool {
        self.rooms.contains_key(room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_resolve_in_documented_order() {
        let mut t = PolicyTable::default();
        t.default.all.mode = Some(Mode::All);
        t.default.all.max_bot_turns = Some(5);
        t.default.personas.insert(
            "chef".into(),
            PolicyPatch {
                mode: Some(Mode::Command),
                ignore_bots: Some(false),
                ..Default::default()
            },
        );
        let mut ops = RoomLayer::default();
        ops.all.mode = Some(Mode::Observe);
        ops.personas.insert(
            "docs".into(),
            PolicyPatch {
                mode: Some(Mode::Mention),
                ..Default::default()
            },
        );
        t.rooms.insert("ops".into(), ops);

        let p = t.resolve(&"lobby".into(), &"docs".into());
        assert_eq!((p.mode, p.max_bot_turns, p.ignore_bots), (Mode::All, 5, true));
        let p = t.resolve(&"lobby".into(), &"chef".into());
        assert_eq!((p.mode, p.ignore_bots), (Mode::Command, false));
        // The room beats the persona-wide layer...
        assert_eq!(t.resolve(&"ops".into(), &"chef".into()).mode, Mode::Observe);
        // ...and the room's persona layer beats the room.
        assert_eq!(t.resolve(&"ops".into(), &"docs".into()).mode, Mode::Mention);
    }

    #[test]
    fn empty_allowlist_allows_everyone() {
        let mut p = RoomPolicy::default();
        assert!(p.allows("anyone"));
        p.allowed_users = Arc::new(["alice".into()].into_iter().collect());
        assert!(p.allows("alice"));
        assert!(!p.allows("mallory"));
    }
}
