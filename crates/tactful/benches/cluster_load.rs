//! Several processes on one PostgreSQL store, under load: how many
//! messages they decide and answer per second, what the database writes
//! for each, and the latency of a reply when 100,000 rooms each hear one
//! message a minute (about 1,700 a second).
//!
//! `cargo bench -p tactful --bench cluster_load` starts 1, 2 and 3
//! `tactful run` processes (this build's binary) on a schema of their own,
//! with Telegram played by the Bot API double (one bot; its one poller puts
//! every message in the inbox, each room's owner decides and answers) and
//! an instant `script` agent, and for each:
//!
//! - **saturation**: 20,000 questions over 1,000 groups, posted at 4,000 a
//!   second; throughput is questions answered per second, from the first
//!   post to the last answer; the database's commits and rows written
//!   (`pg_stat_database`) are divided by the questions;
//! - **100,000 rooms**: 1,700 messages a second for 60 s over 100,000
//!   groups, first every one a question to the bot, then one in ten (the
//!   rest chatter the bot, in `mention` mode, decides to leave alone).
//!   Answer latency is from the post to the answer's `sendMessage`
//!   reaching the double (it includes the poll, the inbox, the decision,
//!   the commit and the send); decision latency, of every message, from
//!   the post to the time its decision records (read from the store
//!   afterwards: the engine's wall clock when it decided).
//!
//! `TACTFUL_BENCH_PROCESSES=2` measures one count only;
//! `TACTFUL_BENCH_RATE=1000` runs the many-rooms part alone at that rate
//! (60 s), with `TACTFUL_BENCH_EVERY=4` one message in 4 a question (1,
//! every one, by default). Under `cargo
//! test`/`cargo nextest` a smoke run (one process, 200 questions) checks it
//! works, and a short many-rooms part (100 messages, one in 4 a
//! question) that every message is decided once. Without a PostgreSQL
//! (see `tactful_store::testing`) it says so.

#[cfg(feature = "telegram")]
mod harness;

/// The tests' shared double scaffolding, where the Telegram double finds
/// it (`crate::common::double`).
#[cfg(feature = "telegram")]
#[path = "../tests/common/double.rs"]
mod double;
#[cfg(feature = "telegram")]
mod common {
    pub(crate) use crate::double;
}

#[cfg(feature = "telegram")]
#[path = "../tests/telegram_double/mod.rs"]
mod telegram_double;

#[cfg(feature = "telegram")]
#[path = "../tests/cluster_setup/mod.rs"]
mod cluster_setup;

#[cfg(not(feature = "telegram"))]
fn main() {
    eprintln!("the cluster_load benchmark needs the telegram feature");
}

#[cfg(feature = "telegram")]
fn main() {
    let Some(bench) = harness::mode() else {
        return;
    };
    let counts: Vec<usize> = match std::env::var("TACTFUL_BENCH_PROCESSES") {
        Ok(n) => vec![n.parse().expect("TACTFUL_BENCH_PROCESSES is a number")],
        Err(_) if bench => vec![1, 2, 3],
        Err(_) => vec![1],
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    // `TACTFUL_BENCH_RATE=1000` runs the many-rooms part alone, at that
    // rate: where the machine keeps up.
    let rate: Option<f64> = std::env::var("TACTFUL_BENCH_RATE")
        .ok()
        .map(|r| r.parse().expect("TACTFUL_BENCH_RATE is a number"));
    let every: usize = std::env::var("TACTFUL_BENCH_EVERY")
        .map_or(1, |e| e.parse().expect("TACTFUL_BENCH_EVERY is a whole number"))
        .max(1);
    for n in counts {
        if let (true, Some(rate)) = (bench, rate) {
            rt.block_on(load::steady(n, rate, 60, every));
        } else if bench {
            rt.block_on(load::saturation(n, 20_000, 1_000, 4_000.0));
            rt.block_on(load::steady(n, 1_700.0, 60, 1));
            rt.block_on(load::steady(n, 1_700.0, 60, 10));
        } else {
            rt.block_on(load::saturation(n, 200, 20, 400.0));
            rt.block_on(load::steady(n, 50.0, 2, 4));
        }
    }
}

#[cfg(feature = "telegram")]
mod load {
    use std::collections::HashMap;
    use std::time::{Duration, Instant};

    use serde_json::json;
    use tactful_store::testing::Schema;

    use crate::cluster_setup::{DOCS_ACCOUNT, Node, TOKEN, bot, config, holder, shares, start_node};
    use crate::telegram_double::Double;

    /// `n` processes sharing the partitions, one polling the bot.
    async fn cluster(schema: &Schema, double: &Double, n: usize) -> Vec<Node> {
        let config = config(&schema.url, &double.url, 10, 0);
        let nodes: Vec<Node> = (0..n).map(|_| start_node(&config)).collect();
        let pids: Vec<u32> = nodes.iter().map(|n| n.child.id()).collect();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let held = shares(schema);
            // Held, and polling: a question posted before the poller
            // started may be dated before it, and a first poll takes such
            // a message as history, unanswered (seen once in CI).
            let polling = holder(schema, DOCS_ACCOUNT).is_some_and(|p| pids.contains(&p))
                && double.calls().iter().any(|c| c.method == "getUpdates");
            if held.len() == n && held.iter().sum::<usize>() == 256 && polling {
                break;
            }
            assert!(Instant::now() < deadline, "the processes never settled");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The poller's first poll takes what came before as history: one
        // question answered means it polls from where it is.
        let posted = ask(double, -1);
        wait_answered(double, &[posted], Duration::from_secs(60)).await;
        nodes
    }

    /// A question in `chat`: (chat, message id, when).
    fn ask(double: &Double, chat: i64) -> (i64, i64, Instant) {
        say(double, chat, true)
    }

    /// A question to the bot in `chat`, or a line of chatter that does not
    /// address it: (chat, message id, when).
    fn say(double: &Double, chat: i64, question: bool) -> (i64, i64, Instant) {
        let fields = if question {
            json!({"text": "@docs_bot are you there?", "entities": [{"type": "mention", "offset": 0, "length": 9}]})
        } else {
            json!({"text": "lunch at noon, same place as last week?"})
        };
        let id = double.post(
            &[TOKEN],
            json!({"id": chat, "type": "supergroup", "title": "bench"}),
            json!({"id": 111, "is_bot": false, "first_name": "Alice", "username": "alice"}),
            fields,
        );
        (chat, id, Instant::now())
    }

    /// When each question's answer reached the double, by (chat, id): the
    /// answer names the question ("docs answers 17"), whether it came as
    /// a message or as the final edit of its placeholder. Reads the calls
    /// after the first `seen` only, and moves `seen` on.
    fn answered(double: &Double, seen: &mut usize, at: &mut HashMap<(i64, i64), Instant>) {
        let calls = double.calls_from(*seen);
        *seen += calls.len();
        for c in calls {
            if !matches!(c.method.as_str(), "sendMessage" | "editMessageText") || c.status != 200 {
                continue;
            }
            let answering = c.body["text"]
                .as_str()
                .and_then(|t| t.strip_prefix("docs answers "))
                .and_then(|id| id.parse::<i64>().ok());
            if let (Some(chat), Some(id)) = (c.body["chat_id"].as_i64(), answering) {
                at.entry((chat, id)).or_insert(c.at);
            }
        }
    }

    /// Waits until every question of `posted` is answered; the answers'
    /// times. Looks twice a second: the bench's own work shares the cores.
    async fn wait_answered(
        double: &Double,
        posted: &[(i64, i64, Instant)],
        within: Duration,
    ) -> HashMap<(i64, i64), Instant> {
        let deadline = Instant::now() + within;
        let (mut seen, mut at) = (0, HashMap::new());
        let mut next = 0;
        loop {
            answered(double, &mut seen, &mut at);
            while next < posted.len() && at.contains_key(&(posted[next].0, posted[next].1)) {
                next += 1;
            }
            let missing = posted[next..]
                .iter()
                .filter(|(c, i, _)| !at.contains_key(&(*c, *i)))
                .count();
            if missing == 0 {
                return at;
            }
            if Instant::now() >= deadline {
                for c in double.calls().iter().rev().take(10) {
                    eprintln!("{} {} -> {}", c.method, c.body, c.status);
                }
                panic!("{missing} of {} questions never answered", posted.len());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Posts `total` messages at `rate` a second into `chat(i)`, one in
    /// `every` a question (the first among them).
    async fn offer(
        double: &Double,
        total: usize,
        rate: f64,
        every: usize,
        chat: impl Fn(usize) -> i64,
    ) -> Vec<(i64, i64, Instant)> {
        let began = Instant::now();
        let mut posted = Vec::with_capacity(total);
        for i in 0..total {
            let due = began + Duration::from_secs_f64(i as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                tokio::time::sleep(wait).await;
            }
            posted.push(say(double, chat(i), i % every == 0));
        }
        posted
    }

    /// Waits until the store holds a decision for each of `posted` (one
    /// each: a second, seen while waiting, fails the run, as one written
    /// later does at the end, [`decided_once_to_the_end`]); how
    /// long after its post each was decided, in ms, sorted. A decision
    /// records the engine's wall clock when it decided (the commit that
    /// makes it durable follows within the writer's batch).
    async fn decided(schema: &Schema, posted: &[(i64, i64, Instant)], wall: &[u128]) -> Vec<f64> {
        let keys: Vec<(String, String)> = posted
            .iter()
            .map(|(chat, id, _)| (format!("tg:{chat}"), id.to_string()))
            .collect();
        let deadline = Instant::now() + Duration::from_secs(600);
        let at = loop {
            // The persona's decisions about its own replies aside.
            let rows = schema
                .column(
                    "SELECT room || ' ' || msg || ' ' || at FROM decisions
                     WHERE persona = 'docs' AND room <> 'tg:-1' AND msg NOT LIKE 'docs:%'",
                )
                .expect("decisions read");
            let mut at: HashMap<(String, String), u128> = HashMap::new();
            for r in rows.into_iter().flatten() {
                let f: Vec<&str> = r.split(' ').collect();
                let [room, msg, when] = f[..] else {
                    panic!("a decision row reads {r:?}");
                };
                let when = when.parse().expect("a decision's time");
                let again = at.insert((room.to_owned(), msg.to_owned()), when);
                assert!(again.is_none(), "message {msg} in {room} decided twice");
            }
            let undecided = keys.iter().filter(|k| !at.contains_key(*k)).count();
            if undecided == 0 {
                break at;
            }
            assert!(
                Instant::now() < deadline,
                "{undecided} of {} messages never decided",
                posted.len()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        };
        let mut ms: Vec<f64> = keys
            .iter()
            .zip(wall)
            .map(|(key, posted_at)| at[key].saturating_sub(*posted_at) as f64)
            .collect();
        ms.sort_by(f64::total_cmp);
        ms
    }

    /// The database's commits and rows written so far (every schema: run
    /// it on a quiet server).
    fn db_counters(schema: &Schema) -> (f64, f64) {
        let read = |sql: &str| -> f64 {
            schema
                .column(sql)
                .ok()
                .and_then(|c| c.into_iter().flatten().next())
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0)
        };
        (
            read("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"),
            read(
                "SELECT tup_inserted + tup_updated + tup_deleted FROM pg_stat_database
                 WHERE datname = current_database()",
            ),
        )
    }

    /// CPU seconds (user and system) used so far by the given processes,
    /// read from `/proc/PID/stat` (fields 14 and 15, in the kernel's
    /// fixed 100 ticks a second). A process that is gone counts nothing.
    fn cpu_seconds(pids: &[u32]) -> f64 {
        pids.iter()
            .filter_map(|pid| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok())
            .filter_map(|stat| {
                // The command name may hold spaces: fields start after ')'.
                let rest = &stat[stat.rfind(')')? + 2..];
                let f: Vec<&str> = rest.split(' ').collect();
                Some(f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?)
            })
            .sum::<f64>()
            / 100.0
    }

    /// The PostgreSQL server's processes on this machine (`postgres`).
    fn server_pids() -> Vec<u32> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres")
            })
            .collect()
    }

    /// CPU seconds so far of: the tactful processes, the database server,
    /// and this bench (which plays Telegram and the people).
    fn cpu_split(nodes: &[Node]) -> [f64; 3] {
        let tactful: Vec<u32> = nodes.iter().map(|n| n.child.id()).collect();
        [
            cpu_seconds(&tactful),
            cpu_seconds(&server_pids()),
            cpu_seconds(&[std::process::id()]),
        ]
    }

    fn percentile(sorted: &[f64], p: f64) -> f64 {
        let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
        sorted[i.min(sorted.len() - 1)]
    }

    /// Latencies in ms, sorted.
    fn latencies(posted: &[(i64, i64, Instant)], at: &HashMap<(i64, i64), Instant>) -> Vec<f64> {
        let mut ms: Vec<f64> = posted
            .iter()
            .filter_map(|(c, i, t)| Some(at.get(&(*c, *i))?.duration_since(*t).as_secs_f64() * 1e3))
            .collect();
        ms.sort_by(f64::total_cmp);
        ms
    }

    pub async fn saturation(n: usize, total: usize, rooms: usize, rate: f64) {
        let Some(schema) = Schema::new() else {
            eprintln!("cluster_load: no PostgreSQL, nothing measured");
            return;
        };
        let double = Double::start(vec![bot()]).await;
        let nodes = cluster(&schema, &double, n).await;
        // The stats collector is a moment behind.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let before = db_counters(&schema);
        let cpu_before = cpu_split(&nodes);
        let posted = offer(&double, total, rate, 1, |i| -10_000 - (i % rooms) as i64).await;
        let at = wait_answered(&double, &posted, Duration::from_secs(600)).await;
        let first = posted[0].2;
        let last = posted
            .iter()
            .filter_map(|(c, i, _)| at.get(&(*c, *i)))
            .max()
            .copied()
            .unwrap_or(first);
        let secs = last.duration_since(first).as_secs_f64();
        let cpu_after = cpu_split(&nodes);
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let after = db_counters(&schema);
        let ms = latencies(&posted, &at);
        println!(
            "saturation, {n} process(es): {total} questions over {rooms} groups offered at {rate}/s, answered in {secs:.1} s: {:.0} a second; latency p50 {:.0} ms, p99 {:.0} ms; {:.1} commits and {:.1} rows written a question",
            total as f64 / secs,
            percentile(&ms, 0.5),
            percentile(&ms, 0.99),
            (after.0 - before.0) / total as f64,
            (after.1 - before.1) / total as f64,
        );
        // Where the cores went, per question: what a machine of its own
        // for each part would need.
        let per = |i: usize| (cpu_after[i] - cpu_before[i]) * 1e3 / total as f64;
        println!(
            "  CPU a question: tactful {:.2} ms, PostgreSQL {:.2} ms, the bench and its Telegram double {:.2} ms",
            per(0),
            per(1),
            per(2),
        );
    }

    pub async fn steady(n: usize, rate: f64, secs: u64, every: usize) {
        let Some(schema) = Schema::new() else {
            eprintln!("cluster_load: no PostgreSQL, nothing measured");
            return;
        };
        let double = Double::start(vec![bot()]).await;
        let nodes = cluster(&schema, &double, n).await;
        let total = (rate * secs as f64) as usize;
        let cpu_before = cpu_split(&nodes);
        // The post's wall clock, to compare with what decisions record.
        let (began, wall_began) = (Instant::now(), unix_ms());
        let posted = offer(&double, total, rate, every, |i| -1_000_000 - (i % ROOMS) as i64).await;
        let wall: Vec<u128> = posted
            .iter()
            .map(|(_, _, t)| wall_began + t.duration_since(began).as_millis())
            .collect();
        let questions: Vec<(i64, i64, Instant)> = posted.iter().step_by(every).copied().collect();
        let at = wait_answered(&double, &questions, Duration::from_secs(600)).await;
        let ms = latencies(&questions, &at);
        let decided = decided(&schema, &posted, &wall).await;
        let cpu_after = cpu_split(&nodes);
        // Each second's worst: a queue that grows shows as a climb.
        let first = posted[0].2;
        let mut worst = vec![0f64; secs as usize + 1];
        for (c, i, t) in &questions {
            if let Some(a) = at.get(&(*c, *i)) {
                let s = (t.duration_since(first).as_secs() as usize).min(worst.len() - 1);
                worst[s] = worst[s].max(a.duration_since(*t).as_secs_f64() * 1e3);
            }
        }
        println!(
            "{total} messages over {ROOMS} rooms at {rate}/s, one in {every} a question, {n} process(es): decision latency p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms; answer latency p50 {:.1} ms, p99 {:.1} ms, max {:.0} ms",
            percentile(&decided, 0.5),
            percentile(&decided, 0.99),
            decided.last().copied().unwrap_or(0.0),
            percentile(&ms, 0.5),
            percentile(&ms, 0.99),
            ms.last().copied().unwrap_or(0.0),
        );
        let per = |i: usize| (cpu_after[i] - cpu_before[i]) * 1e3 / total as f64;
        println!(
            "  CPU a message: tactful {:.2} ms, PostgreSQL {:.2} ms, the bench and its Telegram double {:.2} ms",
            per(0),
            per(1),
            per(2),
        );
        let worst: Vec<String> = worst.iter().map(|w| format!("{w:.0}")).collect();
        println!("  worst answer each second (ms): {}", worst.join(" "));
        decided_once_to_the_end(&schema, nodes).await;
    }

    /// The processes stopped (what they decided written), no message has
    /// a second decision: [`decided`] sees only those that came before its
    /// wait ended.
    async fn decided_once_to_the_end(schema: &Schema, nodes: Vec<Node>) {
        tokio::task::spawn_blocking(move || {
            for mut node in nodes {
                node.terminate();
            }
        })
        .await
        .expect("the processes stop");
        let twice = schema
            .column(
                "SELECT room || ' ' || msg FROM decisions
                 WHERE persona = 'docs' AND msg NOT LIKE 'docs:%'
                 GROUP BY room, msg HAVING count(*) > 1",
            )
            .expect("decisions read");
        assert!(twice.is_empty(), "decided twice: {twice:?}");
    }

    /// The rooms of the many-rooms part.
    const ROOMS: usize = 100_000;

    fn unix_ms() -> u128 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
    }
}
