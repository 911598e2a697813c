//! tactful's own words to a person who asked a persona directly: the
//! budget's notice when it cannot pay for an answer, and a sign when the
//! agent chose silence (`addressed_silence`): a reaction on their message,
//! or a short notice where the platform has no reactions.
//!
//! A notice is a reply like any other (recorded, stored, passed through
//! before-send hooks) but costs no call and no slot of the rate limit.

#[allow(clippy::wildcard_imports)]
use super::*;
use crate::policy::AddressedSilence;

/// A reaction the engine asks the platform to put on a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReactNote {
    /// When.
    pub at: Timestamp,
    /// The turn that chose silence.
    pub turn: TurnId,
    /// Who reacts.
    pub persona: PersonaId,
    /// Where.
    pub room: RoomId,
    /// The thread the message is in, if any (Discord addresses a thread's
    /// messages through the thread).
    pub thread: Option<ThreadId>,
    /// The person's message.
    pub msg: MsgId,
    /// The reaction.
    pub emoji: Arc<str>,
    /// What to say instead where the platform has no reactions
    /// ([`Engine::react_unsupported`]).
    pub notice: Arc<str>,
}

impl Engine {
    /// Sends the budget's notice for an addressed message `p` cannot pay
    /// to answer, as a reply to it.
    pub(super) fn budget_notice(
        &mut self,
        now: Timestamp,
        turn_id: TurnId,
        room_id: &RoomId,
        p: PersonaIdx,
        entry: &Arc<Entry>,
    ) {
        let Some(room) = self.rooms.get_mut(room_id) else {
            return;
        };
        room.members[p.0 as usize].budget().noticed = Some(now);
        let text = match self.payer(&self.rooms[room_id], p) {
            Some((budget, _)) => budget.notice,
            None => return,
        };
        self.notice(now, turn_id, room_id, p, entry, &text);
    }

    /// A turn that answered an addressed message chose silence: the room's
    /// `addressed_silence` says what the person sees.
    pub(super) fn addressed_silence(&mut self, now: Timestamp, turn_id: TurnId, turn: &Turn) {
        let Some(entry) = turn.triggers.last() else {
            return;
        };
        match turn.policy.addressed_silence {
            AddressedSilence::Silent => {}
            AddressedSilence::React => self.out.push_back(Output::React(ReactNote {
                at: now,
                turn: turn_id,
                persona: self.personas[turn.persona.0 as usize].id.clone(),
                room: turn.room.clone(),
                thread: entry.thread.clone(),
                msg: entry.id.clone(),
                emoji: turn.policy.silence_emoji.clone(),
                notice: turn.policy.silence_notice.clone(),
            })),
            AddressedSilence::Notice => {
                let t = self.new_turn_id();
                let text = turn.policy.silence_notice.clone();
                self.notice(now, t, &turn.room, turn.persona, entry, &text);
            }
        }
    }

    /// The platform of `note`'s room has no reactions: the persona says
    /// the notice instead, as a reply to the message. Nothing happens when
    /// the message has left the room's history (or the persona the config).
    pub fn react_unsupported(&mut self, now: Timestamp, note: &ReactNote) {
        let Some(p) = self.persona_index(note.persona.as_str()) else {
            return;
        };
        let Some(entry) = self
            .rooms
            .get(&note.room)
            .and_then(|r| r.history.get(note.msg.as_str()))
            .cloned()
        else {
            return;
        };
        let t = self.new_turn_id();
        self.notice(now, t, &note.room, p, &entry, &note.notice);
    }

    /// Sends `text` from `p` as a reply to `entry`, as turn `turn_id`.
    fn notice(
        &mut self,
        now: Timestamp,
        turn_id: TurnId,
        room_id: &RoomId,
        p: PersonaIdx,
        entry: &Arc<Entry>,
        text: &str,
    ) {
        let Some(room) = self.rooms.get(room_id) else {
            return;
        };
        let turn = Turn {
            kind: TurnKind::Reply,
            persona: p,
            room: room_id.clone(),
            thread: entry.thread.clone(),
            is_dm: room.is_dm,
            triggers: vec![entry.clone()],
            reserved: false,
            policy: room.policies[p.0 as usize].clone(),
            answers_bot: entry.is_bot,
            unaddressed: false,
            holds_flush_slot: false,
            gate_for: None,
            gate_timer: None,
            strip_reasoning: false,
            reasoning_chars: 0,
            held: None,
            schedule: None,
            floor_pass: false,
            unprompted: false,
            budget: None,
            used: None,
            answered: false,
        };
        let d = Directives {
            reply_to: Some(entry.id.to_string()),
            ..Directives::default()
        };
        let held = hooked::Held {
            first: (d, text.to_owned()),
            more: Vec::new(),
            notice: true,
        };
        self.release(now, turn_id, turn, held);
    }
}
