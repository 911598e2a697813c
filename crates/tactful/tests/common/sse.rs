//! The console's live transcript read as a client does: Server-Sent
//! Events over a plain HTTP/1.1 connection.

use std::io::{BufRead, BufReader, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Opens the live transcript and hands each `data:` line (and `lagged`
/// event) to the returned channel, from a thread of its own.
pub fn live(server: u16, token: &str, query: &str) -> mpsc::Receiver<Value> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server)).expect("connect");
    write!(
        s,
        "GET /console/api/live?{query} HTTP/1.1\r\nHost: 127.0.0.1:{server}\r\nAuthorization: Bearer {token}\r\n\r\n"
    )
    .expect("request");
    let (tx, rx) = mpsc::channel();
    let mut reader = BufReader::new(s);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    assert!(status.contains(" 200 "), "{status}");
    std::thread::spawn(move || {
        let mut line = String::new();
        while reader.read_line(&mut line).unwrap_or(0) > 0 {
            if let Some(data) = line.trim_end().strip_prefix("data: ")
                && let Ok(v) = serde_json::from_str::<Value>(data)
                && tx.send(v).is_err()
            {
                return;
            }
            line.clear();
        }
    });
    rx
}

/// Reads live lines until `want` accepts one (30 s at most); returns the
/// lines read.
pub fn read_until(rx: &mpsc::Receiver<Value>, what: &str, want: impl Fn(&Value) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(v) => {
                let done = want(&v);
                seen.push(v);
                if done {
                    return seen;
                }
            }
            Err(_) => panic!("no live line for {what}; saw {seen:#?}"),
        }
    }
}
