//! How a turn's result becomes replies: directives, silence, reasoning,
//! the guards checked again before anything is sent, and the reply the
//! room then hears.

#[allow(clippy::wildcard_imports)]
use super::*;

impl Engine {
    // -- Agent results -----------------------------------------------------

    /// Reports how a turn ended. Unknown turns (already ended or cancelled)
    /// are ignored, so a late result can never post twice.
    pub fn handle_agent_result(&mut self, now: Timestamp, turn_id: TurnId, result: AgentResult) {
        let Some(mut turn) = self.turns.remove(&turn_id) else {
            return;
        };
        turn.answered = !matches!(result, AgentResult::Failed(_));
        let (text, beside) = match result {
            AgentResult::Output(text) => (Ok(text), 0),
            AgentResult::Reasoned {
                text,
                reasoning_chars,
            } => (Ok(text), reasoning_chars),
            AgentResult::Failed(err) => (Err(err), 0),
        };
        let text = match text {
            Ok(text) => text,
            // A failed gate fails open, like an unreadable answer.
            Err(_) if turn.kind == TurnKind::Gate => String::new(),
            Err(err) => {
                let end = self.turn_end(now, turn_id, &turn);
                self.fail(now, turn_id, turn, end, err);
                return;
            }
        };
        let stripped = if turn.strip_reasoning {
            reasoning::strip(&text)
        } else {
            reasoning::Stripped {
                rest: &text,
                reasoning_chars: 0,
                unclosed: false,
            }
        };
        if turn.kind == TurnKind::Gate {
            if let Some(key) = turn.gate_timer {
                self.timers.remove(&key);
            }
            let verdict = parse_gate_answer(stripped.rest);
            self.gate_decided(now, turn_id, turn, verdict);
            return;
        }
        turn.reasoning_chars = beside + stripped.reasoning_chars;
        let end = self.turn_end(now, turn_id, &turn);
        if stripped.unclosed {
            let err = format!(
                "the agent's answer was all reasoning ({} characters, never closed) and no reply",
                stripped.reasoning_chars
            );
            self.fail(now, turn_id, turn, end, err);
            return;
        }
        let text = stripped.rest;
        let mut replies = directives::split_replies(text).into_iter();
        let (mut d, body) = replies.next().unwrap_or_default();
        // `[[reply_to_current]]`: the message that started the turn.
        if d.reply_to_current && d.reply_to.is_none() {
            d.reply_to = turn.triggers.last().map(|e| e.id.to_string());
        }
        let more: Vec<(Directives, String)> = replies.map(|(d, b)| (d, b.to_owned())).collect();
        let body = body.trim();
        if body.is_empty() {
            if d.present {
                self.out
                    .push_back(Output::Silent(end, SilenceKind::DirectivesOnly));
                self.finish(now, turn_id, turn, false);
            } else {
                self.fail(
                    now,
                    turn_id,
                    turn,
                    end,
                    "the agent returned a blank answer".to_owned(),
                );
            }
            return;
        }
        let may_be_silent = turn.policy.allow_silence || turn.kind == TurnKind::Schedule;
        if may_be_silent && silence::is_silence(body, &turn.policy.silence_token) {
            self.out.push_back(Output::Silent(end, SilenceKind::Token));
            // Someone asked this persona: they get a sign it was heard.
            if turn.kind == TurnKind::Reply && !turn.unaddressed {
                self.addressed_silence(now, turn_id, &turn);
            }
            self.finish(now, turn_id, turn, false);
            return;
        }
        let held = hooked::Held {
            first: (d, body.to_owned()),
            more,
            notice: false,
        };
        self.release(now, turn_id, turn, held);
    }

    /// A turn failed: the trace gets the reason; the room gets one short
    /// notice when the persona was addressed and `on_error = "notice"`.
    pub(super) fn fail(&mut self, now: Timestamp, turn_id: TurnId, turn: Turn, end: TurnEnd, reason: String) {
        self.out.push_back(Output::Error(end, reason));
        let notice =
            turn.kind == TurnKind::Reply && !turn.unaddressed && turn.policy.on_error == OnError::Notice;
        if notice {
            let d = Directives {
                reply_to: turn.triggers.last().map(|e| e.id.to_string()),
                ..Directives::default()
            };
            let held = hooked::Held {
                first: (d, ERROR_NOTICE.to_owned()),
                more: Vec::new(),
                notice: true,
            };
            self.release(now, turn_id, turn, held);
        } else {
            self.finish(now, turn_id, turn, false);
        }
    }

    /// Sends `body` for a turn: validates `reply_to`, takes the floor,
    /// commits the rate-limit slot, and lets the room hear the reply.
    pub(super) fn deliver(
        &mut self,
        now: Timestamp,
        turn_id: TurnId,
        turn: Turn,
        body: &str,
        d: Directives,
        notice: bool,
    ) {
        let room = self.rooms.get_mut(&turn.room).expect("a turn's room exists");
        let (reply_to, dropped_reply_to) = match d.reply_to {
            Some(id) if room.history.contains(&id) => (Some(MsgId::new(id)), None),
            Some(id) => (None, Some(id)),
            None => (None, None),
        };
        if turn.unaddressed {
            for e in &turn.triggers {
                *room.floor.entry(e.id.clone()).or_default() += 1;
            }
        }
        if turn.unprompted && !notice {
            room.unprompted.commit(now);
        }
        let member = &mut room.members[turn.persona.0 as usize];
        // The notice is tactful's word, not the agent's answer: a failing
        // backend must not spend the room's reply budget.
        if turn.reserved && !notice {
            member.rate.commit(now);
        }
        member.last_spoke = Some(now);
        let n = &mut self.sent_count[turn.persona.0 as usize];
        *n += 1;
        let spec = &self.personas[turn.persona.0 as usize];
        let id = MsgId::new(format!("{}:{n}", spec.id));
        let (text, truncated_from) = cap_reply(body, turn.policy.max_reply_chars);
        let outgoing = Outgoing {
            at: now,
            turn: turn_id,
            kind: turn.kind,
            persona: spec.id.clone(),
            room: turn.room.clone(),
            thread: turn.thread.clone(),
            id,
            text,
            reply_to,
            dropped_reply_to,
            invalid_reply_to: d.invalid_reply_to,
            unknown_directives: d.unknown_keys,
            msgs: turn.msgs(),
            notice,
            is_dm: turn.is_dm,
            truncated_from,
            more_withheld: 0,
            // The notice is tactful's own text: no reasoning went into it.
            reasoning_chars: if notice { 0 } else { turn.reasoning_chars },
        };
        let echo = outgoing.as_heard(spec.name.clone());
        self.out.push_back(Output::Send(Box::new(outgoing)));
        self.finish(now, turn_id, turn, !notice);
        // The room hears the reply like any other message: the author
        // records it as its own, the others as a bot message.
        self.handle_message(now, echo);
    }
}

/// `body` cut to at most `max` characters, the truncation mark included,
/// with its original length when it was cut. The cut falls on a line break
/// or a space in the last fifth when there is one, so a word is not
/// chopped.
pub(super) fn cap_reply(body: &str, max: usize) -> (String, Option<usize>) {
    let Some((hard, _)) = body.char_indices().nth(max) else {
        return (body.to_owned(), None);
    };
    let total = max + body[hard..].chars().count();
    let keep = max.saturating_sub(crate::policy::TRUNCATED_MARK.chars().count());
    let end = body.char_indices().nth(keep).map_or(body.len(), |(i, _)| i);
    let soft = body[..end]
        .rfind(['\n', ' '])
        .filter(|&i| i >= end - end / 5)
        .unwrap_or(end);
    let mut text = body[..soft].trim_end().to_owned();
    text.push_str(crate::policy::TRUNCATED_MARK);
    (text, Some(total))
}
