//! Unknown keys in tactful's own tables, explained with the keys valid
//! where they were written.
//!
//! serde lists the fields of the struct it was reading, which is not
//! always what the author may write there: the platforms' parts are cut
//! out before the rest is read (so `platforms` at the top and `telegram =
//! {…}` on a persona are missing from serde's lists), and one struct reads
//! every agent kind (so a `kb` agent's typo listed all 19 keys of all
//! kinds). This module puts those right, and adds "did you mean" for a
//! near miss.

use tactful_config::UnknownKey;

use super::AgentKind;
use super::agents::keys_of;

/// serde's `message` about the key at byte `at` of `src`, made helpful;
/// other messages are returned as they are.
pub(super) fn explain(message: &str, src: &str, at: Option<usize>) -> String {
    let Some(u) = UnknownKey::parse(message) else {
        return message.to_owned();
    };
    let mut valid: Vec<&str> = u.expected.iter().map(String::as_str).collect();
    let has = |k: &str| u.expected.iter().any(|e| e == k);
    let header = at.map(|a| table_header(src, a)).unwrap_or_default();
    if header.is_empty() && has("persona") {
        valid.push("platforms");
    } else if header == "[[persona]]" && has("agent") && has("id") {
        valid.extend(super::platforms::names());
    } else if let Some(name) = header.strip_prefix("[agents.").and_then(|h| h.strip_suffix(']'))
        && has("rules")
        && has("paths")
        && let Some(kind) = kind_of(src, name.trim_matches('"'))
    {
        valid = keys_of(kind);
    }
    u.message(&valid)
}

/// The `[table]` or `[[array]]` header the line at byte `at` falls under,
/// trimmed; empty at the top of the file.
fn table_header(src: &str, at: usize) -> &str {
    let before = &src[..at.min(src.len())];
    before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .map(|l| l.split('#').next().unwrap_or(l).trim())
        .unwrap_or_default()
}

/// The kind agent `name` says it is, read again from the file (only on
/// this error's path).
fn kind_of(src: &str, name: &str) -> Option<AgentKind> {
    let table: toml::Table = toml::from_str(src).ok()?;
    let kind = table.get("agents")?.get(name)?.get("kind")?.as_str()?;
    [
        AgentKind::Script,
        AgentKind::Command,
        AgentKind::OpenAi,
        AgentKind::Acp,
        AgentKind::Kb,
    ]
    .into_iter()
    .find(|k| k.name() == kind)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    fn error(src: &str) -> String {
        Config::parse(src, Path::new("t.toml"), &|_| None)
            .expect_err("should fail")
            .to_string()
    }

    const PERSONA: &str = "[[persona]]\nid = \"docs\"\nagent = \"main\"\n";
    const AGENT: &str = "\n[agents.main]\nkind = \"script\"\nrules = []\n";

    #[test]
    fn the_top_level_lists_platforms_and_suggests_it() {
        let e = error(&format!("platfroms = 1\n{PERSONA}{AGENT}"));
        assert!(e.starts_with("t.toml:1:1: unknown field `platfroms`"), "{e}");
        assert!(
            e.contains("`platforms`") && e.contains("(did you mean `platforms`?)"),
            "{e}"
        );
    }

    #[test]
    fn a_persona_lists_every_platform_it_may_have_an_account_on() {
        let e = error(&format!("{PERSONA}telegam = {{ token = \"x\" }}\n{AGENT}"));
        for p in [
            "`telegram`",
            "`irc`",
            "`matrix`",
            "`discord`",
            "`slack`",
            "`web`",
            "`prompt`",
        ] {
            assert!(e.contains(p), "{p} in {e}");
        }
        assert!(e.contains("(did you mean `telegram`?)"), "{e}");
    }

    #[test]
    fn an_agent_lists_its_own_kinds_keys_only() {
        let e = error(&format!(
            "{PERSONA}\n[agents.main]\nkind = \"kb\"\npaths = [\"docs\"]\nmin_scor = 0.2\n"
        ));
        assert!(
            e.contains(
                "unknown field `min_scor`, expected one of `kind`, `paths`, `min_score`, `questions`, `answer_with`, `strip_reasoning` (did you mean `min_score`?)"
            ),
            "{e}"
        );
        // A quoted name, and a key of another kind: still that kind's list.
        let e = error(&format!(
            "{PERSONA}\n[agents.\"main\"]\nkind = \"script\"\nrules = []\nbase_ur = \"x\"\n"
        ));
        assert!(
            e.contains("unknown field `base_ur`, expected one of `kind`, `rules`, `strip_reasoning`"),
            "{e}"
        );
    }

    #[test]
    fn a_nested_table_keeps_its_own_list() {
        let e = error(&format!(
            "{PERSONA}{AGENT}\n[rooms.default]\nfloor = {{ stratgy = \"pass\" }}\n"
        ));
        assert!(e.contains("(did you mean `strategy`?)"), "{e}");
        assert!(!e.contains("`platforms`") && !e.contains("`telegram`"), "{e}");
    }
}
