//! What the engine keeps per room: its transcript, its bots, each
//! persona's ledger there (own messages, rate limit, ambient buffer) and
//! the floor count of each unaddressed message.

#[allow(clippy::wildcard_imports)]
use super::*;

/// An ambient persona's buffer in one room.
#[derive(Debug, Default)]
pub(super) struct AmbientState {
    pub(super) buffer: Vec<Arc<Entry>>,
    /// When the timer trigger fires, once armed by the first message, and
    /// the timer's key (removed when the buffer empties another way).
    pub(super) due: Option<(Timestamp, u64)>,
    /// A trigger that fired but could not start yet, and why.
    pub(super) waiting: Option<(FlushTrigger, WaitReason)>,
    /// Whether the pair sits in the engine's concurrency queue.
    pub(super) queued: bool,
    /// When a cooldown wait wakes up (one timer per cooldown end).
    pub(super) wake: Option<Timestamp>,
    /// Flush turns (and their gates) running for this pair.
    pub(super) in_flight: Vec<TurnId>,
}

impl AmbientState {
    /// Drops a message that left the room's history from the buffer. A
    /// buffer emptied this way has nothing left to flush: its flush timer
    /// and any wait go with it, so the next message arms a fresh one — as
    /// it would in an engine restored after a restart, which sees only the
    /// window. Returns whether the pair must leave the concurrency queue.
    pub(super) fn forget(&mut self, id: &MsgId, timers: &mut BTreeMap<(Timestamp, u64), Timer>) -> bool {
        let before = self.buffer.len();
        self.buffer.retain(|e| e.id != *id);
        if self.buffer.len() == before || !self.buffer.is_empty() {
            return false;
        }
        if let Some(key) = self.due.take() {
            timers.remove(&key);
        }
        self.waiting = None;
        std::mem::take(&mut self.queued)
    }
}

/// What the engine remembers about one persona in one room.
#[derive(Debug, Default)]
pub(super) struct PersonaRoom {
    pub(super) own_ids: VecDeque<MsgId>,
    pub(super) own_set: rustc_hash::FxHashSet<MsgId>,
    pub(super) rate: RateLedger,
    pub(super) last_spoke: Option<Timestamp>,
    pub(super) ambient: Option<Box<AmbientState>>,
    /// Where its last turn's history window started (see
    /// [`Room::snapshot`]); not kept across a restart.
    pub(super) window_from: Option<u64>,
    /// Its spend here, once a budget applies (boxed: most rooms of most
    /// configs have none, and every room holds one of these per persona).
    pub(super) budget: Option<Box<MemberBudget>>,
}

/// A persona's spend in one room.
#[derive(Debug, Default)]
pub(super) struct MemberBudget {
    /// The room's own budget when it has one, else the room's share of
    /// the persona's (kept so a restart can add it up).
    pub(super) spend: crate::budget::SpendLedger,
    /// When it last told the room its budget was used up.
    pub(super) noticed: Option<Timestamp>,
}

impl PersonaRoom {
    pub(super) fn remember_own(&mut self, id: MsgId, limit: usize) {
        if self.own_set.insert(id.clone()) {
            self.own_ids.push_back(id);
            if self.own_ids.len() > limit
                && let Some(old) = self.own_ids.pop_front()
            {
                self.own_set.remove(&old);
            }
        }
    }

    pub(super) fn budget(&mut self) -> &mut MemberBudget {
        self.budget.get_or_insert_with(Box::default)
    }

    pub(super) fn ambient(&mut self) -> &mut AmbientState {
        self.ambient.get_or_insert_with(Box::default)
    }
}

/// What the engine remembers about one room.
#[derive(Debug)]
pub(super) struct Room {
    pub(super) policies: Vec<Arc<RoomPolicy>>,
    pub(super) history: History,
    /// Consecutive bot messages since the last human one.
    pub(super) bot_streak: u32,
    /// Bot accounts seen here that are not personas of ours: (id, name).
    pub(super) bots: Vec<(UserId, Arc<str>)>,
    pub(super) members: Vec<PersonaRoom>,
    /// How many personas have answered each unaddressed message.
    pub(super) floor: FxHashMap<MsgId, u32>,
    /// The room's budget for replies nobody asked for (`unprompted`).
    pub(super) unprompted: RateLedger,
    /// Unaddressed messages whose floor is being passed (see `floor.rs`).
    pub(super) passes: FxHashMap<MsgId, super::floor::Pass>,
    /// Whether the room is a direct conversation (as its messages say).
    pub(super) is_dm: bool,
}

impl Room {
    pub(super) fn new(
        personas: &[PersonaSpec],
        policies: &PolicyTable,
        shared: &[Arc<RoomPolicy>],
        limits: &ContextLimits,
        id: &RoomId,
    ) -> Room {
        let policies = if policies.has_room(id) {
            personas
                .iter()
                .map(|p| Arc::new(policies.resolve(id, &p.id)))
                .collect()
        } else {
            shared.to_vec()
        };
        Room {
            policies,
            history: History::new(limits.history),
            bot_streak: 0,
            bots: Vec::new(),
            members: (0..personas.len()).map(|_| PersonaRoom::default()).collect(),
            floor: FxHashMap::default(),
            passes: FxHashMap::default(),
            unprompted: RateLedger::default(),
            is_dm: false,
        }
    }

    /// The room `id` in `rooms`, created with its policies on first use.
    pub(super) fn entry<'a>(
        rooms: &'a mut FxHashMap<RoomId, Room>,
        personas: &[PersonaSpec],
        policies: &PolicyTable,
        shared: &[Arc<RoomPolicy>],
        limits: &ContextLimits,
        id: &RoomId,
    ) -> &'a mut Room {
        rooms
            .entry(id.clone())
            .or_insert_with(|| Room::new(personas, policies, shared, limits, id))
    }

    /// Updates what the room knows from a message's author: the bot streak,
    /// the other bots present, whether it is a DM.
    pub(super) fn note_author(&mut self, msg: &Message, author: Option<PersonaIdx>, is_bot: bool) {
        self.is_dm = msg.is_dm;
        if is_bot {
            self.bot_streak = self.bot_streak.saturating_add(1);
            if author.is_none()
                && !self
                    .bots
                    .iter()
                    .any(|(b, _)| handle_eq(b.as_str(), msg.sender.id.as_str()))
            {
                self.bots.push((msg.sender.id.clone(), msg.sender.name.clone()));
            }
        } else {
            self.bot_streak = 0;
        }
    }

    /// Who wrote the message `id` replies to, as far as the room remembers.
    pub(super) fn author_of(&self, id: &MsgId) -> ReplyAuthor {
        match self.history.get(id.as_str()) {
            Some(e) => match e.persona {
                Some(p) => ReplyAuthor::Persona(p),
                None if e.is_bot => ReplyAuthor::Bot,
                None => ReplyAuthor::Human,
            },
            // Older than the history: still known if a persona wrote it.
            None => self
                .members
                .iter()
                .position(|m| m.own_set.contains(id.as_str()))
                .map_or(ReplyAuthor::Human, |i| ReplyAuthor::Persona(PersonaIdx(i as u8))),
        }
    }

    /// Whether any of `triggers` already has `max` speakers.
    pub(super) fn floor_taken(&self, triggers: &[Arc<Entry>], max: u32) -> bool {
        triggers
            .iter()
            .any(|e| self.floor.get(&e.id).copied().unwrap_or(0) >= max)
    }

    /// Takes a slot of the room's unprompted budget for persona `p`'s
    /// turn: `Ok(true)` when taken, `Ok(false)` when the room has no such
    /// budget. When it is spent, the rate-limit slot the turn held
    /// (`reserved`) is given back and `Err(())` says the turn must not run.
    pub(super) fn reserve_unprompted(
        &mut self,
        now: Timestamp,
        p: PersonaIdx,
        reserved: bool,
    ) -> Result<bool, ()> {
        let Some(limit) = self.policies[p.0 as usize].unprompted else {
            return Ok(false);
        };
        if self.unprompted.try_reserve(now, &limit) {
            return Ok(true);
        }
        if reserved {
            self.members[p.0 as usize].rate.release();
        }
        Err(())
    }

    /// `e` as an agent is shown it: the message it replies to named by
    /// the transcript's own id. A person replies to the id the platform
    /// gave a persona's answer (`w7`, known to the engine as an alias of
    /// `guide:1`); an agent reading the history must find the answer by
    /// that reply (a `kb` agent's "say more"), and `tactful replay`, where
    /// no platform ids exist, shows the same request. Only what the
    /// request carries changes; the room keeps what it was told.
    pub(super) fn canonical(&self, e: &Arc<Entry>) -> Arc<Entry> {
        match e.reply_to.as_ref().and_then(|r| self.history.get(r.as_str())) {
            Some(to) if e.reply_to.as_ref() != Some(&to.id) => Arc::new(Entry {
                reply_to: Some(to.id.clone()),
                ..(**e).clone()
            }),
            _ => e.clone(),
        }
    }

    /// The history a turn about `triggers` sees (the retained messages up
    /// to the last trigger, triggers excluded, at most `max_turns` of
    /// them), and the place it starts at, for the persona's next turn
    /// (`from`: where its previous turn's window started).
    ///
    /// The window keeps its start while it holds at most `max_turns`
    /// messages; past that it drops its older part at once and keeps the
    /// newest half. So consecutive turns of a persona show the same oldest
    /// messages, and their prompts share a long identical prefix, which
    /// providers bill at a fraction of the price (cached input). Unlike a
    /// window fixed to the room's message count, one kept per persona
    /// moves only when that persona's own window is full: a persona asked
    /// every half window keeps its start for two calls, not one. A first
    /// turn (or one whose start has left the history) sees the newest
    /// `max_turns`.
    pub(super) fn snapshot(
        &self,
        triggers: &[Arc<Entry>],
        max_turns: usize,
        from: Option<u64>,
    ) -> (Vec<Arc<Entry>>, Option<u64>, Vec<usize>) {
        let is_trigger = |e: &Arc<Entry>| triggers.iter().any(|t| t.id == e.id);
        let last = triggers.last().map(|t| &t.id);
        let mut out: Vec<(u64, Arc<Entry>)> = Vec::new();
        // The prompt shows every trigger, so the next window must not
        // start after the first one (its prefix would lose it).
        let mut trigger_places = Vec::with_capacity(triggers.len());
        for (place, e) in self.history.iter_placed() {
            if is_trigger(e) {
                trigger_places.push(place);
            }
            if Some(&e.id) == last {
                break;
            }
            if !is_trigger(e) {
                out.push((place, e.clone()));
            }
        }
        if max_turns == 0 || out.is_empty() {
            return (Vec::new(), from, Vec::new());
        }
        let newest = |n: usize| out[out.len() - n.min(out.len())].0;
        let last_place = out[out.len() - 1].0;
        let start = match from {
            Some(f) if f <= last_place && out.len() - out.partition_point(|(p, _)| *p < f) <= max_turns => f,
            Some(_) => newest((max_turns / 2).max(1)),
            None => newest(max_turns),
        };
        out.retain(|(place, _)| *place >= start);
        // Where each trigger sits among what is shown. (A trigger the
        // history no longer holds is not among its places: it goes last.)
        let trigger_at = if trigger_places.len() == triggers.len() {
            trigger_places
                .iter()
                .map(|t| out.partition_point(|(p, _)| p < t))
                .collect()
        } else {
            Vec::new()
        };
        let shown_from = trigger_places.first().map_or(start, |&t| t.min(start));
        (
            out.into_iter().map(|(_, e)| e).collect(),
            Some(shown_from),
            trigger_at,
        )
    }
}
