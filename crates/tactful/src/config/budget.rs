//! `budget = { tokens = N, per_seconds = S, notice = "…" }`: a spend
//! budget, on a persona (all its rooms) or in a `[rooms.*]` table (a
//! budget of the room's own for each persona there, or `"off"`).

#[allow(clippy::wildcard_imports)]
use super::*;
use tactful_core::budget::{DEFAULT_BUDGET_NOTICE, MIN_BUDGET_TOKENS, TokenBudget};
use tactful_core::policy::BudgetScope;

/// The longest notice: it is said in the room, so it should be short.
const MAX_NOTICE_CHARS: usize = 500;

/// A `budget` value as written.
#[derive(Debug, Clone)]
pub(super) enum RawBudget {
    Off,
    Limit {
        tokens: u64,
        per_seconds: u64,
        notice: Option<String>,
    },
}

impl<'de> Deserialize<'de> for RawBudget {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawBudget;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`{ tokens = N, per_seconds = S }` or \"off\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawBudget, E> {
                if v == "off" {
                    Ok(RawBudget::Off)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawBudget, A::Error> {
                let (mut tokens, mut per, mut notice) = (None, None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "tokens" => tokens = Some(map.next_value::<u64>()?),
                        "per_seconds" => per = Some(map.next_value::<u64>()?),
                        "notice" => notice = Some(map.next_value::<String>()?),
                        other => {
                            return Err(de::Error::unknown_field(
                                other,
                                &["tokens", "per_seconds", "notice"],
                            ));
                        }
                    }
                }
                let tokens = tokens.ok_or_else(|| de::Error::missing_field("tokens"))?;
                if tokens < MIN_BUDGET_TOKENS {
                    return Err(de::Error::custom(format!(
                        "`tokens` must be at least {MIN_BUDGET_TOKENS}, the smallest estimate of one call (tactful's contract and a full answer); a smaller budget could never pay for one"
                    )));
                }
                let per_seconds = per.unwrap_or(86_400);
                if per_seconds == 0 {
                    return Err(de::Error::custom("`per_seconds` must be at least 1"));
                }
                if let Some(n) = &notice
                    && (n.trim().is_empty() || n.chars().count() > MAX_NOTICE_CHARS)
                {
                    return Err(de::Error::custom(format!(
                        "`notice` must be some text, at most {MAX_NOTICE_CHARS} characters"
                    )));
                }
                Ok(RawBudget::Limit {
                    tokens,
                    per_seconds,
                    notice,
                })
            }
        }
        d.deserialize_any(V)
    }
}

fn limit(tokens: u64, per_seconds: u64, notice: Option<String>) -> TokenBudget {
    TokenBudget {
        tokens,
        per: Duration::from_secs(per_seconds),
        notice: Arc::from(notice.as_deref().map_or(DEFAULT_BUDGET_NOTICE, str::trim)),
    }
}

/// A persona's `budget`: `"off"` is the same as none.
pub(super) fn persona_budget(raw: Option<RawBudget>) -> Option<TokenBudget> {
    match raw? {
        RawBudget::Off => None,
        RawBudget::Limit {
            tokens,
            per_seconds,
            notice,
        } => Some(limit(tokens, per_seconds, notice)),
    }
}

/// A room's `budget`: the room's own, or `"off"` (no budget here, not
/// even the persona's).
pub(super) fn room_budget(raw: RawBudget) -> BudgetScope {
    match raw {
        RawBudget::Off => BudgetScope::Off,
        RawBudget::Limit {
            tokens,
            per_seconds,
            notice,
        } => BudgetScope::Room(limit(tokens, per_seconds, notice)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(src: &str) -> Result<Config, ConfigError> {
        Config::parse(src, Path::new("t.toml"), &|_| None)
    }

    const BASE: &str = r#"
[[persona]]
id = "docs"
agent = "main"
budget = { tokens = 50000 }

[agents.main]
kind = "script"
rules = [{ when = "", reply = "ok" }]
"#;

    #[test]
    fn a_persona_budget_defaults_to_a_day_and_the_stock_notice() {
        let c = parse(BASE).expect("valid");
        let b = c.engine.personas[0].budget.clone().expect("a budget");
        assert_eq!((b.tokens, b.per), (50_000, Duration::from_secs(86_400)));
        assert_eq!(b.notice.as_ref(), DEFAULT_BUDGET_NOTICE);
        let p = c.engine.policies.resolve(&"any".into(), &"docs".into());
        assert_eq!(p.budget, BudgetScope::Persona);
    }

    #[test]
    fn a_room_may_have_its_own_budget_or_none() {
        let src = format!(
            "{BASE}\n[rooms.lab]\nbudget = {{ tokens = 2000, per_seconds = 60, notice = \"  later  \" }}\n[rooms.free]\nbudget = \"off\"\n"
        );
        let c = parse(&src).expect("valid");
        let lab = c.engine.policies.resolve(&"lab".into(), &"docs".into());
        let BudgetScope::Room(b) = lab.budget else {
            panic!("the lab's own: {:?}", lab.budget)
        };
        assert_eq!(
            (b.tokens, b.per, b.notice.as_ref()),
            (2_000, Duration::from_secs(60), "later")
        );
        let free = c.engine.policies.resolve(&"free".into(), &"docs".into());
        assert_eq!(free.budget, BudgetScope::Off);
    }

    #[test]
    fn a_silence_emoji_must_be_one_emoji() {
        let room = |v: &str| format!("{BASE}\n[rooms.default]\nsilence_emoji = {v}\n");
        let e = parse(&room("\":eyes:\"")).expect_err("a shortcode");
        assert!(e.to_string().contains("did you mean \"👀\"?"), "{e}");
        let e = parse(&room("\"looking\"")).expect_err("a word");
        assert!(
            e.to_string()
                .contains("`rooms.default.silence_emoji` must be one emoji"),
            "{e}"
        );
        assert!(parse(&room("\"🤔\"")).is_ok());
    }

    #[test]
    fn a_budget_too_small_or_misspelt_is_refused_with_its_line() {
        let e = parse(&BASE.replace("tokens = 50000", "tokens = 50")).expect_err("too small");
        let shown = e.to_string();
        assert!(
            shown.contains("t.toml:5") && shown.contains(&format!("at least {MIN_BUDGET_TOKENS}")),
            "{shown}"
        );
        // `tokens` is a count, not a secret: the snippet shows it.
        assert!(shown.contains("tokens = 50"), "{shown}");
        let e = parse(&BASE.replace("tokens = 50000", "token = 50000")).expect_err("misspelt");
        let shown = e.to_string();
        assert!(
            shown.contains("unknown field `token`") && shown.contains("`tokens`"),
            "{shown}"
        );
        let e = parse(&BASE.replace("tokens = 50000", "tokens = 5000, notice = \" \"")).expect_err("blank");
        assert!(e.to_string().contains("`notice` must be some text"), "{e}");
    }
}
