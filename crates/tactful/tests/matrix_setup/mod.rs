//! A real Matrix homeserver for the tests: Synapse from PyPI on
//! 127.0.0.1, and people played by matrix-nio (`tests/matrix/humans.py`),
//! both from the virtualenv scripts/test makes.
#![allow(dead_code)] // each test file uses some of these

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::lines::JsonLines;
use crate::common::{Reaper, free_port, http_get};

pub const SECRET: &str = "tactful-test-shared-secret";
pub const SERVER: &str = "localhost";

/// The virtualenv with Synapse and matrix-nio that scripts/test makes.
pub fn venv() -> Option<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let candidates = [
        std::env::var_os("TACTFUL_MATRIX_VENV").map(PathBuf::from),
        Some(root.join("target/matrix-venv")),
    ];
    let found = candidates
        .into_iter()
        .flatten()
        .find(|v| v.join("bin/python").exists() && v.join(".tactful-installed").exists());
    if found.is_none() {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "Synapse and matrix-nio are missing but scripts/test should have installed them"
        );
        eprintln!(
            "skipping: no virtualenv with Synapse and matrix-nio (scripts/test makes one under the build folder)"
        );
    }
    found
}

/// A Synapse homeserver in a folder of its own.
pub struct Synapse {
    venv: PathBuf,
    dir: PathBuf,
    port: u16,
    process: Option<Reaper>,
}

impl Synapse {
    pub fn start(venv: PathBuf, dir: &Path) -> Synapse {
        let dir = dir.join("synapse");
        std::fs::create_dir_all(&dir).expect("synapse dir");
        let port = free_port();
        let log_config = dir.join("log.yaml");
        std::fs::write(
            &log_config,
            "version: 1\nformatters:\n  f:\n    format: '%(asctime)s %(levelname)s %(name)s %(message)s'\n\
             handlers:\n  file:\n    class: logging.FileHandler\n    formatter: f\n    filename: "
                .to_owned()
                + dir.join("homeserver.log").display().to_string().as_str()
                + "\nroot:\n  level: WARNING\n  handlers: [file]\ndisable_existing_loggers: false\n",
        )
        .expect("log config");
        let limits = "{per_second: 1000, burst_count: 1000}";
        let config = format!(
            "server_name: \"{SERVER}\"\n\
             pid_file: {dir}/homeserver.pid\n\
             listeners:\n  - port: {port}\n    bind_addresses: ['127.0.0.1']\n    type: http\n    tls: false\n    x_forwarded: false\n    resources:\n      - names: [client]\n        compress: false\n\
             database:\n  name: sqlite3\n  args:\n    database: {dir}/homeserver.db\n\
             log_config: {log}\n\
             media_store_path: {dir}/media\n\
             signing_key_path: {dir}/signing.key\n\
             trusted_key_servers: []\n\
             suppress_key_server_warning: true\n\
             registration_shared_secret: \"{SECRET}\"\n\
             enable_registration: false\n\
             report_stats: false\n\
             default_room_version: \"12\"\n\
             rc_message: {limits}\n\
             rc_registration: {limits}\n\
             rc_login:\n  address: {limits}\n  account: {limits}\n  failed_attempts: {limits}\n\
             rc_joins:\n  local: {limits}\n  remote: {limits}\n\
             rc_invites:\n  per_room: {limits}\n  per_user: {limits}\n  per_issuer: {limits}\n\
             rc_admin_redaction: {limits}\n",
            dir = dir.display(),
            log = log_config.display(),
        );
        std::fs::write(dir.join("homeserver.yaml"), config).expect("synapse config");
        let keys = Command::new(venv.join("bin/python"))
            .args(["-m", "synapse.app.homeserver", "--generate-keys", "-c"])
            .arg(dir.join("homeserver.yaml"))
            .stdout(Stdio::null())
            .status()
            .expect("synapse generates keys");
        assert!(keys.success(), "synapse --generate-keys failed");
        let mut s = Synapse {
            venv,
            dir,
            port,
            process: None,
        };
        s.run();
        s
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Starts the server and waits until it answers.
    pub fn run(&mut self) {
        let child = Command::new(self.venv.join("bin/python"))
            .args(["-m", "synapse.app.homeserver", "-c"])
            .arg(self.dir.join("homeserver.yaml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("synapse starts");
        self.process = Some(Reaper(child));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !http_ok(self.port, "/_matrix/client/versions") {
            assert!(
                Instant::now() < deadline,
                "synapse did not answer on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills the server outright (SIGKILL: no clean shutdown).
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = p.0.kill();
            let _ = p.0.wait();
        }
    }
}

/// Whether GET `path` on 127.0.0.1:`port` answers 200.
fn http_ok(port: u16, path: &str) -> bool {
    http_get(port, path).is_some_and(|(status, _)| status == 200)
}

/// The people: a matrix-nio process spoken to in JSON lines.
pub struct Humans(JsonLines);

impl Humans {
    pub fn start(venv: &Path, homeserver: &str) -> Humans {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/matrix/humans.py");
        let mut command = Command::new(venv.join("bin/python"));
        command.arg(script).arg(homeserver);
        Humans(JsonLines::start("humans.py", command))
    }

    pub fn call(&mut self, cmd: Value) -> Value {
        self.0.call(cmd)
    }

    pub fn register(&mut self, user: &str) {
        self.call(json!({"op": "register", "user": user, "password": password(user), "secret": SECRET}));
    }

    pub fn login(&mut self, user: &str) {
        self.call(json!({"op": "login", "user": user, "password": password(user)}));
    }

    pub fn send(&mut self, who: &str, room: &str, body: &str, mentions: &[&str]) -> String {
        let mentions: Vec<String> = mentions.iter().map(|m| mxid(m)).collect();
        let v = self.call(json!({"op": "send", "as": who, "room": room, "body": body, "mentions": mentions}));
        v.as_str().expect("an event id").to_owned()
    }

    pub fn messages(&mut self, who: &str, room: &str) -> Vec<Value> {
        let v = self.call(json!({"op": "messages", "as": who, "room": room}));
        v.as_array().expect("a list").clone()
    }

    /// Polls until `want` holds for the room's messages (60 s at most).
    pub fn wait_messages(
        &mut self,
        who: &str,
        room: &str,
        what: &str,
        want: impl Fn(&[Value]) -> bool,
    ) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let m = self.messages(who, room);
            if want(&m) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; the room has {m:#?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn wait_members(&mut self, who: &str, room: &str, users: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let v = self.call(json!({"op": "members", "as": who, "room": room}));
            let have: Vec<&str> = v
                .as_array()
                .expect("list")
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if users.iter().all(|u| have.contains(&mxid(u).as_str())) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{users:?} never joined {room}: {have:?}"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

pub fn password(user: &str) -> String {
    format!("pw-{user}-secret")
}

pub fn mxid(user: &str) -> String {
    format!("@{user}:{SERVER}")
}
