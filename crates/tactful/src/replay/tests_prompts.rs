//! Issue 24: prompts a provider's cache can serve. Each consecutive prompt
//! of a persona in a room starts with what the previous one showed, as long
//! as its history window has not moved.

use serde_json::Value;

use super::tests::{line, of_type};
use super::{ReplayOptions, replay_str};

/// `guide` listens in batches of three; `chef` answers when mentioned.
const CONFIG: &str = r#"
[[persona]]
id = "guide"
agent = "quiet"

[[persona]]
id = "chef"
name = "Chef"
agent = "echo"

[agents.quiet]
kind = "script"
rules = [{ when = "", reply = "NO_REPLY" }]

[agents.echo]
kind = "script"
rules = [{ when = "", reply = "ok {msg_id}" }]

[rooms.default]
mode = "ambient"
rate_limit = "off"
ambient = { flush_messages = 3 }

[rooms.default.personas.chef]
mode = "mention"
"#;

fn prompts(scenario: &[String]) -> Vec<Value> {
    let t = replay_str(
        CONFIG,
        &scenario.join("\n"),
        ReplayOptions {
            prompts: true,
            ..Default::default()
        },
    );
    of_type(&t, "agent_call")
        .into_iter()
        .filter(|c| c["persona"] == "guide")
        .map(|c| c["prompt"].clone())
        .collect()
}

/// The prompt as one text: system, then each message with its role.
fn flat(prompt: &Value) -> String {
    let mut out = prompt["system"].as_str().expect("system").to_owned();
    for m in prompt["messages"].as_array().expect("messages") {
        out.push('\0');
        out.push_str(m["role"].as_str().expect("role"));
        out.push(':');
        out.push_str(m["content"].as_str().expect("content"));
    }
    out
}

#[test]
fn a_batch_is_shown_in_the_order_it_happened_and_the_next_prompt_repeats_it() {
    let scenario = [
        line(0.0, "bob", "chatter one", r#", "id": "c1""#),
        line(1.0, "alice", "@chef what's for lunch?", r#", "id": "q""#),
        line(3.0, "bob", "chatter two", r#", "id": "c2""#),
        line(4.0, "bob", "chatter three", r#", "id": "c3""#),
        line(5.0, "carol", "chatter four", r#", "id": "c4""#),
        line(6.0, "carol", "chatter five", r#", "id": "c5""#),
        line(7.0, "carol", "chatter six", r#", "id": "c6""#),
    ];
    let p = prompts(&scenario);
    assert_eq!(p.len(), 2, "two batches of three: {p:#?}");
    let first = flat(&p[0]);
    // Chef's answer and the mention sit where they happened, among the
    // batch, not before it.
    let order: Vec<usize> = [
        "chatter one",
        "@chef what's",
        "ok q",
        "chatter two",
        "chatter three",
    ]
    .iter()
    .map(|s| first.find(s).unwrap_or_else(|| panic!("{s} in {first}")))
    .collect();
    assert!(order.is_sorted(), "in arrival order: {order:?} in {first}");
    // The batch's note is in the system text (the same every call); the
    // call itself ends with the sender context, marked as a batch.
    let system = p[0]["system"].as_str().expect("system");
    assert!(
        system.contains("When the sender context says \"batch\""),
        "{system}"
    );
    let (shown, closing) = first
        .split_once("\n\nsender context (room main, at 1970-01-01T00:00:04Z; batch, nobody addressed you):\n")
        .expect("a batch's sender context, with its newest message's time, closes the prompt");
    // One line per batch message, in order, saying only what the tag does
    // not: bob's id is the name his tag shows, so it is left out.
    let ids: Vec<Value> = closing
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(
        ids,
        [
            serde_json::json!({"id": "c1"}),
            serde_json::json!({"id": "c2"}),
            serde_json::json!({"id": "c3"}),
        ],
        "{closing}"
    );
    // The next batch's prompt starts with everything the first one showed.
    let second = flat(&p[1]);
    assert!(
        second.starts_with(shown),
        "the second prompt repeats the first up to its sender context:\nfirst:  {shown:?}\nsecond: {second:?}"
    );
    assert_eq!(p[1]["system"], p[0]["system"]);
}
