//! What an answer quotes of a section: the block (a paragraph, a code
//! block, a table row) that holds the question's words, else the section's
//! opening; and, for "say more", what follows what was shown.

use std::collections::{HashMap, HashSet};

/// The longest excerpt quoted in an answer, in characters.
pub(super) const EXCERPT_CHARS: usize = 480;

/// A section's paragraphs, trimmed, leaving out code blocks (a paragraph
/// with an odd number of fences opens or closes one).
pub(super) fn outside_code(body: &str) -> impl Iterator<Item = &str> {
    let mut in_code = false;
    body.split("\n\n").map(str::trim).filter(move |p| {
        if in_code || p.starts_with("```") {
            if p.matches("```").count() % 2 == 1 {
                in_code = !in_code;
            }
            return false;
        }
        true
    })
}

/// The opening prose of a section: its first paragraphs, without code,
/// tables or HTML, up to [`EXCERPT_CHARS`]. A section that is all code (an
/// example config) is quoted as code, its first lines: an answer is never
/// only a citation.
pub(super) fn excerpt(body: &str) -> String {
    let prose = prose_excerpt(body);
    if !prose.is_empty() {
        return prose;
    }
    let Some(start) = body.find("```") else {
        return prose;
    };
    code_opening(&body[start..])
}

/// A code block's first lines, from its opening fence, up to
/// [`EXCERPT_CHARS`] (then `…`), its fence closed.
fn code_opening(code: &str) -> String {
    let mut out = String::new();
    for (n, line) in code.lines().enumerate() {
        if n > 0 && line.trim_start().starts_with("```") {
            break;
        }
        if out.chars().count() + line.chars().count() > EXCERPT_CHARS {
            out.push_str("…\n");
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("```");
    out
}

/// Prose cut to [`EXCERPT_CHARS`], at a sentence's end when there is one.
fn cut_prose(p: &str) -> &str {
    let end = p.char_indices().nth(EXCERPT_CHARS).map_or(p.len(), |(i, _)| i);
    let cut = &p[..end];
    cut.rfind(". ").map_or(cut, |i| &cut[..=i])
}

/// A paragraph of prose: not empty, not a table, not HTML.
fn is_prose(p: &str) -> bool {
    !p.is_empty() && !p.starts_with('|') && !p.starts_with('<')
}

pub(super) fn prose_excerpt(body: &str) -> String {
    let mut out = String::new();
    for p in outside_code(body) {
        if !is_prose(p) {
            continue;
        }
        let p = p.split_whitespace().collect::<Vec<_>>().join(" ");
        if out.chars().count() + p.chars().count() > EXCERPT_CHARS {
            if out.is_empty() {
                out.push_str(cut_prose(&p));
            }
            break;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&p);
    }
    out
}

/// What follows, in a section, the part of it an earlier answer showed
/// (`shown`): its prose after the last paragraph that answer quoted (a
/// paragraph it began counts), up to the excerpt's length; `None` when
/// there is no more.
pub(super) fn more_of(body: &str, shown: &str) -> Option<String> {
    let shown = shown.split_whitespace().collect::<Vec<_>>().join(" ");
    let paragraphs: Vec<String> = outside_code(body)
        .filter(|p| is_prose(p))
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    let opening = |p: &str| p.chars().take(60).collect::<String>();
    let after = paragraphs
        .iter()
        .rposition(|p| shown.contains(&opening(p)))
        .map_or(0, |i| i + 1);
    let more = prose_excerpt(&paragraphs[after..].join("\n\n"));
    (!more.is_empty()).then_some(more)
}

/// A section's blocks, as an answer may quote them: paragraphs of prose,
/// code blocks whole, and each row of a table under the table's head (a
/// settings table answers one setting a row).
fn blocks(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut code: Option<String> = None;
    let mut para = String::new();
    let mut table: Vec<&str> = Vec::new();
    let flush_para = |para: &mut String, out: &mut Vec<String>| {
        let p = para.trim();
        if !p.is_empty() && !p.starts_with('<') {
            out.push(p.split_whitespace().collect::<Vec<_>>().join(" "));
        }
        para.clear();
    };
    let flush_table = |table: &mut Vec<&str>, out: &mut Vec<String>| {
        if table.len() > 2 {
            for row in &table[2..] {
                out.push(format!("{}\n{}\n{row}", table[0], table[1]));
            }
        }
        table.clear();
    };
    for line in body.lines() {
        let t = line.trim_start();
        if let Some(c) = code.as_mut() {
            c.push_str(line);
            c.push('\n');
            if t.starts_with("```") {
                out.push(c.trim_end().to_owned());
                code = None;
            }
            continue;
        }
        if t.starts_with("```") {
            flush_para(&mut para, &mut out);
            flush_table(&mut table, &mut out);
            code = Some(format!("{line}\n"));
        } else if t.starts_with('|') {
            flush_para(&mut para, &mut out);
            table.push(line.trim());
        } else if t.is_empty() {
            flush_para(&mut para, &mut out);
            flush_table(&mut table, &mut out);
        } else {
            flush_table(&mut table, &mut out);
            para.push_str(line);
            para.push('\n');
        }
    }
    flush_para(&mut para, &mut out);
    flush_table(&mut table, &mut out);
    out
}

/// The block of `body` that answers a question made of `words` (as
/// `terms` splits text): the one holding the most of them, each weighted
/// by how few of the section's blocks hold it (a section's subject is in
/// all of them and tells none apart); ties go to the earlier. `None` when
/// no block holds any, or the best is the opening anyway.
pub(super) fn answering(
    body: &str,
    words: &HashSet<String>,
    terms: impl Fn(&str) -> HashSet<String>,
) -> Option<String> {
    let blocks = blocks(body);
    let held: Vec<HashSet<String>> = blocks.iter().map(|b| terms(b)).collect();
    let mut df: HashMap<&str, usize> = HashMap::new();
    for h in &held {
        for w in words.iter().filter(|w| h.contains(*w)) {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    let n = blocks.len() as f32;
    let weight = |h: &HashSet<String>| -> f32 {
        words
            .iter()
            .filter(|w| h.contains(*w))
            .map(|w| (1.0 + n / df[w.as_str()] as f32).ln())
            .sum()
    };
    let (best, score) = held
        .iter()
        .enumerate()
        .map(|(i, h)| (i, weight(h)))
        .fold((0, 0.0f32), |acc, (i, w)| if w > acc.1 { (i, w) } else { acc });
    // The opening prose is what `excerpt` quotes anyway, with what
    // follows it; a code block or table row first is quoted as itself.
    if score <= 0.0 || (best == 0 && !blocks[0].starts_with("```") && !blocks[0].starts_with('|')) {
        return None;
    }
    Some(clip(&blocks[best]))
}

/// A block cut to [`EXCERPT_CHARS`]: prose at a sentence's end, code at a
/// line's, its fence closed.
fn clip(block: &str) -> String {
    if block.chars().count() <= EXCERPT_CHARS {
        return block.to_owned();
    }
    if block.starts_with("```") {
        return code_opening(block);
    }
    cut_prose(block).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_of_code_alone_is_quoted_as_code() {
        let body = "\n```toml\n[[persona]]\nid = \"docs\"\n```\n";
        assert_eq!(excerpt(body), "```toml\n[[persona]]\nid = \"docs\"\n```");
        let long = format!("```toml\n{}```\n", "key = \"value\"\n".repeat(100));
        let e = excerpt(&long);
        assert!(
            e.ends_with("…\n```") && e.chars().count() < EXCERPT_CHARS + 20,
            "{e}"
        );
    }

    #[test]
    fn excerpts_skip_code_and_tables() {
        let body = "\n```toml\nx = 1\n```\n\n| a | b |\n|---|---|\n\nThe first real sentence. And more.\n\nSecond paragraph.";
        assert_eq!(
            excerpt(body),
            "The first real sentence. And more.\nSecond paragraph."
        );
    }

    fn words(t: &str) -> HashSet<String> {
        t.to_lowercase()
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    }

    #[test]
    fn the_block_with_the_question_s_rare_words_is_quoted_not_the_opening() {
        let body = "Telegram bots are set up with BotFather.\n\nEach bot joins its groups.\n\n```toml\n[[persona]]\ntelegram = { token = \"${DOCS_TG}\" }\n```\n\n| key | default | meaning |\n|---|---|---|\n| `poll_seconds` | 30 | how long a poll waits |\n";
        let got = answering(body, &words("where do I put my telegram token"), words);
        assert_eq!(
            got.as_deref(),
            Some("```toml\n[[persona]]\ntelegram = { token = \"${DOCS_TG}\" }\n```")
        );
        let row = answering(body, &words("how long does a poll wait"), words);
        assert_eq!(
            row.as_deref(),
            Some(
                "| key | default | meaning |\n|---|---|---|\n| `poll_seconds` | 30 | how long a poll waits |"
            )
        );
        // Words of the opening, or none at all: the opening, as before.
        assert_eq!(answering(body, &words("botfather"), words), None);
        assert_eq!(answering(body, &words("lunch"), words), None);
    }
}
