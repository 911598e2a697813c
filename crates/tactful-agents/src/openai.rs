//! `kind = "openai"`: any OpenAI-compatible Chat Completions endpoint.
//!
//! OpenAI, OpenRouter, Ollama, llama.cpp's server, vLLM, LM Studio, Groq...
//! all speak `POST {base_url}/chat/completions`. Answers are streamed over
//! server-sent events and passed on delta by delta. Rate limits (429) and
//! server errors (5xx) are retried with exponential backoff, honouring
//! `Retry-After`, as long as the turn's deadline allows; other 4xx errors end
//! the turn with the status and the provider's message. The API key is sent
//! as a sensitive header and never appears in an error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use futures::future::BoxFuture;
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, RETRY_AFTER};
use serde_json::{Value, json};
use tactful_core::TurnRequest;
use tactful_core::prompt::{self, Role};

use crate::{Agent, AgentError, AgentReply, Collected, Deltas, Usage, tail};

/// The first retry waits this long; each next one twice as long. A
/// `Retry-After` shorter than this (`0` included) does not make it shorter:
/// a provider answering "retry now" must not get a request per millisecond.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// No single wait is longer than this (a `Retry-After` included).
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Retries per turn, whatever time is left: a provider failing every
/// request gets at most this many more.
const MAX_RETRIES: u32 = 4;
/// How much of an error body is read for its message.
const MAX_ERROR_BODY: usize = 64 * 1024;
/// How much of an answer's event stream is read at most; the answer text
/// itself is capped by the turn's `max_reply_chars`.
const MAX_STREAM_BYTES: usize = 32 * 1024 * 1024;
/// The longest line of an event stream read.
const MAX_LINE_BYTES: usize = 1024 * 1024;

/// How to reach a Chat Completions endpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiConfig {
    /// e.g. `https://api.openai.com/v1` or `http://localhost:11434/v1`.
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// Sent as `Authorization: Bearer ...` when set.
    pub api_key: Option<String>,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Longest answer, in tokens.
    pub max_tokens: Option<u32>,
    /// The whole turn's deadline, retries included.
    pub timeout: Duration,
    /// Extra request headers (OpenRouter's `HTTP-Referer`, say).
    pub headers: BTreeMap<String, String>,
}

/// An OpenAI-compatible agent.
#[derive(Clone)]
pub struct OpenAiAgent {
    config: OpenAiConfig,
    contract: Arc<str>,
    client: reqwest::Client,
    headers: HeaderMap,
}

impl std::fmt::Debug for OpenAiAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the key.
        f.debug_struct("OpenAiAgent")
            .field("base_url", &self.config.base_url)
            .field("model", &self.config.model)
            .finish_non_exhaustive()
    }
}

/// A header that cannot be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("header `{0}` is not a valid HTTP header name or value")]
pub struct BadHeader(pub String);

impl OpenAiAgent {
    /// An agent for `config`; prompts use `contract`.
    pub fn new(config: OpenAiConfig, contract: Arc<str>) -> Result<Self, BadHeader> {
        let mut headers = HeaderMap::new();
        for (k, v) in &config.headers {
            let name = HeaderName::try_from(k.as_str()).map_err(|_| BadHeader(k.clone()))?;
            let value = HeaderValue::try_from(v.as_str()).map_err(|_| BadHeader(k.clone()))?;
            headers.insert(name, value);
        }
        if let Some(key) = config.api_key.as_deref().filter(|k| !k.is_empty()) {
            let mut value = HeaderValue::try_from(format!("Bearer {key}"))
                .map_err(|_| BadHeader("api_key".to_owned()))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        Ok(OpenAiAgent {
            config,
            contract,
            client: reqwest::Client::new(),
            headers,
        })
    }

    fn url(&self) -> String {
        format!("{}/chat/completions", self.config.base_url.trim_end_matches('/'))
    }

    /// The request body: the system text, then the conversation with
    /// consecutive same-role turns merged (strict-alternation providers
    /// reject two user turns in a row).
    pub fn request_body(&self, turn: &TurnRequest) -> Value {
        let p = prompt::render(turn, &self.contract);
        let mut messages = vec![json!({ "role": "system", "content": p.system })];
        let mut last_role: Option<Role> = None;
        for m in p.messages {
            if last_role == Some(m.role)
                && let Some(prev) = messages.last_mut()
            {
                let merged = format!("{}\n{}", prev["content"].as_str().unwrap_or(""), m.content);
                prev["content"] = json!(merged);
                continue;
            }
            last_role = Some(m.role);
            messages.push(json!({ "role": m.role, "content": m.content }));
        }
        let mut body = json!({
            "model": self.config.model,
            "messages": messages,
            "stream": true,
            "stream_options": { "include_usage": true },
        });
        if let Some(t) = self.config.temperature {
            body["temperature"] = json!(t);
        }
        if let Some(n) = self.config.max_tokens {
            body["max_tokens"] = json!(n);
        }
        body
    }

    async fn run_turn(&self, turn: &TurnRequest, deltas: &mut dyn Deltas) -> Result<AgentReply, AgentError> {
        let timeout = self.config.timeout;
        let deadline = Instant::now() + timeout;
        let body = self.request_body(turn);
        let mut attempt: u32 = 0;
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(AgentError::Timeout(timeout));
            }
            let sent = self
                .client
                .post(self.url())
                .headers(self.headers.clone())
                .json(&body)
                .timeout(remaining)
                .send()
                .await;
            let response = match sent {
                Ok(r) => r,
                Err(e) if e.is_timeout() => return Err(AgentError::Timeout(timeout)),
                Err(e) => return Err(AgentError::Connection(connect_error(&e, &self.url()))),
            };
            let status = response.status();
            if status.is_success() {
                return read_stream(response, deadline, timeout, deltas, turn.max_reply_chars).await;
            }
            let retry_after = response.headers().get(RETRY_AFTER).and_then(parse_retry_after);
            let message = provider_message(response).await;
            if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
                let wait = backoff(attempt, retry_after);
                if attempt < MAX_RETRIES && Instant::now() + wait < deadline {
                    tracing::debug!(
                        status = status.as_u16(),
                        ?wait,
                        attempt,
                        "retrying the completion"
                    );
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    continue;
                }
                let why = if attempt < MAX_RETRIES {
                    "no time left to retry"
                } else {
                    "the retry budget is spent"
                };
                let message = format!("{message} (gave up after {} attempts: {why})", attempt + 1);
                return Err(AgentError::Http {
                    status: status.as_u16(),
                    message,
                });
            }
            return Err(AgentError::Http {
                status: status.as_u16(),
                message,
            });
        }
    }
}

/// How long to wait before retry number `attempt + 1`: the exponential
/// backoff, or the provider's `Retry-After` when that is longer, never more
/// than [`MAX_BACKOFF`].
fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let exponential = FIRST_BACKOFF.saturating_mul(2u32.saturating_pow(attempt));
    retry_after
        .map_or(exponential, |r| r.max(exponential))
        .min(MAX_BACKOFF)
}

/// `Retry-After` in seconds (the HTTP-date form is rare from APIs and is
/// treated as absent: the backoff applies).
fn parse_retry_after(v: &HeaderValue) -> Option<Duration> {
    let s = v.to_str().ok()?.trim();
    s.parse::<f64>()
        .ok()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .map(Duration::from_secs_f64)
}

/// The provider's error message: `error.message` in the usual JSON body,
/// else the start of the body.
async fn provider_message(response: reqwest::Response) -> String {
    // Only the start of the body is read: an endpoint answering with
    // hundreds of megabytes must not have them held in memory.
    let mut bytes = Vec::new();
    let mut stream = response.bytes_stream();
    let mut cut = false;
    while let Some(Ok(chunk)) = stream.next().await {
        let room = MAX_ERROR_BODY - bytes.len();
        if chunk.len() >= room {
            bytes.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    let body = String::from_utf8_lossy(&bytes);
    if cut {
        let start: String = body.chars().take(300).collect();
        return format!("{start}… (an error body of more than {MAX_ERROR_BODY} bytes, cut)");
    }
    serde_json::from_str::<Value>(&body)
        .ok()
        .and_then(|v| v["error"]["message"].as_str().map(str::to_owned))
        .unwrap_or_else(|| {
            let b = tail(&body, 300);
            if b.is_empty() { "no message".to_owned() } else { b }
        })
}

/// Reads `data:` events until `[DONE]` (or a finished choice and the end of
/// the body), passing content deltas on as they arrive.
async fn read_stream(
    response: reqwest::Response,
    deadline: Instant,
    timeout: Duration,
    deltas: &mut dyn Deltas,
    max_reply_chars: usize,
) -> Result<AgentReply, AgentError> {
    // Every byte of the stream counts against its cap, so even one event
    // that never ends (no blank line) cannot grow without bound.
    // A line that never ends is cut off early too: the event parser
    // rescans its buffer on every chunk, so one huge line is slow as well
    // as big.
    let read = AtomicUsize::new(0);
    let line = AtomicUsize::new(0);
    let read_too_much =
        || read.load(Ordering::Relaxed) > MAX_STREAM_BYTES || line.load(Ordering::Relaxed) > MAX_LINE_BYTES;
    let mut events = response
        .bytes_stream()
        .take_while(|chunk| {
            let (n, tail) = chunk.as_ref().map_or((0, None), |c| {
                (
                    c.len(),
                    c.iter().rposition(|&b| b == b'\n').map(|i| c.len() - i - 1),
                )
            });
            let total = read.fetch_add(n, Ordering::Relaxed) + n;
            let open = match tail {
                Some(after_newline) => after_newline,
                None => line.load(Ordering::Relaxed) + n,
            };
            line.store(open, Ordering::Relaxed);
            futures::future::ready(total <= MAX_STREAM_BYTES && open <= MAX_LINE_BYTES)
        })
        .eventsource();
    let mut text = Collected::new(max_reply_chars);
    let mut usage = None;
    let mut finished = false;
    // Reasoning some servers send beside the content (`reasoning_content`,
    // or `reasoning` on some routers): counted for the trace, never kept.
    let mut reasoning_chars = 0usize;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let next = tokio::time::timeout(remaining, events.next())
            .await
            .map_err(|_| AgentError::Timeout(timeout))?;
        let Some(event) = next else {
            if finished {
                return Ok(AgentReply {
                    text: text.into_text(),
                    usage,
                    reasoning_chars,
                });
            }
            if read_too_much() {
                return Err(AgentError::Protocol(format!(
                    "the answer's stream passed {MAX_STREAM_BYTES} bytes, or a line of it {MAX_LINE_BYTES}, without finishing"
                )));
            }
            return Err(AgentError::Connection(
                "the stream ended before the answer was complete".to_owned(),
            ));
        };
        let event = event.map_err(|e| AgentError::Connection(format!("the stream broke: {e}")))?;
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(AgentReply {
                text: text.into_text(),
                usage,
                reasoning_chars,
            });
        }
        if data.is_empty() {
            continue;
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            AgentError::Protocol(format!("a stream chunk is not JSON ({e}): {}", tail(data, 200)))
        })?;
        if let Some(msg) = chunk["error"]["message"].as_str() {
            return Err(AgentError::Protocol(format!(
                "the provider reported an error mid-stream: {msg}"
            )));
        }
        if let Some(choice) = chunk["choices"].get(0) {
            for key in ["reasoning_content", "reasoning"] {
                if let Some(r) = choice["delta"][key].as_str() {
                    reasoning_chars = reasoning_chars.saturating_add(r.chars().count());
                }
            }
            if let Some(piece) = choice["delta"]["content"].as_str()
                && !piece.is_empty()
                && !text.push(piece, deltas)
            {
                // Longer than a reply may be: stop reading (dropping the
                // response ends the request, and the tokens it would cost).
                tracing::warn!(
                    max_reply_chars,
                    "the model's answer passed the reply limit; stopped reading"
                );
                return Ok(AgentReply {
                    text: text.into_text(),
                    usage,
                    reasoning_chars,
                });
            }
            if choice["finish_reason"].is_string() {
                finished = true;
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            usage = Some(Usage {
                prompt_tokens: u["prompt_tokens"].as_u64().unwrap_or(0),
                completion_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
                cached_tokens: u["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .or_else(|| u["prompt_cache_hit_tokens"].as_u64())
                    .unwrap_or(0),
            });
        }
    }
}

/// Why a request never got an answer, as people read it: the innermost
/// cause ("connection refused", "dns error: failed to lookup address…")
/// and the URL asked (without the user name and password it may hold: a
/// proxy's key is sometimes put there).
fn connect_error(e: &reqwest::Error, url: &str) -> String {
    tactful_core::cause::reaching(e, url)
}

impl Agent for OpenAiAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(self.run_turn(turn, deltas))
    }
}
