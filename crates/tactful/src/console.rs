//! The operator console: `/console` on `[server] listen`, the page and its
//! JSON API (`docs/console.md`).
//!
//! What it shows is read back from the store through a read-only
//! connection of its own ([`tactful_store::Reader`]), so it survives a
//! restart and never waits on the live path's writer. Every API call is
//! checked the same way: a request a browser made from another site's page
//! (its `Origin` is not this server's) is refused, and with
//! `server.console_token` set, the token must come as
//! `Authorization: Bearer <token>` (or `?token=`), compared in constant
//! time. The page itself holds nothing secret and is served to anyone who
//! can reach the listener; it asks for the token.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use subtle::ConstantTimeEq;
use tactful_runtime::wall_clock;
use tactful_store::Reader;

use crate::live_policies::{AUDIT_KEY, AuditEntry, LivePolicies};

const PAGE: &str = include_str!("console.html");
/// The largest request body taken (a room's policy is at most 16 KiB).
const MAX_BODY: usize = 64 * 1024;
/// Who the audit log says made a change: the console has one token.
const WHO: &str = "console";

/// What the console needs: where the store is, the token, and the origins
/// its own page is served from.
#[derive(Clone)]
pub struct Console {
    live: Arc<LivePolicies>,
    store: Option<PathBuf>,
    reader: Arc<Mutex<Option<Reader>>>,
    token: Option<Arc<str>>,
    origins: Arc<[String]>,
}

impl Console {
    /// The console of a service listening on `addr` (the server's own
    /// address), reading `store` (`None` for `:memory:`: nothing to read).
    pub fn new(
        addr: std::net::SocketAddr,
        store: Option<PathBuf>,
        token: Option<String>,
        live: Arc<LivePolicies>,
    ) -> Console {
        // The same origins the web room takes from a page of its own.
        let origins = tactful_web::access::Access::new(addr, None, None)
            .origins()
            .to_vec();
        Console {
            live,
            store,
            reader: Arc::new(Mutex::new(None)),
            token: token.map(Arc::from),
            origins: origins.into(),
        }
    }

    /// The console's routes, to merge into the server's router.
    pub fn routes(self) -> Router {
        Router::new()
            .route("/console", get(page))
            .route("/console/api/rooms", get(rooms))
            .route("/console/api/decisions", get(decisions))
            .route(
                "/console/api/policy",
                get(policy).put(set_policy).delete(revert_policy),
            )
            .route("/console/api/audit", get(audit))
            .route("/console/api/dry-run", axum::routing::post(dry_run))
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
            .with_state(self)
    }

    /// Refuses a request from another site's page, or without the token.
    fn check(&self, headers: &HeaderMap, query_token: Option<&str>) -> Result<(), ApiError> {
        if let Some(origin) = headers.get(header::ORIGIN) {
            let ok = origin
                .to_str()
                .ok()
                .and_then(tactful_web::access::normalise)
                .is_some_and(|o| self.origins.contains(&o));
            if !ok {
                tracing::warn!("refused a console request from another site's page");
                return Err(error(
                    StatusCode::FORBIDDEN,
                    "requests from other sites' pages are refused",
                ));
            }
        }
        if let Some(required) = &self.token {
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let given = bearer.or(query_token).unwrap_or("");
            if !bool::from(given.as_bytes().ct_eq(required.as_bytes())) {
                return Err(error(
                    StatusCode::UNAUTHORIZED,
                    "a valid console token is required (server.console_token), as Authorization: Bearer <token>",
                ));
            }
        }
        Ok(())
    }

    /// Runs `f` on the store's reader, opened on first use, off the async
    /// threads.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Reader) -> Result<T, tactful_store::StoreError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let Some(path) = self.store.clone() else {
            return Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                "this service keeps nothing ([store] path = \":memory:\"): there is nothing to show",
            ));
        };
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || {
            let mut slot = reader
                .lock()
                .map_err(|_| "the store reader is unusable".to_owned())?;
            if slot.is_none() {
                *slot = Some(Reader::open(&path).map_err(|e| e.to_string())?);
            }
            f(slot.as_ref().expect("opened above")).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r)
        .map_err(|e| {
            tracing::warn!("the console could not read the store: {e}");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the store cannot be read: {e}"),
            )
        })
    }
}

/// A refused or failed API call: its status and what to say.
struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

fn error(status: StatusCode, message: &str) -> ApiError {
    ApiError(status, message.to_owned())
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'",
            ),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        PAGE,
    )
        .into_response()
}

type Params = Query<HashMap<String, String>>;
type Answer = Result<Response, ApiError>;

impl Console {
    /// [`Console::check`] for an API call's headers and `?token=`.
    fn guard(&self, headers: &HeaderMap, q: &HashMap<String, String>) -> Result<(), ApiError> {
        self.check(headers, q.get("token").map(String::as_str))
    }
}

/// The room a call is about: `?room=`, one room id.
fn room_of(q: &HashMap<String, String>) -> Result<String, ApiError> {
    q.get("room")
        .filter(|r| !r.is_empty() && r.len() <= 512)
        .cloned()
        .ok_or_else(|| {
            error(
                StatusCode::BAD_REQUEST,
                "`room` is required: a room id from /console/api/rooms",
            )
        })
}

/// A request body that holds a room's layer: TOML, so UTF-8.
fn toml_of(body: &[u8]) -> Result<&str, ApiError> {
    std::str::from_utf8(body).map_err(|_| error(StatusCode::BAD_REQUEST, "the policy must be UTF-8 TOML"))
}

fn no_room(room: &str) -> ApiError {
    error(StatusCode::NOT_FOUND, &format!("no room {room:?} in the store"))
}

async fn rooms(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let rooms = c.read(|r| r.rooms()).await?;
    Ok(Json(json!({ "rooms": rooms })).into_response())
}

async fn decisions(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    let number = |key: &str| -> Result<Option<i64>, ApiError> {
        match q.get(key) {
            None => Ok(None),
            Some(v) => v.parse::<i64>().ok().filter(|n| *n > 0).map(Some).ok_or_else(|| {
                error(
                    StatusCode::BAD_REQUEST,
                    &format!("`{key}` must be a positive whole number, not {v:?}"),
                )
            }),
        }
    };
    let limit = number("limit")?.map_or(100, |l| l as usize);
    let before = number("before")?;
    if limit > tactful_store::MAX_PAGE {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!("`limit` is at most {}", tactful_store::MAX_PAGE),
        ));
    }
    let wanted = room.clone();
    let rows = c
        .read(move |r| {
            if !r.has_room(&wanted)? {
                return Ok(None);
            }
            r.decisions(&wanted, before, limit).map(Some)
        })
        .await?
        .ok_or_else(|| no_room(&room))?;
    let next = (rows.len() == limit)
        .then(|| rows.last().map(|d| d.seq))
        .flatten();
    Ok(Json(json!({ "room": room, "decisions": rows, "next_before": next })).into_response())
}

/// The room's policy: the console's layer (TOML, `null` when none) and,
/// per persona, what runs.
async fn policy(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
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
        "in_file": table.rooms.contains_key(&id),
        "effective": personas,
    }))
    .into_response())
}

/// Sets the room's console layer: the body is the keys of its
/// `[rooms."<room>"]` table, in TOML.
async fn set_policy(
    State(c): State<Console>,
    headers: HeaderMap,
    Query(q): Params,
    body: axum::body::Bytes,
) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    let toml = toml_of(&body)?;
    let entry = c
        .live
        .set(&room, toml, WHO, wall_clock())
        .map_err(|e| error(StatusCode::BAD_REQUEST, &e.to_string()))?;
    Ok(Json(json!({ "room": room, "console": toml, "audit": entry })).into_response())
}

/// Reverts the room to the file's policy.
async fn revert_policy(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
    Ok(match c.live.revert(&room, WHO, wall_clock()) {
        Some(entry) => Json(json!({ "room": room, "reverted": true, "audit": entry })),
        None => Json(json!({ "room": room, "reverted": false })),
    }
    .into_response())
}

/// Every change made in the console, newest first (500 at most).
async fn audit(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
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
/// force, and shows the decisions that would differ.
async fn dry_run(
    State(c): State<Console>,
    headers: HeaderMap,
    Query(q): Params,
    body: axum::body::Bytes,
) -> Answer {
    c.guard(&headers, &q)?;
    let room = room_of(&q)?;
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
    proposed
        .live
        .insert(tactful_core::RoomId::new(room.as_str()), layer);
    let wanted = room.clone();
    let messages = c.read(move |r| r.recent_messages(&wanted, n)).await?;
    if messages.is_empty() {
        return Err(no_room(&room));
    }
    let engine = c.live.with_config(|config| config.engine.clone());
    let run = tokio::task::spawn_blocking(move || crate::dry_run::dry_run(&engine, now, proposed, &messages))
        .await
        .map_err(|e| {
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the dry run failed: {e}"),
            )
        })?;
    Ok(Json(json!({ "room": room, "dry_run": run })).into_response())
}
