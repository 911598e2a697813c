//! Scripted conversations for `tactful replay`, one JSON object a line.
//!
//! ```text
//! {"at": 0.5, "from": "alice", "text": "@docs how do I reset?"}
//! ```
//!
//! Fields: `at` (seconds, never decreasing), `from`, `text`; optional `id`
//! (default `m<line>`), `room` (default `main`), `thread`, `name`, `bot`,
//! `mentions` (explicit ids; when absent, `@handle` tokens in the text
//! count), `reply_to`, and `dm` + `to` for a DM to persona `to` (its room
//! defaults to `dm:<from>:<to>`). Blank lines and lines starting with `#`
//! are skipped. Every problem is reported with its line number.
//!
//! Two lines are not messages but say how the replay runs, for scenarios
//! with scheduled turns (which may have no messages at all):
//! `{"at": 259200, "end": true}` stops the replay at that time (without
//! it, a replay ends once its messages and their turns are done, whatever
//! schedules would run later), and
//! `{"start": "2026-03-28T08:05:00Z"}` sets when the virtual clock starts
//! (what schedules run by; `tactful replay --start` overrides it; without
//! either it starts at 1970-01-01T00:00:00Z), and
//! `{"last_run": {"daily": "2026-03-29T07:00:00Z"}}` starts as a restart
//! would, with that schedule last run then (a run missed since, within its
//! `catch_up_seconds`, is made up at the start).

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use tactful_core::{Mentions, Message, Sender, Timestamp, UserId};

/// A scenario line that cannot be replayed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ScenarioError {
    /// The file, as given.
    pub path: PathBuf,
    /// 1-based line number, when the problem is on a line.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{l}: {}", self.path.display(), self.message),
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLine {
    at: f64,
    from: String,
    text: String,
    id: Option<String>,
    room: Option<String>,
    thread: Option<String>,
    name: Option<String>,
    #[serde(default)]
    bot: bool,
    /// The platform handle `allowed_users` may name (`@alice` on Telegram).
    handle: Option<String>,
    mentions: Option<Vec<String>>,
    reply_to: Option<String>,
    #[serde(default)]
    dm: bool,
    to: Option<String>,
    /// What each persona should do with this message (`tactful eval`);
    /// `tactful replay` ignores it.
    #[serde(default)]
    expect: std::collections::BTreeMap<String, String>,
}

/// What a persona should do with a labelled message (`tactful eval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Answer it.
    Reply,
    /// Stay quiet.
    Silent,
    /// Either is fine: played, not scored.
    Any,
}

/// A parsed scenario: its messages, and how the replay runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scenario {
    /// The messages, in order.
    pub events: Vec<ScenarioEvent>,
    /// Where the replay stops (seconds from its start), if the scenario
    /// says.
    pub end: Option<f64>,
    /// Each schedule's last run before the replay starts.
    pub last_runs: Vec<(Arc<str>, Timestamp)>,
    /// When the virtual clock starts, if the scenario says (`--start`
    /// overrides it).
    pub start: Option<Timestamp>,
}

impl std::ops::Deref for Scenario {
    type Target = [ScenarioEvent];

    fn deref(&self) -> &[ScenarioEvent] {
        &self.events
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnd {
    at: f64,
    end: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStart {
    start: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLastRun {
    last_run: std::collections::BTreeMap<String, String>,
}

/// One message of a scenario, with the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioEvent {
    /// 1-based line number in the file.
    pub line: usize,
    /// The message, its `time` set from `at`.
    pub message: Message,
    /// Its labels: what personas should do with it (`expect`), in
    /// persona id order.
    pub expect: Vec<(String, Expect)>,
}

/// The longest scenario time accepted: 100 years, far beyond any replay and
/// well inside millisecond arithmetic.
const MAX_AT_SECONDS: f64 = 100.0 * 365.0 * 86_400.0;

/// Parses scenario text. `persona_ids` are the personas a `to` may name.
pub fn parse(src: &str, path: &Path, persona_ids: &[&str]) -> Result<Scenario, ScenarioError> {
    let err = |line: usize, message: String| ScenarioError {
        path: path.to_owned(),
        line: Some(line),
        message,
    };
    let mut events = Vec::new();
    let mut end = None;
    let mut last_runs = Vec::new();
    let mut start = None;
    let mut last_at = 0.0_f64;
    let mut seen: HashMap<(String, String), usize> = HashMap::new();
    for (i, text) in src.lines().enumerate() {
        let n = i + 1;
        let trimmed = text.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let control: Option<serde_json::Value> = serde_json::from_str(trimmed).ok();
        let key = |k: &str| control.as_ref().is_some_and(|v| v.get(k).is_some());
        if key("end") {
            let e: RawEnd = serde_json::from_str(trimmed).map_err(|e| err(n, clean_json_error(&e)))?;
            if !e.end || !e.at.is_finite() || e.at < last_at || e.at > MAX_AT_SECONDS {
                return Err(err(
                    n,
                    format!(
                        "an `end` line is {{\"at\": <seconds, not before the line above>, \"end\": true}}; got at = {}",
                        e.at
                    ),
                ));
            }
            end = Some(e.at);
            last_at = e.at;
            continue;
        }
        if key("start") {
            let s: RawStart = serde_json::from_str(trimmed).map_err(|e| err(n, clean_json_error(&e)))?;
            start = Some(rfc3339(&s.start).ok_or_else(|| {
                err(
                    n,
                    format!(
                        "`start`: {:?} is not an RFC 3339 time like \"2026-03-28T23:00:00Z\"",
                        s.start
                    ),
                )
            })?);
            continue;
        }
        if key("last_run") {
            let l: RawLastRun = serde_json::from_str(trimmed).map_err(|e| err(n, clean_json_error(&e)))?;
            for (name, when) in l.last_run {
                let t = rfc3339(&when).ok_or_else(|| {
                    err(n, format!("`last_run` of {name:?}: {when:?} is not an RFC 3339 time like \"2026-03-29T07:00:00Z\""))
                })?;
                last_runs.push((Arc::from(name), t));
            }
            continue;
        }
        if end.is_some() {
            return Err(err(n, "nothing may follow the `end` line".to_owned()));
        }
        let raw: RawLine = serde_json::from_str(trimmed).map_err(|e| err(n, clean_json_error(&e)))?;
        if !raw.at.is_finite() || raw.at < 0.0 || raw.at > MAX_AT_SECONDS {
            return Err(err(
                n,
                format!("`at` must be a number of seconds from 0, got {}", raw.at),
            ));
        }
        if raw.at < last_at {
            return Err(err(
                n,
                format!(
                    "`at` is {}, earlier than the line before ({last_at}); times must not decrease",
                    raw.at
                ),
            ));
        }
        last_at = raw.at;
        if raw.from.trim().is_empty() {
            return Err(err(n, "`from` must not be empty".to_owned()));
        }
        let dm_to = match (raw.dm, raw.to) {
            (true, Some(to)) => {
                if !persona_ids.contains(&to.as_str()) {
                    return Err(err(
                        n,
                        format!(
                            "`to` = {to:?} is not a persona (personas: {})",
                            persona_ids.join(", ")
                        ),
                    ));
                }
                Some(to)
            }
            (true, None) => {
                return Err(err(
                    n,
                    "`dm: true` needs `to`: the persona the DM is for".to_owned(),
                ));
            }
            (false, Some(_)) => return Err(err(n, "`to` only applies with `dm: true`".to_owned())),
            (false, None) => None,
        };
        let room = match (&raw.room, &dm_to) {
            (Some(r), _) => r.clone(),
            (None, Some(to)) => format!("dm:{}:{to}", raw.from),
            (None, None) => "main".to_owned(),
        };
        let id = raw.id.clone().unwrap_or_else(|| format!("m{n}"));
        if let Some(first) = seen.insert((room.clone(), id.clone()), n) {
            return Err(err(
                n,
                format!("message id {id:?} is already used in room {room:?} on line {first}"),
            ));
        }
        let mut expect = Vec::new();
        for (persona, want) in &raw.expect {
            if !persona_ids.contains(&persona.as_str()) {
                return Err(err(
                    n,
                    format!(
                        "`expect` names {persona:?}, which is not a persona (personas: {})",
                        persona_ids.join(", ")
                    ),
                ));
            }
            let want = match want.as_str() {
                "reply" => Expect::Reply,
                "silent" => Expect::Silent,
                "any" => Expect::Any,
                other => {
                    return Err(err(
                        n,
                        format!("`expect.{persona}` = {other:?}: write \"reply\", \"silent\" or \"any\""),
                    ));
                }
            };
            expect.push((persona.clone(), want));
        }
        let time = Timestamp::from_millis((raw.at * 1000.0).round() as u64);
        let message = Message {
            id: id.into(),
            room: room.into(),
            thread: raw.thread.map(Into::into),
            sender: Sender {
                name: Arc::from(raw.name.as_deref().unwrap_or(&raw.from)),
                id: UserId::new(raw.from),
                is_bot: raw.bot,
                handle: raw.handle.map(Arc::from),
            },
            text: Arc::from(raw.text),
            mentions: match raw.mentions {
                Some(ids) => Mentions::Explicit(ids.into_iter().map(UserId::new).collect()),
                None => Mentions::FromText,
            },
            reply_to: raw.reply_to.map(Into::into),
            is_dm: dm_to.is_some(),
            dm_to: dm_to.map(Into::into),
            time,
        };
        events.push(ScenarioEvent {
            line: n,
            message,
            expect,
        });
    }
    Ok(Scenario {
        events,
        end,
        last_runs,
        start,
    })
}

/// An RFC 3339 time at or after 1970, as a timestamp.
pub fn rfc3339(text: &str) -> Option<Timestamp> {
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .and_then(|d| u64::try_from(d.timestamp_millis()).ok())
        .map(Timestamp::from_millis)
}

/// serde_json reports "... at line 1 column 30" about the single line it
/// was given; the file line is reported separately, so keep only the column.
fn clean_json_error(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    match msg.rfind(" at line ") {
        Some(i) => format!("{} (column {})", &msg[..i], e.column()),
        None => msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_ok(src: &str) -> Vec<ScenarioEvent> {
        parse(src, Path::new("s.jsonl"), &["docs"]).expect("valid").events
    }

    #[test]
    fn control_lines_set_the_end_and_last_runs() {
        let s = parse(
            "{\"last_run\": {\"daily\": \"2026-03-29T07:00:00Z\"}}\n{\"at\": 1, \"from\": \"a\", \"text\": \"hi\"}\n{\"at\": 86400, \"end\": true}\n",
            Path::new("s.jsonl"),
            &["docs"],
        )
        .expect("valid");
        assert_eq!(s.events.len(), 1);
        assert_eq!(s.end, Some(86400.0));
        assert_eq!(
            s.last_runs,
            [(Arc::from("daily"), Timestamp::from_millis(1_774_767_600_000))]
        );
        for (bad, says) in [
            (
                "{\"at\": 5, \"end\": true}\n{\"at\": 6, \"from\": \"a\", \"text\": \"x\"}",
                "nothing may follow",
            ),
            (
                "{\"at\": 1, \"from\": \"a\", \"text\": \"x\"}\n{\"at\": 0, \"end\": true}",
                "an `end` line",
            ),
            ("{\"last_run\": {\"daily\": \"yesterday\"}}", "RFC 3339"),
        ] {
            let e = parse(bad, Path::new("s.jsonl"), &["docs"]).expect_err("invalid");
            assert!(e.to_string().contains(says), "{e}");
        }
    }

    fn parse_err(src: &str) -> ScenarioError {
        parse(src, Path::new("s.jsonl"), &["docs"]).expect_err("invalid")
    }

    #[test]
    fn defaults_fill_in() {
        let ev = parse_ok("# comment\n\n{\"at\": 0.5, \"from\": \"alice\", \"text\": \"hi\"}\n");
        assert_eq!(ev.len(), 1);
        let m = &ev[0].message;
        assert_eq!(
            (m.id.as_str(), m.room.as_str(), m.time),
            ("m3", "main", Timestamp(500))
        );
        assert_eq!(m.mentions, Mentions::FromText);
        assert_eq!(m.sender.name.as_ref(), "alice");
    }

    #[test]
    fn a_platform_handle_rides_along() {
        let ev = parse_ok(r#"{"at": 1, "from": "tg:42", "handle": "@alice", "text": "hi"}"#);
        assert_eq!(ev[0].message.sender.handle.as_deref(), Some("@alice"));
        assert_eq!(ev[0].message.sender.id.as_str(), "tg:42");
    }

    #[test]
    fn dms_get_their_own_room() {
        let ev = parse_ok(r#"{"at": 1, "from": "alice", "text": "hi", "dm": true, "to": "docs"}"#);
        let m = &ev[0].message;
        assert!(m.is_dm);
        assert_eq!(m.room.as_str(), "dm:alice:docs");
        assert_eq!(m.dm_to.as_ref().map(|p| p.as_str()), Some("docs"));
    }

    #[test]
    fn errors_name_the_line() {
        let e = parse_err(
            "{\"at\": 1, \"from\": \"a\", \"text\": \"x\"}\n{\"at\": 0.5, \"from\": \"a\", \"text\": \"y\"}",
        );
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("must not decrease"), "{e}");
        let e = parse_err("\n{\"at\": 1, \"from\": \"a\"}");
        assert_eq!(e.line, Some(2));
        assert!(e.message.contains("missing field `text`"), "{e}");
        assert!(e.to_string().starts_with("s.jsonl:2: "), "{e}");
        let e = parse_err("{\"at\": 1, \"from\": \"a\", \"text\": \"x\", \"form\": 1}");
        assert!(e.message.contains("unknown field `form`"), "{e}");
        let e = parse_err("not json");
        assert_eq!(e.line, Some(1));
        let e = parse_err(r#"{"at": 1, "from": "a", "text": "x", "dm": true}"#);
        assert!(e.message.contains("needs `to`"), "{e}");
        let e = parse_err(r#"{"at": 1, "from": "a", "text": "x", "dm": true, "to": "chef"}"#);
        assert!(e.message.contains("not a persona"), "{e}");
        let e = parse_err(
            "{\"at\": 1, \"from\": \"a\", \"text\": \"x\", \"id\": \"q\"}\n{\"at\": 1, \"from\": \"b\", \"text\": \"y\", \"id\": \"q\"}",
        );
        assert!(e.message.contains("line 1"), "{e}");
        let e = parse_err(r#"{"at": -1, "from": "a", "text": "x"}"#);
        assert!(e.message.contains("`at`"), "{e}");
    }
}
