//! Paths in a config mean the same from any directory: they are read from
//! the config file's folder, and `tactful check` says when a program an
//! agent needs is not there.

use std::path::{Path, PathBuf};

/// Where a subprocess agent runs: `working_dir` read from the config's
/// folder, or that folder itself when unset. So `args = ["agent.py"]`
/// finds the script beside the config however tactful was started.
pub(super) fn working_dir(configured: Option<&str>, config_file: &Path) -> Option<PathBuf> {
    let base = config_file.parent().filter(|p| !p.as_os_str().is_empty());
    match (configured.map(PathBuf::from), base) {
        (Some(dir), Some(base)) if dir.is_relative() => Some(base.join(dir)),
        (Some(dir), _) => Some(dir),
        (None, base) => base.map(Path::to_path_buf),
    }
}

/// The program to start: a relative path with a folder in it (`./agent`,
/// `bin/agent`) is read from the config's folder; a bare name (`python3`)
/// is looked up on `PATH` when started.
pub(super) fn program(command: &str, config_file: &Path) -> String {
    let path = Path::new(command);
    match config_file.parent() {
        Some(base) if path.is_relative() && command.contains('/') && !base.as_os_str().is_empty() => {
            base.join(path).to_string_lossy().into_owned()
        }
        _ => command.to_owned(),
    }
}

/// What is wrong with a subprocess agent's program, if anything: the
/// program cannot be found, or its first argument looks like a script
/// (`agent.py`) that is not in the folder the agent runs in.
pub(super) fn missing(
    key: &str,
    program: &str,
    args: &[String],
    working_dir: Option<&Path>,
    path_var: Option<&std::ffi::OsStr>,
) -> Vec<String> {
    let mut out = Vec::new();
    let found = if program.contains('/') {
        is_executable(Path::new(program))
    } else {
        path_var
            .is_some_and(|paths| std::env::split_paths(paths).any(|dir| is_executable(&dir.join(program))))
    };
    if !found {
        let where_ = if program.contains('/') {
            "no such program".to_owned()
        } else {
            "not found on PATH".to_owned()
        };
        out.push(format!("`{key}.command`: {program:?}: {where_}"));
    }
    const SCRIPTS: &[&str] = &["py", "js", "mjs", "cjs", "ts", "sh", "rb", "pl", "php", "lua"];
    if let Some(first) = args.first() {
        let path = Path::new(first);
        let looks_like_script = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| SCRIPTS.contains(&e));
        let full = match working_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path.to_path_buf(),
        };
        if looks_like_script && !full.exists() {
            // A path relative to the current folder has an empty parent:
            // name the folder itself.
            let folder = full
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let folder = std::path::absolute(folder).unwrap_or_else(|_| folder.to_owned());
            out.push(format!(
                "`{key}.args`: {first:?} is not in {} (the agent runs there; set `working_dir` if it belongs elsewhere)",
                folder.display()
            ));
        }
    }
    out
}

fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        path.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        path.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_read_from_the_config_folder() {
        let cfg = Path::new("/srv/bots/tactful.toml");
        assert_eq!(working_dir(None, cfg), Some(PathBuf::from("/srv/bots")));
        assert_eq!(
            working_dir(Some("work"), cfg),
            Some(PathBuf::from("/srv/bots/work"))
        );
        assert_eq!(working_dir(Some("/tmp"), cfg), Some(PathBuf::from("/tmp")));
        assert_eq!(working_dir(None, Path::new("tactful.toml")), None);
        assert_eq!(program("python3", cfg), "python3");
        assert_eq!(program("./agent", cfg), "/srv/bots/./agent");
        assert_eq!(program("bin/agent", cfg), "/srv/bots/bin/agent");
        assert_eq!(program("/usr/bin/env", cfg), "/usr/bin/env");
    }

    #[test]
    fn a_missing_program_or_script_is_named() {
        let dir = tempfile::tempdir().expect("dir");
        let path = Some(std::ffi::OsString::from("/usr/bin:/bin"));
        let none = missing(
            "agents.a",
            "sh",
            &["-c".into()],
            Some(dir.path()),
            path.as_deref(),
        );
        assert!(none.is_empty(), "{none:?}");
        let w = missing("agents.a", "python-nope", &[], Some(dir.path()), path.as_deref());
        assert!(w[0].contains("\"python-nope\": not found on PATH"), "{w:?}");
        let w = missing(
            "agents.a",
            "sh",
            &["agent.py".into()],
            Some(dir.path()),
            path.as_deref(),
        );
        assert!(w[0].contains("\"agent.py\" is not in"), "{w:?}");
        // A config in the current folder: the folder is named, not blank.
        let w = missing("agents.a", "sh", &["agent.py".into()], None, path.as_deref());
        let here = std::env::current_dir().expect("cwd");
        assert!(w[0].contains(&format!("is not in {} (", here.display())), "{w:?}");
        std::fs::write(dir.path().join("agent.py"), "print('hi')").expect("write");
        assert!(
            missing(
                "agents.a",
                "sh",
                &["agent.py".into()],
                Some(dir.path()),
                path.as_deref()
            )
            .is_empty()
        );
        let w = missing("agents.a", "/no/such/agent", &[], None, path.as_deref());
        assert!(w[0].contains("no such program"), "{w:?}");
    }
}
