//! `[platforms.mattermost]` and each persona's `mattermost = { token }`:
//! read and checked here, with errors that name the line like every config
//! error. Personas without a `mattermost` table are not on Mattermost.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};
use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::settings::{ChannelRef, MattermostPersona, MattermostSettings};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMattermost {
    url: Spanned<EnvString>,
    channels: Spanned<Vec<Spanned<String>>>,
    #[serde(default)]
    everyone_addresses: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaMattermost {
    token: Spanned<EnvString>,
}

/// Whether `s` is shaped like a Mattermost id: 26 lower-case letters and
/// digits.
pub fn is_id(s: &str) -> bool {
    s.len() == 26 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Whether `s` may be a team's or a channel's name (the part of a
/// channel's address the server checks: letters, digits, `-`, `_`, `.`).
fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// One entry of `channels`: `team/channel` or a channel id.
pub fn channel_ref(s: &str) -> Option<ChannelRef> {
    let s = s.trim();
    if let Some((team, channel)) = s.split_once('/') {
        let channel = channel.trim_start_matches("channels/");
        return (is_name(team) && is_name(channel)).then(|| ChannelRef::Named {
            team: team.to_ascii_lowercase(),
            channel: channel.to_ascii_lowercase(),
        });
    }
    is_id(s).then(|| ChannelRef::Id(s.to_owned()))
}

/// Reads `[platforms.mattermost]` and the personas' `mattermost`
/// sub-tables; call inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<MattermostSettings, ConfigError> {
    let span = section.span();
    let m: RawMattermost = read(section, check)?;
    let url = m.url.get_ref().0.trim().trim_end_matches('/').to_owned();
    let parsed = url::Url::parse(&url);
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && parsed
            .as_ref()
            .is_ok_and(|u| u.query().is_none() && u.fragment().is_none() && u.host().is_some());
    if !ok {
        return Err(check.at(
            m.url.span(),
            format!("`platforms.mattermost.url` = {url:?} must be the server's address, as people open it: url = \"https://chat.example.org\""),
        ));
    }
    let mut channels: Vec<ChannelRef> = Vec::new();
    for c in m.channels.get_ref() {
        let Some(parsed) = channel_ref(c.get_ref()) else {
            return Err(check.at(
                c.span(),
                format!("`platforms.mattermost.channels` has {:?}: give \"team/channel\" (the names in the channel's address, like \"myteam/town-square\") or a channel id (26 letters and digits)", c.get_ref()),
            ));
        };
        if !channels.contains(&parsed) {
            channels.push(parsed);
        }
    }
    if channels.is_empty() {
        return Err(check.at(
            m.channels.span(),
            "`platforms.mattermost.channels` is empty: name the channels to listen in, channels = [\"myteam/town-square\"] (direct messages are always heard)",
        ));
    }
    let mut out: Vec<MattermostPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let pm: RawPersonaMattermost = read(section, check)?;
        let token = pm.token.get_ref().0.trim().to_owned();
        // Mattermost's tokens are ids: 26 lower-case letters and digits.
        if !is_id(&token) {
            return Err(check.at(
                pm.token.span(),
                format!("`persona[{i}].mattermost.token` is not a Mattermost access token (26 letters and digits, shown once when the bot account or a personal access token is made); keep it out of the file: token = \"${{DOCS_MM_TOKEN}}\""),
            ));
        }
        if out.iter().any(|o| o.token == token) {
            return Err(check.at(
                pm.token.span(),
                format!("`persona[{i}].mattermost.token` is another persona's bot already: each persona needs a bot account of its own"),
            ));
        }
        out.push(MattermostPersona {
            id: p.id.get_ref().as_str().into(),
            token,
        });
    }
    if out.is_empty() {
        return Err(check.at(
            span,
            "[platforms.mattermost] is set but no persona has a bot: add `mattermost = { token = \"${DOCS_MM_TOKEN}\" }` to a persona",
        ));
    }
    Ok(MattermostSettings {
        url,
        channels,
        everyone_addresses: m.everyone_addresses,
        personas: out,
        max_backoff: Duration::from_secs(60),
    })
}

impl PlatformConfig for MattermostSettings {
    fn secrets(&self) -> Vec<String> {
        self.personas.iter().map(|p| p.token.clone()).collect()
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::MattermostPlatform::new(
            self.clone(),
            cx.saved,
        )?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_named_by_team_and_name_or_by_id() {
        assert_eq!(
            channel_ref("MyTeam/town-square"),
            Some(ChannelRef::Named {
                team: "myteam".into(),
                channel: "town-square".into()
            })
        );
        // The path as the address bar shows it.
        assert_eq!(
            channel_ref("myteam/channels/off-topic"),
            Some(ChannelRef::Named {
                team: "myteam".into(),
                channel: "off-topic".into()
            })
        );
        assert_eq!(
            channel_ref("4xp9fdt77pncbef59f4k1qe83o"),
            Some(ChannelRef::Id("4xp9fdt77pncbef59f4k1qe83o".into()))
        );
        for bad in [
            "",
            "town-square",
            "a/b/c",
            "team/",
            "/chan",
            "x y/z",
            "4XP9FDT77PNCBEF59F4K1QE83O",
        ] {
            assert_eq!(channel_ref(bad), None, "{bad:?}");
        }
    }
}
