//! An agent's Markdown as the platforms that take markup want it: the two
//! pieces several platforms share, so each is written once.
//!
//! - [`escape_markup`]: the three characters Telegram's HTML and Slack's
//!   mrkdwn reserve;
//! - [`markdown_html`]: Markdown rendered to HTML and sanitised with the
//!   platform's allowlist (the web room's page, Matrix's
//!   `org.matrix.custom.html`).

use pulldown_cmark::{Event, Options, Parser};

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
/// break, as people in a chat mean it.
pub fn markdown_html(text: &str, clean: &ammonia::Builder<'_>) -> String {
    let options = Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TABLES;
    let events = Parser::new_ext(text, options).map(|e| match e {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        Event::SoftBreak => Event::HardBreak,
        e => e,
    });
    let mut out = String::with_capacity(text.len() * 3 / 2);
    pulldown_cmark::html::push_html(&mut out, events);
    clean.clean(&out).to_string()
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
}
