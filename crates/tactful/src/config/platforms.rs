//! The platforms' parts of the file: `[platforms.<name>]` tables and each
//! persona's `<name> = { ... }` sub-table, cut out and handed to the crate
//! that owns them (listed in `registry.rs`); only the built-in web room is
//! read here.

use std::collections::BTreeMap;

use tactful_config::{Checker, ConfigError, DeValue, PersonaPart, Section, read};

use super::{Platforms, RawPersona, RawWeb, web_settings};

/// Every platform name a config may use, built in or not: a persona's
/// sub-table under one of these names belongs to that platform.
pub(super) fn names() -> Vec<&'static str> {
    std::iter::once("web")
        .chain(crate::registry::platforms().iter().map(|r| r.name))
        .collect()
}

/// What the file says about platforms, cut out of it before the rest is
/// read: `[platforms]`, and each persona's sub-tables by platform name.
#[derive(Default)]
pub(super) struct Cut<'i> {
    pub(super) platforms: Option<Section<'i>>,
    pub(super) personas: Vec<BTreeMap<&'static str, Section<'i>>>,
}

/// Cuts the platform parts out of the parsed file.
pub(super) fn cut<'i>(root: &mut tactful_config::Spanned<toml::de::DeTable<'i>>) -> Cut<'i> {
    let platforms = root.get_mut().remove("platforms");
    let mut personas = Vec::new();
    let names = names();
    if let Some(list) = root.get_mut().get_mut("persona")
        && let DeValue::Array(items) = list.get_mut()
    {
        for item in items.iter_mut() {
            let mut parts = BTreeMap::new();
            if let DeValue::Table(t) = item.get_mut() {
                for name in &names {
                    if let Some(v) = t.remove(*name) {
                        parts.insert(*name, v);
                    }
                }
            }
            personas.push(parts);
        }
    }
    Cut { platforms, personas }
}

/// Reads every platform the file configures.
pub(super) fn read_all(
    cut: Cut<'_>,
    personas: &[RawPersona],
    check: &Checker<'_>,
) -> Result<Platforms, ConfigError> {
    let mut out = Platforms::default();
    let mut sections: BTreeMap<String, Section<'_>> = BTreeMap::new();
    if let Some(p) = cut.platforms {
        let span = p.span();
        let DeValue::Table(t) = p.into_inner() else {
            return Err(check.at(
                span,
                "`platforms` must be a table: [platforms.web], [platforms.irc], ...",
            ));
        };
        for (name, v) in t {
            let key = name.get_ref().to_string();
            if !names().contains(&key.as_str()) {
                return Err(check.at(
                    name.span(),
                    format!(
                        "unknown platform `{key}`: this tactful knows {}",
                        names().join(", ")
                    ),
                ));
            }
            sections.insert(key, v);
        }
    }
    // The personas' parts for `name`, in `[[persona]]` order.
    let mut parts = cut.personas;
    parts.resize_with(personas.len(), BTreeMap::new);
    let mut parts_for = |name: &'static str| -> Vec<PersonaPart<'_>> {
        personas
            .iter()
            .zip(parts.iter_mut())
            .enumerate()
            .map(|(index, (p, parts))| PersonaPart {
                index,
                id: tactful_config::Spanned::new(p.id.span(), p.id.get_ref().0.clone()),
                section: parts.remove(name),
            })
            .collect()
    };
    if let Some(web) = sections.remove("web") {
        out.web = Some(web_settings(read::<RawWeb>(web, check)?, check)?);
    }
    let web_parts = parts_for("web");
    if let Some(p) = web_parts
        .into_iter()
        .find_map(|p| p.section.map(|s| (p.index, s)))
    {
        return Err(check.at(
            p.1.span(),
            format!("`persona[{}].web`: the web room has no per-persona settings", p.0),
        ));
    }
    for registration in crate::registry::platforms() {
        let name = registration.name;
        let parts = parts_for(name);
        let Some(section) = sections.remove(name) else {
            if let Some(p) = parts.into_iter().find(|p| p.section.is_some()) {
                let span = p.section.as_ref().map_or(p.id.span(), |s| s.span());
                return Err(check.at(
                    span,
                    format!(
                        "`persona[{}].{name}` is set but there is no [platforms.{name}] table: add one",
                        p.index
                    ),
                ));
            }
            continue;
        };
        let Some(configure) = registration.configure else {
            return Err(check.at(
                section.span(),
                format!(
                    "this tactful was built without {name}: build it with the cargo feature `{name}` (on by default)"
                ),
            ));
        };
        out.connected.push((name, configure(section, parts, check)?));
    }
    Ok(out)
}

#[cfg(all(test, feature = "telegram"))]
mod telegram_tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};

    const BASE: &str = r#"
[[persona]]
id = "docs"
agent = "main"
telegram = { token = "${DOCS_BOT_TOKEN}" }

[[persona]]
id = "chef"
agent = "main"

[agents.main]
kind = "script"
rules = []
"#;

    const TOKEN: &str = "123456789:AAE-very-secret";

    fn parse(src: &str) -> Result<Config, ConfigError> {
        Config::parse(src, Path::new("t.toml"), &|k| {
            (k == "DOCS_BOT_TOKEN").then(|| TOKEN.to_owned())
        })
    }

    #[test]
    fn a_bot_per_persona_read_by_its_crate() {
        let c = parse(&format!(
            "{BASE}\n[platforms.telegram]\napi_url = \"http://127.0.0.1:8081/\"\n"
        ))
        .expect("valid");
        let t = c
            .platforms
            .get::<tactful_telegram::TelegramSettings>("telegram")
            .expect("telegram");
        assert_eq!(t.api_url, "http://127.0.0.1:8081");
        assert_eq!(t.personas.len(), 1, "chef has no bot");
        assert_eq!(
            (t.personas[0].id.as_str(), t.personas[0].bot_id),
            ("docs", 123_456_789)
        );
        assert!(c.secrets().contains(&TOKEN.to_owned()), "the token is redacted");
        let c = parse(&format!("{BASE}\n[platforms.telegram]\n")).expect("valid");
        assert_eq!(
            c.platforms
                .get::<tactful_telegram::TelegramSettings>("telegram")
                .map(|t| t.api_url.as_str()),
            Some("https://api.telegram.org")
        );
    }

    #[test]
    fn telegram_mistakes_name_key_and_line_and_hide_the_token() {
        let bad = BASE.replace("${DOCS_BOT_TOKEN}", "not-a-token");
        let e = parse(&format!("{bad}\n[platforms.telegram]\n")).expect_err("bad token");
        assert!(e.message.contains("persona[0].telegram.token"), "{e}");
        assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
        let e = parse(&format!(
            "{BASE}\n[platforms.telegram]\napi_url = \"api.telegram.org\"\n"
        ))
        .expect_err("bad url");
        assert!(e.message.contains("platforms.telegram.api_url"), "{e}");
        let e =
            parse(&format!("{BASE}\n[platforms.telegram]\npoll_timeout_secs = 90\n")).expect_err("too long");
        assert!(e.message.contains("poll_timeout_secs"), "{e}");
        let e = parse(BASE).expect_err("no table");
        assert!(e.message.contains("no [platforms.telegram] table"), "{e}");
        let two = BASE.replace(
            "agent = \"main\"\n\n[agents",
            "agent = \"main\"\ntelegram = { token = \"${DOCS_BOT_TOKEN}\" }\n\n[agents",
        );
        let e = parse(&format!("{two}\n[platforms.telegram]\n")).expect_err("one bot, two personas");
        assert!(e.message.contains("another persona's bot"), "{e}");
        // A typo in the key: still masked on the quoted line.
        let typo = BASE.replace(
            "telegram = { token = \"${DOCS_BOT_TOKEN}\" }",
            &format!("telegram = {{ tokne = \"{TOKEN}\" }}"),
        );
        let e = parse(&format!("{typo}\n[platforms.telegram]\n")).expect_err("unknown key");
        assert!(!e.to_string().contains("very-secret"), "{e}");
        let e = parse(&format!("{BASE}\n[platforms.telegarm]\n")).expect_err("unknown platform");
        assert!(
            e.message.contains("unknown platform `telegarm`") && e.message.contains("telegram"),
            "{e}"
        );
    }
}

#[cfg(all(test, feature = "discord"))]
mod discord_tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};

    const BASE: &str = r#"
[[persona]]
id = "docs"
agent = "main"
discord = { token = "${DOCS_DISCORD_TOKEN}" }

[agents.main]
kind = "script"
rules = []
"#;

    const TOKEN: &str = "NzAwMQ.GhIjKl.very-secret-discord";

    fn parse(src: &str) -> Result<Config, ConfigError> {
        Config::parse(src, Path::new("t.toml"), &|k| {
            (k == "DOCS_DISCORD_TOKEN").then(|| TOKEN.to_owned())
        })
    }

    #[test]
    fn a_bot_per_persona_with_safe_defaults() {
        let c = parse(&format!("{BASE}\n[platforms.discord]\n")).expect("valid");
        let d = c
            .platforms
            .get::<tactful_discord::DiscordSettings>("discord")
            .expect("discord");
        assert_eq!(d.api_url, "https://discord.com");
        assert_eq!(d.gateway_url, "wss://gateway.discord.gg");
        assert_eq!(
            d.pings,
            tactful_discord::Pings::default(),
            "pings nobody by default"
        );
        assert!(!d.everyone_addresses);
        assert!(c.secrets().contains(&TOKEN.to_owned()));
        let c = parse(&format!(
            "{BASE}\n[platforms.discord]\napi_url = \"http://127.0.0.1:9/\"\ngateway_url = \"ws://127.0.0.1:9\"\nallowed_mentions = [\"users\"]\n"
        ))
        .expect("valid");
        let d = c
            .platforms
            .get::<tactful_discord::DiscordSettings>("discord")
            .expect("discord");
        assert_eq!(d.api_url, "http://127.0.0.1:9");
        assert!(d.pings.users && !d.pings.everyone);
        // The forms Discord's docs show, and a proxy under a path.
        let c = parse(&format!(
            "{BASE}\n[platforms.discord]\napi_url = \"http://127.0.0.1:9/discord-proxy/\"\ngateway_url = \"wss://gateway.discord.gg/?v=10&encoding=json\"\n"
        ))
        .expect("valid");
        let d = c
            .platforms
            .get::<tactful_discord::DiscordSettings>("discord")
            .expect("discord");
        assert_eq!(d.api_url, "http://127.0.0.1:9/discord-proxy");
        assert_eq!(d.gateway_url, "wss://gateway.discord.gg");
    }

    #[test]
    fn discord_mistakes_name_key_and_line() {
        let bad = BASE.replace("${DOCS_DISCORD_TOKEN}", "not-a-token");
        let e = parse(&format!("{bad}\n[platforms.discord]\n")).expect_err("bad token");
        assert!(e.message.contains("persona[0].discord.token"), "{e}");
        assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
        let e = parse(&format!(
            "{BASE}\n[platforms.discord]\ngateway_url = \"https://gateway.discord.gg\"\n"
        ))
        .expect_err("not a websocket URL");
        assert!(e.message.contains("platforms.discord.gateway_url"), "{e}");
        let e = parse(&format!(
            "{BASE}\n[platforms.discord]\ngateway_url = \"wss://gw.example/?v=9&compress=zlib-stream\"\n"
        ))
        .expect_err("a query tactful cannot pass on");
        assert!(
            e.message.contains("platforms.discord.gateway_url") && e.message.contains("without it"),
            "{e}"
        );
        assert_eq!(e.position.map(|p| p.0), Some(12), "{e}");
        let e = parse(&format!(
            "{BASE}\n[platforms.discord]\napi_url = \"https://proxy.example/d?key=1\"\n"
        ))
        .expect_err("a query on api_url");
        assert!(e.message.contains("platforms.discord.api_url"), "{e}");
        let e = parse(&format!(
            "{BASE}\n[platforms.discord]\nallowed_mentions = [\"all\"]\n"
        ))
        .expect_err("bad ping");
        assert!(
            e.message.contains("allowed_mentions") && e.position.map(|p| p.0) == Some(12),
            "{e}"
        );
        let e = parse(BASE).expect_err("no table");
        assert!(e.message.contains("no [platforms.discord] table"), "{e}");
    }
}

#[cfg(all(test, feature = "slack"))]
mod slack_tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};

    const BASE: &str = r#"
[[persona]]
id = "docs"
agent = "main"
slack = { bot_token = "${DOCS_BOT}", app_token = "${DOCS_APP}" }

[agents.main]
kind = "script"
rules = []
"#;

    const BOT: &str = "xoxb-1-2-very-secret-bot";
    const APP: &str = "xapp-1-A1-very-secret-app";

    fn parse(src: &str) -> Result<Config, ConfigError> {
        Config::parse(src, Path::new("t.toml"), &|k| match k {
            "DOCS_BOT" => Some(BOT.to_owned()),
            "DOCS_APP" => Some(APP.to_owned()),
            _ => None,
        })
    }

    #[test]
    fn an_app_per_persona_with_safe_defaults() {
        let c = parse(&format!("{BASE}\n[platforms.slack]\n")).expect("valid");
        let s = c
            .platforms
            .get::<tactful_slack::SlackSettings>("slack")
            .expect("slack");
        assert_eq!(s.api_url, "https://slack.com/api");
        assert!(!s.everyone_addresses);
        assert_eq!(s.personas[0].bot_token, BOT);
        for secret in [BOT, APP] {
            assert!(c.secrets().contains(&secret.to_owned()), "{secret}");
        }
        let c = parse(&format!(
            "{BASE}\n[platforms.slack]\napi_url = \"http://127.0.0.1:9/api/\"\neveryone_addresses = true\n"
        ))
        .expect("valid");
        let s = c
            .platforms
            .get::<tactful_slack::SlackSettings>("slack")
            .expect("slack");
        assert_eq!(s.api_url, "http://127.0.0.1:9/api");
        assert!(s.everyone_addresses);
    }

    #[test]
    fn slack_mistakes_name_key_and_line() {
        // The two tokens swapped: the commonest mistake.
        let swapped = BASE
            .replace("${DOCS_BOT}", "TMP")
            .replace("${DOCS_APP}", "${DOCS_BOT}")
            .replace("TMP", "${DOCS_APP}");
        let e = parse(&format!("{swapped}\n[platforms.slack]\n")).expect_err("swapped tokens");
        assert!(
            e.message.contains("persona[0].slack.bot_token") && e.message.contains("xoxb-"),
            "{e}"
        );
        assert_eq!(e.position.map(|p| p.0), Some(5), "{e}");
        assert!(
            !e.message.contains(APP) && !e.message.contains(BOT),
            "no token in the error: {e}"
        );
        let e = parse(&format!(
            "{BASE}\n[platforms.slack]\napi_url = \"slack.com/api\"\n"
        ))
        .expect_err("no scheme");
        assert!(
            e.message.contains("platforms.slack.api_url") && e.position.map(|p| p.0) == Some(12),
            "{e}"
        );
        let e =
            parse(&format!("{BASE}\n[platforms.slack]\nsigning_secret = \"x\"\n")).expect_err("unknown key");
        assert!(e.message.contains("signing_secret"), "{e}");
        let twice = format!(
            "{BASE}\n[[persona]]\nid = \"chef\"\nagent = \"main\"\nslack = {{ bot_token = \"${{DOCS_BOT}}\", app_token = \"${{DOCS_APP}}\" }}\n\n[platforms.slack]\n"
        );
        let e = parse(&twice).expect_err("one app for two personas");
        assert!(
            e.message.contains("persona[1].slack") && e.message.contains("app of its own"),
            "{e}"
        );
        let e = parse(BASE).expect_err("no table");
        assert!(e.message.contains("no [platforms.slack] table"), "{e}");
    }
}
