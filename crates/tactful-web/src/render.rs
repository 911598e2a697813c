//! Message text as the page shows it: Markdown (code, emphasis, links,
//! lists, quotes) rendered to HTML on the server and sanitised with an
//! allowlist, so the page can insert it as it is.
//!
//! Nobody's text becomes markup of its own: raw HTML in a message is kept
//! as text, `javascript:` links and event attributes are dropped, images
//! are left out (a picture from anywhere would tell its server who reads
//! the room), and links open in a new tab without a referrer.

use std::sync::LazyLock;

/// The HTML for `text`.
pub fn html(text: &str) -> String {
    static CLEAN: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
        let mut b = ammonia::Builder::default();
        b.rm_tags(["img"])
            .link_rel(Some("noopener noreferrer nofollow"))
            .set_tag_attribute_value("a", "target", "_blank")
            .url_schemes(["http", "https", "mailto"].into_iter().collect());
        b
    });
    tactful_runtime::markdown_html(text, &CLEAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_is_rendered_and_nothing_runs() {
        assert_eq!(
            html("**bold** and `code`"),
            "<p><strong>bold</strong> and <code>code</code></p>\n"
        );
        assert!(html("```rust\nfn a() {}\n```").contains("<pre><code>fn a() {}"));
        assert!(html("- one\n- two").contains("<li>one</li>"));
        let link = html("[docs](https://example.org)");
        assert!(link.contains(r#"href="https://example.org""#), "{link}");
        assert!(link.contains("noopener"), "{link}");
        for evil in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "[x](javascript:alert(1))",
            "<a href=\"javascript:alert(1)\">x</a>",
            "![pixel](https://tracker.example/p.gif)",
            "<iframe src=https://evil.example></iframe>",
        ] {
            let h = html(evil);
            // What is left is text (escaped) or allowed tags without the
            // dangerous attribute or scheme.
            for tag in ["<script", "<img", "<iframe"] {
                assert!(!h.contains(tag), "{evil} -> {h}");
            }
            assert!(!h.contains("<a href=\"javascript"), "{evil} -> {h}");
            assert!(!h.contains("<a href") || !h.contains("onerror"), "{evil} -> {h}");
        }
        assert!(
            html("<b>hi</b>").contains("&lt;b&gt;hi&lt;/b&gt;"),
            "raw HTML shows as text"
        );
        assert_eq!(html("line one\nline two"), "<p>line one<br>\nline two</p>\n");
    }
}
