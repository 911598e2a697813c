//! `[[hook]]`: before-send hooks, read and checked.
//!
//! Each entry becomes two halves: the engine's [`HookScope`] (which
//! replies pass through it, so the trace and replay show its effect) and
//! the runner's [`Hook`] (what it does). A mistake is reported at its key's
//! line: an unknown persona, a pattern that is not a regular expression, a
//! command hook without a command.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use tactful_agents::hooks::{
    CommandHook, DEFAULT_HOOK_TIMEOUT, DEFAULT_REDACTION, Hook, HookKind, Hooks, OnError,
};
use tactful_config::{Checker, ConfigError, EnvString};
use tactful_core::hooks::HookScope;
use tactful_core::{PersonaId, PersonaSpec, RoomId};
use toml::Spanned;

use super::paths;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHook {
    name: Spanned<String>,
    on: Spanned<String>,
    kind: Spanned<String>,
    personas: Option<Vec<Spanned<String>>>,
    rooms: Option<Vec<Spanned<String>>>,
    // redact, block
    patterns: Option<Spanned<Vec<Spanned<String>>>>,
    with: Option<Spanned<String>>,
    // command
    command: Option<Spanned<EnvString>>,
    #[serde(default)]
    args: Vec<EnvString>,
    #[serde(default)]
    env: BTreeMap<String, EnvString>,
    working_dir: Option<Spanned<EnvString>>,
    timeout_ms: Option<Spanned<u64>>,
    on_error: Option<Spanned<String>>,
}

/// The hooks of a config: the engine's scopes and the runner's hooks, in
/// file order.
pub(super) fn build(
    raw: Vec<RawHook>,
    personas: &[PersonaSpec],
    check: &Checker<'_>,
) -> Result<(Vec<HookScope>, Hooks), ConfigError> {
    let mut scopes = Vec::new();
    let mut hooks = Vec::new();
    for h in raw {
        let name = h.name.get_ref().trim().to_owned();
        if name.is_empty() || name.chars().any(|c| c.is_control()) {
            return Err(check.at(
                h.name.span(),
                "`hook.name` must be a short name, like \"no-secrets\"",
            ));
        }
        if scopes.iter().any(|s: &HookScope| *s.name == *name) {
            return Err(check.at(h.name.span(), format!("two hooks are named \"{name}\"")));
        }
        let key = |k: &str| format!("hook \"{name}\": `{k}`");
        if h.on.get_ref() != "before_send" {
            return Err(check.at(
                h.on.span(),
                format!(
                    "{} must be \"before_send\" (the only hook point so far)",
                    key("on")
                ),
            ));
        }
        let mut scope_personas = Vec::new();
        for p in h.personas.iter().flatten() {
            if !personas.iter().any(|s| s.id.as_str() == p.get_ref()) {
                return Err(check.at(
                    p.span(),
                    format!("{}: no persona has the id \"{}\"", key("personas"), p.get_ref()),
                ));
            }
            scope_personas.push(PersonaId::new(p.get_ref().as_str()));
        }
        let rooms = h
            .rooms
            .iter()
            .flatten()
            .map(|r| RoomId::new(r.get_ref().as_str()))
            .collect();
        let kind = match h.kind.get_ref().as_str() {
            "redact" => HookKind::Redact {
                patterns: patterns(&h, &key, check)?,
                with: h
                    .with
                    .as_ref()
                    .map_or_else(|| DEFAULT_REDACTION.to_owned(), |w| w.get_ref().clone()),
            },
            "block" => {
                if let Some(w) = &h.with {
                    return Err(check.at(w.span(), format!("{} is for kind = \"redact\" only", key("with"))));
                }
                HookKind::Block {
                    patterns: patterns(&h, &key, check)?,
                }
            }
            "command" => HookKind::Command(command(&h, &key, check)?),
            other => {
                return Err(check.at(
                    h.kind.span(),
                    format!(
                        "{} must be \"command\", \"redact\" or \"block\", not \"{other}\"",
                        key("kind")
                    ),
                ));
            }
        };
        // Keys of the other kinds are mistakes worth a clear word.
        let is_command = matches!(kind, HookKind::Command(_));
        let misplaced = if is_command {
            h.patterns.as_ref().map(|p| ("patterns", p.span()))
        } else {
            [
                h.command.as_ref().map(|c| ("command", c.span())),
                h.timeout_ms.as_ref().map(|c| ("timeout_ms", c.span())),
                h.on_error.as_ref().map(|c| ("on_error", c.span())),
                h.working_dir.as_ref().map(|c| ("working_dir", c.span())),
            ]
            .into_iter()
            .flatten()
            .next()
        };
        if let Some((k, span)) = misplaced {
            return Err(check.at(
                span,
                format!("{} does not belong to kind = \"{}\"", key(k), h.kind.get_ref()),
            ));
        }
        let name: Arc<str> = Arc::from(name);
        scopes.push(HookScope {
            name: name.clone(),
            personas: scope_personas,
            rooms,
        });
        hooks.push(Hook { name, kind });
    }
    Ok((scopes, Hooks::new(hooks)))
}

fn patterns(
    h: &RawHook,
    key: &dyn Fn(&str) -> String,
    check: &Checker<'_>,
) -> Result<Vec<Regex>, ConfigError> {
    let Some(list) = &h.patterns else {
        return Err(check.at(
            h.kind.span(),
            format!("{} is required: patterns = [\"<regex>\", …]", key("patterns")),
        ));
    };
    if list.get_ref().is_empty() {
        return Err(check.at(list.span(), format!("{} is empty", key("patterns"))));
    }
    list.get_ref()
        .iter()
        .map(|p| {
            Regex::new(p.get_ref()).map_err(|e| {
                check.at(
                    p.span(),
                    format!("{}: not a valid regular expression: {e}", key("patterns")),
                )
            })
        })
        .collect()
}

fn command(
    h: &RawHook,
    key: &dyn Fn(&str) -> String,
    check: &Checker<'_>,
) -> Result<CommandHook, ConfigError> {
    let Some(command) = &h.command else {
        return Err(check.at(
            h.kind.span(),
            format!("{} is required for kind = \"command\"", key("command")),
        ));
    };
    if command.get_ref().0.trim().is_empty() {
        return Err(check.at(command.span(), format!("{} must not be empty", key("command"))));
    }
    let timeout = match &h.timeout_ms {
        Some(t) if *t.get_ref() == 0 => {
            return Err(check.at(t.span(), format!("{} must be at least 1", key("timeout_ms"))));
        }
        Some(t) => Duration::from_millis(*t.get_ref()),
        None => DEFAULT_HOOK_TIMEOUT,
    };
    let on_error = match h.on_error.as_ref().map(|o| (o, o.get_ref().as_str())) {
        None | Some((_, "send")) => OnError::Send,
        Some((_, "cancel")) => OnError::Cancel,
        Some((o, other)) => {
            return Err(check.at(
                o.span(),
                format!(
                    "{} must be \"send\" or \"cancel\", not \"{other}\"",
                    key("on_error")
                ),
            ));
        }
    };
    Ok(CommandHook {
        command: paths::program(&command.get_ref().0, check.path),
        args: h.args.iter().map(|a| a.0.clone()).collect(),
        env: h.env.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect(),
        working_dir: paths::working_dir(h.working_dir.as_ref().map(|d| d.get_ref().0.as_str()), check.path),
        timeout,
        on_error,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::Config;
    use tactful_agents::hooks::{HookKind, OnError};

    const BASE: &str =
        "[[persona]]\nid = \"docs\"\nagent = \"main\"\n\n[agents.main]\nkind = \"script\"\nrules = []\n";

    fn parse(hooks: &str) -> Result<Config, tactful_config::ConfigError> {
        Config::parse(&format!("{BASE}\n{hooks}"), Path::new("t.toml"), &|k| {
            (k == "TOKEN").then(|| "s3cret-hook-token".to_owned())
        })
    }

    fn err(hooks: &str) -> String {
        parse(hooks).expect_err("should fail").to_string()
    }

    #[test]
    fn hooks_load_in_order_with_their_scopes_and_defaults() {
        let c = parse(
            "[[hook]]\nname = \"mail\"\non = \"before_send\"\nkind = \"redact\"\npatterns = ['\\w+@\\w+']\n\n\
             [[hook]]\nname = \"check\"\non = \"before_send\"\nkind = \"command\"\ncommand = \"./check\"\npersonas = [\"docs\"]\nrooms = [\"web:lobby\"]\nenv = { API_TOKEN = \"${TOKEN}\" }\n",
        )
        .expect("valid");
        let names: Vec<&str> = c.engine.hooks.iter().map(|h| h.name.as_ref()).collect();
        assert_eq!(names, ["mail", "check"]);
        assert!(c.engine.hooks[0].personas.is_empty() && c.engine.hooks[0].rooms.is_empty());
        assert_eq!(c.engine.hooks[1].rooms, [tactful_core::RoomId::new("web:lobby")]);
        let hooks: Vec<_> = c.hooks.iter().collect();
        match &hooks[0].kind {
            HookKind::Redact { with, .. } => assert_eq!(with, "[redacted]"),
            other => panic!("{other:?}"),
        }
        match &hooks[1].kind {
            HookKind::Command(cmd) => {
                assert_eq!(cmd.on_error, OnError::Send);
                assert_eq!(cmd.timeout, std::time::Duration::from_secs(5));
            }
            other => panic!("{other:?}"),
        }
        // A token in a hook's env is a secret like an agent's.
        assert!(c.secrets().contains(&"s3cret-hook-token".to_owned()));
    }

    #[test]
    fn mistakes_are_named_at_their_line() {
        let hook = |rest: &str| format!("[[hook]]\nname = \"h\"\non = \"before_send\"\n{rest}");
        for (src, line, says) in [
            (
                hook("kind = \"redact\"\npatterns = ['(unclosed']\n"),
                13,
                "not a valid regular expression",
            ),
            (hook("kind = \"block\"\n"), 12, "`patterns` is required"),
            (hook("kind = \"command\"\n"), 12, "`command` is required"),
            (
                hook("kind = \"command\"\ncommand = \"x\"\non_error = \"ignore\"\n"),
                14,
                "\"send\" or \"cancel\"",
            ),
            (
                hook("kind = \"command\"\ncommand = \"x\"\ntimeout_ms = 0\n"),
                14,
                "at least 1",
            ),
            (
                hook("kind = \"redact\"\npatterns = ['x']\npersonas = [\"nobody\"]\n"),
                14,
                "no persona has the id \"nobody\"",
            ),
            (
                hook("kind = \"redact\"\npatterns = ['x']\ncommand = \"y\"\n"),
                14,
                "does not belong",
            ),
            (
                hook("kind = \"block\"\npatterns = ['x']\nwith = \"y\"\n"),
                14,
                "for kind = \"redact\" only",
            ),
            (
                hook("kind = \"mask\"\n"),
                12,
                "\"command\", \"redact\" or \"block\"",
            ),
            (
                "[[hook]]\nname = \"h\"\non = \"after_send\"\nkind = \"block\"\npatterns = ['x']\n"
                    .to_owned(),
                11,
                "before_send",
            ),
            (
                format!(
                    "{}\n{}",
                    hook("kind = \"block\"\npatterns = ['x']\n"),
                    hook("kind = \"block\"\npatterns = ['y']\n")
                ),
                16,
                "two hooks are named",
            ),
        ] {
            let e = err(&src);
            assert!(e.contains(says), "{src}\n→ {e}");
            assert!(e.contains(&format!("t.toml:{line}:")), "{src}\n→ {e}");
        }
    }
}
