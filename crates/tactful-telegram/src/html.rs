//! An agent's Markdown as the HTML subset Telegram renders (`parse_mode =
//! HTML`): bold, italic, strikethrough, code, pre with a language, links,
//! block quotes. Everything else becomes plain text with `<`, `>` and `&`
//! escaped, so nothing an agent prints (HTML included) can break the
//! message or smuggle markup in. Should Telegram still refuse it ("can't
//! parse entities"), the sender posts the original text without a parse
//! mode: a reply is never dropped over formatting.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
pub use tactful_runtime::escape_markup as escape;

/// Whether a link target may become a clickable link: web and Telegram
/// links only (no `javascript:`, no relative paths Telegram would refuse).
fn linkable(url: &str) -> bool {
    let lower = url.trim().to_ascii_lowercase();
    ["https://", "http://", "tg://", "mailto:"]
        .iter()
        .any(|s| lower.starts_with(s))
}

/// Renders `markdown` as Telegram HTML.
pub fn render(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len() + 16);
    // Open lists: the next number of each (None: bullets).
    let mut lists: Vec<Option<u64>> = Vec::new();
    // Closing tags of open links (empty when the link was not linkable).
    let mut links: Vec<&'static str> = Vec::new();
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    for event in Parser::new_ext(markdown, options) {
        match event {
            Event::Start(tag) => match tag {
                Tag::Paragraph => {}
                Tag::Heading { .. } | Tag::Strong => out.push_str("<b>"),
                Tag::Emphasis => out.push_str("<i>"),
                Tag::Strikethrough => out.push_str("<s>"),
                Tag::BlockQuote(_) => out.push_str("<blockquote>"),
                Tag::CodeBlock(kind) => match kind {
                    CodeBlockKind::Fenced(lang) if !lang.trim().is_empty() => {
                        let lang: String = lang
                            .split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .chars()
                            .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '+' | '#'))
                            .collect();
                        out.push_str(&format!("<pre><code class=\"language-{lang}\">"));
                    }
                    _ => out.push_str("<pre><code>"),
                },
                Tag::List(start) => {
                    if !lists.is_empty() && !out.ends_with('\n') {
                        out.push('\n');
                    }
                    lists.push(start);
                }
                Tag::Item => {
                    let depth = lists.len().saturating_sub(1);
                    out.push_str(&"  ".repeat(depth));
                    match lists.last_mut() {
                        Some(Some(n)) => {
                            out.push_str(&format!("{n}. "));
                            *n += 1;
                        }
                        _ => out.push_str("• "),
                    }
                }
                Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. } => {
                    if linkable(&dest_url) {
                        out.push_str(&format!(
                            "<a href=\"{}\">",
                            escape(&dest_url).replace('"', "&quot;")
                        ));
                        links.push("</a>");
                    } else {
                        links.push("");
                    }
                }
                _ => {}
            },
            Event::End(tag) => match tag {
                TagEnd::Paragraph => out.push_str(if lists.is_empty() { "\n\n" } else { "\n" }),
                TagEnd::Heading(level) => {
                    out.push_str("</b>");
                    out.push_str(if level == HeadingLevel::H1 { "\n\n" } else { "\n" });
                }
                TagEnd::Strong => out.push_str("</b>"),
                TagEnd::Emphasis => out.push_str("</i>"),
                TagEnd::Strikethrough => out.push_str("</s>"),
                TagEnd::BlockQuote(_) => {
                    trim_end_in_place(&mut out);
                    out.push_str("</blockquote>\n\n");
                }
                TagEnd::CodeBlock => {
                    if out.ends_with('\n') {
                        out.pop();
                    }
                    out.push_str("</code></pre>\n\n");
                }
                TagEnd::List(_) => {
                    lists.pop();
                    if lists.is_empty() {
                        out.push('\n');
                    }
                }
                TagEnd::Item if !out.ends_with('\n') => out.push('\n'),
                TagEnd::Link | TagEnd::Image => out.push_str(links.pop().unwrap_or_default()),
                _ => {}
            },
            Event::Text(t) => out.push_str(&escape(&t)),
            Event::Code(t) => {
                out.push_str("<code>");
                out.push_str(&escape(&t));
                out.push_str("</code>");
            }
            // Typed HTML is shown as what was typed.
            Event::Html(t) | Event::InlineHtml(t) => out.push_str(&escape(&t)),
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Rule => out.push_str("———\n\n"),
            Event::TaskListMarker(done) => out.push_str(if done { "☑ " } else { "☐ " }),
            Event::FootnoteReference(t) | Event::InlineMath(t) | Event::DisplayMath(t) => {
                out.push_str(&escape(&t))
            }
        }
    }
    trim_end_in_place(&mut out);
    out
}

fn trim_end_in_place(s: &mut String) {
    let len = s.trim_end().len();
    s.truncate(len);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_telegram_html() {
        assert_eq!(
            render("**bold** and _it_ and `x<y`"),
            "<b>bold</b> and <i>it</i> and <code>x&lt;y</code>"
        );
        assert_eq!(
            render("# Title\n\nText.\n\n- one\n- two\n\n1. a\n2. b"),
            "<b>Title</b>\n\nText.\n\n• one\n• two\n\n1. a\n2. b"
        );
        assert_eq!(
            render("```rust\nfn main() {}\n```"),
            "<pre><code class=\"language-rust\">fn main() {}</code></pre>"
        );
        assert_eq!(
            render("[docs](https://example.org/?a=1&b=\"2\")"),
            "<a href=\"https://example.org/?a=1&amp;b=&quot;2&quot;\">docs</a>"
        );
        assert_eq!(
            render("> quoted\n\nafter"),
            "<blockquote>quoted</blockquote>\n\nafter"
        );
    }

    #[test]
    fn nothing_an_agent_prints_becomes_markup() {
        assert_eq!(
            render("<b>hi</b> & <script>"),
            "&lt;b&gt;hi&lt;/b&gt; &amp; &lt;script&gt;"
        );
        assert_eq!(render("[x](javascript:alert(1))"), "x");
        assert_eq!(
            render("```js\" onclick=\"x\n1\n```"),
            "<pre><code class=\"language-js\">1</code></pre>"
        );
    }

    #[test]
    fn every_tag_opened_is_closed() {
        for md in [
            "**unclosed",
            "*a **b* c**",
            "- a\n  - b\n    - c",
            "> - a\n> > b",
            "[a](https://x) **[b](y)**",
        ] {
            let html = render(md);
            for tag in ["b", "i", "s", "a", "code", "pre", "blockquote"] {
                let opened =
                    html.matches(&format!("<{tag}>")).count() + html.matches(&format!("<{tag} ")).count();
                let closed = html.matches(&format!("</{tag}>")).count();
                assert_eq!(opened, closed, "<{tag}> in {html:?} from {md:?}");
            }
        }
    }
}
