//! Test helpers: a turn to run, and a scripted HTTP server on loopback.

#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use tactful_core::persona::PersonaIdx;
use tactful_core::transcript::Entry;
use tactful_core::{Timestamp, TurnId, TurnKind, TurnRequest};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn entry(id: &str, author: &str, name: &str, persona: Option<u8>, text: &str, at: u64) -> Arc<Entry> {
    Arc::new(Entry {
        id: id.into(),
        author: author.into(),
        author_name: name.into(),
        is_bot: persona.is_some(),
        persona: persona.map(PersonaIdx),
        text: text.into(),
        reply_to: None,
        thread: None,
        time: Timestamp(at),
    })
}

/// Docs answering Alice, with one earlier exchange as history.
pub fn turn() -> TurnRequest {
    TurnRequest {
        turn: TurnId(7),
        kind: TurnKind::Reply,
        started: Timestamp(5_000),
        persona: "docs".into(),
        persona_idx: PersonaIdx(0),
        persona_name: "Docs".into(),
        agent: "main".into(),
        prompt: "You answer questions about the product.".into(),
        room: "main".into(),
        thread: None,
        is_dm: false,
        silence_token: Some("NO_REPLY".into()),
        triggers: vec![entry(
            "m3",
            "alice",
            "Alice",
            None,
            "@docs how do I reset?",
            4_000,
        )],
        history: vec![
            entry("m1", "alice", "Alice", None, "@docs hello", 1_000),
            entry("docs:1", "docs", "Docs", Some(0), "Hi Alice.", 2_000),
        ],
        trigger_at: vec![],
        max_chars: 10_000,
        room_bots: vec![],
        flush_trigger: None,
        addressed: true,
        max_reply_chars: tactful_core::policy::DEFAULT_MAX_REPLY_CHARS,
        strip_reasoning: true,
        hooked: false,
    }
}

/// What the server answers to one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// 200 with `text/event-stream`: each item as a `data:` event, then the
    /// connection closes (a missing `[DONE]` is a cut stream).
    Sse { events: Vec<String> },
    /// A status with headers and a body.
    Status {
        code: u16,
        headers: Vec<(&'static str, &'static str)>,
        body: String,
    },
    /// Read the request and never answer.
    Hang,
    /// A status whose body is `bytes` bytes of `x` with no end of event or
    /// JSON in sight, streamed without holding it (a misbehaving endpoint).
    Flood {
        code: u16,
        content_type: &'static str,
        bytes: usize,
    },
}

/// A request as the server saw it.
#[derive(Clone, Debug)]
pub struct Captured {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Captured {
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    }
}

/// An HTTP/1.1 server on 127.0.0.1 answering requests with `replies`, in
/// order, one connection each.
pub struct TestServer {
    addr: std::net::SocketAddr,
    requests: Arc<Mutex<Vec<Captured>>>,
}

impl TestServer {
    pub async fn start(replies: Vec<Reply>) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
        let addr = listener.local_addr().expect("addr");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            let mut hung = Vec::new();
            for reply in replies {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let Some(req) = read_request(&mut sock).await else {
                    continue;
                };
                seen.lock().expect("lock").push(req);
                match reply {
                    Reply::Hang => hung.push(sock),
                    Reply::Status { code, headers, body } => {
                        let mut head = format!(
                            "HTTP/1.1 {code} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n",
                            body.len()
                        );
                        for (k, v) in headers {
                            head.push_str(&format!("{k}: {v}\r\n"));
                        }
                        head.push_str("\r\n");
                        let _ = sock.write_all(head.as_bytes()).await;
                        let _ = sock.write_all(body.as_bytes()).await;
                        let _ = sock.shutdown().await;
                    }
                    Reply::Flood {
                        code,
                        content_type,
                        bytes,
                    } => {
                        let head = format!(
                            "HTTP/1.1 {code} X\r\ncontent-type: {content_type}\r\ncontent-length: {bytes}\r\nconnection: close\r\n\r\n"
                        );
                        let _ = sock.write_all(head.as_bytes()).await;
                        let block = if content_type == "text/event-stream" {
                            // One event that never ends.
                            let mut b = b"data: ".to_vec();
                            b.resize(64 * 1024, b'x');
                            b
                        } else {
                            vec![b'x'; 64 * 1024]
                        };
                        let mut left = bytes;
                        while left > 0 {
                            let n = left.min(block.len());
                            if sock.write_all(&block[..n]).await.is_err() {
                                break;
                            }
                            left -= n;
                        }
                        let _ = sock.shutdown().await;
                    }
                    Reply::Sse { events } => {
                        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n";
                        let _ = sock.write_all(head.as_bytes()).await;
                        for e in events {
                            let _ = sock.write_all(format!("data: {e}\n\n").as_bytes()).await;
                            let _ = sock.flush().await;
                        }
                        let _ = sock.shutdown().await;
                    }
                }
            }
            // Keep hung connections open until the test ends.
            std::future::pending::<()>().await;
            drop(hung);
        });
        TestServer { addr, requests }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn requests(&self) -> Vec<Captured> {
        self.requests.lock().expect("lock").clone()
    }
}

async fn read_request(sock: &mut TcpStream) -> Option<Captured> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let path = lines.next()?.split(' ').nth(1)?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| {
            l.split_once(':')
                .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        })
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    while buf.len() < head_end + len {
        let n = sock.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let body = String::from_utf8_lossy(&buf[head_end..]).into_owned();
    Some(Captured { path, headers, body })
}

/// Whether process `pid` ends (or is a zombie) within two seconds.
pub async fn ends(pid: &str) -> bool {
    for _ in 0..50 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("");
        if stat.is_empty() || state == "Z" {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    }
    false
}

/// A file in this test process's own temporary folder.
pub fn temp(prefix: &str, name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}
