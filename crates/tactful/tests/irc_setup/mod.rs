//! A real IRC server (Debian's ngircd) and a person on it speaking the
//! protocol by hand, for the IRC tests.
#![allow(dead_code)] // each user takes some of it

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};

use crate::common::{Reaper, free_port};

const NGIRCD: &str = "/usr/sbin/ngircd";

/// ngircd in the foreground with a config of our own: loopback only, no
/// PAM, DNS or ident lookups, no flood penalty growth.
pub fn start_ngircd(dir: &Path) -> Option<(Reaper, u16)> {
    start_ngircd_on(dir, free_port())
}

pub fn start_ngircd_on(dir: &Path, port: u16) -> Option<(Reaper, u16)> {
    if !Path::new(NGIRCD).exists() {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "{NGIRCD} is missing but scripts/test should have installed it"
        );
        eprintln!("skipping: {NGIRCD} is not installed (scripts/test installs it: apt-get install ngircd)");
        return None;
    }
    let conf = dir.join("ngircd.conf");
    std::fs::write(
        &conf,
        format!(
            "[Global]\nName = irc.tactful.test\nInfo = tactful test server\nListen = 127.0.0.1\nPorts = {port}\n\
             MotdPhrase = tactful test\n\
             [Limits]\nMaxConnectionsIP = 0\nMaxPenaltyTime = 0\nPingTimeout = 120\n\
             [Options]\nPAM = no\nDNS = no\nIdent = no\n"
        ),
    )
    .expect("config");
    let child = Command::new(NGIRCD)
        .args(["--nodaemon", "--config"])
        .arg(&conf)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("ngircd starts");
    let server = Reaper(child);
    // Ready once it accepts connections.
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((server, port));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("ngircd did not start listening on {port}");
}

/// A person on IRC, speaking the protocol by hand.
pub struct Person {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    out: OwnedWriteHalf,
}

impl Person {
    pub async fn connect(port: u16, nick: &str) -> Person {
        let stream = TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let (r, w) = stream.into_split();
        let mut p = Person {
            lines: BufReader::new(r).lines(),
            out: w,
        };
        p.send(&format!("NICK {nick}")).await;
        p.send(&format!("USER {nick} 0 * :{nick}")).await;
        p.until(|l| l.split(' ').nth(1) == Some("001")).await;
        p
    }

    pub async fn send(&mut self, line: &str) {
        self.out
            .write_all(format!("{line}\r\n").as_bytes())
            .await
            .expect("write");
    }

    /// Reads lines (answering PINGs) until `want` accepts one; 30 s at most.
    pub async fn until(&mut self, mut want: impl FnMut(&str) -> bool) -> String {
        tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let line = self
                    .lines
                    .next_line()
                    .await
                    .expect("read")
                    .expect("connection open");
                if let Some(token) = line.strip_prefix("PING ") {
                    self.send(&format!("PONG {token}")).await;
                    continue;
                }
                if want(&line) {
                    return line;
                }
            }
        })
        .await
        .expect("the expected line in time")
    }

    /// The next channel message from `nick`: its text, and the raw line.
    pub async fn said_by(&mut self, nick: &str, channel: &str) -> (String, String) {
        let prefix = format!(":{nick}!");
        let cmd = format!(" PRIVMSG {channel} :");
        let line = self.until(|l| l.starts_with(&prefix) && l.contains(&cmd)).await;
        let text = line
            .split_once(&cmd)
            .map(|(_, t)| t.to_owned())
            .unwrap_or_default();
        (text, line)
    }
}

/// Joins `channel` and waits until NAMES lists every nick in `nicks`.
pub async fn join_with(person: &mut Person, channel: &str, nicks: &[&str]) {
    person.send(&format!("JOIN {channel}")).await;
    for attempt in 0.. {
        person.send(&format!("NAMES {channel}")).await;
        let names = person.until(|l| l.split(' ').nth(1) == Some("353")).await;
        let listed = |nick: &str| {
            names
                .split([' ', ':', '@', '+'])
                .any(|n| n.eq_ignore_ascii_case(nick))
        };
        if nicks.iter().all(|n| listed(n)) {
            return;
        }
        assert!(attempt < 300, "{nicks:?} never joined: {names}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
