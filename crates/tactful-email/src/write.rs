//! Writing one answer as a mail people's clients thread and read well:
//! `Re: ` once, `In-Reply-To` and `References`, the part answered quoted
//! above the answer, plain text in `format=flowed` (long lines rewrap on
//! small screens, code and tables stay as written), the persona's
//! signature, and `Auto-Submitted: auto-replied` so that no other
//! automatic sender answers it. Pure: what goes on the wire is tested
//! here.

use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Mailbox, Message};

use crate::read::one_line;

/// Lines longer than this are wrapped (RFC 3676 recommends 78).
const WRAP: usize = 76;

/// The most of the mail answered that is quoted above an answer.
const QUOTE_LINES: usize = 8;

/// The References kept: the thread's first message and the latest ones
/// (RFC 5322 lets a long thread drop the middle).
const MAX_REFERENCES: usize = 20;

/// An answer to write.
#[derive(Clone, Debug)]
pub(crate) struct Answer<'a> {
    /// The persona's address and name.
    pub from: (&'a str, &'a str),
    /// Where it goes: the list's address, or the person's.
    pub to: &'a str,
    /// The thread's subject as it stands (`Re: ` is added once).
    pub subject: &'a str,
    /// Its Message-ID (without brackets).
    pub id: &'a str,
    /// The mail it answers, if known: its Message-ID, its references, who
    /// wrote it and what it said.
    pub parent: Option<Parent<'a>>,
    /// The agent's answer (Markdown).
    pub text: &'a str,
    /// The persona's signature.
    pub signature: Option<&'a str>,
}

/// The mail an answer answers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Parent<'a> {
    /// Its Message-ID.
    pub id: &'a str,
    /// Its References.
    pub references: &'a [String],
    /// Who wrote it (their name).
    pub author: &'a str,
    /// What it said that was new (quoted, in part).
    pub text: Option<&'a str>,
}

/// `Re: ` before a subject, once (`Re: Re: x` and `RE: x` become `Re: x`).
pub(crate) fn reply_subject(subject: &str) -> String {
    let mut s = one_line(subject);
    loop {
        let lower = s.to_ascii_lowercase();
        let Some(rest) = ["re:", "aw:", "sv:"].iter().find_map(|p| lower.strip_prefix(p)) else {
            break;
        };
        s = s[s.len() - rest.len()..].trim_start().to_owned();
    }
    if s.is_empty() {
        "Re: (no subject)".to_owned()
    } else {
        format!("Re: {s}")
    }
}

/// The References of an answer to `parent`: its references and its id,
/// the first and the latest kept when there are many.
pub(crate) fn references(parent: &Parent<'_>) -> Vec<String> {
    let mut all: Vec<String> = parent.references.to_vec();
    all.push(parent.id.to_owned());
    all.dedup();
    if all.len() > MAX_REFERENCES {
        let tail = all.split_off(all.len() - (MAX_REFERENCES - 1));
        all.truncate(1);
        all.extend(tail);
    }
    all
}

/// The body: the quote, the answer, the signature, in `format=flowed`.
pub(crate) fn body(a: &Answer<'_>) -> String {
    let mut out = String::new();
    if let Some(Parent {
        author,
        text: Some(text),
        ..
    }) = &a.parent
    {
        let quoted: Vec<&str> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(QUOTE_LINES + 1)
            .collect();
        out.push_str(&format!("{} wrote:\n", one_line(author)));
        for (i, line) in quoted.iter().enumerate() {
            if i == QUOTE_LINES {
                out.push_str("> […]\n");
                break;
            }
            // A quote is never rewrapped: `>` lines are sent as they are.
            out.push_str("> ");
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push('\n');
    }
    out.push_str(&flowed(a.text.trim()));
    if let Some(sig) = a.signature {
        out.push_str("\n-- \n");
        for line in sig.lines() {
            out.push_str(&stuffed(line.trim_end()));
            out.push('\n');
        }
    }
    out
}

/// `text` in `format=flowed` (RFC 3676): lines outside code blocks
/// longer than [`WRAP`] are cut at spaces with a trailing space (a soft
/// break clients rejoin); every other line ends hard (trailing spaces
/// dropped); lines starting with a space, `>` or `From ` are stuffed with
/// a space so they are not read as quotes.
pub(crate) fn flowed(text: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for line in text.lines() {
        let line = line.trim_end();
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
            out.push_str(&stuffed(line));
            out.push('\n');
            continue;
        }
        if in_code || line.chars().count() <= WRAP {
            out.push_str(&stuffed(line));
            out.push('\n');
            continue;
        }
        let mut current = String::new();
        for word in line.split(' ') {
            if !current.is_empty() && current.chars().count() + 1 + word.chars().count() > WRAP {
                current.push(' ');
                out.push_str(&stuffed(&current));
                out.push('\n');
                current.clear();
            } else if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        out.push_str(&stuffed(current.trim_end()));
        out.push('\n');
    }
    out
}

/// A line space-stuffed where it must be (RFC 3676 §4.4).
fn stuffed(line: &str) -> String {
    if line.starts_with([' ', '>']) || line.starts_with("From ") {
        format!(" {line}")
    } else {
        line.to_owned()
    }
}

/// The whole mail. Every header is one tactful chose: the agent's text
/// is only ever the body, so a `Bcc:` line an agent writes is text.
pub(crate) fn message(a: &Answer<'_>) -> Result<Message, String> {
    let from: Mailbox = format!("{} <{}>", quoted_name(a.from.1), a.from.0)
        .parse()
        .map_err(|e| format!("the persona's address {}: {e}", a.from.0))?;
    let to: Mailbox = a.to.parse().map_err(|e| format!("the address {}: {e}", a.to))?;
    let mut b = Message::builder()
        .from(from)
        .to(to)
        .subject(reply_subject(a.subject))
        .message_id(Some(format!("<{}>", a.id)))
        .date_now()
        .header(
            ContentType::parse("text/plain; charset=utf-8; format=flowed")
                .map_err(|e| format!("content type: {e}"))?,
        )
        .raw_header(HeaderValue::new(
            HeaderName::new_from_ascii_str("Auto-Submitted"),
            "auto-replied".to_owned(),
        ));
    if let Some(p) = &a.parent {
        b = b.in_reply_to(format!("<{}>", p.id)).references(
            references(p)
                .iter()
                .map(|r| format!("<{r}>"))
                .collect::<Vec<_>>()
                .join(" "),
        );
    }
    b.body(body(a))
        .map_err(|e| format!("the mail could not be built: {e}"))
}

/// A display name as a quoted string (no line breaks, quotes escaped).
fn quoted_name(name: &str) -> String {
    let name = one_line(name).replace('\\', "").replace('"', "'");
    format!("\"{name}\"")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer<'a>(text: &'a str, parent: Option<Parent<'a>>) -> Answer<'a> {
        Answer {
            from: ("docs@example.org", "Docs"),
            to: "dev@lists.example.org",
            subject: "Re: RE: Build fails",
            id: "tactful.1@example.org",
            parent,
            text,
            signature: Some("Docs, the project's helper"),
        }
    }

    fn headers(m: &Message) -> String {
        let raw = String::from_utf8_lossy(&m.formatted()).into_owned();
        raw.split("\r\n\r\n").next().unwrap_or_default().to_owned()
    }

    #[test]
    fn an_answer_threads_under_what_it_answers() {
        let refs = vec!["a0@example.org".to_owned()];
        let parent = Parent {
            id: "a1@example.org",
            references: &refs,
            author: "Alice",
            text: Some("How do I build?\nI tried make."),
        };
        let m = message(&answer("Run `cargo build`.", Some(parent))).expect("built");
        let h = headers(&m);
        assert!(h.contains("Subject: Re: Build fails\r\n"), "{h}");
        assert!(h.contains("In-Reply-To: <a1@example.org>\r\n"), "{h}");
        assert!(
            h.contains("References: <a0@example.org> <a1@example.org>\r\n"),
            "{h}"
        );
        assert!(h.contains("Message-ID: <tactful.1@example.org>\r\n"), "{h}");
        assert!(h.contains("Auto-Submitted: auto-replied\r\n"), "{h}");
        assert!(h.contains("format=flowed"), "{h}");
        assert!(
            h.contains("From: \"Docs\" <docs@example.org>") || h.contains("From: Docs <docs@example.org>"),
            "{h}"
        );
        let b = body(&answer("Run `cargo build`.", Some(parent)));
        assert_eq!(
            b,
            "Alice wrote:\n> How do I build?\n> I tried make.\n\nRun `cargo build`.\n\n-- \nDocs, the project's helper\n"
        );
    }

    #[test]
    fn an_agents_header_lines_stay_in_the_body() {
        let text = "Subject: pwned\r\nBcc: everyone@example.org\r\n\r\nhello";
        let m = message(&answer(text, None)).expect("built");
        let h = headers(&m);
        assert!(!h.to_ascii_lowercase().contains("bcc"), "{h}");
        assert!(!h.contains("pwned"), "{h}");
        let evil_subject = Answer {
            subject: "hi\r\nBcc: x@evil.example",
            ..answer("x", None)
        };
        let h = headers(&message(&evil_subject).expect("built"));
        assert!(!h.to_ascii_lowercase().contains("\r\nbcc"), "{h}");
        let evil_name = Answer {
            from: ("docs@example.org", "Docs\"\r\nBcc: x@evil.example"),
            ..answer("x", None)
        };
        let h = headers(&message(&evil_name).expect("built"));
        assert!(!h.to_ascii_lowercase().contains("\r\nbcc"), "{h}");
    }

    #[test]
    fn long_lines_flow_and_code_does_not() {
        let long = "word ".repeat(40);
        let code = format!("```\n{}\n```", "x".repeat(120));
        let out = flowed(&format!("{}\n{code}\n>not a quote\nFrom here", long.trim()));
        let lines: Vec<&str> = out.lines().collect();
        assert!(
            lines[0].ends_with(' ') && lines[0].chars().count() <= WRAP + 1,
            "{:?}",
            lines[0]
        );
        assert!(!lines[2].ends_with(' '), "the paragraph's last line ends hard");
        assert!(out.contains(&"x".repeat(120)), "code is never cut");
        assert!(
            out.contains("\n >not a quote\n") && out.contains("\n From here\n"),
            "{out}"
        );
    }

    #[test]
    fn re_is_added_once_and_references_stay_bounded() {
        assert_eq!(reply_subject("Re: re: AW: x"), "Re: x");
        assert_eq!(reply_subject(""), "Re: (no subject)");
        let refs: Vec<String> = (0..50).map(|i| format!("m{i}@x")).collect();
        let r = references(&Parent {
            id: "last@x",
            references: &refs,
            author: "a",
            text: None,
        });
        assert_eq!(r.len(), MAX_REFERENCES);
        assert_eq!((r[0].as_str(), r[r.len() - 1].as_str()), ("m0@x", "last@x"));
    }
}
