//! Where the state is kept, as the config names it: a SQLite file (the
//! default), `:memory:` (nothing kept), or a PostgreSQL URL.
//!
//! A URL may carry a password, and a location is printed in banners,
//! errors and `check`: its `Display` never shows the password.

use std::path::{Path, PathBuf};

/// Where the state is kept.
#[derive(Clone, PartialEq, Eq)]
pub enum Location {
    /// Nothing is kept: a private in-memory SQLite store.
    Memory,
    /// A SQLite file.
    File(PathBuf),
    /// A PostgreSQL database (`postgres://…`).
    Postgres(String),
}

/// Why a store URL cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadUrl(String);

impl Location {
    /// The SQLite file at `path`, or nothing kept for `:memory:`.
    pub fn from_path(path: &Path) -> Location {
        if path.as_os_str() == ":memory:" {
            Location::Memory
        } else {
            Location::File(path.to_owned())
        }
    }

    /// A PostgreSQL database, checked as far as it can be without
    /// connecting: the scheme, and what the driver can read of the rest.
    pub fn postgres(url: &str) -> Result<Location, BadUrl> {
        let url = url.trim();
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(BadUrl(format!(
                "`{}` is not a PostgreSQL URL: write postgres://USER:PASSWORD@HOST:PORT/DATABASE (or use `store.path` for a SQLite file)",
                masked(url)
            )));
        }
        let (rest, tls) = crate::postgres::tls::split(url)
            .map_err(|e| BadUrl(format!("`{}` cannot be used: {e}", masked(url))))?;
        rest.parse::<tokio_postgres::Config>()
            .map_err(|e| BadUrl(format!("`{}` cannot be read: {e}", masked(url))))?;
        // The certificate files are read now: a wrong path is the
        // config's error, not the first connection's.
        tls.connector()
            .map_err(|e| BadUrl(format!("`{}` cannot be used: {e}", masked(url))))?;
        Ok(Location::Postgres(url.to_owned()))
    }

    /// How a database is reached, in a few words (see `sslmode`): "not
    /// encrypted", or what TLS verifies.
    pub fn transport(&self) -> Option<&'static str> {
        let Location::Postgres(url) = self else {
            return None;
        };
        crate::postgres::tls::split(url)
            .ok()
            .map(|(_, tls)| tls.describe())
    }

    /// The host of a database reached without TLS over the network (not
    /// this machine's loopback or a Unix socket): traffic anyone on the
    /// way can read, worth a warning.
    pub fn unencrypted_host(&self) -> Option<String> {
        use tokio_postgres::config::Host;
        let Location::Postgres(url) = self else {
            return None;
        };
        let (config, tls) = read(url)?;
        if tls.verify != crate::postgres::tls::Verify::Off {
            return None;
        }
        config.get_hosts().iter().find_map(|h| match h {
            Host::Tcp(name) => {
                let local = name == "localhost"
                    || name
                        .trim_matches(['[', ']'])
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.is_loopback());
                (!local).then(|| name.clone())
            }
            Host::Unix(_) => None,
        })
    }

    /// Whether anything is kept (every location but `:memory:`).
    pub fn is_kept(&self) -> bool {
        !matches!(self, Location::Memory)
    }

    /// The password a URL carries, so it can be masked wherever an error
    /// might echo it.
    pub fn password(&self) -> Option<String> {
        let Location::Postgres(url) = self else {
            return None;
        };
        let (config, _) = read(url)?;
        config
            .get_password()
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .filter(|p| !p.is_empty())
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Memory => f.write_str(":memory:"),
            Location::File(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => f.write_str(&masked(url)),
        }
    }
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Location({self})")
    }
}

/// What the driver reads of a URL `Location::postgres` accepted, and its
/// TLS settings.
fn read(url: &str) -> Option<(tokio_postgres::Config, crate::postgres::tls::Settings)> {
    let (rest, tls) = crate::postgres::tls::split(url).ok()?;
    Some((rest.parse().ok()?, tls))
}

/// `url` with its password (in the user part, or a `password=` parameter)
/// replaced by `…`.
pub(crate) fn masked(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:…@{host}"),
            None => authority.to_owned(),
        },
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    // `password`, and `sslpassword` (a key's passphrase).
                    Some((k, _)) if k.to_ascii_lowercase().contains("password") => format!("{k}=…"),
                    _ => kv.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_shown_without_its_password() {
        let at = Location::postgres(
            "postgres://tactful:s3cr%40t@db.internal:5432/chat?password=other&sslmode=disable",
        )
        .expect("valid");
        let shown = at.to_string();
        assert_eq!(
            shown,
            "postgres://tactful:…@db.internal:5432/chat?password=…&sslmode=disable"
        );
        assert!(!format!("{at:?}").contains("s3cr"));
        let at = Location::postgres("postgres://tactful:s3cr%40t@db.internal/chat").expect("valid");
        assert_eq!(at.password().as_deref(), Some("s3cr@t"), "as the server gets it");
        assert_eq!(
            masked("postgresql://me@host/db"),
            "postgresql://me@host/db",
            "nothing to hide"
        );
        // A key's passphrase (libpq's `sslpassword`, which tactful does
        // not read) is hidden in the error that says so.
        let err =
            Location::postgres("postgres://db/x?sslmode=require&sslpassword=k3y-phrase").expect_err("unread");
        assert!(err.to_string().contains("sslpassword=…"), "{err}");
        assert!(!err.to_string().contains("k3y-phrase"), "{err}");
    }

    #[test]
    fn what_is_not_a_postgres_url_says_what_to_write() {
        let err = Location::postgres("mysql://root:hunter2@db/chat").expect_err("refused");
        assert!(err.to_string().contains("postgres://USER:PASSWORD@HOST"), "{err}");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = Location::postgres("postgres://me:hunter2@db:notaport/chat").expect_err("refused");
        assert!(!err.to_string().contains("hunter2"), "{err}");
        assert_eq!(Location::from_path(Path::new(":memory:")), Location::Memory);
        assert!(!Location::Memory.is_kept());
    }
}
