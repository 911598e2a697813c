//! `[platforms.discord]` and each persona's `discord = { token }`: read and
//! checked here, with errors that name the line like every config error.
//! Personas without a `discord` table are not on Discord.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};
use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::{DiscordPersona, DiscordSettings, Pings};

/// Discord's REST API, unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://discord.com";

/// Discord's gateway, unless told otherwise.
pub const DEFAULT_GATEWAY_URL: &str = "wss://gateway.discord.gg";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDiscord {
    api_url: Option<Spanned<EnvString>>,
    gateway_url: Option<Spanned<EnvString>>,
    #[serde(default)]
    everyone_addresses: bool,
    #[serde(default)]
    allowed_mentions: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaDiscord {
    token: Spanned<EnvString>,
}

fn url(
    value: &Option<Spanned<EnvString>>,
    key: &str,
    default: &str,
    schemes: &[&str],
    check: &Checker<'_>,
) -> Result<String, ConfigError> {
    let Some(v) = value else {
        return Ok(default.to_owned());
    };
    let url = v.get_ref().0.trim().trim_end_matches('/').to_owned();
    let ok = schemes.iter().any(|s| url.starts_with(s)) && url::Url::parse(&url).is_ok();
    if !ok {
        return Err(check.at(
            v.span(),
            format!(
                "`platforms.discord.{key}` = {url:?} must be a URL starting with {} (default \"{default}\")",
                schemes.join(" or ")
            ),
        ));
    }
    Ok(url)
}

/// `gateway_url` as twilight wants it: it appends `/?v=10&encoding=json`
/// itself, so the form Discord's docs show (`wss://…/?v=10&encoding=json`)
/// loses that query; any other query cannot be passed on, and is refused.
pub fn without_gateway_query(gateway_url: &str) -> Result<String, String> {
    let Ok(mut url) = url::Url::parse(gateway_url) else {
        return Ok(gateway_url.to_owned());
    };
    if url.query().is_none() && url.fragment().is_none() {
        return Ok(gateway_url.trim_end_matches('/').to_owned());
    }
    let known = url.query_pairs().all(|(k, v)| match k.as_ref() {
        "v" => v == "10",
        "encoding" => v == "json",
        _ => false,
    });
    if !known || url.fragment().is_some() {
        return Err(format!(
            "`platforms.discord.gateway_url` = {gateway_url:?} has a query tactful cannot pass on: give the URL without it (tactful asks for `?v=10&encoding=json` itself)"
        ));
    }
    url.set_query(None);
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// Reads `[platforms.discord]` and the personas' `discord` sub-tables;
/// call inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<DiscordSettings, ConfigError> {
    let span = section.span();
    let d: RawDiscord = read(section, check)?;
    let api_url = url(
        &d.api_url,
        "api_url",
        DEFAULT_API_URL,
        &["https://", "http://"],
        check,
    )?;
    let gateway_url = url(
        &d.gateway_url,
        "gateway_url",
        DEFAULT_GATEWAY_URL,
        &["wss://", "ws://"],
        check,
    )?;
    let gateway_url = match &d.gateway_url {
        Some(v) => without_gateway_query(&gateway_url).map_err(|why| check.at(v.span(), why))?,
        None => gateway_url,
    };
    if let Some(v) = &d.api_url
        && url::Url::parse(&api_url).is_ok_and(|u| u.query().is_some() || u.fragment().is_some())
    {
        return Err(check.at(
            v.span(),
            format!("`platforms.discord.api_url` = {api_url:?} has a query or fragment, which requests cannot carry: give the base only (a path is fine)"),
        ));
    }
    let mut pings = Pings::default();
    for m in &d.allowed_mentions {
        match m.get_ref().as_str() {
            "users" => pings.users = true,
            "roles" => pings.roles = true,
            "everyone" => pings.everyone = true,
            other => {
                return Err(check.at(
                    m.span(),
                    format!("`platforms.discord.allowed_mentions` has {other:?}: use \"users\", \"roles\" or \"everyone\" (default: none, so an agent's output pings nobody)"),
                ));
            }
        }
    }
    let mut out: Vec<DiscordPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let pd: RawPersonaDiscord = read(section, check)?;
        let token = pd.token.get_ref().0.trim().trim_start_matches("Bot ").to_owned();
        // Three dot-separated parts, the first the bot's id in base64.
        let parts: Vec<&str> = token.split('.').collect();
        if parts.len() != 3 || parts.iter().any(|p| p.is_empty()) || token.contains(char::is_whitespace) {
            return Err(check.at(
                pd.token.span(),
                format!("`persona[{i}].discord.token` is not a bot token (the Bot page of your application in the Developer Portal shows one: three parts separated by dots); keep it out of the file: token = \"${{DOCS_DISCORD_TOKEN}}\""),
            ));
        }
        if out.iter().any(|o| o.token == token) {
            return Err(check.at(
                pd.token.span(),
                format!("`persona[{i}].discord.token` is another persona's bot already: each persona needs an application of its own"),
            ));
        }
        out.push(DiscordPersona {
            id: p.id.get_ref().as_str().into(),
            token,
        });
    }
    if out.is_empty() {
        return Err(check.at(
            span,
            "[platforms.discord] is set but no persona has a bot: add `discord = { token = \"${DOCS_DISCORD_TOKEN}\" }` to a persona",
        ));
    }
    Ok(DiscordSettings {
        api_url,
        gateway_url,
        everyone_addresses: d.everyone_addresses,
        pings,
        personas: out,
        max_backoff: Duration::from_secs(60),
    })
}

/// The settings' secrets (bot tokens), for redaction.
pub fn secrets(s: &DiscordSettings) -> Vec<String> {
    s.personas.iter().map(|p| p.token.clone()).collect()
}

impl PlatformConfig for DiscordSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, _: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::DiscordPlatform::new(self.clone())?))
    }
}
