//! Who may open the room's WebSocket.
//!
//! A browser attaches the page's origin to every WebSocket handshake, and
//! any page the operator visits can try one to `ws://127.0.0.1:7878/ws`:
//! without a check, a stranger's site could read every room and speak to
//! the agents (which may hold tool permissions). So a handshake with an
//! `Origin` is taken only from the room's own origins: the listen address
//! and its `localhost` / `127.0.0.1` / `[::1]` forms, or exactly the
//! configured `allowed_origins`. A handshake without one comes from a
//! program, not a page; it is taken only when a token is set (and given).
//! Tokens are compared in constant time.

use axum::http::{HeaderMap, StatusCode, Uri, header};
use subtle::ConstantTimeEq;

/// The origins and token a handshake is checked against.
#[derive(Clone, Debug)]
pub struct Access {
    origins: Vec<String>,
    token: Option<String>,
}

impl Access {
    /// Access for a room bound to `addr`: `allowed` origins when configured,
    /// else the address's own forms.
    pub fn new(addr: std::net::SocketAddr, allowed: Option<&[String]>, token: Option<String>) -> Access {
        let origins = match allowed {
            Some(list) => list.iter().filter_map(|o| normalise(o)).collect(),
            None => {
                let port = addr.port();
                let ip = match addr.ip() {
                    std::net::IpAddr::V6(v6) => format!("[{v6}]"),
                    v4 => v4.to_string(),
                };
                [
                    ip,
                    "localhost".to_owned(),
                    "127.0.0.1".to_owned(),
                    "[::1]".to_owned(),
                ]
                .into_iter()
                .map(|host| format!("http://{host}:{port}"))
                .collect()
            }
        };
        Access { origins, token }
    }

    /// The origins taken, normalised.
    pub fn origins(&self) -> &[String] {
        &self.origins
    }

    /// Checks a handshake's headers and `?token=`; the refusal to send
    /// otherwise.
    pub fn check(&self, headers: &HeaderMap, query_token: Option<&str>) -> Result<(), (StatusCode, String)> {
        match headers
            .get(header::ORIGIN)
            .map(|o| o.to_str().ok().and_then(normalise))
        {
            Some(Some(origin)) if self.origins.contains(&origin) => {}
            Some(origin) => {
                let shown = origin.unwrap_or_else(|| "(unreadable)".to_owned());
                tracing::warn!(origin = %shown, "refused a WebSocket from another site's page");
                return Err((
                    StatusCode::FORBIDDEN,
                    format!("origin {shown} is not allowed here (platforms.web.allowed_origins)"),
                ));
            }
            None if self.token.is_none() => {
                return Err((
                    StatusCode::FORBIDDEN,
                    "a browser origin or a token is required (set platforms.web.auth_token for programs)"
                        .to_owned(),
                ));
            }
            None => {}
        }
        if let Some(required) = &self.token {
            let bearer = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "));
            let given = query_token.or(bearer).unwrap_or("");
            if !bool::from(given.as_bytes().ct_eq(required.as_bytes())) {
                return Err((StatusCode::UNAUTHORIZED, "a valid token is required".to_owned()));
            }
        }
        Ok(())
    }
}

/// `scheme://host:port` in lower case with the port spelled out, or `None`
/// when `origin` is not one (`null`, say).
pub fn normalise(origin: &str) -> Option<String> {
    let uri: Uri = origin.trim().parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let host = uri.host()?.to_ascii_lowercase();
    let port = uri.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })?;
    Some(format!("{scheme}://{host}:{port}"))
}

/// A fresh secret: 128 bits from the OS, as hex. For a name's key (a
/// person's other tabs keep their name with it) and a token made up for a
/// room served off loopback. An error when the OS has no randomness to give.
pub fn new_secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(origin: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(o) = origin {
            h.insert(header::ORIGIN, o.parse().expect("header"));
        }
        h
    }

    #[test]
    fn the_rooms_own_origins_pass_and_others_do_not() {
        let a = Access::new("127.0.0.1:7878".parse().expect("addr"), None, None);
        for ok in [
            "http://127.0.0.1:7878",
            "http://localhost:7878",
            "HTTP://LOCALHOST:7878",
            "http://[::1]:7878",
        ] {
            assert!(a.check(&headers(Some(ok)), None).is_ok(), "{ok}");
        }
        for bad in [
            "https://evil.example",
            "http://localhost:7879",
            "http://evil.example:7878",
            "null",
            "http://127.0.0.1.evil.example:7878",
        ] {
            assert_eq!(
                a.check(&headers(Some(bad)), None).map_err(|e| e.0),
                Err(StatusCode::FORBIDDEN),
                "{bad}"
            );
        }
        assert_eq!(
            a.check(&headers(None), None).map_err(|e| e.0),
            Err(StatusCode::FORBIDDEN),
            "no origin and no token: refused"
        );
    }

    #[test]
    fn programs_without_an_origin_need_the_token() {
        let a = Access::new("0.0.0.0:80".parse().expect("addr"), None, Some("s3cret".into()));
        assert!(a.check(&headers(None), Some("s3cret")).is_ok());
        let mut bearer = headers(None);
        bearer.insert(header::AUTHORIZATION, "Bearer s3cret".parse().expect("header"));
        assert!(a.check(&bearer, None).is_ok());
        assert_eq!(
            a.check(&headers(None), Some("s3cre")).map_err(|e| e.0),
            Err(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(
            a.check(&headers(None), None).map_err(|e| e.0),
            Err(StatusCode::UNAUTHORIZED)
        );
    }

    #[test]
    fn configured_origins_replace_the_defaults() {
        let allowed = vec!["https://chat.example.com".to_owned()];
        let a = Access::new("127.0.0.1:7878".parse().expect("addr"), Some(&allowed), None);
        assert!(
            a.check(&headers(Some("https://chat.example.com:443")), None)
                .is_ok()
        );
        assert!(a.check(&headers(Some("http://127.0.0.1:7878")), None).is_err());
    }
}
