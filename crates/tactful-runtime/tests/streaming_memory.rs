//! A reply streamed in tens of thousands of pieces costs memory in
//! proportion to the reply, not to the pieces times the reply: each piece is
//! appended once, and the room worker reads the text when it can show it.
//! (Before, every piece queued a copy of the whole text so far: 50,000
//! pieces took 1.1 GB.) Its own test binary, so the peak is this test's.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use peak_alloc::PeakAlloc;
use tactful_agents::{Agent, AgentError, AgentReply, Deltas};
use tactful_core::{EngineConfig, Message, MsgId, PersonaSpec, TurnRequest};
use tactful_runtime::{
    At, Capabilities, DeliveryConfig, Done, OutMessage, Platform, Runtime, RuntimeConfig, Sent, TraceEvent,
    wall_clock,
};
use tokio::sync::mpsc;

#[global_allocator]
static PEAK: PeakAlloc = PeakAlloc;

/// Streams `pieces` pieces of `size` bytes, as fast as it can.
#[derive(Debug)]
struct Firehose {
    pieces: usize,
    size: usize,
}

impl Agent for Firehose {
    fn run<'a>(
        &'a self,
        _: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let piece = "x".repeat(self.size - 1) + " ";
            for i in 0..self.pieces {
                deltas.delta(&piece);
                if i % 1000 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            Ok(AgentReply::text("done".to_owned()))
        })
    }
}

/// A platform whose edits take a millisecond, like a network's.
#[derive(Debug, Default)]
struct SlowEdits {
    edits: AtomicUsize,
}

impl Platform for SlowEdits {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            can_edit: true,
            can_delete: true,
            native_replies: true,
            max_message_chars: 4000,
            ..Capabilities::PLAIN
        }
    }

    fn send<'a>(&'a self, _: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async { Ok(MsgId::new("p1")) })
    }

    fn edit<'a>(&'a self, at: At<'a>, _: &'a MsgId, _: &'a str) -> Done<'a> {
        let _ = at;
        Box::pin(async move {
            self.edits.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(1)).await;
            Ok(())
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_streamed_in_many_pieces_costs_memory_in_proportion_to_the_reply() {
    const PIECES: usize = 50_000;
    const SIZE: usize = 40;
    let platform = Arc::new(SlowEdits::default());
    let mut agents: HashMap<String, Arc<dyn Agent>> = HashMap::new();
    agents.insert(
        "a".into(),
        Arc::new(Firehose {
            pieces: PIECES,
            size: SIZE,
        }),
    );
    let (tx, mut trace) = mpsc::unbounded_channel();
    let rt = Runtime::start(
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
            store: None,
            max_concurrent_turns: 4,
            hooks: Default::default(),
            cluster: None,
        },
        vec![platform.clone() as Arc<dyn Platform>],
        Some(tx),
    )
    .expect("starts");
    let before = PEAK.current_usage();
    PEAK.reset_peak_usage();
    assert!(
        rt.handle()
            .inbound(Message::new("q", "lobby", "alice", "@docs go", wall_clock()))
    );
    tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(e) = trace.recv().await {
            if matches!(e, TraceEvent::Delivered { .. }) {
                return;
            }
        }
    })
    .await
    .expect("the reply is delivered");
    let grew = PEAK.peak_usage().saturating_sub(before);
    let reply = PIECES * SIZE; // 2 MB
    assert!(
        grew < 16 * reply,
        "streaming {reply} bytes in {PIECES} pieces peaked {grew} bytes above the start"
    );
    eprintln!(
        "peak growth {grew} bytes for a {reply}-byte reply, {} edits",
        platform.edits.load(Ordering::SeqCst)
    );
    assert!(platform.edits.load(Ordering::SeqCst) > 1, "it did stream");
    rt.shutdown().await;
}
