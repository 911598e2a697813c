//! What a reply looks like on Matrix: the agent's Markdown as
//! `org.matrix.custom.html` beside the text itself, in a first send and in
//! every edit alike.
//!
//! An edit carries two copies (the spec's event replacement): the
//! `m.new_content` clients that apply edits show, and the event's own
//! content, the fallback for clients, notifications and bridges that do
//! not. Both are built from the one content made here, so both have the
//! formatted body and the text: a plain-text edit would leave the
//! fallback's `formatted_body` as a bare `* ` (ruma adds an empty one).

use std::sync::LazyLock;

use matrix_sdk::ruma::events::room::message::RoomMessageEventContentWithoutRelation;

/// The Markdown in `text` as HTML, cleaned to the tags the Matrix spec
/// suggests clients render (no images: a picture from anywhere would tell
/// its server who reads the room; links only to the web and mail).
pub fn html(text: &str) -> String {
    static CLEAN: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
        let mut b = ammonia::Builder::default();
        b.tags(
            [
                "del",
                "h1",
                "h2",
                "h3",
                "h4",
                "h5",
                "h6",
                "blockquote",
                "p",
                "a",
                "ul",
                "ol",
                "sup",
                "sub",
                "li",
                "b",
                "i",
                "u",
                "strong",
                "em",
                "s",
                "code",
                "hr",
                "br",
                "div",
                "table",
                "thead",
                "tbody",
                "tr",
                "th",
                "td",
                "caption",
                "pre",
                "span",
            ]
            .into_iter()
            .collect(),
        )
        .link_rel(None)
        .url_schemes(["http", "https", "mailto"].into_iter().collect());
        b
    });
    let mut out = tactful_runtime::markdown_html(text, &CLEAN);
    out.truncate(out.trim_end().len());
    out
}

/// A reply's content: `text` as the plain body (the Markdown as written,
/// which reads well as it is) and as HTML.
pub fn content(text: &str) -> RoomMessageEventContentWithoutRelation {
    RoomMessageEventContentWithoutRelation::text_html(text, html(text))
}

#[cfg(test)]
mod tests {
    use matrix_sdk::ruma::events::room::message::{MessageType, ReplacementMetadata};
    use matrix_sdk::ruma::owned_event_id;

    use super::*;

    fn parts(msgtype: &MessageType) -> (String, Option<String>) {
        let MessageType::Text(t) = msgtype else {
            panic!("not text: {msgtype:?}");
        };
        (t.body.clone(), t.formatted.as_ref().map(|f| f.body.clone()))
    }

    #[test]
    fn markdown_becomes_html_beside_the_text() {
        let c = content("**bold** and `code`");
        let (body, html) = parts(&c.msgtype);
        assert_eq!(body, "**bold** and `code`");
        assert_eq!(
            html.as_deref(),
            Some("<p><strong>bold</strong> and <code>code</code></p>")
        );
    }

    #[test]
    fn an_edit_carries_the_text_in_its_fallback_and_its_new_content() {
        let edit = content("**done**").make_replacement(ReplacementMetadata::new(
            owned_event_id!("$placeholder:hs.test"),
            None,
        ));
        let (body, html) = parts(&edit.msgtype);
        assert_eq!(body, "* **done**");
        assert_eq!(html.as_deref(), Some("* <p><strong>done</strong></p>"));
        let json = serde_json::to_value(&edit).expect("serialises");
        let new = &json["m.new_content"];
        assert_eq!(new["body"], "**done**");
        assert_eq!(new["format"], "org.matrix.custom.html");
        assert_eq!(new["formatted_body"], "<p><strong>done</strong></p>");
    }

    #[test]
    fn nothing_an_agent_writes_becomes_markup_of_its_own() {
        for evil in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "[x](javascript:alert(1))",
            "![pixel](https://tracker.example/p.gif)",
            "<a href=\"https://evil.example\">x</a>",
            "<iframe src=https://evil.example></iframe>",
        ] {
            let h = html(evil);
            for bad in ["<script", "<img", "<iframe", "javascript:"] {
                assert!(!h.contains(bad), "{evil} -> {h}");
            }
            // A link there may be is a bare address made one, showing
            // where it goes: never text of the agent's over another address.
            for link in h.split("<a href=\"").skip(1) {
                let (href, rest) = link.split_once('"').expect("a quoted href");
                let text = rest
                    .split_once('>')
                    .and_then(|(_, t)| t.split_once("</a>"))
                    .map(|(t, _)| t);
                assert_eq!(text, Some(href), "{evil} -> {h}");
            }
        }
        assert!(html("[docs](https://example.org)").contains(r#"<a href="https://example.org">docs</a>"#));
    }
}
