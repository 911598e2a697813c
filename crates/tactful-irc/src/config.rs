//! `[platforms.irc]` and each persona's `irc = { nick, password }`: read
//! and checked here, where IRC is understood, with errors that name the
//! line like every config error.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};

use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::{IrcPersona, IrcSettings};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIrc {
    server: Spanned<EnvString>,
    port: Option<u16>,
    #[serde(default)]
    tls: bool,
    channels: Vec<Spanned<EnvString>>,
    send_interval_ms: Option<u64>,
    nick_retry_seconds: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaIrc {
    nick: Option<Spanned<EnvString>>,
    password: Option<EnvString>,
}

/// Reads `[platforms.irc]` and every persona's `irc` sub-table. Every
/// persona joins (its nick defaults to its id); call inside
/// [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<IrcSettings, ConfigError> {
    let irc: RawIrc = read(section, check)?;
    let server = irc.server.get_ref().0.trim().to_owned();
    if server.is_empty() {
        return Err(check.at(
            irc.server.span(),
            "`platforms.irc.server` is empty: name the IRC server's host",
        ));
    }
    let mut channels = Vec::new();
    for c in &irc.channels {
        let name = c.get_ref().0.trim();
        if !name.starts_with(['#', '&']) || name.len() < 2 || name.contains([' ', ',', '\u{7}']) {
            return Err(check.at(
                c.span(),
                format!("`platforms.irc.channels` has {name:?}: a channel name starts with # or & and has no spaces or commas"),
            ));
        }
        channels.push(name.to_owned());
    }
    let nick_retry = match &irc.nick_retry_seconds {
        Some(s) if *s.get_ref() == 0 => {
            return Err(check.at(
                s.span(),
                "`platforms.irc.nick_retry_seconds` must be at least 1 (how often a persona on a fallback nick asks whether its own is free)",
            ));
        }
        Some(s) => Duration::from_secs(*s.get_ref()),
        None => Duration::from_secs(30),
    };
    let mut out = Vec::new();
    for p in personas {
        let i = p.index;
        let id = p.id.get_ref().as_str();
        let settings: Option<RawPersonaIrc> = p.section.map(|s| read(s, check)).transpose()?;
        let nick = match settings.as_ref().and_then(|s| s.nick.as_ref()) {
            Some(n) => {
                let nick = n.get_ref().0.clone();
                if !is_valid_nick(&nick) {
                    return Err(check.at(
                        n.span(),
                        format!("`persona[{i}].irc.nick` = {nick:?} is not an IRC nick: start with a letter or one of []\\`^{{}}|_, then letters, digits, - or those, at most 30"),
                    ));
                }
                nick
            }
            None if is_valid_nick(id) => id.to_owned(),
            None => {
                return Err(check.at(
                    p.id.span(),
                    format!("persona {id:?} cannot be an IRC nick as it is: set `irc = {{ nick = \"...\" }}` on it"),
                ));
            }
        };
        out.push(IrcPersona {
            id: id.into(),
            nick,
            password: settings
                .and_then(|s| s.password)
                .map(|p| p.0)
                .filter(|p| !p.is_empty()),
        });
    }
    Ok(IrcSettings {
        server,
        port: irc.port.unwrap_or(if irc.tls { 6697 } else { 6667 }),
        tls: irc.tls,
        channels,
        send_interval: Duration::from_millis(irc.send_interval_ms.unwrap_or(700)),
        personas: out,
        max_backoff: Duration::from_secs(60),
        nick_retry,
    })
}

/// An IRC nick: a letter or special first, then letters, digits, `-` and
/// specials; 30 characters at most (most networks allow that many).
fn is_valid_nick(nick: &str) -> bool {
    let special = |c: char| "[]\\`^{}|_".contains(c);
    let mut chars = nick.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || special(c))
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || special(c))
        && nick.len() <= 30
}

/// The banner line naming `nicks` (configured, or as connected).
pub(crate) fn banner(s: &IrcSettings, nicks: &[impl AsRef<str>]) -> String {
    let nicks: Vec<&str> = nicks.iter().map(AsRef::as_ref).collect();
    format!(
        "on IRC at {}:{} in {} as {}",
        s.server,
        s.port,
        s.channels.join(", "),
        nicks.join(", ")
    )
}

/// The settings' secrets (NickServ passwords), for redaction.
pub fn secrets(s: &IrcSettings) -> Vec<String> {
    s.personas.iter().filter_map(|p| p.password.clone()).collect()
}

impl PlatformConfig for IrcSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, _: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::IrcPlatform::new(self.clone())))
    }
}
