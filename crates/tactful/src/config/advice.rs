//! What `tactful check` (and `run`, in its log) says about a config that
//! loads but may not do what its author meant: a secret written into the
//! file, an agent nothing uses, a store whose folder does not exist.

use std::collections::BTreeSet;

use super::{Config, Location, quote_key};

/// Secrets written into the file itself rather than taken from the
/// environment: a file is copied, committed and pasted into issues. One
/// warning per `key = "value"` whose key names a secret (`api_key`,
/// `token`, `password`…) and whose value is not `${ENV}`.
pub(super) fn literal_secrets(src: &str) -> Vec<String> {
    let pair = regex::Regex::new(r#"([A-Za-z0-9_-]+)\s*=\s*(?:"([^"]*)"|'([^']*)')"#).expect("valid regex");
    let mut out = Vec::new();
    for (n, line) in src.lines().enumerate() {
        let code = line.split(" #").next().unwrap_or(line);
        if code.trim_start().starts_with('#') {
            continue;
        }
        for c in pair.captures_iter(code) {
            let key = &c[1];
            let value = c.get(2).or(c.get(3)).map_or("", |m| m.as_str());
            if tactful_core::secrets::is_secret_name(key) && !value.trim().is_empty() && !value.contains("${")
            {
                out.push(format!(
                    "line {}: `{key}` is written into the file; keep it in the environment and write `{key} = \"${{{}}}\"`",
                    n + 1,
                    key.to_ascii_uppercase().replace('-', "_")
                ));
            } else if !value.contains("${")
                && tactful_store::Location::postgres(value).is_ok_and(|l| l.password().is_some())
            {
                out.push(format!(
                    "line {}: `{key}` has a password written into the file; keep the address in the environment and write `{key} = \"${{TACTFUL_DATABASE_URL}}\"`",
                    n + 1
                ));
            }
        }
    }
    out
}

/// Agents no persona speaks through, listens with (`ambient_agent`) or
/// gates with (`reply_gate.agent` in any room): likely a persona pointing
/// at the wrong one.
pub(super) fn unused_agents(config: &Config) -> Vec<String> {
    let mut used: BTreeSet<&str> = BTreeSet::new();
    let policies = &config.engine.policies;
    // The default layer, then each configured room.
    let default_room = tactful_core::RoomId::new("");
    let rooms: Vec<&tactful_core::RoomId> = std::iter::once(&default_room)
        .chain(policies.rooms.keys())
        .collect();
    for p in &config.engine.personas {
        used.insert(p.agent.as_ref());
        if let Some(a) = &p.ambient_agent {
            used.insert(a.as_ref());
        }
    }
    let gates: Vec<std::sync::Arc<str>> = config
        .engine
        .personas
        .iter()
        .flat_map(|p| {
            rooms
                .iter()
                .filter_map(|r| policies.resolve(r, &p.id).reply_gate.map(|g| g.agent))
        })
        .collect();
    used.extend(gates.iter().map(|g| g.as_ref()));
    config
        .agents
        .keys()
        .filter(|name| !used.contains(name.as_str()))
        .map(|name| {
            format!(
                "`agents.{}` is not used: no persona's `agent`, `ambient_agent` or `reply_gate.agent` names it",
                quote_key(name)
            )
        })
        .collect()
}

/// Why the store cannot be opened where the config puts it, if that can
/// be told now: its folder does not exist (SQLite would fail later, with
/// a less clear word).
pub(crate) fn store_problem(store: &Location) -> Option<String> {
    let Location::File(store) = store else {
        return None;
    };
    let folder = store.parent().filter(|p| !p.as_os_str().is_empty())?;
    (!folder.is_dir()).then(|| {
        format!(
            "`store.path` = {}: the folder {} does not exist; create it, or name a file in a folder that does",
            store.display(),
            folder.display()
        )
    })
}

/// A database reached over the network without TLS: what the store holds
/// (every message) crosses it readable.
pub(super) fn unencrypted_store(store: &Location) -> Option<String> {
    let host = store.unencrypted_host()?;
    Some(format!(
        "`store.url`: the connection to {host} is not encrypted; unless that network is private, add sslmode=verify-full (and sslrootcert=/path/ca.pem for a private authority)"
    ))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn a_database_reached_over_the_network_without_tls_is_warned_about() {
        let at = |url: &str| Location::postgres(url).expect("a URL");
        let w = unencrypted_store(&at("postgres://tactful@db.example.com/chat")).expect("warned");
        assert!(
            w.contains("db.example.com") && w.contains("sslmode=verify-full"),
            "{w}"
        );
        for quiet in [
            "postgres://tactful@127.0.0.1/chat",
            "postgres://tactful@localhost/chat",
            "postgres://tactful@[::1]/chat",
            "postgres://tactful@%2Fvar%2Frun%2Fpostgresql/chat",
            "postgres://tactful@db.example.com/chat?sslmode=verify-full",
        ] {
            assert_eq!(unencrypted_store(&at(quiet)), None, "{quiet}");
        }
    }

    #[test]
    fn a_database_password_written_into_the_file_is_named_with_its_line() {
        let src = "[store]\nurl = \"postgres://tactful:hunter2@db/chat\"\n[other]\nurl = \"postgres://db/chat\"\nurl = \"${DB}\"\n";
        let w = literal_secrets(src);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("line 2: `url` has a password written into the file"),
            "{w:?}"
        );
        assert!(
            w[0].contains("${TACTFUL_DATABASE_URL}") && !w[0].contains("hunter2"),
            "{w:?}"
        );
    }

    #[test]
    fn a_secret_written_into_the_file_is_named_with_its_line() {
        let src = "[agents.m]\nkind = \"openai\"\napi_key = 'sk-live-123'\n# api_key = \"sk-old\"\n[platforms.telegram]\n\n[[persona]]\ntelegram = { token = \"123:abc\" }\nsilence_token = \"NO_REPLY\"\nother_key = \"${KEY}\"\npassword = \"\"\n";
        let w = literal_secrets(src);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(
            w[0].starts_with("line 3: `api_key` is written into the file"),
            "{w:?}"
        );
        assert!(w[0].ends_with("`api_key = \"${API_KEY}\"`"), "{w:?}");
        assert!(w[1].starts_with("line 8: `token`"), "{w:?}");
        // The warning names the key, never the value.
        assert!(
            !w.iter().any(|l| l.contains("sk-live") || l.contains("123:abc")),
            "{w:?}"
        );
    }

    #[test]
    fn a_store_in_a_missing_folder_is_refused_before_it_is_opened() {
        let dir = tempfile::tempdir().expect("dir");
        let file = |p: &Path| Location::File(p.to_owned());
        assert_eq!(store_problem(&file(&dir.path().join("t.db"))), None);
        assert_eq!(store_problem(&Location::Memory), None);
        assert_eq!(store_problem(&file(Path::new("t.db"))), None);
        let missing = dir.path().join("nope/t.db");
        let p = store_problem(&file(&missing)).expect("a problem");
        assert!(
            p.contains(&format!(
                "the folder {} does not exist",
                dir.path().join("nope").display()
            )),
            "{p}"
        );
    }
}
