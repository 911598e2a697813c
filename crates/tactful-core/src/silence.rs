//! Intentional silence: the agent's way of choosing not to speak.
//!
//! An agent that answers exactly the silence token (default `NO_REPLY`,
//! optionally in brackets) sends nothing. Matching is strict so that prose
//! which merely mentions the token is still delivered, and a blank answer is
//! not silence: it is an error, because a model that returns nothing has
//! failed rather than decided.
//!
//! [`is_silence`] (a finished answer) and [`could_become_silence`] (a
//! streaming one) read the text through one definition, [`SilenceForm`], so
//! every spelling that counts as silence is also held back while it
//! streams: `[ NO_REPLY ]` and `[\nNO_REPLY]` never show a `[ N…` first.

/// The silence token used when a room does not configure its own.
pub const DEFAULT_TOKEN: &str = "NO_REPLY";

/// An answer read as a possible silence token: optional surrounding
/// whitespace, an optional `[`, the word, an optional `]`.
struct SilenceForm<'a> {
    /// The word inside, trimmed.
    word: &'a str,
    /// Whether it opened with `[`.
    opened: bool,
    /// Whether it closed with `]`.
    closed: bool,
}

impl<'a> SilenceForm<'a> {
    fn of(text: &'a str) -> SilenceForm<'a> {
        let t = text.trim();
        let (opened, t) = match t.strip_prefix('[') {
            Some(rest) => (true, rest.trim_start()),
            None => (false, t),
        };
        let (closed, t) = match t.strip_suffix(']') {
            Some(rest) => (true, rest.trim_end()),
            None => (false, t),
        };
        SilenceForm {
            word: t,
            opened,
            closed,
        }
    }
}

/// Whether `body` (directives already stripped) is a deliberate silence
/// under `token`: the whole trimmed text is the token, ignoring case, bare
/// or as `[TOKEN]` (spaces and line breaks inside the brackets allowed).
pub fn is_silence(body: &str, token: &str) -> bool {
    let f = SilenceForm::of(body);
    let token = token.trim();
    f.opened == f.closed && !f.word.is_empty() && !token.is_empty() && f.word.eq_ignore_ascii_case(token)
}

/// Whether `partial` (the start of a streamed answer) could still turn out
/// to be the silence token, so a live platform should hold it back instead
/// of showing `NO_` to the room. True for every prefix of every answer
/// [`is_silence`] accepts (property-tested).
pub fn could_become_silence(partial: &str, token: &str) -> bool {
    let f = SilenceForm::of(partial);
    if f.closed {
        // A closing bracket ends the answer's silence form: it is complete.
        return is_silence(partial, token);
    }
    let token = token.trim();
    f.word.len() <= token.len()
        && token
            .get(..f.word.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(f.word))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_token_in_any_case_or_brackets() {
        for s in ["NO_REPLY", " no_reply \n", "[NO_REPLY]", "[ No_Reply ]"] {
            assert!(is_silence(s, DEFAULT_TOKEN), "{s:?}");
        }
    }

    #[test]
    fn prose_and_blank_are_not_silence() {
        for s in [
            "",
            "   ",
            "NO_REPLY needed here",
            "I'd say NO_REPLY.",
            "[[NO_REPLY]]",
            "NO REPLY",
        ] {
            assert!(!is_silence(s, DEFAULT_TOKEN), "{s:?}");
        }
    }

    #[test]
    fn custom_token() {
        assert!(is_silence("(pass)", "(pass)"));
        assert!(!is_silence("NO_REPLY", "(pass)"));
    }

    #[test]
    fn prefixes_could_become_silence() {
        for s in ["", "N", "no_", "[NO_REP", "NO_REPLY", "[NO_REPLY]"] {
            assert!(could_become_silence(s, DEFAULT_TOKEN), "{s:?}");
        }
        for s in ["NO_REPLY!", "Now", "Hello", "NO_REPLY]", "[NO_REPLY] x"] {
            assert!(!could_become_silence(s, DEFAULT_TOKEN), "{s:?}");
        }
    }

    #[test]
    fn spaced_and_broken_brackets_are_one_rule() {
        for s in [
            "[ NO_REPLY ]",
            "[\nNO_REPLY]",
            "[NO_REPLY\n]",
            " \n[ no_reply\t] ",
        ] {
            assert!(is_silence(s, DEFAULT_TOKEN), "{s:?}");
            for (i, _) in s.char_indices() {
                assert!(
                    could_become_silence(&s[..i], DEFAULT_TOKEN),
                    "{:?} of {s:?}",
                    &s[..i]
                );
            }
        }
        for s in ["[NO_REPLY", "NO_REPLY]", "[]", "[ ]"] {
            assert!(!is_silence(s, DEFAULT_TOKEN), "{s:?}");
        }
    }
}
