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
//! can reach the listener; it asks for the token. Every error is
//! `{"error": …}` JSON, axum's own included ([`errors`]).

use std::collections::HashMap;
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

use crate::live_policies::LivePolicies;

mod costs;
pub mod elsewhere;
mod errors;
mod feed;
mod labels;
mod policy;
pub mod room_ids;

pub use feed::Feed;

const PAGE: &str = include_str!("console.html");
/// The largest request body taken (a room's policy is at most 16 KiB).
const MAX_BODY: usize = 64 * 1024;
/// Who the audit log says made a change: the console has one token.
const WHO: &str = "console";
/// Live transcripts open at once; more are refused (each holds a
/// connection and a place in the feed).
const MAX_LIVE: usize = 32;
/// The longest span `GET /costs` sums.
const MAX_DAYS: u64 = 366;

/// What the console needs: where the store is, the token, and the origins
/// its own page is served from.
#[derive(Clone)]
pub struct Console {
    live: Arc<LivePolicies>,
    store: Option<tactful_store::Location>,
    reader: Arc<Mutex<Option<Reader>>>,
    token: Option<Arc<str>>,
    origins: Arc<[String]>,
    feed: Feed,
    live_slots: Arc<tokio::sync::Semaphore>,
    reloader: Option<crate::reload::SharedReloader>,
    /// Several processes share the store: the rooms listing says which
    /// owns each room.
    owners: bool,
}

impl Console {
    /// The console of a service listening on `addr` (the server's own
    /// address), reading `store` (`None` for `:memory:`: nothing to read).
    pub fn new(
        addr: std::net::SocketAddr,
        store: Option<tactful_store::Location>,
        token: Option<String>,
        live: Arc<LivePolicies>,
        feed: Feed,
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
            feed,
            live_slots: Arc::new(tokio::sync::Semaphore::new(MAX_LIVE)),
            reloader: None,
            owners: false,
        }
    }

    /// Says in the rooms listing which process owns each room, and since
    /// when (several processes sharing a PostgreSQL store, `[cluster]`).
    pub fn with_owners(mut self) -> Console {
        self.owners = true;
        self
    }

    /// Lets `POST /console/api/reload` reload the config file, with the
    /// reloader SIGHUP uses.
    pub fn with_reloader(mut self, reloader: crate::reload::SharedReloader) -> Console {
        self.reloader = Some(reloader);
        self
    }

    /// The console's routes, to merge into the server's router.
    pub fn routes(self) -> Router {
        Router::new()
            .route("/console", get(page))
            // Each path says which methods it takes when asked with
            // another (axum's own 405 names them only after every layer,
            // so the JSON layer below could not).
            .route("/console/api/rooms", get(rooms).fallback(errors::takes("GET")))
            .route(
                "/console/api/decisions",
                get(decisions).fallback(errors::takes("GET")),
            )
            .route("/console/api/calls", get(calls).fallback(errors::takes("GET")))
            .route("/console/api/costs", get(costs).fallback(errors::takes("GET")))
            .route("/console/api/live", get(live).fallback(errors::takes("GET")))
            .route(
                "/console/api/policy",
                get(policy::policy)
                    .put(policy::set_policy)
                    .delete(policy::revert_policy)
                    .fallback(errors::takes("GET, PUT, DELETE")),
            )
            .route(
                "/console/api/audit",
                get(policy::audit).fallback(errors::takes("GET")),
            )
            .route(
                "/console/api/labels",
                get(labels::labels)
                    .put(labels::mark)
                    .delete(labels::clear)
                    .fallback(errors::takes("GET, PUT, DELETE")),
            )
            .route(
                "/console/api/dry-run",
                axum::routing::post(policy::dry_run).fallback(errors::takes("POST")),
            )
            .route(
                "/console/api/reload",
                axum::routing::post(reload).fallback(errors::takes("POST")),
            )
            .route(
                "/console/api/{*rest}",
                axum::routing::any(errors::no_such_endpoint),
            )
            .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY))
            .layer(axum::middleware::map_response(errors::as_json))
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
    /// One page of a room's rows (`?room=`, `?limit=`, `?before=`) read
    /// with `rows`, and whether it is full (so another may follow); 404
    /// for a room the store has nothing of.
    async fn page<T: Send + 'static>(
        &self,
        q: &HashMap<String, String>,
        rows: impl FnOnce(&Reader, &str, Option<i64>, usize) -> Result<Vec<T>, tactful_store::StoreError>
        + Send
        + 'static,
    ) -> Result<(String, Vec<T>, bool), ApiError> {
        let room = room_of(q)?;
        let (limit, before) = page_of(q)?;
        let wanted = room.clone();
        let found = self
            .read(move |r| {
                if !r.has_room(&wanted)? {
                    return Ok(None);
                }
                rows(r, &wanted, before, limit).map(Some)
            })
            .await?
            .ok_or_else(|| no_room(&room))?;
        let full = found.len() == limit;
        Ok((room, found, full))
    }

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

/// `?key=`, a positive whole number, when given.
fn number(q: &HashMap<String, String>, key: &str) -> Result<Option<i64>, ApiError> {
    match q.get(key) {
        None => Ok(None),
        Some(v) => v.parse::<i64>().ok().filter(|n| *n > 0).map(Some).ok_or_else(|| {
            error(
                StatusCode::BAD_REQUEST,
                &format!("`{key}` must be a positive whole number, not {v:?}"),
            )
        }),
    }
}

/// A page: `?limit=` (100 unless given, at most [`tactful_store::MAX_PAGE`])
/// and `?before=` (where the previous page ended).
fn page_of(q: &HashMap<String, String>) -> Result<(usize, Option<i64>), ApiError> {
    let limit = number(q, "limit")?.map_or(100, |l| l as usize);
    if limit > tactful_store::MAX_PAGE {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!("`limit` is at most {}", tactful_store::MAX_PAGE),
        ));
    }
    Ok((limit, number(q, "before")?))
}

fn no_room(room: &str) -> ApiError {
    error(StatusCode::NOT_FOUND, &format!("no room {room:?} in the store"))
}

/// The rooms the store has heard, the most recently active first; with
/// several processes on the store, each with the process that owns it
/// (`owner`: `{process, since}`, `null` while nobody holds its partition,
/// as when its owner stopped and the lease has not moved yet).
async fn rooms(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let owners = c.owners;
    let (rooms, held) = c
        .read(move |r| {
            let held = if owners { Some(r.owners()?) } else { None };
            Ok((r.rooms()?, held))
        })
        .await?;
    let Some(held) = held else {
        return Ok(Json(json!({ "rooms": rooms })).into_response());
    };
    let by_partition: HashMap<u32, &tactful_store::PartitionOwner> =
        held.iter().map(|o| (o.partition, o)).collect();
    let listed: Vec<serde_json::Value> = rooms
        .iter()
        .map(|r| {
            let mut v = json!(r);
            let part = tactful_store::partition_of(&tactful_core::RoomId::new(r.room.as_str()));
            v["owner"] = json!(by_partition.get(&part));
            v
        })
        .collect();
    Ok(Json(json!({ "rooms": listed })).into_response())
}

async fn decisions(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let (room, rows, full) = c
        .page(&q, |r, room, before, limit| r.decisions(room, before, limit))
        .await?;
    let next = rows.last().map(|d| d.seq).filter(|_| full);
    Ok(Json(json!({ "room": room, "decisions": rows, "next_before": next })).into_response())
}

/// The room's agent calls, newest first (paged like `/decisions`, by
/// turn): kind, latency, tokens, and how each ended.
async fn calls(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let (room, rows, full) = c
        .page(&q, |r, room, before, limit| r.calls(room, before, limit))
        .await?;
    let next = rows.last().map(|c| c.turn).filter(|_| full);
    Ok(Json(json!({ "room": room, "calls": rows, "next_before": next })).into_response())
}

/// What the agents cost over the last `?days=` (7 unless given): per day,
/// room, persona, agent and kind, with totals per room (the costliest
/// first) and ambient calls per 100 messages heard.
async fn costs(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let days = number(&q, "days")?.map_or(7, |d| d as u64);
    if days > MAX_DAYS {
        return Err(error(
            StatusCode::BAD_REQUEST,
            &format!("`days` is at most {MAX_DAYS}"),
        ));
    }
    let now_ms = wall_clock().as_millis() as i64;
    // Whole UTC days: today and the `days - 1` before it.
    let since = (now_ms / 86_400_000 - (days as i64 - 1)) * 86_400_000;
    let (rows, heard) = c
        .read(move |r| Ok((r.costs(since)?, r.people_messages(since)?)))
        .await?;
    let truncated = rows.len() >= tactful_store::MAX_COST_ROWS;
    Ok(Json(json!({
        "days": days,
        "since": since,
        "truncated": truncated,
        "rows": rows,
        "rooms": costs::per_room(&rows, &heard),
    }))
    .into_response())
}

/// The live transcript, as Server-Sent Events: one `data:` line of JSON
/// per decision, call, answer, hook step and reply, as it happens
/// (`?room=` for one room, else every room). A reader too slow to keep up
/// gets a `lagged` event with how many lines it missed.
async fn live(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use tokio::sync::broadcast::error::RecvError;

    c.guard(&headers, &q)?;
    let room = match q.get("room") {
        Some(_) => Some(room_of(&q)?),
        None => None,
    };
    let permit = c.live_slots.clone().try_acquire_owned().map_err(|_| {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            &format!("{MAX_LIVE} live transcripts are open already; close one"),
        )
    })?;
    let (rx, watching) = c.feed.subscribe(room.as_ref().map(ToString::to_string));
    let stream = futures::stream::unfold((rx, permit, watching), move |(mut rx, permit, watching)| {
        let room = room.clone();
        async move {
            loop {
                let event = match rx.recv().await {
                    Ok(line) if room.as_deref().is_none_or(|r| r == &*line.room) => {
                        Event::default().data(&*line.json)
                    }
                    Ok(_) => continue,
                    Err(RecvError::Lagged(n)) => Event::default().event("lagged").data(n.to_string()),
                    Err(RecvError::Closed) => return None,
                };
                return Some((Ok::<_, std::convert::Infallible>(event), (rx, permit, watching)));
            }
        }
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()).into_response())
}

/// Reads the config file again, as SIGHUP does: a file that does not pass
/// `tactful check` changes nothing (422, with its line).
async fn reload(State(c): State<Console>, headers: HeaderMap, Query(q): Params) -> Answer {
    c.guard(&headers, &q)?;
    let Some(reloader) = &c.reloader else {
        return Err(error(
            StatusCode::NOT_FOUND,
            "this service has no config file to reload",
        ));
    };
    let done = crate::reload::reload_shared(reloader, "the console").await;
    let status = match done {
        crate::reload::Reloaded::Refused { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        crate::reload::Reloaded::Applied { .. } => StatusCode::OK,
    };
    Ok((status, Json(done)).into_response())
}
