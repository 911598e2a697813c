//! A real XMPP server for the tests: Debian's Prosody on a free loopback
//! port with a private config and data folder, accounts registered with
//! `prosodyctl`, and people played by slixmpp (`tests/xmpp/people.py`)
//! from the virtualenv scripts/test makes.
#![allow(dead_code)] // each test file uses some of these

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::lines::JsonLines;
use crate::common::{Reaper, free_port};

const PROSODY: &str = "/usr/bin/prosody";
const PROSODYCTL: &str = "/usr/bin/prosodyctl";

/// The server's domain, and its rooms' service.
pub const DOMAIN: &str = "localhost";
pub const MUC: &str = "conference.localhost";

/// Each account's password in the tests.
pub fn password(user: &str) -> String {
    format!("pw-{user}-secret")
}

/// `user`'s bare JID.
pub fn jid(user: &str) -> String {
    format!("{user}@{DOMAIN}")
}

/// Room `name`'s JID.
pub fn room(name: &str) -> String {
    format!("{name}@{MUC}")
}

/// The virtualenv with slixmpp scripts/test makes, and Prosody, if both
/// are here (they must be under scripts/test).
pub fn available() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let venv = [
        std::env::var_os("TACTFUL_XMPP_VENV").map(PathBuf::from),
        Some(root.join("target/xmpp-venv")),
    ]
    .into_iter()
    .flatten()
    .find(|v| v.join("bin/python").exists() && v.join(".tactful-installed").exists());
    let prosody = Path::new(PROSODY).exists();
    if venv.is_none() || !prosody {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "Prosody or slixmpp is missing but scripts/test should have installed them"
        );
        eprintln!("skipping: no Prosody or no virtualenv with slixmpp (scripts/test installs both)");
        return None;
    }
    venv
}

/// Prosody in the foreground, in a folder of its own.
pub struct Prosody {
    dir: PathBuf,
    pub port: u16,
    process: Option<Reaper>,
}

impl Prosody {
    /// Writes the config (loopback only, no TLS, no s2s, rooms archived
    /// and showing real JIDs, stanzas up to 4 MiB so a 1 MB body reaches
    /// tactful), registers `users`, and starts the server.
    pub fn start(dir: &Path, users: &[&str]) -> Prosody {
        Prosody::start_with(dir, users, "")
    }

    /// [`Prosody::start`] with `extra` lines in the config's global part
    /// (a rate limit, say).
    pub fn start_with(dir: &Path, users: &[&str], extra: &str) -> Prosody {
        let dir = dir.join("prosody");
        std::fs::create_dir_all(dir.join("data")).expect("prosody dir");
        std::fs::create_dir_all(dir.join("certs")).expect("prosody certs dir");
        let port = free_port();
        let d = dir.display();
        let config = format!(
            r#"pidfile = "{d}/prosody.pid"
data_path = "{d}/data"
certificates = "{d}/certs"
run_as_root = true
daemonize = false
log = {{ {{ levels = {{ min = "info" }}, to = "file", filename = "{d}/prosody.log" }} }}
c2s_ports = {{ {port} }}
c2s_interfaces = {{ "127.0.0.1" }}
s2s_ports = {{ }}
component_ports = {{ }}
http_ports = {{ }}
https_ports = {{ }}
modules_disabled = {{ "s2s", "tls" }}
c2s_require_encryption = false
allow_unencrypted_plain_auth = true
authentication = "internal_hashed"
storage = "internal"
c2s_stanza_size_limit = 4 * 1024 * 1024
archive_expires_after = "never"
modules_enabled = {{ "roster"; "saslauth"; "disco"; "ping"; "mam"; "offline"; "presence"; "message"; "admin_shell" }}
{extra}
VirtualHost "{DOMAIN}"
Component "{MUC}" "muc"
    modules_enabled = {{ "muc_mam" }}
    muc_log_by_default = true
    muc_log_all_rooms = true
    muc_room_locking = false
    muc_room_default_public_jids = true
    muc_room_default_persistent = true
    muc_room_default_history_length = 20
    muc_max_nick_length = 64
"#
        );
        std::fs::write(dir.join("prosody.cfg.lua"), config).expect("prosody config");
        let mut p = Prosody {
            dir,
            port,
            process: None,
        };
        for user in users {
            p.register(user);
        }
        p.run();
        p
    }

    fn config(&self) -> PathBuf {
        self.dir.join("prosody.cfg.lua")
    }

    /// Registers `user` (password [`password`]).
    pub fn register(&self, user: &str) {
        let out = Command::new(PROSODYCTL)
            .arg("--config")
            .arg(self.config())
            .args(["register", user, DOMAIN, &password(user)])
            .stdin(Stdio::null())
            .output()
            .expect("prosodyctl runs");
        assert!(
            out.status.success(),
            "prosodyctl register {user} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server and waits until it accepts connections.
    pub fn run(&mut self) {
        let child = Command::new(PROSODY)
            .args(["-F", "--config"])
            .arg(self.config())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("prosody starts");
        self.process = Some(Reaper(child));
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "prosody did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Runs `lua` in the server's admin shell (`prosodyctl shell`, a
    /// line starting with `>` being raw Lua); what it printed.
    pub fn shell(&self, lua: &str) -> String {
        let out = Command::new(PROSODYCTL)
            .arg("--config")
            .arg(self.config())
            .args(["shell", lua])
            .stdin(Stdio::null())
            .output()
            .expect("prosodyctl runs");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "prosodyctl shell {lua:?} failed: {said}");
        said
    }

    /// Makes room `room` forget occupant `nick` without telling anyone, as
    /// a room service that restarted apart from the server does.
    pub fn forget_occupant(&self, room: &str, nick: &str) {
        self.shell(&format!(
            "> local r = prosody.hosts[\"{MUC}\"].modules.muc.get_room_from_jid(\"{room}\"); \
             local o = r:get_occupant_by_nick(\"{room}/{nick}\"); local s = {{}}; \
             for jid in o:each_session() do s[#s + 1] = jid end; \
             for _, jid in ipairs(s) do o:remove_session(jid) end; r:save_occupant(o); return #s"
        ));
    }

    /// Kills the server outright (SIGKILL).
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.0.kill();
            let _ = p.0.wait();
        }
    }

    /// The server's log, for a failing test's message.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prosody.log")).unwrap_or_default()
    }
}

/// The people: a slixmpp process spoken to in JSON lines.
pub struct People(JsonLines);

impl People {
    pub fn start(venv: &Path, port: u16) -> People {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/xmpp/people.py");
        let mut command = Command::new(venv.join("bin/python"));
        command.args(["-W", "ignore"]).arg(script).arg(port.to_string());
        People(JsonLines::start("people.py", command))
    }

    pub fn call(&mut self, cmd: Value) -> Value {
        self.0.call(cmd)
    }

    pub fn login(&mut self, user: &str) {
        self.call(json!({"op": "login", "user": user, "password": password(user)}));
    }

    pub fn join(&mut self, who: &str, room: &str, nick: &str) {
        self.call(json!({"op": "join", "as": who, "room": room, "nick": nick}));
    }

    /// Says `body` in `room`; the id the room gave it.
    pub fn say(&mut self, who: &str, room: &str, body: &str) -> String {
        self.send(who, room, body, Value::Null, Value::Null)
    }

    pub fn send(&mut self, who: &str, room: &str, body: &str, mention: Value, reply: Value) -> String {
        let v = self.call(
            json!({"op": "send", "as": who, "room": room, "body": body, "mention": mention, "reply": reply}),
        );
        v.as_str().expect("a stanza-id").to_owned()
    }

    pub fn messages(&mut self, who: &str, room: &str) -> Vec<Value> {
        let v = self.call(json!({"op": "messages", "as": who, "room": room}));
        v.as_array().expect("a list").clone()
    }

    pub fn dms(&mut self, who: &str) -> Vec<Value> {
        let v = self.call(json!({"op": "dms", "as": who}));
        v.as_array().expect("a list").clone()
    }

    /// Polls `room` as `who` until `done` holds for its messages (60 s at
    /// most); returns them.
    pub fn wait_messages(
        &mut self,
        who: &str,
        room: &str,
        what: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let m = self.messages(who, room);
            if done(&m) {
                return m;
            }
            assert!(Instant::now() < deadline, "never saw {what}: {m:#?}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Polls until `nicks` are all in `room` as `who` sees it.
    pub fn wait_occupants(&mut self, who: &str, room: &str, nicks: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.call(json!({"op": "occupants", "as": who, "room": room}));
            let present: Vec<&str> = v
                .as_array()
                .expect("a list")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if nicks.iter().all(|n| present.contains(n)) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{nicks:?} never all joined {room}: {present:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
