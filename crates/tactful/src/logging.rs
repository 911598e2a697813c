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

/// Installs the global subscriber: `TACTFUL_LOG` (an `EnvFilter`, e.g.
/// `info` or `tactful=debug,matrix_sdk=warn`) picks what is shown; `warn` by
/// default.
pub fn init() {
    tracing_subscriber::fmt()
        .with_writer(RedactedStderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TACTFUL_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .init();
}

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
    fn a_registered_secret_never_reaches_the_sink() {
        secrets::register("hunter2-logging-test");
        let mut w = RedactingWriter(Vec::new());
        writeln!(w, "NICKSERV IDENTIFY hunter2-logging-test").expect("write");
        let out = String::from_utf8(w.0).expect("utf-8");
        assert_eq!(out, format!("NICKSERV IDENTIFY {}\n", secrets::MASK));
    }
}
