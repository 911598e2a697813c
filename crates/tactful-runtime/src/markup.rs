//! An agent's Markdown as the platforms that take markup want it: the two
//! pieces several platforms share, so each is written once.
//!
//! - [`escape_markup`]: the three characters Telegram's HTML and Slack's
//!   mrkdwn reserve;
//! - [`markdown_html`]: Markdown rendered to HTML and sanitised with the
//!   platform's allowlist (the web room's page, Matrix's
//!   `org.matrix.custom.html`);
//! - [`markdown_plain`]: Markdown read as plain text, for a platform that
//!   shows none of it (IRC);
//! - [`code_ranges`]: where a person's Markdown holds code, in which
//!   platforms that read mentions from the text (Mattermost, Zulip) read
//!   none.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd};

/// Escapes `&`, `<` and `>` as `&amp;`, `&lt;` and `&gt;`: the three
/// characters both Telegram's HTML and Slack's mrkdwn reserve. An agent's
/// text passed through this shows as typed and cannot become markup there
/// (a tag, a Slack mention such as `<!channel>`).
pub fn escape_markup(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` as HTML: Markdown (code, emphasis, links, lists, quotes,
/// tables) rendered, then cleaned by `clean`, the platform's allowlist.
///
/// Raw HTML written in the text is kept as text (escaped), never markup of
/// its own: an agent repeating what someone typed cannot inject a tag, and
/// the sanitiser is a second wall behind that. One line break is a line
/// break, as people in a chat mean it. A bare `http(s)://` address is a
/// link, as in every chat app, except inside code or a link already; the
/// allowlist still decides which schemes a link may have.
pub fn markdown_html(text: &str, clean: &ammonia::Builder<'_>) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    // Inside a code block or a link, text stays as it is.
    let mut inside = 0usize;
    let events = Parser::new_ext(text, options).flat_map(|e| {
        let e = match e {
            Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
            Event::SoftBreak => Event::HardBreak,
            e => e,
        };
        match &e {
            Event::Start(Tag::CodeBlock(_) | Tag::Link { .. }) => inside += 1,
            Event::End(TagEnd::CodeBlock | TagEnd::Link) => inside = inside.saturating_sub(1),
            Event::Text(t) if inside == 0 => return linked(t),
            _ => {}
        }
        vec![e]
    });
    let mut out = String::with_capacity(text.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut out, events);
    clean.clean(&out).to_string()
}

/// `text` as a person would write it where nothing is formatted (IRC):
/// `**bold**`, `_emphasis_` and `` `code` `` lose their markers, a link is
/// its text and address (`docs (https://…)`), a heading or list item is
/// its own line (`- item`, `1. item`), a code block's lines stay as they
/// are, a table's rows are cells joined with ` | `. One line per line:
/// paragraphs are not separated by a blank line, which such a platform
/// cannot show.
pub fn markdown_plain(text: &str) -> String {
    render_text(text, false)
}

/// `text` as XMPP clients style plain text (XEP-0393): as
/// [`markdown_plain`], but emphasis keeps a marker those clients show
/// (`*strong*`, `_emphasis_`, `~struck~`, `` `code` ``) and a code block
/// keeps its ```` ``` ```` fences, so it shows as a block.
pub fn markdown_styled(text: &str) -> String {
    render_text(text, true)
}

/// [`markdown_plain`], or with XEP-0393's markers when `styled`.
fn render_text(text: &str, styled: bool) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let mut out = String::with_capacity(text.len());
    // Per open list: the next item's number, or `None` for bullets.
    let mut lists: Vec<Option<u64>> = Vec::new();
    // Per open link: its address and where its text starts.
    let mut links: Vec<(String, usize)> = Vec::new();
    let mut cells = 0usize;
    let newline = |out: &mut String| {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
    };
    for e in Parser::new_ext(text, options) {
        match e {
            Event::Code(t) if styled => {
                out.push('`');
                out.push_str(&t);
                out.push('`');
            }
            Event::Text(t) | Event::Code(t) | Event::Html(t) | Event::InlineHtml(t) => out.push_str(&t),
            Event::Start(Tag::Strong) | Event::End(TagEnd::Strong) if styled => out.push('*'),
            Event::Start(Tag::Emphasis) | Event::End(TagEnd::Emphasis) if styled => out.push('_'),
            Event::Start(Tag::Strikethrough) | Event::End(TagEnd::Strikethrough) if styled => out.push('~'),
            Event::Start(Tag::CodeBlock(_)) if styled => {
                newline(&mut out);
                out.push_str("```\n");
            }
            Event::End(TagEnd::CodeBlock) if styled => {
                newline(&mut out);
                out.push_str("```\n");
            }
            Event::SoftBreak | Event::HardBreak => out.push('\n'),
            Event::Start(Tag::Item) => {
                newline(&mut out);
                let depth = lists.len().saturating_sub(1);
                out.push_str(&"  ".repeat(depth));
                match lists.last_mut() {
                    Some(Some(n)) => {
                        out.push_str(&format!("{n}. "));
                        *n += 1;
                    }
                    _ => out.push_str("- "),
                }
            }
            Event::Start(Tag::List(first)) => {
                newline(&mut out);
                lists.push(first);
            }
            Event::End(TagEnd::List(_)) => {
                lists.pop();
                newline(&mut out);
            }
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                links.push((dest_url.to_string(), out.len()));
            }
            Event::End(TagEnd::Link | TagEnd::Image) => {
                // The link's text is there; then its address, unless that
                // is the text.
                let (url, start) = links.pop().unwrap_or_default();
                let label = out.get(start..).unwrap_or_default().trim();
                if !url.is_empty() && label != url && !url.starts_with('#') {
                    out.push_str(&format!(" ({url})"));
                }
            }
            Event::Start(Tag::TableRow | Tag::TableHead) => {
                newline(&mut out);
                cells = 0;
            }
            Event::Start(Tag::TableCell) => {
                if cells > 0 {
                    out.push_str(" | ");
                }
                cells += 1;
            }
            Event::Start(Tag::BlockQuote(_)) => {
                newline(&mut out);
                out.push_str("> ");
            }
            Event::End(
                TagEnd::Paragraph
                | TagEnd::Heading(_)
                | TagEnd::CodeBlock
                | TagEnd::TableRow
                | TagEnd::TableHead,
            ) => newline(&mut out),
            Event::Rule => {
                newline(&mut out);
                out.push_str("---\n");
            }
            Event::TaskListMarker(done) => out.push_str(if done { "[x] " } else { "[ ] " }),
            _ => {}
        }
    }
    out.trim_end().to_owned()
}

/// `text` with each bare web address in it made a link.
fn linked(text: &str) -> Vec<Event<'static>> {
    let mut finder = linkify::LinkFinder::new();
    finder.kinds(&[linkify::LinkKind::Url]).url_must_have_scheme(true);
    let mut out = Vec::new();
    for span in finder.spans(text) {
        let s = span.as_str().to_owned();
        let web = span.kind() == Some(&linkify::LinkKind::Url)
            && (s.starts_with("http://") || s.starts_with("https://"));
        if web {
            out.push(Event::Start(Tag::Link {
                link_type: LinkType::Autolink,
                dest_url: CowStr::from(s.clone()),
                title: CowStr::from(""),
                id: CowStr::from(""),
            }));
            out.push(Event::Text(CowStr::from(s)));
            out.push(Event::End(TagEnd::Link));
        } else {
            out.push(Event::Text(CowStr::from(s)));
        }
    }
    out
}

/// The byte ranges of `text` that are code, as CommonMark reads it:
/// inline code spans (backtick runs of any length, escapes honoured) and
/// fenced or indented code blocks, each range with its delimiters.
pub fn code_ranges(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut out: Vec<std::ops::Range<usize>> = Vec::new();
    for (event, range) in Parser::new_ext(text, Options::empty()).into_offset_iter() {
        match event {
            Event::Code(_) | Event::Start(Tag::CodeBlock(_)) => out.push(range),
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_reserved_characters_are_escaped_and_nothing_else() {
        assert_eq!(
            escape_markup("<!channel> & <b>é</b> \"q\""),
            "&lt;!channel&gt; &amp; &lt;b&gt;é&lt;/b&gt; \"q\""
        );
    }

    #[test]
    fn raw_html_is_text_and_breaks_are_kept() {
        let clean = ammonia::Builder::default();
        assert_eq!(
            markdown_html("**a** <b>b</b>\nc", &clean),
            "<p><strong>a</strong> &lt;b&gt;b&lt;/b&gt;<br>\nc</p>\n"
        );
    }

    #[test]
    fn markdown_reads_as_plain_text_where_nothing_is_formatted() {
        let md = "# Resetting\n\nHold **the button** for `5 s`, see [the docs](https://e.test/r).\n\n\
                  - one\n- two\n\n1. first\n2. second\n\n```sh\ntactful check -c x.toml\n```\n\n\
                  | key | meaning |\n|---|---|\n| `mode` | who is answered |\n\nhttps://e.test/bare and <b>kept</b>";
        assert_eq!(
            markdown_plain(md),
            "Resetting\nHold the button for 5 s, see the docs (https://e.test/r).\n- one\n- two\n1. first\n2. second\n\
             tactful check -c x.toml\nkey | meaning\nmode | who is answered\nhttps://e.test/bare and <b>kept</b>"
        );
        assert_eq!(
            markdown_plain("docs_: line one\nline two"),
            "docs_: line one\nline two"
        );
        assert_eq!(
            markdown_plain("[https://e.test](https://e.test)"),
            "https://e.test"
        );
    }

    #[test]
    fn markdown_keeps_the_markers_xmpp_clients_style() {
        let md = "# Resetting\n\nHold **the button** for `5 s`, _gently_, not ~~hard~~.\n\n```sh\ntactful check\n```\n\n- one";
        assert_eq!(
            markdown_styled(md),
            "Resetting\nHold *the button* for `5 s`, _gently_, not ~hard~.\n```\ntactful check\n```\n- one"
        );
    }

    #[test]
    fn bare_web_addresses_are_links_but_not_in_code_or_links() {
        let clean = ammonia::Builder::default();
        let html = markdown_html("see https://example.org/a?b=1, then (http://x.test/y).", &clean);
        assert!(
            html.contains(r#"<a href="https://example.org/a?b=1" rel="noopener noreferrer">https://example.org/a?b=1</a>, then"#),
            "{html}"
        );
        assert!(
            html.contains(r#"(<a href="http://x.test/y" rel="noopener noreferrer">http://x.test/y</a>)."#),
            "{html}"
        );
        for kept in [
            "`https://example.org`",
            "```\nhttps://example.org\n```",
            "[docs](https://example.org/d)",
        ] {
            let html = markdown_html(kept, &clean);
            assert_eq!(
                html.matches("<a ").count(),
                usize::from(kept.starts_with('[')),
                "{kept} -> {html}"
            );
        }
        // Only the web: no javascript:, no bare domains, no e-mail.
        for plain in [
            "javascript:alert(1)",
            "example.org",
            "me@example.org",
            "ftp://example.org/f",
        ] {
            assert!(!markdown_html(plain, &clean).contains("<a "), "{plain}");
        }
        // A quote character cannot end the attribute early.
        let html = markdown_html("https://e.test/\"onmouseover=alert(1)", &clean);
        assert!(!html.contains("onmouseover=alert(1)\""), "{html}");
        assert!(!html.contains(" onmouseover"), "{html}");
    }

    #[test]
    fn code_is_found_as_commonmark_reads_it() {
        let text = "a `x` b ``y ` z`` \\`not code` c\n```\nblock\n```\nend";
        let code: Vec<&str> = code_ranges(text).into_iter().map(|r| &text[r]).collect();
        assert_eq!(code, vec!["`x`", "``y ` z``", "```\nblock\n```"]);
        assert!(code_ranges("no code, just `one backtick").is_empty());
    }
}
