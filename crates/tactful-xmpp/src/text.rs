//! How people address someone in an XMPP room's text: clients complete a
//! nick at the start of the message as `Nick: ` (Conversations, Gajim,
//! Dino) or `Nick, `.

/// Which of `nicks` opens `body` as an address (`Docs: …`, `Docs, …`,
/// `@Docs …`), compared without case as people type them; the longest
/// wins, so `Docs2:` is not `Docs`.
pub fn addressed<'n>(body: &str, nicks: &[&'n str]) -> Option<&'n str> {
    let line = body.trim_start();
    let line = line.strip_prefix('@').unwrap_or(line);
    let mut best: Option<&str> = None;
    for &nick in nicks {
        if nick.is_empty() || line.len() < nick.len() || !line.is_char_boundary(nick.len()) {
            continue;
        }
        let (head, rest) = line.split_at(nick.len());
        let ends = rest.is_empty()
            || rest.starts_with([':', ','])
            || (body.trim_start().starts_with('@') && rest.starts_with(char::is_whitespace));
        if head.to_lowercase() == nick.to_lowercase() && ends && best.is_none_or(|b| b.len() < nick.len()) {
            best = Some(nick);
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nick_opening_the_line_addresses_it_and_elsewhere_does_not() {
        let nicks = ["Docs", "Docs2", "Chef"];
        assert_eq!(addressed("Docs: how do I reset?", &nicks), Some("Docs"));
        assert_eq!(addressed("docs, how?", &nicks), Some("Docs"));
        assert_eq!(addressed("  @Chef what now", &nicks), Some("Chef"));
        assert_eq!(addressed("Docs2: hi", &nicks), Some("Docs2"));
        assert_eq!(addressed("Docsy: hi", &nicks), None);
        assert_eq!(addressed("I read the Docs: fine", &nicks), None);
        assert_eq!(addressed("Docs is down", &nicks), None);
        assert_eq!(addressed("Dö", &["Döcs"]), None, "no panic inside a character");
    }
}
