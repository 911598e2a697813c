//! Scheduled turns: a persona speaks in a room at set times, unasked.
//!
//! A `[[schedule]]` names a cron expression, a time zone, a persona, a
//! room and a prompt. The engine fires it as a turn of its own kind
//! ([`crate::TurnKind::Schedule`]): never gated, never subject to floor
//! control or the unaddressed-reply rules, free to end in silence, and
//! counted against the persona's rate limit in that room. Computing the
//! next run is pure (the cron pattern and the IANA zone rules are data),
//! so the engine stays free of clocks and `tactful replay` runs schedules
//! on virtual time, daylight-saving changes included.
//!
//! Cron expressions are parsed by [`croner`] (five fields, an optional
//! leading seconds field, `@hourly`/`@daily`/`@weekly`…, OCPS semantics
//! for daylight-saving gaps and overlaps); time zones come from
//! [`chrono_tz`], which compiles the IANA database into the binary: no
//! file is read, and a replay gives the same times on every machine.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeZone as _;
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::ids::{PersonaId, RoomId, ThreadId};
use crate::time::Timestamp;

/// How long after a missed run a restart still makes up for it, unless a
/// schedule says otherwise.
pub const DEFAULT_CATCH_UP: Duration = Duration::from_secs(10 * 60);

/// One `[[schedule]]`.
#[derive(Clone, Debug)]
pub struct Schedule {
    /// Unique name; the trace, the store and the room's line say it.
    pub name: Arc<str>,
    /// The expression as written (for `tactful check` and traces).
    pub expr: Arc<str>,
    /// The parsed expression.
    pub cron: Cron,
    /// The zone the expression is read in.
    pub tz: chrono_tz::Tz,
    /// Who speaks.
    pub persona: PersonaId,
    /// Where, as the platform names the room (`web:lobby`, `tg:-100…`).
    pub room: RoomId,
    /// The thread to post in, if any.
    pub thread: Option<ThreadId>,
    /// What the agent is asked, as the newest instruction of the turn.
    pub prompt: Arc<str>,
    /// A run missed while tactful was down is made up at start when it is
    /// at most this old; older ones are let go (never a burst).
    pub catch_up: Duration,
}

/// Parses a cron expression: five fields (minute, hour, day of month,
/// month, day of week), or six with seconds first, or an `@` nickname.
pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    let fields = expr.split_whitespace().count();
    if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
        return Err(format!(
            "a cron expression has five fields (minute hour day-of-month month day-of-week), or six with seconds first; this one has {fields}"
        ));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| e.to_string())
}

/// Reads an IANA time zone name (`Europe/Berlin`, `UTC`).
pub fn parse_tz(name: &str) -> Result<chrono_tz::Tz, String> {
    name.parse::<chrono_tz::Tz>()
        .map_err(|_| format!("\"{name}\" is not an IANA time zone name (like \"Europe/Berlin\" or \"UTC\")"))
}

impl Schedule {
    /// The first run strictly after `t`, or `None` when the expression
    /// never matches again (a date that does not come back).
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        let ms = i64::try_from(t.as_millis()).ok()?;
        let mut from = self.tz.timestamp_millis_opt(ms).single()?;
        // Whole seconds only: a run at 08:00:00 is not "after" 08:00:00.5.
        for _ in 0..2 {
            let next = self.cron.find_next_occurrence(&from, false).ok()?;
            let at = u64::try_from(next.timestamp_millis()).ok()?;
            if at > t.as_millis() {
                return Some(Timestamp::from_millis(at));
            }
            from = next;
        }
        None
    }

    /// The run a start at `now` makes up for, if any: the latest one after
    /// `last_run` and at most [`Schedule::catch_up`] before `now`.
    pub fn missed(&self, last_run: Timestamp, now: Timestamp) -> Option<Timestamp> {
        let window = Timestamp::from_millis(now.as_millis().saturating_sub(self.catch_up.as_millis() as u64));
        // Runs before the window are let go; starting the search there keeps
        // it short however long tactful was down.
        let mut from = last_run.max(Timestamp::from_millis(window.as_millis().saturating_sub(1)));
        let mut latest = None;
        while let Some(t) = self.next_after(from).filter(|t| *t <= now) {
            latest = Some(t);
            from = t;
        }
        latest
    }

    /// `t` as a local time in the schedule's zone, for people to read.
    pub fn local(&self, t: Timestamp) -> String {
        i64::try_from(t.as_millis())
            .ok()
            .and_then(|ms| self.tz.timestamp_millis_opt(ms).single())
            .map_or_else(
                || t.to_rfc3339(),
                |d| d.format("%Y-%m-%d %H:%M:%S %Z").to_string(),
            )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rfc3339: &str) -> Timestamp {
        let d = chrono::DateTime::parse_from_rfc3339(rfc3339).expect("time");
        Timestamp::from_millis(d.timestamp_millis() as u64)
    }

    fn daily(expr: &str, tz: &str) -> Schedule {
        Schedule {
            name: "s".into(),
            expr: expr.into(),
            cron: parse_cron(expr).expect("cron"),
            tz: parse_tz(tz).expect("tz"),
            persona: PersonaId::new("docs"),
            room: RoomId::new("main"),
            thread: None,
            prompt: "p".into(),
            catch_up: DEFAULT_CATCH_UP,
        }
    }

    #[test]
    fn local_times_hold_across_a_daylight_saving_change() {
        let s = daily("0 9 * * *", "Europe/Berlin");
        let first = s.next_after(at("2026-03-28T00:00:00Z")).expect("next");
        assert_eq!(first, at("2026-03-28T08:00:00Z"), "09:00 CET");
        let second = s.next_after(first).expect("next");
        assert_eq!(second, at("2026-03-29T07:00:00Z"), "09:00 CEST, after the change");
        assert_eq!(s.local(second), "2026-03-29 09:00:00 CEST");
    }

    #[test]
    fn a_run_is_strictly_after_and_whole_seconds() {
        let s = daily("@hourly", "UTC");
        assert_eq!(
            s.next_after(at("2026-01-01T08:00:00Z")),
            Some(at("2026-01-01T09:00:00Z"))
        );
        assert_eq!(
            s.next_after(Timestamp::from_millis(
                at("2026-01-01T08:00:00Z").as_millis() + 500
            )),
            Some(at("2026-01-01T09:00:00Z"))
        );
        let every2 = daily("*/2 * * * * *", "UTC");
        assert_eq!(
            every2.next_after(at("2026-01-01T08:00:01Z")),
            Some(at("2026-01-01T08:00:02Z"))
        );
    }

    #[test]
    fn only_a_recent_missed_run_is_made_up_and_only_once() {
        let s = daily("0 8 * * *", "UTC");
        let last = at("2026-01-01T08:00:00Z");
        // Down for a day, back 5 minutes after today's run: made up once.
        assert_eq!(
            s.missed(last, at("2026-01-02T08:05:00Z")),
            Some(at("2026-01-02T08:00:00Z"))
        );
        // Back 20 minutes after: too late, let go.
        assert_eq!(s.missed(last, at("2026-01-02T08:20:00Z")), None);
        // Nothing missed.
        assert_eq!(s.missed(last, at("2026-01-01T12:00:00Z")), None);
        // Every minute, down for a year: one run at most.
        let m = daily("* * * * *", "UTC");
        assert_eq!(
            m.missed(last, at("2027-01-01T08:00:30Z")),
            Some(at("2027-01-01T08:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_refused_in_words() {
        for bad in [
            "",
            "* * * *",
            "61 * * * *",
            "* * * * * * *",
            "@sometimes",
            "0 9 * * MON-FOO",
        ] {
            assert!(parse_cron(bad).is_err(), "{bad:?}");
        }
        assert!(parse_tz("Europe/Berlin").is_ok());
        assert!(
            parse_tz("Mars/Olympus")
                .expect_err("no such zone")
                .contains("IANA")
        );
    }
}
