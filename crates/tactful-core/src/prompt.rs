//! The one prompt builder every backend uses.
//!
//! A turn request becomes a system text (the persona's prompt plus
//! tactful's contract) and a list of chat messages: the persona's own past
//! messages as assistant turns, everyone else as speaker-tagged user turns
//! (consecutive user turns merged, since strict-alternation providers reject
//! them), and a final user turn holding the triggering messages with a
//! sender-context block the agent can take `reply_to` ids from.

use serde::Serialize;

use crate::transcript::{Entry, sanitize_name};
use crate::turn::{TurnKind, TurnRequest};

/// tactful's contract text, shipped with the binary. `{name}` becomes the
/// persona's name and `{silence}` the silence paragraph (or nothing when
/// the persona must answer).
pub const DEFAULT_CONTRACT: &str = include_str!("contract.md");

/// Who a chat message is from, in Chat Completions terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everyone but the persona.
    User,
    /// The persona itself.
    Assistant,
}

/// One rendered chat message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said, speaker tags included.
    pub content: String,
}

/// A rendered prompt.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Prompt {
    /// Instructions: the persona's prompt and the contract.
    pub system: String,
    /// The conversation, oldest first; the last message is a user turn.
    pub messages: Vec<ChatMessage>,
}

/// The silence paragraph of the contract for `token`, with what an
/// ambient batch means: it is said once, in the system text that stays the
/// same from call to call (what a provider's prompt cache serves), rather
/// than with every batch.
pub fn silence_paragraph(token: &str) -> String {
    format!(
        "- If nothing needs saying from you (the message is meant for someone else, it is small talk, or it has been answered already), reply with exactly {token} and nothing else. Then nothing is posted.\n\
         - {AMBIENT_NOTE} Speak then only if you can add something the room needs, such as an answer nobody has given; otherwise reply with exactly {token}."
    )
}

/// How the contract explains an ambient batch; a batch's sender context
/// is headed with [`AMBIENT_MARK`].
const AMBIENT_NOTE: &str = "When the sender context says \"batch\", you are listening to the room in the background: nobody addressed you in the messages it lists, they reach you together.";

/// What heads an ambient batch's sender context (see [`AMBIENT_NOTE`]).
pub const AMBIENT_MARK: &str = "batch, nobody addressed you";

/// The system text for a turn, from a contract template.
pub fn system_text(req: &TurnRequest, contract: &str) -> String {
    let silence = req
        .silence_token
        .as_deref()
        .map(silence_paragraph)
        .unwrap_or_default();
    let contract = contract
        .replace("{name}", &sanitize_name(&req.persona_name))
        .replace("{silence}", &silence);
    let prompt = req.prompt.trim();
    if prompt.is_empty() {
        contract.trim_end().to_owned()
    } else {
        format!("{prompt}\n\n{}", contract.trim_end())
    }
}

/// The sender-context block for the triggering messages: the room once,
/// then one JSON object a line, so an agent can read ids exactly. Fields
/// that say nothing are left out (`sender_name` when it is the id,
/// `is_bot` unless true, `thread` unless set): the block is new text in
/// every prompt, never served from a provider's cache, and a batch of ten
/// messages made it a third of the prompt.
pub fn sender_context(req: &TurnRequest) -> String {
    let mut out = format!("sender context (room {}", req.room.as_str());
    if req.kind == TurnKind::Ambient {
        out.push_str("; ");
        out.push_str(AMBIENT_MARK);
    }
    out.push_str("):");
    for e in &req.triggers {
        let mut ctx = serde_json::Map::new();
        ctx.insert("message_id".into(), e.id.as_str().into());
        ctx.insert("sender_id".into(), e.author.as_str().into());
        let name = sanitize_name(&e.author_name);
        if name != e.author.as_str() {
            ctx.insert("sender_name".into(), name.into());
        }
        if e.is_bot {
            ctx.insert("is_bot".into(), true.into());
        }
        if let Some(t) = &e.thread {
            ctx.insert("thread".into(), t.as_str().into());
        }
        ctx.insert("time".into(), e.time.to_rfc3339().into());
        out.push('\n');
        out.push_str(&serde_json::Value::Object(ctx).to_string());
    }
    out
}

fn tagged(e: &Entry) -> String {
    format!("{} {}", e.speaker_tag(), e.text)
}

fn push(messages: &mut Vec<ChatMessage>, role: Role, content: String) {
    match messages.last_mut() {
        Some(last) if last.role == role => {
            last.content.push('\n');
            last.content.push_str(&content);
        }
        _ => messages.push(ChatMessage { role, content }),
    }
}

fn clip_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// How many recent messages the gate's classifier sees, and how long each
/// may be: enough to tell who is talking to whom, cheap enough to ask often.
pub const GATE_CONTEXT_TURNS: usize = 8;
/// See [`GATE_CONTEXT_TURNS`].
pub const GATE_CLIP_CHARS: usize = 300;

/// The gate's classifier instructions.
pub fn gate_system(req: &TurnRequest) -> String {
    let name = sanitize_name(&req.persona_name);
    let purpose = req.prompt.trim();
    let purpose = if purpose.is_empty() {
        "(no description)"
    } else {
        purpose
    };
    let bots = if req.room_bots.is_empty() {
        "none".to_owned()
    } else {
        req.room_bots
            .iter()
            .map(|b| sanitize_name(b))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "You decide whether the assistant {name} should answer the newest message in a group chat.\n\
         {name}'s purpose: {purpose}\n\
         Other bots in the room: {bots}\n\n\
         Answer SKIP when the message is meant for someone else, when it is small talk or bots talking among themselves, or when {name} cannot add anything useful. Answer REPLY when {name} should speak.\n\
         Answer with one word: REPLY or SKIP."
    )
}

/// Renders a turn request with the given contract template: the reply
/// prompt, the ambient variant, or the gate variant, by the request's kind.
///
/// The conversation is shown in the order it happened, the triggering
/// messages included (an ambient batch's messages sit among the others
/// that arrived meanwhile, as they will when the next prompt shows them as
/// history); then, last, the ambient note and the sender context. The
/// character budget keeps the newest history: older entries are left out
/// until the conversation fits, and a trigger longer than the whole budget
/// is clipped rather than dropped.
pub fn render(req: &TurnRequest, contract: &str) -> Prompt {
    if req.kind == TurnKind::Gate {
        return render_gate(req);
    }
    let (older, newer) = split_at_triggers(req);
    let closing = sender_context(req);
    let newer: Vec<(Role, String)> = newer
        .into_iter()
        .map(|e| {
            let (role, content) = as_chat(req, e);
            (role, clip_chars(&content, req.max_chars))
        })
        .collect();
    let fixed: usize =
        newer.iter().map(|(_, c)| c.chars().count() + 1).sum::<usize>() + closing.chars().count() + 2;
    let budget = req.max_chars.saturating_sub(fixed);
    let mut kept: Vec<(Role, String, usize)> = older
        .into_iter()
        .map(|e| {
            let (role, content) = as_chat(req, e);
            let cost = content.chars().count() + 1;
            (role, content, cost)
        })
        .collect();
    // Over the budget, the older half goes at once (and again if need be),
    // not one message per turn: the prompt's start stays the same from one
    // turn to the next, which providers' prompt caches reward.
    let mut total: usize = kept.iter().map(|k| k.2).sum();
    while total > budget && !kept.is_empty() {
        let drop = kept.len().div_ceil(2);
        total -= kept.drain(..drop).map(|k| k.2).sum::<usize>();
    }
    let mut messages = Vec::with_capacity(kept.len() + newer.len() + 1);
    for (role, content, _) in kept {
        push(&mut messages, role, content);
    }
    for (role, content) in newer {
        push(&mut messages, role, content);
    }
    match messages.last_mut() {
        Some(last) if last.role == Role::User => {
            last.content.push_str("\n\n");
            last.content.push_str(&closing);
        }
        _ => messages.push(ChatMessage {
            role: Role::User,
            content: closing,
        }),
    }
    Prompt {
        system: system_text(req, contract),
        messages,
    }
}

/// A history entry as a chat message: the persona's own as an assistant
/// turn, anyone else's speaker-tagged.
fn as_chat(req: &TurnRequest, e: &Entry) -> (Role, String) {
    if e.persona == Some(req.persona_idx) {
        (Role::Assistant, e.text.to_string())
    } else {
        (Role::User, tagged(e))
    }
}

/// The conversation in order, cut before the first trigger: the part the
/// character budget may shorten, and the rest (triggers and what arrived
/// among them), always shown. A reply turn's history all precedes its
/// trigger; an ambient batch's triggers are put back among the history by
/// their time (the engine hands them over separately), earlier history
/// first on a tie.
fn split_at_triggers(req: &TurnRequest) -> (Vec<&Entry>, Vec<&Entry>) {
    let Some(first) = req.triggers.first() else {
        return (req.history.iter().map(|e| &**e).collect(), Vec::new());
    };
    if req.kind != TurnKind::Ambient {
        return (
            req.history.iter().map(|e| &**e).collect(),
            req.triggers.iter().map(|e| &**e).collect(),
        );
    }
    let cut = req
        .history
        .iter()
        .position(|e| e.time > first.time)
        .unwrap_or(req.history.len());
    let older = req.history[..cut].iter().map(|e| &**e).collect();
    let mut newer = Vec::with_capacity(req.history.len() - cut + req.triggers.len());
    let mut triggers = req.triggers.iter().peekable();
    for e in &req.history[cut..] {
        while let Some(t) = triggers.next_if(|t| t.time < e.time) {
            newer.push(&**t);
        }
        newer.push(&**e);
    }
    newer.extend(triggers.map(|t| &**t));
    (older, newer)
}

/// The gate variant: one user message with the recent turns (few, each
/// clipped) and the new message(s).
fn render_gate(req: &TurnRequest) -> Prompt {
    let mut text = String::from("Recent conversation:\n");
    let start = req.history.len().saturating_sub(GATE_CONTEXT_TURNS);
    if start == req.history.len() {
        text.push_str("(nothing yet)\n");
    }
    for e in &req.history[start..] {
        text.push_str(&clip_chars(&tagged(e), GATE_CLIP_CHARS));
        text.push('\n');
    }
    text.push_str("\nNew message");
    text.push_str(if req.triggers.len() > 1 { "s:\n" } else { ":\n" });
    for e in &req.triggers {
        text.push_str(&clip_chars(&tagged(e), GATE_CLIP_CHARS * 3));
        text.push('\n');
    }
    text.push_str("\nREPLY or SKIP?");
    Prompt {
        system: gate_system(req),
        messages: vec![ChatMessage {
            role: Role::User,
            content: text,
        }],
    }
}
