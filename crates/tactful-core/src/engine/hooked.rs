//! A turn's replies on their way out: through the before-send hooks that
//! apply (`crate::hooks`), then the last-moment guards, then delivery.
//!
//! Without hooks for the persona and room, replies go straight on. With
//! some, the turn waits (still in flight, its rate-limit slot still
//! reserved) for the driver to run them and report with
//! [`Engine::handle_hook_result`]; the guards (bot-turn limit, floor) are
//! checked after that, since the room may have moved on while a hook ran.

use std::sync::Arc;

use super::more_replies::TurnCtx;
use super::{Engine, Output, Turn};
use crate::decision::Reason;
use crate::directives::Directives;
use crate::hooks::{HookNote, HookOutcome, HookReply, HookRequest};
use crate::ids::TurnId;
use crate::time::Timestamp;

/// A turn's replies, held while its hooks run.
#[derive(Debug)]
pub(super) struct Held {
    /// The first reply: its directives and its text.
    pub(super) first: (Directives, String),
    /// Further replies (`directives::split_replies`).
    pub(super) more: Vec<(Directives, String)>,
    /// Whether the first is tactful's notice after a failed turn (no
    /// guards, no rate-limit slot).
    pub(super) notice: bool,
}

impl Engine {
    /// The hooks a reply of persona `p` in the turn's room passes through.
    fn hooks_for(&self, turn: &Turn) -> Vec<Arc<str>> {
        let persona = &self.personas[turn.persona.0 as usize].id;
        self.hooks
            .iter()
            .filter(|h| h.applies(persona, &turn.room))
            .map(|h| h.name.clone())
            .collect()
    }

    /// Sends a turn's replies, through its hooks first when any apply.
    pub(super) fn release(&mut self, now: Timestamp, turn_id: TurnId, mut turn: Turn, held: Held) {
        let hooks = self.hooks_for(&turn);
        if hooks.is_empty() {
            self.send_replies(now, turn_id, turn, held);
            return;
        }
        let replies = std::iter::once(&held.first)
            .chain(held.more.iter())
            .map(|(d, text)| HookReply {
                text: text.clone(),
                reply_to: d.reply_to.clone(),
            })
            .collect();
        self.out.push_back(Output::RunHooks(Box::new(HookRequest {
            turn: turn_id,
            kind: turn.kind,
            at: now,
            persona: self.personas[turn.persona.0 as usize].id.clone(),
            room: turn.room.clone(),
            thread: turn.thread.clone(),
            hooks,
            replies,
            triggers: turn.triggers.clone(),
            notice: held.notice,
        })));
        turn.held = Some(Box::new(held));
        self.turns.insert(turn_id, turn);
    }

    /// Reports how a turn's replies came through their hooks, one outcome
    /// per reply of the [`HookRequest`], in order. A reply without an
    /// outcome is not sent (nothing unreviewed goes out). Unknown turns,
    /// and turns not waiting for hooks, are ignored.
    pub fn handle_hook_result(&mut self, now: Timestamp, turn_id: TurnId, outcomes: Vec<HookOutcome>) {
        let Some(held) = self.turns.get_mut(&turn_id).and_then(|t| t.held.take()) else {
            return;
        };
        let turn = self.turns.remove(&turn_id).expect("found above");
        let persona = self.personas[turn.persona.0 as usize].id.clone();
        let msgs = turn.msgs();
        let mut texts = Vec::with_capacity(outcomes.len());
        for (reply, outcome) in outcomes.into_iter().enumerate() {
            for step in outcome.steps {
                self.out.push_back(Output::Hook(HookNote {
                    at: now,
                    turn: turn_id,
                    kind: turn.kind,
                    persona: persona.clone(),
                    room: turn.room.clone(),
                    msgs: msgs.clone(),
                    reply,
                    step,
                }));
            }
            texts.push(outcome.text);
        }
        let mut texts = texts.into_iter();
        let first = texts.next().flatten();
        let more: Vec<(Directives, String)> = held
            .more
            .into_iter()
            .zip(texts.chain(std::iter::repeat(None)))
            .filter_map(|((d, _), text)| Some((d, text?)))
            .collect();
        match first {
            Some(text) => {
                let held = Held {
                    first: (held.first.0, text),
                    more,
                    notice: held.notice,
                };
                self.send_replies(now, turn_id, turn, held);
            }
            None => {
                // Cancelled: like silence, the slot goes back.
                let end = self.turn_end(now, turn_id, &turn);
                self.out.push_back(Output::Withheld(end, Reason::Hook));
                let ctx = TurnCtx::of(&turn);
                self.finish(now, turn_id, turn, false);
                if !more.is_empty() {
                    self.deliver_more(now, turn_id, &ctx, more);
                }
            }
        }
    }

    /// The last-moment guards, then delivery of the first reply and any
    /// further ones.
    fn send_replies(&mut self, now: Timestamp, turn_id: TurnId, turn: Turn, held: Held) {
        if !held.notice {
            let room = self.rooms.get(&turn.room).expect("a turn's room exists");
            let guard = if turn.answers_bot && room.bot_streak >= turn.policy.max_bot_turns {
                // Other bots spoke while this turn ran and the room reached
                // its limit: answering now would extend the loop.
                Some(Reason::BotTurnLimit)
            } else if turn.unaddressed && room.floor_taken(&turn.triggers, turn.policy.floor_max_speakers) {
                Some(Reason::FloorTaken)
            } else {
                None
            };
            if let Some(reason) = guard {
                let end = self.turn_end(now, turn_id, &turn);
                self.out.push_back(Output::Withheld(end, reason));
                self.finish(now, turn_id, turn, false);
                return;
            }
        }
        let ctx = TurnCtx::of(&turn);
        let (d, body) = held.first;
        self.deliver(now, turn_id, turn, &body, d, held.notice);
        if !held.more.is_empty() {
            self.deliver_more(now, turn_id, &ctx, held.more);
        }
    }
}
