//! Prometheus metrics, fed from the runtime's [`TraceEvent`]s.
//!
//! Counting happens off the engine's path: whoever runs the runtime passes
//! each trace event to [`Metrics::observe`] (a task draining the trace
//! channel), and serves [`Metrics::render`] at `/metrics`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tactful_core::{Output, ScheduleEvent, Timestamp, TurnId};

use crate::connections::{Connections, LinkState};
use crate::events::TraceEvent;
use crate::persist::Health;

type Labels = Vec<(String, String)>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// Agent call durations: 50 ms to about 7 minutes.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.05, 2.0, 14))
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The service's counters and histograms.
pub struct Metrics {
    registry: Registry,
    messages_in: Counter,
    backlog: Counter,
    busy: Gauge,
    turns_running: Gauge,
    turns_queued: Gauge,
    partitions_held: Gauge,
    refused: Counter,
    not_resumed: Counter,
    store_healthy: Gauge,
    store_failures: Counter,
    fenced_writes: Counter,
    store_commits: Counter,
    store_commit_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    store: Mutex<Option<Arc<Health>>>,
    platform_connected: Family<Labels, Gauge>,
    budget_remaining: Family<Labels, Gauge>,
    connections: Mutex<Option<Connections>>,
    decisions: Family<Labels, Counter>,
    agent_calls: Family<Labels, Counter>,
    agent_seconds: Histograms,
    tokens: Family<Labels, Counter>,
    sends: Family<Labels, Counter>,
    turn_ends: Family<Labels, Counter>,
    hook_steps: Family<Labels, Counter>,
    schedule_runs: Family<Labels, Counter>,
    started: Mutex<HashMap<TurnId, (Timestamp, &'static str)>>,
    /// The rooms that have a `room` label of their own (see
    /// [`ROOM_LABELS`]).
    labelled_rooms: Mutex<std::collections::HashSet<String>>,
}

/// How many rooms get a `room` label value of their own; later rooms
/// share `other`. A label per room is what people ask for ("which room
/// costs what"), and an unbounded one would let any busy platform grow
/// the metrics (and Prometheus) without end.
pub const ROOM_LABELS: usize = 100;

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Empty metrics, registered under the `tactful_` prefix.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("tactful");
        let messages_in = Counter::default();
        let backlog = Counter::default();
        let busy = Gauge::default();
        let turns_running = Gauge::default();
        let turns_queued = Gauge::default();
        let partitions_held = Gauge::default();
        let refused = Counter::default();
        let not_resumed = Counter::default();
        let store_healthy = Gauge::default();
        let store_failures = Counter::default();
        let fenced_writes = Counter::default();
        let store_commits = Counter::default();
        let store_commit_seconds = Counter::<f64, std::sync::atomic::AtomicU64>::default();
        let decisions = Family::<Labels, Counter>::default();
        let agent_calls = Family::<Labels, Counter>::default();
        let agent_seconds: Histograms = Family::new_with_constructor(seconds_histogram);
        let tokens = Family::<Labels, Counter>::default();
        let sends = Family::<Labels, Counter>::default();
        let turn_ends = Family::<Labels, Counter>::default();
        let hook_steps = Family::<Labels, Counter>::default();
        let schedule_runs = Family::<Labels, Counter>::default();
        registry.register(
            "messages_in",
            "Messages received from platforms",
            messages_in.clone(),
        );
        registry.register(
            "backlog",
            "Messages from before the service started, recorded as context only",
            backlog.clone(),
        );
        registry.register(
            "busy",
            "Work in progress: turns running, ambient batches waiting, delivery jobs queued",
            busy.clone(),
        );
        registry.register(
            "turns_running",
            "Agent turns running now (at most runtime.max_concurrent_turns)",
            turns_running.clone(),
        );
        registry.register(
            "turns_queued",
            "Agent turns waiting for a slot under runtime.max_concurrent_turns",
            turns_queued.clone(),
        );
        registry.register(
            "partitions_held",
            "Room partitions this process owns, of 256, when several processes share the store",
            partitions_held.clone(),
        );
        registry.register(
            "refused",
            "Messages refused because the store could not write",
            refused.clone(),
        );
        registry.register(
            "not_resumed",
            "Turns running before a restart that could not be asked again",
            not_resumed.clone(),
        );
        registry.register(
            "store_healthy",
            "1 while the store writes, 0 while it cannot (messages are refused then)",
            store_healthy.clone(),
        );
        let budget_remaining = Family::<Labels, Gauge>::default();
        registry.register(
            "budget_remaining",
            "Tokens left of each persona's spend budget (`budget`), holds of running calls taken off",
            budget_remaining.clone(),
        );
        let platform_connected = Family::<Labels, Gauge>::default();
        registry.register(
            "platform_connected",
            "1 while a persona's account on a platform is connected, 0 while it is not (see the log and /healthz for why)",
            platform_connected.clone(),
        );
        registry.register(
            "store_write_failures",
            "Failed attempts to write to the store",
            store_failures.clone(),
        );
        registry.register(
            "fenced_writes",
            "Batches the store refused because the lease they were written under had passed to another process (or run out while this one was stopped or cut off): a correct fencing, not a failure (several processes on one database)",
            fenced_writes.clone(),
        );
        registry.register(
            "store_commits",
            "Transactions the store committed (each a batch of changes; several messages' changes share one under load)",
            store_commits.clone(),
        );
        registry.register(
            "store_commit_seconds",
            "Time the store's commits took in all, in seconds: divided by tactful_store_commits_total, the mean commit, which every reply waits for a few times",
            store_commit_seconds.clone(),
        );
        registry.register(
            "decisions",
            "Decisions by persona, outcome, reason and room (the first 100 rooms by name, then 'other')",
            decisions.clone(),
        );
        registry.register(
            "agent_calls",
            "Agent calls by persona, agent, kind and room (the first 100 rooms by name, then 'other')",
            agent_calls.clone(),
        );
        registry.register(
            "agent_call_seconds",
            "Agent call duration by kind",
            agent_seconds.clone(),
        );
        registry.register(
            "tokens",
            "Tokens reported by agents, by persona, agent and direction (prompt, completion; cached: prompt tokens served from the provider's cache)",
            tokens.clone(),
        );
        registry.register(
            "sends",
            "Messages sent by persona and room (notice = the short message after a failure)",
            sends.clone(),
        );
        registry.register(
            "turn_ends",
            "Turns that ended without a reply, by how",
            turn_ends.clone(),
        );
        registry.register(
            "hook_steps",
            "Before-send hook runs by hook and action (send, replace, cancel)",
            hook_steps.clone(),
        );
        registry.register(
            "schedule_runs",
            "Scheduled runs by schedule and what became of them (fired, caught_up, still_running, rate_limited)",
            schedule_runs.clone(),
        );
        Metrics {
            registry,
            messages_in,
            backlog,
            busy,
            turns_running,
            turns_queued,
            partitions_held,
            refused,
            not_resumed,
            store_healthy,
            store_failures,
            fenced_writes,
            store_commits,
            store_commit_seconds,
            store: Mutex::new(None),
            platform_connected,
            budget_remaining,
            connections: Mutex::new(None),
            decisions,
            agent_calls,
            agent_seconds,
            tokens,
            sends,
            turn_ends,
            hook_steps,
            schedule_runs,
            started: Mutex::new(HashMap::new()),
            labelled_rooms: Mutex::new(std::collections::HashSet::new()),
        }
    }

    /// The `room` label value of `room`: itself for the first
    /// [`ROOM_LABELS`] rooms seen, `other` after.
    fn room_label(&self, room: &str) -> String {
        let Ok(mut seen) = self.labelled_rooms.lock() else {
            return "other".to_owned();
        };
        if seen.contains(room) || (seen.len() < ROOM_LABELS && seen.insert(room.to_owned())) {
            room.to_owned()
        } else {
            "other".to_owned()
        }
    }

    fn ended(&self, turn: TurnId, at: Timestamp) {
        let start = self.started.lock().ok().and_then(|mut s| s.remove(&turn));
        if let Some((t0, kind)) = start {
            let secs = at.saturating_since(t0).as_secs_f64();
            self.agent_seconds
                .get_or_create(&labels(&[("kind", kind)]))
                .observe(secs);
        }
    }

    /// Counts one trace event.
    pub fn observe(&self, event: &TraceEvent) {
        match event {
            TraceEvent::Inbound { .. } => {
                self.messages_in.inc();
            }
            TraceEvent::Answered {
                persona,
                agent,
                usage: Some(usage),
                ..
            } => {
                let p = persona.as_str();
                self.tokens
                    .get_or_create(&labels(&[
                        ("persona", p),
                        ("agent", agent),
                        ("direction", "prompt"),
                    ]))
                    .inc_by(usage.prompt_tokens);
                self.tokens
                    .get_or_create(&labels(&[
                        ("persona", p),
                        ("agent", agent),
                        ("direction", "completion"),
                    ]))
                    .inc_by(usage.completion_tokens);
                self.tokens
                    .get_or_create(&labels(&[
                        ("persona", p),
                        ("agent", agent),
                        ("direction", "cached"),
                    ]))
                    .inc_by(usage.cached_tokens);
            }
            TraceEvent::Backlog { .. } => {
                self.backlog.inc();
            }
            TraceEvent::Busy { work } => {
                self.busy.set(i64::try_from(*work).unwrap_or(i64::MAX));
            }
            TraceEvent::Turns { running, queued } => {
                self.turns_running
                    .set(i64::try_from(*running).unwrap_or(i64::MAX));
                self.turns_queued.set(i64::try_from(*queued).unwrap_or(i64::MAX));
            }
            TraceEvent::Partitions { held } => {
                self.partitions_held.set(i64::try_from(*held).unwrap_or(i64::MAX));
            }
            TraceEvent::Budgets { left } => {
                for b in left {
                    self.budget_remaining
                        .get_or_create(&labels(&[("persona", b.persona.as_str())]))
                        .set(i64::try_from(b.remaining).unwrap_or(i64::MAX));
                }
            }
            TraceEvent::Refused { .. } => {
                self.refused.inc();
            }
            TraceEvent::NotResumed { .. } => {
                self.not_resumed.inc();
            }
            TraceEvent::Delivered { .. } | TraceEvent::Restored { .. } | TraceEvent::Answered { .. } => {}
            TraceEvent::Engine(output) => self.observe_output(output),
        }
    }

    fn observe_output(&self, output: &Output) {
        match output {
            Output::Decision(d) => {
                let room = self.room_label(d.room.as_str());
                self.decisions
                    .get_or_create(&labels(&[
                        ("persona", d.persona.as_str()),
                        ("outcome", d.outcome.as_str()),
                        ("reason", d.reason.as_str()),
                        ("room", &room),
                    ]))
                    .inc();
            }
            Output::CallAgent(req) => {
                let kind = req.kind.as_str();
                let room = self.room_label(req.room.as_str());
                self.agent_calls
                    .get_or_create(&labels(&[
                        ("persona", req.persona.as_str()),
                        ("agent", &req.agent),
                        ("kind", kind),
                        ("room", &room),
                    ]))
                    .inc();
                if let Ok(mut s) = self.started.lock() {
                    s.insert(req.turn, (req.started, kind));
                }
            }
            Output::Send(s) => {
                let notice = if s.notice { "true" } else { "false" };
                let room = self.room_label(s.room.as_str());
                self.sends
                    .get_or_create(&labels(&[
                        ("persona", s.persona.as_str()),
                        ("notice", notice),
                        ("room", &room),
                    ]))
                    .inc();
                self.ended(s.turn, s.at);
            }
            Output::Silent(end, _) => self.end(end, "silent"),
            Output::Withheld(end, _) => self.end(end, "withheld"),
            Output::Error(end, _) => self.end(end, "error"),
            Output::Cancelled(end, _) => self.end(end, "cancelled"),
            Output::Hook(note) => {
                self.hook_steps
                    .get_or_create(&labels(&[
                        ("hook", &note.step.hook),
                        ("action", note.step.action.as_str()),
                    ]))
                    .inc();
            }
            Output::Schedule(note) => {
                let what = match &note.event {
                    ScheduleEvent::Fired { caught_up: false, .. } => "fired",
                    ScheduleEvent::Fired { caught_up: true, .. } => "caught_up",
                    ScheduleEvent::Skipped { reason } => reason,
                };
                self.schedule_runs
                    .get_or_create(&labels(&[("schedule", &note.name), ("event", what)]))
                    .inc();
            }
            Output::Ambient(_)
            | Output::Limited(_)
            | Output::OverBudget(_)
            | Output::React(_)
            | Output::Floor(_)
            | Output::Dropped { .. }
            | Output::RunHooks(_) => {}
        }
    }

    fn end(&self, end: &tactful_core::TurnEnd, how: &str) {
        self.turn_ends
            .get_or_create(&labels(&[("persona", end.persona.as_str()), ("how", how)]))
            .inc();
        self.ended(end.turn, end.at);
    }

    /// Reports the store's health (`tactful_store_healthy`,
    /// `tactful_store_write_failures`, `tactful_fenced_writes`,
    /// `tactful_store_commits`, `tactful_store_commit_seconds`) from
    /// `health`.
    pub fn watch_store(&self, health: Arc<Health>) {
        if let Ok(mut s) = self.store.lock() {
            *s = Some(health);
        }
    }

    /// Reports each platform account's connection
    /// (`tactful_platform_connected{platform,persona}`) from `connections`.
    pub fn watch_connections(&self, connections: Connections) {
        if let Ok(mut c) = self.connections.lock() {
            *c = Some(connections);
        }
    }

    /// The metrics in Prometheus' text format.
    pub fn render(&self) -> String {
        if let Some(c) = self.connections.lock().ok().and_then(|c| c.clone()) {
            // Only the accounts this process connects now: one that moved
            // to another process sharing the store is that one's to report.
            self.platform_connected.clear();
            for (platform, persona, state) in c.all() {
                let labels = vec![
                    ("platform".to_owned(), platform.to_lowercase()),
                    ("persona".to_owned(), persona),
                ];
                let up = i64::from(state == LinkState::Connected);
                self.platform_connected.get_or_create(&labels).set(up);
            }
        }
        if let Some(h) = self.store.lock().ok().and_then(|s| s.clone()) {
            self.store_healthy.set(i64::from(h.is_ok()));
            let seen = self.store_failures.get();
            self.store_failures.inc_by(h.failures().saturating_sub(seen));
            let seen = self.fenced_writes.get();
            self.fenced_writes.inc_by(h.fenced().saturating_sub(seen));
            let (commits, seconds) = h.commits();
            let seen = self.store_commits.get();
            self.store_commits.inc_by(commits.saturating_sub(seen));
            let seen = self.store_commit_seconds.get();
            if seconds > seen {
                self.store_commit_seconds.inc_by(seconds - seen);
            }
        } else {
            self.store_healthy.set(1);
        }
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            tracing::warn!("could not encode metrics");
        }
        out
    }
}

#[cfg(test)]
mod room_label_tests {
    use super::*;

    #[test]
    fn rooms_past_the_bound_share_one_label() {
        let m = Metrics::new();
        for i in 0..ROOM_LABELS {
            assert_eq!(m.room_label(&format!("r{i}")), format!("r{i}"));
        }
        assert_eq!(m.room_label("one-too-many"), "other");
        assert_eq!(m.room_label("r7"), "r7", "a labelled room keeps its label");
        let d = tactful_core::Decision {
            at: Timestamp(0),
            room: "late".into(),
            msg: "m1".into(),
            persona: "docs".into(),
            outcome: tactful_core::Outcome::Record,
            reason: tactful_core::Reason::NotAddressed,
            turn: None,
        };
        m.observe(&TraceEvent::Engine(Output::Decision(d)));
        let text = m.render();
        assert!(text.contains("room=\"other\""), "{text}");
        assert!(!text.contains("room=\"late\""), "{text}");
    }
}

#[cfg(test)]
mod connection_metric_tests {
    use super::*;

    /// An account that moved to another process sharing the store (its
    /// state forgotten here) leaves this process's metric: two processes
    /// never both report one bot connected.
    #[test]
    fn an_account_forgotten_here_leaves_the_metric() {
        let m = Metrics::new();
        let connections = Connections::default();
        m.watch_connections(connections.clone());
        connections.account("Telegram", "docs").connected();
        connections.account("Telegram", "chef").connected();
        let text = m.render();
        assert!(text.contains("persona=\"docs\"} 1"), "{text}");
        connections.forget("telegram");
        connections.account("Telegram", "chef").connected();
        let text = m.render();
        assert!(!text.contains("persona=\"docs\""), "{text}");
        assert!(text.contains("persona=\"chef\"} 1"), "{text}");
    }
}
