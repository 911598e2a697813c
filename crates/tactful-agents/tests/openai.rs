//! The OpenAI-compatible backend against an in-test HTTP server that speaks
//! the Chat Completions streaming format as OpenAI documents it: a role
//! delta, content deltas, a chunk with `finish_reason`, a usage chunk with
//! empty `choices` (`stream_options.include_usage`), then `data: [DONE]`.

use crate::common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Reply, TestServer, turn};
use tactful_agents::openai::{OpenAiAgent, OpenAiConfig};
use tactful_agents::{Agent, AgentError, Usage};

const KEY: &str = "sk-test-SECRET-123";

fn agent(base_url: &str, timeout: Duration) -> OpenAiAgent {
    OpenAiAgent::new(
        OpenAiConfig {
            base_url: base_url.to_owned(),
            model: "gpt-test".to_owned(),
            api_key: Some(KEY.to_owned()),
            temperature: Some(0.2),
            max_tokens: Some(200),
            timeout,
            headers: BTreeMap::from([("X-Title".to_owned(), "tactful".to_owned())]),
        },
        Arc::from(tactful_core::prompt::DEFAULT_CONTRACT),
    )
    .expect("valid headers")
}

fn chunk(delta: &str, finish: Option<&str>) -> String {
    serde_json::json!({
        "id": "chatcmpl-123",
        "object": "chat.completion.chunk",
        "created": 1_694_268_190,
        "model": "gpt-test",
        "system_fingerprint": "fp_44709d6fcb",
        "choices": [{ "index": 0, "delta": serde_json::from_str::<serde_json::Value>(delta).expect("delta json"), "logprobs": null, "finish_reason": finish }],
    })
    .to_string()
}

fn usage_chunk() -> String {
    serde_json::json!({
        "id": "chatcmpl-123", "object": "chat.completion.chunk", "created": 1_694_268_190, "model": "gpt-test",
        "choices": [], "usage": { "prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21,
                   "prompt_tokens_details": { "cached_tokens": 4 } },
    })
    .to_string()
}

fn hello_stream() -> Reply {
    Reply::Sse {
        events: vec![
            chunk(r#"{"role":"assistant","content":""}"#, None),
            chunk(r#"{"content":"Hel"}"#, None),
            chunk(r#"{"content":"lo, "}"#, None),
            chunk(r#"{"content":"Alice."}"#, None),
            chunk("{}", Some("stop")),
            usage_chunk(),
            "[DONE]".to_owned(),
        ],
    }
}

/// Collects deltas one by one.
#[derive(Default)]
struct Pieces(Vec<String>);

impl tactful_agents::Deltas for Pieces {
    fn delta(&mut self, text: &str) {
        self.0.push(text.to_owned());
    }
}

#[tokio::test]
async fn streams_deltas_and_records_usage() {
    let server = TestServer::start(vec![hello_stream()]).await;
    let a = agent(&server.base_url(), Duration::from_secs(5));
    let t = turn();
    let mut pieces = Pieces::default();
    let reply = a.run(&t, &mut pieces).await.expect("a reply");
    assert_eq!(reply.text, "Hello, Alice.");
    assert_eq!(
        pieces.0,
        ["Hel", "lo, ", "Alice."],
        "deltas surface as they arrive"
    );
    assert_eq!(
        reply.usage,
        Some(Usage {
            prompt_tokens: 9,
            completion_tokens: 12,
            cached_tokens: 4,
        })
    );

    let req = &server.requests()[0];
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(
        req.header("authorization").as_deref(),
        Some(format!("Bearer {KEY}").as_str())
    );
    assert_eq!(req.header("x-title").as_deref(), Some("tactful"));
    let body: serde_json::Value = serde_json::from_str(&req.body).expect("json body");
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["max_tokens"], 200);
    let roles: Vec<&str> = body["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["role"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "user"],
        "system first, then strictly alternating"
    );
    assert!(
        body["messages"][3]["content"]
            .as_str()
            .unwrap_or("")
            .contains("[from Alice · m3] @docs how do I reset?")
    );
}

/// DeepSeek-R1 and Qwen3 behind vLLM or llama.cpp stream their reasoning
/// as `reasoning_content` beside `content` (OpenRouter as `reasoning`):
/// it is counted, never passed on as text, so it can neither reach the
/// room nor stand in front of a `NO_REPLY`.
#[tokio::test]
async fn reasoning_sent_beside_the_content_is_counted_and_never_shown() {
    let server = TestServer::start(vec![Reply::Sse {
        events: vec![
            chunk(
                r#"{"role":"assistant","content":null,"reasoning_content":"Bob "}"#,
                None,
            ),
            chunk(r#"{"content":null,"reasoning_content":"answered."}"#, None),
            chunk(r#"{"reasoning":"Stay out.","content":""}"#, None),
            chunk(r#"{"content":"NO_REPLY"}"#, None),
            chunk("{}", Some("stop")),
            "[DONE]".to_owned(),
        ],
    }])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(5));
    let mut pieces = Pieces::default();
    let reply = a.run(&turn(), &mut pieces).await.expect("a reply");
    assert_eq!(reply.text, "NO_REPLY");
    assert_eq!(pieces.0, ["NO_REPLY"], "no reasoning among the deltas");
    assert_eq!(reply.reasoning_chars, "Bob answered.Stay out.".len());
    assert_eq!(
        reply.into_result(),
        tactful_core::AgentResult::Reasoned {
            text: "NO_REPLY".to_owned(),
            reasoning_chars: 22
        }
    );
}

#[tokio::test]
async fn rate_limits_are_retried_after_the_time_the_server_asks() {
    let server = TestServer::start(vec![
        Reply::Status {
            code: 429,
            headers: vec![("retry-after", "1")],
            body: r#"{"error":{"message":"Rate limit reached"}}"#.to_owned(),
        },
        hello_stream(),
    ])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(10));
    let start = Instant::now();
    let reply = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect("retried to success");
    assert_eq!(reply.text, "Hello, Alice.");
    assert!(
        start.elapsed() >= Duration::from_secs(1),
        "Retry-After was honoured"
    );
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff() {
    let server = TestServer::start(vec![
        Reply::Status {
            code: 500,
            headers: vec![],
            body: "oops".to_owned(),
        },
        Reply::Status {
            code: 503,
            headers: vec![],
            body: "".to_owned(),
        },
        hello_stream(),
    ])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(10));
    let reply = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect("retried to success");
    assert_eq!(reply.text, "Hello, Alice.");
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn retries_stop_at_the_turn_deadline() {
    let replies = (0..10)
        .map(|_| Reply::Status {
            code: 502,
            headers: vec![],
            body: "bad gateway".to_owned(),
        })
        .collect();
    let server = TestServer::start(replies).await;
    let a = agent(&server.base_url(), Duration::from_millis(1200));
    let start = Instant::now();
    let err = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("gives up");
    assert!(
        start.elapsed() < Duration::from_millis(1500),
        "within the deadline: {:?}",
        start.elapsed()
    );
    match err {
        AgentError::Http { status: 502, message } => assert!(message.contains("gave up"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn client_errors_end_the_turn_with_the_providers_message_and_no_key() {
    let server = TestServer::start(vec![Reply::Status {
        code: 401,
        headers: vec![],
        body: r#"{"error":{"message":"Incorrect API key provided: sk-test-****-123.","type":"invalid_request_error","code":"invalid_api_key"}}"#.to_owned(),
    }])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(5));
    let err = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("401");
    let text = err.to_string();
    assert_eq!(text, "HTTP 401: Incorrect API key provided: sk-test-****-123.");
    assert!(!text.contains(KEY));
    assert!(
        !format!("{a:?}").contains(KEY),
        "Debug does not print the key either"
    );
    assert_eq!(server.requests().len(), 1, "a 4xx is not retried");
}

#[tokio::test]
async fn malformed_chunks_are_protocol_errors() {
    let server = TestServer::start(vec![Reply::Sse {
        events: vec![chunk(r#"{"content":"Hi"}"#, None), "{not json".to_owned()],
    }])
    .await;
    let err = agent(&server.base_url(), Duration::from_secs(5))
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("bad chunk");
    assert!(
        matches!(err, AgentError::Protocol(ref m) if m.contains("not JSON")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_is_an_error_not_half_an_answer() {
    let server = TestServer::start(vec![Reply::Sse {
        events: vec![
            chunk(r#"{"role":"assistant","content":""}"#, None),
            chunk(r#"{"content":"The first half"}"#, None),
        ],
    }])
    .await;
    let err = agent(&server.base_url(), Duration::from_secs(5))
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("cut");
    assert!(
        matches!(err, AgentError::Connection(ref m) if m.contains("before the answer was complete")),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_times_out() {
    let server = TestServer::start(vec![Reply::Hang]).await;
    let start = Instant::now();
    let err = agent(&server.base_url(), Duration::from_millis(400))
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("hang");
    assert_eq!(err, AgentError::Timeout(Duration::from_millis(400)));
    assert!(start.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn a_refused_connection_is_a_clear_error() {
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let err = agent(&format!("http://{addr}/v1"), Duration::from_secs(2))
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("refused");
    assert!(matches!(err, AgentError::Connection(_)), "{err:?}");
    // What `tactful doctor` and the log show: the cause and the URL asked.
    assert_eq!(
        err.to_string(),
        format!("connection failed: connection refused: http://{addr}/v1/chat/completions")
    );
    // A key put in the URL's user part never shows.
    let err = agent(
        &format!("http://proxy-KEY-42:pw-43@{addr}/v1"),
        Duration::from_secs(2),
    )
    .run(&turn(), &mut tactful_agents::NoDeltas)
    .await
    .expect_err("refused");
    let said = err.to_string();
    assert!(!said.contains("KEY-42") && !said.contains("pw-43"), "{said}");
    assert!(
        said.contains(&format!("http://{addr}/v1/chat/completions")),
        "{said}"
    );
}

#[tokio::test]
async fn retry_after_zero_still_backs_off_and_the_retries_are_budgeted() {
    // A provider that says "retry now" forever: without a floor on the wait
    // this was hundreds of requests in one turn.
    let flood = Reply::Status {
        code: 429,
        headers: vec![("retry-after", "0")],
        body: r#"{"error":{"message":"Rate limit reached"}}"#.to_owned(),
    };
    let server = TestServer::start(vec![flood.clone(); 300]).await;
    let a = agent(&server.base_url(), Duration::from_secs(3));
    let err = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("gives up");
    let n = server.requests().len();
    assert!((2..=4).contains(&n), "{n} requests in 3 s");
    assert!(matches!(err, AgentError::Http { status: 429, .. }), "{err}");

    // With all the time in the world, the budget still ends it.
    let server = TestServer::start(vec![
        Reply::Status {
            code: 503,
            headers: vec![("retry-after", "0.01")],
            body: "{}".to_owned()
        };
        300
    ])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(600));
    let started = Instant::now();
    let err = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("gives up");
    assert_eq!(server.requests().len(), 5, "the first try and 4 retries");
    assert!(err.to_string().contains("retry budget"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20));
}

#[tokio::test]
async fn a_huge_error_body_is_read_only_in_part() {
    let server = TestServer::start(vec![Reply::Flood {
        code: 400,
        content_type: "application/json",
        bytes: 200 * 1024 * 1024,
    }])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(30));
    let started = Instant::now();
    let err = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("an HTTP error");
    let text = err.to_string();
    assert!(text.contains("cut"), "{}", &text[..text.len().min(400)]);
    assert!(text.len() < 1000, "a short message: {} bytes", text.len());
    // 200 MB over loopback would take seconds; stopping early does not.
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[tokio::test]
async fn an_answer_longer_than_a_reply_is_cut_and_an_endless_event_is_refused() {
    let piece = "word ".repeat(200);
    let mut events = vec![chunk(r#"{"role":"assistant","content":""}"#, None)];
    for _ in 0..200 {
        events.push(chunk(&serde_json::json!({ "content": piece }).to_string(), None));
    }
    events.push(chunk("{}", Some("stop")));
    events.push("[DONE]".to_owned());
    let server = TestServer::start(vec![Reply::Sse { events }]).await;
    let a = agent(&server.base_url(), Duration::from_secs(30));
    let mut t = turn();
    t.max_reply_chars = 1000;
    let mut streamed = String::new();
    let reply = a.run(&t, &mut streamed).await.expect("a reply");
    assert_eq!(reply.text.len(), 1000 * 4 + 4096, "read up to the output cap");
    assert_eq!(streamed, reply.text, "nothing past the cap is streamed either");

    let server = TestServer::start(vec![Reply::Flood {
        code: 200,
        content_type: "text/event-stream",
        bytes: 64 * 1024 * 1024,
    }])
    .await;
    let a = agent(&server.base_url(), Duration::from_secs(60));
    let err = a
        .run(&turn(), &mut tactful_agents::NoDeltas)
        .await
        .expect_err("refused");
    assert!(err.to_string().contains("without finishing"), "{err}");
}
