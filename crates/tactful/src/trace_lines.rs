//! Engine outputs as the JSON lines `tactful replay` prints, one shape
//! for every place that shows a decision: the replay's trace and the
//! console's live transcript read the same fields.

use serde_json::{Value, json};
use tactful_core::engine::{
    AmbientEvent, AmbientNote, Outgoing, ScheduleEvent, ScheduleNote, SilenceKind, TurnEnd,
};
use tactful_core::hooks::HookNote;
use tactful_core::{Decision, Output, TurnRequest};

/// `output` as one trace line; `None` for a request to run hooks (their
/// steps are traced when the engine hears them).
pub(crate) fn line(output: &Output) -> Option<Value> {
    Some(match output {
        Output::RunHooks(_) => return None,
        Output::Hook(note) => hook_line(note),
        Output::Schedule(note) => schedule_line(note),
        Output::Decision(d) => decision_line(d),
        Output::CallAgent(req) => call_line(req),
        Output::Send(s) => send_line(s),
        Output::Silent(end, kind) => silent_line(end, *kind),
        Output::Cancelled(end, reason) => {
            let mut v = end_fields(end, "cancelled");
            v["reason"] = json!(reason.as_str());
            v
        }
        Output::Ambient(note) => ambient_line(note),
        Output::Floor(note) => json!({
            "at": note.at.as_secs_f64(),
            "type": "floor_offer",
            "persona": note.persona,
            "room": note.room,
            "msg": note.msg,
            "reason": note.why.as_str(),
            "waiting": note.waiting,
        }),
        Output::Limited(note) => json!({
            "at": note.at.as_secs_f64(),
            "type": "rate_limit",
            "persona": note.persona,
            "room": note.room,
            "msg": note.msg,
            "replies": note.replies,
            "per_seconds": note.per.as_secs_f64(),
            "frees_at": note.frees_at.map(|t| t.as_secs_f64()),
        }),
        Output::React(note) => json!({
            "at": note.at.as_secs_f64(),
            "type": "react",
            "turn": note.turn.to_string(),
            "persona": note.persona,
            "room": note.room,
            "msg": note.msg,
            "emoji": note.emoji,
        }),
        Output::OverBudget(note) => {
            let mut v = json!({
                "at": note.at.as_secs_f64(),
                "type": "budget",
                "persona": note.persona,
                "room": note.room,
                "msg": note.msg,
                "scope": if note.room_budget { "room" } else { "persona" },
                "used": note.used,
                "estimate": note.estimate,
                "tokens": note.tokens,
                "per_seconds": note.per.as_secs_f64(),
                "frees_at": note.frees_at.map(|t| t.as_secs_f64()),
            });
            // Only with several processes: what of `used` their rooms spent.
            if note.elsewhere > 0 {
                v["elsewhere"] = json!(note.elsewhere);
            }
            v
        }
        Output::Withheld(end, reason) => {
            let mut v = end_fields(end, "withheld");
            v["reason"] = json!(reason.as_str());
            v
        }
        Output::Error(end, error) => error_line(end, error),
        Output::Dropped {
            at,
            room,
            msg,
            reason,
        } => json!({
            "at": at.as_secs_f64(), "type": "dropped", "room": room, "msg": msg, "reason": reason,
        }),
    })
}

/// An agent call, as decided (`at` is when the engine decided it).
pub(crate) fn call_line(req: &TurnRequest) -> Value {
    let mut v = json!({
        "at": req.started.as_secs_f64(),
        "type": "agent_call",
        "turn": req.turn.to_string(),
        "persona": req.persona,
        "agent": req.agent.as_ref(),
        "kind": req.kind.as_str(),
        "room": req.room,
        "msgs": req.triggers.iter().map(|e| e.id.clone()).collect::<Vec<_>>(),
    });
    if let Some(t) = req.flush_trigger {
        v["trigger"] = json!(t.as_str());
    }
    v
}

pub(crate) fn decision_line(d: &Decision) -> Value {
    let mut v = json!({
        "at": d.at.as_secs_f64(),
        "type": "decision",
        "persona": d.persona,
        "room": d.room,
        "msg": d.msg,
        "outcome": d.outcome.as_str(),
        "reason": d.reason.as_str(),
    });
    if let Some(t) = d.turn {
        v["turn"] = json!(t.to_string());
    }
    v
}

pub(crate) fn send_line(s: &Outgoing) -> Value {
    let mut v = json!({
        "at": s.at.as_secs_f64(),
        "type": "send",
        "turn": s.turn.to_string(),
        "kind": s.kind.as_str(),
        "persona": s.persona,
        "room": s.room,
        "id": s.id,
        "text": s.text,
        "reply_to": s.reply_to,
        "msgs": s.msgs,
    });
    if let Some(t) = &s.thread {
        v["thread"] = json!(t);
    }
    if s.notice {
        v["notice"] = json!(true);
    }
    if s.more_withheld > 0 {
        v["more_withheld"] = json!(s.more_withheld);
        v["note"] = json!("further replies of this turn were held back by the rate limit");
    }
    if let Some(d) = &s.dropped_reply_to {
        v["dropped_reply_to"] = json!(d);
        v["note"] = json!("reply_to names no message of this room; sent as a plain message");
    }
    if !s.invalid_reply_to.is_empty() {
        v["invalid_reply_to"] = json!(s.invalid_reply_to);
    }
    if !s.unknown_directives.is_empty() {
        v["unknown_directives"] = json!(s.unknown_directives);
    }
    if s.reasoning_chars > 0 {
        v["reasoning_chars"] = json!(s.reasoning_chars);
    }
    if let Some(n) = s.truncated_from {
        v["truncated_from"] = json!(n);
        v["note"] = json!("the answer was longer than max_reply_chars and was cut");
    }
    v
}

pub(crate) fn end_fields(end: &TurnEnd, ty: &str) -> Value {
    let mut v = json!({
        "at": end.at.as_secs_f64(),
        "type": ty,
        "turn": end.turn.to_string(),
        "kind": end.kind.as_str(),
        "persona": end.persona,
        "room": end.room,
        "msgs": end.msgs,
    });
    if end.reasoning_chars > 0 {
        v["reasoning_chars"] = json!(end.reasoning_chars);
    }
    v
}

pub(crate) fn ambient_line(note: &AmbientNote) -> Value {
    let mut v = json!({
        "at": note.at.as_secs_f64(),
        "type": "",
        "persona": note.persona,
        "room": note.room,
    });
    match &note.event {
        AmbientEvent::Armed { due } => {
            v["type"] = json!("flush_armed");
            v["due"] = json!(due.as_secs_f64());
        }
        AmbientEvent::Waiting { trigger, why, until } => {
            v["type"] = json!("flush_wait");
            v["trigger"] = json!(trigger.as_str());
            v["reason"] = json!(why.as_str());
            if let Some(u) = until {
                v["until"] = json!(u.as_secs_f64());
            }
        }
        AmbientEvent::Cleared { msgs } => {
            v["type"] = json!("buffer_cleared");
            v["msgs"] = json!(msgs);
            v["reason"] = json!("addressed");
        }
        AmbientEvent::Skipped { msgs, reason } => {
            v["type"] = json!("flush_skipped");
            v["msgs"] = json!(msgs);
            v["reason"] = json!(reason.as_str());
        }
    }
    v
}

pub(crate) fn schedule_line(note: &ScheduleNote) -> Value {
    let mut v = json!({
        "at": note.at.as_secs_f64(),
        "type": "schedule",
        "schedule": note.name.as_ref(),
        "persona": note.persona,
        "room": note.room,
        "due": note.due.to_rfc3339(),
        "due_local": note.due_local,
    });
    match &note.event {
        ScheduleEvent::Fired { turn, caught_up } => {
            v["event"] = json!(if *caught_up { "caught_up" } else { "fired" });
            v["turn"] = json!(turn.to_string());
        }
        ScheduleEvent::Skipped { reason } => {
            v["event"] = json!("skipped");
            v["reason"] = json!(reason);
        }
    }
    v
}

pub(crate) fn hook_line(note: &HookNote) -> Value {
    let mut v = json!({
        "at": note.at.as_secs_f64(),
        "type": "hook",
        "turn": note.turn.to_string(),
        "kind": note.kind.as_str(),
        "persona": note.persona,
        "room": note.room,
        "msgs": note.msgs,
        "hook": note.step.hook.as_ref(),
        "action": note.step.action.as_str(),
    });
    if note.reply > 0 {
        v["reply"] = json!(note.reply);
    }
    if let Some(r) = &note.step.reason {
        v["reason"] = json!(r);
    }
    v
}

pub(crate) fn silent_line(end: &TurnEnd, kind: SilenceKind) -> Value {
    let mut v = end_fields(end, "silent");
    v["reason"] = json!(kind.as_str());
    v
}

pub(crate) fn error_line(end: &TurnEnd, error: &str) -> Value {
    let mut v = end_fields(end, "error");
    v["error"] = json!(error);
    v
}
