//! An agent's Markdown as Slack's `mrkdwn`: `*bold*`, `_italic_`,
//! `~strike~`, code and code blocks, `<url|label>` links, `> ` quotes,
//! bullets. Everything else is plain text with `&`, `<` and `>` escaped
//! (`&amp;`, `&lt;`, `&gt;`), as Slack asks: so nothing an agent prints
//! can become markup, and above all not a mention: `<!channel>`,
//! `<!here>`, `<@U…>` or `<#C…>` in an agent's output reach Slack as text
//! and ping nobody. The only `<` in the output opens a link to a web or
//! mail address that this module wrote.

use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};
pub use tactful_runtime::escape_markup as escape;

/// A link target fit for `<url|label>`: web and mail addresses only, with
/// the characters that would end the markup early percent-encoded.
fn link_target(url: &str) -> Option<String> {
    let url = url.trim();
    let lower = url.to_ascii_lowercase();
    if !["https://", "http://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s))
    {
        return None;
    }
    let mut out = String::with_capacity(url.len());
    for c in url.chars() {
        match c {
            '<' => out.push_str("%3C"),
            '>' => out.push_str("%3E"),
            '|' => out.push_str("%7C"),
            '&' => out.push_str("&amp;"),
            c if c.is_whitespace() || c.is_control() => out.push_str("%20"),
            c => out.push(c),
        }
    }
    Some(out)
}

/// How a link was written.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LinkOut {
    /// As Slack markup, `<url|label>`.
    Markup,
    /// As its label only (a target Slack must not link to).
    Text,
    /// As typed, its angle brackets escaped.
    Typed,
}

/// The output, quoting lines inside block quotes.
#[derive(Default)]
struct Writer {
    out: String,
    quote: usize,
    line_start: bool,
}

impl Writer {
    fn push(&mut self, s: &str) {
        for c in s.chars() {
            if self.line_start && self.quote > 0 && c != '\n' {
                self.out.push_str(&"> ".repeat(self.quote));
            }
            self.out.push(c);
            self.line_start = c == '\n';
        }
    }

    /// Ends the current line and leaves one empty line, once.
    fn blank_line(&mut self) {
        self.trim_end();
        if !self.out.is_empty() {
            self.push("\n\n");
        }
    }

    fn newline(&mut self) {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.push("\n");
        }
    }

    fn trim_end(&mut self) {
        let len = self.out.trim_end().len();
        self.out.truncate(len);
        self.line_start = self.out.is_empty() || self.out.ends_with('\n');
    }
}

/// Renders `markdown` as Slack mrkdwn.
pub fn render(markdown: &str) -> String {
    let mut w = Writer {
        line_start: true,
        ..Writer::default()
    };
    // Open lists: the next number of each (None: bullets).
    let mut lists: Vec<Option<u64>> = Vec::new();
    // How each open link was written.
    let mut links: Vec<LinkOut> = Vec::new();
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { .. } | Tag::Strong => w.push("*"),
                Tag::Emphasis => w.push("_"),
                Tag::Strikethrough => w.push("~"),
                Tag::BlockQuote(_) => {
                    w.newline();
                    w.quote += 1;
                }
                Tag::CodeBlock(_) => {
                    w.newline();
                    w.push("```\n");
                }
                Tag::List(start) => {
                    w.newline();
                    lists.push(start);
                }
                Tag::Item => {
                    let depth = lists.len().saturating_sub(1);
                    w.push(&"    ".repeat(depth));
                    match lists.last_mut() {
                        Some(Some(n)) => {
                            w.push(&format!("{n}. "));
                            *n += 1;
                        }
                        _ => w.push("• "),
                    }
                }
                // A link inside a link written as markup (a badge: an
                // image in a link) is its text only: Slack links do not
                // nest.
                // An e-mail autolink is shown as typed, brackets and all:
                // CommonMark reads `<!subteam^S1|@team>` as one.
                Tag::Link {
                    link_type: LinkType::Email,
                    ..
                } => {
                    w.push("&lt;");
                    links.push(LinkOut::Typed);
                }
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                    let markup = links.contains(&LinkOut::Markup);
                    match link_target(&dest_url).filter(|_| !markup) {
                        Some(url) => {
                            w.push(&format!("<{url}|"));
                            links.push(LinkOut::Markup);
                        }
                        None => links.push(LinkOut::Text),
                    }
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => {
                    if lists.is_empty() {
                        w.blank_line();
                    } else {
                        w.newline();
                    }
                }
                TagEnd::Heading(_) => {
                    w.push("*");
                    w.blank_line();
                }
                TagEnd::Strong => w.push("*"),
                TagEnd::Emphasis => w.push("_"),
                TagEnd::Strikethrough => w.push("~"),
                TagEnd::BlockQuote(_) => {
                    w.trim_end();
                    w.quote = w.quote.saturating_sub(1);
                    w.blank_line();
                }
                TagEnd::CodeBlock => {
                    w.newline();
                    w.push("```");
                    w.blank_line();
                }
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        w.blank_line();
                    }
                }
                TagEnd::Item => w.newline(),
                TagEnd::Link | TagEnd::Image => match links.pop() {
                    Some(LinkOut::Markup) => w.push(">"),
                    Some(LinkOut::Typed) => w.push("&gt;"),
                    _ => {}
                },
                _ => {}
            },
            Event::Text(t) => w.push(&escape(&t)),
            Event::Code(t) => {
                w.push("`");
                w.push(&escape(&t));
                w.push("`");
            }
            // Typed HTML is shown as what was typed.
            Event::Html(t) | Event::InlineHtml(t) => w.push(&escape(&t)),
            Event::SoftBreak | Event::HardBreak => w.push("\n"),
            Event::Rule => {
                w.newline();
                w.push("———");
                w.blank_line();
            }
            Event::TaskListMarker(done) => w.push(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(t) | Event::InlineMath(t) | Event::DisplayMath(t) => w.push(&escape(&t)),
        }
    }
    w.trim_end();
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_mrkdwn() {
        assert_eq!(
            render("**bold** and _it_ and ~~no~~ and `x<y`"),
            "*bold* and _it_ and ~no~ and `x&lt;y`"
        );
        assert_eq!(
            render("# Title\n\nText.\n\n- one\n- two\n\n1. a\n2. b"),
            "*Title*\n\nText.\n\n• one\n• two\n\n1. a\n2. b"
        );
        assert_eq!(
            render("```rust\nfn main() {}\n```\nafter"),
            "```\nfn main() {}\n```\n\nafter"
        );
        assert_eq!(
            render("[docs](https://example.org/?a=1&b=2)"),
            "<https://example.org/?a=1&amp;b=2|docs>"
        );
        assert_eq!(render("> quoted\n> twice\n\nafter"), "> quoted\n> twice\n\nafter");
        assert_eq!(render("line one\nline two"), "line one\nline two");
    }

    #[test]
    fn nothing_an_agent_prints_becomes_a_mention_or_markup() {
        assert_eq!(
            render("Hey <!channel> and <!here>, <@U024BE7LH> in <#C01|general>"),
            "Hey &lt;!channel&gt; and &lt;!here&gt;, &lt;@U024BE7LH&gt; in &lt;#C01|general&gt;"
        );
        assert_eq!(render("a & b < c > d"), "a &amp; b &lt; c &gt; d");
        assert_eq!(render("[x](javascript:alert(1))"), "x");
        // A link target cannot close the markup early and open another.
        assert_eq!(
            render("[x](https://e.org/a>b|<!channel>)"),
            "<https://e.org/a%3Eb%7C%3C!channel%3E|x>"
        );
        assert_eq!(render("`<!everyone>`"), "`&lt;!everyone&gt;`");
        // A user group mention keeps its brackets, escaped: it reads as
        // typed and pings nobody.
        assert_eq!(
            render("ask <!subteam^S0TEAM|@team> now"),
            "ask &lt;!subteam^S0TEAM|@team&gt; now"
        );
        // A badge: an image inside a link. Slack links do not nest.
        assert_eq!(
            render("[![build](https://ci.example/badge.svg)](https://ci.example/run)"),
            "<https://ci.example/run|build>"
        );
    }
}
