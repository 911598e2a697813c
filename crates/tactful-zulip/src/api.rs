//! One bot's REST calls: HTTP Basic with its email and API key, form
//! bodies whose values are JSON-encoded where they are not strings (as
//! the API takes them), `{result, msg, code}` read into [`ApiError`],
//! and rate limits honoured: a 429 pauses every call of the bot until
//! the server's reset ([`tactful_runtime::rate_pause`]), then the call is
//! made again (a refused request did nothing).

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use tactful_runtime::rate_pause::{RatePause, now_unix, pause_of};

use crate::model::Outcome;

/// How long a request may take; a long poll gets [`POLL_TIMEOUT`].
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a long poll of the events queue may take: the server answers
/// within a minute, with a heartbeat when nothing happened.
pub const POLL_TIMEOUT: Duration = Duration::from_secs(90);

/// Why a call failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// The server answered with an error.
    #[error("{status}: {msg}")]
    Status {
        /// The HTTP status.
        status: u16,
        /// The error's code (`BAD_EVENT_QUEUE_ID`), if the body said.
        code: String,
        /// The server's words, or the status's reason.
        msg: String,
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
    /// The error's code, for an answer with one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ApiError::Status { code, .. } if !code.is_empty() => Some(code),
            _ => None,
        }
    }

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
    /// `<site>/api/v1`.
    base: String,
    email: String,
    api_key: String,
    pause: RatePause,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .field("email", &self.email)
            .finish_non_exhaustive()
    }
}

/// A form's fields: name and value, strings as they are, anything else
/// JSON-encoded.
pub type Form = Vec<(&'static str, String)>;

impl Api {
    /// A client of the organisation at `site` as the bot `email`.
    pub fn new(site: &str, email: &str, api_key: &str) -> Result<Api, String> {
        let http = reqwest::Client::builder()
            .user_agent(concat!("tactful/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {e}"))?;
        Ok(Api {
            http,
            base: format!("{}/api/v1", site.trim_end_matches('/')),
            email: email.to_owned(),
            api_key: api_key.to_owned(),
            pause: RatePause::default(),
        })
    }

    /// `GET <path>` with `query`, read as `T`.
    pub async fn get<T: DeserializeOwned>(&self, path: &str, query: &Form) -> Result<T, ApiError> {
        self.call(Method::GET, path, query, REQUEST_TIMEOUT).await
    }

    /// A long poll: `GET <path>` that may take [`POLL_TIMEOUT`].
    pub async fn poll<T: DeserializeOwned>(&self, path: &str, query: &Form) -> Result<T, ApiError> {
        self.call(Method::GET, path, query, POLL_TIMEOUT).await
    }

    /// `POST <path>` with a form, read as `T`.
    pub async fn post<T: DeserializeOwned>(&self, path: &str, form: &Form) -> Result<T, ApiError> {
        self.call(Method::POST, path, form, REQUEST_TIMEOUT).await
    }

    /// `PATCH <path>` with a form.
    pub async fn patch(&self, path: &str, form: &Form) -> Result<(), ApiError> {
        self.call::<Outcome>(Method::PATCH, path, form, REQUEST_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// `DELETE <path>`.
    pub async fn delete(&self, path: &str) -> Result<(), ApiError> {
        self.call::<Outcome>(Method::DELETE, path, &Vec::new(), REQUEST_TIMEOUT)
            .await
            .map(|_| ())
    }

    /// Makes the call, waiting out every 429 first.
    async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        fields: &Form,
        timeout: Duration,
    ) -> Result<T, ApiError> {
        let url = format!("{}{path}", self.base);
        loop {
            self.pause.wait().await;
            let mut req = self
                .http
                .request(method.clone(), &url)
                .basic_auth(&self.email, Some(&self.api_key))
                .timeout(timeout);
            req = if method == Method::GET {
                req.query(fields)
            } else {
                req.form(fields)
            };
            let resp = req
                .send()
                .await
                .map_err(|e| ApiError::Network(tactful_core::cause::explain(&e, &url)))?;
            let status = resp.status();
            if status == StatusCode::TOO_MANY_REQUESTS {
                let headers = resp.headers();
                let pause = pause_of(|name| headers.get(name).and_then(|v| v.to_str().ok()), now_unix());
                self.pause.hold(pause);
                tracing::warn!("Zulip: rate limited on {path}; no request for {pause:?}");
                continue;
            }
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| ApiError::Network(tactful_core::cause::explain(&e, &url)))?;
            let outcome: Outcome = serde_json::from_slice(&bytes).unwrap_or_default();
            if status.is_success() && outcome.result != "error" {
                return serde_json::from_slice(&bytes).map_err(|e| ApiError::Decode {
                    what: path.to_owned(),
                    why: e.to_string(),
                });
            }
            let msg = if outcome.msg.trim().is_empty() {
                status.canonical_reason().unwrap_or("error").to_owned()
            } else {
                outcome.msg
            };
            return Err(ApiError::Status {
                status: status.as_u16(),
                code: outcome.code,
                msg,
            });
        }
    }
}
