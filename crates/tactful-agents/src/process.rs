//! Starting an agent's process, for the backends that run one (`command`,
//! `acp`), and reading what it prints without trusting it.
//!
//! An agent is a program tactful does not control: it may start children
//! of its own (a shell running `sleep 1000 &`, a tool call), print without
//! end, or fill stderr with a gigabyte of logs. So each one runs as the
//! leader of its own process group, and the whole group is killed when its
//! turn (or connection) ends; and everything read from it is bounded.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use crate::AgentError;

/// A started agent: the process, and the guard that ends its whole process
/// group when dropped.
pub(crate) struct Spawned {
    /// The leader.
    pub child: Child,
    /// Kills the group on drop.
    pub group: ProcessGroup,
}

/// What a started program's environment holds besides the variables its
/// config sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Inherit {
    /// tactful's whole environment (agents: they need their API keys).
    All,
    /// Only what finding programs and reading text needs (`PATH`, `HOME`,
    /// `LANG`, `LC_ALL`, `TMPDIR`): a hook sees no token of tactful's.
    Minimal,
}

/// The variables [`Inherit::Minimal`] keeps.
const MINIMAL_ENV: [&str; 5] = ["PATH", "HOME", "LANG", "LC_ALL", "TMPDIR"];

/// Starts `command` with `args`, extra `env` and an optional working
/// directory, its stdin, stdout and stderr piped to us, as the leader of a
/// new process group. The group is killed when the returned
/// [`Spawned::group`] is dropped: a cancelled or timed-out turn must leave
/// nothing running, not even the agent's own children.
pub(crate) fn spawn_piped(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    working_dir: Option<&PathBuf>,
) -> Result<Spawned, AgentError> {
    spawn_piped_with(command, args, env, working_dir, Inherit::All)
}

/// [`spawn_piped`], choosing what of tactful's environment it inherits.
pub(crate) fn spawn_piped_with(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    working_dir: Option<&PathBuf>,
    inherit: Inherit,
) -> Result<Spawned, AgentError> {
    let mut cmd = Command::new(command);
    if inherit == Inherit::Minimal {
        cmd.env_clear();
        for key in MINIMAL_ENV {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
    }
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    cmd.process_group(0);
    if let Some(dir) = working_dir {
        cmd.current_dir(dir);
    }
    let child = cmd.spawn().map_err(|e| AgentError::Spawn {
        command: command.to_owned(),
        reason: e.to_string(),
    })?;
    let group = ProcessGroup(child.id());
    Ok(Spawned { child, group })
}

/// A process group tactful started, killed (SIGKILL) when dropped.
pub(crate) struct ProcessGroup(Option<u32>);

impl ProcessGroup {
    /// Kills every process of the group now. Harmless when they are gone.
    pub fn kill(&self) {
        #[cfg(unix)]
        if let Some(pid) = self
            .0
            .and_then(|id| i32::try_from(id).ok())
            // Never 0 or 1: kill(-1) would signal every process we may signal.
            .filter(|&id| id > 1)
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// What [`read_capped`] read.
pub(crate) struct Capped {
    /// At most the cap's worth of bytes.
    pub bytes: Vec<u8>,
    /// Whether there was more (which was not read).
    pub overflowed: bool,
}

/// Reads `from` to its end or until `cap` bytes, whichever comes first.
/// Past the cap nothing more is read: the caller stops the writer.
pub(crate) async fn read_capped(from: impl AsyncRead + Unpin, cap: usize) -> std::io::Result<Capped> {
    let mut bytes = Vec::new();
    from.take(cap as u64 + 1).read_to_end(&mut bytes).await?;
    let overflowed = bytes.len() > cap;
    bytes.truncate(cap);
    Ok(Capped { bytes, overflowed })
}

/// What [`read_tail`] kept of a stream.
pub(crate) struct Tail {
    /// The last bytes read, at most the limit.
    pub bytes: Vec<u8>,
    /// How many bytes the stream had in all.
    pub total: u64,
}

impl Tail {
    /// The last `max` bytes as text (see [`crate::tail`]), with a note of
    /// the whole size when that is more than is shown.
    pub fn quote(&self, max: usize) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let shown = crate::tail(&text, max);
        if self.total > self.bytes.len() as u64 || text.trim().len() > max {
            format!("[{} bytes, the end shown] {shown}", self.total)
        } else {
            shown
        }
    }
}

/// Reads `from` to its end, keeping only the last `keep` bytes: a process
/// must be drained (or it blocks on a full pipe), but 100 MB of its stderr
/// must not sit in memory to quote a few lines of it in an error.
pub(crate) async fn read_tail(mut from: impl AsyncRead + Unpin, keep: usize) -> Tail {
    let mut bytes: Vec<u8> = Vec::new();
    let mut total = 0u64;
    let mut chunk = vec![0u8; 8192];
    loop {
        match from.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                total += n as u64;
                bytes.extend_from_slice(&chunk[..n]);
                if bytes.len() > 2 * keep {
                    bytes.drain(..bytes.len() - keep);
                }
            }
        }
    }
    if bytes.len() > keep {
        bytes.drain(..bytes.len() - keep);
    }
    Tail { bytes, total }
}

/// What a program run once with [`run_once`] left.
pub(crate) struct Ran {
    /// Its stdout, up to the cap.
    pub out: Capped,
    /// The end of its stderr.
    pub err: Tail,
    /// How it exited; `None` when it was stopped for printing past the cap
    /// (its status says nothing then).
    pub status: Option<std::process::ExitStatus>,
}

/// Feeds `input` to a started program, reads at most `cap` bytes of its
/// stdout (stopping it past that) and the tail of its stderr, and waits for
/// it, all within `timeout`; on timeout its process group is killed.
pub(crate) async fn run_once(
    spawned: Spawned,
    input: Vec<u8>,
    cap: usize,
    stderr_keep: usize,
    timeout: std::time::Duration,
) -> Result<Ran, AgentError> {
    use tokio::io::AsyncWriteExt;
    let Spawned { mut child, group } = spawned;
    let mut stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    // Write, read and wait concurrently: a program that prints before it
    // has read all its input must not deadlock on a full pipe.
    let write = async move {
        // A program that ignores stdin and exits early closes the pipe;
        // that is its business, not an error.
        let _ = stdin.write_all(&input).await;
        drop(stdin);
    };
    // Past the cap the rest of the output is of no use: the group is
    // killed at once instead of draining (and keeping) megabytes.
    let out_then_stop = async {
        let ((), out) = tokio::join!(write, read_capped(stdout, cap));
        if out.as_ref().is_ok_and(|o| o.overflowed) {
            group.kill();
        }
        out
    };
    let all = async {
        let (out, err) = tokio::join!(out_then_stop, read_tail(stderr, stderr_keep));
        (out, err, child.wait().await)
    };
    // On timeout the group guard kills the program and its children.
    let (out, err, status) = tokio::time::timeout(timeout, all)
        .await
        .map_err(|_| AgentError::Timeout(timeout))?;
    let out = out.map_err(|e| AgentError::Connection(e.to_string()))?;
    let status = if out.overflowed {
        None
    } else {
        Some(status.map_err(|e| AgentError::Connection(e.to_string()))?)
    };
    Ok(Ran { out, err, status })
}

/// The longest prefix of `bytes` that is whole UTF-8 when `bytes` was cut
/// at an arbitrary point; `None` when it is not UTF-8 before that.
pub(crate) fn utf8_prefix(bytes: &[u8]) -> Option<&str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => Some(s),
        // Only a character cut at the very end is forgiven.
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&bytes[..e.valid_up_to()]).ok(),
        Err(_) => None,
    }
}

/// How many bytes of output to read for a reply of at most `max_chars`
/// characters: four bytes a character at most, plus room for a directive
/// header, so the engine still sees that the answer was longer.
pub(crate) fn output_cap(max_chars: usize) -> usize {
    max_chars.saturating_mul(4).saturating_add(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reading_is_bounded_either_way() {
        let data = vec![b'x'; 100_000];
        let c = read_capped(&data[..], 10).await.expect("read");
        assert_eq!((c.bytes.len(), c.overflowed), (10, true));
        let c = read_capped(&data[..10], 10).await.expect("read");
        assert_eq!((c.bytes.len(), c.overflowed), (10, false));
        let t = read_tail(&data[..], 1000).await;
        assert_eq!((t.bytes.len(), t.total), (1000, 100_000));
        assert!(
            t.quote(10)
                .starts_with("[100000 bytes, the end shown] …xxxxxxxxx")
        );
        let t = read_tail(&b"short"[..], 1000).await;
        assert_eq!(t.quote(600), "short");
    }

    #[test]
    fn a_character_cut_at_the_end_is_dropped_but_bad_utf8_is_not_forgiven() {
        let s = "aé".as_bytes();
        assert_eq!(utf8_prefix(&s[..2]), Some("a"));
        assert_eq!(utf8_prefix(s), Some("aé"));
        assert_eq!(utf8_prefix(&[b'a', 0xff, b'b']), None);
    }
}
