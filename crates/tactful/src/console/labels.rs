//! Labels from the console: a person marks a decision "should have
//! answered" or "should have stayed quiet", and the room's marks become a
//! labelled file `tactful eval` replays, and the policy panel's score.
//!
//! A mark is one saved key per (room, message, persona), with what was
//! wanted, who marked it (the console token's name) and when; clearing it
//! forgets the key. Kept in the store, marks survive restarts and every
//! process sharing the store reads the same ones. Only the room's last
//! [`WINDOW`] messages can be marked: the export replays them, and a room
//! keeps at most [`MAX_MARKS`] marks, so nothing grows without bound.
//!
//! Marks decide nothing, so they do not go through the engine: they are
//! labels on what it decided.

use std::collections::{BTreeMap, HashSet};

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tactful_core::{Mentions, Message};
use tactful_runtime::wall_clock;
use tactful_store::Op;

use super::{Answer, ApiError, Console, Params, WHO, error, room_of};

/// Where marks are kept: `console:label:<room>␟<message>␟<persona>` (room
/// ids hold no control character; see `room_ids`).
const LABEL_KEY: &str = "console:label:";
const SEP: char = '\u{1f}';
/// The room's messages a mark may be on, and the export replays.
pub(crate) const WINDOW: usize = tactful_store::MAX_PAGE;
/// The most marks a room keeps.
pub(crate) const MAX_MARKS: usize = tactful_store::MAX_PAGE;

/// One mark.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Label {
    /// The room.
    pub room: String,
    /// The message.
    pub msg: String,
    /// The persona it is about.
    pub persona: String,
    /// `reply` (should have answered) or `silent` (should have stayed quiet).
    pub want: String,
    /// The token's name that marked it.
    pub who: String,
    /// When (Unix milliseconds).
    pub at: u64,
}

/// What a mark's key holds.
#[derive(Serialize, Deserialize)]
struct Stored {
    want: String,
    who: String,
    at: u64,
}

fn room_prefix(room: &str) -> String {
    format!("{LABEL_KEY}{room}{SEP}")
}

fn key(room: &str, msg: &str, persona: &str) -> String {
    format!("{}{msg}{SEP}{persona}", room_prefix(room))
}

/// The marks among saved `rows` of `room` (unreadable ones left out).
fn parse_rows(room: &str, rows: &[(String, String)]) -> Vec<Label> {
    let prefix = room_prefix(room);
    let mut labels: Vec<Label> = rows
        .iter()
        .filter_map(|(k, v)| {
            let (msg, persona) = k.strip_prefix(&prefix)?.rsplit_once(SEP)?;
            let s: Stored = serde_json::from_str(v).ok()?;
            Some(Label {
                room: room.to_owned(),
                msg: msg.to_owned(),
                persona: persona.to_owned(),
                want: s.want,
                who: s.who,
                at: s.at,
            })
        })
        .collect();
    labels.sort_by(|a, b| (a.at, &a.msg, &a.persona).cmp(&(b.at, &b.msg, &b.persona)));
    labels
}

impl Console {
    /// The room's marks and last [`WINDOW`] messages.
    pub(super) async fn marked(&self, room: &str) -> Result<(Vec<Label>, Vec<Message>), ApiError> {
        let wanted = room.to_owned();
        let (rows, messages) = self
            .read(move |r| {
                Ok((
                    r.state_with_prefix(&room_prefix(&wanted), MAX_MARKS)?,
                    r.recent_messages(&wanted, WINDOW)?,
                ))
            })
            .await?;
        Ok((parse_rows(room, &rows), messages))
    }

    /// The room's marks alone.
    async fn marks(&self, room: &str) -> Result<Vec<Label>, ApiError> {
        let wanted = room.to_owned();
        let rows = self
            .read(move |r| r.state_with_prefix(&room_prefix(&wanted), MAX_MARKS))
            .await?;
        Ok(parse_rows(room, &rows))
    }
}

/// The config's persona ids, in its order.
pub(super) fn persona_ids(c: &Console) -> Vec<String> {
    c.live
        .with_config(|config| config.engine.personas.iter().map(|p| p.id.to_string()).collect())
}

/// `?name=`, required.
fn param<'q>(
    q: &'q std::collections::HashMap<String, String>,
    name: &str,
    what: &str,
) -> Result<&'q str, ApiError> {
    q.get(name)
        .map(String::as_str)
        .filter(|v| !v.is_empty() && v.len() <= 512)
        .ok_or_else(|| error(StatusCode::BAD_REQUEST, &format!("`{name}` is required: {what}")))
}

/// Marks a decision: `?room=&msg=&persona=&want=reply|silent`. The message
/// must be among the room's last [`WINDOW`] and the persona the config's;
/// the answer comes once the store has kept the mark.
pub(super) async fn mark(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    let msg = param(&q, "msg", "the message's id, as /console/api/decisions gives it")?.to_owned();
    let persona = param(&q, "persona", "a persona's id")?.to_owned();
    let want = param(
        &q,
        "want",
        "`reply` (should have answered) or `silent` (should have stayed quiet)",
    )?;
    if !["reply", "silent"].contains(&want) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!(
                "`want` is `reply` (should have answered) or `silent` (should have stayed quiet), not {want:?}"
            ),
        ));
    }
    let personas = persona_ids(&c);
    if !personas.contains(&persona) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!("{persona:?} is not a persona (personas: {})", personas.join(", ")),
        ));
    }
    let (labels, messages) = c.marked(&room).await?;
    let Some(marked) = messages.iter().find(|m| m.id.as_str() == msg) else {
        return Err(error(
            StatusCode::NOT_FOUND,
            &format!(
                "no message {msg:?} among room {room:?}'s last {WINDOW} messages: only those can be marked (the export replays them)"
            ),
        ));
    };
    if is_own(marked, &personas) {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!(
                "{msg:?} is a persona's own message: mark what it should have done with the messages it heard"
            ),
        ));
    }
    let replaces = labels.iter().any(|l| l.msg == msg && l.persona == persona);
    if !replaces && labels.len() >= MAX_MARKS {
        return Err(error(
            StatusCode::CONFLICT,
            &format!("room {room:?} has {MAX_MARKS} marks, the most it keeps: clear some first"),
        ));
    }
    let label = Label {
        room: room.clone(),
        msg,
        persona,
        want: want.to_owned(),
        who: WHO.to_owned(),
        at: wall_clock().as_millis(),
    };
    let stored = Stored {
        want: label.want.clone(),
        who: label.who.clone(),
        at: label.at,
    };
    c.live
        .keep(vec![Op::PlatformState {
            key: key(&room, &label.msg, &label.persona),
            value: serde_json::to_string(&stored).unwrap_or_default(),
        }])
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()))?;
    tracing::info!(
        room,
        msg = label.msg,
        persona = label.persona,
        want,
        "decision marked in the console"
    );
    Ok(Json(json!({ "label": label })).into_response())
}

/// Clears a mark: `?room=&msg=&persona=`; `cleared` says whether there
/// was one.
pub(super) async fn clear(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    let msg = param(&q, "msg", "the message's id")?.to_owned();
    let persona = param(&q, "persona", "a persona's id")?.to_owned();
    let was = c
        .marks(&room)
        .await?
        .iter()
        .any(|l| l.msg == msg && l.persona == persona);
    // Forgotten whether listed or not: forgetting is idempotent, and a
    // mark beyond the listing's bound must still be clearable.
    c.live
        .keep(vec![Op::ForgetState {
            key: key(&room, &msg, &persona),
        }])
        .await
        .map_err(|e| error(StatusCode::SERVICE_UNAVAILABLE, &e.to_string()))?;
    if was {
        tracing::info!(room, msg, persona, "mark cleared in the console");
    }
    Ok(Json(json!({ "room": room, "msg": msg, "persona": persona, "cleared": was })).into_response())
}

/// The room's marks: as a labelled file `tactful eval` replays (the
/// default: the room's messages up to the last marked one, each mark an
/// `expect`), or with `?as=list` as JSON for the page.
pub(super) async fn labels(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    let (labels, messages) = c.marked(&room).await?;
    match q.get("as").map(String::as_str) {
        Some("list") => Ok(Json(json!({ "room": room, "labels": labels })).into_response()),
        None | Some("eval") => {
            let file = eval_file(&room, &labels, &messages, &persona_ids(&c));
            Ok((
                [
                    (
                        header::CONTENT_TYPE,
                        "application/x-ndjson; charset=utf-8".to_owned(),
                    ),
                    (
                        header::CONTENT_DISPOSITION,
                        format!("attachment; filename=\"{}.labelled.jsonl\"", file_name(&room)),
                    ),
                ],
                file,
            )
                .into_response())
        }
        Some(other) => Err(error(
            StatusCode::BAD_REQUEST,
            &format!("`as` is `eval` (the default: a labelled file) or `list`, not {other:?}"),
        )),
    }
}

/// Whether `m` is one of the personas' own messages.
fn is_own(m: &Message, personas: &[String]) -> bool {
    m.sender.is_bot && personas.iter().any(|p| p == m.sender.id.as_str())
}

/// A room id as a file name: letters, digits, `-`, `_`, `.` kept.
fn file_name(room: &str) -> String {
    room.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect()
}

/// The labelled file: a `start` line, then the room's `messages` (oldest
/// first) up to the last marked one, as a replay scenario, each mark an
/// `expect`. The personas' own messages are left out: replayed, they speak
/// for themselves. Marks on messages no longer among them are named in a
/// comment.
pub(crate) fn eval_file(room: &str, labels: &[Label], messages: &[Message], personas: &[String]) -> String {
    let mut expect: BTreeMap<&str, serde_json::Map<String, Value>> = BTreeMap::new();
    // Marks for a persona the config no longer has are left out: the
    // file must replay under this config.
    for l in labels.iter().filter(|l| personas.contains(&l.persona)) {
        expect
            .entry(l.msg.as_str())
            .or_default()
            .insert(l.persona.clone(), json!(l.want));
    }
    let mut out = format!(
        "# Marked in tactful's console, room {room:?}: {} marks. Score it with\n# tactful eval -c <config> <this file>\n",
        labels.len()
    );
    let present: HashSet<&str> = messages.iter().map(|m| m.id.as_str()).collect();
    let gone: Vec<&str> = expect.keys().copied().filter(|m| !present.contains(m)).collect();
    if !gone.is_empty() {
        out.push_str(&format!(
            "# marked, but no longer among the room's last {WINDOW} messages: {}\n",
            gone.join(", ")
        ));
    }
    let Some(last) = messages.iter().rposition(|m| expect.contains_key(m.id.as_str())) else {
        return out;
    };
    let own = |m: &Message| is_own(m, personas);
    let start_ms = messages.first().map_or(0, |m| m.time.as_millis() / 1000 * 1000);
    if let Some(t) = chrono::DateTime::from_timestamp_millis(start_ms as i64) {
        out.push_str(&format!(
            "{}\n",
            json!({ "start": t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true) })
        ));
    }
    let mut at = 0.0f64;
    for m in messages[..=last].iter().filter(|m| !own(m)) {
        // Platforms' clocks may step back a little: times never decrease.
        at = at.max(m.time.as_millis().saturating_sub(start_ms) as f64 / 1000.0);
        let mut line = json!({
            "at": at,
            "room": room,
            "id": m.id.as_str(),
            "from": m.sender.id.as_str(),
            "name": &*m.sender.name,
            "text": &*m.text,
        });
        if m.sender.is_bot {
            line["bot"] = json!(true);
        }
        if let Some(h) = &m.sender.handle {
            line["handle"] = json!(&**h);
        }
        if let Some(t) = &m.thread {
            line["thread"] = json!(t.as_str());
        }
        if let Some(r) = &m.reply_to {
            line["reply_to"] = json!(r.as_str());
        }
        if let Mentions::Explicit(ids) = &m.mentions {
            line["mentions"] = json!(ids.iter().map(|i| i.as_str()).collect::<Vec<_>>());
        }
        if m.is_dm {
            // A DM for every persona present is given to the first.
            let to = m
                .dm_to
                .as_ref()
                .map(|p| p.to_string())
                .filter(|p| personas.contains(p))
                .or_else(|| personas.first().cloned());
            line["dm"] = json!(true);
            line["to"] = json!(to);
        }
        if let Some(e) = expect.get(m.id.as_str()) {
            line["expect"] = Value::Object(e.clone());
        }
        out.push_str(&format!("{line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tactful_core::Timestamp;

    fn label(msg: &str, persona: &str) -> Label {
        Label {
            room: "lobby".into(),
            msg: msg.into(),
            persona: persona.into(),
            want: "reply".into(),
            who: "console".into(),
            at: 1,
        }
    }

    #[test]
    fn marks_for_a_persona_the_config_no_longer_has_are_left_out() {
        let mut dm = Message::new("m2", "lobby", "alice", "psst", Timestamp::from_millis(2_000));
        dm.is_dm = true;
        dm.dm_to = Some("gone".into());
        let messages = [
            Message::new("m1", "lobby", "alice", "hi", Timestamp::from_millis(1_000)),
            dm,
        ];
        let personas = ["docs".to_owned()];
        let file = eval_file(
            "lobby",
            &[label("m1", "docs"), label("m1", "gone"), label("m2", "gone")],
            &messages,
            &personas,
        );
        assert!(file.contains(r#""expect":{"docs":"reply"}"#), "{file}");
        assert!(!file.contains("\"gone\""), "{file}");
        // The file replays under the config as it is now.
        let parsed = crate::scenario::parse(&file, std::path::Path::new("x"), &["docs"]).expect("parses");
        assert_eq!(parsed.events.len(), 1, "up to the last message a kept mark is on");
    }
}
