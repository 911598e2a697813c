//! The web room's notes after a restart: why each persona answered a
//! message or not, rebuilt from what the store kept (each decision, and how
//! each agent call ended), so a restart does not wipe the explanations off
//! the messages it shows again.

use std::collections::{BTreeMap, HashSet};

use tactful_core::{
    Decision, MsgId, Outcome, Output, PersonaId, Reason, RoomId, SilenceKind, Timestamp, TurnEnd, TurnId,
    TurnKind,
};
use tactful_store::{MAX_PAGE, Reader, ShownMessage, StoreError};

/// How many decision pages are read per room at most: a room shows its
/// last `history` messages, each decided once per persona.
const PAGES: usize = 4;

/// The engine outputs that explain `shown`, oldest first: its decisions,
/// then how its agent calls ended (an answer, a silence, an error), which
/// the web room turns into notes as it did live.
pub fn outputs(reader: &Reader, shown: &[ShownMessage]) -> Result<Vec<Output>, StoreError> {
    let mut by_room: BTreeMap<&RoomId, HashSet<&str>> = BTreeMap::new();
    for m in shown {
        by_room.entry(&m.room).or_default().insert(m.id.as_str());
    }
    let mut out = Vec::new();
    for (room, ids) in by_room {
        let mut decisions = Vec::new();
        let mut before = None;
        for _ in 0..PAGES {
            let page = reader.decisions(room.as_str(), before, MAX_PAGE)?;
            before = page.last().map(|d| d.seq);
            let done = page.len() < MAX_PAGE;
            decisions.extend(page.into_iter().filter(|d| ids.contains(d.msg.as_str())));
            if done {
                break;
            }
        }
        decisions.reverse();
        out.extend(decisions.into_iter().filter_map(|d| {
            Some(Output::Decision(Decision {
                at: Timestamp::from_millis(d.at),
                room: room.clone(),
                msg: MsgId::new(d.msg.as_str()),
                persona: PersonaId::new(d.persona.as_str()),
                outcome: Outcome::from_name(&d.outcome)?,
                reason: Reason::from_name(&d.reason)?,
                turn: d.turn.map(|t| TurnId(t as u64)),
            }))
        }));
        let mut calls = reader.calls(room.as_str(), None, MAX_PAGE)?;
        calls.reverse();
        for call in calls {
            // A gate's verdict is its decision, listed above.
            let Some(msg) = call
                .msg
                .filter(|m| ids.contains(m.as_str()) && call.kind != "gate")
            else {
                continue;
            };
            let end = TurnEnd {
                at: Timestamp::from_millis(call.started + call.latency_ms.unwrap_or(0)),
                turn: TurnId(call.turn as u64),
                kind: TurnKind::Reply,
                persona: PersonaId::new(call.persona.as_str()),
                room: room.clone(),
                msgs: vec![MsgId::new(msg.as_str())],
                reasoning_chars: 0,
            };
            match call.outcome.as_deref() {
                Some("silent") => out.push(Output::Silent(end, SilenceKind::Token)),
                Some("error") => out.push(Output::Error(
                    end,
                    call.error.unwrap_or_else(|| "the agent failed".to_owned()),
                )),
                _ => {}
            }
        }
    }
    Ok(out)
}
