//! Every TOML snippet in the README and `docs/` is a config tactful
//! accepts, so copying one from the docs never starts with an error.
//! Snippets that show one table are completed with a minimal persona and
//! agent; `${VARS}` are given a value.

use std::path::Path;

use tactful::config::Config;

/// The ```toml blocks of a markdown file, with the line each starts on.
fn toml_blocks(markdown: &str) -> Vec<(usize, String)> {
    let mut blocks = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (n, line) in markdown.lines().enumerate() {
        match (&mut current, line.trim_start()) {
            (None, l) if l.starts_with("```toml") => current = Some((n + 1, String::new())),
            (Some(_), l) if l.starts_with("```") => blocks.extend(current.take()),
            (Some((_, text)), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

/// A snippet made whole: a persona if it has none, and a script agent for
/// every agent name it uses without defining.
fn complete(snippet: &str) -> String {
    let mut text = snippet.to_owned();
    if !text.contains("[[persona]]") {
        text.push_str("\n[[persona]]\nid = \"docs\"\nagent = \"main\"\n");
    }
    let referenced = regex::Regex::new(r"\.personas\.([A-Za-z0-9_-]+)").expect("regex");
    let named: Vec<String> = referenced.captures_iter(&text).map(|c| c[1].to_owned()).collect();
    for id in named {
        if !text.contains(&format!("id = \"{id}\"")) {
            text.push_str(&format!("\n[[persona]]\nid = \"{id}\"\nagent = \"main\"\n"));
        }
    }
    let agent = regex::Regex::new(r#"\bagent\s*=\s*"([^"]+)""#).expect("regex");
    let used: Vec<String> = agent.captures_iter(&text).map(|c| c[1].to_owned()).collect();
    for agent in used {
        if !text.contains(&format!("[agents.{agent}]")) {
            text.push_str(&format!("\n[agents.{agent}]\nkind = \"script\"\nrules = []\n"));
        }
    }
    text
}

/// What a snippet's `${VAR}` stands for: a value of the right shape (a
/// Telegram bot token, distinct per variable, is `<bot id>:<secret>`).
fn env_value(var: &str) -> Option<String> {
    if var.contains("SLACK") {
        // Slack's: the kind of token is its prefix.
        let prefix = if var.ends_with("APP_TOKEN") {
            "xapp"
        } else {
            "xoxb"
        };
        return Some(format!("{prefix}-1-{var}"));
    }
    if var.ends_with("BOT_TOKEN") {
        let id = var
            .bytes()
            .fold(7u64, |h, b| (h * 31 + u64::from(b)) % 1_000_000_000);
        return Some(format!("{id}:AAE-a-token-for-{var}"));
    }
    if var.ends_with("DATABASE_URL") {
        return Some("postgres://tactful:a-password@db.internal:5432/tactful".to_owned());
    }
    if var.ends_with("ZULIP_KEY") {
        // Zulip's: 32 letters and digits.
        return Some(format!("{:a>32}", var.replace('_', "")));
    }
    if var.ends_with("MM_TOKEN") {
        // Mattermost's: 26 lower-case letters and digits.
        let id = var
            .bytes()
            .fold(7u64, |h, b| (h * 31 + u64::from(b)) % 1_000_000_007);
        return Some(format!("{:0>26}", format!("mm{id}")));
    }
    if var.ends_with("DISCORD_TOKEN") {
        // Discord's: three dot-separated parts.
        return Some(format!("MTIz.{var}.a-secret"));
    }
    Some("value".to_owned())
}

#[test]
fn every_toml_snippet_in_the_docs_is_a_valid_config() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    // Files snippets refer to, beside the config.
    let folder = tempfile::tempdir().expect("temp dir");
    std::fs::write(folder.path().join("contract.md"), "Speak briefly.").expect("file");
    // A kb agent's documents.
    std::fs::write(folder.path().join("README.md"), "# Readme\n\nAbout it.").expect("file");
    std::fs::create_dir(folder.path().join("docs")).expect("folder");
    std::fs::write(folder.path().join("docs/faq.md"), "# FAQ\n\n## Why?\n\nBecause.").expect("file");
    let path = folder.path().join("tactful.toml");
    let mut checked = 0;
    for file in files {
        let markdown = std::fs::read_to_string(&file).expect("readable");
        for (line, snippet) in toml_blocks(&markdown) {
            // A kb's example questions: their keys must be sections of
            // tactful's own docs, which the example is written against.
            if snippet.starts_with("# questions.toml") {
                if let Err(e) = tactful::config::questions_for(&tactful::demo::builtin_docs(), &snippet) {
                    panic!(
                        "{}:{line}: these questions do not fit the docs: {e}",
                        file.display()
                    );
                }
                checked += 1;
                continue;
            }
            let text = complete(&snippet);
            if let Err(e) = Config::parse(&text, &path, &env_value) {
                panic!(
                    "{}:{line}: this snippet is not a valid config:\n{e}\n---\n{text}",
                    file.display()
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 10,
        "only {checked} snippets found: is the extraction broken?"
    );
}

/// The README's Slack app manifest is one Slack accepts (read with
/// slack-morphism's manifest model, which would drop a misspelt key) and
/// asks for what tactful needs: Socket Mode, the scopes to read and write
/// messages and names, and the message events.
#[cfg(feature = "slack")]
#[test]
fn the_slack_app_manifest_in_the_readme_has_socket_mode_and_the_scopes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    let section = readme.split("## On Slack").nth(1).expect("an On Slack section");
    let json = section
        .split("```json\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("a JSON manifest in the Slack section");
    let written: serde_json::Value = serde_json::from_str(json).expect("the manifest is JSON");
    let manifest: slack_morphism::prelude::SlackAppManifest =
        serde_json::from_value(written.clone()).expect("a Slack app manifest");
    assert_eq!(
        serde_json::to_value(&manifest).expect("serialisable"),
        written,
        "every key of the manifest is one Slack knows"
    );
    let settings = manifest.settings.expect("settings");
    assert_eq!(settings.socket_mode_enabled, Some(true));
    let events: Vec<String> = settings
        .event_subscriptions
        .and_then(|e| e.bot_events)
        .unwrap_or_default()
        .iter()
        .map(|e| e.to_string())
        .collect();
    for event in [
        "app_mention",
        "message.channels",
        "message.groups",
        "message.im",
        "message.mpim",
    ] {
        assert!(
            events.iter().any(|e| e == event),
            "bot event {event} in {events:?}"
        );
    }
    let scopes: Vec<String> = manifest
        .oauth_config
        .and_then(|o| o.scopes)
        .and_then(|s| s.bot)
        .unwrap_or_default()
        .iter()
        .map(|s| s.to_string())
        .collect();
    for scope in [
        "app_mentions:read",
        "channels:history",
        "groups:history",
        "im:history",
        "mpim:history",
        "chat:write",
        "users:read",
    ] {
        assert!(
            scopes.iter().any(|s| s == scope),
            "bot scope {scope} in {scopes:?}"
        );
    }
}

/// What trips people setting a platform up is in its README section:
/// Telegram's bot-to-bot mode and its 409s (quoted as tactful logs them),
/// where Discord hides Developer Mode and "Public Bot", Slack's app limit.
#[test]
fn each_platform_section_says_what_trips_people() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README");
    // Each section's text, its line breaks as spaces.
    let section = |name: &str| {
        let rest = readme
            .split(&format!("## On {name}\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("## On {name}"));
        let text = rest.split("\n## ").next().unwrap_or_default();
        text.split_whitespace().collect::<Vec<_>>().join(" ")
    };
    let telegram = section("Telegram");
    for said in [
        "Bot-to-Bot Communication Mode",
        "ignore_bots",
        "409 Conflict: another program is polling this bot",
        "409 Conflict: this bot has a webhook set",
        "deleteWebhook",
    ] {
        assert!(telegram.contains(said), "Telegram: {said:?} missing");
    }
    let discord = section("Discord");
    for said in ["User Settings → Advanced → Developer Mode", "**Public Bot**"] {
        assert!(discord.contains(said), "Discord: {said:?} missing");
    }
    let slack = section("Slack");
    assert!(slack.contains("10 apps and integrations"), "Slack: the app limit");
}
