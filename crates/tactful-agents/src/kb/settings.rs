//! Settings a question names, and the section to answer it from.
//!
//! "what is max_speakers?" is about the section whose table defines
//! `max_speakers`, however many other sections mention it. A section
//! defines an identifier when a row of its tables, or a paragraph, opens
//! with it in backticks (`| `max_speakers` | 2 | … |`); failing that, when
//! a row names it as its subject in a later column (the reasons table's
//! `| skip | `floor_taken` | … |`). The first section in document order
//! wins. But a question that names a setting *and* is best answered by
//! another section that speaks of the same setting ("allowed_users on
//! telegram") is about that use of it: the best section answers.

use std::collections::{HashMap, HashSet};

use super::quote::outside_code;

/// Which section defines each identifier, and which identifiers each
/// section speaks of.
#[derive(Default)]
pub(super) struct Settings {
    /// Identifier (lowercased) → the section defining it.
    defined: HashMap<String, usize>,
    /// Each section's identifiers (`snake_case` words, lowercased).
    spoken: Vec<HashSet<String>>,
}

impl Settings {
    /// Reads `bodies` (each section's markdown, `None` for small talk).
    pub(super) fn new<'a>(bodies: impl Iterator<Item = Option<&'a str>>) -> Self {
        let bodies: Vec<Option<&str>> = bodies.collect();
        let mut defined = HashMap::new();
        // Openings first, in every section, then later columns: a row
        // that only mentions a key never takes it from its definition.
        for (i, body) in bodies.iter().enumerate() {
            for key in body.iter().flat_map(|b| opening_keys(b)) {
                defined.entry(key).or_insert(i);
            }
        }
        for (i, body) in bodies.iter().enumerate() {
            for key in body.iter().flat_map(|b| row_subjects(b)) {
                defined.entry(key).or_insert(i);
            }
        }
        let spoken = bodies
            .iter()
            .map(|b| b.map(identifiers).unwrap_or_default())
            .collect();
        Settings { defined, spoken }
    }

    /// The setting `text` names (a word with `_` that a section defines)
    /// and the section defining it.
    pub(super) fn named(&self, text: &str) -> Option<(usize, String)> {
        text.split_whitespace().find_map(|word| {
            let w = word
                .trim_matches(|c: char| !c.is_alphanumeric() && c != '_')
                .to_lowercase();
            w.contains('_')
                .then(|| self.defined.get(&w).map(|&i| (i, w)))
                .flatten()
        })
    }

    /// The section to answer from when a question names setting `key`,
    /// defined by section `defining`, and `best` ranks first: the defining
    /// one, unless `best` is another that speaks of the setting too.
    pub(super) fn answering(&self, defining: usize, key: &str, best: Option<usize>) -> Option<usize> {
        match best {
            Some(b) if b != defining && self.spoken.get(b).is_some_and(|ids| ids.contains(key)) => None,
            _ => Some(defining),
        }
    }
}

/// Whether `word` reads as an identifier (`max_bot_turns`, `ambient.jitter`).
fn is_identifier(word: &str) -> bool {
    !word.is_empty() && word.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '.')
}

/// The keys a section's rows and paragraphs open with, in backticks
/// (`| `max_speakers` | … |`, "`reply_to` points …"), lowercased.
fn opening_keys(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    for p in outside_code(body) {
        let lines: Vec<&str> = if p.starts_with('|') {
            p.lines().skip(2).collect()
        } else {
            vec![p]
        };
        for line in lines {
            let line = line.trim().trim_start_matches('|').trim_start();
            if let Some((key, _)) = line.strip_prefix('`').and_then(|l| l.split_once('`'))
                && is_identifier(key)
            {
                out.push(key.to_lowercase());
            }
        }
    }
    out
}

/// The identifier each table row is about when it is not the row's
/// opening: its first cell that is one backticked identifier
/// (`not_addressed`), lowercased.
fn row_subjects(body: &str) -> Vec<String> {
    outside_code(body)
        .filter(|p| p.starts_with('|'))
        .flat_map(|p| p.lines().skip(2))
        .filter_map(|row| {
            row.trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .find_map(|cell| {
                    let word = cell.strip_prefix('`')?.strip_suffix('`')?;
                    is_identifier(word).then(|| word.to_lowercase())
                })
        })
        .collect()
}

/// The `snake_case` identifiers a section's text holds, whole (so
/// `rate_limit` is not found in `rate_limited`), lowercased.
fn identifiers(body: &str) -> HashSet<String> {
    body.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.contains('_'))
        .map(str::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(bodies: &[&str]) -> Settings {
        Settings::new(bodies.iter().map(|b| Some(*b)))
    }

    #[test]
    fn a_definition_wins_over_an_earlier_mention_in_a_later_column() {
        let faq = "| symptom | setting |\n|---|---|\n| bots loop | `max_bot_turns` |\n";
        let reference = "| key | default | meaning |\n|---|---|---|\n| `max_bot_turns` | `3` | bound |\n";
        let reasons = "| outcome | reason | meaning |\n|---|---|---|\n| skip | `floor_taken` | taken |\n";
        let s = settings(&[faq, reference, reasons]);
        assert_eq!(
            s.named("what is max_bot_turns?"),
            Some((1, "max_bot_turns".to_owned()))
        );
        assert_eq!(s.named("floor_taken means?"), Some((2, "floor_taken".to_owned())));
        // A row too short to have cells, a missing separator, a pipe in
        // code: nothing defined, nothing panics.
        let odd = settings(&[
            "| `a_b` |\n",
            "|\n|\n| `` | x |\n",
            "| x | `a|b` |\n|---|\n| y | `c_d` |",
        ]);
        assert_eq!(odd.named("c_d?").map(|(i, _)| i), Some(2));
        assert_eq!(odd.named("a_b?"), None);
    }

    #[test]
    fn a_paragraph_opening_with_a_key_defines_it_without_the_punctuation() {
        let s = settings(&[
            "`reply_to`: points at a message.\n\n| `delay_ms`: | x |\n|---|---|\n| `strip_reasoning` | y |\n",
        ]);
        assert!(s.named("reply_to?").is_some());
        assert!(s.named("strip_reasoning?").is_some());
        assert!(
            s.defined.keys().all(|k| is_identifier(k)),
            "{:?}",
            s.defined.keys()
        );
    }

    #[test]
    fn the_best_section_answers_only_when_it_speaks_of_the_setting_itself() {
        let reference = "| key | meaning |\n|---|---|\n| `rate_limit` | replies per window |\n| `allowed_users` | who |\n";
        let reasons = "The reason `rate_limited` means the window was full.";
        let telegram = "Give `allowed_users` numeric ids on Telegram.";
        let s = settings(&[reference, reasons, telegram]);
        // `rate_limited` is another identifier: the definition answers.
        assert_eq!(s.answering(0, "rate_limit", Some(1)), Some(0));
        assert_eq!(s.answering(0, "allowed_users", Some(2)), None);
        assert_eq!(s.answering(0, "allowed_users", Some(0)), Some(0));
        assert_eq!(s.answering(0, "allowed_users", None), Some(0));
    }
}
