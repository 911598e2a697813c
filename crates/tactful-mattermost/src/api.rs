//! One bot's REST calls: `Authorization: Bearer`, the API's error bodies
//! read into [`ApiError`], and rate limits honoured. A 429 pauses every
//! call of the account until the server's reset (`X-RateLimit-Reset`, or
//! `Retry-After`, whichever is later), then the call is made again: a
//! refused request did nothing, so trying it again cannot post twice.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tokio::time::Instant;

use crate::model::ApiErrorBody;

/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// The pause after a 429 that names none (the server's default window).
const DEFAULT_RATE_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause a 429 is taken at its word for: a reset further off
/// is read as this (a broken header must not silence a bot for a day).
const LONGEST_RATE_PAUSE: Duration = Duration::from_secs(300);

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The server answered with an error status.
    #[error("{status}: {message}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The error's id (`api.post.create_post.root_id.app_error`), if
        /// the body said.
        id: String,
        /// The server's words, or the status's reason.
        message: String,
    },
    /// The server could not be reached, or the answer was cut off.
    #[error("{0}")]
    Network(String),
    /// The answer was not what the API describes.
    #[error("unexpected answer to {what}: {why}")]
    Decode {
        /// The call.
        what: String,
        /// What was wrong.
        why: String,
    },
}

impl ApiError {
    /// The HTTP status, for an answer with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ApiError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// One bot's client.
pub struct Api {
    http: reqwest::Client,
    /// `<url>/api/v4`.
    base: String,
    token: String,
    /// No request before this (a 429's reset).
    not_before: Mutex<Option<Instant>>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client of the server at `url` with `token`.
    pub fn new(url: &str, token: &str) -> Result<Api, String> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("tactful/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Api {
            http,
            base: format!("{}/api/v4", url.trim_end_matches('/')),
            token: token.to_owned(),
            not_before: Mutex::new(None),
        })
    }

    /// `GET <path>`, the answer read as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, ApiError> {
        let body = self.call(Method::GET, path, None).await?;
        decode(path, &body)
    }

    /// `POST <path>` with a JSON body, the answer read as `T`.
    pub async fn post<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ApiError> {
        let answer = self.call(Method::POST, path, Some(body)).await?;
        decode(path, &answer)
    }

    /// `POST <path>` whose answer tactful does not read.
    pub async fn post_only(&self, path: &str, body: &serde_json::Value) -> Result<(), ApiError> {
        self.call(Method::POST, path, Some(body)).await.map(|_| ())
    }

    /// `PUT <path>` with a JSON body, the answer read as `T`.
    pub async fn put<T: DeserializeOwned>(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<T, ApiError> {
        let answer = self.call(Method::PUT, path, Some(body)).await?;
        decode(path, &answer)
    }

    /// `DELETE <path>`.
    pub async fn delete(&self, path: &str) -> Result<(), ApiError> {
        self.call(Method::DELETE, path, None).await.map(|_| ())
    }

    /// Makes the call, waiting out every 429 first; the answer's body on
    /// success.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> Result<Vec<u8>, ApiError> {
        let url = format!("{}{path}", self.base);
        loop {
            let not_before = self.not_before.lock().ok().and_then(|n| *n);
            if let Some(at) = not_before {
                tokio::time::sleep_until(at).await;
            }
            let mut req = self.http.request(method.clone(), &url).bearer_auth(&self.token);
            if let Some(body) = body {
                req = req.json(body);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| ApiError::Network(tactful_core::cause::explain(&e, &url)))?;
            let status = resp.status();
            if status == StatusCode::TOO_MANY_REQUESTS {
                let pause = rate_pause(resp.headers());
                let until = Instant::now() + pause;
                if let Ok(mut n) = self.not_before.lock() {
                    *n = Some(n.map_or(until, |n| n.max(until)));
                }
                tracing::warn!("Mattermost: rate limited on {path}; no request for {pause:?}");
                continue;
            }
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| ApiError::Network(tactful_core::cause::explain(&e, &url)))?;
            if status.is_success() {
                return Ok(bytes.to_vec());
            }
            let err: ApiErrorBody = serde_json::from_slice(&bytes).unwrap_or_default();
            let message = if err.message.trim().is_empty() {
                status.canonical_reason().unwrap_or("error").to_owned()
            } else {
                err.message
            };
            return Err(ApiError::Status {
                status: status.as_u16(),
                id: err.id,
                message,
            });
        }
    }
}

fn decode<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| ApiError::Decode {
        what: what.split('?').next().unwrap_or(what).to_owned(),
        why: e.to_string(),
    })
}

/// How long a 429 says to wait: the later of `X-RateLimit-Reset` and
/// `Retry-After` (both whole seconds from now; a reset written as a Unix
/// time is read as one), at least a moment, at most
/// [`LONGEST_RATE_PAUSE`].
pub fn rate_pause(headers: &reqwest::header::HeaderMap) -> Duration {
    let seconds = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    let now_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    let reset = seconds("X-RateLimit-Reset").map(|r| if r > 1e9 { (r - now_unix).max(0.0) } else { r });
    let retry = seconds("Retry-After");
    let wait = match (reset, retry) {
        (None, None) => return DEFAULT_RATE_PAUSE,
        (a, b) => a.unwrap_or(0.0).max(b.unwrap_or(0.0)),
    };
    Duration::from_secs_f64(wait)
        .max(Duration::from_millis(100))
        .min(LONGEST_RATE_PAUSE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).expect("header"));
        }
        h
    }

    #[test]
    fn a_429_waits_for_the_later_of_its_reset_and_retry_after() {
        assert_eq!(
            rate_pause(&headers(&[("X-RateLimit-Reset", "3")])),
            Duration::from_secs(3)
        );
        assert_eq!(
            rate_pause(&headers(&[("X-RateLimit-Reset", "2"), ("Retry-After", "5")])),
            Duration::from_secs(5)
        );
        assert_eq!(rate_pause(&headers(&[])), DEFAULT_RATE_PAUSE);
        // Nonsense is neither obeyed for ever nor turned into no wait.
        assert_eq!(
            rate_pause(&headers(&[("Retry-After", "99999999")])),
            LONGEST_RATE_PAUSE
        );
        assert_eq!(rate_pause(&headers(&[("Retry-After", "-4")])), DEFAULT_RATE_PAUSE);
        assert_eq!(
            rate_pause(&headers(&[("Retry-After", "0")])),
            Duration::from_millis(100)
        );
        // A reset written as a Unix time, ten seconds ahead.
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs()
            + 10;
        let pause = rate_pause(&headers(&[("X-RateLimit-Reset", &unix.to_string())]));
        assert!(
            pause > Duration::from_secs(8) && pause <= Duration::from_secs(10),
            "{pause:?}"
        );
    }
}
