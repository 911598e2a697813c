//! How a reply is shown while it streams, and how a long one is split: the
//! platform-independent half of the delivery path.
//!
//! Every platform delivers through one path (the runtime's delivery
//! driver); the decisions it makes about text live here, pure, so each is
//! implemented once and tested once:
//! - [`visible`]: what of a partial answer may be shown yet. A leading
//!   `[[...]]` directive header is never shown raw (it is held until it is
//!   complete, then stripped), and a prefix that could still turn into the
//!   silence token (`N`, `NO_`, `[NO_REP`...) is held so a silent turn
//!   leaves nothing behind; a leading reasoning block
//!   ([`crate::reasoning`]) is never shown at all;
//! - [`split_message`]: a reply longer than the platform's limit, cut on
//!   line boundaries, with code fences closed and reopened so each part
//!   renders on its own;
//! - [`EditThrottle`]: streaming edits at most once per interval.

use std::time::Duration;

use crate::directives;
use crate::reasoning;
use crate::silence;
use crate::time::Timestamp;

/// What of a streaming answer may be shown now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visible<'a> {
    /// Nothing yet: a directive header or a possible silence token is still
    /// forming.
    Hold,
    /// This much (directives stripped, trimmed) may be shown.
    Show(&'a str),
}

/// Whether `partial` ends inside a directive header: it starts with `[[`
/// and the header has not been followed by a line break or by text.
fn header_incomplete(partial: &str) -> bool {
    let t = partial.trim_start();
    if t == "[" {
        // The first half of a `[[`.
        return true;
    }
    if !t.starts_with("[[") {
        return false;
    }
    let (d, body) = directives::parse(t);
    if !d.present {
        // `[[` without a complete `[[key:value]]` yet, or `[[Word]]` (which is
        // text); hold while a colon-less bracket could still grow into a
        // directive.
        return !t.contains("]]");
    }
    // A complete header ends at a line break or where text starts; a body
    // that is empty, a lone `[` (half of the next `[[`), or itself begins a
    // new `[[` may still be header.
    let rest = body.trim_start();
    rest.is_empty() || rest == "[" || (rest.starts_with("[[") && header_incomplete(rest))
}

/// What of `partial` (the answer so far) may be shown, given the room's
/// silence token (`None` when the persona may not stay silent) and whether
/// the agent's reasoning is stripped (a leading `<think>` block is then
/// never shown, and the rules below read what follows it).
pub fn visible<'a>(partial: &'a str, silence_token: Option<&str>, strip_reasoning: bool) -> Visible<'a> {
    let partial = match strip_reasoning.then(|| reasoning::streaming(partial)) {
        Some(reasoning::Streaming::Hold) => return Visible::Hold,
        Some(reasoning::Streaming::After(rest)) => rest,
        None => partial,
    };
    if header_incomplete(partial) {
        return Visible::Hold;
    }
    let (_, body) = directives::parse(partial);
    let body = body.trim();
    if body.is_empty() {
        return Visible::Hold;
    }
    if let Some(token) = silence_token
        && silence::could_become_silence(body, token)
    {
        return Visible::Hold;
    }
    Visible::Show(body)
}

/// Splits `text` into parts of at most `limit` characters.
///
/// Cuts fall on line breaks where possible (else on spaces, else anywhere,
/// never inside a character). A code fence open at a cut is closed at the
/// end of the part and reopened, with its info string, at the start of the
/// next, so every part renders as the writer meant. `limit` is clamped to
/// at least 16 so a fence always fits. A text longer than `limit` comes
/// back with `\n` line ends only (`\r\n` and a lone `\r` are line ends to
/// renderers too).
pub fn split_message(text: &str, limit: usize) -> Vec<String> {
    const CLOSE: &str = "\n```";
    let limit = limit.max(16);
    // Renderers end a line at `\r` too: a fence followed by a lone `\r` is
    // a fence line of its own, so it is one here as well.
    let text = if text.contains('\r') {
        std::borrow::Cow::Owned(text.replace("\r\n", "\n").replace('\r', "\n"))
    } else {
        std::borrow::Cow::Borrowed(text)
    };
    let text = text.as_ref();
    if text.chars().count() <= limit {
        return vec![text.to_owned()];
    }
    // A reopened fence keeps its info string unless that is too long.
    let max_reopen = limit / 4;
    let reopen_of = |fence: &str| {
        if fence.chars().count() <= max_reopen {
            fence.to_owned()
        } else {
            "```".to_owned()
        }
    };
    // Invariant: a piece always fits in a fresh part, after a reopened
    // fence and before a closing one.
    let piece_max = limit - (max_reopen + 1) - CLOSE.len();
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut current_len = 0usize;
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let is_fence_line = is_fence(line);
        // A fence line is never cut: a cut one would open in one part and
        // close in the next. One too long for a part loses the end of its
        // info string (the language name is what matters).
        let shortened;
        let line = if is_fence_line && line.chars().count() > piece_max {
            shortened = shorten_fence(line, piece_max);
            shortened.as_str()
        } else if !is_fence_line && line.chars().count() > piece_max {
            shortened = squeeze_before_backticks(line, piece_max / 2);
            shortened.as_str()
        } else {
            line
        };
        let mut rest = line;
        while !rest.is_empty() {
            let take = if rest.chars().count() <= piece_max {
                rest.len()
            } else {
                cut_point(rest, piece_max)
            };
            let (piece, tail) = rest.split_at(take);
            rest = tail;
            let next_fence = if is_fence_line && piece.len() == line.len() {
                toggle_fence(&fence, line.trim())
            } else {
                fence.clone()
            };
            let piece_len = piece.chars().count();
            let close_cost = if next_fence.is_some() { CLOSE.len() } else { 0 };
            if current_len > 0 && current_len + piece_len + close_cost > limit {
                let mut done = std::mem::take(&mut current);
                if fence.is_some() {
                    if !done.ends_with('\n') {
                        done.push('\n');
                    }
                    done.push_str("```");
                }
                let done = done.trim_end_matches('\n');
                if !done.trim().is_empty() {
                    parts.push(done.to_owned());
                }
                current_len = 0;
                if let Some(f) = &fence {
                    let reopen = reopen_of(f);
                    current_len = reopen.chars().count() + 1;
                    current.push_str(&reopen);
                    current.push('\n');
                }
            }
            current.push_str(piece);
            current_len += piece_len;
            fence = next_fence;
        }
    }
    let last = current.trim_end_matches('\n');
    if !last.trim().is_empty() || parts.is_empty() {
        parts.push(last.to_owned());
    }
    parts
}

/// Whether a line opens or closes a code block, as renderers read it.
fn is_fence(line: &str) -> bool {
    line.trim_start().starts_with("```")
}

/// A fence line cut to at most `max` characters (line break kept): its
/// indentation dropped and its info string clipped.
fn shorten_fence(line: &str, max: usize) -> String {
    let newline = if line.ends_with('\n') { "\n" } else { "" };
    // Spaces between the backticks and the info string go first, so a
    // fence with an info string never shortens into a bare (closing) one.
    let fence = line.trim();
    let info = fence.trim_start_matches('`');
    let fence = format!("{}{}", &fence[..fence.len() - info.len()], info.trim_start());
    let keep = max.saturating_sub(newline.len()).max(3);
    let mut out: String = fence.chars().take(keep).collect();
    out.push_str(newline);
    out
}

/// `line` with every whitespace run longer than `max` characters that
/// stands right before ```` ``` ```` squeezed to one space. Some cut would
/// otherwise have to fall inside that run, and the part after it would
/// start (after its spaces) with backticks: a fence to every renderer.
fn squeeze_before_backticks(line: &str, max: usize) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find("```") {
        let before = &rest[..at];
        let text = before.trim_end();
        if before[text.len()..].chars().count() > max {
            out.push_str(text);
            out.push(' ');
        } else {
            out.push_str(before);
        }
        let run = rest[at..].len() - rest[at..].trim_start_matches('`').len();
        out.push_str(&rest[at..at + run]);
        rest = &rest[at + run..];
    }
    out.push_str(rest);
    out
}

/// The fence state after a fence line: a bare fence closes an open block;
/// any fence line opens one when none is open.
fn toggle_fence(open: &Option<String>, fence_line: &str) -> Option<String> {
    match open {
        Some(_) if fence_line == "```" => None,
        Some(f) => Some(f.clone()),
        None => Some(fence_line.to_owned()),
    }
}

/// Byte index at most `max_chars` characters into `s`: the last space
/// before it if there is one past the middle, else exactly there. Never
/// where the rest would start with ```` ``` ````: a part starting with
/// backticks from the middle of a line would read as a fence.
fn cut_point(s: &str, max_chars: usize) -> usize {
    let hard = s.char_indices().nth(max_chars).map_or(s.len(), |(i, _)| i);
    let first = s.chars().next().map_or(0, char::len_utf8);
    let cut = match s[..hard].rfind(' ') {
        Some(i) if i > hard / 2 => i + 1,
        _ => hard.max(first),
    };
    let mut at = cut;
    while at > first && is_fence(&s[at..]) {
        at = s[..at].char_indices().next_back().map_or(0, |(i, _)| i);
    }
    if is_fence(&s[at..]) {
        // Backticks from the second character on: cut after the whole run
        // if it fits, else inside it, leaving two (not a fence) for the
        // next part; a run longer than a part cannot be kept whole.
        // Not when another fence follows the run (after spaces squeezed to
        // one): the next part would start with it.
        let after_run = s.len() - s[at..].trim_start().trim_start_matches('`').len();
        if s[..after_run].chars().count() <= max_chars && !is_fence(&s[after_run..]) {
            return after_run;
        }
        let inside = after_run - 2;
        if inside > first && s[..inside].chars().count() <= max_chars && !is_fence(&s[..inside]) {
            return inside;
        }
        return hard.max(first);
    }
    at
}

/// Streaming edits at most once per interval.
#[derive(Clone, Copy, Debug)]
pub struct EditThrottle {
    interval: Duration,
    last: Option<Timestamp>,
}

impl EditThrottle {
    /// Edits at most once per `interval`.
    pub fn new(interval: Duration) -> Self {
        EditThrottle { interval, last: None }
    }

    /// Whether an edit may be made at `now`; if so, it is counted.
    pub fn try_edit(&mut self, now: Timestamp) -> bool {
        match self.last {
            Some(t) if now.saturating_since(t) < self.interval => false,
            _ => {
                self.last = Some(now);
                true
            }
        }
    }

    /// When the next edit may be made.
    pub fn next_allowed(&self) -> Option<Timestamp> {
        self.last.map(|t| t + self.interval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: Option<&str> = Some("NO_REPLY");

    #[test]
    fn directive_headers_are_held_until_complete_then_stripped() {
        for p in [
            "[",
            "[[",
            "[[reply",
            "[[reply_to:m1",
            "[[reply_to:m1]]",
            "[[reply_to:m1]]\n",
            "  [[reply_to:m1]]\n[[to",
        ] {
            assert_eq!(visible(p, None, true), Visible::Hold, "{p:?}");
        }
        assert_eq!(
            visible("[[reply_to:m1]]\nHold", None, true),
            Visible::Show("Hold")
        );
        assert_eq!(visible("[[reply_to:m1]] Sure", None, true), Visible::Show("Sure"));
        assert_eq!(
            visible("[[Summary]]\nAll good", None, true),
            Visible::Show("[[Summary]]\nAll good")
        );
        assert_eq!(
            visible("Hello [[reply_to:m1]]", None, true),
            Visible::Show("Hello [[reply_to:m1]]")
        );
    }

    #[test]
    fn reasoning_is_never_shown_and_what_follows_it_is_read_as_an_answer() {
        for p in [
            "<thi",
            "<think>the user asks",
            "<think>x</think>",
            "<think>x</think>\nNO_",
            "<think>x</think>\n[[reply_to:m1",
        ] {
            assert_eq!(visible(p, TOKEN, true), Visible::Hold, "{p:?}");
        }
        assert_eq!(
            visible("<think>x</think>\n[[reply_to:m1]]\nYes", TOKEN, true),
            Visible::Show("Yes")
        );
        // Stripping off: the tag is text like any other.
        assert_eq!(
            visible("<think>x</think> Yes", TOKEN, false),
            Visible::Show("<think>x</think> Yes")
        );
    }

    #[test]
    fn possible_silence_is_held() {
        for p in ["N", "NO_", "no_rep", "[NO_REP", "NO_REPLY", "  NO_REPLY\n"] {
            assert_eq!(visible(p, TOKEN, true), Visible::Hold, "{p:?}");
        }
        assert_eq!(visible("Now", TOKEN, true), Visible::Show("Now"));
        assert_eq!(
            visible("NO_REPLY needed", TOKEN, true),
            Visible::Show("NO_REPLY needed")
        );
        // Without silence the prefix is just text.
        assert_eq!(visible("N", None, true), Visible::Show("N"));
        assert_eq!(visible("[[reply_to:m1]]\nNO_", TOKEN, true), Visible::Hold);
        // The spellings silence accepts are held while they form.
        for p in ["[ N", "[ NO_REP", "[\nNO", "  [\n no_reply"] {
            assert_eq!(visible(p, TOKEN, true), Visible::Hold, "{p:?}");
        }
    }

    #[test]
    fn a_lone_bracket_after_a_header_is_held_without_silence() {
        for p in ["[[reply_to:m1]]\n[", "[[reply_to:m1]] [", "[[reply_to:m1]]\n\t["] {
            assert_eq!(visible(p, None, true), Visible::Hold, "{p:?}");
        }
        assert_eq!(visible("[[reply_to:m1]]\n[x", None, true), Visible::Show("[x"));
    }

    #[test]
    fn short_messages_are_not_split() {
        assert_eq!(split_message("hello", 100), ["hello"]);
    }

    #[test]
    fn long_messages_split_on_lines() {
        let text = "line one\nline two\nline three\nline four";
        let parts = split_message(text, 20);
        assert_eq!(parts, ["line one\nline two", "line three\nline four"]);
    }

    #[test]
    fn code_fences_stay_balanced_across_parts() {
        let text = "Here:\n```rust\nfn a() {}\nfn b() {}\nfn c() {}\n```\nDone.";
        let parts = split_message(text, 30);
        assert!(parts.len() > 1, "{parts:?}");
        for p in &parts {
            assert_eq!(p.matches("```").count() % 2, 0, "balanced: {p:?}");
            assert!(p.chars().count() <= 30, "{p:?}");
        }
        assert!(parts[1].starts_with("```rust\n"), "{parts:?}");
    }

    #[test]
    fn overlong_lines_are_cut_on_spaces_or_characters() {
        let text = "word ".repeat(30);
        for p in split_message(&text, 20) {
            assert!(p.chars().count() <= 20, "{p:?}");
        }
        let text = "é".repeat(50);
        let parts = split_message(&text, 16);
        assert_eq!(parts.concat(), text);
        assert!(parts.iter().all(|p| p.chars().count() <= 16));
    }

    #[test]
    fn no_part_starts_with_backticks_from_the_middle_of_a_line() {
        // Without care the cut falls right before the backticks.
        let text = format!("{}```x and more words here", "a".repeat(20));
        for limit in 16..40 {
            for p in split_message(&text, limit) {
                assert!(!p.trim_start().starts_with("```"), "limit {limit}: {p:?}");
                assert!(p.chars().count() <= limit);
            }
        }
    }

    #[test]
    fn a_fence_line_longer_than_a_part_still_opens_and_closes() {
        let text = format!("```{}\ncode\n```\nafter", "x".repeat(100));
        let parts = split_message(&text, 30);
        for p in &parts {
            assert_eq!(p.matches("```").count() % 2, 0, "{parts:?}");
            assert!(p.chars().count() <= 30);
        }
        assert!(parts.concat().contains("code"));
    }

    /// Found by the split_message fuzz target: backticks mid-line after more
    /// spaces than fit in a part made a part start with spaces and a fence.
    #[test]
    fn no_part_starts_with_backticks_after_spaces() {
        for spaces in [2, 6, 13, 40] {
            for run in 3..6 {
                let text = format!(
                    "fn b({}{} x y z and more words",
                    " ".repeat(spaces),
                    "`".repeat(run)
                );
                let parts = split_message(&text, 16);
                for p in &parts {
                    assert!(!p.trim_start().starts_with("```"), "{text:?} -> {parts:?}");
                    assert!(p.chars().count() <= 16, "{parts:?}");
                }
                let words: String = parts.concat().split_whitespace().collect();
                assert_eq!(words, text.split_whitespace().collect::<String>(), "{parts:?}");
            }
        }
    }

    /// Found by the split_message fuzz target: inside a block, a long fence
    /// line with an info string (`\r` or spaces before it) was shortened
    /// into a bare fence, which closed the block early.
    #[test]
    fn a_shortened_fence_line_inside_a_block_does_not_close_it() {
        for inner in [
            "```   rer and a long tail of words",
            "```\t  rer:\0\0 and a long tail",
        ] {
            let text = format!("```rust\nlet a = 1;\n{inner}\nlet b = 2;\n```\nafter the block");
            let parts = split_message(&text, 16);
            let last = parts.last().expect("parts");
            assert!(last.contains("after"), "{parts:?}");
            assert!(
                !last.contains("```"),
                "the block closes before `after`: {parts:?}"
            );
            for p in &parts[..parts.len() - 1] {
                assert!(!open_after(p), "each part closes its block: {parts:?}");
            }
        }
    }

    /// A lone `\r` ends a line for renderers, so `` ```\r `` is a bare fence.
    #[test]
    fn a_lone_carriage_return_is_a_line_end() {
        let text = "```rust\nlet a = 1;\n```\r after the block, in plain text";
        let parts = split_message(text, 16);
        assert!(parts.iter().all(|p| !p.contains('\r')), "{parts:?}");
        assert!(parts.iter().all(|p| !open_after(p)), "{parts:?}");
    }

    /// Whether a code block is open at the end of `text`, as renderers see it.
    fn open_after(text: &str) -> bool {
        text.lines().fold(false, |open, l| {
            let l = l.trim();
            if !l.starts_with("```") {
                open
            } else {
                !open || l != "```"
            }
        })
    }

    #[test]
    fn the_throttle_spaces_edits() {
        let mut t = EditThrottle::new(Duration::from_millis(1000));
        assert!(t.try_edit(Timestamp(0)));
        assert!(!t.try_edit(Timestamp(999)));
        assert_eq!(t.next_allowed(), Some(Timestamp(1000)));
        assert!(t.try_edit(Timestamp(1000)));
    }
}
