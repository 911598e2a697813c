//! `[platforms.telegram]` and each persona's `telegram = { token }`: read
//! and checked here, with errors that name the line like every config
//! error. Personas without a `telegram` table are not on Telegram.

use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString, PersonaPart, Section, Spanned, read};

use tactful_runtime::Connected;
use tactful_runtime::seam::{Context, PlatformConfig};

use crate::{TelegramPersona, TelegramSettings};

/// Where bots talk to Telegram unless told otherwise.
pub const DEFAULT_API_URL: &str = "https://api.telegram.org";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTelegram {
    api_url: Option<Spanned<EnvString>>,
    poll_timeout_secs: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPersonaTelegram {
    token: Spanned<EnvString>,
}

/// Reads `[platforms.telegram]` and the personas' `telegram` sub-tables;
/// call inside [`tactful_config::with_env`].
pub fn parse(
    section: Section<'_>,
    personas: Vec<PersonaPart<'_>>,
    check: &Checker<'_>,
) -> Result<TelegramSettings, ConfigError> {
    let span = section.span();
    let t: RawTelegram = read(section, check)?;
    let api_url = match &t.api_url {
        None => DEFAULT_API_URL.to_owned(),
        Some(u) => {
            let url = u.get_ref().0.trim().trim_end_matches('/').to_owned();
            let parsed = url::Url::parse(&url);
            if !(url.starts_with("https://") || url.starts_with("http://")) || parsed.is_err() {
                return Err(check.at(
                    u.span(),
                    format!("`platforms.telegram.api_url` = {url:?} must be the Bot API's base URL, like \"{DEFAULT_API_URL}\""),
                ));
            }
            url
        }
    };
    let poll_timeout = match &t.poll_timeout_secs {
        None => Duration::from_secs(30),
        Some(s) if (1..=50).contains(s.get_ref()) => Duration::from_secs(*s.get_ref()),
        Some(s) => {
            return Err(check.at(
                s.span(),
                format!(
                    "`platforms.telegram.poll_timeout_secs` = {} must be between 1 and 50 (Telegram holds a long poll at most 50 s)",
                    s.get_ref()
                ),
            ));
        }
    };
    let mut out: Vec<TelegramPersona> = Vec::new();
    for p in personas {
        let i = p.index;
        let Some(section) = p.section else {
            continue;
        };
        let pt: RawPersonaTelegram = read(section, check)?;
        let token = pt.token.get_ref().0.trim().to_owned();
        // `123456789:AA...`: the bot's id, a colon, the secret.
        let bot_id = token
            .split_once(':')
            .filter(|(id, secret)| {
                !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()) && secret.len() >= 8
            })
            .and_then(|(id, _)| id.parse::<u64>().ok());
        let Some(bot_id) = bot_id else {
            return Err(check.at(
                pt.token.span(),
                format!("`persona[{i}].telegram.token` is not a bot token (BotFather gives one like \"123456789:AAE...\"); keep it out of the file: token = \"${{DOCS_BOT_TOKEN}}\""),
            ));
        };
        if out.iter().any(|o| o.bot_id == bot_id) {
            return Err(check.at(
                pt.token.span(),
                format!("`persona[{i}].telegram.token` is another persona's bot already: each persona needs a bot of its own"),
            ));
        }
        out.push(TelegramPersona {
            id: p.id.get_ref().as_str().into(),
            token,
            bot_id,
        });
    }
    if out.is_empty() {
        return Err(check.at(
            span,
            "[platforms.telegram] is set but no persona has a bot: add `telegram = { token = \"${DOCS_BOT_TOKEN}\" }` to a persona",
        ));
    }
    Ok(TelegramSettings {
        api_url,
        personas: out,
        max_backoff: Duration::from_secs(60),
        poll_timeout,
    })
}

/// The start banner's line for these settings (bot ids, not tokens; the
/// usernames are known once connected).
pub fn describe(s: &TelegramSettings, usernames: &[(String, Option<String>)]) -> String {
    let bots: Vec<String> = usernames
        .iter()
        .map(|(persona, name)| match name {
            Some(n) => format!("@{n} ({persona})"),
            None => format!("{persona} (not connected yet)"),
        })
        .collect();
    let at = if s.api_url == DEFAULT_API_URL {
        String::new()
    } else {
        format!(" via {}", s.api_url)
    };
    format!("on Telegram{at} as {}", bots.join(", "))
}

/// The reactions the Bot API lets a bot set (`ReactionTypeEmoji`); any
/// other is refused with `REACTION_INVALID`.
pub const REACTIONS: &[&str] = &[
    "👍",
    "👎",
    "❤",
    "🔥",
    "🥰",
    "👏",
    "😁",
    "🤔",
    "🤯",
    "😱",
    "🤬",
    "😢",
    "🎉",
    "🤩",
    "🤮",
    "💩",
    "🙏",
    "👌",
    "🕊",
    "🤡",
    "🥱",
    "🥴",
    "😍",
    "🐳",
    "❤\u{200d}🔥",
    "🌚",
    "🌭",
    "💯",
    "🤣",
    "⚡",
    "🍌",
    "🏆",
    "💔",
    "🤨",
    "😐",
    "🍓",
    "🍾",
    "💋",
    "🖕",
    "😈",
    "😴",
    "😭",
    "🤓",
    "👻",
    "👨\u{200d}💻",
    "👀",
    "🎃",
    "🙈",
    "😇",
    "😨",
    "🤝",
    "✍",
    "🤗",
    "🫡",
    "🎅",
    "🎄",
    "☃",
    "💅",
    "🤪",
    "🗿",
    "🆒",
    "💘",
    "🙉",
    "🦄",
    "😘",
    "💊",
    "🙊",
    "😎",
    "👾",
    "🤷\u{200d}♂",
    "🤷",
    "🤷\u{200d}♀",
    "😡",
];

/// A `silence_emoji` Telegram would refuse, where it could apply to a
/// Telegram room (the default layer, `tg:` rooms): every silent answer
/// there would end in a failed reaction instead of the mark people see.
fn reaction_warnings(policies: &tactful_core::PolicyTable) -> Vec<String> {
    let layers = std::iter::once(("rooms.default".to_owned(), &policies.default)).chain(
        policies
            .rooms
            .iter()
            .filter(|(room, _)| room.as_str().starts_with("tg:"))
            .map(|(room, layer)| (format!("rooms.\"{room}\""), layer)),
    );
    let mut out = Vec::new();
    for (key, layer) in layers {
        let patches = std::iter::once((key.clone(), &layer.all)).chain(
            layer
                .personas
                .iter()
                .map(|(p, patch)| (format!("{key}.personas.{p}"), patch)),
        );
        for (key, patch) in patches {
            if let Some(e) = &patch.silence_emoji
                && !REACTIONS.contains(&e.as_ref().trim_end_matches('\u{fe0f}'))
            {
                out.push(format!(
                    "`{key}.silence_emoji = \"{e}\"` is not a reaction Telegram lets bots use: on Telegram each silent answer would fail to react; pick one it allows, such as 👀 (the default), 👍, 👌, 🤔 or 🫡"
                ));
            }
        }
    }
    out
}

/// The settings' secrets (bot tokens), for redaction.
pub fn secrets(s: &TelegramSettings) -> Vec<String> {
    s.personas.iter().map(|p| p.token.clone()).collect()
}

impl PlatformConfig for TelegramSettings {
    fn secrets(&self) -> Vec<String> {
        secrets(self)
    }

    fn personas(&self) -> Vec<tactful_core::PersonaId> {
        self.personas.iter().map(|p| p.id.clone()).collect()
    }

    fn warnings(&self, policies: &tactful_core::PolicyTable) -> Vec<String> {
        reaction_warnings(policies)
    }

    fn build(&self, cx: &Context<'_>) -> Result<std::sync::Arc<dyn Connected>, String> {
        Ok(std::sync::Arc::new(crate::TelegramPlatform::new(
            self.clone(),
            cx.saved,
        )?))
    }
}

#[cfg(test)]
mod reaction_tests {
    use super::*;

    #[test]
    fn a_silence_emoji_telegram_refuses_is_warned_about_where_it_applies() {
        let mut table = tactful_core::PolicyTable::default();
        table.default.all.silence_emoji = Some("👀".into());
        assert!(reaction_warnings(&table).is_empty(), "👀 is allowed");
        table.default.all.silence_emoji = Some("❤\u{fe0f}".into());
        assert!(
            reaction_warnings(&table).is_empty(),
            "a variation selector is the same heart"
        );
        table.default.all.silence_emoji = Some("🫠".into());
        let w = reaction_warnings(&table);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with(
                "`rooms.default.silence_emoji = \"🫠\"` is not a reaction Telegram lets bots use"
            ),
            "{w:?}"
        );
        table.default.all.silence_emoji = None;
        let mut other = tactful_core::RoomLayer::default();
        other.all.silence_emoji = Some("🫠".into());
        table.rooms.insert("discord:1".into(), other.clone());
        assert!(
            reaction_warnings(&table).is_empty(),
            "a Discord room is not Telegram's"
        );
        table.rooms.insert("tg:-100".into(), other);
        assert_eq!(reaction_warnings(&table).len(), 1);
    }
}
