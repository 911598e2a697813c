//! `[platforms.slack]` and each persona's `slack = { bot_token, app_token }`:
//! read and checked here, with errors that name the line like every config
//! error. Personas without a `slack` table are not on Slack.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};
use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::{SlackPersona, SlackSettings};

/// Slack's Web API, unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://slack.com/api";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSlack {
    api_url: Option<Spanned<EnvString>>,
    #[serde(default)]
    everyone_addresses: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaSlack {
    bot_token: Spanned<EnvString>,
    app_token: Spanned<EnvString>,
}

/// Checks one token's shape: Slack's tokens start with a prefix naming
/// their kind, and the two are easy to swap.
fn token(
    value: &Spanned<EnvString>,
    key: &str,
    prefix: &str,
    what: &str,
    env: &str,
    check: &Checker<'_>,
) -> Result<String, ConfigError> {
    let t = value.get_ref().0.trim().to_owned();
    if !t.starts_with(prefix) || t.len() <= prefix.len() || t.contains(char::is_whitespace) {
        return Err(check.at(
            value.span(),
            format!("`{key}` is not {what} (it starts with `{prefix}`); keep it out of the file: {env}"),
        ));
    }
    Ok(t)
}

/// Reads `[platforms.slack]` and the personas' `slack` sub-tables; call
/// inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<SlackSettings, ConfigError> {
    let span = section.span();
    let s: RawSlack = read(section, check)?;
    let api_url = match &s.api_url {
        None => DEFAULT_API_URL.to_owned(),
        Some(v) => {
            let url = v.get_ref().0.trim().trim_end_matches('/').to_owned();
            let ok =
                (url.starts_with("https://") || url.starts_with("http://")) && url::Url::parse(&url).is_ok();
            if !ok {
                return Err(check.at(
                    v.span(),
                    format!("`platforms.slack.api_url` = {url:?} must be a URL starting with https:// or http:// (default \"{DEFAULT_API_URL}\")"),
                ));
            }
            url
        }
    };
    let mut out: Vec<SlackPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let ps: RawPersonaSlack = read(section, check)?;
        let bot_token = token(
            &ps.bot_token,
            &format!("persona[{i}].slack.bot_token"),
            "xoxb-",
            "a bot token (OAuth & Permissions → Bot User OAuth Token)",
            "bot_token = \"${DOCS_SLACK_BOT_TOKEN}\"",
            check,
        )?;
        let app_token = token(
            &ps.app_token,
            &format!("persona[{i}].slack.app_token"),
            "xapp-",
            "an app-level token with the connections:write scope (Basic Information → App-Level Tokens), which Socket Mode needs",
            "app_token = \"${DOCS_SLACK_APP_TOKEN}\"",
            check,
        )?;
        if out
            .iter()
            .any(|o| o.bot_token == bot_token || o.app_token == app_token)
        {
            return Err(check.at(
                ps.bot_token.span(),
                format!("`persona[{i}].slack` has another persona's tokens: each persona needs a Slack app of its own"),
            ));
        }
        out.push(SlackPersona {
            id: p.id.get_ref().as_str().into(),
            bot_token,
            app_token,
        });
    }
    if out.is_empty() {
        return Err(check.at(
            span,
            "[platforms.slack] is set but no persona has a Slack app: add `slack = { bot_token = \"${DOCS_SLACK_BOT_TOKEN}\", app_token = \"${DOCS_SLACK_APP_TOKEN}\" }` to a persona",
        ));
    }
    Ok(SlackSettings {
        api_url,
        everyone_addresses: s.everyone_addresses,
        personas: out,
        max_backoff: Duration::from_secs(60),
    })
}

/// The settings' secrets (both tokens of every app), for redaction.
pub fn secrets(s: &SlackSettings) -> Vec<String> {
    s.personas
        .iter()
        .flat_map(|p| [p.bot_token.clone(), p.app_token.clone()])
        .collect()
}

impl PlatformConfig for SlackSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::SlackPlatform::new(
            self.clone(),
            cx.saved,
        )?))
    }
}
