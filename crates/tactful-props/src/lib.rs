//! What must hold for any input, written once and checked two ways: each
//! function here takes raw bytes and panics when a property fails, so the
//! cargo-fuzz targets in `fuzz/` (libFuzzer, nightly) and this crate's
//! proptest suite (stable, in every CI run) run the same checks.
//!
//! Every byte these parsers see comes from people, models or servers; the
//! properties are what users rely on: a silent answer never flashes on
//! screen, a directive header is never shown, a split reply keeps its code
//! blocks, an IRC line can never carry a second command, a config error
//! never prints a secret, and the engine never panics.

use std::path::Path;

use tactful_core::delivery::{Visible, split_message, visible};
use tactful_core::directives::{self, valid_reply_to};
use tactful_core::persona::PersonaIdx;
use tactful_core::silence::{DEFAULT_TOKEN, is_silence};
use tactful_core::{Mentions, Message, MsgId, Timestamp};

/// The input as text (fuzzers produce bytes; parsers take strings).
fn text(data: &[u8]) -> &str {
    match std::str::from_utf8(data) {
        Ok(s) => s,
        Err(e) => std::str::from_utf8(&data[..e.valid_up_to()]).unwrap_or_default(),
    }
}

/// The directive header parser is total, keeps the body a suffix of the
/// output, accepts only valid `reply_to`s and decides the same twice.
pub fn directives(data: &[u8]) {
    let s = text(data);
    let (d, body) = directives::parse(s);
    assert!(s.ends_with(body), "the body is a suffix of the output");
    if !d.present {
        assert_eq!(body, s);
    }
    if let Some(r) = &d.reply_to {
        assert!(valid_reply_to(r), "{r:?}");
    }
    assert_eq!(directives::parse(s), (d.clone(), body));
}

/// What streams is consistent with what is finally sent: a prefix of the
/// answer shows only a prefix of what the whole answer shows (so nothing
/// shown is taken back: no `[ N…` of a silence, no lone `[` of a header);
/// a silent answer shows nothing at any point; and nothing shown starts
/// with a directive header. The first byte picks whether silence is
/// allowed.
pub fn streaming(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let answer = text(rest);
    let token = (mode % 2 == 0).then_some(DEFAULT_TOKEN);
    let (_, final_body) = directives::parse(answer);
    let silent = token.is_some_and(|t| is_silence(final_body, t));
    let final_shown = match visible(answer, token, true) {
        Visible::Show(s) => s,
        Visible::Hold => "",
    };
    for (i, _) in answer.char_indices() {
        let Visible::Show(shown) = visible(&answer[..i], token, true) else {
            continue;
        };
        assert!(!silent, "{shown:?} shown of a silent answer {answer:?}");
        assert!(!directives::parse(shown).0.present, "a header shown: {shown:?}");
        assert!(
            final_shown.starts_with(shown.trim_end()),
            "{shown:?} shown while streaming, but the answer shows {final_shown:?}"
        );
    }
}

/// Mention scanning and command parsing are total; every mention found is
/// in the text as `@handle`; classifying targets never panics whatever the
/// lookup says.
pub fn addressing(data: &[u8]) {
    use tactful_core::addressing::{Handle, Targets, parse_command, text_mentions};
    let s = text(data);
    for m in text_mentions(s) {
        assert!(!m.is_empty());
        assert!(s.contains(&format!("@{m}")), "{m:?} in {s:?}");
    }
    let _ = parse_command(s);
    let mut msg = Message::new("m1", "room", "alice", s, Timestamp(0));
    let explicit: Vec<_> = s.split_whitespace().take(8).map(Into::into).collect();
    for mentions in [Mentions::FromText, Mentions::Explicit(explicit)] {
        msg.mentions = mentions;
        let t = Targets::of(&msg, |h| match h.len() % 3 {
            0 => Handle::Persona(PersonaIdx((h.len() % 5) as u8)),
            1 => Handle::Bot,
            _ => Handle::Other,
        });
        for p in 0..5 {
            let _ = t.addressing(PersonaIdx(p), p % 2 == 0, p % 3 == 0);
        }
    }
}

/// Whether a code block is open after `text`, reading fence lines the way
/// the splitter (and Markdown renderers) do.
fn open_after(text: &str) -> bool {
    let mut open = false;
    // As renderers read it: `\r` ends a line too.
    for line in text.split(['\n', '\r']) {
        let t = line.trim();
        if t.starts_with("```") {
            open = if open { t != "```" } else { true };
        }
    }
    open
}

/// The non-blank characters outside fence lines, in order: what a split
/// must keep (fence lines may be closed, reopened or shortened).
fn content(text: &str) -> String {
    text.split(['\n', '\r'])
        .filter(|l| !l.trim_start().starts_with("```"))
        .flat_map(str::chars)
        .filter(|c| !c.is_whitespace() && *c != '`')
        .collect()
}

/// Every part fits the limit; every part but the last closes the code
/// blocks it opens (and the last ends as open as the text does); the text
/// outside fences is kept. The first two bytes pick the limit.
pub fn split(data: &[u8]) {
    let [a, b, rest @ ..] = data else {
        return;
    };
    let limit = 16 + usize::from(u16::from_le_bytes([*a, *b]) % 400);
    let s = text(rest);
    let parts = split_message(s, limit);
    assert!(!parts.is_empty());
    for (i, p) in parts.iter().enumerate() {
        assert!(
            p.chars().count() <= limit,
            "part {i} has {} > {limit}: {p:?}",
            p.chars().count()
        );
        let expected = i + 1 == parts.len() && open_after(s);
        // A run of backticks longer than a part cannot be kept whole.
        let long_run = s.contains(&"`".repeat(limit / 4));
        if !long_run {
            assert_eq!(open_after(p), expected, "part {i} of {parts:?}");
        }
    }
    if !s.contains(&"`".repeat(limit / 4)) {
        assert_eq!(content(&parts.join("\n")), content(s), "text lost or added");
    }
}

/// No IRC line holds CR, LF or NUL (a lone `\r` would let the rest run as
/// a command); each fits its byte budget; the words are kept.
pub fn irc_text(data: &[u8]) {
    use tactful_irc::text::{mentioned, split_lines};
    let Some((&m, rest)) = data.split_first() else {
        return;
    };
    let max = 64 + usize::from(m);
    let s = text(rest);
    let lines = split_lines(s, max);
    for l in &lines {
        assert!(!l.contains(['\r', '\n', '\0']), "{l:?}");
        assert!(l.len() <= max && !l.is_empty(), "{l:?}");
    }
    let words = |t: &str| -> String {
        t.chars()
            .filter(|c| !c.is_whitespace() && !matches!(c, '\r' | '\n' | '\0'))
            .collect()
    };
    assert_eq!(words(&lines.concat()), words(s));
    let _ = mentioned(s, &["docs", "Chef[1]", ""]);
}

/// Any event a homeserver sends converts without a panic; edits are never
/// new messages; a message keeps the event's id and the room it was seen in.
pub fn matrix_event(data: &[u8]) {
    use matrix_sdk::ruma::events::room::message::{OriginalSyncRoomMessageEvent, Relation};
    use tactful_matrix::event::{KnownPersona, Seen, to_message};
    let Ok(ev) = serde_json::from_slice::<OriginalSyncRoomMessageEvent>(data) else {
        return;
    };
    let personas = [KnownPersona {
        id: "docs".into(),
        user_id: "@docs:example.org".into(),
        names: vec!["Docs".into(), "docs".into()],
    }];
    let seen = Seen {
        room: "matrix:!r:example.org".into(),
        is_dm: false,
        dm_to: None,
        sender_name: Some("Alice"),
        personas: &personas,
    };
    let msg = to_message(&ev, &seen);
    if matches!(ev.content.relates_to, Some(Relation::Replacement(_))) {
        assert!(msg.is_none(), "an edit is not a new message");
    }
    if let Some(m) = msg {
        assert_eq!(m.id, MsgId::new(ev.event_id.as_str()));
        assert_eq!(m.room, seen.room);
    }
}

/// Values of secret-named keys written literally in `src`, except values
/// that also stand in the file elsewhere (`reply = "NO_REPLY"`, or a stray
/// copy outside any pair): the error may quote those lines as they are.
fn literal_secrets(src: &str) -> Vec<String> {
    static PAIR: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r#"(?i)"?([a-z_]+)"?\s*=\s*"([^"\\\n]{6,})""#).expect("regex")
    });
    let assigned: Vec<(String, String)> = PAIR
        .captures_iter(src)
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    assigned
        .iter()
        .filter(|(k, _)| tactful_core::secrets::is_secret_name(k))
        .filter(|(_, v)| {
            let as_secret = assigned
                .iter()
                .filter(|(k, w)| w == v && tactful_core::secrets::is_secret_name(k))
                .count();
            src.matches(v.as_str()).count() == as_secret
        })
        .map(|(_, v)| v.clone())
        .collect()
}

/// Any text is a config or an error; an error names a line inside the
/// file, and never shows the literal value of a secret-named key.
pub fn config(data: &[u8]) {
    let src = text(data);
    match tactful::config::Config::parse(src, Path::new("fuzz.toml"), &|_| None) {
        Ok(_) => {}
        Err(e) => {
            if let Some((line, _)) = e.position {
                assert!(line >= 1 && line <= src.lines().count().max(1) + 1, "{e}");
            }
            let shown = e.to_string();
            for secret in literal_secrets(src) {
                assert!(!shown.contains(&secret), "{secret:?} shown in:\n{shown}");
            }
        }
    }
}

/// The config the replay target runs: three personas in different modes,
/// ambient batching, a gate, bots answering bots.
pub const REPLAY_CONFIG: &str = r#"
[[persona]]
id = "docs"
agent = "echo"

[[persona]]
id = "chef"
agent = "echo"

[[persona]]
id = "guide"
agent = "quiet"

[agents.echo]
kind = "script"
rules = [{ when = "fail", reply = "x", fail = true }, { when = "silence", reply = "NO_REPLY" }, { when = "", reply = "[[reply_to:{msg_id}]]\nok {msg_id}" }]

[agents.quiet]
kind = "script"
rules = [{ when = "\\?", reply = "answer" }, { when = "", reply = "NO_REPLY" }]

[rooms.default]
mode = "mention"
ignore_bots = false
max_bot_turns = 2

[rooms.default.personas.chef]
mode = "all"

[rooms.default.personas.guide]
mode = "ambient"

[rooms.default.personas.guide.ambient]
flush_seconds = 2
flush_messages = 3
"#;

/// Any conversation replays: every line of the trace is JSON, every
/// message gets exactly one decision per persona (duplicates none), and
/// every agent call ends exactly once.
pub fn replay(data: &[u8]) {
    let scenario = text(data);
    let config = tactful::config::Config::parse(REPLAY_CONFIG, Path::new("fuzz.toml"), &|_| None)
        .expect("the replay config is valid");
    let ids: Vec<&str> = config.engine.personas.iter().map(|p| p.id.as_str()).collect();
    let Ok(events) = tactful::scenario::parse(scenario, Path::new("fuzz.jsonl"), &ids) else {
        return;
    };
    let mut out = Vec::new();
    let options = tactful::replay::ReplayOptions {
        prompts: false,
        seed: 1,
        stats: false,
        ..Default::default()
    };
    tactful::replay::run(&config, events, options, &mut out).expect("a replay never fails");
    let trace: Vec<serde_json::Value> = String::from_utf8(out)
        .expect("utf-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("each trace line is JSON"))
        .collect();
    let mut decisions = std::collections::BTreeMap::<(String, String), usize>::new();
    let mut calls = std::collections::BTreeMap::<String, usize>::new();
    for l in &trace {
        let s = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
        match l["type"].as_str() {
            Some("decision") => *decisions.entry((s("msg"), s("persona"))).or_default() += 1,
            Some("agent_call") => {
                calls.insert(s("turn"), 0);
            }
            // A failed addressed turn ends with its error, then sends a
            // notice under the same turn.
            Some("send") if l["notice"] == true => {}
            Some("send" | "silent" | "withheld" | "error" | "cancelled") => {
                if let Some(n) = calls.get_mut(&s("turn")) {
                    *n += 1;
                }
            }
            _ => {}
        }
    }
    for (k, n) in &decisions {
        assert_eq!(*n, 1, "{n} decisions for {k:?}");
    }
    for (turn, n) in &calls {
        assert!(*n <= 1, "turn {turn} ended {n} times");
    }
}

/// A property: panics when `data` breaks it.
pub type Property = fn(&[u8]);

/// Every property by its fuzz target's name (`fuzz/fuzz_targets/<name>.rs`),
/// so the seeds under `fuzz/seeds/<name>/` — each input a fuzzer found is
/// kept there — run on stable too.
pub const TARGETS: &[(&str, Property)] = &[
    ("directives", directives),
    ("streaming", streaming),
    ("addressing", addressing),
    ("split_message", split),
    ("irc_text", irc_text),
    ("matrix_event", matrix_event),
    ("config", config),
    ("replay", replay),
];
