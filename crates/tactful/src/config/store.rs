//! `[store]`: where state is kept. A `path` (or nothing) is the SQLite
//! file, the default; a `url` is a PostgreSQL database, for several tactful
//! processes on one database. One or the other, never both.

use std::path::Path;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString};
use tactful_store::Location;
use toml::Spanned;

/// `[store]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStore {
    path: Option<Spanned<EnvString>>,
    url: Option<Spanned<EnvString>>,
}

/// The store `raw` names; relative paths are read from `folder` (the
/// config's), and nothing at all is `tactful.db` there.
pub(super) fn location(
    check: &Checker<'_>,
    raw: Option<&RawStore>,
    folder: &Path,
) -> Result<Location, ConfigError> {
    let (path, url) = match raw {
        Some(r) => (r.path.as_ref(), r.url.as_ref()),
        None => (None, None),
    };
    match (path, url) {
        (Some(_), Some(u)) => Err(check.at(
            u.span(),
            "`store.path` and `store.url` are both set: keep `path` for a SQLite file, or `url` for PostgreSQL",
        )),
        (None, Some(u)) => {
            let text = &u.get_ref().0;
            if text.trim().is_empty() {
                return Err(check.at(
                    u.span(),
                    "`store.url` is empty: write postgres://USER:PASSWORD@HOST:PORT/DATABASE, or remove it to keep a SQLite file",
                ));
            }
            Location::postgres(text).map_err(|e| check.at(u.span(), format!("`store.url`: {e}")))
        }
        (Some(p), None) if p.get_ref().0.trim().is_empty() => Err(check.at(
            p.span(),
            "`store.path` is empty: name a file, or \":memory:\" to keep nothing",
        )),
        (Some(p), None) if p.get_ref().0 == ":memory:" => Ok(Location::Memory),
        (Some(p), None) => Ok(Location::File(folder.join(&p.get_ref().0))),
        (None, None) => Ok(Location::File(folder.join("tactful.db"))),
    }
}
