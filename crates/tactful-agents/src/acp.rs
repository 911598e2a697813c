//! `kind = "acp"`: an Agent Client Protocol agent over stdio.
//!
//! Coding agents (Claude Code through claude-code-acp, Gemini CLI, Codex
//! through codex-acp, OpenCode, Kiro...) speak ACP: JSON-RPC over the
//! agent's stdin and stdout. tactful is the client, through the
//! `agent-client-protocol` crate (protocol v1):
//!
//! - one agent process per `[agents]` entry, started on the first turn and
//!   started again on the next turn after it dies;
//! - one ACP session per (room, persona), kept across turns so the agent
//!   remembers the conversation; a new session is sent the whole prompt, a
//!   kept one only what happened since the persona last spoke;
//! - sessions idle longer than `session_ttl_seconds` are forgotten, and past
//!   `max_sessions` the least recently used idle one goes;
//! - permission requests are denied unless the tool's kind is listed in
//!   `allow_permissions` (tactful never picks "allow always");
//! - a turn with no update for `inactivity_timeout_ms` is cancelled with
//!   `session/cancel` and ends as an error; its session is free at once.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, NewSessionRequest, PermissionOptionKind,
    PromptRequest, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionId, SessionNotification, SessionUpdate, TextContent,
};
use agent_client_protocol::{Agent as AcpPeer, ByteStreams, Client};
use futures::future::BoxFuture;
use tactful_core::prompt::{self, Role};
use tactful_core::{PersonaId, RoomId, TurnRequest};
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::process::{Spawned, read_tail, spawn_piped};
use crate::{Agent, AgentError, AgentReply, Collected, Deltas};

/// How an ACP agent is started and kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcpConfig {
    /// The program (e.g. `claude-code-acp`, or `node` with a script).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// The working directory of the process and of its sessions.
    pub working_dir: Option<PathBuf>,
    /// Idle sessions older than this are forgotten.
    pub session_ttl: Duration,
    /// At most this many sessions are kept.
    pub max_sessions: usize,
    /// Tool kinds (`read`, `edit`, `delete`, `move`, `search`, `execute`,
    /// `think`, `fetch`, `switch_mode`, `other`) whose permission requests
    /// are granted once. Everything else is denied.
    pub allow_permissions: Vec<String>,
    /// A turn with no update for this long is cancelled.
    pub inactivity_timeout: Duration,
}

/// A live connection to one agent process.
struct Conn {
    cx: ConnectionTo<AcpPeer>,
    /// Where each session's message chunks go during its turn.
    routes: Arc<StdMutex<HashMap<SessionId, mpsc::UnboundedSender<String>>>>,
    /// Becomes `Some` when the process or the connection ends: how it
    /// ended, with the end of the process's stderr.
    exited: watch::Receiver<Option<String>>,
    task: tokio::task::JoinHandle<()>,
}

/// How much of an agent's stderr is kept (the end) while it is drained.
const STDERR_KEEP: usize = 64 * 1024;

/// How long a failed request waits for the process's exit to be known, so
/// the error can say how it died.
const EXIT_GRACE: Duration = Duration::from_secs(2);

impl Conn {
    fn is_alive(&self) -> bool {
        self.exited.borrow().is_none() && !self.task.is_finished()
    }

    /// The error for a failed request: how the process ended if it did.
    async fn failure(&self, context: &str, e: agent_client_protocol::Error) -> AgentError {
        let mut exited = self.exited.clone();
        let note = tokio::time::timeout(EXIT_GRACE, exited.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|r| r.ok().and_then(|note| note.clone()));
        match note {
            Some(note) => AgentError::Connection(note),
            None => acp_error(context, e),
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Ends the connection and, with it, the process (kill on drop).
        self.task.abort();
    }
}

/// A kept session.
struct Session {
    id: SessionId,
    last_used: Instant,
    /// Held for the length of a turn: one turn at a time per session.
    turn: Arc<Mutex<()>>,
}

#[derive(Default)]
struct State {
    conn: Option<Arc<Conn>>,
    sessions: HashMap<(RoomId, PersonaId), Session>,
}

/// An ACP agent backend.
pub struct AcpAgent {
    config: AcpConfig,
    contract: Arc<str>,
    state: Mutex<State>,
}

impl std::fmt::Debug for AcpAgent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcpAgent")
            .field("command", &self.config.command)
            .finish_non_exhaustive()
    }
}

fn acp_error(context: &str, e: agent_client_protocol::Error) -> AgentError {
    AgentError::Protocol(format!("{context}: {e}"))
}

/// The config spelling of a tool kind (`edit`, `execute`...).
fn kind_name(kind: &impl serde::Serialize) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "other".to_owned())
}

/// Answers a permission request by the configured policy: an allowed kind
/// gets its "allow once" option, anything else a reject option (or, if the
/// agent offered none, a cancelled outcome).
fn decide_permission(req: &RequestPermissionRequest, allow: &[String]) -> RequestPermissionResponse {
    let kind = req
        .tool_call
        .fields
        .kind
        .as_ref()
        .map_or_else(|| "other".to_owned(), kind_name);
    let allowed = allow.iter().any(|a| a == &kind);
    let wanted: &[PermissionOptionKind] = if allowed {
        &[PermissionOptionKind::AllowOnce]
    } else {
        &[
            PermissionOptionKind::RejectOnce,
            PermissionOptionKind::RejectAlways,
        ]
    };
    let option = wanted.iter().find_map(|k| {
        req.options
            .iter()
            .find(|o| o.kind == *k)
            .map(|o| o.option_id.clone())
    });
    tracing::info!(
        tool_kind = %kind,
        granted = allowed && option.is_some(),
        "ACP permission request"
    );
    match option {
        Some(id) => RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
            SelectedPermissionOutcome::new(id),
        )),
        None => RequestPermissionResponse::new(RequestPermissionOutcome::Cancelled),
    }
}

impl AcpAgent {
    /// An ACP backend; prompts use `contract`.
    pub fn new(config: AcpConfig, contract: Arc<str>) -> Self {
        AcpAgent {
            config,
            contract,
            state: Mutex::new(State::default()),
        }
    }

    fn cwd(&self) -> PathBuf {
        self.config
            .working_dir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"))
    }

    /// Starts the process, connects, and initializes. Returns the agent's
    /// self-reported name and version.
    async fn connect(&self) -> Result<(Arc<Conn>, String), AgentError> {
        let c = &self.config;
        let Spawned { mut child, group } = spawn_piped(&c.command, &c.args, &c.env, c.working_dir.as_ref())?;
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = child.stdout.take().expect("stdout is piped");
        let stderr = child.stderr.take().expect("stderr is piped");

        let routes: Arc<StdMutex<HashMap<SessionId, mpsc::UnboundedSender<String>>>> = Arc::default();
        let (exit_tx, exited) = watch::channel(None);
        let (cx_tx, cx_rx) = oneshot::channel();
        let allow = c.allow_permissions.clone();
        let chunk_routes = routes.clone();
        let command = c.command.clone();
        let task = tokio::spawn(async move {
            let transport = ByteStreams::new(stdin.compat_write(), stdout.compat());
            let connection = Client
                .v1()
                .name("tactful")
                .on_receive_notification(
                    async move |n: SessionNotification, _cx| {
                        if let SessionUpdate::AgentMessageChunk(chunk) = n.update
                            && let ContentBlock::Text(t) = chunk.content
                            && let Ok(routes) = chunk_routes.lock()
                            && let Some(tx) = routes.get(&n.session_id)
                        {
                            let _ = tx.send(t.text);
                        }
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |req: RequestPermissionRequest, responder, _cx| {
                        responder.respond(decide_permission(&req, &allow))
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(transport, async move |cx: ConnectionTo<AcpPeer>| {
                    let _ = cx_tx.send(cx);
                    std::future::pending::<()>().await;
                    Ok(())
                });
            tokio::pin!(connection);
            // The task owns the process and its group: aborting it (the
            // connection dropped) kills the agent and every child it started.
            let _group = group;
            let process = async move {
                let err = read_tail(stderr, STDERR_KEEP).await;
                (child.wait().await, err)
            };
            tokio::pin!(process);
            let exit = tokio::select! {
                result = &mut connection => {
                    if let Err(e) = result {
                        tracing::warn!("ACP connection to {command} ended: {e}");
                    }
                    // The process is probably exiting too: learn how.
                    tokio::time::timeout(EXIT_GRACE, &mut process).await.ok()
                }
                done = &mut process => Some(done),
            };
            let note = match exit {
                Some((status, err)) => {
                    let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
                    let err = err.quote(600);
                    format!("{command} exited with {status}; stderr: {err}")
                }
                None => format!("the connection to {command} ended"),
            };
            tracing::warn!("{note}");
            let _ = exit_tx.send(Some(note));
        });
        let cx = cx_rx.await.map_err(|_| {
            AgentError::Connection(format!("{} closed before the connection opened", c.command))
        })?;
        let conn = Arc::new(Conn {
            cx,
            routes,
            exited,
            task,
        });
        let init = tokio::time::timeout(
            c.inactivity_timeout,
            conn.cx
                .send_request(InitializeRequest::new(ProtocolVersion::V1))
                .block_task(),
        )
        .await
        .map_err(|_| AgentError::Timeout(c.inactivity_timeout))?;
        let init = match init {
            Ok(init) => init,
            Err(e) => return Err(conn.failure("initialize", e).await),
        };
        let info = init
            .agent_info
            .map(|i| format!("{} {}", i.name, i.version))
            .unwrap_or_else(|| "an unnamed agent".to_owned());
        Ok((conn, info))
    }

    /// Connects and initializes only: the agent's name and version. Used to
    /// check that an agent starts and speaks ACP.
    pub async fn handshake(&self) -> Result<String, AgentError> {
        let (conn, info) = self.connect().await?;
        drop(conn);
        Ok(info)
    }

    /// The live connection and this turn's session, creating what is
    /// missing. Returns whether the session is new.
    async fn session_for(
        &self,
        key: (RoomId, PersonaId),
    ) -> Result<(Arc<Conn>, SessionId, Arc<Mutex<()>>, bool), AgentError> {
        let mut state = self.state.lock().await;
        if state.conn.as_ref().is_some_and(|c| !c.is_alive()) {
            // The process died: every session died with it. The next turn
            // of each room starts a fresh one, with the whole context.
            state.conn = None;
            state.sessions.clear();
        }
        let conn = match &state.conn {
            Some(c) => c.clone(),
            None => {
                let (c, info) = self.connect().await?;
                tracing::info!(agent = %info, command = %self.config.command, "ACP agent started");
                state.conn = Some(c.clone());
                c
            }
        };
        let now = Instant::now();
        let ttl = self.config.session_ttl;
        state
            .sessions
            .retain(|_, s| now.duration_since(s.last_used) < ttl || s.turn.try_lock().is_err());
        if let Some(s) = state.sessions.get_mut(&key) {
            s.last_used = now;
            return Ok((conn, s.id.clone(), s.turn.clone(), false));
        }
        while state.sessions.len() >= self.config.max_sessions {
            let oldest_idle = state
                .sessions
                .iter()
                .filter(|(_, s)| s.turn.try_lock().is_ok())
                .min_by_key(|(_, s)| s.last_used)
                .map(|(k, _)| k.clone());
            match oldest_idle {
                Some(k) => {
                    state.sessions.remove(&k);
                }
                None => break,
            }
        }
        let created = tokio::time::timeout(
            self.config.inactivity_timeout,
            conn.cx
                .send_request(NewSessionRequest::new(self.cwd()))
                .block_task(),
        )
        .await
        .map_err(|_| AgentError::Timeout(self.config.inactivity_timeout))?;
        let created = match created {
            Ok(created) => created,
            Err(e) => return Err(conn.failure("session/new", e).await),
        };
        let turn = Arc::new(Mutex::new(()));
        state.sessions.insert(
            key,
            Session {
                id: created.session_id.clone(),
                last_used: now,
                turn: turn.clone(),
            },
        );
        Ok((conn, created.session_id, turn, true))
    }

    /// The text of a prompt: everything for a new session; for a kept one,
    /// the final user turn (all that happened since the persona last spoke).
    fn prompt_text(&self, turn: &TurnRequest, fresh: bool) -> String {
        let p = prompt::render(turn, &self.contract);
        if !fresh && let Some(last) = p.messages.last() {
            return last.content.clone();
        }
        let mut text = p.system;
        text.push_str("\n\n--- conversation ---\n");
        for m in &p.messages {
            match m.role {
                Role::Assistant => text.push_str("[you]\n"),
                Role::User => {}
            }
            text.push_str(&m.content);
            text.push_str("\n\n");
        }
        text
    }

    async fn run_turn(&self, turn: &TurnRequest, deltas: &mut dyn Deltas) -> Result<AgentReply, AgentError> {
        let key = (turn.room.clone(), turn.persona.clone());
        let (conn, session, lock, fresh) = self.session_for(key).await?;
        let _held = lock.lock().await;
        let (tx, mut rx) = mpsc::unbounded_channel();
        if let Ok(mut routes) = conn.routes.lock() {
            routes.insert(session.clone(), tx);
        }
        let request = PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(
                self.prompt_text(turn, fresh),
            ))],
        );
        let response = conn.cx.send_request(request).block_task();
        tokio::pin!(response);
        let mut text = Collected::new(turn.max_reply_chars);
        let idle = self.config.inactivity_timeout;
        let outcome = loop {
            tokio::select! {
                Some(piece) = rx.recv() => {
                    if !text.push(&piece, deltas) {
                        // More than a reply may hold: stop the agent's work.
                        let _ = conn.cx.send_notification(CancelNotification::new(session.clone()));
                        break Ok(AgentReply::text(text.into_text()));
                    }
                }
                done = &mut response => {
                    // Chunks sent before the response are already queued.
                    while let Ok(piece) = rx.try_recv() {
                        if !text.push(&piece, deltas) {
                            break;
                        }
                    }
                    break match done {
                        Ok(_) => Ok(AgentReply::text(text.into_text())),
                        Err(e) => Err(conn.failure("session/prompt", e).await),
                    };
                }
                () = tokio::time::sleep(idle) => {
                    let _ = conn.cx.send_notification(CancelNotification::new(session.clone()));
                    break Err(AgentError::Timeout(idle));
                }
            }
        };
        if let Ok(mut routes) = conn.routes.lock() {
            routes.remove(&session);
        }
        outcome
    }
}

impl Agent for AcpAgent {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(self.run_turn(turn, deltas))
    }
}
