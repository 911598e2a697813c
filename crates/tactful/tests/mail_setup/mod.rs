//! Real mail servers for the tests: Debian's Postfix (SMTP, with a
//! submission port that needs a login), Dovecot (IMAP with IDLE, and the
//! logins Postfix checks) and mlmmj (the list manager Postfix pipes list
//! mail to), on free loopback ports with private configs in a folder of
//! the test's. Nothing of the system's mail set-up is used or changed.
//! People are `tests/email/people.py` (Python's smtplib and imaplib).
//!
//! Postfix's master must run as root (it refuses otherwise), so these
//! tests need root, as the machines that run `scripts/test` give.
#![allow(dead_code)] // each test file uses some of these

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::lines::JsonLines;
use crate::common::{Reaper, free_port};

const POSTFIX: &str = "/usr/sbin/postfix";
const DOVECOT: &str = "/usr/sbin/dovecot";
const MLMMJ_RECEIVE: &str = "/usr/bin/mlmmj-receive";

/// The people's and personas' domain, and the lists'.
pub const DOMAIN: &str = "example.org";
pub const LISTS: &str = "lists.example.org";

/// `user`'s address.
pub fn address(user: &str) -> String {
    format!("{user}@{DOMAIN}")
}

/// List `name`'s posting address.
pub fn list(name: &str) -> String {
    format!("{name}@{LISTS}")
}

/// Each mailbox's password in the tests.
pub fn password(user: &str) -> String {
    format!("pw-{user}")
}

/// Whether Postfix, Dovecot and mlmmj are here and this runs as root
/// (scripts/test installs them; Postfix runs only as root).
pub fn available() -> bool {
    let here = [POSTFIX, DOVECOT, MLMMJ_RECEIVE]
        .iter()
        .all(|p| Path::new(p).exists());
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !here || !root {
        assert!(
            std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
            "Postfix, Dovecot or mlmmj is missing (or this is not root) but scripts/test should have installed them"
        );
        eprintln!("skipping: Postfix, Dovecot and mlmmj (scripts/test installs them) and root are needed");
        return false;
    }
    true
}

fn run(cmd: &mut Command, what: &str) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Postfix, Dovecot and mlmmj, running.
pub struct MailServers {
    dir: PathBuf,
    /// People's (and mlmmj's) SMTP: no login, loopback clients relay.
    pub smtp: u16,
    /// Submission: a login (checked by Dovecot) or nothing.
    pub submission: u16,
    /// IMAP (no TLS; plain logins allowed: loopback only).
    pub imap: u16,
    postfix: Option<Reaper>,
    dovecot: Option<Reaper>,
}

impl MailServers {
    /// Mailboxes for `users` (people and personas) and `lists` (name,
    /// subscribers); `submission_extra` goes on the submission port's
    /// command line (`-o key=value` words: a slow server, say).
    pub fn start(
        dir: &Path,
        users: &[&str],
        lists: &[(&str, &[&str])],
        submission_extra: &[&str],
    ) -> MailServers {
        let dir = dir.join("mail");
        for sub in [
            "postfix",
            "spool",
            "data",
            "mailboxes",
            "lists",
            "dovecot/run",
            "dovecot/state",
        ] {
            std::fs::create_dir_all(dir.join(sub)).expect("mail dirs");
        }
        // Postfix's delivery, mlmmj and Dovecot's mail processes run as
        // nobody: every folder on the way must let them through.
        let mut p = dir.clone();
        while let Some(parent) = p.parent() {
            if parent == Path::new("/") || parent == Path::new("/tmp") {
                break;
            }
            use std::os::unix::fs::PermissionsExt;
            let _ = std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755));
            p = parent.to_path_buf();
        }
        let (smtp, submission, imap) = (free_port(), free_port(), free_port());
        let d = dir.display();
        let mut vmailbox = String::new();
        let mut passwords = String::new();
        for u in users {
            vmailbox += &*format!("{} {DOMAIN}/{u}/\n", address(u));
            passwords += &*format!("{}:{{PLAIN}}{}\n", address(u), password(u));
        }
        let mut transport = String::new();
        for (name, members) in lists {
            transport += &*format!("{} mlmmj:{name}\n", list(name));
            make_list(&dir.join("lists").join(name), name, members, smtp);
        }
        let w = |f: &str, s: &str| std::fs::write(dir.join(f), s).expect("mail config");
        w("postfix/vmailbox", &vmailbox);
        w("postfix/transport", &transport);
        w("dovecot/users", &passwords);
        w(
            "postfix/main.cf",
            &format!(
                "compatibility_level = 3.6
queue_directory = {d}/spool
data_directory = {d}/data
mail_owner = postfix
setgid_group = postdrop
myhostname = mail.{DOMAIN}
mydomain = {DOMAIN}
myorigin = {DOMAIN}
mydestination =
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtp_dns_support_level = disabled
virtual_mailbox_domains = {DOMAIN}
virtual_mailbox_base = {d}/mailboxes
virtual_mailbox_maps = texthash:{d}/postfix/vmailbox
virtual_uid_maps = static:65534
virtual_gid_maps = static:65534
virtual_mailbox_limit = 0
message_size_limit = 41943040
relay_domains = {LISTS}
transport_maps = texthash:{d}/postfix/transport
mlmmj_destination_recipient_limit = 1
maillog_file = /dev/stdout
smtpd_sasl_type = dovecot
smtpd_sasl_path = {d}/dovecot/run/auth-postfix
smtpd_relay_restrictions = permit_mynetworks permit_sasl_authenticated reject_unauth_destination
alias_maps =
alias_database =
biff = no
"
            ),
        );
        let extra = submission_extra.join(" ");
        w(
            "postfix/master.cf",
            &format!(
                "127.0.0.1:{smtp} inet n - n - - smtpd
127.0.0.1:{submission} inet n - n - - smtpd -o smtpd_sasl_auth_enable=yes -o smtpd_client_restrictions=permit_sasl_authenticated,reject {extra}
pickup unix n - n 60 1 pickup
cleanup unix n - n - 0 cleanup
qmgr unix n - n 300 1 qmgr
rewrite unix - - n - - trivial-rewrite
bounce unix - - n - 0 bounce
defer unix - - n - 0 bounce
trace unix - - n - 0 bounce
verify unix - - n - 1 verify
flush unix n - n 1000? 0 flush
proxymap unix - - n - - proxymap
proxywrite unix - - n - 1 proxymap
smtp unix - - n - - smtp
relay unix - - n - - smtp
showq unix n - n - - showq
error unix - - n - - error
retry unix - - n - - error
discard unix - - n - - discard
local unix - n n - - local
virtual unix - n n - - virtual
anvil unix - - n - 1 anvil
scache unix - - n - 1 scache
postlog unix-dgram n - n - 1 postlogd
mlmmj unix - n n - - pipe flags=ORhu user=nobody argv={MLMMJ_RECEIVE} -F -L {d}/lists/${{nexthop}}/
"
            ),
        );
        w(
            "dovecot/dovecot.conf",
            &format!(
                "base_dir = {d}/dovecot/run
state_dir = {d}/dovecot/state
listen = 127.0.0.1
protocols = imap
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
log_path = {d}/dovecot.log
mail_location = maildir:{d}/mailboxes/%d/%n
first_valid_uid = 65534
mail_uid = 65534
mail_gid = 65534
passdb {{
  driver = passwd-file
  args = scheme=PLAIN username_format=%u {d}/dovecot/users
}}
userdb {{
  driver = static
  args = uid=65534 gid=65534 home={d}/mailboxes/%d/%n
}}
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {imap}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service auth {{
  unix_listener auth-postfix {{
    mode = 0666
  }}
}}
service stats {{
  unix_listener stats-reader {{
    mode = 0666
  }}
  unix_listener stats-writer {{
    mode = 0666
  }}
}}
"
            ),
        );
        run(
            Command::new("chown")
                .args(["-R", "nobody:nogroup"])
                .arg(dir.join("mailboxes"))
                .arg(dir.join("lists")),
            "chown the mailboxes",
        );
        run(
            Command::new("chown").arg("postfix").arg(dir.join("data")),
            "chown postfix's data",
        );
        let mut servers = MailServers {
            dir,
            smtp,
            submission,
            imap,
            postfix: None,
            dovecot: None,
        };
        servers.start_dovecot();
        servers.start_postfix();
        servers
    }

    /// Kills Dovecot outright (SIGKILL): every IMAP connection drops.
    pub fn kill_dovecot(&mut self) {
        self.dovecot.take();
    }

    /// Starts Dovecot (again), in the foreground.
    pub fn start_dovecot(&mut self) {
        let child = Command::new(DOVECOT)
            .arg("-F")
            .arg("-c")
            .arg(self.dir.join("dovecot/dovecot.conf"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dovecot starts");
        self.dovecot = Some(Reaper(child));
        wait_listening(self.imap, "dovecot");
    }

    /// Starts Postfix in the foreground (`start-fg`), its log in
    /// `postfix.log`.
    pub fn start_postfix(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("postfix.log"))
            .expect("postfix log");
        let child = Command::new(POSTFIX)
            .arg("-c")
            .arg(self.dir.join("postfix"))
            .arg("start-fg")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("postfix starts");
        self.postfix = Some(Reaper(child));
        for (port, what) in [
            (self.smtp, "postfix"),
            (self.submission, "postfix's submission port"),
        ] {
            let deadline = Instant::now() + Duration::from_secs(30);
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(
                    Instant::now() < deadline,
                    "{what} did not listen on {port}:\n{}",
                    self.postfix_log()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// Stops Postfix (all its processes: `postfix stop`, then its master).
    pub fn stop_postfix(&mut self) {
        let _ = Command::new(POSTFIX)
            .arg("-c")
            .arg(self.dir.join("postfix"))
            .arg("stop")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        self.postfix.take();
    }

    /// `user`'s Maildir (its `new/` and `cur/` hold the mails).
    pub fn maildir(&self, user: &str) -> PathBuf {
        self.dir.join("mailboxes").join(DOMAIN).join(user)
    }

    /// Postfix's log so far.
    pub fn postfix_log(&self) -> String {
        std::fs::read_to_string(self.dir.join("postfix.log")).unwrap_or_default()
    }

    /// Waits until Postfix's log has a line `pred` holds for.
    pub fn wait_postfix_log(&self, what: &str, pred: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.postfix_log().lines().any(&pred) {
            assert!(
                Instant::now() < deadline,
                "Postfix never logged {what}:\n{}",
                self.postfix_log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether Postfix's queue is empty (every mail delivered).
    pub fn queue_empty(&self) -> bool {
        let out = Command::new("/usr/sbin/postqueue")
            .arg("-c")
            .arg(self.dir.join("postfix"))
            .arg("-j")
            .stdin(Stdio::null())
            .output();
        out.is_ok_and(|o| o.status.success() && o.stdout.iter().all(u8::is_ascii_whitespace))
    }
}

impl Drop for MailServers {
    fn drop(&mut self) {
        self.stop_postfix();
        let _ = Command::new("/usr/bin/doveadm")
            .arg("-c")
            .arg(self.dir.join("dovecot/dovecot.conf"))
            .arg("stop")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn wait_listening(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "{what} did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// An mlmmj list folder (what `mlmmj-make-ml` makes, without its
/// questions), with `List-Id` and `List-Post` as list managers add them.
fn make_list(dir: &Path, name: &str, members: &[&str], smtp: u16) {
    for sub in [
        "incoming",
        "queue",
        "queue/discarded",
        "archive",
        "text",
        "subconf",
        "unsubconf",
        "bounce",
        "control",
        "moderation",
        "subscribers.d",
        "digesters.d",
        "requeue",
        "nomailsubs.d",
    ] {
        std::fs::create_dir_all(dir.join(sub)).expect("list dirs");
    }
    let w = |f: &str, s: String| std::fs::write(dir.join(f), s).expect("list file");
    w("index", String::new());
    w("control/listaddress", format!("{}\n", list(name)));
    w("control/owner", format!("{}\n", address("owner")));
    w("control/relayhost", "127.0.0.1\n".into());
    w("control/smtpport", format!("{smtp}\n"));
    w(
        "control/customheaders",
        format!("List-Id: <{name}.{LISTS}>\nList-Post: <mailto:{}>\n", list(name)),
    );
    for m in members {
        let a = address(m);
        let file = dir.join("subscribers.d").join(&a[..1]);
        let mut s = std::fs::read_to_string(&file).unwrap_or_default();
        s += &*format!("{a}\n");
        std::fs::write(file, s).expect("subscribers");
    }
    let skel = Path::new("/usr/share/mlmmj/text.skel/en");
    if let Ok(entries) = std::fs::read_dir(skel) {
        for e in entries.flatten() {
            let _ = std::fs::copy(e.path(), dir.join("text").join(e.file_name()));
        }
    }
}

/// The people: `tests/email/people.py` spoken to in JSON lines.
pub struct People(JsonLines);

impl People {
    pub fn start(servers: &MailServers) -> People {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/email/people.py");
        let mut command = Command::new("python3");
        command
            .arg(script)
            .arg(servers.smtp.to_string())
            .arg(servers.imap.to_string());
        People(JsonLines::start("people.py", command))
    }

    pub fn call(&mut self, cmd: Value) -> Value {
        self.0.call(cmd)
    }

    /// Sends a mail (see people.py's `send`); its Message-ID.
    pub fn send(&mut self, mail: Value) -> String {
        let mut cmd = mail;
        cmd["op"] = json!("send");
        self.call(cmd).as_str().expect("a Message-ID").to_owned()
    }

    /// Every mail in `user`'s inbox.
    pub fn inbox(&mut self, user: &str) -> Vec<Value> {
        self.call(json!({"op": "inbox", "user": user}))
            .as_array()
            .expect("a list")
            .clone()
    }

    /// Polls `user`'s inbox until `done` holds (90 s at most).
    pub fn wait_inbox(&mut self, user: &str, what: &str, done: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let m = self.inbox(user);
            if done(&m) {
                return m;
            }
            assert!(Instant::now() < deadline, "{user} never got {what}: {m:#?}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}
