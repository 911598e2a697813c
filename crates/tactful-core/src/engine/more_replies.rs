//! The further replies of one turn.
//!
//! An agent that read a batch may answer several of its messages
//! separately, each reply under its own `[[reply_to:…]]` header
//! ([`crate::directives::split_replies`]). The first reply goes through
//! [`Engine::deliver`] like any; each further one here: it must name a
//! message of the room, must not be silence, and takes a rate-limit slot
//! of its own when the room has a limit (a turn's reserved slot pays for
//! its first reply only). What the limit holds back is counted on the
//! turn's last reply sent (`more_withheld`), so the trace says so.

use std::sync::Arc;

use super::results::cap_reply;
use super::{Engine, Outgoing, Output};
use crate::directives::Directives;
use crate::ids::{MsgId, RoomId, ThreadId, TurnId};
use crate::persona::PersonaIdx;
use crate::policy::RoomPolicy;
use crate::silence;
use crate::time::Timestamp;
use crate::turn::TurnKind;

/// What further replies need of the turn, taken before its first reply
/// ends it.
pub(super) struct TurnCtx {
    pub(super) kind: TurnKind,
    pub(super) persona: PersonaIdx,
    pub(super) room: RoomId,
    pub(super) thread: Option<ThreadId>,
    pub(super) is_dm: bool,
    pub(super) policy: Arc<RoomPolicy>,
}

impl TurnCtx {
    /// What further replies need of `turn`.
    pub(super) fn of(turn: &super::Turn) -> Self {
        TurnCtx {
            kind: turn.kind,
            persona: turn.persona,
            room: turn.room.clone(),
            thread: turn.thread.clone(),
            is_dm: turn.is_dm,
            policy: turn.policy.clone(),
        }
    }
}

impl Engine {
    /// Sends the further replies of turn `turn_id`, after its first.
    pub(super) fn deliver_more(
        &mut self,
        now: Timestamp,
        turn_id: TurnId,
        ctx: &TurnCtx,
        more: Vec<(Directives, String)>,
    ) {
        let mut withheld = 0u32;
        for (d, body) in more {
            let body = body.trim();
            let silent = ctx.policy.allow_silence && silence::is_silence(body, &ctx.policy.silence_token);
            if body.is_empty() || silent {
                continue;
            }
            let Some(room) = self.rooms.get_mut(&ctx.room) else {
                return;
            };
            // A further reply answers a message of this room, or none at all.
            let Some(reply_to) = d.reply_to.filter(|id| room.history.contains(id)).map(MsgId::new) else {
                continue;
            };
            let member = &mut room.members[ctx.persona.0 as usize];
            if let Some(limit) = &ctx.policy.rate_limit {
                if !member.rate.try_reserve(now, limit) {
                    withheld += 1;
                    continue;
                }
                member.rate.commit(now);
            }
            member.last_spoke = Some(now);
            self.dirty.insert(ctx.room.clone());
            let n = &mut self.sent_count[ctx.persona.0 as usize];
            *n += 1;
            let spec = &self.personas[ctx.persona.0 as usize];
            let (text, truncated_from) = cap_reply(body, ctx.policy.max_reply_chars);
            let outgoing = Outgoing {
                at: now,
                turn: turn_id,
                kind: ctx.kind,
                persona: spec.id.clone(),
                room: ctx.room.clone(),
                thread: ctx.thread.clone(),
                id: MsgId::new(format!("{}:{n}", spec.id)),
                text,
                msgs: vec![reply_to.clone()],
                reply_to: Some(reply_to),
                dropped_reply_to: None,
                invalid_reply_to: d.invalid_reply_to,
                unknown_directives: d.unknown_keys,
                notice: false,
                is_dm: ctx.is_dm,
                truncated_from,
                more_withheld: 0,
                reasoning_chars: 0,
            };
            let echo = outgoing.as_heard(spec.name.clone());
            self.out.push_back(Output::Send(Box::new(outgoing)));
            self.handle_message(now, echo);
        }
        // The turn's last reply sent says what the limit held back.
        if withheld > 0
            && let Some(Output::Send(o)) = self
                .out
                .iter_mut()
                .rev()
                .find(|o| matches!(o, Output::Send(s) if s.turn == turn_id))
        {
            o.more_withheld = withheld;
        }
    }
}
