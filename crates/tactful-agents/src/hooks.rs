//! Running before-send hooks: what may rewrite or stop a reply after the
//! agent wrote it and before any platform sees it.
//!
//! The engine decides which hooks a turn's replies pass through
//! ([`tactful_core::hooks::HookRequest`]); a driver (the live runtime or
//! `tactful replay`) hands the request to [`Hooks::run`] and reports the
//! outcomes back. Three kinds:
//! - `redact`: regular expressions, each match replaced (in process);
//! - `block`: regular expressions, the reply cancelled when one matches;
//! - `command`: a program, the reply as JSON on stdin, one JSON line back:
//!   `{"action":"send"}`, `{"action":"replace","text":…}` or
//!   `{"action":"cancel","reason":…}`.
//!
//! A command hook is started once per reply, not kept running: each run
//! sees only its own reply (nothing carries over between rooms), a crash
//! or hang costs one reply (`on_error` decides whether it goes out), and
//! nothing is left to supervise. The price is the program's start-up
//! time on every reply (about 1 ms for `sh`, about 100 ms for Python;
//! `docs/config.md`); pattern hooks cost nothing. Like a command agent it runs in a process group of its own,
//! killed at the timeout with its children, its output bounded; unlike an
//! agent it inherits none of tactful's environment (tokens, keys) beyond
//! `PATH`, `HOME`, `LANG`, `LC_ALL` and `TMPDIR`, plus its own `env`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};
use tactful_core::hooks::{HookAction, HookOutcome, HookReply, HookRequest, HookStep};
use tactful_core::secrets;
use tactful_core::transcript::sanitize_name;

use crate::process::{Inherit, run_once, spawn_piped_with, utf8_prefix};

/// The most a command hook may print (its one JSON line, a rewritten reply
/// included); past it the program is stopped and the hook has failed.
pub const MAX_HOOK_OUTPUT: usize = 256 * 1024;
/// How much of a failing hook's stderr is kept, and quoted.
const STDERR_KEEP: usize = 16 * 1024;
const STDERR_QUOTE: usize = 300;
/// The text that replaces a redacted match by default.
pub const DEFAULT_REDACTION: &str = "[redacted]";
/// A command hook's default deadline.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(5);

/// What a command hook's failure (timeout, crash, unreadable answer) does
/// to the reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnError {
    /// Send it as it is (the default: a broken hook does not silence a
    /// persona).
    Send,
    /// Do not send it (for hooks that must never be bypassed).
    Cancel,
}

impl OnError {
    fn as_str(self) -> &'static str {
        match self {
            OnError::Send => "send",
            OnError::Cancel => "cancel",
        }
    }
}

/// How a command hook is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandHook {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its environment, besides the few variables it inherits.
    pub env: BTreeMap<String, String>,
    /// Where it runs; tactful's working directory when `None`.
    pub working_dir: Option<PathBuf>,
    /// How long one run may take.
    pub timeout: Duration,
    /// What a failure does.
    pub on_error: OnError,
}

/// What a hook does.
#[derive(Clone, Debug)]
pub enum HookKind {
    /// Runs a program.
    Command(CommandHook),
    /// Replaces every match of the patterns with `with`.
    Redact {
        /// The patterns, in order.
        patterns: Vec<Regex>,
        /// The replacement (`$1` and friends are not expanded).
        with: String,
    },
    /// Cancels the reply when a pattern matches.
    Block {
        /// The patterns, in order.
        patterns: Vec<Regex>,
    },
}

/// One configured hook.
#[derive(Clone, Debug)]
pub struct Hook {
    /// Its name, as the engine's [`HookRequest::hooks`] lists it.
    pub name: Arc<str>,
    /// What it does.
    pub kind: HookKind,
}

/// Every configured hook, by name.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    hooks: Vec<Hook>,
}

impl Hooks {
    /// The hooks of a config.
    pub fn new(hooks: Vec<Hook>) -> Self {
        Hooks { hooks }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The hooks, in config order.
    pub fn iter(&self) -> impl Iterator<Item = &Hook> {
        self.hooks.iter()
    }

    /// Runs the request's hooks over each of its replies in turn: one
    /// outcome per reply, in order. A name the config does not know (the
    /// engine and the runner built from different configs) cancels the
    /// reply: nothing unreviewed goes out.
    pub async fn run(&self, req: &HookRequest) -> Vec<HookOutcome> {
        let mut outcomes = Vec::with_capacity(req.replies.len());
        for (i, reply) in req.replies.iter().enumerate() {
            outcomes.push(self.run_reply(req, i, reply).await);
        }
        outcomes
    }

    async fn run_reply(&self, req: &HookRequest, index: usize, reply: &HookReply) -> HookOutcome {
        let mut text = reply.text.clone();
        let mut steps = Vec::new();
        for name in &req.hooks {
            let (action, reason, new_text) = match self.hooks.iter().find(|h| &h.name == name) {
                None => (
                    HookAction::Cancel,
                    Some(format!("no hook named `{name}` is configured")),
                    None,
                ),
                Some(hook) => match &hook.kind {
                    HookKind::Redact { patterns, with } => redact(&text, patterns, with),
                    HookKind::Block { patterns } => block(&text, patterns),
                    HookKind::Command(c) => {
                        command(c, name, &hook_json(name, req, index, reply, &text)).await
                    }
                },
            };
            steps.push(HookStep {
                hook: name.clone(),
                action,
                reason,
            });
            match action {
                HookAction::Cancel => {
                    return HookOutcome { steps, text: None };
                }
                HookAction::Replace => text = new_text.unwrap_or_default(),
                HookAction::Send => {}
            }
        }
        HookOutcome {
            steps,
            text: Some(text),
        }
    }
}

type Step = (HookAction, Option<String>, Option<String>);

fn redact(text: &str, patterns: &[Regex], with: &str) -> Step {
    let mut out = std::borrow::Cow::Borrowed(text);
    let mut matches = 0usize;
    for p in patterns {
        let n = p.find_iter(&out).count();
        if n > 0 {
            matches += n;
            out = std::borrow::Cow::Owned(p.replace_all(&out, regex::NoExpand(with)).into_owned());
        }
    }
    match matches {
        0 => (HookAction::Send, None, None),
        n => (
            HookAction::Replace,
            Some(format!(
                "{n} {} redacted",
                if n == 1 { "match" } else { "matches" }
            )),
            Some(out.into_owned()),
        ),
    }
}

fn block(text: &str, patterns: &[Regex]) -> Step {
    match patterns.iter().find(|p| p.is_match(text)) {
        Some(p) => (
            HookAction::Cancel,
            Some(format!("matched `{}`", p.as_str())),
            None,
        ),
        None => (HookAction::Send, None, None),
    }
}

/// The JSON a command hook reads on stdin.
pub fn hook_json(hook: &str, req: &HookRequest, index: usize, reply: &HookReply, text: &str) -> Value {
    json!({
        "hook": hook,
        "on": "before_send",
        "persona": req.persona.as_str(),
        "room": req.room.as_str(),
        "thread": req.thread.as_ref().map(|t| t.as_str()),
        "kind": req.kind.as_str(),
        "notice": req.notice,
        "reply": index,
        "reply_to": reply.reply_to,
        "text": text,
        "triggers": req.triggers.iter().map(|e| json!({
            "message_id": e.id.as_str(),
            "sender_id": e.author.as_str(),
            "sender_name": sanitize_name(&e.author_name),
            "is_bot": e.is_bot,
            "text": e.text.as_ref(),
        })).collect::<Vec<_>>(),
    })
}

async fn command(c: &CommandHook, name: &str, input: &Value) -> Step {
    match run_command(c, input).await {
        Ok(step) => step,
        Err(why) => {
            let why = secrets::redact_clipped(&why, 400);
            tracing::warn!(
                hook = name,
                on_error = c.on_error.as_str(),
                "a before-send hook failed: {why}"
            );
            let reason = Some(format!(
                "the hook failed ({why}); on_error = {}",
                c.on_error.as_str()
            ));
            match c.on_error {
                OnError::Send => (HookAction::Send, reason, None),
                OnError::Cancel => (HookAction::Cancel, reason, None),
            }
        }
    }
}

async fn run_command(c: &CommandHook, input: &Value) -> Result<Step, String> {
    let input = serde_json::to_vec(input).map_err(|e| e.to_string())?;
    let spawned = spawn_piped_with(
        &c.command,
        &c.args,
        &c.env,
        c.working_dir.as_ref(),
        Inherit::Minimal,
    )
    .map_err(|e| e.to_string())?;
    let ran = run_once(spawned, input, MAX_HOOK_OUTPUT, STDERR_KEEP, c.timeout)
        .await
        .map_err(|e| e.to_string())?;
    let Some(status) = ran.status else {
        return Err(format!("it printed more than {} KiB", MAX_HOOK_OUTPUT / 1024));
    };
    if !status.success() {
        return Err(format!("{status}; stderr: {}", ran.err.quote(STDERR_QUOTE)));
    }
    let out = utf8_prefix(&ran.out.bytes)
        .filter(|_| std::str::from_utf8(&ran.out.bytes).is_ok())
        .ok_or("its answer is not UTF-8")?;
    parse_answer(out)
}

/// Reads a command hook's answer: its first non-blank line, a JSON object
/// with an `action`.
pub fn parse_answer(out: &str) -> Result<Step, String> {
    let Some(line) = out.lines().map(str::trim).find(|l| !l.is_empty()) else {
        return Err("it printed nothing".to_owned());
    };
    let shown = || crate::tail(line, 120);
    let v: Value =
        serde_json::from_str(line).map_err(|_| format!("its answer is not a JSON line: {}", shown()))?;
    let reason = v["reason"].as_str().map(|r| crate::tail(r, 300));
    match v["action"].as_str() {
        Some("send") => Ok((HookAction::Send, reason, None)),
        Some("cancel") => Ok((
            HookAction::Cancel,
            Some(reason.unwrap_or_else(|| "cancelled by the hook".to_owned())),
            None,
        )),
        Some("replace") => match v["text"].as_str() {
            Some(t) if t.trim().is_empty() => Ok((
                HookAction::Cancel,
                Some("the hook replaced the reply with nothing".to_owned()),
                None,
            )),
            Some(t) => Ok((HookAction::Replace, reason, Some(t.to_owned()))),
            None => Err("`replace` without a `text` string".to_owned()),
        },
        _ => Err(format!(
            "`action` must be \"send\", \"replace\" or \"cancel\": {}",
            shown()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_counts_and_replaces_every_match_literally() {
        let p = vec![
            Regex::new(r"[\w.]+@[\w.]+").expect("regex"),
            Regex::new(r"sk-\w+").expect("regex"),
        ];
        let (a, reason, text) = redact("mail a@b.io or c@d.org, key sk-abc", &p, "$1 [x]");
        assert_eq!(a, HookAction::Replace);
        assert_eq!(reason.as_deref(), Some("3 matches redacted"));
        assert_eq!(text.as_deref(), Some("mail $1 [x] or $1 [x], key $1 [x]"));
        assert_eq!(redact("nothing here", &p, "x").0, HookAction::Send);
    }

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(
            parse_answer("\n{\"action\":\"send\"}\n").expect("readable").0,
            HookAction::Send
        );
        let (a, r, t) = parse_answer(r#"{"action":"replace","text":"Hi"}"#).expect("readable");
        assert_eq!((a, r, t.as_deref()), (HookAction::Replace, None, Some("Hi")));
        let (a, r, _) = parse_answer(r#"{"action":"cancel","reason":"off topic"}"#).expect("readable");
        assert_eq!((a, r.as_deref()), (HookAction::Cancel, Some("off topic")));
        assert_eq!(
            parse_answer(r#"{"action":"replace","text":"  "}"#)
                .expect("readable")
                .0,
            HookAction::Cancel
        );
        for bad in [
            "",
            "ok",
            r#"{"action":"SEND"}"#,
            r#"{"action":"replace"}"#,
            "[1]",
            r#""send""#,
        ] {
            assert!(parse_answer(bad).is_err(), "{bad:?}");
        }
    }
}
