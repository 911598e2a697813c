//! Room policy: how a persona behaves in a room.
//!
//! Policies are layered so a config can say "everywhere" once and override
//! per room and per persona. Resolution order, later wins key by key:
//!
//! 1. built-in defaults ([`RoomPolicy::default`]),
//! 2. `[rooms.default]`,
//! 3. `[rooms.default.personas.<persona>]`,
//! 4. the default layer set in the operator console, then its persona
//!    sub-layer (`PolicyTable::live_default`),
//! 5. `[rooms."<room id>"]`,
//! 6. `[rooms."<room id>".personas.<persona>]`,
//! 7. the room's layer set in the operator console, then its persona
//!    sub-layer (`PolicyTable::live`).
//!
//! The console's default sits above the file's default and below every
//! room's own layers: a room the file names keeps what it names.
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
    /// Listen to everything, answer addressed messages at once, and show
    /// the agent unaddressed messages in occasional batches it may answer
    /// or let pass in silence.
    Ambient,
}

impl Mode {
    /// The config spelling of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Mention => "mention",
            Mode::All => "all",
            Mode::Command => "command",
            Mode::Observe => "observe",
            Mode::Ambient => "ambient",
        }
    }

    /// What the mode means to someone in the room, in a few plain words
    /// (the web room's introduction, `tactful check`'s summary): a
    /// newcomer should not need the docs to know whom to address.
    pub fn in_plain_words(self) -> &'static str {
        match self {
            Mode::Mention => "answers when you mention it, reply to it or message it directly",
            Mode::All => "may answer any message that is not meant for someone else",
            Mode::Command => "answers only its /commands and direct messages",
            Mode::Observe => "only listens; it never answers",
            Mode::Ambient => {
                "reads everything and now and then answers what it can help with; mention it for an answer at once"
            }
        }
    }

    /// Parses the config spelling.
    pub fn parse(s: &str) -> Option<Mode> {
        Some(match s {
            "mention" => Mode::Mention,
            "all" => Mode::All,
            "command" => Mode::Command,
            "observe" => Mode::Observe,
            "ambient" => Mode::Ambient,
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

/// When an ambient persona's buffer is shown to its agent.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AmbientPolicy {
    /// Flush this long after the first buffered message...
    pub flush_after: Duration,
    /// ...give or take this fraction (0 ≤ jitter < 1), drawn from the
    /// engine's seeded generator so rooms do not flush in lockstep.
    pub jitter: f64,
    /// Flush as soon as this many messages are buffered.
    pub flush_messages: u32,
    /// The buffer never holds more: reaching it flushes at once, whatever
    /// the cooldown or the concurrency bound say.
    pub hard_cap: u32,
    /// After the persona spoke in the room, no flush starts for this long.
    pub cooldown: Duration,
}

impl Default for AmbientPolicy {
    fn default() -> Self {
        AmbientPolicy {
            flush_after: Duration::from_secs(60),
            jitter: 0.2,
            flush_messages: 10,
            hard_cap: 50,
            cooldown: Duration::from_secs(30),
        }
    }
}

/// The reply-decision gate: a cheap classifier asked REPLY or SKIP before
/// the persona's real agent answers a message not addressed to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatePolicy {
    /// The `[agents]` key of the classifier.
    pub agent: Arc<str>,
    /// How long to wait for it; then the gate fails open (REPLY).
    pub timeout: Duration,
    /// Whether ambient flushes are gated too.
    pub in_ambient: bool,
}

/// What the room sees when an addressed turn fails.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnError {
    /// One short notice, as a reply to the message (the trace has the
    /// details).
    #[default]
    Notice,
    /// Nothing; the failure is only in the trace and logs.
    Silent,
}

/// What a person who asked a persona directly sees when its agent
/// answers `NO_REPLY`: without a sign, they cannot tell silence from a
/// message nobody heard.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AddressedSilence {
    /// A reaction on their message ([`RoomPolicy::silence_emoji`]); on a
    /// platform without reactions (IRC), the notice instead.
    #[default]
    React,
    /// A short notice, as a reply ([`RoomPolicy::silence_notice`]).
    Notice,
    /// Nothing.
    Silent,
}

/// The reaction of an addressed silence.
pub const DEFAULT_SILENCE_EMOJI: &str = "👀";

/// The notice of an addressed silence.
pub const DEFAULT_SILENCE_NOTICE: &str = "I read this, but I have nothing to add.";

/// The text of the error notice.
pub const ERROR_NOTICE: &str = "Sorry, I couldn't answer that just now.";

/// The resolved behaviour of one persona in one room.
#[derive(Clone, Debug, PartialEq)]
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
    /// The room's budget for replies nobody asked for (`all` and ambient
    /// turns), shared by every persona there: how much unasked bot talk the
    /// room tolerates. `None` means unlimited.
    pub unprompted: Option<RateLimit>,
    /// Which spend budget pays for the persona's calls here.
    pub budget: BudgetScope,
    /// Ambient-mode timing.
    pub ambient: AmbientPolicy,
    /// The reply-decision gate, when enabled.
    pub reply_gate: Option<GatePolicy>,
    /// How many personas may answer one unaddressed message.
    pub floor_max_speakers: u32,
    /// How the personas eligible for one unaddressed message share it.
    pub floor_strategy: FloorStrategy,
    /// The free check that keeps small talk from costing a call.
    pub pre_gate: PreGate,
    /// With [`FloorStrategy::Pass`]: how long one offered persona has
    /// before the next is offered the floor too.
    pub floor_pass_timeout: Duration,
    /// What the room sees when an addressed turn fails. Ambient, gate and
    /// unaddressed turns always fail silently.
    pub on_error: OnError,
    /// What an addressed message answered `NO_REPLY` gets.
    pub addressed_silence: AddressedSilence,
    /// The reaction [`AddressedSilence::React`] puts on it.
    pub silence_emoji: Arc<str>,
    /// The notice [`AddressedSilence::Notice`] sends (and `React` where the
    /// platform has no reactions).
    pub silence_notice: Arc<str>,
    /// The longest reply sent, in characters. A longer answer is cut and
    /// ends with [`TRUNCATED_MARK`]: a runaway agent must not flood the
    /// room (50 MB of output would be thousands of posts) or the store.
    pub max_reply_chars: usize,
}

/// Which spend budget pays for a persona's calls in a room.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum BudgetScope {
    /// The persona's own (`budget` on the persona), shared by every room
    /// that does not say otherwise; none if it has none.
    #[default]
    Persona,
    /// One of the room's own for each persona, counted apart from the
    /// persona's.
    Room(crate::budget::TokenBudget),
    /// None: calls here are not limited or counted.
    Off,
}

/// The pre-gate (see [`crate::small_talk`]): an unaddressed message that
/// is only small talk is recorded with reason `pre_gate`, without a call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreGate {
    /// Whether the room uses it.
    pub enabled: bool,
    /// The phrases that are small talk, lower-case.
    pub phrases: Arc<[Arc<str>]>,
    /// The longest message of only emoji and punctuation it takes.
    pub max_chars: usize,
}

impl Default for PreGate {
    fn default() -> Self {
        PreGate {
            enabled: true,
            phrases: crate::small_talk::default_phrases(),
            max_chars: crate::small_talk::DEFAULT_MAX_CHARS,
        }
    }
}

/// How the personas eligible for one unaddressed message share it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FloorStrategy {
    /// One at a time: the floor is offered to one persona (a gated one
    /// first, then whoever spoke least recently here, then config order)
    /// and passes on only when it declines, fails or takes too long. One
    /// model call per question, usually.
    #[default]
    Pass,
    /// All at once: every eligible persona is called and the first reply
    /// takes the floor; the others' replies are withheld (paid for all
    /// the same). The fastest first answer.
    Race,
}

impl FloorStrategy {
    /// The config's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            FloorStrategy::Pass => "pass",
            FloorStrategy::Race => "race",
        }
    }
}

/// The default [`RoomPolicy::floor_pass_timeout`]: an agent still writing
/// after this long is likely stuck or slow, and the question should not
/// wait on it alone.
pub const DEFAULT_FLOOR_PASS_TIMEOUT: Duration = Duration::from_secs(30);

/// The default [`RoomPolicy::max_reply_chars`].
pub const DEFAULT_MAX_REPLY_CHARS: usize = 20_000;

/// What ends a reply cut at [`RoomPolicy::max_reply_chars`].
pub const TRUNCATED_MARK: &str = "\n…(truncated)";

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
            unprompted: None,
            budget: BudgetScope::Persona,
            ambient: AmbientPolicy::default(),
            reply_gate: None,
            floor_max_speakers: 1,
            floor_strategy: FloorStrategy::Pass,
            pre_gate: PreGate::default(),
            floor_pass_timeout: DEFAULT_FLOOR_PASS_TIMEOUT,
            on_error: OnError::Notice,
            addressed_silence: AddressedSilence::React,
            silence_emoji: Arc::from(DEFAULT_SILENCE_EMOJI),
            silence_notice: Arc::from(DEFAULT_SILENCE_NOTICE),
            max_reply_chars: DEFAULT_MAX_REPLY_CHARS,
        }
    }
}

impl RoomPolicy {
    /// Whether `sender` may get a reply under the allowlist, by id or by
    /// the handle its platform vouches for (see [`crate::Sender::handle`]).
    pub fn allows(&self, sender: &str, handle: Option<&str>) -> bool {
        self.allowed_users.is_empty()
            || self.allowed_users.contains(sender)
            // Handles (Telegram usernames) ignore case, as their platforms do.
            || handle.is_some_and(|h| {
                self.allowed_users
                    .iter()
                    .any(|a| crate::addressing::handle_eq(a, h))
            })
    }
}

/// The ambient keys one config layer sets.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AmbientPatch {
    /// See [`AmbientPolicy::flush_after`].
    pub flush_after: Option<Duration>,
    /// See [`AmbientPolicy::jitter`].
    pub jitter: Option<f64>,
    /// See [`AmbientPolicy::flush_messages`].
    pub flush_messages: Option<u32>,
    /// See [`AmbientPolicy::hard_cap`].
    pub hard_cap: Option<u32>,
    /// See [`AmbientPolicy::cooldown`].
    pub cooldown: Option<Duration>,
}

/// The gate keys one config layer sets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GatePatch {
    /// Switches the gate on or off.
    pub enabled: Option<bool>,
    /// See [`GatePolicy::agent`].
    pub agent: Option<Arc<str>>,
    /// See [`GatePolicy::timeout`].
    pub timeout: Option<Duration>,
    /// See [`GatePolicy::in_ambient`].
    pub in_ambient: Option<bool>,
}

/// Gate keys as resolved so far; becomes a [`GatePolicy`] when enabled.
#[derive(Clone, Debug, Default)]
struct GateDraft {
    enabled: bool,
    agent: Option<Arc<str>>,
    timeout: Option<Duration>,
    in_ambient: bool,
}

/// The default time the gate is given to answer.
pub const DEFAULT_GATE_TIMEOUT: Duration = Duration::from_millis(3000);

/// A partial policy: the keys one config layer sets.
#[derive(Clone, Debug, Default, PartialEq)]
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
    /// See [`RoomPolicy::unprompted`]; `Some(None)` switches it off.
    pub unprompted: Option<Option<RateLimit>>,
    /// See [`RoomPolicy::budget`].
    pub budget: Option<BudgetScope>,
    /// Ambient keys.
    pub ambient: AmbientPatch,
    /// Gate keys.
    pub reply_gate: GatePatch,
    /// See [`RoomPolicy::floor_max_speakers`].
    pub floor_max_speakers: Option<u32>,
    /// See [`RoomPolicy::floor_strategy`].
    pub floor_strategy: Option<FloorStrategy>,
    /// See [`PreGate::enabled`].
    pub pre_gate_enabled: Option<bool>,
    /// See [`PreGate::phrases`].
    pub pre_gate_phrases: Option<Arc<[Arc<str>]>>,
    /// See [`PreGate::max_chars`].
    pub pre_gate_max_chars: Option<usize>,
    /// See [`RoomPolicy::floor_pass_timeout`].
    pub floor_pass_timeout: Option<Duration>,
    /// See [`RoomPolicy::on_error`].
    pub on_error: Option<OnError>,
    /// See [`RoomPolicy::addressed_silence`].
    pub addressed_silence: Option<AddressedSilence>,
    /// See [`RoomPolicy::silence_emoji`].
    pub silence_emoji: Option<Arc<str>>,
    /// See [`RoomPolicy::silence_notice`].
    pub silence_notice: Option<Arc<str>>,
    /// See [`RoomPolicy::max_reply_chars`].
    pub max_reply_chars: Option<usize>,
}

impl PolicyPatch {
    /// This patch with every key it leaves unset taken from `defaults`:
    /// what a platform gives its rooms (email's stricter rate limit on a
    /// list) sits under the room's own table, key by key.
    pub fn over(mut self, defaults: &PolicyPatch) -> PolicyPatch {
        macro_rules! fill {
            ($($($field:ident).+),+ $(,)?) => {
                $(if self.$($field).+.is_none() {
                    self.$($field).+ = defaults.$($field).+.clone();
                })+
            };
        }
        fill!(
            mode,
            allow_silence,
            silence_token,
            ignore_bots,
            max_bot_turns,
            allowed_users,
            rate_limit,
            unprompted,
            budget,
            ambient.flush_after,
            ambient.jitter,
            ambient.flush_messages,
            ambient.hard_cap,
            ambient.cooldown,
            reply_gate.enabled,
            reply_gate.agent,
            reply_gate.timeout,
            reply_gate.in_ambient,
            floor_max_speakers,
            floor_strategy,
            pre_gate_enabled,
            pre_gate_phrases,
            pre_gate_max_chars,
            floor_pass_timeout,
            on_error,
            addressed_silence,
            silence_emoji,
            silence_notice,
            max_reply_chars,
        );
        self
    }

    fn apply(&self, p: &mut RoomPolicy, gate: &mut GateDraft) {
        let a = &self.ambient;
        if let Some(v) = a.flush_after {
            p.ambient.flush_after = v;
        }
        if let Some(v) = a.jitter {
            p.ambient.jitter = v;
        }
        if let Some(v) = a.flush_messages {
            p.ambient.flush_messages = v;
        }
        if let Some(v) = a.hard_cap {
            p.ambient.hard_cap = v;
        }
        if let Some(v) = a.cooldown {
            p.ambient.cooldown = v;
        }
        let g = &self.reply_gate;
        if let Some(v) = g.enabled {
            gate.enabled = v;
        }
        if let Some(v) = &g.agent {
            gate.agent = Some(v.clone());
        }
        if let Some(v) = g.timeout {
            gate.timeout = Some(v);
        }
        if let Some(v) = g.in_ambient {
            gate.in_ambient = v;
        }
        if let Some(v) = self.floor_max_speakers {
            p.floor_max_speakers = v;
        }
        if let Some(v) = self.unprompted {
            p.unprompted = v;
        }
        if let Some(v) = &self.budget {
            p.budget = v.clone();
        }
        if let Some(v) = self.floor_strategy {
            p.floor_strategy = v;
        }
        if let Some(v) = self.pre_gate_enabled {
            p.pre_gate.enabled = v;
        }
        if let Some(v) = &self.pre_gate_phrases {
            p.pre_gate.phrases = v.clone();
        }
        if let Some(v) = self.pre_gate_max_chars {
            p.pre_gate.max_chars = v;
        }
        if let Some(v) = self.floor_pass_timeout {
            p.floor_pass_timeout = v;
        }
        if let Some(v) = self.on_error {
            p.on_error = v;
        }
        if let Some(v) = self.addressed_silence {
            p.addressed_silence = v;
        }
        if let Some(v) = &self.silence_emoji {
            p.silence_emoji = v.clone();
        }
        if let Some(v) = &self.silence_notice {
            p.silence_notice = v.clone();
        }
        if let Some(v) = self.max_reply_chars {
            p.max_reply_chars = v;
        }
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
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RoomLayer {
    /// Keys for every persona in the room.
    pub all: PolicyPatch,
    /// Keys for one persona in the room.
    pub personas: BTreeMap<PersonaId, PolicyPatch>,
}

/// Every policy layer of a config; resolves (room, persona) pairs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyTable {
    /// `[rooms.default]`.
    pub default: RoomLayer,
    /// `[rooms."<room id>"]`.
    pub rooms: BTreeMap<RoomId, RoomLayer>,
    /// Layers set in the operator console, one per room: above the file's
    /// (a key set here wins; one left out keeps the file's value).
    pub live: BTreeMap<RoomId, RoomLayer>,
    /// The default layer set in the operator console: above
    /// `[rooms.default]`, below the rooms' own layers.
    pub live_default: Option<RoomLayer>,
}

impl PolicyTable {
    /// Whether any layer gives a room a spend budget of its own.
    pub fn any_room_budget(&self) -> bool {
        let layers = std::iter::once(&self.default)
            .chain(self.rooms.values())
            .chain(self.live.values())
            .chain(self.live_default.as_ref());
        layers
            .flat_map(|l| std::iter::once(&l.all).chain(l.personas.values()))
            .any(|p| matches!(p.budget, Some(BudgetScope::Room(_))))
    }

    /// The policy of `persona` in `room`, following the order in the module
    /// docs.
    ///
    /// An enabled gate without an agent resolves to no gate; config loading
    /// rejects that case with a message before an engine is built.
    pub fn resolve(&self, room: &RoomId, persona: &PersonaId) -> RoomPolicy {
        let (mut p, gate) = self.draft(Some(room), persona);
        p.reply_gate = match (gate.enabled, gate.agent) {
            (true, Some(agent)) => Some(GatePolicy {
                agent,
                timeout: gate.timeout.unwrap_or(DEFAULT_GATE_TIMEOUT),
                in_ambient: gate.in_ambient,
            }),
            _ => None,
        };
        p
    }

    /// Applies the layers for (room, persona) in order; `None` is any room
    /// without a layer of its own.
    fn draft(&self, room: Option<&RoomId>, persona: &PersonaId) -> (RoomPolicy, GateDraft) {
        let mut p = RoomPolicy::default();
        let mut gate = GateDraft::default();
        let layer = room.and_then(|r| self.rooms.get(r));
        let live = room.and_then(|r| self.live.get(r));
        let live_default = self.live_default.as_ref();
        let patches = [
            Some(&self.default.all),
            self.default.personas.get(persona),
            live_default.map(|l| &l.all),
            live_default.and_then(|l| l.personas.get(persona)),
            layer.map(|l| &l.all),
            layer.and_then(|l| l.personas.get(persona)),
            live.map(|l| &l.all),
            live.and_then(|l| l.personas.get(persona)),
        ];
        for patch in patches.into_iter().flatten() {
            patch.apply(&mut p, &mut gate);
        }
        (p, gate)
    }

    /// The first (room, persona) pair whose gate is enabled without an
    /// agent (room `None` is the default layer), so config loading can say
    /// where.
    pub fn gate_without_agent(&self, personas: &[PersonaId]) -> Option<(Option<RoomId>, PersonaId)> {
        let rooms = std::iter::once(None).chain(self.rooms.keys().chain(self.live.keys()).map(Some));
        for room in rooms {
            for persona in personas {
                let (_, gate) = self.draft(room, persona);
                if gate.enabled && gate.agent.is_none() {
                    return Some((room.cloned(), persona.clone()));
                }
            }
        }
        None
    }

    /// Whether `room` has a layer of its own (else it resolves like any
    /// unnamed room, and the engine can share one policy among them).
    pub fn has_room(&self, room: &RoomId) -> bool {
        self.rooms.contains_key(room) || self.live.contains_key(room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platforms_defaults_fill_only_what_a_room_table_leaves_unset() {
        let limit = |n| {
            Some(Some(RateLimit {
                replies: n,
                per: Duration::from_secs(3600),
            }))
        };
        let defaults = PolicyPatch {
            rate_limit: limit(4),
            mode: Some(Mode::Mention),
            ..PolicyPatch::default()
        };
        let room = PolicyPatch {
            mode: Some(Mode::All),
            ..PolicyPatch::default()
        };
        let merged = room.over(&defaults);
        assert_eq!((merged.mode, merged.rate_limit), (Some(Mode::All), limit(4)));
        let off = PolicyPatch {
            rate_limit: Some(None),
            ..PolicyPatch::default()
        };
        assert_eq!(
            off.over(&defaults).rate_limit,
            Some(None),
            "a room table's \"off\" wins"
        );
    }

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

        // The console's default beats the file's default, not a room's own.
        let mut live = RoomLayer::default();
        live.all.mode = Some(Mode::Observe);
        live.all.max_bot_turns = Some(1);
        t.live_default = Some(live);
        let p = t.resolve(&"lobby".into(), &"docs".into());
        assert_eq!((p.mode, p.max_bot_turns), (Mode::Observe, 1));
        assert_eq!(t.resolve(&"ops".into(), &"docs".into()).mode, Mode::Mention);
        assert_eq!(t.resolve(&"ops".into(), &"docs".into()).max_bot_turns, 1);
    }

    #[test]
    fn empty_allowlist_allows_everyone() {
        let mut p = RoomPolicy::default();
        assert!(p.allows("anyone", None));
        p.allowed_users = Arc::new(["alice".into()].into_iter().collect());
        assert!(p.allows("alice", None));
        assert!(!p.allows("mallory", None));
        assert!(!p.allows("mallory", Some("@mallory")));
        p.allowed_users = Arc::new(["@Alice".into()].into_iter().collect());
        assert!(p.allows("tg:1", Some("@alice")));
        assert!(!p.allows("@alice", None), "an id is not a handle");
    }
}
