//! The gate every REST request of one bot passes through: a small HTTP
//! server on loopback that twilight's client is pointed at (its `proxy`
//! setting), forwarding each request to `api_url` and reading each answer.
//!
//! Why a gate rather than twilight's own rate limiter: twilight-http 0.18
//! retries a 429 at once, inside the request's future, and a global 429
//! (`X-RateLimit-Global: true`, `X-RateLimit-Scope: global`) pauses
//! nothing; only its 50 requests a second brake the retries. Discord bans
//! an IP for an hour after 10,000 invalid requests (401, 403, 429) in ten
//! minutes, so a few minutes of global limiting would take the bot
//! offline. The gate sees every attempt, twilight's retries included:
//!
//! - a global 429 pauses every request of that bot until its
//!   `retry_after` (the larger of the header and the body), logged once at
//!   WARN with its length; twilight's immediate retry waits here;
//! - invalid answers are counted over ten minutes ([`InvalidRequests`]):
//!   past [`SLOW_FROM`] each request is held a second, past
//!   [`REFUSE_FROM`] requests are refused here (a 503 twilight does not
//!   retry) until the count falls, far below Discord's 10,000;
//! - `api_url` is honoured whole, a path included (twilight's `proxy`
//!   takes only a host), so a reverse proxy under a path works.
//!
//! Per-route buckets stay twilight's: it reads their headers from the
//! answers the gate passes on unchanged.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

/// Discord's window for counting invalid requests.
pub const WINDOW: Duration = Duration::from_secs(600);

/// Invalid answers in [`WINDOW`] past which each request is held a second.
pub const SLOW_FROM: usize = 1_000;

/// Invalid answers in [`WINDOW`] past which requests are refused here
/// (Discord bans at 10,000).
pub const REFUSE_FROM: usize = 5_000;

/// The longest global pause believed: a larger `retry_after` is a broken
/// answer, not a reason to stop for hours.
const LONGEST_PAUSE: Duration = Duration::from_secs(600);

/// How the gate's own answer begins when Discord could not be reached:
/// `send::deadline` shows such an answer as the cause it names.
pub(crate) const UNREACHED: &str = "Discord did not answer: ";

/// The largest answer passed on (Discord's are a few KiB).
const MAX_ANSWER: usize = 8 << 20;

/// Invalid answers (401, 403, and 429s other than `shared` ones, as
/// Discord counts them) in the last [`WINDOW`].
#[derive(Debug, Default)]
pub struct InvalidRequests {
    at: VecDeque<Instant>,
}

impl InvalidRequests {
    /// Counts one at `now`.
    pub fn add(&mut self, now: Instant) {
        self.forget(now);
        // Never more than the refusal line needs: bounded memory.
        if self.at.len() <= REFUSE_FROM {
            self.at.push_back(now);
        }
    }

    /// How many in the window ending at `now`.
    pub fn count(&mut self, now: Instant) -> usize {
        self.forget(now);
        self.at.len()
    }

    fn forget(&mut self, now: Instant) {
        while self
            .at
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW)
        {
            self.at.pop_front();
        }
    }
}

/// Whether an answer counts against the invalid-request limit.
pub fn is_invalid(status: u16, headers: &HeaderMap) -> bool {
    match status {
        401 | 403 => true,
        429 => header(headers, "x-ratelimit-scope") != Some("shared"),
        _ => false,
    }
}

/// How long a global 429 asks every request to wait, if `status`,
/// `headers` and `body` are one.
pub fn global_pause(status: u16, headers: &HeaderMap, body: &[u8]) -> Option<Duration> {
    if status != 429 {
        return None;
    }
    let json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    let global = header(headers, "x-ratelimit-global").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || header(headers, "x-ratelimit-scope") == Some("global")
        || json["global"] == true;
    if !global {
        return None;
    }
    let seconds = |v: Option<f64>| v.filter(|s| s.is_finite() && *s >= 0.0).unwrap_or(0.0);
    let from_header = seconds(header(headers, "retry-after").and_then(|v| v.trim().parse().ok()));
    let from_body = seconds(json["retry_after"].as_f64());
    // At least a second: a global limit with no length still means stop.
    let wait = from_header.max(from_body).max(1.0);
    Some(Duration::from_secs_f64(wait).min(LONGEST_PAUSE))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// What the gate knows of its bot.
#[derive(Debug, Default)]
struct Limits {
    paused_until: Option<Instant>,
    invalid: InvalidRequests,
    /// Whether the slow-down or the refusal was said already.
    said_slow: bool,
    said_refused: bool,
}

struct GateState {
    persona: String,
    upstream: String,
    http: reqwest::Client,
    limits: Mutex<Limits>,
}

/// One bot's gate: its loopback address for twilight's `proxy`, and the
/// task serving it (stopped when dropped).
pub struct Gate {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Gate {
    /// A gate for `persona`'s bot forwarding to `api_url`. Must be called
    /// inside the tokio runtime.
    pub fn start(persona: &str, api_url: &str) -> std::io::Result<Gate> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let listener = tokio::net::TcpListener::from_std(listener)?;
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(std::io::Error::other)?;
        let state = Arc::new(GateState {
            persona: persona.to_owned(),
            upstream: api_url.trim_end_matches('/').to_owned(),
            http,
            limits: Mutex::new(Limits::default()),
        });
        let app = axum::Router::new().fallback(forward).with_state(state);
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::error!("Discord: the request gate stopped: {e}");
            }
        });
        Ok(Gate { addr, task })
    }

    /// `127.0.0.1:<port>`, for twilight's `proxy` (plain HTTP).
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }
}

/// A refusal twilight passes on as an error and does not retry.
fn refuse(why: String) -> Response {
    let body = serde_json::json!({"message": why, "code": 0}).to_string();
    (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
}

/// Headers not passed on in either direction (the hop's own).
fn hop_by_hop(name: &HeaderName) -> bool {
    matches!(
        name.as_str(),
        "host" | "connection" | "content-length" | "transfer-encoding" | "keep-alive" | "upgrade"
    )
}

/// Waits out a global pause and any slow-down; `Err` when the request is
/// refused here.
async fn admit(state: &GateState) -> Result<(), String> {
    loop {
        let now = Instant::now();
        let (pause, invalid) = {
            let Ok(mut l) = state.limits.lock() else {
                return Err("the gate's state was poisoned by a panic".into());
            };
            let pause = l.paused_until.filter(|t| *t > now);
            let invalid = l.invalid.count(now);
            if invalid >= REFUSE_FROM && !l.said_refused {
                l.said_refused = true;
                tracing::warn!(
                    persona = %state.persona,
                    "Discord: {invalid} invalid requests (401, 403, 429) in ten minutes; refusing this bot's requests until fewer (Discord bans the address at 10,000)"
                );
            } else if invalid >= SLOW_FROM && !l.said_slow {
                l.said_slow = true;
                tracing::warn!(
                    persona = %state.persona,
                    "Discord: {invalid} invalid requests (401, 403, 429) in ten minutes; slowing this bot to one request a second (is the token or a permission wrong?)"
                );
            } else if invalid < SLOW_FROM {
                l.said_slow = false;
                l.said_refused = false;
            }
            (pause, invalid)
        };
        if invalid >= REFUSE_FROM {
            return Err(format!(
                "tactful: {invalid} invalid requests in ten minutes; not sent, to keep under Discord's ban line"
            ));
        }
        match pause {
            Some(until) => tokio::time::sleep_until(until).await,
            None => {
                if invalid >= SLOW_FROM {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                return Ok(());
            }
        }
    }
}

/// Reads the answer's body, up to [`MAX_ANSWER`].
async fn read_body(mut answer: reqwest::Response) -> Result<Bytes, String> {
    let mut body = Vec::new();
    while let Some(chunk) = answer.chunk().await.map_err(|e| e.to_string())? {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(format!("an answer over {MAX_ANSWER} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body.into())
}

/// Every request: admitted, forwarded, its answer read for limits and
/// passed on as it came.
async fn forward(State(state): State<Arc<GateState>>, request: Request) -> Response {
    if let Err(why) = admit(&state).await {
        return refuse(why);
    }
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, MAX_ANSWER).await else {
        return refuse("tactful: a request body too large to pass on".into());
    };
    let path = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut out = state
        .http
        .request(parts.method.clone(), format!("{}{path}", state.upstream));
    for (name, value) in parts.headers.iter().filter(|(n, _)| !hop_by_hop(n)) {
        out = out.header(name, value);
    }
    let answer = match out.body(body).send().await {
        Ok(a) => a,
        Err(e) => {
            // In Discord's own error shape, so whoever asked reads it as
            // an answer: the cause and where (without the query).
            let why = tactful_core::cause::explain(&e.without_url(), &format!("{}{path}", state.upstream));
            let message = format!("{UNREACHED}{}", tactful_core::secrets::redact(&why));
            let body = serde_json::json!({ "code": 0, "message": message }).to_string();
            let mut response = (StatusCode::BAD_GATEWAY, body).into_response();
            response.headers_mut().insert(
                axum::http::header::CONTENT_TYPE,
                "application/json".parse().expect("header value"),
            );
            return response;
        }
    };
    let status = answer.status().as_u16();
    let headers = answer.headers().clone();
    let body = match read_body(answer).await {
        Ok(b) => b,
        Err(e) => return (StatusCode::BAD_GATEWAY, format!("tactful: {e}")).into_response(),
    };
    note(&state, status, &headers, &body);
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (name, value) in headers.iter().filter(|(n, _)| !hop_by_hop(n)) {
        response.headers_mut().append(name, value.clone());
    }
    response
}

/// Learns from one answer: an invalid one counted, a global limit obeyed.
fn note(state: &GateState, status: u16, headers: &HeaderMap, body: &[u8]) {
    let now = Instant::now();
    let Ok(mut l) = state.limits.lock() else {
        return;
    };
    if is_invalid(status, headers) {
        l.invalid.add(now);
    }
    if let Some(wait) = global_pause(status, headers, body) {
        let until = now + wait;
        // Said once per limit: twilight's retries of it come back with
        // the same 429 only after the pause, which extends nothing.
        let new = l.paused_until.is_none_or(|t| t <= now);
        if l.paused_until.is_none_or(|t| t < until) {
            l.paused_until = Some(until);
        }
        if new {
            tracing::warn!(
                persona = %state.persona,
                "Discord: globally rate limited for {:.1}s; no request of this bot goes out before then",
                wait.as_secs_f64()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().expect("a value"));
        }
        h
    }

    #[test]
    fn a_global_limit_is_read_from_any_of_its_signs() {
        let body = br#"{"message": "You are being rate limited.", "retry_after": 2.5, "global": true}"#;
        assert_eq!(
            global_pause(429, &headers(&[("retry-after", "2")]), body),
            Some(Duration::from_millis(2500)),
            "the longer of header and body"
        );
        assert_eq!(
            global_pause(
                429,
                &headers(&[("x-ratelimit-global", "true"), ("retry-after", "3")]),
                b""
            ),
            Some(Duration::from_secs(3))
        );
        assert_eq!(
            global_pause(429, &headers(&[("x-ratelimit-scope", "global")]), b"not json"),
            Some(Duration::from_secs(1)),
            "no length still means a pause"
        );
        let route = br#"{"retry_after": 1.0, "global": false}"#;
        assert_eq!(
            global_pause(429, &headers(&[("x-ratelimit-scope", "user")]), route),
            None
        );
        assert_eq!(
            global_pause(200, &headers(&[("x-ratelimit-global", "true")]), b""),
            None
        );
        assert_eq!(
            global_pause(429, &headers(&[("retry-after", "1e12")]), br#"{"global":true}"#),
            Some(LONGEST_PAUSE),
            "a broken length is capped"
        );
        assert_eq!(
            global_pause(429, &headers(&[]), br#"{"global":true,"retry_after":-5}"#),
            Some(Duration::from_secs(1))
        );
    }

    #[test]
    fn invalid_requests_are_counted_as_discord_counts_them() {
        assert!(is_invalid(401, &headers(&[])));
        assert!(is_invalid(403, &headers(&[])));
        assert!(is_invalid(429, &headers(&[("x-ratelimit-scope", "user")])));
        assert!(!is_invalid(429, &headers(&[("x-ratelimit-scope", "shared")])));
        assert!(!is_invalid(404, &headers(&[])));
        let t0 = Instant::now();
        let mut n = InvalidRequests::default();
        for i in 0..10 {
            n.add(t0 + Duration::from_secs(i * 60));
        }
        assert_eq!(n.count(t0 + Duration::from_secs(540)), 10);
        assert_eq!(
            n.count(t0 + Duration::from_secs(600)),
            9,
            "the first has left the window"
        );
        for _ in 0..20_000 {
            n.add(t0 + Duration::from_secs(600));
        }
        assert_eq!(n.count(t0 + Duration::from_secs(600)), REFUSE_FROM + 1, "bounded");
    }
}
