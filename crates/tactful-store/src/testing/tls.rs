//! A private PostgreSQL server that speaks TLS only, with certificates made
//! for it: what a hosted database looks like, for tests of `sslmode`.
//!
//! It is Debian's `postgresql` (the server `scripts/test` installs when
//! none answers), started with `initdb` and `pg_ctl` in a folder of its
//! own on a free port, and stopped and removed at drop. Its `pg_hba.conf`
//! refuses every connection without TLS, trusts user `postgres` over
//! TLS, and lets user `certuser` in only with a client certificate signed
//! by the test authority; its certificate names `db.test` and
//! 127.0.0.1. As root (the server refuses to run as root), it runs as
//! user `postgres`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, SanType};

/// The running server; stopped and removed at drop.
#[derive(Debug)]
pub struct TlsServer {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The folder of its data and of the files below.
    dir: PathBuf,
    bin: PathBuf,
    /// Whether it runs as user `postgres` (we are root).
    as_postgres: bool,
}

/// Files a client may be given: the authority that signed the server's
/// and the client's certificates, the client's certificate and key, and
/// an authority that signed nothing here.
#[derive(Debug)]
pub struct ClientFiles {
    /// The test authority (PEM).
    pub ca: PathBuf,
    /// `certuser`'s certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// An authority that signed nothing here (PEM).
    pub stranger_ca: PathBuf,
}

impl TlsServer {
    /// Starts one, or `None` when this machine has no PostgreSQL server
    /// programs (a panic instead under `TACTFUL_REQUIRE_PEERS`).
    pub fn start() -> Option<(TlsServer, ClientFiles)> {
        let Some(bin) = server_bin() else {
            assert!(
                std::env::var_os("TACTFUL_REQUIRE_PEERS").is_none(),
                "PostgreSQL's server programs are needed (/usr/lib/postgresql/*/bin): scripts/test installs them"
            );
            eprintln!("skipped: no PostgreSQL server programs in /usr/lib/postgresql");
            return None;
        };
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!(
            "tactful-tls-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("the server's folder");
        let server = TlsServer {
            port: free_port(),
            dir,
            bin,
            as_postgres,
        };
        let files = server.make_certificates();
        server.set_up();
        Some((server, files))
    }

    /// A URL for `user` at `host` (an address or a name that resolves to
    /// 127.0.0.1), with `params` after it.
    pub fn url(&self, user: &str, host: &str, params: &str) -> String {
        format!("postgres://{user}@{host}:{}/postgres?{params}", self.port)
    }

    fn make_certificates(&self) -> ClientFiles {
        let authority = |name: &str| {
            let key = KeyPair::generate().expect("a key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.distinguished_name.push(DnType::CommonName, name);
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            let cert = params.self_signed(&key).expect("the authority");
            (cert, Issuer::new(params, key))
        };
        let (ca, issuer) = authority("tactful test authority");
        let (stranger, _) = authority("nobody's authority");
        let leaf = |cn: &str, sans: Vec<SanType>| {
            let key = KeyPair::generate().expect("a key");
            let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
            params.distinguished_name.push(DnType::CommonName, cn);
            params.subject_alt_names = sans;
            let cert = params.signed_by(&key, &issuer).expect("a certificate");
            (cert.pem(), key.serialize_pem())
        };
        let (server_cert, server_key) = leaf(
            "db.test",
            vec![
                SanType::DnsName("db.test".try_into().expect("a name")),
                SanType::IpAddress([127, 0, 0, 1].into()),
            ],
        );
        let (client_cert, client_key) = leaf("certuser", Vec::new());
        let write = |name: &str, text: &str| {
            let path = self.dir.join(name);
            std::fs::write(&path, text).expect("a certificate file");
            path
        };
        write("server.crt", &server_cert);
        write("server.key", &server_key);
        ClientFiles {
            ca: write("ca.pem", &ca.pem()),
            cert: write("client.crt", &client_cert),
            key: write("client.key", &client_key),
            stranger_ca: write("stranger.pem", &stranger.pem()),
        }
    }

    fn set_up(&self) {
        let data = self.dir.join("data");
        let d = self.dir.display();
        // The server reads its key only when only its owner can.
        chmod(&self.dir.join("server.key"), 0o600);
        if self.as_postgres {
            chmod(&self.dir, 0o755);
            self.run(Command::new("chown").args(["-R", "postgres"]).arg(&self.dir));
        }
        self.run(self.server(&self.bin.join("initdb")).arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        ]));
        let conf = format!(
            "\nport = {}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{d}'\n\
             ssl = on\nssl_cert_file = '{d}/server.crt'\nssl_key_file = '{d}/server.key'\n\
             ssl_ca_file = '{d}/ca.pem'\nfsync = off\n",
            self.port
        );
        append(&data.join("postgresql.conf"), &conf);
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostnossl all all 127.0.0.1/32 reject\n\
             hostssl all certuser 127.0.0.1/32 cert\n\
             hostssl all all 127.0.0.1/32 trust\n",
        )
        .expect("pg_hba.conf");
        self.run(
            self.server(&self.bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(self.dir.join("server.log"))
                .args(["-w", "-s", "start"]),
        );
        self.run(
            self.server(&self.bin.join("psql"))
                .args([
                    "-h",
                    &d.to_string(),
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-q",
                    "-c",
                ])
                .arg("CREATE ROLE certuser LOGIN SUPERUSER"),
        );
    }

    /// `program` run as the server's user.
    fn server(&self, program: &Path) -> Command {
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    }

    fn run(&self, command: &mut Command) {
        let out = command.output().expect("a server program starts");
        assert!(
            out.status.success(),
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self
            .server(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "-w", "-s", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest `/usr/lib/postgresql/N/bin` with `initdb` in it.
fn server_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .expect("postgresql.conf");
}
