//! Reading one mail as tactful needs it: who wrote it, to whom, through
//! which list, in which thread, what it says that is new, and whether it
//! was written by a machine (never answered: that is how mail loops
//! start). Pure: bytes in, a [`Mail`] out, so every rule is tested here.

use mail_parser::{HeaderValue, MessageParser};
use tactful_core::Timestamp;

/// The most of a body kept: a mail is context for a model, not an
/// archive (a 20 MB attachment never reaches the transcript).
const MAX_TEXT_CHARS: usize = 16_000;

/// What a mail says, as tactful reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mail {
    /// Its Message-ID, without the angle brackets; `None` if it has none.
    pub id: Option<String>,
    /// The sender's address, lower case.
    pub from: Option<String>,
    /// The sender's display name, or the address.
    pub from_name: String,
    /// Every address in To and Cc, lower case.
    pub recipients: Vec<String>,
    /// The subject on one line (line breaks and control characters gone).
    pub subject: String,
    /// The subject without `Re:`/`Fwd:`/`[list]`, lower case: a thread's
    /// name when a client dropped the threading headers.
    pub base_subject: String,
    /// The message it answers.
    pub in_reply_to: Option<String>,
    /// The thread it is in, oldest first.
    pub references: Vec<String>,
    /// The configured list it came through, if any.
    pub list: Option<String>,
    /// A list it came through that is not configured.
    pub other_list: Option<String>,
    /// What it says that is new: the plain text without the quoted mail
    /// at its end and without the signature.
    pub text: String,
    /// Why it must never be answered (a machine wrote it), if so.
    pub automatic: Option<&'static str>,
    /// Its `Date:`.
    pub date: Option<Timestamp>,
}

/// Reads `raw`; `lists` are the configured list addresses (lower case).
/// `None` only for bytes that are no mail at all.
pub(crate) fn read(raw: &[u8], lists: &[String]) -> Option<Mail> {
    let m = MessageParser::default().parse(raw)?;
    let header = |name: &str| m.header_raw(name).map(|v| v.trim().to_ascii_lowercase());
    let from_addr = m.from().and_then(|a| a.first());
    let from = from_addr
        .and_then(|a| a.address())
        .map(|a| a.trim().to_ascii_lowercase())
        .filter(|a| crate::rooms::is_address(a));
    let from_name = from_addr
        .and_then(|a| a.name())
        .map(one_line)
        .filter(|n| !n.is_empty())
        .or_else(|| from.clone())
        .unwrap_or_else(|| "someone".to_owned());
    let mut recipients: Vec<String> = Vec::new();
    for a in m.to().into_iter().chain(m.cc()).flat_map(|a| a.iter()) {
        if let Some(addr) = a.address().map(|a| a.trim().to_ascii_lowercase())
            && !recipients.contains(&addr)
        {
            recipients.push(addr);
        }
    }
    let subject = m.subject().map(one_line).unwrap_or_default();
    let base_subject = m.thread_name().map(one_line).unwrap_or_default().to_lowercase();
    let ids = |v: &HeaderValue<'_>| -> Vec<String> {
        v.as_text_list()
            .map(|l| l.iter().map(|s| clean_id(s)).filter(|s| !s.is_empty()).collect())
            .unwrap_or_default()
    };
    let in_reply_to = ids(m.in_reply_to()).into_iter().next_back();
    let mut references = ids(m.references());
    references.dedup();
    let (list, other_list) = which_list(
        m.header_raw("List-Post"),
        m.header_raw("List-Id"),
        &recipients,
        lists,
    );
    let automatic = automatic(
        header("Auto-Submitted").as_deref(),
        header("Precedence").as_deref(),
        m.header_raw("Return-Path").map(str::trim),
        from.as_deref(),
        &subject,
        &m,
    );
    let body = m.body_text(0).unwrap_or_default();
    let text = new_text(&body);
    Some(Mail {
        id: m.message_id().map(clean_id).filter(|s| !s.is_empty()),
        from,
        from_name,
        recipients,
        subject,
        base_subject,
        in_reply_to,
        references,
        list,
        other_list,
        text,
        automatic,
        date: m
            .date()
            .and_then(|d| u64::try_from(d.to_timestamp()).ok())
            .map(|s| Timestamp::from_millis(s.saturating_mul(1000))),
    })
}

/// A header's text on one line: every control character (CR and LF
/// above all: a header an attacker folds into two) becomes a space.
pub(crate) fn one_line(s: &str) -> String {
    let spaced: String = s.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    spaced.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A Message-ID as tactful keeps it: without brackets, whitespace or
/// control characters, at most 250 bytes.
pub(crate) fn clean_id(s: &str) -> String {
    let s: String = s
        .trim()
        .trim_start_matches('<')
        .trim_end_matches('>')
        .chars()
        .filter(|c| !c.is_whitespace() && !c.is_control() && !matches!(c, '<' | '>'))
        .collect();
    let mut end = s.len().min(250);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}

/// The configured list a mail came through (by `List-Post`, else
/// `List-Id`, else the list's address among the recipients), and a list
/// it came through that is not configured.
fn which_list(
    post: Option<&str>,
    id: Option<&str>,
    recipients: &[String],
    lists: &[String],
) -> (Option<String>, Option<String>) {
    let post = post.and_then(|p| {
        let p = p.to_ascii_lowercase();
        let at = p.find("mailto:")? + "mailto:".len();
        let addr: String = p[at..]
            .chars()
            .take_while(|c| !matches!(c, '>' | '?' | ',' | ' '))
            .collect();
        crate::rooms::is_address(&addr).then_some(addr)
    });
    let id = id.and_then(|i| {
        let i = i.to_ascii_lowercase();
        let inner = match (i.rfind('<'), i.rfind('>')) {
            (Some(a), Some(b)) if a < b => i[a + 1..b].to_owned(),
            _ => i.trim().to_owned(),
        };
        (!inner.is_empty()).then_some(inner)
    });
    let configured = lists.iter().find(|l| {
        post.as_deref() == Some(l.as_str()) || id.as_deref() == Some(l.replacen('@', ".", 1).as_str())
    });
    if let Some(l) = configured {
        return (Some(l.clone()), None);
    }
    if post.is_some() || id.is_some() {
        return (None, post.or(id));
    }
    (lists.iter().find(|l| recipients.contains(l)).cloned(), None)
}

/// Why a mail was written by a machine, if it was: an auto-reply, a
/// bulk or junk mailing, a bounce or delivery report, an out-of-office
/// note. Such mail is heard, never answered: answering it is how two
/// automatic senders loop.
fn automatic(
    auto_submitted: Option<&str>,
    precedence: Option<&str>,
    return_path: Option<&str>,
    from: Option<&str>,
    subject: &str,
    m: &mail_parser::Message<'_>,
) -> Option<&'static str> {
    if let Some(a) = auto_submitted {
        let kind = a.split(';').next().unwrap_or("").trim();
        if kind != "no" {
            return Some("Auto-Submitted");
        }
    }
    if let Some(p) = precedence
        && matches!(p, "bulk" | "junk" | "auto_reply")
    {
        return Some("Precedence: bulk");
    }
    if return_path.is_some_and(|r| {
        r.trim_matches(|c: char| c == '<' || c == '>' || c.is_whitespace())
            .is_empty()
    }) {
        return Some("a bounce (null return path)");
    }
    if let Some(f) = from {
        let local = f.split('@').next().unwrap_or("");
        if matches!(
            local,
            "mailer-daemon" | "postmaster" | "noreply" | "no-reply" | "do-not-reply"
        ) {
            return Some("a bounce or notice (from a system address)");
        }
    }
    let report = m
        .header("Content-Type")
        .and_then(HeaderValue::as_content_type)
        .is_some_and(|ct| {
            ct.ctype().eq_ignore_ascii_case("multipart")
                && ct.subtype().is_some_and(|s| s.eq_ignore_ascii_case("report"))
        });
    if report {
        return Some("a delivery report");
    }
    let autoreply_header = ["X-Autoreply", "X-Autorespond", "X-Auto-Response"]
        .iter()
        .any(|h| m.header_raw(*h).is_some());
    let s = subject.to_lowercase();
    // Only what auto-responders write: a person's "Absence policy?" is
    // a question.
    let ooo_subject = [
        "out of office",
        "automatic reply",
        "autoreply",
        "auto-reply",
        "abwesenheitsnotiz",
    ]
    .iter()
    .any(|p| s.starts_with(p));
    if autoreply_header || ooo_subject {
        return Some("an out-of-office reply");
    }
    None
}

/// What a body says that is new: without the signature (after `-- `)
/// and without the quoted mail at its end (`> ` lines, and the "On …
/// wrote:" line before them); quotes answered in between stay, they are
/// the conversation. At most [`MAX_TEXT_CHARS`].
pub(crate) fn new_text(body: &str) -> String {
    let mut lines: Vec<&str> = Vec::new();
    for line in body.lines() {
        if line == "-- " || line == "--" {
            break;
        }
        lines.push(line);
    }
    while lines
        .last()
        .is_some_and(|l| l.trim().is_empty() || l.trim_start().starts_with('>'))
    {
        lines.pop();
    }
    if lines
        .last()
        .is_some_and(|l| l.trim_end().ends_with("wrote:") || l.trim_end().ends_with("écrit :"))
    {
        lines.pop();
    }
    let text = lines.join("\n");
    let text = text.trim();
    match text.char_indices().nth(MAX_TEXT_CHARS) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_owned(),
    }
}

/// Which of `names` opens `text` as an address: `Docs,`, `Docs:`, `Hi
/// Docs,`, `Hello docs!`, `Dear Docs,` (case ignored; the longest name
/// wins).
pub(crate) fn opened_with<'n>(text: &str, names: &[&'n str]) -> Option<&'n str> {
    let first = text.lines().find(|l| !l.trim().is_empty())?.trim();
    let lower = first.to_lowercase();
    let mut rest = lower.as_str();
    for greeting in [
        "hi ",
        "hello ",
        "hey ",
        "dear ",
        "good morning ",
        "good afternoon ",
        "good evening ",
    ] {
        if let Some(r) = rest.strip_prefix(greeting) {
            rest = r.trim_start();
            break;
        }
    }
    let rest = rest.strip_prefix('@').unwrap_or(rest);
    let mut best: Option<&str> = None;
    for &name in names {
        let n = name.to_lowercase();
        if let Some(after) = rest.strip_prefix(n.as_str())
            && (after.is_empty() || after.starts_with([',', ':', '!', '—', '-']) || after.starts_with(" -"))
            && best.is_none_or(|b| b.len() < name.len())
        {
            best = Some(name);
        }
    }
    best
}

#[cfg(test)]
mod tests;
