//! `kind = "script"`: canned answers chosen by regular expressions.
//!
//! A script agent makes a whole conversation reproducible without a model:
//! the first rule whose `when` matches the triggering text answers with its
//! `reply` template, optionally after `delay_ms` or as a failure; when no
//! rule matches it stays silent (`NO_REPLY`). Replays use it to show every
//! engine rule, and tests use it as the agent double.

use std::time::Duration;

use futures::future::BoxFuture;
use regex::Regex;
use tactful_core::transcript::{Entry, sanitize_name};
use tactful_core::{AgentResult, TurnRequest};

use crate::{Agent, AgentError, AgentReply, Deltas};

/// One `{ when, reply, delay_ms, fail }` rule.
#[derive(Clone, Debug)]
pub struct ScriptRule {
    /// Matched against the triggering message's text.
    pub when: Regex,
    /// The answer template: `{msg_id}`, `{from}`, `{from_name}`, `{text}`,
    /// `{persona}` and `{room}` are filled in. With `fail`, the error text.
    pub reply: String,
    /// How long the agent "thinks" before answering.
    pub delay: Duration,
    /// Whether the turn fails instead of answering.
    pub fail: bool,
}

/// A script agent: ordered rules, first match wins.
#[derive(Clone, Debug, Default)]
pub struct ScriptAgent {
    rules: Vec<ScriptRule>,
}

/// What a script agent answers, and after how long.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptAnswer {
    /// The turn's result.
    pub result: AgentResult,
    /// The scripted thinking time.
    pub delay: Duration,
    /// Index of the rule that matched, if one did.
    pub rule: Option<usize>,
}

/// The answer when no rule matches.
pub const NO_MATCH_REPLY: &str = "NO_REPLY";

impl ScriptAgent {
    /// A script agent with these rules, in order.
    pub fn new(rules: Vec<ScriptRule>) -> Self {
        ScriptAgent { rules }
    }

    /// Answers a turn. Rules are tried in order against the triggering
    /// messages, newest first; the first match answers about that message.
    pub fn answer(&self, req: &TurnRequest) -> ScriptAnswer {
        for (i, rule) in self.rules.iter().enumerate() {
            if let Some(trigger) = req.triggers.iter().rev().find(|e| rule.when.is_match(&e.text)) {
                let text = render(&rule.reply, req, trigger);
                let result = if rule.fail {
                    AgentResult::Failed(if text.trim().is_empty() {
                        format!("script rule {} failed on purpose", i + 1)
                    } else {
                        text
                    })
                } else {
                    AgentResult::Output(text)
                };
                return ScriptAnswer {
                    result,
                    delay: rule.delay,
                    rule: Some(i),
                };
            }
        }
        ScriptAnswer {
            result: AgentResult::Output(NO_MATCH_REPLY.to_owned()),
            delay: Duration::ZERO,
            rule: None,
        }
    }
}

/// Live, a script agent really waits its `delay_ms`; replays use
/// [`ScriptAgent::answer`] and move the virtual clock instead.
impl Agent for ScriptAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let answer = self.answer(turn);
            tokio::time::sleep(answer.delay).await;
            match answer.result {
                AgentResult::Output(text) | AgentResult::Reasoned { text, .. } => {
                    deltas.delta(&text);
                    Ok(AgentReply::text(text))
                }
                AgentResult::Failed(reason) => Err(AgentError::Failed(reason)),
            }
        })
    }
}

/// Fills a reply template. Unknown `{names}` are left as they are.
pub fn render(template: &str, req: &TurnRequest, trigger: &Entry) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let value = after.find('}').and_then(|close| {
            let v = match &after[..close] {
                "msg_id" => trigger.id.to_string(),
                "from" => trigger.author.to_string(),
                "from_name" => sanitize_name(&trigger.author_name),
                "text" => trigger.text.to_string(),
                "persona" => req.persona.to_string(),
                "room" => req.room.to_string(),
                _ => return None,
            };
            Some((v, close))
        });
        match value {
            Some((v, close)) => {
                out.push_str(&v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tactful_core::persona::PersonaIdx;
    use tactful_core::{Timestamp, TurnId, TurnKind};

    fn entry(id: &str, text: &str) -> Arc<Entry> {
        Arc::new(Entry {
            id: id.into(),
            author: "alice".into(),
            author_name: "Alice\nAdmin".into(),
            is_bot: false,
            persona: None,
            text: text.into(),
            reply_to: None,
            thread: None,
            time: Timestamp(0),
        })
    }

    fn request(triggers: Vec<Arc<Entry>>) -> TurnRequest {
        TurnRequest {
            turn: TurnId(1),
            kind: TurnKind::Reply,
            started: Timestamp(0),
            persona: "docs".into(),
            persona_idx: PersonaIdx(0),
            persona_name: "Docs".into(),
            agent: "main".into(),
            prompt: "".into(),
            room: "main".into(),
            thread: None,
            is_dm: false,
            silence_token: None,
            triggers,
            history: vec![],
            trigger_at: vec![],
            max_chars: 1000,
            room_bots: vec![],
            flush_trigger: None,
            addressed: true,
            max_reply_chars: tactful_core::policy::DEFAULT_MAX_REPLY_CHARS,
            strip_reasoning: true,
            hooked: false,
        }
    }

    fn rule(when: &str, reply: &str) -> ScriptRule {
        ScriptRule {
            when: Regex::new(when).expect("test regex"),
            reply: reply.into(),
            delay: Duration::ZERO,
            fail: false,
        }
    }

    #[test]
    fn first_matching_rule_answers_with_placeholders() {
        let agent = ScriptAgent::new(vec![
            rule(
                "(?i)reset",
                "[[reply_to:{msg_id}]]\n{from_name} ({from}) asked {persona}: {text} {unknown}",
            ),
            rule("", "fallback"),
        ]);
        let a = agent.answer(&request(vec![entry("m7", "How to RESET?")]));
        assert_eq!(
            a.result,
            AgentResult::Output(
                "[[reply_to:m7]]\nAlice Admin (alice) asked docs: How to RESET? {unknown}".into()
            )
        );
        assert_eq!(a.rule, Some(0));
        assert_eq!(agent.answer(&request(vec![entry("m8", "hi")])).rule, Some(1));
    }

    #[test]
    fn no_match_is_silence_and_fail_is_an_error() {
        let agent = ScriptAgent::new(vec![ScriptRule {
            fail: true,
            ..rule("boom", "")
        }]);
        assert_eq!(
            agent.answer(&request(vec![entry("m1", "hello")])).result,
            AgentResult::Output("NO_REPLY".into())
        );
        assert_eq!(
            agent.answer(&request(vec![entry("m1", "boom")])).result,
            AgentResult::Failed("script rule 1 failed on purpose".into())
        );
    }

    #[test]
    fn newest_trigger_is_tried_first() {
        let agent = ScriptAgent::new(vec![rule("q", "{msg_id}")]);
        let a = agent.answer(&request(vec![entry("m1", "q1"), entry("m2", "q2")]));
        assert_eq!(a.result, AgentResult::Output("m2".into()));
    }
}
