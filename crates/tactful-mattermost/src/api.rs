//! One bot's REST calls: `Authorization: Bearer`, the API's error bodies
//! read into [`ApiError`], and rate limits honoured. A 429 pauses every
//! call of the account until the server's reset (`X-RateLimit-Reset`, or
//! `Retry-After`, whichever is later), then the call is made again: a
//! refused request did nothing, so trying it again cannot post twice.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tactful_runtime::rate_pause::{RatePause, now_unix, pause_of};

use crate::model::ApiErrorBody;

/// How long one request may take before it counts as failed.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

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
    /// No request before a 429's reset. Shared by every bot of the
    /// server: Mattermost limits by the client's address by default, so a
    /// 429 to one bot is a 429 to all of them.
    pause: std::sync::Arc<RatePause>,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client of the server at `url` with `token`, pausing with `pause`.
    pub fn new(url: &str, token: &str, pause: std::sync::Arc<RatePause>) -> Result<Api, String> {
        let http = reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("tactful/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Api {
            http,
            base: format!("{}/api/v4", url.trim_end_matches('/')),
            token: token.to_owned(),
            pause,
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
            self.pause.wait().await;
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
                let headers = resp.headers();
                let pause = pause_of(|name| headers.get(name).and_then(|v| v.to_str().ok()), now_unix());
                self.pause.hold(pause);
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
