//! What a room costs: the call log's daily rows summed per room, the
//! costliest first, for the console's cost view.
//!
//! "Cost" is tokens (in plus out): prices differ per provider and change,
//! and the operator who knows theirs multiplies.

use std::collections::BTreeMap;

use serde::Serialize;
use tactful_store::CostRow;

/// One room's calls over the span asked for.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RoomCost {
    /// The room.
    pub room: String,
    /// Agent calls of every kind.
    pub calls: u64,
    /// Of those, failed.
    pub errors: u64,
    /// Tokens in.
    pub prompt_tokens: u64,
    /// Tokens out.
    pub completion_tokens: u64,
    /// Tokens in served from the provider's cache.
    pub cached_tokens: u64,
    /// Reply-gate calls.
    pub gate_calls: u64,
    /// Ambient batch calls.
    pub ambient_calls: u64,
    /// Messages heard (not the personas' own).
    pub messages: u64,
    /// Ambient calls per 100 messages heard: what listening costs.
    pub ambient_per_100_messages: Option<f64>,
}

/// `rows` summed per room, with `heard` (messages per room) beside them;
/// the most tokens first, then the most calls.
pub fn per_room(rows: &[CostRow], heard: &[(String, u64)]) -> Vec<RoomCost> {
    let mut rooms: BTreeMap<&str, RoomCost> = BTreeMap::new();
    for r in rows {
        let c = rooms.entry(&r.room).or_insert_with(|| RoomCost {
            room: r.room.clone(),
            ..RoomCost::default()
        });
        c.calls += r.calls;
        c.errors += r.errors;
        c.prompt_tokens += r.prompt_tokens;
        c.completion_tokens += r.completion_tokens;
        c.cached_tokens += r.cached_tokens;
        match r.kind.as_str() {
            "gate" => c.gate_calls += r.calls,
            "ambient" => c.ambient_calls += r.calls,
            _ => {}
        }
    }
    for (room, n) in heard {
        if let Some(c) = rooms.get_mut(room.as_str()) {
            c.messages = *n;
        }
    }
    let mut out: Vec<RoomCost> = rooms
        .into_values()
        .map(|mut c| {
            c.ambient_per_100_messages = (c.messages > 0)
                .then(|| (c.ambient_calls as f64 * 10_000.0 / c.messages as f64).round() / 100.0);
            c
        })
        .collect();
    out.sort_by(|a, b| {
        (b.prompt_tokens + b.completion_tokens, b.calls)
            .cmp(&(a.prompt_tokens + a.completion_tokens, a.calls))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(room: &str, kind: &str, calls: u64, tokens: u64) -> CostRow {
        CostRow {
            day: "2026-11-25".into(),
            room: room.into(),
            persona: "docs".into(),
            agent: "main".into(),
            kind: kind.into(),
            calls,
            errors: 0,
            prompt_tokens: tokens,
            completion_tokens: 1,
            cached_tokens: 0,
            mean_latency_ms: Some(10),
        }
    }

    #[test]
    fn rooms_are_summed_and_the_costliest_comes_first() {
        let rows = [
            row("quiet", "reply", 9, 10),
            row("busy", "ambient", 3, 500),
            row("busy", "gate", 4, 40),
            row("busy", "reply", 1, 100),
        ];
        let heard = [("busy".to_owned(), 600), ("quiet".to_owned(), 0)];
        let rooms = per_room(&rows, &heard);
        assert_eq!(rooms[0].room, "busy");
        assert_eq!(rooms[0].calls, 8);
        assert_eq!(rooms[0].gate_calls, 4);
        assert_eq!(rooms[0].prompt_tokens, 640);
        assert_eq!(rooms[0].ambient_per_100_messages, Some(0.5));
        assert_eq!(rooms[1].room, "quiet");
        assert_eq!(
            rooms[1].ambient_per_100_messages, None,
            "no message heard: no rate"
        );
    }
}
