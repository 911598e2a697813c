//! Reasoning blocks: what reasoning models think aloud before they answer.
//!
//! DeepSeek-R1, Qwen3, QwQ and many local servers put their reasoning at
//! the start of the content, as `<think>…</think>` (or `<thinking>`,
//! `<reasoning>`). It is never meant for the room: an answer of
//! `<think>nothing to add</think>\nNO_REPLY` is silence, not a post. The
//! engine strips a leading block before it reads directives and silence
//! ([`strip`]); the delivery path never streams one into a placeholder
//! ([`Streaming`]). Both live here so the two cannot disagree.
//!
//! Only a block that *opens* the answer is reasoning: a tag further in is
//! text the agent meant (a model explaining `<think>` tags, say). A block
//! whose closing tag never comes is all reasoning: the stream ended (or was
//! cut) while the model was still thinking.

/// The opening tags read as reasoning, lower case, with their closings.
const TAGS: [(&str, &str); 3] = [
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    ("<reasoning>", "</reasoning>"),
];

/// An answer with its leading reasoning block taken off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stripped<'a> {
    /// What is left for the room (directives, silence or text), with the
    /// whitespace after the block trimmed.
    pub rest: &'a str,
    /// The length of the reasoning, in characters (tags not counted); 0
    /// when there was none.
    pub reasoning_chars: usize,
    /// Whether the block never closed (the answer was all reasoning).
    pub unclosed: bool,
}

/// Takes a leading reasoning block off `text`.
pub fn strip(text: &str) -> Stripped<'_> {
    let start = text.trim_start();
    let Some((open, close)) = opening(start) else {
        return Stripped {
            rest: text,
            reasoning_chars: 0,
            unclosed: false,
        };
    };
    let inner = &start[open.len()..];
    match find_ignore_case(inner, close) {
        Some(end) => Stripped {
            rest: inner[end + close.len()..].trim_start(),
            reasoning_chars: inner[..end].trim().chars().count(),
            unclosed: false,
        },
        None => Stripped {
            rest: "",
            reasoning_chars: inner.trim().chars().count(),
            unclosed: true,
        },
    }
}

/// What a streaming answer shows, as far as reasoning goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Streaming<'a> {
    /// Show nothing yet: a reasoning block is open, or the start could
    /// still become an opening tag (`<`, `<thi`…).
    Hold,
    /// The text after any reasoning block, for the directive and silence
    /// rules to read next.
    After(&'a str),
}

/// What of `partial`, the answer so far, may go on to be shown.
pub fn streaming(partial: &str) -> Streaming<'_> {
    let start = partial.trim_start();
    if start.is_empty() {
        return Streaming::After(partial);
    }
    let could_open = TAGS.iter().any(|(open, _)| {
        start.len() < open.len()
            && open
                .as_bytes()
                .starts_with(&start.as_bytes().to_ascii_lowercase())
    });
    if could_open {
        return Streaming::Hold;
    }
    let s = strip(partial);
    if s.unclosed {
        Streaming::Hold
    } else {
        Streaming::After(s.rest)
    }
}

/// The tag pair `text` opens with, ignoring ASCII case.
fn opening(text: &str) -> Option<(&'static str, &'static str)> {
    TAGS.iter().copied().find(|(open, _)| {
        text.get(..open.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(open))
    })
}

/// The byte offset of `needle` (ASCII) in `haystack`, ignoring ASCII case.
fn find_ignore_case(haystack: &str, needle: &str) -> Option<usize> {
    let n = needle.len();
    haystack
        .as_bytes()
        .windows(n)
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_leading_block_is_taken_off_and_counted() {
        let s = strip("<think>nothing to add</think>\nNO_REPLY");
        assert_eq!(s.rest, "NO_REPLY");
        assert_eq!(s.reasoning_chars, "nothing to add".len());
        assert!(!s.unclosed);
        let s = strip("  <Thinking>\nlet me see\n</THINKING>\n\n[[reply_to:m1]]\nYes.");
        assert_eq!(s.rest, "[[reply_to:m1]]\nYes.");
        assert_eq!(s.reasoning_chars, "let me see".len());
        let s = strip("<reasoning>é</reasoning>Ok");
        assert_eq!((s.rest, s.reasoning_chars), ("Ok", 1));
    }

    #[test]
    fn a_block_that_never_closes_is_all_reasoning() {
        let s = strip("<think>the user wants");
        assert_eq!(s.rest, "");
        assert!(s.unclosed);
        assert_eq!(s.reasoning_chars, "the user wants".len());
    }

    #[test]
    fn tags_anywhere_but_the_start_are_text() {
        for text in [
            "Models write <think>…</think> first.",
            "Hello",
            "",
            "<thinker>x</thinker>",
            "<think",
        ] {
            let s = strip(text);
            assert_eq!(
                (s.rest, s.reasoning_chars, s.unclosed),
                (text, 0, false),
                "{text:?}"
            );
        }
    }

    #[test]
    fn streaming_holds_what_could_still_be_reasoning() {
        for p in [
            "<",
            "<th",
            "<THINK",
            "<think>",
            "<think>so the user",
            "<reasoning>a</reas",
        ] {
            assert_eq!(streaming(p), Streaming::Hold, "{p:?}");
        }
        assert_eq!(streaming("<think>a</think>\nHi"), Streaming::After("Hi"));
        assert_eq!(streaming("<b>bold</b>"), Streaming::After("<b>bold</b>"));
        assert_eq!(streaming("Hi"), Streaming::After("Hi"));
        assert_eq!(streaming("a <think>"), Streaming::After("a <think>"));
    }

    #[test]
    fn nothing_here_panics_on_multibyte_text() {
        for text in ["<thé", "é<think>", "<think>ä", "<think>ü</thi", "\u{1F600}"] {
            let _ = strip(text);
            let _ = streaming(text);
        }
    }
}
