//! Who a person in the web room is: the name they typed, cleaned, and an
//! id that can never be mistaken for a persona's.
//!
//! The web room has no accounts: a name is whatever someone types. So a
//! typed name must never *become* a persona (an id equal to a persona's id
//! or alias would make the engine take the person's words for the
//! persona's own), and must not *look like* one either: after Unicode
//! normalisation (NFKC), with invisible characters dropped and confusable
//! letters folded (UTS #39 skeletons: Cyrillic `о` reads as Latin `o`),
//! `Dоcs`, `Do\u{200b}cs` and fullwidth `Ｄｏｃｓ` are all `docs`. Names with
//! text-direction controls (`\u{202e}scoD` shows as `Docs`) are refused
//! outright.
//!
//! A person's id is `web:` and their cleaned name, case and punctuation
//! kept, so `Alice` and `alice!` are two ids (an `allowed_users` entry
//! trusts exactly one), and no id ever equals a persona's.

use tactful_core::PersonaSpec;
use unicode_normalization::UnicodeNormalization;
use unicode_security::confusable_detection::skeleton;

/// Someone connected under a name: how it looks (to refuse lookalikes),
/// how many connections hold it, and the key that lets another connection
/// of theirs in.
pub(crate) struct Person {
    pub(crate) look: String,
    pub(crate) connections: usize,
    pub(crate) key: String,
}

/// Whether `offered` is the name's key, compared in constant time.
pub(crate) fn same_key(key: &str, offered: &str) -> bool {
    use subtle::ConstantTimeEq as _;
    bool::from(key.as_bytes().ct_eq(offered.as_bytes()))
}

/// Whether `k` is a key as the room makes them
/// ([`crate::access::new_secret`]: 32 lowercase hex digits). A browser
/// offering one for a name nobody holds keeps it; anything else (short,
/// chosen by hand) is not taken as a key.
pub(crate) fn is_key(k: &str) -> bool {
    k.len() == 32
        && k.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The longest name, in characters.
pub const MAX_NAME_CHARS: usize = 40;

/// Why a name is refused; the message is shown to the person.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Nothing readable in it.
    #[error("pick a name with a letter or a digit in it")]
    Empty,
    /// Too long.
    #[error("a name has at most {MAX_NAME_CHARS} characters")]
    TooLong,
    /// Direction controls, line breaks or other control characters.
    #[error("a name cannot contain control or text-direction characters")]
    Controls,
    /// It reads as a persona's name.
    #[error("{0} is one of the bots here: pick another name")]
    Persona(String),
    /// It reads as the name of someone else who is here.
    #[error("someone here is already called {0}: pick another name")]
    Taken(String),
}

/// Whether `c` changes the direction text is shown in.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// Unicode's default-ignorable code points: drawn as nothing.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{00AD}'
            | '\u{034F}'
            | '\u{115F}'
            | '\u{1160}'
            | '\u{17B4}'
            | '\u{17B5}'
            | '\u{180B}'..='\u{180F}'
            | '\u{200B}'..='\u{200D}'
            | '\u{2060}'..='\u{206F}'
            | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}'
            | '\u{FEFF}'
            | '\u{FFA0}'
            | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}'
            | '\u{E0000}'..='\u{E0FFF}'
    )
}

/// Whether `s` has characters no name or room name may hold: controls
/// (line breaks included), line and paragraph separators, direction
/// controls.
pub fn has_controls(s: &str) -> bool {
    s.chars()
        .any(|c| c.is_control() || is_bidi_control(c) || matches!(c, '\u{2028}' | '\u{2029}'))
}

/// A typed name as it will be shown: direction controls and control
/// characters refused, NFC, invisible characters dropped, whitespace runs
/// folded, 1 to [`MAX_NAME_CHARS`] characters with a letter or digit.
pub fn clean_name(raw: &str) -> Result<String, NameError> {
    if has_controls(raw.trim()) {
        return Err(NameError::Controls);
    }
    let visible: String = raw.nfc().filter(|c| !is_invisible(*c)).collect();
    let name = visible.split_whitespace().collect::<Vec<_>>().join(" ");
    if !name.chars().any(char::is_alphanumeric) {
        return Err(NameError::Empty);
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(NameError::TooLong);
    }
    Ok(name)
}

/// What a name looks like, for comparing names people could confuse:
/// NFKC, lower case, confusables folded, letters and digits only.
pub fn look(name: &str) -> String {
    let folded: String = name.nfkc().collect::<String>().to_lowercase();
    skeleton(&folded)
        .flat_map(char::to_lowercase)
        .filter(|c| c.is_alphanumeric())
        .collect()
}

/// The id a person with this (cleaned) name gets.
pub fn person_id(name: &str) -> String {
    format!("web:{name}")
}

/// How every persona's id, name and aliases look, to refuse people's
/// names that would pass for one.
#[derive(Clone, Debug, Default)]
pub struct Lookalikes {
    looks: Vec<(String, String)>,
}

impl Lookalikes {
    /// The looks of `personas`' ids, names and aliases.
    pub fn of(personas: &[PersonaSpec]) -> Lookalikes {
        let mut looks = Vec::new();
        for p in personas {
            let handles = [p.id.as_str(), &*p.name]
                .into_iter()
                .chain(p.aliases.iter().map(|a| a.as_str()));
            for h in handles {
                let l = look(h);
                if !l.is_empty() {
                    looks.push((l, p.name.to_string()));
                }
            }
        }
        Lookalikes { looks }
    }

    /// The persona whose name `name` would pass for, if any.
    pub fn persona_like(&self, name: &str) -> Option<&str> {
        let l = look(name);
        self.looks.iter().find(|(x, _)| *x == l).map(|(_, n)| n.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn personas() -> Lookalikes {
        let mut docs = PersonaSpec::new("docs", "a");
        docs.name = "Docs".into();
        let mut helper = PersonaSpec::new("assistant", "a");
        helper.aliases = vec!["helper".into(), "@helper-bot:example.org".into()];
        Lookalikes::of(&[docs, helper])
    }

    #[test]
    fn names_that_pass_for_a_persona_are_caught() {
        let l = personas();
        for name in [
            "Docs",
            "docs",
            "D\u{043E}cs",
            "Do\u{200B}cs",
            "\u{FF24}\u{FF4F}\u{FF43}\u{FF53}",
            "D0cs",
            "D.o.c.s",
            "Helper",
            "HELPER",
        ] {
            let cleaned = clean_name(name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
            assert!(
                l.persona_like(&cleaned).is_some(),
                "{name:?} ({cleaned:?}) passed"
            );
        }
        for name in ["Alice", "Docs Fan", "helpful", "Bob"] {
            assert_eq!(l.persona_like(name), None, "{name}");
        }
    }

    #[test]
    fn direction_controls_and_line_breaks_are_refused() {
        for name in [
            "\u{202E}scoD",
            "Al\u{2066}ice",
            "Al\nice",
            "a\u{0}b",
            "x\u{2028}y",
        ] {
            assert_eq!(clean_name(name), Err(NameError::Controls), "{name:?}");
        }
        assert_eq!(clean_name("  !!  "), Err(NameError::Empty));
        assert_eq!(clean_name(&"a".repeat(41)), Err(NameError::TooLong));
        assert_eq!(clean_name("  Ada   Lovelace "), Ok("Ada Lovelace".to_owned()));
        assert_eq!(
            clean_name("Bo\u{200B}b"),
            Ok("Bob".to_owned()),
            "invisible characters are dropped"
        );
    }

    #[test]
    fn different_names_never_share_an_id() {
        let ids: Vec<String> = ["Alice", "alice", "alice!", "Alice "]
            .iter()
            .map(|n| person_id(&clean_name(n).expect("valid")))
            .collect();
        assert_eq!(ids, ["web:Alice", "web:alice", "web:alice!", "web:Alice"]);
        assert_eq!(look("Alice"), look("alice!"), "but they look alike");
    }
}
