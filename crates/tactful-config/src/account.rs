//! Checks every platform's account tables make the same way, with the
//! same words: a password that must come from somewhere, a short display
//! name, a server that may go without TLS only on this machine.

use crate::{Checker, ConfigError, EnvString, Spanned};

/// The password of `key` (`persona[0].xmpp`), or the error that asks for
/// one, at `span` (the account's own key: the password may be missing).
pub fn password(
    value: Option<EnvString>,
    key: &str,
    span: std::ops::Range<usize>,
    check: &Checker<'_>,
) -> Result<String, ConfigError> {
    value.map(|p| p.0).filter(|p| !p.is_empty()).ok_or_else(|| {
        check.at(
            span,
            format!("`{key}` needs `password` (from the environment: \"${{VAR}}\")"),
        )
    })
}

/// A name shown to people (a nick, a From name): 1 to 64 characters, no
/// control characters (a line break would end a header or a line).
pub fn display_name(
    value: &Spanned<EnvString>,
    key: &str,
    noun: &str,
    check: &Checker<'_>,
) -> Result<String, ConfigError> {
    let name = value.get_ref().0.trim().to_owned();
    if name.is_empty() || name.chars().any(char::is_control) || name.len() > 64 {
        return Err(check.at(
            value.span(),
            format!("`{key}` = {name:?}: a {noun} is 1 to 64 characters, none of them control characters"),
        ));
    }
    Ok(name)
}

/// Whether `host` is this machine: `localhost` or a loopback address
/// (where a password may travel without TLS).
pub fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_this_machine_only() {
        for h in ["localhost", "127.0.0.1", "::1", "[::1]", "127.8.9.1"] {
            assert!(is_loopback(h), "{h}");
        }
        for h in ["example.org", "10.0.0.1", "localhost.example.org", ""] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
