//! When the Guide is not sure: one confident wrong answer costs a
//! newcomer more than an honest "not sure" with the places to look.
//!
//! A question is answered from a section only when that section is clearly
//! the one: it defines a setting the question names, or it outscores the
//! next best by [`SURE_MARGIN`] and the learned sureness model
//! ([`super::doubt`]) finds it likely right. Otherwise the answer begins
//! "Not sure —" and lists up to [`LINKS`] of the closest sections as
//! `file#heading` links (GitHub's anchors) with their titles. Small talk
//! never gets either: the gate decides that before.

use super::Section;

/// How many times the best section's score must be the second's for the
/// Guide to answer from it, whatever the sureness model says: two sections
/// the search can hardly tell apart are a doubt. Chosen on the tuning sets
/// (`tests/guide/tuning.txt`); `scripts/guide-train.py` applies the same.
pub(super) const SURE_MARGIN: f32 = 1.1;

/// The most sections a "not sure" answer lists.
pub(super) const LINKS: usize = 3;

/// What the search found for a question.
pub(super) enum Found<'s> {
    /// This section answers it.
    Sure(&'s Section),
    /// One of these may; closest first.
    Unsure(Vec<&'s Section>),
}

impl<'s> Found<'s> {
    /// The section a model is given to answer from: the sure one, or the
    /// closest.
    pub(super) fn closest(&self) -> &'s Section {
        match self {
            Found::Sure(s) => s,
            Found::Unsure(v) => v[0],
        }
    }
}

/// A heading as GitHub anchors it: lower case, spaces as `-`, punctuation
/// other than `-` and `_` left out.
pub(super) fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The answer when not sure: a reply to message `id` listing `sections`.
pub(super) fn not_sure(id: &tactful_core::MsgId, sections: &[&Section]) -> String {
    let mut out = format!("[[reply_to:{id}]]\nNot sure — the docs may answer this here:");
    for s in sections.iter().take(LINKS) {
        out.push_str(&format!(
            "\n- {} — {}#{}",
            s.heading,
            s.source,
            anchor(&s.heading)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_anchor_as_github_does() {
        assert_eq!(anchor("On Telegram"), "on-telegram");
        assert_eq!(
            anchor("`[platforms.telegram]`: Telegram bots"),
            "platformstelegram-telegram-bots"
        );
        assert_eq!(
            anchor("Reloading the config (SIGHUP)"),
            "reloading-the-config-sighup"
        );
    }

    #[test]
    fn a_not_sure_answer_lists_at_most_three_sections_with_their_titles() {
        let s = |h: &str| Section {
            source: "docs/config.md".into(),
            heading: h.into(),
            body: String::new(),
        };
        let all = [s("One"), s("Two words"), s("Three"), s("Four")];
        let refs: Vec<&Section> = all.iter().collect();
        assert_eq!(
            not_sure(&"m7".into(), &refs),
            "[[reply_to:m7]]\nNot sure — the docs may answer this here:\n- One — docs/config.md#one\n- Two words — docs/config.md#two-words\n- Three — docs/config.md#three"
        );
    }
}
