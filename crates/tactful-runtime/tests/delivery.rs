//! The delivery path against an in-process platform double: streaming
//! placeholders, held directive headers and silence, chunking, retries, and
//! rooms that do not wait for each other.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_agents::{Agent, AgentError, AgentReply, Deltas};
use tactful_core::{EngineConfig, Message, MsgId, Output, PersonaSpec, Timestamp, TurnRequest};
use tactful_runtime::{
    At, Capabilities, DeliveryConfig, Done, OutMessage, Platform, PlatformError, Runtime, RuntimeConfig,
    Sent, TraceEvent,
};
use tokio::sync::mpsc;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Call {
    Send {
        room: String,
        text: String,
        reply_to: Option<String>,
        id: String,
    },
    Edit {
        id: String,
        text: String,
    },
    Delete {
        id: String,
    },
}

/// Records every call; fails the next `fail_sends` sends, or the next
/// `fail_replies` sends that reply to a message.
#[derive(Debug)]
struct Double {
    caps: Capabilities,
    calls: Mutex<Vec<Call>>,
    /// What each send said it follows (`OutMessage::follows`).
    follows: Mutex<Vec<Option<String>>>,
    fail_sends: Mutex<u32>,
    fail_replies: Mutex<u32>,
    next: AtomicU64,
    at_once: AtOnce,
}

/// Run once, as the first send succeeds, with the id it is shown under: a
/// person who sees the message and answers it at once.
#[derive(Default)]
struct AtOnce(Mutex<Option<Answer>>);

/// What the person does with the id the message is shown under.
type Answer = Box<dyn FnOnce(MsgId) + Send>;

impl std::fmt::Debug for AtOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AtOnce")
    }
}

impl Double {
    fn new(caps: Capabilities) -> Arc<Double> {
        Arc::new(Double {
            caps,
            calls: Mutex::new(Vec::new()),
            follows: Mutex::new(Vec::new()),
            fail_sends: Mutex::new(0),
            fail_replies: Mutex::new(0),
            next: AtomicU64::new(1),
            at_once: AtOnce::default(),
        })
    }

    fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("lock").clone()
    }

    /// The texts of every send, in order.
    fn sent(&self) -> Vec<String> {
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                Call::Send { text, .. } => Some(text),
                _ => None,
            })
            .collect()
    }
}

const FULL: Capabilities = Capabilities {
    can_edit: true,
    can_delete: true,
    native_replies: true,
    max_message_chars: 2000,
    ..Capabilities::PLAIN
};

impl Platform for Double {
    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let mut fail = self.fail_sends.lock().expect("lock");
            let mut fail_reply = self.fail_replies.lock().expect("lock");
            let id = format!("p{}", self.next.fetch_add(1, Ordering::SeqCst));
            let failed = if *fail > 0 {
                *fail -= 1;
                true
            } else if msg.reply_to.is_some() && msg.text != "…" && *fail_reply > 0 {
                *fail_reply -= 1;
                true
            } else {
                false
            };
            self.follows
                .lock()
                .expect("lock")
                .push(msg.follows.map(|f| f.to_string()));
            self.calls.lock().expect("lock").push(Call::Send {
                room: msg.room.to_string(),
                text: msg.text.to_owned(),
                reply_to: msg.reply_to.map(|r| r.to_string()),
                id: if failed { "FAILED".to_owned() } else { id.clone() },
            });
            if failed {
                Err(PlatformError("503 from the double".to_owned()))
            } else {
                if let Some(answer) = self.at_once.0.lock().expect("lock").take() {
                    answer(MsgId::new(id.as_str()));
                }
                Ok(MsgId::new(id))
            }
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        let _ = at;
        Box::pin(async move {
            self.calls.lock().expect("lock").push(Call::Edit {
                id: id.to_string(),
                text: text.to_owned(),
            });
            Ok(())
        })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        let _ = at;
        Box::pin(async move {
            self.calls
                .lock()
                .expect("lock")
                .push(Call::Delete { id: id.to_string() });
            Ok(())
        })
    }
}

/// Streams scripted pieces, pausing before each, keyed by trigger text.
#[derive(Debug)]
struct Streamer {
    scripts: HashMap<&'static str, (u64, Vec<&'static str>)>,
}

impl Agent for Streamer {
    fn run<'a>(
        &'a self,
        turn: &'a TurnRequest,
        deltas: &'a mut dyn Deltas,
    ) -> BoxFuture<'a, Result<AgentReply, AgentError>> {
        Box::pin(async move {
            let trigger = turn
                .triggers
                .last()
                .map(|e| e.text.to_string())
                .unwrap_or_default();
            let (pause, pieces) = self
                .scripts
                .iter()
                .find(|(k, _)| trigger.contains(*k))
                .map(|(_, v)| v.clone())
                .unwrap_or((0, vec!["NO_REPLY"]));
            let mut text = String::new();
            for p in pieces {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                deltas.delta(p);
                text.push_str(p);
            }
            Ok(AgentReply::text(text))
        })
    }
}

fn start(
    platform: Arc<Double>,
    scripts: Vec<(&'static str, (u64, Vec<&'static str>))>,
) -> (Runtime, mpsc::UnboundedReceiver<TraceEvent>) {
    start_with(platform, scripts, None)
}

/// [`start`], saving to `store`.
fn start_with(
    platform: Arc<Double>,
    scripts: Vec<(&'static str, (u64, Vec<&'static str>))>,
    store: Option<tactful_store::Store>,
) -> (Runtime, mpsc::UnboundedReceiver<TraceEvent>) {
    let mut agents: HashMap<String, Arc<dyn Agent>> = HashMap::new();
    agents.insert(
        "s".to_owned(),
        Arc::new(Streamer {
            scripts: scripts.into_iter().collect(),
        }),
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let runtime = Runtime::start(
        RuntimeConfig {
            engine: EngineConfig {
                personas: vec![PersonaSpec::new("docs", "s")],
                ..Default::default()
            },
            agents,
            delivery: DeliveryConfig {
                edit_interval: Duration::ZERO,
                placeholder: "…".to_owned(),
            },
            shutdown_grace: Duration::from_secs(20),
            store,
            max_concurrent_turns: 16,
            hooks: Default::default(),
            cluster: None,
        },
        vec![platform as Arc<dyn Platform>],
        Some(tx),
    )
    .expect("runtime starts");
    (runtime, rx)
}

fn msg(id: &str, room: &str, text: &str) -> Message {
    Message::new(id, room, "alice", text, Timestamp(0))
}

#[tokio::test]
async fn a_streamed_reply_grows_in_its_placeholder_and_never_shows_its_header() {
    let p = Double::new(FULL);
    let (rt, _trace) = start(
        p.clone(),
        vec![(
            "reset",
            (20, vec!["[[reply_", "to:q]]\n", "Hold the", " button."]),
        )],
    );
    rt.handle().inbound(msg("q", "main", "@docs how do I reset?"));
    rt.shutdown().await;
    let calls = p.calls();
    // The placeholder is a reply to the question from the start, so the
    // answer grows where it stays: under its quote, never moved.
    assert_eq!(
        calls,
        [
            Call::Send {
                room: "main".into(),
                text: "…".into(),
                reply_to: Some("q".into()),
                id: "p1".into()
            },
            Call::Edit {
                id: "p1".into(),
                text: "Hold the".into()
            },
            Call::Edit {
                id: "p1".into(),
                text: "Hold the button.".into()
            },
        ]
    );
    // Streaming showed the whole answer: the final send edits nothing more
    // (an identical edit spends the platform's rate limit for nothing).
}

#[tokio::test]
async fn a_reply_to_another_message_is_sent_as_one_then_the_placeholder_goes() {
    let p = Double::new(FULL);
    let (rt, _trace) = start(
        p.clone(),
        vec![("reset", (0, vec!["[[reply_to:earlier]]\nThat one."]))],
    );
    rt.handle().inbound(msg("earlier", "main", "the light is red"));
    rt.handle().inbound(msg("q", "main", "@docs how do I reset?"));
    rt.shutdown().await;
    assert_eq!(
        p.calls(),
        [
            Call::Send {
                room: "main".into(),
                text: "…".into(),
                reply_to: Some("q".into()),
                id: "p1".into()
            },
            Call::Edit {
                id: "p1".into(),
                text: "That one.".into()
            },
            // A reply to another message cannot be an edit: sent as a
            // reply first, then the placeholder goes.
            Call::Send {
                room: "main".into(),
                text: "That one.".into(),
                reply_to: Some("earlier".into()),
                id: "p2".into()
            },
            Call::Delete { id: "p1".into() },
        ]
    );
}

#[tokio::test]
async fn a_silent_turn_leaves_nothing_behind() {
    let p = Double::new(FULL);
    let (rt, _trace) = start(p.clone(), vec![("thanks", (20, vec!["NO", "_REP", "LY"]))]);
    rt.handle().inbound(msg("t", "main", "@docs thanks"));
    rt.shutdown().await;
    assert_eq!(
        p.calls(),
        [
            Call::Send {
                room: "main".into(),
                text: "…".into(),
                reply_to: Some("t".into()),
                id: "p1".into()
            },
            Call::Delete { id: "p1".into() },
            // docs was asked directly and this platform has no reactions
            // (like IRC): the silence notice, as a reply, instead of 👀.
            Call::Send {
                room: "main".into(),
                text: tactful_core::policy::DEFAULT_SILENCE_NOTICE.into(),
                reply_to: Some("t".into()),
                id: "p2".into()
            },
        ],
        "the half-typed token was never shown"
    );
}

/// A reasoning model streams its `<think>` block first: none of it is ever
/// shown, a `NO_REPLY` after it leaves nothing behind, and text after it
/// is the answer.
#[tokio::test]
async fn streamed_reasoning_is_never_shown() {
    let p = Double::new(FULL);
    let (rt, _trace) = start(
        p.clone(),
        vec![
            (
                "thanks",
                (
                    20,
                    vec!["<thi", "nk>Bob said it", " all.</th", "ink>\nNO_", "REPLY"],
                ),
            ),
            (
                "reset",
                (
                    20,
                    vec!["<think>", "hold it?", "</think>\n\n", "Hold the", " button."],
                ),
            ),
        ],
    );
    rt.handle().inbound(msg("t", "main", "@docs thanks"));
    rt.handle().inbound(msg("q", "other", "@docs how do I reset?"));
    rt.shutdown().await;
    let calls = p.calls();
    let shown: Vec<&str> = calls
        .iter()
        .filter_map(|c| match c {
            Call::Send { text, .. } | Call::Edit { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(
        shown
            .iter()
            .all(|t| !t.contains("think") && !t.contains("Bob") && !t.contains('<')),
        "{calls:?}"
    );
    assert!(shown.contains(&"Hold the button."), "{calls:?}");
    let deleted = calls.iter().filter(|c| matches!(c, Call::Delete { .. })).count();
    assert_eq!(deleted, 1, "the silent turn's placeholder goes: {calls:?}");
}

#[tokio::test]
async fn long_replies_are_split_with_balanced_code_fences() {
    let p = Double::new(Capabilities {
        max_message_chars: 60,
        ..FULL
    });
    let (rt, _trace) = start(
        p.clone(),
        vec![(
            "code",
            (
                0,
                vec![
                    "Here it is:\n```rust\nfn one() { println!(\"one\"); }\nfn two() { println!(\"two\"); }\nfn three() { println!(\"three\"); }\n```\nThat's all.",
                ],
            ),
        )],
    );
    rt.handle().inbound(msg("c", "main", "@docs show me code"));
    rt.shutdown().await;
    let texts: Vec<String> = p
        .calls()
        .into_iter()
        .filter_map(|c| match c {
            Call::Send { text, .. } | Call::Edit { text, .. } if text != "…" => Some(text),
            _ => None,
        })
        .collect();
    // The streaming edit shows what fits; the final parts follow.
    let finals = &texts[1..];
    assert!(finals.len() >= 3, "{texts:#?}");
    for part in finals {
        assert!(part.chars().count() <= 60, "{part:?}");
        assert_eq!(part.matches("```").count() % 2, 0, "balanced: {part:?}");
    }
    assert!(finals[0].starts_with("Here it is:"));
    assert!(finals.last().is_some_and(|l| l.ends_with("That's all.")));
    // The first part went into the placeholder (`p1`); every later part
    // says it follows it, so a platform can put it in the same place.
    let follows = p.follows.lock().expect("lock").clone();
    assert_eq!(follows[0], None, "the placeholder follows nothing");
    assert!(follows.len() >= 3, "{follows:?}");
    assert!(
        follows[1..].iter().all(|f| f.as_deref() == Some("p1")),
        "{follows:?}"
    );
}

#[tokio::test]
async fn a_failed_send_is_retried_once() {
    let p = Double::new(Capabilities {
        can_edit: false,
        ..FULL
    });
    *p.fail_sends.lock().expect("lock") = 1;
    let (rt, _trace) = start(p.clone(), vec![("hi", (0, vec!["[[reply_to:h]]\nHello!"]))]);
    rt.handle().inbound(msg("h", "main", "@docs hi"));
    rt.shutdown().await;
    let sends: Vec<_> = p
        .calls()
        .into_iter()
        .filter(|c| matches!(c, Call::Send { .. }))
        .collect();
    assert_eq!(sends.len(), 2, "{sends:?}");
    assert!(matches!(&sends[0], Call::Send { id, .. } if id == "FAILED"));
    assert!(matches!(&sends[1], Call::Send { text, reply_to: Some(r), .. } if text == "Hello!" && r == "h"));
}

#[tokio::test]
async fn when_a_reply_cannot_be_sent_the_placeholder_keeps_the_text() {
    let p = Double::new(FULL);
    // The placeholder goes through; both tries of the reply (to another
    // message, so it cannot be an edit) fail.
    *p.fail_replies.lock().expect("lock") = 2;
    let (rt, _trace) = start(p.clone(), vec![("hi", (0, vec!["[[reply_to:g]]\nHello!"]))]);
    rt.handle().inbound(msg("g", "main", "good morning"));
    rt.handle().inbound(msg("h", "main", "@docs hi"));
    rt.shutdown().await;
    let calls = p.calls();
    assert_eq!(
        calls.first(),
        Some(&Call::Send {
            room: "main".into(),
            text: "…".into(),
            reply_to: Some("h".into()),
            id: "p1".into()
        })
    );
    let failed = calls
        .iter()
        .filter(|c| matches!(c, Call::Send { id, .. } if id == "FAILED"))
        .count();
    assert_eq!(failed, 2, "tried twice: {calls:#?}");
    // What the placeholder last shows is the reply (streamed into it
    // already, so the failed send leaves it as it is).
    assert_eq!(
        calls.iter().rev().find(|c| matches!(c, Call::Edit { .. })),
        Some(&Call::Edit {
            id: "p1".into(),
            text: "Hello!".into()
        }),
        "{calls:#?}"
    );
    assert!(
        !calls.iter().any(|c| matches!(c, Call::Delete { .. })),
        "the placeholder is not deleted: {calls:#?}"
    );
}

#[tokio::test]
async fn an_answer_whose_placeholder_failed_still_replies_to_the_question() {
    let p = Double::new(FULL);
    // Both tries of the placeholder fail; the answer names no message.
    *p.fail_sends.lock().expect("lock") = 2;
    let (rt, _trace) = start(p.clone(), vec![("reset", (0, vec!["Hold the button."]))]);
    rt.handle().inbound(msg("q", "main", "@docs how do I reset?"));
    rt.shutdown().await;
    let sent: Vec<Call> = p
        .calls()
        .into_iter()
        .filter(|c| matches!(c, Call::Send { id, .. } if id != "FAILED"))
        .collect();
    assert_eq!(
        sent,
        [Call::Send {
            room: "main".into(),
            text: "Hold the button.".into(),
            reply_to: Some("q".into()),
            id: "p3".into()
        }],
        "{:#?}",
        p.calls()
    );
}

#[tokio::test]
async fn a_slow_agent_in_one_room_does_not_delay_another_room() {
    let p = Double::new(Capabilities {
        can_edit: false,
        ..FULL
    });
    let (rt, mut trace) = start(
        p.clone(),
        vec![
            ("slow", (1500, vec!["slow answer"])),
            ("fast", (0, vec!["fast answer"])),
        ],
    );
    let h = rt.handle();
    h.inbound(msg("a", "room-a", "@docs slow please"));
    h.inbound(msg("b", "room-b", "@docs fast please"));
    let mut sends = Vec::new();
    while sends.len() < 2 {
        match tokio::time::timeout(Duration::from_secs(10), trace.recv()).await {
            Ok(Some(TraceEvent::Engine(Output::Send(s)))) => sends.push(s.room.to_string()),
            Ok(Some(_)) => {}
            other => panic!("trace ended early: {other:?}"),
        }
    }
    assert_eq!(sends, ["room-b", "room-a"]);
    rt.shutdown().await;
}

#[tokio::test]
async fn replies_to_the_platform_id_of_a_sent_reply_address_the_persona() {
    let p = Double::new(Capabilities {
        can_edit: false,
        ..FULL
    });
    let (rt, mut trace) = start(
        p.clone(),
        vec![
            ("one", (0, vec!["first answer"])),
            ("two", (0, vec!["second answer"])),
        ],
    );
    let h = rt.handle();
    h.inbound(msg("q1", "main", "@docs one"));
    // Wait until the engine has learned the platform id of the reply.
    let platform_id = loop {
        match tokio::time::timeout(Duration::from_secs(10), trace.recv()).await {
            Ok(Some(TraceEvent::Delivered { platform, .. })) => break platform,
            Ok(Some(_)) => {}
            other => panic!("no delivery: {other:?}"),
        }
    };
    assert_eq!(platform_id.as_str(), "p1");
    // The platform echoes our reply under its own id: already heard.
    let mut echo = Message::new("p1", "main", "docs", "first answer", Timestamp(1));
    echo.sender.is_bot = true;
    h.inbound(echo);
    // A human replies to that id, naming nobody: it is for docs.
    let mut reply = msg("q2", "main", "two, please");
    reply.reply_to = Some("p1".into());
    h.inbound(reply);
    rt.shutdown().await;
    let texts = p.sent();
    assert_eq!(
        texts,
        ["first answer", "second answer"],
        "the echo was not answered; the reply to p1 was"
    );
}

/// A person who answers a reply the moment it is shown replies to the id
/// the platform gave it; the engine must know that id by then, although
/// the reply's record is still being saved (live, a "more?" to the demo
/// Guide's answer was sometimes taken for a message about nothing). On this
/// single-threaded runtime the person's answer is heard exactly while the
/// delivery waits for that record: before the engine was told the id early,
/// it was not addressed to docs and went unanswered.
#[tokio::test]
async fn a_reply_answered_the_moment_it_is_shown_is_a_reply_to_the_persona() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = tactful_store::Store::open(&dir.path().join("s.db")).expect("store opens");
    let p = Double::new(Capabilities {
        can_edit: false,
        ..FULL
    });
    let (rt, _trace) = start_with(
        p.clone(),
        vec![
            ("one", (0, vec!["first answer"])),
            ("two", (0, vec!["second answer"])),
        ],
        Some(store),
    );
    let h = rt.handle();
    let person = h.clone();
    *p.at_once.0.lock().expect("lock") = Some(Box::new(move |shown: MsgId| {
        let mut reply = msg("q2", "main", "two, please");
        reply.reply_to = Some(shown);
        tokio::spawn(async move {
            let _ = person.inbound_saved(reply, Vec::new()).await;
        });
    }));
    h.inbound(msg("q1", "main", "@docs one"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while p.calls().len() < 2 && tokio::time::Instant::now() < deadline {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    rt.shutdown().await;
    let texts = p.sent();
    assert_eq!(
        texts,
        ["first answer", "second answer"],
        "the answer to p1 was for docs"
    );
}
