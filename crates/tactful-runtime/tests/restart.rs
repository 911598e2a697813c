//! A runtime stopped without warning and started again on the same store:
//! a reply decided but never confirmed is sent once, and a reply turn that
//! was running is asked again. (`crates/tactful/tests/restart.rs` does the
//! same with a real process and SIGKILL.)

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_agents::{Agent, AgentError, AgentReply, Deltas};
use tactful_core::{EngineConfig, Message, MsgId, Output, PersonaSpec, Timestamp, TurnRequest};
use tactful_runtime::{
    Capabilities, DeliveryConfig, OutMessage, Platform, Runtime, RuntimeConfig, Sent, Store, TraceEvent,
};
use tokio::sync::mpsc;

/// A platform without edits. With `stuck`, sends never complete (the
/// process "dies" before the platform answers); each send attempt is
/// reported on `attempts`.
#[derive(Debug)]
struct Plain {
    stuck: bool,
    sent: Mutex<Vec<(String, Option<String>)>>,
    attempts: mpsc::UnboundedSender<String>,
    next: AtomicU64,
}

impl Platform for Plain {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: false,
            can_delete: false,
            native_replies: true,
            max_message_chars: 2000,
            ..Capabilities::PLAIN
        }
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let _ = self.attempts.send(msg.text.to_owned());
            if self.stuck {
                std::future::pending::<()>().await;
            }
            self.sent
                .lock()
                .expect("lock")
                .push((msg.text.to_owned(), msg.reply_to.map(|r| r.to_string())));
            Ok(MsgId::new(format!(
                "p{}",
                self.next.fetch_add(1, Ordering::SeqCst)
            )))
        })
    }
}

/// Answers "Hold the button." (to the trigger), or never when `hang`;
/// reports each call.
#[derive(Debug)]
struct Answers {
    hang: bool,
    calls: mpsc::UnboundedSender<String>,
}

impl Agent for Answers {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        _: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let trigger = turn.triggers.last().map(|e| e.id.to_string()).unwrap_or_default();
            let _ = self.calls.send(trigger.clone());
            if self.hang {
                std::future::pending::<()>().await;
            }
            Ok(AgentReply::text(format!(
                "[[reply_to:{trigger}]] Hold the button."
            )))
        })
    }
}

struct Harness {
    platform: Arc<Plain>,
    attempts: mpsc::UnboundedReceiver<String>,
    calls: mpsc::UnboundedReceiver<String>,
    trace: mpsc::UnboundedReceiver<TraceEvent>,
    runtime: Runtime,
}

fn start(path: &std::path::Path, stuck: bool, hang: bool) -> Harness {
    let (attempts_tx, attempts) = mpsc::unbounded_channel();
    let (calls_tx, calls) = mpsc::unbounded_channel();
    let (trace_tx, trace) = mpsc::unbounded_channel();
    let platform = Arc::new(Plain {
        stuck,
        sent: Mutex::new(Vec::new()),
        attempts: attempts_tx,
        next: AtomicU64::new(1),
    });
    let mut agents: HashMap<String, Arc<dyn Agent>> = HashMap::new();
    agents.insert(
        "a".into(),
        Arc::new(Answers {
            hang,
            calls: calls_tx,
        }),
    );
    let runtime = Runtime::start(
        RuntimeConfig {
            engine: EngineConfig {
                personas: vec![PersonaSpec::new("docs", "a")],
                ..Default::default()
            },
            agents,
            delivery: DeliveryConfig {
                edit_interval: Duration::ZERO,
                placeholder: "…".into(),
            },
            shutdown_grace: Duration::from_secs(5),
            store: Some(Store::open(path).expect("store opens")),
            max_concurrent_turns: 16,
            hooks: Default::default(),
            cluster: None,
        },
        vec![platform.clone() as Arc<dyn Platform>],
        Some(trace_tx),
    )
    .expect("runtime starts");
    Harness {
        platform,
        attempts,
        calls,
        trace,
        runtime,
    }
}

fn ask(h: &Harness, id: &str) {
    let mut m = Message::new(id, "lobby", "alice", "@docs how do I reset it?", Timestamp(0));
    m.time = tactful_runtime::wall_clock();
    assert!(h.runtime.handle().inbound(m));
}

/// Waits for the first trace event `pick` accepts.
async fn until<T>(
    trace: &mut mpsc::UnboundedReceiver<TraceEvent>,
    mut pick: impl FnMut(&TraceEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let event = trace.recv().await.expect("the runtime is running");
            if let Some(v) = pick(&event) {
                return v;
            }
        }
    })
    .await
    .expect("in time")
}

/// Runs `f` on a runtime of its own, then stops that runtime abruptly,
/// the way a killed process stops: no graceful shutdown.
fn crash_after(f: impl AsyncFnOnce()) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    rt.block_on(f());
    rt.shutdown_timeout(Duration::from_secs(5));
}

#[test]
fn a_reply_decided_but_not_confirmed_is_sent_once_after_a_crash() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.db");
    crash_after(async || {
        let mut h = start(&path, true, false);
        ask(&h, "q1");
        // The platform is asked to send only once the reply is saved.
        let text = tokio::time::timeout(Duration::from_secs(20), h.attempts.recv())
            .await
            .expect("in time")
            .expect("a send was attempted");
        assert!(text.contains("Hold the button."), "{text}");
        // Never confirmed: the process dies with the send in flight.
        drop(h);
    });

    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        let mut h = start(&path, false, false);
        let restored = until(&mut h.trace, |e| match e {
            TraceEvent::Restored {
                messages,
                resumed,
                unsent,
                ..
            } => Some((*messages, *resumed, *unsent)),
            _ => None,
        })
        .await;
        assert_eq!(restored, (2, 0, 1), "(messages, resumed turns, unsent replies)");
        let platform_id = until(&mut h.trace, |e| match e {
            TraceEvent::Delivered { platform, .. } => Some(platform.clone()),
            _ => None,
        })
        .await;
        assert_eq!(
            *h.platform.sent.lock().expect("lock"),
            [("Hold the button.".to_owned(), Some("q1".to_owned()))],
            "sent once, still as a reply to the question"
        );
        assert!(h.calls.try_recv().is_err(), "the agent is not asked again");

        // The restarted engine knows the reply as docs' own message.
        let mut follow = Message::new(
            "q2",
            "lobby",
            "bob",
            "and after that?",
            tactful_runtime::wall_clock(),
        );
        follow.reply_to = Some(platform_id);
        h.runtime.handle().inbound(follow);
        let reason = until(&mut h.trace, |e| match e {
            TraceEvent::Engine(Output::Decision(d)) if d.msg.as_str() == "q2" => Some(d.reason.as_str()),
            _ => None,
        })
        .await;
        assert_eq!(reason, "reply_to_me");
        h.runtime.shutdown().await;
    });
    let mut store = Store::open(&path).expect("reopens");
    let left = store
        .load(tactful_store::LoadLimits {
            history: 10,
            own_ids: 10,
        })
        .expect("loads");
    assert!(
        left.unsent.is_empty(),
        "the outbox is empty after the confirmed send"
    );
}

#[test]
fn a_reply_turn_running_at_a_crash_is_asked_again() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.db");
    crash_after(async || {
        let mut h = start(&path, false, true);
        ask(&h, "q1");
        let called = tokio::time::timeout(Duration::from_secs(20), h.calls.recv())
            .await
            .expect("in time");
        assert_eq!(called.as_deref(), Some("q1"));
        drop(h);
    });

    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        let mut h = start(&path, false, false);
        let resumed = until(&mut h.trace, |e| match e {
            TraceEvent::Restored { resumed, .. } => Some(*resumed),
            _ => None,
        })
        .await;
        assert_eq!(resumed, 1);
        until(&mut h.trace, |e| {
            matches!(e, TraceEvent::Delivered { .. }).then_some(())
        })
        .await;
        assert_eq!(
            h.calls.try_recv().ok().as_deref(),
            Some("q1"),
            "asked again about q1"
        );
        assert_eq!(h.platform.sent.lock().expect("lock").len(), 1, "one reply");
        h.runtime.shutdown().await;
    });

    // A third start finds nothing left to do.
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        let mut h = start(&path, false, false);
        let restored = until(&mut h.trace, |e| match e {
            TraceEvent::Restored { resumed, unsent, .. } => Some((*resumed, *unsent)),
            _ => None,
        })
        .await;
        assert_eq!(restored, (0, 0));
        h.runtime.shutdown().await;
    });
}

#[test]
fn backlog_is_context_never_answered_and_platform_state_is_kept() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tactful.db");
    let rt = tokio::runtime::Runtime::new().expect("tokio");
    rt.block_on(async {
        let mut h = start(&path, false, false);
        // A message from before the start, addressed to docs: context only.
        let mut old = Message::new("old1", "lobby", "alice", "@docs is anyone there?", Timestamp(0));
        old.time = tactful_runtime::wall_clock();
        assert!(h.runtime.handle().backlog(old));
        assert!(
            h.runtime
                .handle()
                .save_state("test:sync".into(), "token-7".into())
        );
        until(&mut h.trace, |e| {
            matches!(e, TraceEvent::Backlog { msg, .. } if msg.as_str() == "old1").then_some(())
        })
        .await;
        ask(&h, "q1");
        // The first call is about q1, and it sees the backlog as context.
        let call = until(&mut h.trace, |e| match e {
            TraceEvent::Engine(Output::CallAgent(req)) => Some(req.clone()),
            _ => None,
        })
        .await;
        assert_eq!(call.triggers[0].id.as_str(), "q1");
        assert!(
            call.history.iter().any(|e| e.id.as_str() == "old1"),
            "the backlog is context"
        );
        until(&mut h.trace, |e| {
            matches!(e, TraceEvent::Delivered { .. }).then_some(())
        })
        .await;
        assert_eq!(h.calls.try_recv().ok().as_deref(), Some("q1"));
        assert!(
            h.calls.try_recv().is_err(),
            "the backlog message was never answered"
        );
        h.runtime.shutdown().await;
    });
    let mut store = Store::open(&path).expect("reopens");
    assert_eq!(
        store
            .platform_state()
            .expect("state")
            .get("test:sync")
            .map(String::as_str),
        Some("token-7")
    );
    let saved = store
        .load(tactful_store::LoadLimits {
            history: 10,
            own_ids: 10,
        })
        .expect("loads");
    let ids: Vec<&str> = saved.rooms[0].messages.iter().map(|m| m.id.as_str()).collect();
    assert_eq!(ids[0], "old1", "the backlog is in the transcript too: {ids:?}");
}
