//! The double's REST API v4: the endpoints tactful uses, their bodies and
//! errors as the API reference gives them.

use super::*;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post, put};

type Shared = Arc<double::State<Inner>>;

pub(super) fn router(shared: Shared) -> Router {
    Router::new()
        .route("/api/v4/websocket", get(super::socket::upgrade))
        .route("/api/v4/users/me", get(me))
        .route("/api/v4/users/{id}", get(user))
        .route("/api/v4/users/{id}/typing", post(typing))
        .route("/api/v4/users/me/teams", get(my_teams))
        .route("/api/v4/users/me/teams/{team}/channels", get(my_channels))
        .route(
            "/api/v4/teams/name/{team}/channels/name/{name}",
            get(channel_by_name),
        )
        .route("/api/v4/channels/{id}", get(channel))
        .route("/api/v4/channels/{id}/members/me", get(membership))
        .route("/api/v4/channels/{id}/posts", get(posts_since))
        .route("/api/v4/posts", post(create_post))
        .route("/api/v4/posts/{id}", delete(delete_post))
        .route("/api/v4/posts/{id}/patch", put(patch_post))
        .route("/api/v4/posts/{id}/thread", get(thread))
        .route("/api/v4/reactions", post(react))
        .route("/api/v4/config/client", get(client_config))
        .fallback(any(not_found))
        .with_state(shared)
}

/// The API's error body.
pub(super) fn error(status: StatusCode, id: &str, message: &str) -> Response {
    let body = json!({
        "id": id, "message": message, "detailed_error": "",
        "request_id": "rq00000000000000000000000x", "status_code": status.as_u16(),
    });
    (status, axum::Json(body)).into_response()
}

fn token_of(headers: &HeaderMap) -> String {
    let v = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // The server takes `Bearer`, `BEARER` and `Token`.
    match v.split_once(' ') {
        Some((scheme, t))
            if scheme.eq_ignore_ascii_case("bearer") || scheme.eq_ignore_ascii_case("token") =>
        {
            t.trim().to_owned()
        }
        _ => String::new(),
    }
}

/// Records the call; the caller, or the storm's 429, or the 401.
fn enter(
    shared: &Shared,
    headers: &HeaderMap,
    method: &Method,
    uri: &Uri,
    body: &[u8],
) -> Result<User, Box<Response>> {
    let token = token_of(headers);
    let mut s = shared.inner.lock().expect("double");
    let storm = s.storm.filter(|st| Instant::now() < st.until);
    let caller = s.user_by_token(&token);
    let status = match (&storm, &caller) {
        (Some(_), _) => 429,
        (None, None) => 401,
        (None, Some(_)) => 200,
    };
    s.calls.push(Call {
        token,
        method: format!("{method} {}", uri.path()),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
        status,
        at: Instant::now(),
    });
    drop(s);
    shared.changed.notify_waiters();
    if let Some(st) = storm {
        let left = st
            .until
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
            .ceil() as u64;
        let left = left.max(1).to_string();
        let mut resp = (StatusCode::TOO_MANY_REQUESTS, "limit exceeded\n").into_response();
        let h = resp.headers_mut();
        h.insert(
            "content-type",
            "text/plain; charset=utf-8".parse().expect("header"),
        );
        h.insert("x-ratelimit-limit", "10".parse().expect("header"));
        h.insert("x-ratelimit-remaining", "0".parse().expect("header"));
        h.insert("x-ratelimit-reset", left.parse().expect("header"));
        h.insert("retry-after", left.parse().expect("header"));
        return Err(Box::new(resp));
    }
    caller.ok_or_else(|| {
        Box::new(error(
            StatusCode::UNAUTHORIZED,
            "api.context.session_expired.app_error",
            "Invalid or expired session, please login again.",
        ))
    })
}

fn user_json(u: &User) -> Value {
    json!({
        "id": u.id, "create_at": 1, "update_at": 1, "delete_at": 0, "username": u.username,
        "auth_data": "", "auth_service": "", "email": format!("{}@example.org", u.username),
        "nickname": "", "first_name": "", "last_name": "", "position": "", "roles": "system_user",
        "props": {}, "notify_props": {}, "last_password_update": 1, "last_picture_update": 0,
        "locale": "en", "mfa_active": false, "last_activity_at": 0, "is_bot": u.is_bot,
        "bot_description": "", "terms_of_service_id": "", "terms_of_service_create_at": 0,
    })
}

fn channel_json(c: &Channel) -> Value {
    let team = if matches!(c.kind.as_str(), "D" | "G") {
        ""
    } else {
        TEAM_ID
    };
    json!({
        "id": c.id, "create_at": 1, "update_at": 1, "delete_at": 0, "team_id": team,
        "type": c.kind, "display_name": c.name, "name": c.name, "header": "", "purpose": "",
        "last_post_at": c.last_post_at, "last_root_post_at": c.last_post_at, "creator_id": "",
        "scheme_id": "", "group_constrained": false, "total_msg_count": 0,
    })
}

fn post_list(posts: Vec<&Post>) -> Value {
    let mut posts = posts;
    posts.sort_by_key(|p| std::cmp::Reverse(p.create_at));
    let order: Vec<&str> = posts.iter().map(|p| p.id.as_str()).collect();
    let map: serde_json::Map<String, Value> = posts.iter().map(|p| (p.id.clone(), p.json())).collect();
    json!({"order": order, "posts": map, "next_post_id": "", "prev_post_id": "", "has_next": false, "first_inaccessible_post_time": 0})
}

macro_rules! caller {
    ($shared:expr, $headers:expr, $method:expr, $uri:expr, $body:expr) => {
        match enter(&$shared, &$headers, &$method, &$uri, $body) {
            Ok(u) => u,
            Err(resp) => return *resp,
        }
    };
}

async fn me(State(shared): State<Shared>, headers: HeaderMap, method: Method, uri: Uri) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    axum::Json(user_json(&me)).into_response()
}

async fn user(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    caller!(shared, headers, method, uri, &[]);
    let found = shared
        .inner
        .lock()
        .expect("double")
        .users
        .iter()
        .find(|u| u.id == id)
        .cloned();
    match found {
        Some(u) => axum::Json(user_json(&u)).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "app.user.missing_account.const",
            "Unable to find the user.",
        ),
    }
}

async fn channel_by_name(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path((team, name)): Path<(String, String)>,
) -> Response {
    caller!(shared, headers, method, uri, &[]);
    let found = shared
        .inner
        .lock()
        .expect("double")
        .channels
        .iter()
        .find(|c| c.name == name)
        .cloned();
    match found {
        Some(c) if team == TEAM => axum::Json(channel_json(&c)).into_response(),
        _ => error(
            StatusCode::NOT_FOUND,
            "app.channel.get_by_name.missing.app_error",
            "Channel does not exist.",
        ),
    }
}

async fn channel(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    caller!(shared, headers, method, uri, &[]);
    let found = shared.inner.lock().expect("double").channel(&id).cloned();
    match found {
        Some(c) => axum::Json(channel_json(&c)).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "app.channel.get.existing.app_error",
            "Unable to find the existing channel.",
        ),
    }
}

async fn membership(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let member = shared
        .inner
        .lock()
        .expect("double")
        .channel(&id)
        .is_some_and(|c| c.members.contains(&me.id));
    if !member {
        return error(
            StatusCode::NOT_FOUND,
            "app.channel.get_member.missing.app_error",
            "No channel member found for that user ID and channel ID.",
        );
    }
    axum::Json(json!({
        "channel_id": id, "user_id": me.id, "roles": "channel_user", "last_viewed_at": 0,
        "msg_count": 0, "msg_count_root": 0, "mention_count": 0, "mention_count_root": 0,
        "urgent_mention_count": 0, "notify_props": {}, "last_update_at": 0,
        "scheme_user": true, "scheme_admin": false, "scheme_guest": false,
    }))
    .into_response()
}

async fn my_channels(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(team): Path<String>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    if team != TEAM_ID {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    let s = shared.inner.lock().expect("double");
    let mine: Vec<Value> = s
        .channels
        .iter()
        .filter(|c| c.members.contains(&me.id))
        .map(channel_json)
        .collect();
    axum::Json(Value::Array(mine)).into_response()
}

async fn posts_since(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let s = shared.inner.lock().expect("double");
    if !s.channel(&id).is_some_and(|c| c.members.contains(&me.id)) {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    let mut posts: Vec<&Post> = s.posts.iter().filter(|p| p.channel_id == id).collect();
    if let Some(since) = q.get("since").and_then(|v| v.parse::<u64>().ok()) {
        // As the server: what changed strictly after `since`, at most
        // 1,000 (here the most recently changed).
        posts.retain(|p| p.update_at > since);
        posts.sort_by_key(|p| std::cmp::Reverse(p.update_at));
        posts.truncate(1000);
    } else {
        // Pages, newest first.
        let page: usize = q.get("page").and_then(|v| v.parse().ok()).unwrap_or(0);
        let per_page: usize = q
            .get("per_page")
            .and_then(|v| v.parse().ok())
            .unwrap_or(60)
            .min(200);
        posts.sort_by_key(|p| std::cmp::Reverse(p.create_at));
        posts = posts.into_iter().skip(page * per_page).take(per_page).collect();
    }
    axum::Json(post_list(posts)).into_response()
}

async fn my_teams(State(shared): State<Shared>, headers: HeaderMap, method: Method, uri: Uri) -> Response {
    caller!(shared, headers, method, uri, &[]);
    axum::Json(json!([{
        "id": TEAM_ID, "create_at": 1, "update_at": 1, "delete_at": 0, "display_name": "My Team",
        "name": TEAM, "description": "", "email": "", "type": "O", "company_name": "",
        "allowed_domains": "", "invite_id": "", "allow_open_invite": false, "scheme_id": "",
        "group_constrained": false,
    }]))
    .into_response()
}

async fn thread(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    caller!(shared, headers, method, uri, &[]);
    let s = shared.inner.lock().expect("double");
    if !s.posts.iter().any(|p| p.id == id) {
        return error(
            StatusCode::NOT_FOUND,
            "app.post.get.app_error",
            "Unable to get the post.",
        );
    }
    let posts: Vec<&Post> = s.posts.iter().filter(|p| p.id == id || p.root_id == id).collect();
    axum::Json(post_list(posts)).into_response()
}

async fn create_post(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let Ok(v) = serde_json::from_slice::<Value>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "api.context.invalid_body_param.app_error",
            "Invalid or missing post in request body.",
        );
    };
    let channel = v["channel_id"].as_str().unwrap_or_default().to_owned();
    let message = v["message"].as_str().unwrap_or_default().to_owned();
    let root = v["root_id"].as_str().unwrap_or_default().to_owned();
    let mut s = shared.inner.lock().expect("double");
    if !s.channel(&channel).is_some_and(|c| c.members.contains(&me.id)) {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    if message.chars().count() > s.max_post_size {
        return error(
            StatusCode::BAD_REQUEST,
            "model.post.is_valid.message_length.app_error",
            "Invalid Message property length.",
        );
    }
    if !root.is_empty()
        && !s
            .posts
            .iter()
            .any(|p| p.id == root && p.root_id.is_empty() && p.channel_id == channel)
    {
        return error(
            StatusCode::BAD_REQUEST,
            "api.post.create_post.root_id.app_error",
            "Invalid RootId parameter.",
        );
    }
    let post = s.create_post(&me.id, &channel, &message, &root);
    drop(s);
    shared.changed.notify_waiters();
    (StatusCode::CREATED, axum::Json(post.json())).into_response()
}

async fn patch_post(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut s = shared.inner.lock().expect("double");
    let now = s.now();
    let max = s.max_post_size;
    let Some(p) = s.posts.iter_mut().find(|p| p.id == id && p.delete_at == 0) else {
        return error(
            StatusCode::NOT_FOUND,
            "app.post.get.app_error",
            "Unable to get the post.",
        );
    };
    if p.user_id != me.id {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    if let Some(m) = v["message"].as_str() {
        if m.chars().count() > max {
            return error(
                StatusCode::BAD_REQUEST,
                "model.post.is_valid.message_length.app_error",
                "Invalid Message property length.",
            );
        }
        p.message = m.to_owned();
    }
    p.edit_at = now;
    p.update_at = now;
    let post = p.clone();
    s.emit_channel(
        &post.channel_id,
        "post_edited",
        json!({"post": post.json().to_string()}),
    );
    drop(s);
    shared.changed.notify_waiters();
    axum::Json(post.json()).into_response()
}

async fn delete_post(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let me = caller!(shared, headers, method, uri, &[]);
    let mut s = shared.inner.lock().expect("double");
    let now = s.now();
    let Some(p) = s.posts.iter_mut().find(|p| p.id == id && p.delete_at == 0) else {
        return error(
            StatusCode::NOT_FOUND,
            "app.post.get.app_error",
            "Unable to get the post.",
        );
    };
    if p.user_id != me.id {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    p.delete_at = now;
    p.update_at = now;
    let post = p.clone();
    s.emit_channel(
        &post.channel_id,
        "post_deleted",
        json!({"post": post.json().to_string()}),
    );
    drop(s);
    shared.changed.notify_waiters();
    axum::Json(json!({"status": "OK"})).into_response()
}

async fn react(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let r = Reaction {
        user_id: v["user_id"].as_str().unwrap_or_default().to_owned(),
        post_id: v["post_id"].as_str().unwrap_or_default().to_owned(),
        emoji_name: v["emoji_name"].as_str().unwrap_or_default().to_owned(),
    };
    if r.user_id != me.id {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    let mut s = shared.inner.lock().expect("double");
    let Some(channel) = s
        .posts
        .iter()
        .find(|p| p.id == r.post_id)
        .map(|p| p.channel_id.clone())
    else {
        return error(
            StatusCode::NOT_FOUND,
            "app.post.get.app_error",
            "Unable to get the post.",
        );
    };
    let now = s.now();
    let reaction =
        json!({"user_id": r.user_id, "post_id": r.post_id, "emoji_name": r.emoji_name, "create_at": now});
    s.reactions.push(r);
    s.emit_channel(
        &channel,
        "reaction_added",
        json!({"reaction": reaction.to_string()}),
    );
    drop(s);
    shared.changed.notify_waiters();
    (StatusCode::CREATED, axum::Json(reaction)).into_response()
}

async fn typing(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Path(id): Path<String>,
    body: Bytes,
) -> Response {
    let me = caller!(shared, headers, method, uri, &body);
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if id != me.id {
        return error(
            StatusCode::FORBIDDEN,
            "api.context.permissions.app_error",
            "You do not have the appropriate permissions.",
        );
    }
    let channel = v["channel_id"].as_str().unwrap_or_default().to_owned();
    let parent = v["parent_id"].as_str().unwrap_or_default().to_owned();
    shared
        .inner
        .lock()
        .expect("double")
        .typing
        .push((me.id, channel, parent));
    shared.changed.notify_waiters();
    axum::Json(json!({"status": "OK"})).into_response()
}

async fn client_config(
    State(shared): State<Shared>,
    headers: HeaderMap,
    method: Method,
    uri: Uri,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    caller!(shared, headers, method, uri, &[]);
    if q.get("format").map(String::as_str) != Some("old") {
        return error(
            StatusCode::NOT_IMPLEMENTED,
            "api.config.client.old_format.app_error",
            "New format for the client configuration is not supported yet.",
        );
    }
    let max = shared.inner.lock().expect("double").max_post_size;
    axum::Json(json!({"MaxPostSize": max.to_string(), "Version": "10.5.0", "BuildNumber": "double", "SiteName": "Double"})).into_response()
}

async fn not_found(uri: Uri) -> Response {
    let _ = uri;
    error(
        StatusCode::NOT_FOUND,
        "api.context.404.app_error",
        "Sorry, we could not find the page.",
    )
}
