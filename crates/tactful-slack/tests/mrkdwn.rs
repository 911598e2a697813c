//! Whatever an agent prints, the mrkdwn tactful sends holds no markup but
//! the links it wrote: no `<!channel>`, no `<@U…>`, no `<#C…>`.

use proptest::prelude::*;
use tactful_slack::mrkdwn::render;

/// Every `<` in `out` opens a link to a web or mail address and is closed
/// before the next one opens.
fn only_links(out: &str) -> Result<(), String> {
    let mut rest = out;
    while let Some(i) = rest.find('<') {
        let after = &rest[i + 1..];
        if !(after.starts_with("http://") || after.starts_with("https://") || after.starts_with("mailto:")) {
            return Err(format!(
                "markup that is not a link at {:?} in {out:?}",
                &rest[i..]
            ));
        }
        let close = after
            .find('>')
            .ok_or_else(|| format!("an unclosed link in {out:?}"))?;
        if after[..close].contains('<') {
            return Err(format!("a link opened inside a link in {out:?}"));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

proptest! {
    #[test]
    fn agent_output_cannot_forge_markup(
        text in "(<!channel>|<!here>|<@U024BE7LH>|<#C01>|\\[x\\]\\(|!\\[|\\]\\(|\\[|https://e.org/|javascript:|\\)|<|>|&|\\||\\*\\*|_|`|```|\n|> |- |[a-z ]|é){0,40}"
    ) {
        let out = render(&text);
        prop_assert!(only_links(&out).is_ok(), "{:?}", only_links(&out));
        for forged in ["<!", "<@", "<#"] {
            prop_assert!(!out.contains(forged), "{forged} in {out:?}");
        }
    }
}

#[test]
fn the_check_itself_catches_forged_markup() {
    assert!(only_links("<https://e.org|x> and <mailto:a@b.c|a>").is_ok());
    assert!(only_links("<!channel>").is_err());
    assert!(only_links("<https://e.org|<@U1>>").is_err());
    assert!(only_links("<https://e.org").is_err());
}
