//! Engine throughput on a synthetic load: 10,000 rooms × 5 personas.
//!
//! Every room already holds state (one earlier message). Messages arrive
//! round-robin over the rooms, 1 ms apart; 1 in 20 mentions a persona, whose
//! turn is answered at once so the full path runs: decision for each of the
//! five personas, transcript, rate-limit reservation, turn request, reply,
//! and the reply heard back by the room. Only the engine is timed; building
//! the messages (the platform adapter's work) is not.
//!
//! A second case is ambient listening at scale: 100,000 rooms, one
//! persona in `ambient` mode, each room's buffer waiting for its flush
//! (60 s, not reached), and after each message the count of pending work
//! the runtime's driver asks for after every event
//! (`Engine::pending_work`): with every room waiting, that count is what
//! grows with the rooms.
//!
//! Run: `cargo bench -p tactful-core --bench engine`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use tactful_core::{
    AgentResult, Engine, EngineConfig, Message, Mode, Output, PersonaSpec, PolicyPatch, Timestamp,
};

const ROOMS: usize = 10_000;
const PERSONAS: usize = 5;
const BATCH: usize = 100_000;

fn engine() -> Engine {
    Engine::new(EngineConfig {
        personas: (0..PERSONAS)
            .map(|i| PersonaSpec::new(&format!("p{i}"), "a"))
            .collect(),
        ..Default::default()
    })
    .expect("valid config")
}

const CHATTER: [&str; 4] = [
    "has anyone looked at the deploy logs from this morning yet",
    "lunch in ten minutes, the usual place",
    "I pushed a fix for the flaky test, please rebase",
    "the staging database is slow again, probably the nightly job",
];

fn messages(offset: usize) -> Vec<Message> {
    (0..BATCH)
        .map(|i| {
            let n = offset + i;
            let room = format!("room-{}", n % ROOMS);
            let text = if n.is_multiple_of(20) {
                format!("@p{} could you summarise the thread above?", n % PERSONAS)
            } else {
                CHATTER[n % CHATTER.len()].to_owned()
            };
            let sender = format!("user-{}", n % 37);
            Message::new(
                format!("m{n}").as_str(),
                room.as_str(),
                sender.as_str(),
                &text,
                Timestamp(n as u64),
            )
        })
        .collect()
}

/// Feeds messages and drains outputs, answering every turn immediately.
fn run(engine: &mut Engine, batch: Vec<Message>) -> usize {
    let mut outputs = 0;
    let mut turns = Vec::new();
    for m in batch {
        let now = m.time;
        engine.handle_message(now, m);
        while let Some(o) = engine.poll_output() {
            if let Output::CallAgent(req) = &o {
                turns.push(req.turn);
            }
            outputs += 1;
            black_box(o);
        }
        for t in turns.drain(..) {
            engine.handle_agent_result(now, t, AgentResult::Output("Here is the summary.".to_owned()));
            while let Some(o) = engine.poll_output() {
                outputs += 1;
                black_box(o);
            }
        }
    }
    outputs
}

fn bench(c: &mut Criterion) {
    let warmup = messages(0)[..ROOMS].to_vec();
    let batch = messages(ROOMS);
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(BATCH as u64));
    group.sample_size(20);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("10k_rooms_5_personas_mention_mode", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut e = engine();
                run(&mut e, warmup.clone());
                let input = batch.clone();
                let start = Instant::now();
                black_box(run(&mut e, input));
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

/// Rooms waiting in the ambient case: 100,000 when measured (`--bench`);
/// under `cargo test`/`nextest` a few hundred, enough to run the path
/// (debug builds check the pending-work count against a scan of every
/// room on each call, which at full size would take an hour).
fn ambient_rooms() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        100_000
    } else {
        300
    }
}

fn ambient_engine() -> Engine {
    let mut policies = tactful_core::PolicyTable::default();
    let mut listen = PolicyPatch {
        mode: Some(Mode::Ambient),
        allow_silence: Some(true),
        ..PolicyPatch::default()
    };
    listen.ambient.flush_after = Some(Duration::from_secs(60));
    policies.default.personas.insert("guide".into(), listen);
    Engine::new(EngineConfig {
        personas: vec![PersonaSpec::new("guide", "a")],
        policies,
        ..Default::default()
    })
    .expect("valid config")
}

/// `n` chatter lines, one per room, all within a second from `start` ms
/// (no flush comes due).
fn ambient_messages(start: u64, n: usize, offset: usize) -> Vec<Message> {
    let rooms = ambient_rooms();
    (0..n)
        .map(|i| {
            Message::new(
                format!("a{}", offset + i).as_str(),
                format!("room-{}", i % rooms).as_str(),
                "user-1",
                CHATTER[i % CHATTER.len()],
                Timestamp(start + (i / 100) as u64),
            )
        })
        .collect()
}

fn bench_ambient(c: &mut Criterion) {
    let rooms = ambient_rooms();
    let warmup = ambient_messages(0, rooms, 0);
    let batch = ambient_messages(1_000, (rooms / 10).max(30), rooms);
    let mut group = c.benchmark_group("engine");
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    group.bench_function("100k_rooms_ambient_waiting_with_pending_work", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut e = ambient_engine();
                for m in warmup.clone() {
                    e.handle_message(m.time, m);
                    while e.poll_output().is_some() {}
                }
                let input = batch.clone();
                let start = Instant::now();
                for m in input {
                    e.handle_message(m.time, m);
                    while let Some(o) = e.poll_output() {
                        black_box(o);
                    }
                    black_box(e.pending_work());
                }
                total += start.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench, bench_ambient);
criterion_main!(benches);
