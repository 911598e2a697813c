//! A model server for tests: OpenAI-compatible, streaming, with usage.

use std::io::{BufRead, BufReader, Read, Write};

use serde_json::{Value, json};

/// Tokens each answer of [`model_server`] reports: 120 in (100 of them
/// cached) and 7 out.
pub const TOKENS_PER_CALL: u64 = 127;

/// An OpenAI-compatible server that answers every request with the same
/// streamed reply and a usage chunk (120 tokens in, 100 of them cached,
/// 7 out), as OpenAI documents `stream_options.include_usage`.
pub fn model_server() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || answer(stream));
        }
    });
    port
}

fn answer(mut s: std::net::TcpStream) {
    let mut reader = BufReader::new(s.try_clone().expect("clone"));
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    let _ = reader.read_exact(&mut body);
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let usage = json!({"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m", "choices": [],
                       "usage": {"prompt_tokens": 120, "completion_tokens": 7, "total_tokens": 127,
                                 "prompt_tokens_details": {"cached_tokens": 100}}});
    let mut out =
        String::from("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n");
    for event in [
        chunk(json!({"role": "assistant", "content": "Use the "}), Value::Null),
        chunk(json!({"content": "red button."}), Value::Null),
        chunk(json!({}), json!("stop")),
        usage,
    ] {
        out.push_str(&format!("data: {event}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    let _ = s.write_all(out.as_bytes());
}
