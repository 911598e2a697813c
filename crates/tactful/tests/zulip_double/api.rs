//! The double's REST API: the endpoints tactful uses, their bodies and
//! errors as `zulip.yaml` gives them.

use super::*;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, patch, post};

type Shared = Arc<double::State<Inner>>;

/// How long a long poll waits before a heartbeat (the server waits about
/// a minute; a test needs no such patience).
const HEARTBEAT_AFTER: Duration = Duration::from_secs(5);

pub(super) fn router(shared: Shared) -> Router {
    Router::new()
        .route("/api/v1/server_settings", get(server_settings))
        .route("/api/v1/users/me", get(me))
        .route("/api/v1/users/me/subscriptions", get(subscriptions))
        .route("/api/v1/register", post(register))
        .route("/api/v1/events", get(events).delete(delete_queue))
        .route("/api/v1/messages", post(send).get(messages))
        .route("/api/v1/messages/{id}", patch(edit).delete(delete_message))
        .route("/api/v1/messages/{id}/reactions", post(react))
        .route("/api/v1/typing", post(typing))
        .fallback(any(not_found))
        .with_state(shared)
}

fn success(mut v: Value) -> Response {
    v["result"] = json!("success");
    v["msg"] = json!("");
    axum::Json(v).into_response()
}

/// The API's error body.
pub(super) fn error(status: StatusCode, code: &str, msg: &str) -> Response {
    (
        status,
        axum::Json(json!({"result": "error", "msg": msg, "code": code})),
    )
        .into_response()
}

fn bad(msg: &str) -> Response {
    error(StatusCode::BAD_REQUEST, "BAD_REQUEST", msg)
}

/// A form body or a query string as fields.
fn fields(raw: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(raw).into_owned().collect()
}

/// Records the call; the caller, or the storm's 429, or a 401.
fn enter(
    shared: &Shared,
    headers: &HeaderMap,
    method: &Method,
    uri: &Uri,
    body: &[u8],
) -> Result<User, Box<Response>> {
    let basic = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64_decode(b.trim()))
        .and_then(|s| s.split_once(':').map(|(e, k)| (e.to_owned(), k.to_owned())));
    let mut s = shared.inner.lock().expect("double");
    let storm = s.storm_until.filter(|u| Instant::now() < *u);
    let caller = basic
        .as_ref()
        .and_then(|(email, key)| s.user_by_email(email).filter(|u| u.api_key == *key).cloned());
    let status = match (&storm, &caller, &basic) {
        (Some(_), _, _) => 429,
        (None, None, _) => 401,
        (None, Some(_), _) => 200,
    };
    let mut body_fields = fields(body);
    body_fields.extend(fields(uri.query().unwrap_or_default().as_bytes()));
    s.calls.push(Call {
        token: basic.as_ref().map(|(e, _)| e.clone()).unwrap_or_default(),
        method: format!("{method} {}", uri.path()),
        body: serde_json::to_value(&body_fields).unwrap_or(Value::Null),
        status,
        at: Instant::now(),
    });
    drop(s);
    shared.changed.notify_waiters();
    if let Some(until) = storm {
        let left = until
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            .max(0.001);
        let reset = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64() + left)
            .unwrap_or(0.0)
            .ceil() as u64;
        let mut resp = (
            StatusCode::TOO_MANY_REQUESTS,
            axum::Json(json!({"result": "error", "msg": "API usage exceeded rate limit", "code": "RATE_LIMIT_HIT", "retry-after": left})),
        )
            .into_response();
        let h = resp.headers_mut();
        h.insert("retry-after", format!("{left}").parse().expect("header"));
        h.insert("x-ratelimit-reset", reset.to_string().parse().expect("header"));
        h.insert("x-ratelimit-remaining", "0".parse().expect("header"));
        h.insert("x-ratelimit-limit", "200".parse().expect("header"));
        return Err(Box::new(resp));
    }
    caller.ok_or_else(|| {
        let mut resp = match basic {
            Some(_) => error(StatusCode::UNAUTHORIZED, "INVALID_API_KEY", "Invalid API key"),
            None => error(
                StatusCode::UNAUTHORIZED,
                "UNAUTHORIZED",
                "Not logged in: API authentication or user session required",
            ),
        };
        resp.headers_mut().insert(
            "www-authenticate",
            "Basic realm=\"zulip\"".parse().expect("header"),
        );
        Box::new(resp)
    })
}

/// Standard base64, as HTTP Basic writes it.
fn base64_decode(s: &str) -> Option<String> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD.decode(s).ok()?;
    String::from_utf8(bytes).ok()
}

macro_rules! caller {
    ($shared:expr, $headers:expr, $method:expr, $uri:expr, $body:expr) => {
        match enter(&$shared, &$headers, &$method, &$uri, $body) {
            Ok(u) => u,
            Err(resp) => return *resp,
        }
    };
}

async fn server_settings() -> Response {
    success(json!({
        "authentication_methods": {"password": true, "dev": false},
        "external_authentication_methods": [],
        "zulip_feature_level": 312, "zulip_version": "10.0", "zulip_merge_base": "10.0",
        "push_notifications_enabled": false, "is_incompatible": false, "email_auth_enabled": true,
        "require_email_format_usernames": true, "realm_url": "http://double", "realm_uri": "http://double",
        "realm_name": "Double", "realm_icon": "", "realm_description": "",
        "realm_web_public_access_enabled": false,
    }))
}

async fn me(State(shared): State<Shared>, headers: HeaderMap, method: Method, uri: Uri) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    success(json!({
        "avatar_url": null, "avatar_version": 1, "email": me.email, "full_name": me.full_name,
        "is_admin": false, "is_owner": false, "is_billing_admin": false, "role": 400,
        "is_guest": false, "is_bot": me.is_bot, "is_active": true, "timezone": "",
        "date_joined": "2026-01-01T00:00:00+00:00", "max_message_id": 0, "user_id": me.id,
        "delivery_email": me.email, "profile_data": {},
    }))
}

async fn subscriptions(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let s = shared.inner.lock().expect("double");
    let subs: Vec<Value> = s
        .streams
        .iter()
        .filter(|st| st.subscribers.contains(&me.id))
        .map(|st| json!({"stream_id": st.id, "name": st.name, "description": "", "invite_only": false, "color": "#76ce90"}))
        .collect();
    drop(s);
    success(json!({"subscriptions": subs}))
}

async fn register(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let f = fields(&body);
    let fetch: Vec<String> = f
        .get("fetch_event_types")
        .or(f.get("event_types"))
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let mut s = shared.inner.lock().expect("double");
    s.next_queue += 1;
    let queue_id = format!("{}:{}", 1_700_000_000 + s.next_queue, s.next_queue);
    s.queues.insert(
        queue_id.clone(),
        Queue {
            user_id: me.id,
            events: VecDeque::new(),
            next_id: 0,
        },
    );
    s.registered.push(me.id);
    let max_id = s
        .messages
        .iter()
        .filter(|m| s.audience(m).contains(&me.id))
        .map(|m| m.id as i64)
        .max()
        .unwrap_or(-1);
    let mut v = json!({
        "queue_id": queue_id, "last_event_id": -1, "zulip_version": "10.0",
        "zulip_feature_level": 312, "zulip_merge_base": "10.0",
    });
    if fetch.iter().any(|t| t == "message") {
        v["max_message_id"] = json!(max_id);
    }
    if fetch.iter().any(|t| t == "realm") {
        v["max_message_length"] = json!(s.max_message_length);
        v["max_topic_length"] = json!(60);
        v["event_queue_longpoll_timeout_seconds"] = json!(90);
    }
    drop(s);
    shared.changed.notify_waiters();
    success(v)
}

async fn events(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let queue_id = q.get("queue_id").cloned().unwrap_or_default();
    let after: i64 = q.get("last_event_id").and_then(|v| v.parse().ok()).unwrap_or(-1);
    let dont_block = q.get("dont_block").is_some_and(|v| v == "true");
    let deadline = tokio::time::Instant::now() + HEARTBEAT_AFTER;
    loop {
        let changed = shared.changed.notified();
        {
            let mut s = shared.inner.lock().expect("double");
            let Some(queue) = s.queues.get_mut(&queue_id).filter(|q| q.user_id == me.id) else {
                let body = json!({"result": "error", "code": "BAD_EVENT_QUEUE_ID", "msg": format!("Bad event queue ID: {queue_id}"), "queue_id": queue_id});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            };
            // What the client confirmed is dropped, as the server does.
            queue.events.retain(|(id, _)| *id > after);
            let events: Vec<Value> = queue.events.iter().map(|(_, e)| e.clone()).collect();
            if !events.is_empty() || dont_block {
                return success(json!({"events": events, "queue_id": queue_id}));
            }
            if tokio::time::Instant::now() >= deadline {
                let id = queue.next_id;
                queue.next_id += 1;
                return success(json!({"events": [{"type": "heartbeat", "id": id}], "queue_id": queue_id}));
            }
        }
        let _ = tokio::time::timeout_at(deadline, changed).await;
    }
}

async fn delete_queue(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let mut f = fields(&body);
    f.extend(fields(uri.query().unwrap_or_default().as_bytes()));
    let queue_id = f.get("queue_id").cloned().unwrap_or_default();
    let mut s = shared.inner.lock().expect("double");
    if s.queues.get(&queue_id).is_none_or(|q| q.user_id != me.id) {
        let body = json!({"result": "error", "code": "BAD_EVENT_QUEUE_ID", "msg": format!("Bad event queue ID: {queue_id}"), "queue_id": queue_id});
        return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
    }
    s.queues.remove(&queue_id);
    drop(s);
    shared.changed.notify_waiters();
    success(json!({}))
}

async fn send(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let f = fields(&body);
    let Some(kind) = f.get("type") else {
        return error(
            StatusCode::BAD_REQUEST,
            "REQUEST_VARIABLE_MISSING",
            "Missing 'type' argument",
        );
    };
    let Some(to) = f.get("to") else {
        return error(
            StatusCode::BAD_REQUEST,
            "REQUEST_VARIABLE_MISSING",
            "Missing 'to' argument",
        );
    };
    let content = f.get("content").cloned().unwrap_or_default();
    if content.trim().is_empty() {
        return bad("Message must not be empty");
    }
    let mut s = shared.inner.lock().expect("double");
    // Too long: cut, as the server does.
    let content = if content.chars().count() > s.max_message_length {
        let mut c: String = content
            .chars()
            .take(s.max_message_length.saturating_sub(20))
            .collect();
        c.push_str("\n[message truncated]");
        c
    } else {
        content
    };
    let id = match kind.as_str() {
        "stream" | "channel" => {
            let name = to.trim_matches('"');
            let stream = name
                .parse::<u64>()
                .ok()
                .and_then(|id| s.stream(id).cloned())
                .or_else(|| s.streams.iter().find(|st| st.name == name).cloned());
            let Some(stream) = stream else {
                let body = json!({"result": "error", "code": "STREAM_DOES_NOT_EXIST", "msg": format!("Channel '{name}' does not exist"), "stream": name});
                return (StatusCode::BAD_REQUEST, axum::Json(body)).into_response();
            };
            let Some(topic) = f
                .get("topic")
                .or(f.get("subject"))
                .filter(|t| !t.trim().is_empty())
            else {
                return error(
                    StatusCode::BAD_REQUEST,
                    "REQUEST_VARIABLE_MISSING",
                    "Missing topic",
                );
            };
            if !stream.subscribers.contains(&me.id) {
                return bad("Not authorized to send to channel");
            }
            s.create(me.id, Some(stream.id), topic, Vec::new(), &content)
        }
        "private" | "direct" => {
            let ids: Option<Vec<u64>> = serde_json::from_str::<Vec<Value>>(to).ok().map(|v| {
                v.iter()
                    .filter_map(|x| {
                        x.as_u64()
                            .or_else(|| x.as_str().and_then(|e| s.user_by_email(e).map(|u| u.id)))
                    })
                    .collect()
            });
            let Some(mut people) = ids.filter(|v| !v.is_empty()) else {
                return bad(&format!("Invalid user ID {to}"));
            };
            people.push(me.id);
            people.sort_unstable();
            people.dedup();
            s.create(me.id, None, "", people, &content)
        }
        other => return bad(&format!("Invalid type '{other}'")),
    };
    drop(s);
    shared.changed.notify_waiters();
    success(json!({"id": id}))
}

async fn edit(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<u64>,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let f = fields(&body);
    let mut s = shared.inner.lock().expect("double");
    let max = s.max_message_length;
    let Some(m) = s.messages.iter_mut().find(|m| m.id == id && !m.deleted) else {
        return bad("Invalid message(s)");
    };
    if m.sender_id != me.id {
        return bad("You don't have permission to edit this message");
    }
    let Some(content) = f.get("content") else {
        return bad("Nothing to change");
    };
    if content.chars().count() > max {
        return bad("Message too long");
    }
    m.content = content.clone();
    m.edited = true;
    let m = m.clone();
    let event = json!({
        "type": "update_message", "user_id": me.id, "message_id": id, "message_ids": [id],
        "flags": [], "edit_timestamp": 1, "rendering_only": false, "content": content,
        "orig_content": "", "stream_id": m.stream_id,
    });
    for user in s.audience(&m) {
        s.push(user, event.clone());
    }
    drop(s);
    shared.changed.notify_waiters();
    success(json!({"detached_uploads": []}))
}

async fn delete_message(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<u64>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let mut s = shared.inner.lock().expect("double");
    let own_deletes = s.own_deletes;
    let Some(m) = s.messages.iter_mut().find(|m| m.id == id && !m.deleted) else {
        return bad("Invalid message(s)");
    };
    if m.sender_id != me.id || !own_deletes {
        return bad("You don't have permission to delete this message");
    }
    m.deleted = true;
    let m = m.clone();
    let event = json!({"type": "delete_message", "message_type": if m.stream_id.is_some() { "stream" } else { "private" }, "message_id": id, "stream_id": m.stream_id, "topic": m.topic});
    for user in s.audience(&m) {
        s.push(user, event.clone());
    }
    drop(s);
    shared.changed.notify_waiters();
    success(json!({}))
}

async fn react(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<u64>,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let f = fields(&body);
    let Some(name) = f.get("emoji_name").cloned() else {
        return error(
            StatusCode::BAD_REQUEST,
            "REQUEST_VARIABLE_MISSING",
            "Missing 'emoji_name' argument",
        );
    };
    let mut s = shared.inner.lock().expect("double");
    if !s.messages.iter().any(|m| m.id == id) {
        return bad("Invalid message(s)");
    }
    if s.reactions.iter().any(|r| *r == (me.id, id, name.clone())) {
        return error(
            StatusCode::BAD_REQUEST,
            "REACTION_ALREADY_EXISTS",
            "Reaction already exists.",
        );
    }
    s.reactions.push((me.id, id, name));
    drop(s);
    shared.changed.notify_waiters();
    success(json!({}))
}

async fn typing(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let f = fields(&body);
    if !matches!(f.get("op").map(String::as_str), Some("start" | "stop")) {
        return bad("Invalid op");
    }
    if matches!(f.get("type").map(String::as_str), Some("stream" | "channel")) && !f.contains_key("stream_id")
    {
        return bad("Missing channel ID");
    }
    shared
        .inner
        .lock()
        .expect("double")
        .typing
        .push((me.id, serde_json::to_value(&f).unwrap_or(Value::Null)));
    shared.changed.notify_waiters();
    success(json!({}))
}

async fn messages(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let (Some(before), Some(after)) = (
        q.get("num_before").and_then(|v| v.parse::<usize>().ok()),
        q.get("num_after").and_then(|v| v.parse::<usize>().ok()),
    ) else {
        return error(
            StatusCode::BAD_REQUEST,
            "REQUEST_VARIABLE_MISSING",
            "Missing 'num_before' argument",
        );
    };
    if before + after > 5000 {
        return bad("Too many messages requested (maximum 5000).");
    }
    let include_anchor = q.get("include_anchor").is_none_or(|v| v == "true");
    let narrow: Vec<Value> = q
        .get("narrow")
        .and_then(|n| serde_json::from_str(n).ok())
        .unwrap_or_default();
    let s = shared.inner.lock().expect("double");
    let visible: Vec<&Msg> = s
        .messages
        .iter()
        .filter(|m| !m.deleted && s.audience(m).contains(&me.id))
        .filter(|m| {
            narrow.iter().all(|n| {
                let (op, operand) = match n {
                    Value::Array(pair) => (pair.first().cloned(), pair.get(1).cloned()),
                    Value::Object(o) => (o.get("operator").cloned(), o.get("operand").cloned()),
                    _ => (None, None),
                };
                match (op.as_ref().and_then(|o| o.as_str()), operand) {
                    (Some("stream" | "channel"), Some(v)) => {
                        let id = v.as_u64().or_else(|| {
                            v.as_str()
                                .and_then(|n| s.streams.iter().find(|st| st.name == n).map(|st| st.id))
                        });
                        m.stream_id.is_some() && m.stream_id == id
                    }
                    (Some("topic"), Some(v)) => v.as_str().is_some_and(|t| m.topic.eq_ignore_ascii_case(t)),
                    _ => true,
                }
            })
        })
        .collect();
    let anchor: u64 = match q.get("anchor").map(String::as_str) {
        Some("newest") | None => visible.last().map_or(0, |m| m.id),
        Some("oldest") => visible.first().map_or(0, |m| m.id),
        Some(n) => match n.parse() {
            Ok(n) => n,
            Err(_) => return bad("Invalid anchor"),
        },
    };
    let older: Vec<&&Msg> = visible.iter().filter(|m| m.id < anchor).collect();
    let newer: Vec<&&Msg> = visible.iter().filter(|m| m.id > anchor).collect();
    let at: Vec<&&Msg> = visible
        .iter()
        .filter(|m| m.id == anchor && include_anchor)
        .collect();
    let mut out: Vec<Value> = Vec::new();
    for m in older.iter().skip(older.len().saturating_sub(before)) {
        out.push(s.message_json(m));
    }
    for m in &at {
        out.push(s.message_json(m));
    }
    for m in newer.iter().take(after) {
        out.push(s.message_json(m));
    }
    for v in &mut out {
        v["flags"] = json!(["read"]);
    }
    success(json!({
        "messages": out, "anchor": anchor, "found_anchor": !at.is_empty(),
        "found_newest": newer.len() <= after, "found_oldest": older.len() <= before,
        "history_limited": false,
    }))
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "BAD_REQUEST", "Endpoint not found")
}
