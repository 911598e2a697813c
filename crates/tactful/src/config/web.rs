//! `[platforms.web]`: the built-in web room's table, read and checked.

use tactful_config::{Checker, ConfigError, EnvString};
use toml::Spanned;

use super::at_least;

/// The most examples an empty room's introduction offers.
const MAX_EXAMPLES: usize = 6;
/// The longest example, in characters.
const MAX_EXAMPLE_CHARS: usize = 200;

/// `[platforms.web]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSettings {
    /// `listen`, default `127.0.0.1:7878`.
    pub listen: std::net::SocketAddr,
    /// `auth_token`; required when `listen` is not loopback.
    pub auth_token: Option<String>,
    /// `history`: messages kept per room, default 500.
    pub history: usize,
    /// `allowed_origins`: page origins that may connect; default the listen
    /// address and its `localhost` / `127.0.0.1` forms.
    pub allowed_origins: Option<Vec<String>>,
    /// `max_rooms_per_connection`, default 20.
    pub max_rooms_per_connection: usize,
    /// `show_decisions`: everyone sees why each persona answered or not;
    /// default on for a loopback `listen`, off otherwise.
    pub show_decisions: bool,
    /// `examples`: messages a newcomer can click in an empty room's
    /// introduction; default one `@Name hello` per persona that answers
    /// mentions there.
    pub examples: Vec<String>,
    /// Not a config key: `tactful demo` sets it to serve the operator
    /// console at `/console` on the room's own listener, behind the room's
    /// token.
    pub console: bool,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWeb {
    listen: Option<Spanned<EnvString>>,
    auth_token: Option<Spanned<EnvString>>,
    history: Option<Spanned<usize>>,
    allowed_origins: Option<Vec<Spanned<EnvString>>>,
    max_rooms_per_connection: Option<Spanned<usize>>,
    show_decisions: Option<bool>,
    examples: Option<Vec<Spanned<EnvString>>>,
}

/// `[platforms.web]`.
pub(super) fn web_settings(web: RawWeb, check: &Checker<'_>) -> Result<WebSettings, ConfigError> {
    let listen = match &web.listen {
        Some(l) => l.get_ref().0.parse().map_err(|_| {
            check.at(
                l.span(),
                "`platforms.web.listen` must be an address and port, like \"127.0.0.1:7878\"",
            )
        })?,
        None => std::net::SocketAddr::from(([127, 0, 0, 1], 7878)),
    };
    let auth_token = match &web.auth_token {
        Some(t) if t.get_ref().0.trim().is_empty() => {
            return Err(check.at(
                t.span(),
                "`platforms.web.auth_token` is blank (an unset variable?): set a real token, or remove the key on loopback",
            ));
        }
        Some(t) => Some(t.get_ref().0.clone()),
        None => None,
    };
    if !listen.ip().is_loopback() && auth_token.is_none() {
        let span = web.listen.as_ref().map(|l| l.span()).unwrap_or(0..0);
        return Err(check.at(
            span,
            format!("`platforms.web.listen` = {listen} is reachable from other machines: set `platforms.web.auth_token`"),
        ));
    }
    let history = match &web.history {
        Some(h) => at_least(h, 1, "platforms.web.history", check)?,
        None => 500,
    };
    let allowed_origins = match &web.allowed_origins {
        Some(list) => {
            let mut origins = Vec::new();
            for o in list {
                let value = o.get_ref().0.trim();
                if tactful_web::access::normalise(value).is_none() || value.contains('*') {
                    return Err(check.at(
                        o.span(),
                        format!("`platforms.web.allowed_origins`: {value:?} is not an origin like \"https://chat.example.com\""),
                    ));
                }
                origins.push(value.to_owned());
            }
            Some(origins)
        }
        None => None,
    };
    let max_rooms_per_connection = match &web.max_rooms_per_connection {
        Some(v) => at_least(v, 1, "platforms.web.max_rooms_per_connection", check)?,
        None => 20,
    };
    let mut examples = Vec::new();
    for e in web.examples.iter().flatten() {
        let text = e.get_ref().0.trim();
        let chars = text.chars().count();
        if chars == 0 || chars > MAX_EXAMPLE_CHARS || text.contains('\n') {
            return Err(check.at(
                e.span(),
                format!("`platforms.web.examples`: each example is one line of 1 to {MAX_EXAMPLE_CHARS} characters"),
            ));
        }
        examples.push(text.to_owned());
    }
    if examples.len() > MAX_EXAMPLES {
        return Err(check.at(
            web.examples
                .as_ref()
                .and_then(|l| l.get(MAX_EXAMPLES))
                .map_or(0..0, |e| e.span()),
            format!("`platforms.web.examples`: at most {MAX_EXAMPLES} (the introduction is a few lines)"),
        ));
    }
    Ok(WebSettings {
        listen,
        auth_token,
        history,
        allowed_origins,
        max_rooms_per_connection,
        // It shows how the room is set up: on where only this machine
        // connects, off where others may, unless said otherwise.
        show_decisions: web.show_decisions.unwrap_or(listen.ip().is_loopback()),
        examples,
        console: false,
    })
}
