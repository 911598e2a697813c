//! `[platforms.xmpp]` and each persona's `xmpp = { jid, password, nick }`:
//! read and checked here, with errors that name the line like every
//! config error. Personas without an `xmpp` table are not on XMPP.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, account, read};
use tokio_xmpp::jid::BareJid;

use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::{Tls, XmppPersona, XmppSettings};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawXmpp {
    #[serde(default)]
    rooms: Vec<Spanned<EnvString>>,
    server: Option<Spanned<EnvString>>,
    port: Option<u16>,
    tls: Option<Spanned<String>>,
    #[serde(default)]
    invites_from: Vec<EnvString>,
    nick_retry_seconds: Option<Spanned<u64>>,
    self_ping_seconds: Option<Spanned<u64>>,
    answer_missed_minutes: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaXmpp {
    jid: Spanned<EnvString>,
    password: Option<EnvString>,
    nick: Option<Spanned<EnvString>>,
}

/// Reads `[platforms.xmpp]` and the personas' `xmpp` sub-tables; call
/// inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<XmppSettings, ConfigError> {
    let x: RawXmpp = read(section, check)?;
    let mut rooms: Vec<BareJid> = Vec::new();
    for r in &x.rooms {
        let text = r.get_ref().0.trim();
        match BareJid::new(text) {
            Ok(jid) if jid.node().is_some() && !rooms.contains(&jid) => rooms.push(jid),
            Ok(jid) if jid.node().is_some() => {}
            _ => {
                return Err(check.at(
                    r.span(),
                    format!("`platforms.xmpp.rooms` has {text:?}: give a room's JID, like \"team@conference.example.org\""),
                ));
            }
        }
    }
    let server = x
        .server
        .as_ref()
        .map(|s| (s.get_ref().0.trim().to_owned(), s.span()));
    if let Some((host, span)) = &server
        && (host.is_empty() || host.contains(['/', ' ', '@']))
    {
        return Err(check.at(
            span.clone(),
            format!("`platforms.xmpp.server` = {host:?} is not a host name: give the server's host, like \"xmpp.example.org\""),
        ));
    }
    let tls = match &x.tls {
        None => Tls::Required,
        Some(t) if t.get_ref() == "required" => Tls::Required,
        Some(t) if t.get_ref() == "none" => Tls::None,
        Some(t) => {
            return Err(check.at(
                t.span(),
                format!("`platforms.xmpp.tls` = {:?}: write \"required\" (STARTTLS) or \"none\" (only to a loopback address)", t.get_ref()),
            ));
        }
    };
    let seconds = |v: &Option<Spanned<u64>>, key: &str, default: u64, why: &str| match v {
        Some(s) if *s.get_ref() == 0 => Err(check.at(
            s.span(),
            format!("`platforms.xmpp.{key}` must be at least 1 ({why})"),
        )),
        Some(s) => Ok(Duration::from_secs(*s.get_ref())),
        None => Ok(Duration::from_secs(default)),
    };
    let nick_retry = seconds(
        &x.nick_retry_seconds,
        "nick_retry_seconds",
        30,
        "how often a persona on a fallback nick tries its own again",
    )?;
    let self_ping = seconds(
        &x.self_ping_seconds,
        "self_ping_seconds",
        120,
        "how often a persona checks it is still in each room",
    )?;
    let mut out: Vec<XmppPersona> = Vec::new();
    let mut first_span = None;
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let raw: RawPersonaXmpp = read(section, check)?;
        first_span.get_or_insert(raw.jid.span());
        let text = raw.jid.get_ref().0.trim();
        let jid = match BareJid::new(text) {
            Ok(j) if j.node().is_some() => j,
            _ => {
                return Err(check.at(
                    raw.jid.span(),
                    format!("`persona[{i}].xmpp.jid` = {text:?} is not an account's JID: write it like \"docs@example.org\" (no /resource)"),
                ));
            }
        };
        if out.iter().any(|o| o.jid == jid) {
            return Err(check.at(
                raw.jid.span(),
                format!("`persona[{i}].xmpp.jid`: {jid} is another persona's account already; each persona needs its own"),
            ));
        }
        let password = account::password(raw.password, &format!("persona[{i}].xmpp"), raw.jid.span(), check)?;
        let id = p.id.get_ref().as_str();
        let nick = match &raw.nick {
            Some(n) => account::display_name(n, &format!("persona[{i}].xmpp.nick"), "nick", check)?,
            None => id.to_owned(),
        };
        out.push(XmppPersona {
            id: id.into(),
            jid,
            password,
            nick,
        });
    }
    let Some(first_span) = first_span else {
        return Err(check.nowhere(
            "[platforms.xmpp] is set but no persona has an account: add `xmpp = { jid = \"docs@example.org\", password = \"${DOCS_XMPP_PASSWORD}\" }` to a persona",
        ));
    };
    if tls == Tls::None {
        let host = server
            .as_ref()
            .map(|(h, _)| h.clone())
            .unwrap_or_else(|| out[0].jid.domain().to_string());
        if !account::is_loopback(&host) {
            let span = x.tls.as_ref().map_or(first_span, Spanned::span);
            return Err(check.at(
                span,
                format!("`platforms.xmpp.tls` = \"none\" sends passwords in the clear: it is allowed only to a loopback address, and the server is {host:?}"),
            ));
        }
    }
    Ok(XmppSettings {
        rooms,
        port: x.port.unwrap_or(5222),
        server: server.map(|(h, _)| h),
        tls,
        invites_from: x
            .invites_from
            .into_iter()
            .map(|v| v.0.trim().to_owned())
            .filter(|v| !v.is_empty())
            .collect(),
        nick_retry,
        self_ping,
        answer_missed: Duration::from_secs(60 * x.answer_missed_minutes.unwrap_or(60)),
        personas: out,
        max_backoff: Duration::from_secs(60),
    })
}

/// The start banner's line: where, which rooms, and each persona's nick
/// (`nicks` as connected, or as configured).
pub(crate) fn banner(s: &XmppSettings, nicks: &[String]) -> String {
    let at = match &s.server {
        Some(h) => format!("{h}:{}", s.port),
        None => s
            .personas
            .first()
            .map(|p| p.jid.domain().to_string())
            .unwrap_or_default(),
    };
    let rooms: Vec<String> = s.rooms.iter().map(ToString::to_string).collect();
    let rooms = if rooms.is_empty() {
        "no rooms (one-to-one chats only)".to_owned()
    } else {
        rooms.join(", ")
    };
    format!("on XMPP at {at} in {rooms} as {}", nicks.join(", "))
}

/// The settings' secrets, for redaction: each account's password, and
/// its SASL PLAIN message as it goes on the wire (base64 of
/// `\0<localpart>\0<password>`), which `tokio-xmpp` logs with everything
/// it sends at TRACE.
pub fn secrets(s: &XmppSettings) -> Vec<String> {
    use base64::Engine as _;
    s.personas
        .iter()
        .flat_map(|p| {
            let node = p.jid.node().map(|n| n.to_string()).unwrap_or_default();
            let plain = format!("\0{node}\0{}", p.password);
            [
                p.password.clone(),
                base64::engine::general_purpose::STANDARD.encode(plain),
            ]
        })
        .collect()
}

impl PlatformConfig for XmppSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::XmppPlatform::new(
            self.clone(),
            cx.saved,
        )))
    }
}
