//! `tactful eval --cache FILE`: real agents' answers kept by their exact
//! request, so a rerun after a policy change only pays for new prompts.
//!
//! A request is the agent (its name and its settings, as configured) and
//! the prompt the engine rendered for the turn (persona prompt, contract,
//! transcript, everything the backend is given); the key is its SHA-256,
//! so the file holds no prompt text and no setting (an API key included).
//! Each answer is appended as one JSON line as soon as it arrives: a run
//! cut short keeps what it paid for. Failures are not kept: a provider's
//! error is asked again next time. A line that cannot be read (a file cut
//! mid-line by a crash, an edit) is skipped with a warning, not fatal.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};
use tactful_agents::Usage;
use tactful_core::{AgentResult, TurnRequest, prompt};

use crate::config::AgentConfig;

/// The cache, loaded from its file, with what it answered this run.
#[derive(Debug)]
pub struct AnswerCache {
    path: PathBuf,
    answers: HashMap<String, (AgentResult, Option<Usage>)>,
    file: Option<std::fs::File>,
    /// The file ends in a line cut short: the next line starts on a new one.
    torn: bool,
    /// Calls answered from the cache this run.
    pub hits: usize,
    /// Calls made for real (and added) this run.
    pub misses: usize,
    /// Lines of the file that could not be read.
    pub skipped: usize,
}

impl AnswerCache {
    /// Opens the cache at `path`, creating it when it does not exist.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let mut cache = AnswerCache {
            path: path.to_owned(),
            answers: HashMap::new(),
            file: None,
            torn: false,
            hits: 0,
            misses: 0,
            skipped: 0,
        };
        match std::fs::read(path) {
            Ok(bytes) => {
                // Bytes that are not UTF-8 spoil their line only.
                let text = String::from_utf8_lossy(&bytes);
                cache.torn = !text.is_empty() && !text.ends_with('\n');
                for (n, line) in text.lines().enumerate() {
                    match parse_line(line) {
                        Some((key, answer)) => {
                            cache.answers.insert(key, answer);
                        }
                        None if line.trim().is_empty() => {}
                        None => {
                            cache.skipped += 1;
                            tracing::warn!(file = %path.display(), line = n + 1, "skipping a cache line that cannot be read");
                        }
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("{}: cannot read the cache", path.display())),
        }
        Ok(cache)
    }

    /// How many answers it holds.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// The key of a call: agent `name`'s settings, whether the turn was
    /// addressed, its longest answer, and the prompt `req` renders to
    /// under `contract`. The turn's id and start time are not
    /// in the prompt, so the same conversation under another policy (more
    /// turns before, another flush time) still finds its answers.
    pub fn key(name: &str, agent: &AgentConfig, req: &TurnRequest, contract: &str) -> String {
        let rendered = serde_json::to_string(&prompt::render(req, contract)).unwrap_or_default();
        let mut h = Sha256::new();
        // Beside the prompt, what a backend reads of the turn itself:
        // whether it was addressed (an "I don't know" or silence) and how
        // long an answer may be.
        let turn = format!("{:?} {} {}", req.kind, req.addressed, req.max_reply_chars);
        for part in [name, &format!("{agent:?}"), &turn, &rendered] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part.as_bytes());
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The answer kept for `key`, counted as a hit.
    pub fn get(&mut self, key: &str) -> Option<(AgentResult, Option<Usage>)> {
        let hit = self.answers.get(key).cloned();
        if hit.is_some() {
            self.hits += 1;
        }
        hit
    }

    /// Keeps a new answer (not a failure), written to the file at once.
    pub fn put(
        &mut self,
        key: &str,
        agent: &str,
        result: &AgentResult,
        usage: Option<Usage>,
    ) -> anyhow::Result<()> {
        self.misses += 1;
        let (text, reasoning) = match result {
            AgentResult::Output(t) => (t, 0),
            AgentResult::Reasoned {
                text,
                reasoning_chars,
            } => (text, *reasoning_chars),
            AgentResult::Failed(_) => return Ok(()),
        };
        let mut line = json!({"key": key, "agent": agent, "text": text});
        if reasoning > 0 {
            line["reasoning_chars"] = json!(reasoning);
        }
        if let Some(u) = usage {
            line["usage"] = json!([u.prompt_tokens, u.completion_tokens, u.cached_tokens]);
        }
        if self.file.is_none() {
            self.file = Some(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&self.path)
                    .with_context(|| format!("{}: cannot write the cache", self.path.display()))?,
            );
        }
        let file = self.file.as_mut().expect("opened above");
        let start = if std::mem::take(&mut self.torn) { "\n" } else { "" };
        // One write per line: two runs sharing a file append whole lines.
        file.write_all(format!("{start}{line}\n").as_bytes())
            .with_context(|| format!("{}: cannot write the cache", self.path.display()))?;
        self.answers.insert(key.to_owned(), (result.clone(), usage));
        Ok(())
    }
}

/// One line of the file, or `None` when it is not one.
fn parse_line(line: &str) -> Option<(String, (AgentResult, Option<Usage>))> {
    let v: Value = serde_json::from_str(line).ok()?;
    let key = v["key"].as_str().filter(|k| k.len() == 64)?.to_owned();
    let text = v["text"].as_str()?.to_owned();
    let result = match v["reasoning_chars"].as_u64() {
        Some(n) if n > 0 => AgentResult::Reasoned {
            text,
            reasoning_chars: n as usize,
        },
        _ => AgentResult::Output(text),
    };
    let usage = v["usage"].as_array().map(|u| {
        let n = |i: usize| u.get(i).and_then(Value::as_u64).unwrap_or(0);
        Usage {
            prompt_tokens: n(0),
            completion_tokens: n(1),
            cached_tokens: n(2),
        }
    });
    Some((key, (result, usage)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_cut_by_a_crash_is_skipped_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cache.jsonl");
        let good = format!(
            "{{\"key\": \"{}\", \"agent\": \"m\", \"text\": \"hi\", \"usage\": [10, 2, 0]}}",
            "a".repeat(64)
        );
        // The torn line has no line break: the next answer must not join it.
        std::fs::write(&path, format!("{good}\n{{\"key\": \"{}\", \"te", "b".repeat(64))).expect("the cache");
        let mut cache = AnswerCache::open(&path).expect("the cache");
        assert_eq!((cache.len(), cache.skipped), (1, 1));
        let (result, usage) = cache.get(&"a".repeat(64)).expect("the cache");
        assert_eq!(result, AgentResult::Output("hi".into()));
        assert_eq!(usage.map(|u| u.prompt_tokens), Some(10));
        assert_eq!(cache.hits, 1);
        // A new answer goes on a line of its own after the torn one.
        cache
            .put(&"c".repeat(64), "m", &AgentResult::Output("new".into()), None)
            .expect("the cache");
        cache
            .put(
                &"d".repeat(64),
                "m",
                &AgentResult::Failed("HTTP 500".into()),
                None,
            )
            .expect("the cache");
        let again = AnswerCache::open(&path).expect("the cache");
        assert_eq!((again.len(), again.skipped), (2, 1), "the failure is not kept");
    }
}
