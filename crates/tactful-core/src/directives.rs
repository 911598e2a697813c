//! The `[[key:value]]` header an agent may put before its reply.
//!
//! Agents steer delivery with a header of directives at the very start of
//! their output, e.g. `[[reply_to:m42]]` to answer a specific message. The
//! header is parsed and stripped in one place (here) so no platform ever
//! shows it raw.
//!
//! Grammar, as implemented:
//! - leading whitespace is skipped; then each `[[key:value]]` is a directive;
//!   any whitespace between directives (spaces, line breaks, blank lines)
//!   continues the header, so a body never begins with a directive (which
//!   would otherwise flash raw while streaming);
//! - the first other text ends the header: it is the start of the body,
//!   after the spaces and the one line end that follow the last directive;
//! - `[[Word]]` (no colon) or any other text ends the header and stays in
//!   the body; a directive after body text is body text;
//! - keys are trimmed and compared without case; unknown keys are ignored
//!   (and reported, so typos like `reply-to` show in the trace);
//! - `[[reply_to_current]]` (no value) answers the message that started the
//!   turn (the newest of an ambient batch) without copying its id: agents
//!   get it right far more often than an id; an explicit `reply_to` wins;
//! - `reply_to` takes 1–255 characters from ASCII letters, digits and
//!   `.-_$:+/=@!` (the message ids of Discord, Slack, IRC, and Matrix event
//!   ids like `$Zx9…` or `$local:server`); an
//!   invalid value is dropped and reported; when the key repeats, the last
//!   valid value wins;
//! - CRLF and a lone CR are line ends like LF;
//! - one output may hold several replies ([`split_replies`]): after a blank
//!   line, a line that is only a `[[reply_to:…]]` header starts the next.

/// The longest `reply_to` value accepted.
pub const MAX_REPLY_TO_LEN: usize = 255;

/// What a directive header said.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Directives {
    /// The message to reply to, if a valid `reply_to` was given.
    pub reply_to: Option<String>,
    /// Keys that were not understood, in order of appearance.
    pub unknown_keys: Vec<String>,
    /// `reply_to` values that were rejected as invalid.
    pub invalid_reply_to: Vec<String>,
    /// Whether the output had a header at all.
    pub present: bool,
    /// `[[reply_to_current]]`: answer the message that started the turn.
    pub reply_to_current: bool,
}

/// The directive that answers the turn's own message.
pub const REPLY_TO_CURRENT: &str = "reply_to_current";

/// Whether `v` is an acceptable `reply_to` value.
pub fn valid_reply_to(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= MAX_REPLY_TO_LEN
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".-_$:+/=@!".contains(&b))
}

/// Splits agent output into its directive header and the body that follows.
pub fn parse(output: &str) -> (Directives, &str) {
    let mut d = Directives::default();
    let mut rest = output.trim_start();
    let mut body_start = output;
    while let Some(after_open) = rest.strip_prefix("[[") {
        let Some(close) = after_open.find("]]") else {
            break;
        };
        let inner = &after_open[..close];
        if inner.contains(['\n', '\r']) {
            break;
        }
        match inner.split_once(':') {
            Some((key, value)) => apply(&mut d, key.trim(), value.trim()),
            None if inner.trim().eq_ignore_ascii_case(REPLY_TO_CURRENT) => d.reply_to_current = true,
            None => break,
        }
        d.present = true;
        rest = &after_open[close + 2..];
        // The body starts after spaces and one line end (`\r` ends a line
        // for renderers too); another directive may follow after any
        // whitespace, so a body never begins with what parses as one.
        let trimmed = rest.trim_start_matches([' ', '\t']);
        body_start = trimmed
            .strip_prefix("\r\n")
            .or_else(|| trimmed.strip_prefix(['\n', '\r']))
            .unwrap_or(trimmed);
        rest = rest.trim_start();
    }
    if !d.present {
        return (d, output);
    }
    (d, body_start)
}

/// The most replies one agent output may hold.
pub const MAX_REPLIES: usize = 5;

/// Splits agent output into its replies: the first as [`parse`] reads it,
/// then one more for each line that is a `[[reply_to:…]]` header of its own
/// after a blank line (an agent answering several messages of a batch
/// separately). At most [`MAX_REPLIES`]; past that, the rest stays in the
/// last reply's body.
pub fn split_replies(output: &str) -> Vec<(Directives, &str)> {
    let mut out = Vec::new();
    let (mut d, mut rest) = parse(output);
    while out.len() + 1 < MAX_REPLIES {
        let Some(at) = next_reply(rest) else { break };
        out.push((d, rest[..at].trim_end()));
        (d, rest) = parse(&rest[at..]);
    }
    out.push((d, rest));
    out
}

/// Where in `body` another reply starts: a line that is only a
/// `[[reply_to:…]]` header (more directives may follow on it), right after
/// a blank line.
fn next_reply(body: &str) -> Option<usize> {
    let mut offset = 0;
    let mut blank_before = false;
    for line in body.split_inclusive('\n') {
        let t = line.trim();
        if blank_before && offset > 0 && t.starts_with("[[") && t.ends_with("]]") {
            let (d, after) = parse(t);
            if d.present
                && after.trim().is_empty()
                && (d.reply_to.is_some() || !d.invalid_reply_to.is_empty())
            {
                return Some(offset);
            }
        }
        blank_before = t.is_empty();
        offset += line.len();
    }
    None
}

fn apply(d: &mut Directives, key: &str, value: &str) {
    if key.eq_ignore_ascii_case("reply_to") {
        if valid_reply_to(value) {
            d.reply_to = Some(value.to_owned());
        } else {
            d.invalid_reply_to.push(clip(value, 80));
        }
    } else {
        d.unknown_keys.push(clip(key, 40));
    }
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn reply_to_current_needs_no_id() {
        let (d, body) = super::parse("[[reply_to_current]]\nYes, hold it for 5 s.");
        assert!(d.reply_to_current && d.present && d.reply_to.is_none());
        assert_eq!(body, "Yes, hold it for 5 s.");
        let (d, body) = super::parse("[[ Reply_To_Current ]] Sure.");
        assert!(d.reply_to_current, "trimmed, any case");
        assert_eq!(body, "Sure.");
        let (d, _) = super::parse("[[reply_to_current]][[reply_to:m2]]hi");
        assert_eq!((d.reply_to_current, d.reply_to.as_deref()), (true, Some("m2")));
        // Not a header: a word in brackets mid-text, or a value given.
        let (d, body) = super::parse("see [[reply_to_current]]");
        assert!(!d.present && body == "see [[reply_to_current]]");
        let (d, _) = super::parse("[[reply_to_current:m1]] hi");
        assert!(!d.reply_to_current && d.unknown_keys == ["reply_to_current"]);
    }

    use super::*;

    #[test]
    fn header_lines_are_stripped() {
        let (d, body) = parse("[[reply_to:m42]]\nHold the button for 5 s.");
        assert_eq!(d.reply_to.as_deref(), Some("m42"));
        assert_eq!(body, "Hold the button for 5 s.");
    }

    #[test]
    fn header_followed_by_text_on_the_same_line() {
        let (d, body) = parse("[[reply_to:m1]] Sure thing.");
        assert_eq!(d.reply_to.as_deref(), Some("m1"));
        assert_eq!(body, "Sure thing.");
        let (d, body) = parse("[[reply_to:m1]][[tone:dry]]Sure.");
        assert_eq!(
            (d.reply_to.as_deref(), d.unknown_keys.as_slice()),
            (Some("m1"), &["tone".to_owned()][..])
        );
        assert_eq!(body, "Sure.");
    }

    /// Found by the streaming fuzz target: after a lone `\r` (or a blank
    /// line, or a vertical tab) the next `[[key:value]]` became body text,
    /// which then showed as a header while streaming.
    #[test]
    fn a_body_never_begins_with_a_directive() {
        for out in [
            "[[a:1]]\r[[reply_to:m2]]\rhi",
            "[[a:1]]\n\n[[reply_to:m2]]\nhi",
            "[[a:1]]\u{b}[[reply_to:m2]] hi",
            "[[a:1]]\n  [[reply_to:m2]]\nhi",
        ] {
            let (d, body) = parse(out);
            assert_eq!(d.reply_to.as_deref(), Some("m2"), "{out:?}");
            assert_eq!(body, "hi", "{out:?}");
            assert!(!parse(body).0.present, "{out:?}");
        }
    }

    #[test]
    fn one_output_may_hold_several_replies() {
        let out = "[[reply_to:m3]]\nAnswer three.\n\n[[reply_to:m1]]\nAnswer one.\nSecond line.";
        let replies = split_replies(out);
        assert_eq!(replies.len(), 2);
        assert_eq!(replies[0].0.reply_to.as_deref(), Some("m3"));
        assert_eq!(replies[0].1, "Answer three.");
        assert_eq!(replies[1].0.reply_to.as_deref(), Some("m1"));
        assert_eq!(replies[1].1, "Answer one.\nSecond line.");
        // Mentioned in passing, or not after a blank line: text.
        for text in [
            "[[reply_to:m1]]\nWrite [[reply_to:ID]] to answer one message.",
            "[[reply_to:m1]]\nA line\n[[reply_to:m2]]\nstill one reply",
            "Plain text\n\n[[Note]]\nstill one",
        ] {
            assert_eq!(split_replies(text).len(), 1, "{text}");
        }
        let many: String = (0..9).map(|i| format!("[[reply_to:m{i}]]\nA{i}\n\n")).collect();
        let replies = split_replies(&many);
        assert_eq!(replies.len(), MAX_REPLIES);
        assert!(
            replies[MAX_REPLIES - 1].1.contains("A8"),
            "the rest stays in the last"
        );
    }

    #[test]
    fn crlf_and_multiple_lines() {
        let (d, body) = parse("[[reply_to:a]]\r\n[[reply_to:b]]\r\nline one\r\nline two");
        assert_eq!(d.reply_to.as_deref(), Some("b"), "last wins");
        assert_eq!(body, "line one\r\nline two");
    }

    #[test]
    fn invalid_values_are_dropped_and_do_not_override() {
        let (d, body) = parse("[[reply_to:good.id-1_x]]\n[[reply_to:bad id]]\nhi");
        assert_eq!(d.reply_to.as_deref(), Some("good.id-1_x"));
        assert_eq!(d.invalid_reply_to, ["bad id"]);
        assert_eq!(body, "hi");
        let long = "x".repeat(256);
        let (d, _) = parse(&format!("[[reply_to:{long}]]\nhi"));
        assert_eq!(d.reply_to, None);
        let (d, _) = parse("[[reply_to:]]\nhi");
        assert_eq!(d.reply_to, None);
    }

    #[test]
    fn matrix_event_ids_are_valid_targets() {
        for id in ["$Zx9-abc_DEF123", "$old+style/base64=", "$local:example.org"] {
            let (d, _) = parse(&format!("[[reply_to:{id}]]\nhi"));
            assert_eq!(d.reply_to.as_deref(), Some(id));
        }
        let (d, _) = parse("[[reply_to:a]b]]\nhi");
        assert_eq!(d.reply_to, None);
    }

    #[test]
    fn word_without_colon_ends_the_header_and_stays() {
        let (d, body) = parse("[[Summary]]\nbody");
        assert!(!d.present);
        assert_eq!(body, "[[Summary]]\nbody");
        let (d, body) = parse("[[reply_to:m1]]\n[[Note]]\nbody");
        assert_eq!(d.reply_to.as_deref(), Some("m1"));
        assert_eq!(body, "[[Note]]\nbody");
    }

    #[test]
    fn a_directive_on_a_later_line_is_text() {
        let (d, body) = parse("Hello\n[[reply_to:m1]]");
        assert!(!d.present);
        assert_eq!(body, "Hello\n[[reply_to:m1]]");
        let (d, body) = parse("[[reply_to:m1]]\nText\n[[reply_to:m2]]\nx");
        assert_eq!(d.reply_to.as_deref(), Some("m1"), "text ends the header");
        assert_eq!(body, "Text\n[[reply_to:m2]]\nx");
    }

    #[test]
    fn directives_only_leave_an_empty_body() {
        let (d, body) = parse("  [[reply_to:m1]]\n");
        assert!(d.present);
        assert_eq!(body.trim(), "");
    }

    #[test]
    fn unknown_keys_are_reported_and_keys_ignore_case() {
        let (d, _) = parse("[[reply-to:m1]]\n[[REPLY_TO: m2 ]]\nx");
        assert_eq!(d.unknown_keys, ["reply-to"]);
        assert_eq!(d.reply_to.as_deref(), Some("m2"));
    }

    #[test]
    fn unclosed_or_multiline_brackets_are_text() {
        for s in ["[[reply_to:m1\nhi", "[[reply_to:m1\n]]hi", "[reply_to:m1]\nhi"] {
            let (d, body) = parse(s);
            assert!(!d.present, "{s:?}");
            assert_eq!(body, s);
        }
    }
}
