//! What IRC text means and how it must be cut.
//!
//! IRC has no mention entities and no replies: a persona is addressed by its
//! nick opening the line (`docs: …`, `docs, …`, `docs …`) or by `@docs`,
//! compared with IRC's case mapping, and a reply is a `nick: ` prefix. A
//! line on the wire is at most 512 bytes including the command and the
//! sender prefix the server adds, so long text is cut into lines that fit,
//! never inside a UTF-8 character.

/// The longest message text one PRIVMSG line carries, in bytes: 512 minus
/// CRLF, `PRIVMSG <target> :` and the `:nick!user@host ` prefix the server
/// puts in front when relaying (up to ~100 bytes on common networks).
pub fn max_text_bytes(target: &str) -> usize {
    512usize
        .saturating_sub(2 + "PRIVMSG  :".len() + target.len() + 100)
        .max(64)
}

/// IRC's `rfc1459` case mapping: `[]\~` are the upper case of `{}|^`.
pub fn irc_lower(c: char) -> char {
    match c {
        '[' => '{',
        ']' => '}',
        '\\' => '|',
        '~' => '^',
        c => c.to_ascii_lowercase(),
    }
}

/// Whether two nicks are the same under IRC case mapping.
pub fn nick_eq(a: &str, b: &str) -> bool {
    a.chars().count() == b.chars().count()
        && a.chars()
            .zip(b.chars())
            .all(|(x, y)| irc_lower(x) == irc_lower(y))
}

fn is_nick_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_[]\\`^{}|".contains(c)
}

/// Which of `nicks` the text addresses, in the order given: the nick
/// opening the line (`docs: …`, `docs, …`, `docs …`) or `@docs` anywhere,
/// always as a whole word in IRC case mapping. A nick that is also a plain
/// word (`docs`, `chef`) said in passing — "I read the docs" — is not an
/// address.
pub fn mentioned<'a>(text: &str, nicks: &[&'a str]) -> Vec<&'a str> {
    let chars: Vec<char> = text.trim_start().chars().collect();
    let nick_at = |i: usize, n: &[char]| {
        i + n.len() <= chars.len()
            && chars[i..i + n.len()]
                .iter()
                .zip(n)
                .all(|(a, b)| irc_lower(*a) == irc_lower(*b))
            && (i + n.len() == chars.len() || !is_nick_char(chars[i + n.len()]))
    };
    let mut found = Vec::new();
    for &nick in nicks {
        let n: Vec<char> = nick.chars().collect();
        if n.is_empty() {
            continue;
        }
        let opens = nick_at(0, &n);
        let at = (0..chars.len())
            .any(|i| chars[i] == '@' && (i == 0 || !is_nick_char(chars[i - 1])) && nick_at(i + 1, &n));
        if opens || at {
            found.push(nick);
        }
    }
    found
}

/// Whether `c` may not travel inside an IRC message: CR and LF end the
/// line on the wire (a lone `\r` would let the rest of the text run as a
/// command of its own), NUL is forbidden by the protocol.
fn ends_irc_line(c: char) -> bool {
    matches!(c, '\r' | '\n' | '\0')
}

/// Cuts `text` into IRC lines of at most `max` bytes: one per line of the
/// text (blank lines dropped; `\r`, `\n`, `\r\n` and NUL all end a
/// line), long lines broken at the last space that fits, or at a character
/// boundary when a word is longer than a line. No line it returns holds a
/// character the protocol reads as the end of a line.
pub fn split_lines(text: &str, max: usize) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.split(ends_irc_line) {
        let mut rest = line.trim_end();
        if rest.trim().is_empty() {
            continue;
        }
        while rest.len() > max {
            let mut cut = max;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            if let Some(space) = rest[..cut].rfind(' ').filter(|&s| s > 0) {
                cut = space;
            }
            out.push(rest[..cut].to_owned());
            rest = rest[cut..].trim_start_matches(' ');
        }
        if !rest.is_empty() {
            out.push(rest.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nicks_address_at_the_start_of_a_line_or_with_an_at() {
        let nicks = ["docs", "Chef[1]"];
        for text in [
            "docs: how?",
            "docs, how?",
            "docs how?",
            "  DOCS: how?",
            "@docs how?",
            "so @docs, how?",
            "chef{1}: hi",
            "docs",
        ] {
            assert!(!mentioned(text, &nicks).is_empty(), "{text}");
        }
        assert_eq!(mentioned("chef{1}: and @docs", &nicks), ["docs", "Chef[1]"]);
        for text in [
            "I read the docs yesterday",
            "ask DOCS please",
            "hey chef{1}: hi",
            "docsify it",
            "the_docs",
            "mydocs: x",
            "me@docs.example",
            "@docsify",
            "nothing here",
        ] {
            assert!(mentioned(text, &nicks).is_empty(), "{text}");
        }
        assert!(nick_eq("Chef[1]", "chef{1}") && !nick_eq("chef", "chef_"));
    }

    #[test]
    fn long_text_is_cut_into_lines_that_fit_without_breaking_characters() {
        let text = format!("{}\n\nshort\n{}", "word ".repeat(100), "é".repeat(300));
        let lines = split_lines(&text, 100);
        assert!(lines.iter().all(|l| l.len() <= 100 && !l.is_empty()), "{lines:?}");
        let words: usize = lines.iter().map(|l| l.matches("word").count()).sum();
        assert_eq!(words, 100, "no word is lost");
        assert!(lines.contains(&"short".to_owned()));
        let accents: usize = lines.iter().map(|l| l.matches('é').count()).sum();
        assert_eq!(accents, 300, "no character is split or lost");
        assert!(max_text_bytes("#tactful") < 512 - 100);
    }

    #[test]
    fn carriage_returns_and_nul_end_lines_instead_of_travelling() {
        let lines = split_lines("first part\rQUIT :bye\nsecond\r\nthird\0fourth", 100);
        assert_eq!(lines, ["first part", "QUIT :bye", "second", "third", "fourth"]);
        for l in split_lines(&"a\rb ".repeat(200), 50) {
            assert!(!l.contains(ends_irc_line) && l.len() <= 50, "{l:?}");
        }
    }
}
