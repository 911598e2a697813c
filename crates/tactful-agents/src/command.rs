//! `kind = "command"`: run a program once per turn.
//!
//! The turn goes to the program's stdin as JSON ([`crate::turn_json`]); the
//! program prints its answer on stdout and exits 0. A non-zero exit, or no
//! exit within `timeout_ms`, is an error outcome carrying the tail of its
//! stderr. The program runs in a process group of its own, ended with the
//! turn (children included); output past what a reply may hold stops it
//! (the engine then cuts the reply and says so). The simplest way to plug anything into tactful: a shell script,
//! a Python file calling a local model, a CLI agent in one-shot mode.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::TurnRequest;

use crate::process::{Ran, output_cap, run_once, spawn_piped, utf8_prefix};
use crate::{Agent, AgentError, AgentReply, Deltas, turn_json};

/// The longest stderr tail quoted in an error.
const STDERR_TAIL: usize = 600;
/// How much of stderr is kept while it is drained.
const STDERR_KEEP: usize = 64 * 1024;

/// How a command agent is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandConfig {
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables (the process inherits tactful's own).
    pub env: BTreeMap<String, String>,
    /// Where it runs; tactful's working directory when `None`.
    pub working_dir: Option<PathBuf>,
    /// How long one turn may take.
    pub timeout: Duration,
}

/// A command agent.
#[derive(Clone, Debug)]
pub struct CommandAgent {
    config: CommandConfig,
    contract: Arc<str>,
}

impl CommandAgent {
    /// A command agent whose prompts use `contract` (see
    /// [`tactful_core::prompt`]).
    pub fn new(config: CommandConfig, contract: Arc<str>) -> Self {
        CommandAgent { config, contract }
    }

    async fn run_turn(&self, turn: &TurnRequest) -> Result<AgentReply, AgentError> {
        let c = &self.config;
        let input = serde_json::to_vec(&turn_json::turn_json(turn, &self.contract))
            .map_err(|e| AgentError::Protocol(e.to_string()))?;
        let spawned = spawn_piped(&c.command, &c.args, &c.env, c.working_dir.as_ref())?;
        let cap = output_cap(turn.max_reply_chars);
        let Ran { out, err, status } = run_once(spawned, input, cap, STDERR_KEEP, c.timeout).await?;
        match status {
            None => tracing::warn!(
                command = %c.command,
                cap,
                "the command printed more than a reply may hold; it was stopped and its answer cut"
            ),
            Some(status) if !status.success() => {
                return Err(AgentError::Exit {
                    command: c.command.clone(),
                    status: status.to_string(),
                    stderr_tail: err.quote(STDERR_TAIL),
                });
            }
            Some(_) => {}
        }
        let text = utf8_prefix(&out.bytes)
            .filter(|_| out.overflowed || std::str::from_utf8(&out.bytes).is_ok())
            .ok_or_else(|| AgentError::Protocol(format!("{} wrote output that is not UTF-8", c.command)))?
            .to_owned();
        Ok(AgentReply::text(text))
    }
}

impl Agent for CommandAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let reply = self.run_turn(turn).await?;
            deltas.delta(&reply.text);
            Ok(reply)
        })
    }
}
