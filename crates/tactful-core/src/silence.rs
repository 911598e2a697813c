//! Intentional silence: the agent's way of choosing not to speak.
//!
//! An agent that answers exactly the silence token (default `NO_REPLY`,
//! optionally in brackets) sends nothing. Matching is strict so that prose
//! which merely mentions the token is still delivered, and a blank answer is
//! not silence: it is an error, because a model that returns nothing has
//! failed rather than decided.

/// The silence token used when a room does not configure its own.
pub const DEFAULT_TOKEN: &str = "NO_REPLY";

/// Whether `body` (directives already stripped) is a deliberate silence
/// under `token`: the whole trimmed text is the token, ignoring case, bare
/// or as `[TOKEN]`.
pub fn is_silence(body: &str, token: &str) -> bool {
    let t = body.trim();
    let t = t
        .strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .map_or(t, str::trim);
    !t.is_empty() && t.eq_ignore_ascii_case(token.trim())
}

/// Whether `partial` (the start of a streamed answer) could still turn out
/// to be the silence token, so a live platform should hold it back instead
/// of showing `NO_` to the room.
pub fn could_become_silence(partial: &str, token: &str) -> bool {
    let t = partial.trim_start();
    let t = t.strip_prefix('[').unwrap_or(t);
    let t = t.trim_end();
    let t = t.strip_suffix(']').unwrap_or(t);
    let token = token.trim();
    t.len() <= token.len() && token.get(..t.len()).is_some_and(|p| p.eq_ignore_ascii_case(t))
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
        for s in ["NO_REPLY!", "Now", "Hello"] {
            assert!(!could_become_silence(s, DEFAULT_TOKEN), "{s:?}");
        }
    }
}
