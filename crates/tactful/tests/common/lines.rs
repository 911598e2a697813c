//! A helper program spoken to in JSON lines: one command per line on its
//! stdin, one answer per line on its stdout, `{"ok": …}` or
//! `{"error": "…"}`. The Matrix and XMPP tests' people (matrix-nio,
//! slixmpp) are such programs.

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Command, Stdio};

use serde_json::Value;

use super::Reaper;

/// A running helper and its two pipes.
pub struct JsonLines {
    name: &'static str,
    _child: Reaper,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl JsonLines {
    /// Starts `command` (its stderr shown with `TACTFUL_TEST_STDERR`);
    /// `name` says who failed in a panic.
    pub fn start(name: &'static str, mut command: Command) -> JsonLines {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if std::env::var_os("TACTFUL_TEST_STDERR").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        JsonLines {
            name,
            _child: Reaper(child),
            stdin,
            stdout,
        }
    }

    /// Sends `cmd`; what its answer holds under `ok`, or a panic with its
    /// `error`.
    pub fn call(&mut self, cmd: Value) -> Value {
        let name = self.name;
        writeln!(self.stdin, "{cmd}").unwrap_or_else(|e| panic!("write to {name}: {e}"));
        let mut line = String::new();
        self.stdout
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("read from {name}: {e}"));
        let answer: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("{name} said {line:?}: {e}"));
        match answer.get("ok") {
            Some(v) => v.clone(),
            None => panic!("{cmd} failed: {}", answer["error"]),
        }
    }
}
