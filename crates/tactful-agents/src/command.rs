//! `kind = "command"`: run a program once per turn.
//!
//! The turn goes to the program's stdin as JSON ([`crate::turn_json`]); the
//! program prints its answer on stdout and exits 0. A non-zero exit, or no
//! exit within `timeout_ms`, is an error outcome carrying the tail of its
//! stderr. The simplest way to plug anything into tactful: a shell script,
//! a Python file calling a local model, a CLI agent in one-shot mode.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::TurnRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::process::spawn_piped;
use crate::{Agent, AgentError, AgentReply, Deltas, tail, turn_json};

/// The longest stderr tail quoted in an error.
const STDERR_TAIL: usize = 600;

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
        let mut child = spawn_piped(&c.command, &c.args, &c.env, c.working_dir.as_ref())?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let mut stdout = child.stdout.take().expect("stdout is piped");
        let mut stderr = child.stderr.take().expect("stderr is piped");
        // Write, read and wait concurrently: a program that prints before it
        // has read all its input must not deadlock on a full pipe.
        let write = async move {
            // A program that ignores stdin and exits early closes the pipe;
            // that is its business, not an error.
            let _ = stdin.write_all(&input).await;
            drop(stdin);
        };
        let read_out = async move {
            let mut buf = Vec::new();
            stdout.read_to_end(&mut buf).await.map(|_| buf)
        };
        let read_err = async move {
            let mut buf = Vec::new();
            stderr.read_to_end(&mut buf).await.map(|_| buf)
        };
        let all = async {
            let ((), out, err, status) = tokio::join!(write, read_out, read_err, child.wait());
            (out, err, status)
        };
        let (out, err, status) = tokio::time::timeout(c.timeout, all)
            .await
            .map_err(|_| AgentError::Timeout(c.timeout))?;
        let status = status.map_err(|e| AgentError::Connection(e.to_string()))?;
        let err = String::from_utf8_lossy(&err.unwrap_or_default()).into_owned();
        if !status.success() {
            return Err(AgentError::Exit {
                command: c.command.clone(),
                status: status.to_string(),
                stderr_tail: tail(&err, STDERR_TAIL),
            });
        }
        let out = out.map_err(|e| AgentError::Connection(e.to_string()))?;
        let text = String::from_utf8(out)
            .map_err(|_| AgentError::Protocol(format!("{} wrote output that is not UTF-8", c.command)))?;
        Ok(AgentReply { text, usage: None })
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
