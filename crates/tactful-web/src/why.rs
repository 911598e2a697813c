//! Why each persona did what it did with a message, in words people read.
//!
//! The engine's trace says, for every message and persona, what was
//! decided and why, and later how the turn ended. The web room turns those
//! into one short line per persona ("Guide: listening, reads it in its next
//! batch", "Docs: failed: python3: can't open file 'agent.py'") kept on the
//! message and sent to the room as it changes, so anyone can see why a
//! persona answered, stayed quiet or could not. Off loopback this is off
//! by default (`show_decisions`): it shows how the room is configured.

use serde::Serialize;
use tactful_core::engine::{AmbientEvent, CancelReason, SilenceKind};
use tactful_core::hooks::HookAction;
use tactful_core::{Decision, MsgId, Outcome, Output, PersonaId, Reason, RoomId};

/// One persona's line about one message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Why {
    /// The persona's id.
    pub persona: String,
    /// What it comes to, for the page's colour: `answered`, `answering`,
    /// `listening`, `quiet`, `skipped`, `failed`.
    pub state: &'static str,
    /// The line people read.
    pub text: String,
}

/// A note for one message of one room.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// The room.
    pub room: RoomId,
    /// The message.
    pub msg: MsgId,
    /// What to show for the persona.
    pub why: Why,
}

/// Turns engine outputs into notes, remembering how many messages each
/// ambient persona has waiting in each room ("3 waiting for its next
/// batch"). An entry lives until that batch runs, is cleared or skipped.
#[derive(Debug, Default)]
pub struct Explainer {
    waiting: std::collections::HashMap<(RoomId, PersonaId), usize>,
}

impl Explainer {
    /// The notes for `output`.
    pub fn notes(&mut self, output: &Output) -> Vec<Note> {
        match output {
            Output::Decision(d) if d.outcome == Outcome::Record && d.reason == Reason::Buffered => {
                let n = self
                    .waiting
                    .entry((d.room.clone(), d.persona.clone()))
                    .or_default();
                *n += 1;
                let text = if *n == 1 {
                    "listening: first message for its next batch".to_owned()
                } else {
                    format!("listening: {n} messages waiting for its next batch")
                };
                return vec![Note {
                    room: d.room.clone(),
                    msg: d.msg.clone(),
                    why: Why {
                        persona: d.persona.to_string(),
                        state: "listening",
                        text,
                    },
                }];
            }
            Output::CallAgent(req) if req.kind == tactful_core::TurnKind::Ambient => {
                self.waiting.remove(&(req.room.clone(), req.persona.clone()));
            }
            Output::Ambient(n)
                if matches!(
                    n.event,
                    AmbientEvent::Cleared { .. } | AmbientEvent::Skipped { .. }
                ) =>
            {
                self.waiting.remove(&(n.room.clone(), n.persona.clone()));
            }
            _ => {}
        }
        notes(output)
    }
}

/// The state of a batch message that was read while its reply answered
/// another: it never replaces an "answered" (`Room::note_why` in `room.rs`).
pub const READ: &str = "read";

/// Every state a line can have.
const STATES: [&str; 7] = [
    "answered",
    "answering",
    "listening",
    "quiet",
    "skipped",
    "failed",
    READ,
];

/// The longest line taken from another process (ours are shorter).
const MAX_TEXT: usize = 2_000;

impl Why {
    /// The line as it travels to another process's web room.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// A line another process's web room sent ([`Why::to_json`]); `None`
    /// when it is not one (an unknown state, not JSON).
    pub fn from_json(json: &str) -> Option<Why> {
        #[derive(serde::Deserialize)]
        struct Sent {
            persona: String,
            state: String,
            text: String,
        }
        let sent: Sent = serde_json::from_str(json).ok()?;
        let state = STATES.into_iter().find(|s| *s == sent.state)?;
        Some(Why {
            persona: sent.persona,
            state,
            text: clip(&sent.text, MAX_TEXT),
        })
    }
}

/// The notes an engine output makes, one per message it concerns.
pub fn notes(output: &Output) -> Vec<Note> {
    let note = |room: &RoomId, msg: &MsgId, persona: &PersonaId, state, text: String| Note {
        room: room.clone(),
        msg: msg.clone(),
        why: Why {
            persona: persona.to_string(),
            state,
            text,
        },
    };
    let each = |room: &RoomId, msgs: &[MsgId], persona: &PersonaId, state: &'static str, text: &str| {
        msgs.iter()
            .map(|m| note(room, m, persona, state, text.to_owned()))
            .collect::<Vec<_>>()
    };
    match output {
        Output::Decision(d) => decided(d)
            .map(|(state, text)| vec![note(&d.room, &d.msg, &d.persona, state, text)])
            .unwrap_or_default(),
        Output::CallAgent(req) if req.kind == tactful_core::TurnKind::Ambient => {
            let ids: Vec<MsgId> = req.triggers.iter().map(|e| e.id.clone()).collect();
            let text = format!("listening: reading it now, in a batch of {}", ids.len());
            each(&req.room, &ids, &req.persona, "answering", &text)
        }
        // The failure's own line (with its reason) stays.
        Output::Send(o) if o.notice => Vec::new(),
        // A batch's reply answers the message it replies to; the batch's
        // other messages were read with it, not answered (a later reply of
        // the same turn may answer one of them: see `Room::note_why`).
        Output::Send(o) if o.msgs.len() > 1 && o.reply_to.as_ref().is_some_and(|r| o.msgs.contains(r)) => o
            .msgs
            .iter()
            .map(|m| {
                if Some(m) == o.reply_to.as_ref() {
                    note(&o.room, m, &o.persona, "answered", "answered".to_owned())
                } else {
                    let text = format!(
                        "read it in a batch of {}, and answered another message",
                        o.msgs.len()
                    );
                    note(&o.room, m, &o.persona, READ, text)
                }
            })
            .collect(),
        Output::Send(o) => each(&o.room, &o.msgs, &o.persona, "answered", "answered"),
        Output::Silent(end, kind) => {
            let text = match kind {
                SilenceKind::Token => "read it and chose to stay quiet (NO_REPLY)",
                SilenceKind::DirectivesOnly => "read it and chose to stay quiet",
            };
            each(&end.room, &end.msgs, &end.persona, "quiet", text)
        }
        // The hook's own line (with its name and reason) stays.
        Output::Withheld(_, Reason::Hook) => Vec::new(),
        Output::Hook(n) if n.step.action == HookAction::Cancel => {
            let mut text = format!("held back by hook `{}`", n.step.hook);
            if let Some(why) = &n.step.reason {
                text.push_str(": ");
                text.push_str(&clip(why, 200));
            }
            each(&n.room, &n.msgs, &n.persona, "skipped", &text)
        }
        Output::Withheld(end, reason) => {
            let text = format!("had an answer, held back: {}", reason_words(*reason));
            each(&end.room, &end.msgs, &end.persona, "skipped", &text)
        }
        Output::Error(end, reason) => {
            let text = format!("failed: {}", clip(reason, 300));
            each(&end.room, &end.msgs, &end.persona, "failed", &text)
        }
        Output::Cancelled(end, why) => {
            let text = match why {
                CancelReason::Addressed => "stopped reading: a message addressed to it came first",
                CancelReason::GateTimeout => "its gate did not answer in time, so it answers",
                CancelReason::PersonaRemoved => "stopped: a config reload removed this persona",
            };
            each(&end.room, &end.msgs, &end.persona, "skipped", text)
        }
        Output::Ambient(n) => match &n.event {
            AmbientEvent::Cleared { msgs } => each(
                &n.room,
                msgs,
                &n.persona,
                "quiet",
                "listening: a message addressed to it came first, and its answer took this in",
            ),
            AmbientEvent::Skipped { msgs, reason } => {
                let text = format!("listening: its batch was skipped ({})", reason_words(*reason));
                each(&n.room, msgs, &n.persona, "skipped", &text)
            }
            AmbientEvent::Waiting { .. } | AmbientEvent::Armed { .. } => Vec::new(),
        },
        _ => Vec::new(),
    }
}

/// The line for a decision, if it is worth one: a persona's own message and
/// a DM for another persona say nothing to anyone.
fn decided(d: &Decision) -> Option<(&'static str, String)> {
    let text = match (d.outcome, d.reason) {
        (_, Reason::OwnMessage | Reason::DmForOther) => return None,
        (Outcome::Reply, r) => format!("answering: {}", reason_words(r)),
        (Outcome::Record, Reason::Buffered) => {
            return Some(("listening", "listening: reads it in its next batch".to_owned()));
        }
        (Outcome::Record, r) => format!("not answering: {}", reason_words(r)),
        (Outcome::Skip, r) => format!("skipped: {}", reason_words(r)),
    };
    let state = match d.outcome {
        Outcome::Reply => "answering",
        Outcome::Record => "quiet",
        Outcome::Skip => "skipped",
    };
    Some((state, text))
}

/// A reason in words.
fn reason_words(r: Reason) -> &'static str {
    match r {
        Reason::Dm => "a direct message",
        Reason::Mention => "it was mentioned",
        Reason::Command => "a command for it",
        Reason::ReplyToMe => "a reply to it",
        Reason::All => "it answers everything here",
        Reason::OwnMessage => "its own message",
        Reason::NotAddressed => "not addressed to it",
        Reason::AddressedToOther => "addressed to someone else",
        Reason::NotCommand => "not a command for it",
        Reason::Observe => "it only observes this room",
        Reason::BotAuthor => "written by a bot, and it ignores bots",
        Reason::BotTurnLimit => "the bots have spoken enough in a row",
        Reason::NotAllowed => "the sender is not on its allowlist",
        Reason::RateLimited => "rate-limited",
        Reason::DmForOther => "a direct message for another persona",
        Reason::Buffered => "listening",
        Reason::GateReply => "its gate said to answer",
        Reason::GateFailedOpen => "its gate failed, so it answers",
        Reason::GateSkip => "its gate said not to answer",
        Reason::FloorTaken => "another persona already answered",
        Reason::Hook => "a before-send hook stopped it",
        Reason::Schedule => "its schedule is due",
        Reason::PreGate => "small talk, nothing to answer",
        Reason::UnpromptedBudget => "the room has had enough unasked bot replies for now",
        Reason::BudgetExhausted => "its spend budget is used up for now",
    }
}

fn clip(s: &str, max: usize) -> String {
    let mut out: String = s.chars().take(max).collect();
    if s.chars().count() > max {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tactful_core::{Timestamp, TurnId};

    /// Guide's reply to `to`, from a batch of w1, w2, w3.
    fn batch_reply(to: &str) -> Output {
        Output::Send(Box::new(tactful_core::engine::Outgoing {
            at: Timestamp(0),
            turn: TurnId(1),
            kind: tactful_core::TurnKind::Ambient,
            persona: PersonaId::new("guide"),
            room: RoomId::new("lobby"),
            thread: None,
            id: MsgId::new("guide:1"),
            text: "an answer".into(),
            reply_to: Some(MsgId::new(to)),
            dropped_reply_to: None,
            invalid_reply_to: Vec::new(),
            unknown_directives: Vec::new(),
            msgs: ["w1", "w2", "w3"].map(MsgId::new).to_vec(),
            notice: false,
            is_dm: false,
            truncated_from: None,
            more_withheld: 0,
            reasoning_chars: 0,
        }))
    }

    /// A batch's reply marks the message it answers, not the chatter read
    /// with it; a second reply of the turn, to another message, leaves the
    /// first answered.
    #[test]
    fn a_line_travels_to_another_process_and_back() {
        let why = Why {
            persona: "docs".into(),
            state: "answering",
            text: "answering: it was mentioned".into(),
        };
        assert_eq!(Why::from_json(&why.to_json()), Some(why));
        assert_eq!(
            Why::from_json(r#"{"persona":"docs","state":"teleported","text":"x"}"#),
            None,
            "unknown states are refused"
        );
        assert_eq!(Why::from_json("not json"), None);
    }

    #[test]
    fn a_batch_reply_answers_its_message_and_reads_the_rest() {
        let states = |o: &Output| {
            notes(o)
                .into_iter()
                .map(|n| (n.msg.to_string(), n.why.state))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            states(&batch_reply("w3")),
            [
                ("w1".into(), READ),
                ("w2".into(), READ),
                ("w3".into(), "answered")
            ]
        );
        let mut room = crate::room::Room::default();
        let member = crate::room::Member {
            id: "web:Alice".into(),
            name: "Alice".into(),
            bot: false,
        };
        for id in ["w1", "w2", "w3"] {
            room.restore(crate::room::WebMsg::plain(id, member.clone()), None, 10);
        }
        for n in notes(&batch_reply("w3"))
            .into_iter()
            .chain(notes(&batch_reply("w1")))
        {
            room.note_why(n.msg.as_str(), n.why);
        }
        let shown: Vec<&str> = room.history().map(|m| m.why[0].state).collect();
        assert_eq!(shown, ["answered", READ, "answered"]);
    }

    fn decision(outcome: Outcome, reason: Reason) -> Output {
        Output::Decision(Decision {
            at: Timestamp(0),
            room: RoomId::new("lobby"),
            msg: MsgId::new("w1"),
            persona: PersonaId::new("guide"),
            outcome,
            reason,
            turn: None::<TurnId>,
        })
    }

    #[test]
    fn an_ambient_persona_counts_what_waits_for_its_batch() {
        let mut x = Explainer::default();
        let first = x.notes(&decision(Outcome::Record, Reason::Buffered));
        assert_eq!(first[0].why.text, "listening: first message for its next batch");
        let second = x.notes(&decision(Outcome::Record, Reason::Buffered));
        assert_eq!(
            second[0].why.text,
            "listening: 2 messages waiting for its next batch"
        );
        assert_eq!(x.waiting.len(), 1);
    }

    #[test]
    fn every_decision_reads_as_a_sentence() {
        for r in Reason::ALL {
            for o in [Outcome::Reply, Outcome::Record, Outcome::Skip] {
                for n in notes(&decision(o, r)) {
                    assert!(n.why.text.len() > 5, "{o:?} {r:?}: {:?}", n.why.text);
                }
            }
        }
        let n = notes(&decision(Outcome::Skip, Reason::RateLimited));
        assert_eq!(n[0].why.text, "skipped: rate-limited");
        assert!(notes(&decision(Outcome::Record, Reason::OwnMessage)).is_empty());
    }
}
