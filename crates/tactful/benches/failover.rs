//! Failover: how long a room goes unanswered when the process owning it
//! is killed (`kill -9`), with two `tactful run` processes on one
//! PostgreSQL database and Telegram played by the Bot API double.
//!
//! `cargo bench -p tactful --bench failover` kills the owner of a room five
//! times for each lease length (10 s, the default, and 2 s): from the kill
//! to the answer to a question asked right after it. The goal is the lease
//! plus one second: the lease runs out at most `lease_seconds` after the
//! last renewal, and the survivor takes it within a second of that.
//!
//! Under `cargo test`/`cargo nextest` one kill with a 2 s lease runs as a
//! smoke test. Without a PostgreSQL (see `tactful_store::testing`) it says
//! so and does nothing.

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
    eprintln!("the failover benchmark needs the telegram feature");
}

#[cfg(feature = "telegram")]
fn main() {
    let Some(bench) = harness::mode() else {
        return;
    };
    let runs: &[(u64, usize)] = if bench { &[(10, 5), (2, 5)] } else { &[(2, 1)] };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio");
    for &(lease, kills) in runs {
        rt.block_on(failover::measure(lease, kills));
    }
}

#[cfg(feature = "telegram")]
mod failover {
    use std::time::{Duration, Instant};

    use serde_json::json;
    use tactful_core::RoomId;
    use tactful_store::partition_of;
    use tactful_store::testing::Schema;

    use crate::cluster_setup::{DOCS_ACCOUNT, TOKEN, bot, config, holder, shares, start_node};
    use crate::telegram_double::Double;

    /// Waits (90 s at most) until `pids` hold all 256 partitions between
    /// them, each some, and one of them polls the bot: holds its lease and
    /// has polled (a question dated before the poller started is history
    /// to its first poll, never answered).
    fn settled(schema: &Schema, double: &Double, pids: &[u32]) {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let held = shares(schema);
            let polling = holder(schema, DOCS_ACCOUNT).is_some_and(|p| pids.contains(&p))
                && double.calls().iter().any(|c| c.method == "getUpdates");
            let total: usize = held.iter().sum();
            if held.len() == pids.len() && total == 256 && polling {
                return;
            }
            assert!(Instant::now() < deadline, "the processes never settled");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Asks in `chat`; waits (90 s at most) for the answer.
    async fn ask(double: &Double, chat: i64) {
        let id = double.post(
            &[TOKEN],
            json!({"id": chat, "type": "supergroup", "title": "bench"}),
            json!({"id": 111, "is_bot": false, "first_name": "Alice", "username": "alice"}),
            json!({"text": "@docs_bot are you there?", "entities": [{"type": "mention", "offset": 0, "length": 9}]}),
        );
        let deadline = Instant::now() + Duration::from_secs(90);
        while !double
            .bot_messages(chat)
            .iter()
            .any(|m| m.reply_to == Some(id) && m.text.starts_with("docs answers"))
        {
            assert!(Instant::now() < deadline, "no answer in {chat}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn measure(lease: u64, kills: usize) {
        let Some(schema) = Schema::new() else {
            eprintln!("failover: no PostgreSQL, nothing measured");
            return;
        };
        let double = Double::start(vec![bot()]).await;
        let config = config(&schema.url, &double.url, lease, 0);
        let mut nodes = vec![start_node(&config), start_node(&config)];
        let mut took = Vec::new();
        for kill in 0..kills {
            let pids: Vec<u32> = nodes.iter().map(|n| n.child.id()).collect();
            settled(&schema, &double, &pids);
            // A room the process that does not poll owns: its death
            // stops that room alone, not the bot.
            let poller = holder(&schema, DOCS_ACCOUNT);
            let (chat, owner) = (0..)
                .map(|i| -5000 - i64::from(kill as u32) * 1000 - i)
                .find_map(|chat| {
                    let part = partition_of(&RoomId::new(format!("tg:{chat}")));
                    let owner = holder(&schema, &format!("partition:{part}"))?;
                    (Some(owner) != poller).then_some((chat, owner))
                })
                .expect("a room");
            ask(&double, chat).await;
            let at = nodes.iter().position(|n| n.child.id() == owner).expect("ours");
            let mut dead = nodes.remove(at);
            let _ = dead.child.kill();
            let killed = Instant::now();
            let _ = dead.child.wait();
            ask(&double, chat).await;
            took.push(killed.elapsed());
            nodes.push(start_node(&config));
        }
        took.sort();
        let median = took[took.len() / 2];
        let max = took[took.len() - 1];
        println!(
            "failover, lease {lease} s: {} kills, median {:.2} s, max {:.2} s (goal < {} s)",
            took.len(),
            median.as_secs_f64(),
            max.as_secs_f64(),
            lease + 1
        );
    }
}
