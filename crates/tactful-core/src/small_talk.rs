//! The pre-gate: small talk nobody needs an assistant to answer.
//!
//! In an `all`-mode room every human message may get a reply, and with a
//! reply gate every one costs a classifier call first. Most of a busy room
//! is acknowledgements ("ok", "thanks!", "+1", "👍", "lol"): they never need
//! an answer, and asking a model to say so is the listener's biggest cost.
//! This check is deterministic and free: an unaddressed message that is
//! only one of the configured phrases, or only emoji and punctuation and
//! short, is recorded as context with reason `pre_gate` and no call. A
//! question mark anywhere keeps a message out of it; addressed messages
//! never reach it.

/// The phrases counted as small talk when a room names none: compared
/// without case, after trailing punctuation, emoji and spaces are taken
/// off, so "Thanks!!" and "ok 👍" match too.
pub const DEFAULT_PHRASES: &[&str] = &[
    "ok",
    "okay",
    "k",
    "kk",
    "okey",
    "alright",
    "lol",
    "lmao",
    "rofl",
    "haha",
    "hahaha",
    "hehe",
    "thanks",
    "thank you",
    "thanks a lot",
    "thx",
    "ty",
    "tyvm",
    "cheers",
    "+1",
    "nice",
    "cool",
    "great",
    "awesome",
    "yes",
    "yep",
    "yeah",
    "no",
    "nope",
    "sure",
    "np",
    "no problem",
    "gm",
    "gn",
    "good morning",
    "good night",
    "bye",
    "cya",
    "see you",
    "got it",
    "noted",
    "same",
    "agreed",
    "true",
    "indeed",
    "wow",
    "brb",
    "afk",
    "back",
    "morning",
    "morning all",
    "hi all",
    "hello all",
    "hi everyone",
    "sounds good",
    "sounds good to me",
    "lgtm",
    "done",
    "merged",
    "on it",
    "will do",
    "welcome",
    "congrats",
    "nice one",
    "well done",
    "oops",
    "sorry",
    "thanks all",
    "thanks everyone",
];

/// The default longest message the "only emoji and punctuation" rule
/// takes, in characters.
pub const DEFAULT_MAX_CHARS: usize = 12;

/// Whether `text` is small talk under `phrases` (already lower-case) and
/// `max_chars`.
pub fn is_small_talk(text: &str, phrases: &[std::sync::Arc<str>], max_chars: usize) -> bool {
    if text.contains('?') {
        return false;
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return false;
    }
    // Only emoji, symbols and punctuation: a reaction typed as a message.
    if !trimmed.chars().any(char::is_alphanumeric) {
        return trimmed.chars().count() <= max_chars;
    }
    let core = trimmed
        .trim_end_matches(|c: char| !c.is_alphanumeric() && c != '+')
        .trim_start_matches(|c: char| !c.is_alphanumeric() && c != '+');
    let words: Vec<&str> = core.split_whitespace().collect();
    let normal = words.join(" ").to_lowercase();
    if phrases.iter().any(|p| **p == *normal) {
        return true;
    }
    // A phrase with a short tail ("back in 10", "thanks, will do", "ok
    // see you there"): at most [`MAX_TAIL_WORDS`] words after it. Longer,
    // the tail is content ("thanks, but it still crashes").
    let clean: Vec<String> = words
        .iter()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric() && c != '+')
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    (1..clean.len()).any(|head| {
        clean.len() - head <= MAX_TAIL_WORDS && {
            let start = clean[..head].join(" ");
            phrases.iter().any(|p| **p == *start)
        }
    })
}

/// The most words a phrase may be followed by and still be small talk.
pub const MAX_TAIL_WORDS: usize = 2;

/// [`DEFAULT_PHRASES`] as a room's policy holds them.
pub fn default_phrases() -> std::sync::Arc<[std::sync::Arc<str>]> {
    DEFAULT_PHRASES.iter().map(|p| std::sync::Arc::from(*p)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn small(text: &str) -> bool {
        is_small_talk(text, &default_phrases(), DEFAULT_MAX_CHARS)
    }

    #[test]
    fn acknowledgements_and_emoji_are_small_talk() {
        for t in [
            "ok",
            "OK!",
            "Thanks!!",
            "thank you.",
            "+1",
            "👍",
            "🙏🙏",
            "lol",
            "  yes  ",
            "ok 👍",
            "...",
            "Good  morning!",
            // A phrase and a short tail.
            "back in 10",
            "thanks, will do",
            "sorry, wrong chat 🙈",
        ] {
            assert!(small(t), "{t:?}");
        }
    }

    #[test]
    fn anything_with_content_or_a_question_is_not() {
        for t in [
            "ok?",
            "thanks, but it still crashes",
            "how do I reset it",
            "no idea why the build fails",
            "👍👍👍👍👍👍👍👍👍👍👍👍👍",
            "",
            "okay so what now",
            "no, the deploy is still failing",
            "back in 10?",
            "yes!? really",
            "k8s",
        ] {
            assert!(!small(t), "{t:?}");
        }
    }

    #[test]
    fn a_room_may_name_its_own_phrases() {
        let phrases: Vec<std::sync::Arc<str>> = vec!["ack".into()];
        assert!(is_small_talk("ACK.", &phrases, 0));
        assert!(!is_small_talk("ok", &phrases, 0));
        assert!(!is_small_talk("👍", &phrases, 0), "max_chars 0: no emoji rule");
    }
}
