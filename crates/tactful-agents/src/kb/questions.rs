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
//! not mix in one index), and each section's score gains its two closest
//! examples', times [`WEIGHT`].

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
    /// Keys that name no section of the documents, or a heading two
    /// sections share (a heading renamed since they were written, a typo,
    /// two "Usage" headings in one file): every such key, one per line.
    #[error("{}", .0.join("; "))]
    Sections(Vec<String>),
}

/// How much of its two closest examples' scores a section's own score
/// gains: chosen on the sets the Guide is tuned on (`tests/guide/dev.jsonl`,
/// `labelled.jsonl`; 0.7 to 0.9 do as well), see `BENCHMARKS.md`.
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
    let line_of = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
    let table: BTreeMap<toml::Spanned<String>, Vec<String>> = toml::from_str(text).map_err(|e| {
        let at = e.span().map_or(0, |s| s.start.min(text.len()));
        let column = text[..at].rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        QuestionsError::Toml(format!(
            "line {}, column {column}: {}",
            line_of(at),
            e.message().trim_end()
        ))
    })?;
    let mut list: Vec<KbQuestions> = table
        .into_iter()
        .map(|(key, asks)| KbQuestions {
            line: line_of(key.span().start),
            section: key.into_inner(),
            asks,
        })
        .collect();
    list.sort_by_key(|q| q.line);
    Ok(list)
}

/// Checks that each of `list`'s keys names exactly one of the sections
/// `names` (`FILE#HEADING` of each, in order; a name may repeat), and
/// gives each its section's index. Every wrong key is reported at once,
/// so renaming headings takes one `tactful check`, not one per key.
pub(super) fn resolve(list: &[KbQuestions], names: &[String]) -> Result<Vec<usize>, QuestionsError> {
    let mut found = Vec::with_capacity(list.len());
    let mut wrong = Vec::new();
    for q in list {
        // Small talk's names are empty: no key reaches it.
        let at: Vec<usize> = (0..names.len())
            .filter(|&i| !names[i].is_empty() && names[i] == q.section)
            .collect();
        match at.as_slice() {
            [one] => found.push(*one),
            [] => wrong.push(format!(
                "line {}: no section {:?} in the documents (a section is named FILE#HEADING, as answers cite it{})",
                q.line,
                q.section,
                nearest(&q.section, names)
                    .map(|n| format!("; did you mean {n:?}?"))
                    .unwrap_or_default()
            )),
            _ => wrong.push(format!(
                "line {}: {} sections are named {:?}; examples cannot tell them apart (give one of the headings other words)",
                q.line,
                at.len(),
                q.section
            )),
        }
    }
    if wrong.is_empty() {
        Ok(found)
    } else {
        Err(QuestionsError::Sections(wrong))
    }
}

/// The examples, indexed.
pub(super) struct Questions {
    engine: SearchEngine<usize>,
    /// Each example's section.
    section: Vec<usize>,
}

impl Questions {
    /// Indexes `list`, whose keys [`resolve`] gave sections `at`.
    pub(super) fn new(list: &[KbQuestions], at: &[usize]) -> Self {
        let mut documents = Vec::new();
        let mut section = Vec::new();
        for (q, &s) in list.iter().zip(at) {
            for ask in &q.asks {
                documents.push(bm25::Document::new(section.len(), searchable(ask)));
                section.push(s);
            }
        }
        let engine = SearchEngineBuilder::<usize>::with_documents(Language::English, documents).build();
        Questions { engine, section }
    }

    /// Each of the `sections` sections' two closest examples' scores for
    /// `query` (searchable text), indexed by section: a section two
    /// examples point to is a surer answer than one a single example
    /// happens to share words with.
    pub(super) fn closest(&self, query: &str, sections: usize) -> Vec<(f32, f32)> {
        let mut two = vec![(0.0f32, 0.0f32); sections];
        for h in self.engine.search(query, self.section.len()) {
            let (first, second) = &mut two[self.section[h.document.id]];
            if h.score > *first {
                *second = *first;
                *first = h.score;
            } else if h.score > *second {
                *second = h.score;
            }
        }
        two
    }
}

/// The known name closest to `name` when it is close (a heading reworded a
/// little, a file moved): fewest differing characters, at most a third.
fn nearest<'a>(name: &str, names: &'a [String]) -> Option<&'a String> {
    names
        .iter()
        .filter(|n| !n.is_empty())
        .map(|n| (strsim::levenshtein(name, n), n))
        .filter(|(d, _)| *d <= name.chars().count() / 3)
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_read_with_their_lines_however_the_key_is_quoted() {
        let text = "# comment\n\"a.md#One\" = [\"x?\", \"y\"]\n\n'b.md#`kind = \"kb\"`' = [\n  \"z\",\n]\n\"c.md#say \\\"hi\\\"\" = []\n";
        let q = parse_questions(text).expect("parses");
        let got: Vec<(&str, usize, usize)> = q
            .iter()
            .map(|q| (q.section.as_str(), q.line, q.asks.len()))
            .collect();
        assert_eq!(
            got,
            [
                ("a.md#One", 2, 2),
                ("b.md#`kind = \"kb\"`", 4, 1),
                ("c.md#say \"hi\"", 7, 0)
            ]
        );
    }

    #[test]
    fn a_file_that_is_not_a_table_of_strings_says_where() {
        let e = parse_questions("# a comment\n\"a.md#One\" = [\"x\", 2]\n").expect_err("a number");
        assert_eq!(
            e.to_string(),
            "line 2, column 20: invalid type: integer `2`, expected a string"
        );
        let e = parse_questions("\n\n\"a.md#One\" = [\"x\"\n").expect_err("unclosed");
        assert_eq!(e.to_string(), "line 3, column 18: unclosed array, expected `]`");
    }

    #[test]
    fn every_wrong_key_is_named_with_its_line() {
        let names: Vec<String> = ["a.md#Usage", "a.md#Setup", "a.md#Usage", ""]
            .map(String::from)
            .to_vec();
        let q = |section: &str, line| KbQuestions {
            section: section.to_owned(),
            asks: vec!["x".to_owned()],
            line,
        };
        assert_eq!(resolve(&[q("a.md#Setup", 1)], &names), Ok(vec![1]));
        let e = resolve(&[q("a.md#Set up", 1), q("a.md#Usage", 2), q("", 3)], &names)
            .expect_err("three wrong keys")
            .to_string();
        assert_eq!(
            e,
            "line 1: no section \"a.md#Set up\" in the documents (a section is named FILE#HEADING, as answers cite it; did you mean \"a.md#Setup\"?); \
             line 2: 2 sections are named \"a.md#Usage\"; examples cannot tell them apart (give one of the headings other words); \
             line 3: no section \"\" in the documents (a section is named FILE#HEADING, as answers cite it)"
        );
    }
}
