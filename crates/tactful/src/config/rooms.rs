//! `[rooms.*]`: each table read and checked into a layer of the engine's
//! policy table (and its `personas.<id>` overrides), with the same rules
//! and messages for the file and for the console's live layers.

#[allow(clippy::wildcard_imports)]
use super::*;
use tactful_core::policy::AddressedSilence;

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum OnErrorName {
    Notice,
    Silent,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum AddressedSilenceName {
    React,
    Notice,
    Silent,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ModeName {
    Mention,
    All,
    Command,
    Observe,
    Ambient,
}

impl From<ModeName> for Mode {
    fn from(m: ModeName) -> Mode {
        match m {
            ModeName::Mention => Mode::Mention,
            ModeName::All => Mode::All,
            ModeName::Command => Mode::Command,
            ModeName::Observe => Mode::Observe,
            ModeName::Ambient => Mode::Ambient,
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoom {
    pub(super) mode: Option<ModeName>,
    pub(super) allow_silence: Option<bool>,
    pub(super) silence_token: Option<Spanned<EnvString>>,
    pub(super) ignore_bots: Option<bool>,
    pub(super) max_bot_turns: Option<Spanned<u32>>,
    pub(super) allowed_users: Option<Vec<EnvString>>,
    pub(super) rate_limit: Option<Spanned<RawRateLimit>>,
    pub(super) unprompted: Option<Spanned<RawRateLimit>>,
    pub(super) budget: Option<super::budget::RawBudget>,
    pub(super) ambient: Option<RawAmbient>,
    pub(super) reply_gate: Option<RawGate>,
    pub(super) floor: Option<RawFloor>,
    pub(super) pre_gate: Option<RawPreGate>,
    pub(super) on_error: Option<OnErrorName>,
    pub(super) addressed_silence: Option<AddressedSilenceName>,
    pub(super) silence_emoji: Option<Spanned<String>>,
    pub(super) silence_notice: Option<Spanned<String>>,
    pub(super) max_reply_chars: Option<Spanned<usize>>,
    pub(super) personas: Option<BTreeMap<Spanned<String>, Spanned<RawRoom>>>,
}

/// `pre_gate = { enabled, phrases, max_chars }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPreGate {
    pub(super) enabled: Option<bool>,
    pub(super) phrases: Option<Vec<Spanned<String>>>,
    pub(super) max_chars: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAmbient {
    pub(super) flush_seconds: Option<Spanned<f64>>,
    pub(super) jitter: Option<Spanned<f64>>,
    pub(super) flush_messages: Option<Spanned<u32>>,
    pub(super) hard_cap: Option<Spanned<u32>>,
    pub(super) cooldown_seconds: Option<Spanned<f64>>,
    pub(super) max_concurrent_flushes: Option<Spanned<usize>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawGate {
    pub(super) enabled: Option<bool>,
    pub(super) agent: Option<Spanned<EnvString>>,
    pub(super) timeout_ms: Option<Spanned<u64>>,
    pub(super) in_ambient: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFloor {
    pub(super) max_speakers: Option<Spanned<u32>>,
    pub(super) strategy: Option<FloorStrategyName>,
    pub(super) pass_timeout_ms: Option<Spanned<u64>>,
}

#[derive(Debug, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(super) enum FloorStrategyName {
    Pass,
    Race,
}

/// `rate_limit = { replies = N, per_seconds = S }` or `rate_limit = "off"`.
#[derive(Debug)]
pub(super) enum RawRateLimit {
    Off,
    Limit { replies: u32, per_seconds: u64 },
}

impl<'de> Deserialize<'de> for RawRateLimit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawRateLimit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`{ replies = N, per_seconds = S }` or \"off\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawRateLimit, E> {
                if v == "off" {
                    Ok(RawRateLimit::Off)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawRateLimit, A::Error> {
                let (mut replies, mut per) = (None, None);
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "replies" => replies = Some(map.next_value::<u32>()?),
                        "per_seconds" => per = Some(map.next_value::<u64>()?),
                        other => {
                            return Err(de::Error::unknown_field(other, &["replies", "per_seconds"]));
                        }
                    }
                }
                let replies = replies.ok_or_else(|| de::Error::missing_field("replies"))?;
                let per_seconds = per.ok_or_else(|| de::Error::missing_field("per_seconds"))?;
                if replies == 0 {
                    return Err(de::Error::custom(
                        "`replies` must be at least 1 (use rate_limit = \"off\" for no limit, or mode = \"observe\" for no replies)",
                    ));
                }
                if per_seconds == 0 {
                    return Err(de::Error::custom("`per_seconds` must be at least 1"));
                }
                Ok(RawRateLimit::Limit { replies, per_seconds })
            }
        }
        d.deserialize_any(V)
    }
}

/// What checking one `[rooms.*]` table needs to know.
pub(super) struct LayerCtx<'a> {
    pub(super) personas: &'a [PersonaSpec],
    pub(super) agents: &'a BTreeMap<String, AgentConfig>,
    pub(super) check: &'a Checker<'a>,
    pub(super) is_default: bool,
}

/// One `[rooms.*]` table and its `personas` overrides; also returns
/// `ambient.max_concurrent_flushes` when this (default) table sets it.
pub(super) fn room_layer(
    key: &str,
    table: RawRoom,
    ctx: &LayerCtx<'_>,
) -> Result<(RoomLayer, Option<usize>), ConfigError> {
    let check = ctx.check;
    let mut layer = RoomLayer::default();
    let nested = table.personas;
    let (all, flushes) = patch(
        key,
        RawRoom {
            personas: None,
            ..table
        },
        ctx,
        ctx.is_default,
    )?;
    layer.all = all;
    for (pid, sub) in nested.into_iter().flatten() {
        let Some(spec) = ctx.personas.iter().find(|p| p.id.as_str() == pid.get_ref()) else {
            return Err(check.at(
                pid.span(),
                format!(
                    "`{key}.personas.{}` names no persona (ids: {})",
                    pid.get_ref(),
                    persona_ids(ctx.personas)
                ),
            ));
        };
        let sub_key = format!("{key}.personas.{}", pid.get_ref());
        let span = sub.span();
        let sub = sub.into_inner();
        if sub.personas.is_some() {
            return Err(check.at(
                span,
                format!("`{sub_key}.personas`: per-persona overrides do not nest"),
            ));
        }
        layer
            .personas
            .insert(spec.id.clone(), patch(&sub_key, sub, ctx, false)?.0);
    }
    Ok((layer, flushes))
}

pub(super) fn patch(
    key: &str,
    t: RawRoom,
    ctx: &LayerCtx<'_>,
    flushes_allowed: bool,
) -> Result<(PolicyPatch, Option<usize>), ConfigError> {
    let check = ctx.check;
    let mut p = PolicyPatch {
        mode: t.mode.map(Mode::from),
        allow_silence: t.allow_silence,
        ignore_bots: t.ignore_bots,
        allowed_users: t.allowed_users.map(|v| v.into_iter().map(|s| s.0).collect()),
        on_error: t.on_error.map(|o| match o {
            OnErrorName::Notice => OnError::Notice,
            OnErrorName::Silent => OnError::Silent,
        }),
        addressed_silence: t.addressed_silence.map(|a| match a {
            AddressedSilenceName::React => AddressedSilence::React,
            AddressedSilenceName::Notice => AddressedSilence::Notice,
            AddressedSilenceName::Silent => AddressedSilence::Silent,
        }),
        ..Default::default()
    };
    if let Some(e) = t.silence_emoji {
        // One emoji, as Unicode: what every platform's reaction takes
        // (Slack gets its shortcode from it).
        let value = e.get_ref().trim();
        if emojis::get(value).is_none() {
            let hint = emojis::get_by_shortcode(value.trim_matches(':'))
                .map(|found| format!(" (did you mean \"{}\"?)", found.as_str()))
                .unwrap_or_default();
            return Err(check.at(
                e.span(),
                format!("`{key}.silence_emoji` must be one emoji, such as \"👀\"{hint}"),
            ));
        }
        p.silence_emoji = Some(Arc::from(value));
    }
    if let Some(n) = t.silence_notice {
        let value = n.get_ref().trim();
        if value.is_empty() || value.chars().count() > 500 {
            return Err(check.at(
                n.span(),
                format!("`{key}.silence_notice` must be some text, at most 500 characters"),
            ));
        }
        p.silence_notice = Some(Arc::from(value));
    }
    if let Some(tok) = t.silence_token {
        let value = tok.get_ref().0.trim();
        if value.is_empty() {
            return Err(check.at(tok.span(), format!("`{key}.silence_token` must not be blank")));
        }
        p.silence_token = Some(Arc::from(value));
    }
    if let Some(n) = t.max_bot_turns {
        if *n.get_ref() == 0 {
            return Err(check.at(
                n.span(),
                format!(
                    "`{key}.max_bot_turns` must be at least 1 (set ignore_bots = true to never answer bots)"
                ),
            ));
        }
        p.max_bot_turns = Some(*n.get_ref());
    }
    if let Some(g) = t.pre_gate {
        p.pre_gate_enabled = g.enabled;
        p.pre_gate_max_chars = g.max_chars;
        if let Some(list) = g.phrases {
            let mut phrases = Vec::new();
            for ph in list {
                let v = ph
                    .get_ref()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_lowercase();
                if v.is_empty() || v.contains('?') {
                    return Err(check.at(
                        ph.span(),
                        format!("`{key}.pre_gate.phrases` entries must be words, not blank and without `?`"),
                    ));
                }
                phrases.push(Arc::<str>::from(v));
            }
            p.pre_gate_phrases = Some(phrases.into());
        }
    }
    let budget = |rl: Spanned<RawRateLimit>| match rl.into_inner() {
        RawRateLimit::Off => None,
        RawRateLimit::Limit { replies, per_seconds } => Some(RateLimit {
            replies,
            per: Duration::from_secs(per_seconds),
        }),
    };
    p.rate_limit = t.rate_limit.map(budget);
    p.unprompted = t.unprompted.map(budget);
    p.budget = t.budget.map(super::budget::room_budget);
    let mut flushes = None;
    if let Some(a) = t.ambient {
        let k = |name: &str| format!("{key}.ambient.{name}");
        let mut ap = AmbientPatch::default();
        if let Some(v) = &a.flush_seconds {
            ap.flush_after = Some(seconds(v, &k("flush_seconds"), true, check)?);
        }
        if let Some(v) = &a.jitter {
            let x = *v.get_ref();
            if !(0.0..1.0).contains(&x) {
                return Err(check.at(
                    v.span(),
                    format!(
                        "`{}` must be at least 0 and less than 1 (a fraction of flush_seconds), got {x}",
                        k("jitter")
                    ),
                ));
            }
            ap.jitter = Some(x);
        }
        if let Some(v) = &a.flush_messages {
            ap.flush_messages = Some(at_least(v, 1, &k("flush_messages"), check)?);
        }
        if let Some(v) = &a.hard_cap {
            ap.hard_cap = Some(at_least(v, 1, &k("hard_cap"), check)?);
        }
        if let Some(v) = &a.cooldown_seconds {
            ap.cooldown = Some(seconds(v, &k("cooldown_seconds"), false, check)?);
        }
        if let Some(v) = &a.max_concurrent_flushes {
            if !flushes_allowed {
                return Err(check.at(
                    v.span(),
                    format!(
                        "`{}` is process-wide: set it in [rooms.default.ambient]",
                        k("max_concurrent_flushes")
                    ),
                ));
            }
            flushes = Some(at_least(v, 1, &k("max_concurrent_flushes"), check)?);
        }
        p.ambient = ap;
    }
    if let Some(g) = t.reply_gate {
        let mut gp = GatePatch {
            enabled: g.enabled,
            in_ambient: g.in_ambient,
            ..Default::default()
        };
        if let Some(agent) = &g.agent {
            let name = &agent.get_ref().0;
            if !ctx.agents.contains_key(name) {
                return Err(check.at(
                    agent.span(),
                    format!("`{key}.reply_gate.agent` = {name:?} names no [agents.{name}] table"),
                ));
            }
            gp.agent = Some(Arc::from(name.as_str()));
        }
        if let Some(v) = &g.timeout_ms {
            gp.timeout = Some(Duration::from_millis(at_least(
                v,
                1,
                &format!("{key}.reply_gate.timeout_ms"),
                check,
            )?));
        }
        p.reply_gate = gp;
    }
    if let Some(v) = &t.max_reply_chars {
        p.max_reply_chars = Some(at_least(v, 100, &format!("{key}.max_reply_chars"), check)?);
    }
    if let Some(f) = t.floor {
        if let Some(v) = &f.max_speakers {
            p.floor_max_speakers = Some(at_least(v, 1, &format!("{key}.floor.max_speakers"), check)?);
        }
        p.floor_strategy = f.strategy.map(|s| match s {
            FloorStrategyName::Pass => tactful_core::policy::FloorStrategy::Pass,
            FloorStrategyName::Race => tactful_core::policy::FloorStrategy::Race,
        });
        if let Some(v) = &f.pass_timeout_ms {
            let ms = at_least(v, 100, &format!("{key}.floor.pass_timeout_ms"), check)?;
            p.floor_pass_timeout = Some(Duration::from_millis(ms));
        }
    }
    Ok((p, flushes))
}

/// Checks that need every layer: combinations that are each valid alone
/// but not together.
pub(super) fn check_resolved(
    policies: &PolicyTable,
    personas: &[PersonaSpec],
    check: &Checker<'_>,
) -> Result<(), ConfigError> {
    let ids: Vec<PersonaId> = personas.iter().map(|p| p.id.clone()).collect();
    if let Some((room, persona)) = policies.gate_without_agent(&ids) {
        let room = room.map_or("rooms.default".to_owned(), |r| {
            format!("rooms.{}", quote_key(r.as_str()))
        });
        return Err(check.nowhere(format!(
            "reply_gate is enabled for persona `{persona}` in [{room}] but no `reply_gate.agent` is set for it"
        )));
    }
    let rooms =
        std::iter::once(RoomId::new("")).chain(policies.rooms.keys().chain(policies.live.keys()).cloned());
    for room in rooms {
        let where_ = if room.as_str().is_empty() {
            "rooms.default".to_owned()
        } else {
            format!("rooms.{}", quote_key(room.as_str()))
        };
        for id in &ids {
            let p = policies.resolve(&room, id);
            if p.mode == Mode::Ambient && !p.allow_silence {
                return Err(check.nowhere(format!(
                    "persona `{id}` in [{where_}]: mode = \"ambient\" needs allow_silence = true (an ambient batch usually ends in silence)"
                )));
            }
            if p.ambient.flush_messages > p.ambient.hard_cap {
                return Err(check.nowhere(format!(
                    "persona `{id}` in [{where_}]: ambient.flush_messages ({}) exceeds ambient.hard_cap ({})",
                    p.ambient.flush_messages, p.ambient.hard_cap
                )));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tactful_core::policy::FloorStrategy;

    use crate::config::Config;

    fn with_floor(floor: &str) -> String {
        format!(
            "[[persona]]\nid = \"docs\"\nagent = \"a\"\n\n[agents.a]\nkind = \"script\"\nrules = []\n\n[rooms.lobby]\nfloor = {floor}\n"
        )
    }

    #[test]
    fn the_floor_strategy_and_its_timeout_are_read_and_checked() {
        let c = Config::parse(
            &with_floor("{ strategy = \"race\", pass_timeout_ms = 1500 }"),
            Path::new("t.toml"),
            &|_| None,
        )
        .expect("valid");
        let p = c.engine.policies.resolve(&"lobby".into(), &"docs".into());
        assert_eq!(p.floor_strategy, FloorStrategy::Race);
        assert_eq!(p.floor_pass_timeout, std::time::Duration::from_millis(1500));
        let d = c.engine.policies.resolve(&"elsewhere".into(), &"docs".into());
        assert_eq!(d.floor_strategy, FloorStrategy::Pass, "pass by default");

        let e = Config::parse(
            &with_floor("{ strategy = \"shout\" }"),
            Path::new("t.toml"),
            &|_| None,
        )
        .expect_err("unknown strategy")
        .to_string();
        assert!(
            e.starts_with("t.toml:10:") && e.contains("unknown variant `shout`"),
            "{e}"
        );
        let e = Config::parse(
            &with_floor("{ pass_timeout_ms = 5 }"),
            Path::new("t.toml"),
            &|_| None,
        )
        .expect_err("too short")
        .to_string();
        assert!(
            e.contains("`rooms.lobby.floor.pass_timeout_ms` must be at least 100, got 5"),
            "{e}"
        );
    }

    #[test]
    fn pre_gate_phrases_are_read_lower_case_and_a_question_is_refused() {
        let cfg = |g: &str| format!("{}pre_gate = {g}\n", with_floor("{ max_speakers = 1 }"));
        let c = Config::parse(
            &cfg("{ phrases = [\"  ACK  it \"], max_chars = 0 }"),
            Path::new("t.toml"),
            &|_| None,
        )
        .expect("valid");
        let p = c.engine.policies.resolve(&"lobby".into(), &"docs".into());
        assert_eq!(&*p.pre_gate.phrases, [std::sync::Arc::<str>::from("ack it")]);
        assert_eq!(p.pre_gate.max_chars, 0);
        let e = Config::parse(&cfg("{ phrases = [\"ok?\"] }"), Path::new("t.toml"), &|_| None)
            .expect_err("a question")
            .to_string();
        assert!(
            e.starts_with("t.toml:11:") && e.contains("pre_gate.phrases"),
            "{e}"
        );
    }
}
