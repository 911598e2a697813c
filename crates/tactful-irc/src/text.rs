//! What IRC text means and how it must be cut.
//!
//! IRC has no mention entities and no replies: a persona is addressed by its
//! nick opening the line (`docs: …`, `docs, …`, `docs …`), after a
//! greeting or a list of nicks (`hi docs: …`, `alice, docs: …`), or by
//! `@docs`, compared with IRC's case mapping ([`mentioned`]), and a reply
//! is a `nick: ` prefix. A
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

/// Words people open a line with before naming whom it is for: "hi
/// docs: …", "okay docs, …", "but docs, …".
const OPENERS: &[&str] = &[
    "hi", "hey", "hello", "heya", "hiya", "yo", "ok", "okay", "k", "well", "so", "but", "and", "also", "oh",
    "ah", "um", "uh", "hmm", "right", "yes", "yeah", "yep", "no", "nope", "sorry", "thanks", "thx", "ty",
    "please", "pls", "now", "sure", "cool", "great", "alright", "btw", "anyway", "actually", "then", "wait",
    "np", "look", "lol", "good", "morning", "evening",
];

/// Openers after which a nick is whom the line is said to whatever
/// follows it ("hey docs you around?", "thanks docs that worked"), unless
/// the nick is the subject of what follows ("yes docs is down").
const WARM: &[&str] = &[
    "hi", "hey", "hello", "heya", "hiya", "yo", "morning", "evening", "thanks", "thank", "thx", "ty",
    "cheers", "yes", "yeah", "yep", "ok", "okay", "sorry", "np",
];

/// Openers that address a nick even with nothing after it ("hi docs").
const GREETINGS: &[&str] = &["hi", "hey", "hello", "heya", "hiya", "yo", "morning", "evening"];

/// Words after an opening nick that make it the subject of the sentence
/// ("docs gave me a walk through"), not whom it is said to.
const SUBJECT_VERBS: &[&str] = &[
    "is",
    "are",
    "was",
    "has",
    "had",
    "said",
    "says",
    "gave",
    "gives",
    "told",
    "tells",
    "thinks",
    "thought",
    "knows",
    "knew",
    "wrote",
    "writes",
    "seems",
    "went",
    "got",
    "made",
    "mentioned",
    "suggested",
    "answered",
    "helped",
    "posted",
    "asked",
    "replied",
    "explained",
    "showed",
    "pointed",
    "isn't",
    "wasn't",
    "doesn't",
    "didn't",
    "won't",
    "hasn't",
];

/// How many words may stand before an addressed nick.
const MAX_LEAD: usize = 4;

/// Words that, just before a nick closing the line, make it something
/// said in passing (an object: "I read the docs", "ask docs", "agree with
/// docs") rather than whom the line is said to ("thanks docs", "what's
/// wrong, docs?").
const PASSING: &[&str] = &[
    "the",
    "a",
    "an",
    "my",
    "your",
    "his",
    "her",
    "its",
    "our",
    "their",
    "this",
    "these",
    "those",
    "some",
    "any",
    "no",
    "every",
    "with",
    "without",
    "to",
    "from",
    "for",
    "about",
    "of",
    "at",
    "by",
    "in",
    "on",
    "into",
    "onto",
    "like",
    "than",
    "as",
    "and",
    "or",
    "nor",
    "via",
    "cc",
    "ask",
    "asked",
    "tell",
    "told",
    "see",
    "saw",
    "read",
    "check",
    "use",
    "using",
    "try",
    "ping",
    "pinged",
    "msg",
    "pm",
    "query",
    "kick",
    "ban",
    "mention",
    "mentioned",
    "is",
    "was",
    "are",
    "were",
    "be",
    "been",
    "called",
    "named",
    "not",
    "if",
];

/// Which of `nicks` the text addresses, in the order given, always as a
/// whole word in IRC case mapping:
/// - the nick opening the line (`docs: …`, `docs, …`, `docs …`), unless
///   it is the subject of what follows ("docs gave me …");
/// - the nick after a short lead of greetings, interjections (`hi`,
///   `okay`, `but`, …) or other nicks each followed by `,` or `:` ("hi
///   docs: …", "okay docs, …", "alice, docs: …"), itself followed by `,`
///   or `:` (after a greeting, alone too: "hey docs");
/// - `@docs` anywhere;
/// - a vocative closing a sentence ([`closes`]): "thanks docs :)", "what
///   was wrong, docs?".
///
/// A nick said in passing ("I read the docs", "ask docs", "docs said so")
/// is not an address.
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
    let words = words(&chars);
    let mut found = Vec::new();
    for &nick in nicks {
        let n: Vec<char> = nick.chars().collect();
        if n.is_empty() {
            continue;
        }
        // `<docs>` opening a line names whom it is for as some clients
        // quote a nick.
        let quoted = chars.first() == Some(&'<') && nick_at(1, &n) && chars.get(n.len() + 1) == Some(&'>');
        let opens = quoted || (nick_at(0, &n) && !is_subject(&chars, &words, n.len()));
        let led = (1..words.len().min(MAX_LEAD + 1)).any(|k| {
            let (start, _) = words[k];
            let lead = &words[..k];
            let end = start + n.len();
            let after = chars.get(end).copied();
            // "docs : how?" as "docs: how?".
            let marked = chars
                .get(end..)
                .unwrap_or_default()
                .iter()
                .find(|c| !c.is_whitespace());
            let warm = lead
                .iter()
                .any(|w| WARM.contains(&bare(&chars, *w).as_str()) || listed(&chars, *w));
            // Another persona's nick, or "/", "&", "and", may stand in a
            // list before it without a comma: "chef / docs: …".
            let in_list = |w: &(usize, usize)| {
                let word = bare(&chars, *w);
                ["/", "&", "and", ","].contains(&word.as_str())
                    || nicks
                        .iter()
                        .any(|other| nick_eq(other, word.trim_end_matches([',', ':'])))
            };
            nick_at(start, &n)
                && lead.iter().all(|w| leads(&chars, *w) || in_list(w))
                && (matches!(after, Some(',' | ':'))
                    || (after.is_some_and(char::is_whitespace) && marked == Some(&':'))
                    || (warm
                        && after.is_some_and(char::is_whitespace)
                        && !is_subject(&chars[start..], &self::words(&chars[start..]), n.len()))
                    || (after.is_none_or(|c| !is_nick_char(c) && c != '\'')
                        && chars[end..]
                            .iter()
                            .all(|c| c.is_whitespace() || "!.?".contains(*c))
                        && lead.iter().any(|w| greeting(&chars, *w))))
        });
        let at = (0..chars.len())
            .any(|i| chars[i] == '@' && (i == 0 || !is_nick_char(chars[i - 1])) && nick_at(i + 1, &n));
        if opens || led || at || closes(&chars, &n) {
            found.push(nick);
        }
    }
    found
}

/// Whether nick `n` stands in the line as whom it is said to, a vocative
/// closing a sentence: the line's last word (before smileys, punctuation
/// and "lol" or "thanks" only), or a word right before `?`, `!` or `.`,
/// or set off by commas on both sides; and not right after a word that
/// makes it an object said in passing ([`PASSING`]) unless a comma sets
/// it off. "thanks docs :)", "how'd you do that docs ?", "what was wrong,
/// docs?", "it was not, docs - but", "!wireless | docs" (a factoid
/// pointed at someone) address docs; "I read the docs", "ask docs" and
/// "docs said so" do not.
fn closes(chars: &[char], n: &[char]) -> bool {
    let same = |i: usize| {
        chars[i..i + n.len()]
            .iter()
            .zip(n)
            .all(|(a, b)| irc_lower(*a) == irc_lower(*b))
    };
    (0..chars.len().saturating_sub(n.len() - 1)).any(|i| {
        let end = i + n.len();
        let bounded = (i == 0 || !(is_nick_char(chars[i - 1]) || chars[i - 1] == '@'))
            && chars.get(end).is_none_or(|c| !is_nick_char(*c) && *c != '\'');
        if i == 0 || !bounded || !same(i) {
            return false;
        }
        let before = &chars[..i];
        let lead = before.iter().rev().take_while(|c| c.is_whitespace()).count();
        let set_off = before[..before.len() - lead].last() == Some(&',');
        let word: String = before[..before.len() - lead]
            .iter()
            .rev()
            .take_while(|c| !c.is_whitespace())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<String>()
            .to_lowercase();
        if word.is_empty() || (!set_off && PASSING.contains(&word.as_str())) {
            return false;
        }
        ends_here(&chars[end..], set_off)
    })
}

/// Whether what follows a nick ends the sentence it closes: nothing but
/// smileys, punctuation and afterthoughts ("lol", "thanks") to the end of
/// the line, or `?`, `!` or `.` (after a comma, `,`, `;` and " -" too)
/// before the next word.
fn ends_here(after: &[char], set_off: bool) -> bool {
    let rest: String = after.iter().collect();
    let tail_only = rest.split_whitespace().all(|w| {
        is_smiley(&w.chars().collect::<Vec<_>>())
            || AFTERTHOUGHTS.contains(&w.trim_end_matches(['.', '!']).to_lowercase().as_str())
    });
    if tail_only {
        return true;
    }
    let stops = if set_off { ",;.?!-" } else { ".?!" };
    let first = after.iter().find(|c| !c.is_whitespace());
    let spaced = after.first().is_some_and(|c| c.is_whitespace());
    match first {
        // "docs.conf" is a file, "docs." a sentence's end.
        Some(c)
            if stops.contains(*c)
                && (spaced || *c != '.' || {
                    let after_stop = after.iter().skip_while(|c| c.is_whitespace()).nth(1);
                    after_stop.is_none_or(|c| c.is_whitespace())
                }) =>
        {
            true
        }
        _ => false,
    }
}

/// Words that may follow the nick a line closes on: "thanks docs lol",
/// "docs sorry".
const AFTERTHOUGHTS: &[&str] = &[
    "lol", "xd", "heh", "hehe", "haha", "thx", "thanks", "ty", "sorry", "please", "pls", "plz", "again",
];

/// Whether a word is a smiley or only punctuation (":)", ":-D", ";p",
/// "...", "?!"), which may follow the nick a line is said to.
fn is_smiley(word: &[char]) -> bool {
    let faces = word.iter().any(|c| ":;=".contains(*c));
    word.iter().all(|c| !c.is_alphanumeric())
        || (faces && word.len() <= 4 && word.iter().all(|c| ":;=-'^()[]{}<>|/\\*DPpOo3xX".contains(*c)))
}

/// The words of `chars`: (start, end) of each run of non-space.
fn words(chars: &[char]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() && out.len() <= MAX_LEAD {
        while i < chars.len() && chars[i].is_whitespace() {
            i += 1;
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() {
            i += 1;
        }
        if start < i {
            out.push((start, i));
        }
    }
    out
}

/// A word, lower-cased, without the punctuation that may close it.
fn bare(chars: &[char], (start, end): (usize, usize)) -> String {
    chars[start..end]
        .iter()
        .collect::<String>()
        .trim_end_matches([',', ':', '!', '.'])
        .to_lowercase()
}

fn greeting(chars: &[char], w: (usize, usize)) -> bool {
    GREETINGS.contains(&bare(chars, w).as_str())
}

/// Whether a word may stand before an addressed nick: an opener, or a
/// nick of someone else in the list (`alice,` / `alice:`).
fn leads(chars: &[char], w: (usize, usize)) -> bool {
    listed(chars, w) || OPENERS.contains(&bare(chars, w).as_str())
}

/// Whether a word is someone's nick in a list of whom a line is for
/// (`alice,` / `alice:`).
fn listed(chars: &[char], w: (usize, usize)) -> bool {
    let word = &chars[w.0..w.1];
    word.len() > 1
        && matches!(word.last(), Some(',' | ':'))
        && word[..word.len() - 1].iter().all(|c| is_nick_char(*c))
}

/// Whether the nick opening the line (`len` characters) is the subject of
/// what follows: followed by a space and a verb it does ("docs gave …").
fn is_subject(chars: &[char], words: &[(usize, usize)], len: usize) -> bool {
    let after_space = chars.get(len).is_some_and(|c| c.is_whitespace());
    // "docs is it down?" asks docs: a verb before its own subject.
    let asks = words
        .get(1)
        .is_some_and(|w| AUXILIARIES.contains(&bare(chars, *w).as_str()))
        && words
            .get(2)
            .is_some_and(|w| PRONOUNS.contains(&bare(chars, *w).as_str()));
    after_space
        && !asks
        && words
            .get(1)
            .is_some_and(|w| SUBJECT_VERBS.contains(&bare(chars, *w).as_str()))
}

/// Verbs that ask when their subject follows them ("is it", "was
/// that", "isn't there").
const AUXILIARIES: &[&str] = &[
    "is", "are", "was", "were", "isn't", "wasn't", "aren't", "has", "had", "hasn't", "doesn't", "didn't",
    "won't",
];

/// Words that, right after the verb following a nick, make the line a
/// question put to the nick ("docs is it down?", "docs are you there").
const PRONOUNS: &[&str] = &[
    "it", "this", "that", "there", "you", "he", "she", "they", "we", "i",
];

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
        // After a greeting, as people write it.
        assert_eq!(mentioned("hey chef{1}: hi", &nicks), ["Chef[1]"]);
        for text in [
            "I read the docs yesterday",
            "ask DOCS please",
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
    fn nicks_after_a_greeting_or_in_a_leading_list_are_addressed() {
        let nicks = ["nick420", "viper", "holstein", "histo", "docs"];
        for (text, who) in [
            ("Hi nick420: what is your java issue?", "nick420"),
            ("okay Viper, what card do you have?", "viper"),
            ("but holstein, how would that work?", "holstein"),
            ("k0nceast, histo, there is no way to do that", "histo"),
            ("alice: docs: see above", "docs"),
            ("hey docs", "docs"),
            ("hello docs!", "docs"),
            ("well, thanks docs, that worked", "docs"),
            // A vocative closing a sentence (the Ubuntu IRC logs' ways).
            ("thanks docs :)", "docs"),
            ("yes docs", "docs"),
            ("how'd you do that docs ?", "docs"),
            ("What was wrong docs ?", "docs"),
            ("No problem docs", "docs"),
            ("what's wrong, DOCS?  I can help", "docs"),
            ("it was not, docs - but it helped", "docs"),
            ("thanks docs that worked", "docs"),
            ("hey docs you around?", "docs"),
            ("sorry docs", "docs"),
            ("ok thanks docs", "docs"),
            ("!wireless | docs", "docs"),
            ("<docs> you there?", "docs"),
            ("docs : how?", "docs"),
            ("docs is it down?", "docs"),
        ] {
            assert_eq!(mentioned(text, &nicks), [who], "{text}");
        }
        assert_eq!(
            mentioned("k0nceast, histo: there is no way", &nicks),
            ["histo"],
            "the first nick of the list is someone else's"
        );
        for text in [
            "docs gave me a walk through yesterday",
            "docs is down again",
            "Viper said it was fine",
            "but docs are outdated",
            "the docs, however, say otherwise",
            "so the docs: are they right?",
            "well I think docs: no",
            // Said in passing: an object, or the subject.
            "I agree with docs",
            "check the link docs gave you",
            "ask docs.",
            "I read the docs.",
            "it is in docs.conf now",
            "yes docs is down",
            "see docs's answer above",
        ] {
            assert!(
                mentioned(text, &nicks).is_empty(),
                "{text}: {:?}",
                mentioned(text, &nicks)
            );
        }
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
