//! `[[schedule]]`: scheduled turns, read and checked.
//!
//! A mistake is reported at its value's line and column: an unknown
//! persona, a cron expression [`croner`] cannot read, a time zone that is
//! not an IANA name, a name used twice.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tactful_config::{Checker, ConfigError, EnvString};
use tactful_core::schedule::{DEFAULT_CATCH_UP, Schedule, parse_cron, parse_tz};
use tactful_core::{PersonaId, PersonaSpec, RoomId, ThreadId};
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSchedule {
    name: Spanned<String>,
    cron: Spanned<String>,
    timezone: Option<Spanned<String>>,
    persona: Spanned<String>,
    room: Spanned<EnvString>,
    thread: Option<Spanned<EnvString>>,
    prompt: Spanned<String>,
    catch_up_seconds: Option<Spanned<u64>>,
}

/// The schedules of a config, in file order.
pub(super) fn build(
    raw: Vec<RawSchedule>,
    personas: &[PersonaSpec],
    check: &Checker<'_>,
) -> Result<Vec<Schedule>, ConfigError> {
    let mut out: Vec<Schedule> = Vec::new();
    for s in raw {
        let name = s.name.get_ref().trim();
        if name.is_empty() || name.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(check.at(
                s.name.span(),
                "`schedule.name` must be a short name without spaces, like \"daily-summary\"",
            ));
        }
        if out.iter().any(|o| &*o.name == name) {
            return Err(check.at(s.name.span(), format!("two schedules are named \"{name}\"")));
        }
        let key = |k: &str| format!("schedule \"{name}\": `{k}`");
        let cron = parse_cron(s.cron.get_ref())
            .map_err(|e| check.at(s.cron.span(), format!("{}: {e}", key("cron"))))?;
        let tz = match &s.timezone {
            Some(t) => parse_tz(t.get_ref().trim())
                .map_err(|e| check.at(t.span(), format!("{}: {e}", key("timezone"))))?,
            None => chrono_tz::UTC,
        };
        let persona = s.persona.get_ref();
        if !personas.iter().any(|p| p.id.as_str() == persona) {
            let known: Vec<&str> = personas.iter().map(|p| p.id.as_str()).collect();
            return Err(check.at(
                s.persona.span(),
                format!(
                    "{}: no persona has the id \"{persona}\" (personas: {})",
                    key("persona"),
                    known.join(", ")
                ),
            ));
        }
        let room = s.room.get_ref().0.trim();
        if room.is_empty() {
            return Err(check.at(
                s.room.span(),
                format!(
                    "{} is empty: name the room as the platform does (\"web:lobby\", \"tg:-100…\", \"#ops\")",
                    key("room")
                ),
            ));
        }
        if s.prompt.get_ref().trim().is_empty() {
            return Err(check.at(
                s.prompt.span(),
                format!("{} is empty: say what the agent is asked", key("prompt")),
            ));
        }
        out.push(Schedule {
            name: Arc::from(name),
            expr: Arc::from(s.cron.get_ref().trim()),
            cron,
            tz,
            persona: PersonaId::new(persona.as_str()),
            room: RoomId::new(room),
            thread: s
                .thread
                .as_ref()
                .map(|t| t.get_ref().0.trim())
                .filter(|t| !t.is_empty())
                .map(ThreadId::new),
            prompt: Arc::from(s.prompt.get_ref().trim()),
            catch_up: s
                .catch_up_seconds
                .as_ref()
                .map_or(DEFAULT_CATCH_UP, |c| Duration::from_secs(*c.get_ref())),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;

    const BASE: &str =
        "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n[agents.main]\nkind = \"script\"\nrules = []\n";

    fn parse(schedules: &str) -> Result<Config, tactful_config::ConfigError> {
        Config::parse(&format!("{BASE}\n{schedules}"), Path::new("t.toml"), &|_| None)
    }

    #[test]
    fn schedules_load_with_defaults() {
        let c = parse(
            "[[schedule]]\nname = \"daily\"\ncron = \"0 9 * * MON-FRI\"\ntimezone = \"Europe/Berlin\"\npersona = \"docs\"\nroom = \"web:lobby\"\nprompt = \"Summarise yesterday, or NO_REPLY.\"\n\n\
             [[schedule]]\nname = \"hourly\"\ncron = \"@hourly\"\npersona = \"docs\"\nroom = \"#ops\"\nthread = \"t1\"\nprompt = \"Anything new?\"\ncatch_up_seconds = 0\n",
        )
        .expect("valid");
        let s = &c.engine.schedules;
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].tz, chrono_tz::Europe::Berlin);
        assert_eq!(s[0].catch_up, std::time::Duration::from_secs(600));
        assert_eq!(s[1].tz, chrono_tz::UTC);
        assert_eq!(s[1].thread.as_ref().map(|t| t.as_str()), Some("t1"));
        assert_eq!(s[1].catch_up, std::time::Duration::ZERO);
    }

    #[test]
    fn mistakes_are_named_at_their_line_and_column() {
        let entry = |cron: &str, tz: &str, persona: &str| {
            format!(
                "[[schedule]]\nname = \"s\"\ncron = \"{cron}\"\ntimezone = \"{tz}\"\npersona = \"{persona}\"\nroom = \"main\"\nprompt = \"p\"\n"
            )
        };
        for (src, at, says) in [
            (entry("0 25 * * *", "UTC", "docs"), "t.toml:11:8", "`cron`"),
            (entry("0 9 * *", "UTC", "docs"), "t.toml:11:8", "five fields"),
            (
                entry("0 9 * * *", "Berlin", "docs"),
                "t.toml:12:12",
                "IANA time zone",
            ),
            (
                entry("0 9 * * *", "UTC", "nobody"),
                "t.toml:13:11",
                "no persona has the id \"nobody\"",
            ),
        ] {
            let e = parse(&src).expect_err("should fail").to_string();
            assert!(e.contains(says) && e.contains(at), "{src}\n→ {e}");
        }
        let twice = format!(
            "{}\n{}",
            entry("@daily", "UTC", "docs"),
            entry("@daily", "UTC", "docs")
        );
        assert!(
            parse(&twice)
                .expect_err("dup")
                .to_string()
                .contains("two schedules are named")
        );
    }
}
