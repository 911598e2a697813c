//! Driving a `tactful` process and its web room from tests.
#![allow(dead_code)] // each test file uses some of these

pub mod conf;
pub mod double;
pub mod lines;
pub mod model;
pub mod split;
pub mod sse;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message as Ws;

/// GET a path over plain HTTP/1.1; the body.
pub async fn get(addr: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    out.split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default()
}

/// A running `tactful` process and the web room URL it printed.
pub struct Service {
    pub child: Reaper,
    pub out: BufReader<std::process::ChildStdout>,
    pub ws_url: String,
}

pub fn spawn(args: &[&str]) -> Service {
    spawn_with(args, &[])
}

/// [`spawn`] with these environment variables set.
pub fn spawn_with(args: &[&str], env: &[(&str, &str)]) -> Service {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(if std::env::var_os("TACTFUL_TEST_STDERR").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("tactful starts");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the ready line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches('/');
    let ws_url = format!("{}/ws", url.replacen("http://", "ws://", 1));
    Service {
        child: Reaper(child),
        out,
        ws_url,
    }
}

/// A child process killed when dropped: a failed test must not leave the
/// service running.
pub struct Reaper(pub std::process::Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Reaper {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Reaper {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Reaper {
    /// Sends SIGTERM and waits for the exit.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .expect("kill")
                .success()
        );
        tokio::task::spawn_blocking(move || self.wait())
            .await
            .expect("join")
            .expect("wait")
    }
}

impl Service {
    /// SIGTERM, then a clean exit that says so.
    pub async fn stop(mut self) {
        let status = self.child.terminate().await;
        assert!(status.success(), "a clean exit on SIGTERM: {status}");
        let mut rest = String::new();
        self.out.read_to_string(&mut rest).expect("rest of stdout");
        assert!(rest.contains("tactful: stopped"), "{rest:?}");
    }
}

pub type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens the room's WebSocket as its own page would: with its origin.
pub async fn open(ws_url: &str) -> Socket {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest;
    let mut req = ws_url.into_client_request().expect("a ws:// URL");
    let origin = ws_url
        .replacen("ws://", "http://", 1)
        .trim_end_matches("/ws")
        .to_owned();
    req.headers_mut()
        .insert("origin", origin.parse().expect("header"));
    tokio_tungstenite::connect_async(req).await.expect("connect").0
}

/// Says hello as `name` and joins the lobby. The key the room gives a name
/// is kept and shown again, as the page does, so entering twice under one
/// name (a reconnect before the room noticed the old socket close) is the
/// same person, not a refused stranger.
pub async fn enter(ws_url: &str, name: &str) -> Socket {
    static KEYS: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let known = |keys: &Vec<(String, String)>| keys.iter().find(|(n, _)| n == name).map(|(_, k)| k.clone());
    let key = KEYS.lock().ok().and_then(|k| known(&k));
    let mut ws = open(ws_url).await;
    say(&mut ws, json!({ "type": "hello", "name": name, "key": key })).await;
    let welcome = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "welcome" || v["type"] == "error" {
                    return v;
                }
            }
        }
    })
    .await
    .expect("a welcome");
    assert_eq!(welcome["type"], "welcome", "{name} let in: {welcome}");
    if let (Some(k), Ok(mut keys)) = (welcome["key"].as_str(), KEYS.lock()) {
        keys.retain(|(n, _)| n != name);
        keys.push((name.to_owned(), k.to_owned()));
    }
    say(&mut ws, json!({ "type": "join", "room": "lobby" })).await;
    ws
}

pub async fn say(ws: &mut Socket, v: Value) {
    ws.send(Ws::Text(v.to_string().into())).await.expect("send");
}

/// Bot messages until `done` says the wanted ones arrived (30 s at most).
/// A reply that grows in its placeholder ("…", then edits) counts once,
/// with its latest text.
pub async fn bot_messages(ws: &mut Socket, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    let mut got: Vec<Value> = Vec::new();
    let mut placeholders: Vec<Value> = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while !done(&got) {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message" && v["message"]["sender"]["bot"] == true {
                    if v["message"]["text"] == "…" {
                        placeholders.push(v["message"].clone());
                    } else {
                        got.push(v["message"].clone());
                    }
                } else if v["type"] == "edit" && v["text"] != "…" {
                    let grown = placeholders
                        .iter()
                        .chain(got.iter())
                        .find(|m| m["id"] == v["id"])
                        .cloned();
                    if let Some(mut m) = grown {
                        m["text"] = v["text"].clone();
                        got.retain(|g| g["id"] != m["id"]);
                        got.push(m);
                    }
                }
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out; got {got:#?}"));
    got
}

/// The first event of the room's WebSocket `want` takes (30 s at most).
pub async fn event(ws: &mut Socket, want: impl Fn(&Value) -> bool) -> Value {
    tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if want(&v) {
                    return v;
                }
            }
        }
    })
    .await
    .expect("the event came")
}

/// The id of the room's message with this text, from the room's own echo.
pub async fn id_of(ws: &mut Socket, text: &str) -> String {
    tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Some(Ok(Ws::Text(t))) = ws.next().await {
                let v: Value = serde_json::from_str(&t).expect("json");
                if v["type"] == "message" && v["message"]["text"] == text {
                    return v["message"]["id"].as_str().unwrap_or_default().to_owned();
                }
            }
        }
    })
    .await
    .expect("the message is echoed")
}

/// A free port on 127.0.0.1 (the listener is closed again before use), for
/// the real servers the tests start.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The personas whose accounts the process serving `/metrics` on `port`
/// listens with (`tactful_platform_connected`), sorted; none when it
/// does not answer.
pub fn listening(port: u16) -> Vec<String> {
    reported_listening(port).unwrap_or_default()
}

/// [`listening`], `None` when `/metrics` did not answer (a process that
/// stopped answering is not one that stopped listening).
pub fn reported_listening(port: u16) -> Option<Vec<String>> {
    let (status, body) = http_get(port, "/metrics")?;
    if status != 200 {
        return None;
    }
    let mut out: Vec<String> = body
        .lines()
        .filter(|l| l.starts_with("tactful_platform_connected{"))
        .filter_map(|l| Some(l.split("persona=\"").nth(1)?.split('"').next()?.to_owned()))
        .collect();
    out.sort();
    Some(out)
}

/// GET a path on 127.0.0.1 (blocking, 5 s timeout): the status and body.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let status = out.split(' ').nth(1)?.parse().ok()?;
    Some((
        status,
        out.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default(),
    ))
}

/// One HTTP request on 127.0.0.1 (blocking, 10 s timeout): the status and
/// the body.
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    use std::io::Write;
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .expect("timeout");
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).expect("head");
    let _ = s.write_all(body);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out).into_owned();
    let status = out.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (
        status,
        out.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default(),
    )
}

/// `tactful doctor` on `config`, written into `dir` as `doctor.toml`: the
/// exit code, the table (stdout) and the log (stderr).
pub fn doctor(dir: &std::path::Path, config: &str) -> (Option<i32>, String, String) {
    let path = dir.join("doctor.toml");
    std::fs::write(&path, config).expect("config");
    let out = Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["doctor", "-c"])
        .arg(&path)
        .output()
        .expect("tactful doctor runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `tactful check` on `config` (written to a folder of its own) with
/// `env` set.
pub fn check_config(config: &str, env: &[(&str, &str)]) -> std::process::Output {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.toml");
    std::fs::write(&path, config).expect("config");
    Command::new(env!("CARGO_BIN_EXE_tactful"))
        .args(["check", "-c"])
        .arg(&path)
        .env_remove("TACTFUL_LOG")
        .envs(env.iter().copied())
        .output()
        .expect("tactful runs")
}

/// Each `(from, to, want)`: `good` with `from` replaced by `to` fails
/// `tactful check` (with `env`) saying `want`, and without showing
/// `secret`.
pub fn each_mistake_is_named(good: &str, cases: &[(&str, &str, &str)], env: &[(&str, &str)], secret: &str) {
    for (from, to, want) in cases {
        assert!(good.contains(from), "{from}");
        let o = check_config(&good.replacen(from, to, 1), env);
        assert!(!o.status.success(), "{to}: {}", said(&o));
        assert!(said(&o).contains(want), "{to}: want {want:?} in {}", said(&o));
        assert!(!said(&o).contains(secret), "{}", said(&o));
    }
}

/// What a finished command printed, stdout then stderr.
pub fn said(o: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// `body` as JSON, or a panic that shows it.
pub fn json_of(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// A metric's value from `/metrics` (summed over its label sets).
pub fn metric(port: u16, name: &str) -> Option<f64> {
    let (_, body) = http_get(port, "/metrics")?;
    let mut total = None;
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (key, value) = line.rsplit_once(' ')?;
        let key = key.split('{').next()?;
        if key == name {
            *total.get_or_insert(0.0) += value.parse::<f64>().ok()?;
        }
    }
    total
}

/// Waits until tactful has heard at least `heard` live messages and has
/// nothing in progress: every decision made, every turn ended, every reply
/// delivered.
pub fn settle(port: u16, heard: f64) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let got = metric(port, "tactful_messages_in_total").unwrap_or(0.0);
        let busy = metric(port, "tactful_busy").unwrap_or(1.0);
        if got >= heard && busy == 0.0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "tactful never settled: heard {got} of {heard}, busy {busy}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Starts `tactful run` on `config` (written into `dir`) with `env`; logs
/// go to the test's stderr when `TACTFUL_TEST_STDERR` is set.
pub fn run_tactful(dir: &std::path::Path, config: &str, env: &[(&str, &str)]) -> Reaper {
    let stderr = if std::env::var_os("TACTFUL_TEST_STDERR").is_some() {
        Stdio::inherit()
    } else {
        Stdio::null()
    };
    Reaper(
        tactful_run(dir, config, env)
            .stderr(stderr)
            .spawn()
            .expect("tactful starts"),
    )
}

/// `tactful run -c <dir>/tactful.toml` with `config` written there.
fn tactful_run(dir: &std::path::Path, config: &str, env: &[(&str, &str)]) -> Command {
    let cfg = dir.join("tactful.toml");
    std::fs::write(&cfg, config).expect("config");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tactful"));
    // The caller's `TACTFUL_LOG`, if it gives one, wins.
    cmd.args(["run", "-c"])
        .arg(&cfg)
        .env("TACTFUL_LOG", "info,tactful_runtime=debug")
        .envs(env.iter().copied())
        .stdout(Stdio::null());
    cmd
}

/// Reads `from` line by line into `logs` (and to stderr with
/// `TACTFUL_TEST_STDERR`), on a thread of its own.
fn gather(from: impl Read + Send + 'static, logs: &Logs) {
    let gathered = logs.clone();
    let show = std::env::var_os("TACTFUL_TEST_STDERR").is_some();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if show {
                eprintln!("{line}");
            }
            gathered.0.lock().expect("logs").push(line);
        }
    });
}

/// Shows a running tactful's log on stderr if the test panics while it
/// is held (a failing test's output then says what tactful did).
pub struct ShownOnPanic(pub Logs);

impl Drop for ShownOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let lines = self.0.lines();
            let from = lines.len().saturating_sub(200);
            eprintln!(
                "tactful's log (last {} lines):\n{}",
                lines.len() - from,
                lines[from..].join("\n")
            );
        }
    }
}

/// The log lines of a running tactful, gathered as they come.
#[derive(Clone, Default)]
pub struct Logs(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

impl Logs {
    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().expect("logs").clone()
    }

    /// Waits (60 s at most) for a line `pred` holds for; returns it.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(l) = self.lines().into_iter().find(|l| pred(l)) {
                return l;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "tactful never logged {what}:\n{}",
                self.lines().join("\n")
            );
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// [`run_tactful`], with what it prints (the banner on stdout, the log on
/// stderr) gathered as lines (and also shown with `TACTFUL_TEST_STDERR`).
pub fn run_tactful_logged(dir: &std::path::Path, config: &str, env: &[(&str, &str)]) -> (Reaper, Logs) {
    let mut child = tactful_run(dir, config, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tactful starts");
    let logs = Logs::default();
    gather(child.stdout.take().expect("stdout"), &logs);
    gather(child.stderr.take().expect("stderr"), &logs);
    (Reaper(child), logs)
}

/// Sends SIGHUP (a config reload) to process `pid`.
pub fn hup(pid: u32) {
    signal(pid, "HUP");
}

/// Sends the signal named `sig` (`HUP`, `STOP`, `CONT`…) to process `pid`.
pub fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "SIG{sig} sent");
}
