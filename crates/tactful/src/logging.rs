//! Where tactful's log lines go: stderr, with every registered secret
//! masked.
//!
//! Masking at the writer catches what no call site can promise: a library's
//! own trace line (the IRC client logs every line it sends, NickServ
//! password included), or a server error that quotes a credential back.
//! Each log event is formatted into one buffer and written once, so a
//! secret is never split across two writes.

use std::io::{self, Write};

use tactful_core::secrets;
use tracing_subscriber::fmt::MakeWriter;

/// Installs the global subscriber. `RUST_LOG` (an `EnvFilter`, e.g. `info`
/// or `tactful=debug,matrix_sdk=warn`), the convention every Rust service
/// follows, picks what is shown; `TACTFUL_LOG` wins when both are set;
/// `warn` by default, without the Matrix SDK's own report of each failed
/// request (a Debug dump of the HTTP error; tactful says what failed, and
/// where, in its own line). A filter that does not parse is said once, not
/// silently ignored.
pub fn init() {
    let (filter, bad) = filter_from(|k| std::env::var(k).ok());
    use std::io::IsTerminal as _;
    tracing_subscriber::fmt()
        .with_writer(RedactedStderr)
        // Colours only for a terminal: a log file or a pipe gets plain text.
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .init();
    if let Some((var, e)) = bad {
        tracing::warn!("{var} is not a log filter ({e}); logging at warn");
    }
}

/// The filter from `TACTFUL_LOG` or `RUST_LOG`, and what was wrong with it.
fn filter_from(
    env: impl Fn(&str) -> Option<String>,
) -> (tracing_subscriber::EnvFilter, Option<(&'static str, String)>) {
    for var in ["TACTFUL_LOG", "RUST_LOG"] {
        if let Some(spec) = env(var).filter(|s| !s.trim().is_empty()) {
            return match tracing_subscriber::EnvFilter::try_new(&spec) {
                Ok(f) => (f, None),
                Err(e) => (DEFAULT.into(), Some((var, e.to_string()))),
            };
        }
    }
    (DEFAULT.into(), None)
}

/// The filter when none is set.
const DEFAULT: &str = "matrix_sdk::http_client=off,warn";

/// Makes [`RedactingWriter`]s onto stderr.
#[derive(Clone, Copy, Debug, Default)]
pub struct RedactedStderr;

impl<'a> MakeWriter<'a> for RedactedStderr {
    type Writer = RedactingWriter<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        RedactingWriter(io::stderr())
    }
}

/// Writes through [`secrets::redact`].
#[derive(Debug)]
pub struct RedactingWriter<W>(pub W);

impl<W: Write> Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(secrets::redact(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_log_is_read_and_tactful_log_wins() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
        };
        let shown = |pairs| filter_from(env(pairs)).0.to_string();
        assert_eq!(shown(&[]), DEFAULT);
        assert_eq!(shown(&[("RUST_LOG", "debug")]), "debug");
        assert_eq!(shown(&[("RUST_LOG", "debug"), ("TACTFUL_LOG", "info")]), "info");
        let (f, bad) = filter_from(env(&[("RUST_LOG", "tactful=lots")]));
        assert_eq!(f.to_string(), DEFAULT);
        assert_eq!(bad.map(|b| b.0), Some("RUST_LOG"));
    }

    #[test]
    fn a_registered_secret_never_reaches_the_sink() {
        secrets::register("hunter2-logging-test");
        let mut w = RedactingWriter(Vec::new());
        writeln!(w, "NICKSERV IDENTIFY hunter2-logging-test").expect("write");
        let out = String::from_utf8(w.0).expect("utf-8");
        assert_eq!(out, format!("NICKSERV IDENTIFY {}\n", secrets::MASK));
    }
}
