//! `[platforms.zulip]` and each persona's `zulip = { email, api_key }`:
//! read and checked here, with errors that name the line like every config
//! error. Personas without a `zulip` table are not on Zulip.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};
use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::settings::{ZulipPersona, ZulipSettings};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawZulip {
    site: Spanned<EnvString>,
    streams: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    everyone_addresses: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaZulip {
    email: Spanned<EnvString>,
    api_key: Spanned<EnvString>,
}

/// Reads `[platforms.zulip]` and the personas' `zulip` sub-tables; call
/// inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<ZulipSettings, ConfigError> {
    let span = section.span();
    let z: RawZulip = read(section, check)?;
    let site = z.site.get_ref().0.trim().trim_end_matches('/').to_owned();
    let ok = (site.starts_with("https://") || site.starts_with("http://"))
        && url::Url::parse(&site)
            .is_ok_and(|u| u.query().is_none() && u.fragment().is_none() && u.host().is_some());
    if !ok {
        return Err(check.at(
            z.site.span(),
            format!("`platforms.zulip.site` = {site:?} must be the organisation's address, as people open it: site = \"https://chat.example.org\""),
        ));
    }
    let mut streams: Vec<String> = Vec::new();
    for s in z.streams.get_ref() {
        let name = s.get_ref().trim().trim_start_matches('#').trim().to_owned();
        if name.is_empty() || name.chars().count() > 60 || name.chars().any(char::is_control) {
            return Err(check.at(
                s.span(),
                format!("`platforms.zulip.streams` has {:?}: give a stream's name as Zulip shows it, like \"general\"", s.get_ref()),
            ));
        }
        if !streams.iter().any(|o| o.eq_ignore_ascii_case(&name)) {
            streams.push(name);
        }
    }
    if streams.is_empty() {
        return Err(check.at(
            z.streams.span(),
            "`platforms.zulip.streams` is empty: name the streams to listen in, streams = [\"general\"] (direct messages are always heard)",
        ));
    }
    let mut out: Vec<ZulipPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let pz: RawPersonaZulip = read(section, check)?;
        let email = pz.email.get_ref().0.trim().to_owned();
        if !email.contains('@') || email.contains(char::is_whitespace) {
            return Err(check.at(
                pz.email.span(),
                format!("`persona[{i}].zulip.email` = {email:?} is not the bot's email (Personal settings → Bots shows it: docs-bot@chat.example.org)"),
            ));
        }
        let api_key = pz.api_key.get_ref().0.trim().to_owned();
        if api_key.len() < 16 || !api_key.bytes().all(|b| b.is_ascii_alphanumeric()) {
            return Err(check.at(
                pz.api_key.span(),
                format!("`persona[{i}].zulip.api_key` is not a Zulip API key (32 letters and digits, from Personal settings → Bots); keep it out of the file: api_key = \"${{DOCS_ZULIP_KEY}}\""),
            ));
        }
        if out.iter().any(|o| o.email.eq_ignore_ascii_case(&email)) {
            return Err(check.at(
                pz.email.span(),
                format!("`persona[{i}].zulip.email` is another persona's bot already: each persona needs a bot of its own"),
            ));
        }
        out.push(ZulipPersona {
            id: p.id.get_ref().as_str().into(),
            email,
            api_key,
        });
    }
    if out.is_empty() {
        return Err(check.at(
            span,
            "[platforms.zulip] is set but no persona has a bot: add `zulip = { email = \"docs-bot@chat.example.org\", api_key = \"${DOCS_ZULIP_KEY}\" }` to a persona",
        ));
    }
    Ok(ZulipSettings {
        site,
        streams,
        everyone_addresses: z.everyone_addresses,
        personas: out,
        max_backoff: Duration::from_secs(60),
    })
}

impl PlatformConfig for ZulipSettings {
    fn secrets(&self) -> Vec<String> {
        self.personas.iter().map(|p| p.api_key.clone()).collect()
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::ZulipPlatform::new(
            self.clone(),
            cx.saved,
        )?))
    }
}
