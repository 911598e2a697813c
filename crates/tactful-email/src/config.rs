//! `[platforms.email]` and each persona's `email = { address, username,
//! password }`: read and checked here, with errors that name the line
//! like every config error. Personas without an `email` table have no
//! mailbox.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, account, read};

use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::rooms::is_address;
use crate::{EmailPersona, EmailSettings, Endpoint, Tls};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEmail {
    imap: Spanned<RawEndpoint>,
    smtp: Spanned<RawEndpoint>,
    #[serde(default)]
    lists: Vec<Spanned<EnvString>>,
    answer_missed_minutes: Option<u64>,
    recheck_minutes: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEndpoint {
    host: Spanned<EnvString>,
    port: Option<u16>,
    tls: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaEmail {
    address: Spanned<EnvString>,
    username: Option<EnvString>,
    password: Option<EnvString>,
    name: Option<Spanned<EnvString>>,
    signature: Option<EnvString>,
}

/// Reads one server's table: `which` is `imap` or `smtp`.
fn endpoint(
    raw: &Spanned<RawEndpoint>,
    which: &str,
    check: &Checker<'_>,
) -> Result<(Endpoint, std::ops::Range<usize>), ConfigError> {
    let e = raw.get_ref();
    let host = e.host.get_ref().0.trim().to_owned();
    if host.is_empty() || host.contains(['/', ' ', '@', ':']) && !host.starts_with('[') {
        return Err(check.at(
            e.host.span(),
            format!("`platforms.email.{which}.host` = {host:?} is not a host name: give the server's host, like \"mail.example.org\""),
        ));
    }
    let tls = match &e.tls {
        None => Tls::Required,
        Some(t) => match t.get_ref().as_str() {
            "required" => Tls::Required,
            "starttls" => Tls::StartTls,
            "none" => Tls::None,
            other => {
                return Err(check.at(
                    t.span(),
                    format!("`platforms.email.{which}.tls` = {other:?}: write \"required\" (TLS from the start), \"starttls\" or \"none\" (only to a loopback address)"),
                ));
            }
        },
    };
    let port = e.port.unwrap_or(match (which, tls) {
        ("imap", Tls::Required) => 993,
        ("imap", _) => 143,
        (_, Tls::Required) => 465,
        _ => 587,
    });
    if tls == Tls::None && !account::is_loopback(&host) {
        let span = e.tls.as_ref().map_or(raw.span(), Spanned::span);
        return Err(check.at(
            span,
            format!("`platforms.email.{which}.tls` = \"none\" sends passwords in the clear: it is allowed only to a loopback address, and the server is {host:?}"),
        ));
    }
    Ok((Endpoint { host, port, tls }, raw.span()))
}

/// Reads `[platforms.email]` and the personas' `email` sub-tables; call
/// inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<EmailSettings, ConfigError> {
    let x: RawEmail = read(section, check)?;
    let (imap, _) = endpoint(&x.imap, "imap", check)?;
    let (smtp, _) = endpoint(&x.smtp, "smtp", check)?;
    let mut lists: Vec<String> = Vec::new();
    for l in &x.lists {
        let text = l.get_ref().0.trim().to_ascii_lowercase();
        if !is_address(&text) {
            return Err(check.at(
                l.span(),
                format!("`platforms.email.lists` has {text:?}: give a list's posting address, like \"dev@lists.example.org\""),
            ));
        }
        if !lists.contains(&text) {
            lists.push(text);
        }
    }
    let recheck = match &x.recheck_minutes {
        Some(m) if *m.get_ref() == 0 => {
            return Err(check.at(
                m.span(),
                "`platforms.email.recheck_minutes` must be at least 1 (how often a mailbox is looked at without news from IDLE)",
            ));
        }
        Some(m) => Duration::from_secs(60 * m.get_ref()),
        None => Duration::from_secs(20 * 60),
    };
    let mut out: Vec<EmailPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let raw: RawPersonaEmail = read(section, check)?;
        let address = raw.address.get_ref().0.trim().to_ascii_lowercase();
        if !is_address(&address) {
            return Err(check.at(
                raw.address.span(),
                format!("`persona[{i}].email.address` = {address:?} is not an address: write it like \"docs@example.org\""),
            ));
        }
        if lists.contains(&address) {
            return Err(check.at(
                raw.address.span(),
                format!("`persona[{i}].email.address`: {address} is a list in `platforms.email.lists`; a persona needs a mailbox of its own, subscribed to the list"),
            ));
        }
        if out.iter().any(|o| o.address == address) {
            return Err(check.at(
                raw.address.span(),
                format!("`persona[{i}].email.address`: {address} is another persona's mailbox already; each persona needs its own"),
            ));
        }
        let password = account::password(
            raw.password,
            &format!("persona[{i}].email"),
            raw.address.span(),
            check,
        )?;
        let id = p.id.get_ref().as_str();
        let name = match &raw.name {
            Some(n) => account::display_name(n, &format!("persona[{i}].email.name"), "name", check)?,
            None => capitalised(id),
        };
        out.push(EmailPersona {
            id: id.into(),
            username: raw
                .username
                .map(|u| u.0.trim().to_owned())
                .filter(|u| !u.is_empty())
                .unwrap_or_else(|| address.clone()),
            address,
            name,
            password,
            signature: raw
                .signature
                .map(|s| s.0.trim_end().to_owned())
                .filter(|s| !s.trim().is_empty()),
        });
    }
    if out.is_empty() {
        return Err(check.nowhere(
            "[platforms.email] is set but no persona has a mailbox: add `email = { address = \"docs@example.org\", password = \"${DOCS_MAIL_PASSWORD}\" }` to a persona",
        ));
    }
    Ok(EmailSettings {
        imap,
        smtp,
        lists,
        answer_missed: Duration::from_secs(60 * x.answer_missed_minutes.unwrap_or(60)),
        recheck,
        personas: out,
        max_backoff: Duration::from_secs(120),
    })
}

/// `docs` → `Docs`: the name a persona without one is greeted by.
fn capitalised(id: &str) -> String {
    let mut c = id.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// The start banner's line: the servers, the lists and each mailbox.
pub(crate) fn banner(s: &EmailSettings, states: &[String]) -> String {
    let lists = if s.lists.is_empty() {
        "no lists (direct mail only)".to_owned()
    } else {
        s.lists.join(", ")
    };
    format!(
        "by email (IMAP {}, SMTP {}) on {lists} as {}",
        s.imap,
        s.smtp,
        states.join(", ")
    )
}

/// The settings' secrets, for redaction: each mailbox's password, and
/// the SASL PLAIN message carrying it as it goes on the wire (base64 of
/// `\0<username>\0<password>`), in case a library logs what it sends.
pub fn secrets(s: &EmailSettings) -> Vec<String> {
    use base64::Engine as _;
    s.personas
        .iter()
        .flat_map(|p| {
            let plain = format!("\0{}\0{}", p.username, p.password);
            [
                p.password.clone(),
                base64::engine::general_purpose::STANDARD.encode(plain),
            ]
        })
        .collect()
}

/// How many answers one persona gives on one list per hour unless the
/// list's own room table says otherwise: each reaches every subscriber.
pub const LIST_REPLIES_PER_HOUR: u32 = 4;

impl PlatformConfig for EmailSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn room_defaults(&self) -> Vec<(tactful_core::RoomId, tactful_core::PolicyPatch)> {
        let limit = tactful_core::policy::RateLimit {
            replies: LIST_REPLIES_PER_HOUR,
            per: Duration::from_secs(3600),
        };
        self.lists
            .iter()
            .map(|l| {
                let patch = tactful_core::PolicyPatch {
                    rate_limit: Some(Some(limit)),
                    ..tactful_core::PolicyPatch::default()
                };
                (crate::rooms::list_room(l), patch)
            })
            .collect()
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::EmailPlatform::new(
            self.clone(),
            cx.saved,
        )))
    }
}
