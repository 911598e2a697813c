//! Every error the console's API gives is `{"error": …}` JSON, as
//! `docs/console.md` promises. Its own refusals are built so
//! ([`super::ApiError`]); axum's come as plain text or nothing at all (a
//! body over the limit: `413 text/plain`, a query it cannot read, a method
//! a path does not take, a path the API does not have), and a script that
//! reads `.error` from every answer would find none. This layer says each
//! of those again as JSON, with the same status (and `Allow` kept).

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// The most of an error's text that is read to be said again: axum's own
/// are one line.
const MAX_TEXT: usize = 4096;

/// An error answer that is not JSON, as JSON; anything else as it is.
pub(super) async fn as_json(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) || is_json(response.headers()) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, MAX_TEXT)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let said = what(status, parts.headers.get(header::ALLOW), &text);
    let mut headers = parts.headers;
    // The body is new: its length and type are the JSON's.
    headers.remove(header::CONTENT_LENGTH);
    headers.remove(header::CONTENT_TYPE);
    (status, headers, axum::Json(json!({ "error": said }))).into_response()
}

/// A path's answer to a method it does not take: 405, naming the ones it
/// does (in the body and in `Allow`).
pub(super) fn takes(
    methods: &'static str,
) -> impl Fn() -> std::future::Ready<Response> + Clone + Send + 'static {
    move || {
        std::future::ready(
            (
                StatusCode::METHOD_NOT_ALLOWED,
                [(header::ALLOW, methods)],
                axum::Json(
                    json!({ "error": format!("this path does not take that method: it takes {methods}") }),
                ),
            )
                .into_response(),
        )
    }
}

/// The API's own 404: a path under `/console/api/` it does not have.
pub(super) async fn no_such_endpoint() -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({
            "error": "the console's API has no such path: see docs/console.md for its endpoints"
        })),
    )
        .into_response()
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"))
}

/// What to say for an error axum gave with `text` (often empty).
fn what(status: StatusCode, allow: Option<&HeaderValue>, text: &str) -> String {
    match status {
        StatusCode::PAYLOAD_TOO_LARGE => format!(
            "the request body is over {} KiB and was not read (a room's policy is at most 16 KiB of TOML)",
            super::MAX_BODY / 1024
        ),
        StatusCode::METHOD_NOT_ALLOWED => {
            let takes = allow
                .and_then(|a| a.to_str().ok())
                .filter(|a| !a.is_empty())
                .map(|a| format!(": it takes {a}"))
                .unwrap_or_default();
            format!("this path does not take that method{takes}")
        }
        _ if !text.is_empty() => text.to_owned(),
        _ => status
            .canonical_reason()
            .unwrap_or("the request failed")
            .to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    async fn said(response: Response) -> (StatusCode, Option<String>, serde_json::Value) {
        let answer = as_json(response).await;
        let status = answer.status();
        let allow = answer
            .headers()
            .get(header::ALLOW)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        assert!(is_json(answer.headers()), "{:?}", answer.headers());
        let body = axum::body::to_bytes(answer.into_body(), MAX_TEXT)
            .await
            .expect("body");
        (status, allow, serde_json::from_slice(&body).expect("json"))
    }

    #[tokio::test]
    async fn axums_plain_errors_become_json_with_their_status() {
        let too_large = (StatusCode::PAYLOAD_TOO_LARGE, "length limit exceeded").into_response();
        let (status, _, v) = said(too_large).await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(v["error"].as_str().is_some_and(|e| e.contains("64 KiB")), "{v}");

        let mut wrong = Response::new(Body::empty());
        *wrong.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        wrong
            .headers_mut()
            .insert(header::ALLOW, HeaderValue::from_static("GET,HEAD"));
        let (status, allow, v) = said(wrong).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(allow.as_deref(), Some("GET,HEAD"), "Allow is kept");
        assert!(v["error"].as_str().is_some_and(|e| e.contains("GET,HEAD")), "{v}");

        let bad_query = (StatusCode::BAD_REQUEST, "Failed to deserialize query string").into_response();
        let (_, _, v) = said(bad_query).await;
        assert_eq!(v["error"], "Failed to deserialize query string");
    }

    #[tokio::test]
    async fn json_answers_and_successes_are_left_alone() {
        let ok = (StatusCode::OK, "fine").into_response();
        let kept = as_json(ok).await;
        assert_eq!(kept.status(), StatusCode::OK);
        assert!(!is_json(kept.headers()));
        let own = (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": "mine" }))).into_response();
        let (_, _, v) = said(own).await;
        assert_eq!(v["error"], "mine");
    }
}
