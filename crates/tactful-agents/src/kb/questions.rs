//! Questions people ask, each under the section that answers it.
//!
//! A documentation section is written in the docs' words ("`max_bot_turns`",
//! "ambient batch"); people ask in theirs ("the bots keep replying to each
//! other", "can it snooze at night"). Keyword search alone cannot bridge
//! that, and a list of synonyms bridges only what its author thought of. So
//! a kb agent can be given example questions for its sections, written by
//! someone who read the docs (the way a support team keeps the phrasings
//! people use for each help article): a line close to an example is about
//! that example's section. The examples are indexed on their own (BM25
//! again: an example is a sentence, a section a page, and their scores do
//! not mix in one index), and each section's score gains its closest
//! example's, times [`WEIGHT`].

use std::collections::BTreeMap;

use bm25::{Language, SearchEngine, SearchEngineBuilder};

use super::searchable;

/// Example questions for one section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KbQuestions {
    /// The section, as answers cite it: `FILE#HEADING`
    /// (`docs/faq.md#What is ambient mode?`).
    pub section: String,
    /// Questions, requests or symptoms people would type when they need
    /// that section, in their own words.
    pub asks: Vec<String>,
    /// The line of the file it was written on (1-based; 0 when it was not
    /// read from a file), for errors.
    pub line: usize,
}

/// Why example questions could not be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QuestionsError {
    /// The file is not a TOML table of arrays of strings.
    #[error("{0}")]
    Toml(String),
    /// Examples name a section no document has (a heading renamed since
    /// they were written, or a typo).
    #[error(
        "line {line}: no section {section:?} in the documents (a section is named FILE#HEADING, as answers cite it{hint})"
    )]
    UnknownSection {
        /// The name as written.
        section: String,
        /// Where.
        line: usize,
        /// ", did you mean …?" or nothing.
        hint: String,
    },
}

/// How much of a section's closest example's score its own score gains:
/// chosen on the sets the Guide is tuned on (`tests/guide/dev.jsonl`,
/// `labelled.jsonl`; 0.55 to 0.85 do about as well), see `BENCHMARKS.md`.
pub(super) const WEIGHT: f32 = 0.7;

/// Reads example questions written as TOML, each section's name a key and
/// its questions an array:
///
/// ```toml
/// "docs/faq.md#What is ambient mode?" = [
///   "can the bot just listen and chime in when it has something useful",
/// ]
/// ```
pub fn parse_questions(text: &str) -> Result<Vec<KbQuestions>, QuestionsError> {
    let table: BTreeMap<String, Vec<String>> = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start.min(text.len()));
        let before = &text[..at];
        let line = before.matches('\n').count() + 1;
        let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        QuestionsError::Toml(format!(
            "line {line}, column {column}: {}",
            e.message().trim_end()
        ))
    })?;
    Ok(table
        .into_iter()
        .map(|(section, asks)| {
            // The key's line: where it is written quoted at a line's start.
            let quoted = format!("\"{section}\"");
            let line = text
                .lines()
                .position(|l| l.trim_start().starts_with(&quoted))
                .map_or(0, |n| n + 1);
            KbQuestions { section, asks, line }
        })
        .collect())
}

/// The examples, indexed.
pub(super) struct Questions {
    engine: SearchEngine<usize>,
    /// Each example's section.
    section: Vec<usize>,
}

impl Questions {
    /// Indexes `list`; `find` gives the section named `FILE#HEADING`,
    /// `names` every name (for "did you mean").
    pub(super) fn new(
        list: &[KbQuestions],
        find: impl Fn(&str) -> Option<usize>,
        names: &[String],
    ) -> Result<Self, QuestionsError> {
        let mut documents = Vec::new();
        let mut section = Vec::new();
        for e in list {
            let Some(s) = find(&e.section) else {
                return Err(QuestionsError::UnknownSection {
                    section: e.section.clone(),
                    line: e.line,
                    hint: nearest(&e.section, names)
                        .map(|n| format!("; did you mean {n:?}?"))
                        .unwrap_or_default(),
                });
            };
            for ask in &e.asks {
                documents.push(bm25::Document::new(section.len(), searchable(ask)));
                section.push(s);
            }
        }
        let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, documents).build();
        Ok(Questions { engine, section })
    }

    /// Each section's closest example's score for `query` (searchable
    /// text), into `best` (indexed by section).
    pub(super) fn closest(&self, query: &str, best: &mut [f32]) {
        for h in self.engine.search(query, self.section.len()) {
            let s = self.section[h.document.id];
            best[s] = best[s].max(h.score);
        }
    }
}

/// The known name closest to `name` when it is close (a heading reworded a
/// little, a file moved): fewest differing characters, at most a third.
fn nearest<'a>(name: &str, names: &'a [String]) -> Option<&'a String> {
    names
        .iter()
        .map(|n| (strsim::levenshtein(name, n), n))
        .filter(|(d, _)| *d <= name.chars().count() / 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_read_with_their_lines() {
        let text = "# comment\n\"a.md#One\" = [\"x?\", \"y\"]\n\n\"b.md#Two\" = [\n  \"z\",\n]\n";
        let q = parse_questions(text).expect("parses");
        assert_eq!(q.len(), 2);
        assert_eq!(
            (q[0].section.as_str(), q[0].line, q[0].asks.len()),
            ("a.md#One", 2, 2)
        );
        assert_eq!((q[1].section.as_str(), q[1].line), ("b.md#Two", 4));
    }

    #[test]
    fn a_file_that_is_not_a_table_of_strings_says_where() {
        let e = parse_questions("# a comment\n\"a.md#One\" = [\"x\", 2]\n").expect_err("a number");
        assert!(
            e.to_string()
                .starts_with("line 2, column 20: invalid type: integer"),
            "{e}"
        );
        let e = parse_questions("\"a.md#One\" = [\"x\"\n").expect_err("unclosed");
        assert!(e.to_string().contains("line"), "{e}");
    }
}
