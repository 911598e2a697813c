//! The console's policy endpoints: a room's policy read, set, reverted and
//! tried, and the audit of every change.
//!
//! A change names its room by id, typed by a person: one no platform can
//! name is refused (400) and one tactful has not heard of is unknown
//! (404), before anything is stored or audited ([`room_ids`]). "Heard of"
//! is what the console can read: the store (every message heard by any
//! process sharing it is kept there before it is decided), the file's
//! `[rooms."<id>"]` tables and schedules, the console's own layers, and
//! `default`.

use axum::Json;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::json;
use tactful_runtime::wall_clock;

use super::{Answer, ApiError, Console, Params, WHO, error, room_ids, room_of, toml_of};
use crate::live_policies::{AUDIT_KEY, AuditEntry, ChangeError};

/// What an empty layer is told: it would set nothing, and a person who
/// sends one means to go back to the file's policy.
const SETS_NOTHING: &str = "an empty policy sets nothing: to go back to the file's policy, use Revert \
                            (DELETE /console/api/policy?room=<id>)";

impl Console {
    /// Whether tactful has heard of `room` (see the module docs). Without
    /// a store (`:memory:`) nothing was kept to ask: every room a
    /// platform can name is taken.
    async fn heard(&self, room: &str) -> Result<bool, ApiError> {
        if room == crate::config::DEFAULT_LAYER || self.live.live_toml(room).is_some() {
            return Ok(true);
        }
        let id = tactful_core::RoomId::new(room);
        let named = self.live.with_config(|config| {
            config.engine.policies.rooms.contains_key(&id)
                || config.engine.schedules.iter().any(|s| s.room == id)
        });
        if named || self.store.is_none() {
            return Ok(true);
        }
        let wanted = room.to_owned();
        self.read(move |r| r.has_room(&wanted)).await
    }

    /// A room a change may be made for: 400 for an id no platform can
    /// have, 404 for one tactful has not heard of.
    async fn changeable(&self, room: &str) -> Result<(), ApiError> {
        if let Some(why) = room_ids::impossible(room) {
            return Err(error(StatusCode::BAD_REQUEST, &why));
        }
        if !self.heard(room).await? {
            return Err(error(
                StatusCode::NOT_FOUND,
                &format!(
                    "tactful has not heard of a room {room:?}: a room is known once a message from it is stored, \
                     or when the file has a [rooms.\"<id>\"] table or a schedule for it (see /console/api/rooms)"
                ),
            ));
        }
        Ok(())
    }
}

/// Whether a layer sets no key at all: empty, blank, or only comments.
fn sets_nothing(toml: &str) -> bool {
    toml.lines().all(|l| {
        let l = l.trim();
        l.is_empty() || l.starts_with('#')
    })
}

/// A change refused or not kept, as the API says it.
fn change_error(e: ChangeError) -> ApiError {
    let status = match &e {
        ChangeError::Refused(_) => StatusCode::BAD_REQUEST,
        ChangeError::StoreDown(_) | ChangeError::NotKept(_) => StatusCode::SERVICE_UNAVAILABLE,
    };
    error(status, &e.to_string())
}

/// The room's policy: the console's layer (TOML, `null` when none) and,
/// per persona, what runs.
pub(super) async fn policy(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    let table = c.live.table();
    let id = tactful_core::RoomId::new(room.as_str());
    let personas: serde_json::Map<String, serde_json::Value> = c.live.with_config(|config| {
        config
            .engine
            .personas
            .iter()
            .map(|p| {
                let r = table.resolve(&id, &p.id);
                let value = json!({
                    "mode": r.mode.as_str(),
                    "allow_silence": r.allow_silence,
                    "rate_limit": r.rate_limit.map(|l| format!("{}/{} s", l.replies, l.per.as_secs())),
                    "max_bot_turns": r.max_bot_turns,
                    "reply_gate": r.reply_gate.as_ref().map(|g| g.agent.to_string()),
                });
                (p.id.to_string(), value)
            })
            .collect()
    });
    Ok(Json(json!({
        "room": room,
        "console": c.live.live_toml(&room),
        "in_file": room == crate::config::DEFAULT_LAYER || table.rooms.contains_key(&id),
        "effective": personas,
    }))
    .into_response())
}

/// Sets the room's console layer: the body is the keys of its
/// `[rooms."<room>"]` table, in TOML. A room no platform can name is 400,
/// one tactful never heard of 404, an empty body 400 (Revert is the way
/// back to the file): nothing is stored or audited for any of them. The
/// answer comes once the store has kept the layer and its audit entry.
pub(super) async fn set_policy(
    State(c): State<Console>,
    headers: HeaderMap,
    Query(q): Params,
    body: axum::body::Bytes,
) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    c.changeable(&room).await?;
    let toml = toml_of(&body)?;
    if sets_nothing(toml) {
        return Err(error(StatusCode::BAD_REQUEST, SETS_NOTHING));
    }
    let entry = c
        .live
        .set(&room, toml, WHO, wall_clock())
        .await
        .map_err(change_error)?;
    Ok(Json(json!({ "room": room, "console": toml, "audit": entry })).into_response())
}

/// Reverts the room to the file's policy, once the store has kept that.
/// A layer the console holds is reverted whatever its id (one set before
/// ids were checked must come off); otherwise the id is checked as for
/// `PUT`.
pub(super) async fn revert_policy(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    if c.live.live_toml(&room).is_none() {
        c.changeable(&room).await?;
    }
    let reverted = c
        .live
        .revert(&room, WHO, wall_clock())
        .await
        .map_err(change_error)?;
    Ok(match reverted {
        Some(entry) => Json(json!({ "room": room, "reverted": true, "audit": entry })),
        None => Json(json!({ "room": room, "reverted": false })),
    }
    .into_response())
}

/// Every change made in the console, newest first (500 at most).
pub(super) async fn audit(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let rows = c
        .read(|r| r.state_with_prefix(AUDIT_KEY, tactful_store::MAX_PAGE))
        .await?;
    let entries: Vec<AuditEntry> = rows
        .iter()
        .filter_map(|(_, v)| serde_json::from_str(v).ok())
        .collect();
    Ok(Json(json!({ "entries": entries })).into_response())
}

/// Replays the room's last `messages` (default 200, at most 500) under the
/// proposed layer (the body, TOML as for `PUT /policy`) and the policy in
/// force, and shows the decisions that would differ. A proposed default
/// layer (`room=default`) is tried on the room `on` names. Rooms are
/// checked as for `PUT` (400, 404), and so is the body (an empty one is
/// 400); a room tactful knows but has no stored message of is tried on
/// none.
pub(super) async fn dry_run(
    State(c): State<Console>,
    headers: HeaderMap,
    Query(q): Params,
    body: axum::body::Bytes,
) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    if let Some(why) = room_ids::impossible(&room) {
        return Err(error(StatusCode::BAD_REQUEST, &why));
    }
    let n = match q.get("messages").map(|v| v.parse::<usize>()) {
        None => 200,
        Some(Ok(n)) if (1..=tactful_store::MAX_PAGE).contains(&n) => n,
        Some(_) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                &format!("`messages` is a number from 1 to {}", tactful_store::MAX_PAGE),
            ));
        }
    };
    let toml = toml_of(&body)?;
    let layer = c
        .live
        .with_config(|config| config.live_room_layer(&room, toml))
        .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string()))?;
    let now = c.live.table();
    let mut proposed = now.clone();
    // The default layer is tried on one room: `?on=<room>`.
    let tried_on = if room == crate::config::DEFAULT_LAYER {
        proposed.live_default = Some(layer);
        q.get("on")
            .filter(|r| !r.is_empty() && r.len() <= 512)
            .cloned()
            .ok_or_else(|| {
                error(
                    StatusCode::BAD_REQUEST,
                    "a default layer is tried on one room: add `on=<room id>`",
                )
            })?
    } else {
        proposed
            .live
            .insert(tactful_core::RoomId::new(room.as_str()), layer);
        room.clone()
    };
    c.changeable(&tried_on).await?;
    // Refused as `PUT` would refuse it: what cannot be applied is not tried.
    if sets_nothing(toml) {
        return Err(error(StatusCode::BAD_REQUEST, SETS_NOTHING));
    }
    // One read of the room: its last messages (the dry run takes the
    // newest `n`, at most all of them) and its marks.
    let (labels, window) = if c.store.is_some() {
        c.marked(&tried_on).await?
    } else {
        (Vec::new(), Vec::new())
    };
    let messages = window[window.len().saturating_sub(n)..].to_vec();
    // The room's marks, scored under both (`null` when it has none).
    let score = {
        if labels.is_empty() {
            serde_json::Value::Null
        } else {
            let file = super::labels::eval_file(&tried_on, &labels, &window, &super::labels::persona_ids(&c));
            let config = c.live.with_config(Clone::clone);
            let (now, proposed) = (now.clone(), proposed.clone());
            tokio::task::spawn_blocking(move || crate::eval::policy_score(&config, now, proposed, &file))
                .await
                .map_err(|e| {
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &format!("the score failed: {e}"),
                    )
                })?
                .map_err(|e| {
                    error(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        &format!("the score failed: {e:#}"),
                    )
                })?
        }
    };
    let engine = c.live.with_config(|config| config.engine.clone());
    let run = tokio::task::spawn_blocking(move || crate::dry_run::dry_run(&engine, now, proposed, &messages))
        .await
        .map_err(|e| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the dry run failed: {e}"),
            )
        })?;
    Ok(Json(json!({ "room": room, "tried_on": tried_on, "dry_run": run, "score": score })).into_response())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_layer_of_blanks_and_comments_sets_nothing() {
        for nothing in ["", "\n", "  \n\t\n", "# only a note\n\n  # another"] {
            assert!(super::sets_nothing(nothing), "{nothing:?}");
        }
        assert!(!super::sets_nothing("# a note\nmode = \"all\"\n"));
    }
}
