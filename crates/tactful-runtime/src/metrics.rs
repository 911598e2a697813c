//! Prometheus metrics, fed from the runtime's [`TraceEvent`]s.
//!
//! Counting happens off the engine's path: whoever runs the runtime passes
//! each trace event to [`Metrics::observe`] (a task draining the trace
//! channel), and serves [`Metrics::render`] at `/metrics`.

use std::collections::HashMap;
use std::sync::Mutex;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use tactful_core::{Output, Timestamp, TurnId};

use crate::runtime::TraceEvent;

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
    decisions: Family<Labels, Counter>,
    agent_calls: Family<Labels, Counter>,
    agent_seconds: Histograms,
    tokens: Family<Labels, Counter>,
    sends: Family<Labels, Counter>,
    turn_ends: Family<Labels, Counter>,
    started: Mutex<HashMap<TurnId, (Timestamp, &'static str)>>,
}

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
        let decisions = Family::<Labels, Counter>::default();
        let agent_calls = Family::<Labels, Counter>::default();
        let agent_seconds: Histograms = Family::new_with_constructor(seconds_histogram);
        let tokens = Family::<Labels, Counter>::default();
        let sends = Family::<Labels, Counter>::default();
        let turn_ends = Family::<Labels, Counter>::default();
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
            "decisions",
            "Decisions by persona, outcome and reason",
            decisions.clone(),
        );
        registry.register(
            "agent_calls",
            "Agent calls by persona, agent and kind",
            agent_calls.clone(),
        );
        registry.register(
            "agent_call_seconds",
            "Agent call duration by kind",
            agent_seconds.clone(),
        );
        registry.register(
            "tokens",
            "Tokens reported by agents, by persona, agent and direction",
            tokens.clone(),
        );
        registry.register(
            "sends",
            "Messages sent by persona (notice = the short message after a failure)",
            sends.clone(),
        );
        registry.register(
            "turn_ends",
            "Turns that ended without a reply, by how",
            turn_ends.clone(),
        );
        Metrics {
            registry,
            messages_in,
            backlog,
            busy,
            decisions,
            agent_calls,
            agent_seconds,
            tokens,
            sends,
            turn_ends,
            started: Mutex::new(HashMap::new()),
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
            TraceEvent::Usage {
                persona,
                agent,
                usage,
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
            }
            TraceEvent::Backlog { .. } => {
                self.backlog.inc();
            }
            TraceEvent::Busy { work } => {
                self.busy.set(i64::try_from(*work).unwrap_or(i64::MAX));
            }
            TraceEvent::Delivered { .. } | TraceEvent::Restored { .. } => {}
            TraceEvent::Engine(output) => self.observe_output(output),
        }
    }

    fn observe_output(&self, output: &Output) {
        match output {
            Output::Decision(d) => {
                self.decisions
                    .get_or_create(&labels(&[
                        ("persona", d.persona.as_str()),
                        ("outcome", d.outcome.as_str()),
                        ("reason", d.reason.as_str()),
                    ]))
                    .inc();
            }
            Output::CallAgent(req) => {
                let kind = req.kind.as_str();
                self.agent_calls
                    .get_or_create(&labels(&[
                        ("persona", req.persona.as_str()),
                        ("agent", &req.agent),
                        ("kind", kind),
                    ]))
                    .inc();
                if let Ok(mut s) = self.started.lock() {
                    s.insert(req.turn, (req.started, kind));
                }
            }
            Output::Send(s) => {
                let notice = if s.notice { "true" } else { "false" };
                self.sends
                    .get_or_create(&labels(&[("persona", s.persona.as_str()), ("notice", notice)]))
                    .inc();
                self.ended(s.turn, s.at);
            }
            Output::Silent(end, _) => self.end(end, "silent"),
            Output::Withheld(end, _) => self.end(end, "withheld"),
            Output::Error(end, _) => self.end(end, "error"),
            Output::Cancelled(end, _) => self.end(end, "cancelled"),
            Output::Ambient(_) | Output::Dropped { .. } => {}
        }
    }

    fn end(&self, end: &tactful_core::TurnEnd, how: &str) {
        self.turn_ends
            .get_or_create(&labels(&[("persona", end.persona.as_str()), ("how", how)]))
            .inc();
        self.ended(end.turn, end.at);
    }

    /// The metrics in Prometheus' text format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        if encode(&mut out, &self.registry).is_err() {
            tracing::warn!("could not encode metrics");
        }
        out
    }
}
