//! Starting an agent's process, for the backends that run one (`command`,
//! `acp`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;

use tokio::process::{Child, Command};

use crate::AgentError;

/// Starts `command` with `args`, extra `env` and an optional working
/// directory, its stdin, stdout and stderr piped to us. The process is
/// killed when the returned handle is dropped: a cancelled or timed-out turn
/// must not leave it running.
pub(crate) fn spawn_piped(
    command: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    working_dir: Option<&PathBuf>,
) -> Result<Child, AgentError> {
    let mut cmd = Command::new(command);
    cmd.args(args)
        .envs(env)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = working_dir {
        cmd.current_dir(dir);
    }
    cmd.spawn().map_err(|e| AgentError::Spawn {
        command: command.to_owned(),
        reason: e.to_string(),
    })
}
