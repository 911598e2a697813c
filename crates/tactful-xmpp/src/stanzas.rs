//! The XMPP extensions tactful writes and reads, as elements: what
//! `xmpp-parsers` has types for is read through them (delays, stanza ids,
//! corrections, MUC status codes, archive results); replies (XEP-0461),
//! their fallback (XEP-0428), references (XEP-0372) and retractions
//! (XEP-0424) are built here, a few attributes each.

use tokio_xmpp::minidom::Element;
use tokio_xmpp::minidom::rxml::NcName;

pub(crate) const NS_REPLY: &str = "urn:xmpp:reply:0";
pub(crate) const NS_FALLBACK: &str = "urn:xmpp:fallback:0";
pub(crate) const NS_REFERENCE: &str = "urn:xmpp:reference:0";
pub(crate) const NS_SID: &str = "urn:xmpp:sid:0";
pub(crate) const NS_CORRECT: &str = "urn:xmpp:message-correct:0";
pub(crate) const NS_REACTIONS: &str = "urn:xmpp:reactions:0";
pub(crate) const NS_CHATSTATES: &str = "http://jabber.org/protocol/chatstates";
pub(crate) const NS_RETRACT: &str = "urn:xmpp:message-retract:1";
pub(crate) const NS_HINTS: &str = "urn:xmpp:hints";
pub(crate) const NS_MUC: &str = "http://jabber.org/protocol/muc";
pub(crate) const NS_MUC_USER: &str = "http://jabber.org/protocol/muc#user";
pub(crate) const NS_DELAY: &str = "urn:xmpp:delay";
pub(crate) const NS_MAM: &str = "urn:xmpp:mam:2";
pub(crate) const NS_FORWARD: &str = "urn:xmpp:forward:0";
pub(crate) const NS_RSM: &str = "http://jabber.org/protocol/rsm";
pub(crate) const NS_DATA: &str = "jabber:x:data";
pub(crate) const NS_PING: &str = "urn:xmpp:ping";
pub(crate) const NS_CONFERENCE: &str = "jabber:x:conference";
pub(crate) const NS_STANZAS: &str = "urn:ietf:params:xml:ns:xmpp-stanzas";

/// An element `name` in `ns` with `attrs` (names are this crate's own
/// constants, so always valid).
pub(crate) fn element(name: &str, ns: &str, attrs: &[(&str, &str)]) -> Element {
    let mut b = Element::builder(name, ns);
    for (k, v) in attrs {
        if let Ok(k) = NcName::try_from(*k) {
            b = b.attr(k, *v);
        }
    }
    b.build()
}

/// [`element`] holding `children`.
pub(crate) fn with_children(mut parent: Element, children: impl IntoIterator<Item = Element>) -> Element {
    for c in children {
        parent.append_child(c);
    }
    parent
}

/// [`element`] holding `text`.
pub(crate) fn with_text(mut parent: Element, text: &str) -> Element {
    parent.append_text(text);
    parent
}

/// XEP-0359: the id this client gave a message, which its echo carries.
pub(crate) fn origin_id(id: &str) -> Element {
    element("origin-id", NS_SID, &[("id", id)])
}

/// XEP-0461: a reply to message `id` (in a room: its stanza-id) by `to`.
pub(crate) fn reply(to: &str, id: &str) -> Element {
    element("reply", NS_REPLY, &[("to", to), ("id", id)])
}

/// XEP-0428: the first `chars` characters of the body are the quote a
/// client without replies shows, and one with them hides.
pub(crate) fn reply_fallback(chars: usize) -> Element {
    let end = chars.to_string();
    with_children(
        element("fallback", NS_FALLBACK, &[("for", NS_REPLY)]),
        [element("body", NS_FALLBACK, &[("start", "0"), ("end", &end)])],
    )
}

/// XEP-0308: this message replaces message `id` (its origin id).
pub(crate) fn replace(id: &str) -> Element {
    element("replace", NS_CORRECT, &[("id", id)])
}

/// XEP-0444: `emoji` on message `id`.
pub(crate) fn reactions(id: &str, emoji: &str) -> Element {
    with_children(
        element("reactions", NS_REACTIONS, &[("id", id)]),
        [with_text(element("reaction", NS_REACTIONS, &[]), emoji)],
    )
}

/// XEP-0085: a chat state (`composing`, `active`).
pub(crate) fn chat_state(state: &str) -> Element {
    element(state, NS_CHATSTATES, &[])
}

/// XEP-0334: a hint (`store`, `no-store`).
pub(crate) fn hint(name: &str) -> Element {
    element(name, NS_HINTS, &[])
}

/// XEP-0424: take back message `id`, with the fallback marker for
/// clients that cannot.
pub(crate) fn retract(id: &str) -> [Element; 2] {
    [
        element("retract", NS_RETRACT, &[("id", id)]),
        element("fallback", NS_FALLBACK, &[("for", NS_RETRACT)]),
    ]
}

/// XEP-0045: the join element, asking for `history` stanzas of the room's
/// history (0: none, when the archive is read instead).
pub(crate) fn muc_join(history: u32) -> Element {
    let n = history.to_string();
    let key = if history == 0 { "maxchars" } else { "maxstanzas" };
    with_children(
        element("x", NS_MUC, &[]),
        [element("history", NS_MUC, &[(key, &n)])],
    )
}

/// XEP-0313: a query of a room's archive, a page of `max` after `after`
/// (a stanza-id), tagged `queryid`.
pub(crate) fn mam_query(queryid: &str, after: &str, max: usize) -> Element {
    let form = with_children(
        element("x", NS_DATA, &[("type", "submit")]),
        [with_children(
            element("field", NS_DATA, &[("var", "FORM_TYPE"), ("type", "hidden")]),
            [with_text(element("value", NS_DATA, &[]), NS_MAM)],
        )],
    );
    let set = with_children(
        element("set", NS_RSM, &[]),
        [
            with_text(element("max", NS_RSM, &[]), &max.to_string()),
            with_text(element("after", NS_RSM, &[]), after),
        ],
    );
    with_children(element("query", NS_MAM, &[("queryid", queryid)]), [form, set])
}

/// XEP-0199 ping (XEP-0410 self-ping sends it to the persona's own
/// occupant JID).
pub(crate) fn ping() -> Element {
    element("ping", NS_PING, &[])
}

/// The MUC status codes of a presence's `muc#user` element.
pub(crate) fn muc_statuses(payloads: &[Element]) -> Vec<u16> {
    payloads
        .iter()
        .filter(|p| p.is("x", NS_MUC_USER))
        .flat_map(|x| x.children().filter(|c| c.is("status", NS_MUC_USER)))
        .filter_map(|s| s.attr("code").and_then(|c| c.parse().ok()))
        .collect()
}

/// The real JID a room shows for an occupant (`<item jid=…>`), if any.
pub(crate) fn muc_real_jid(payloads: &[Element]) -> Option<String> {
    payloads
        .iter()
        .filter(|p| p.is("x", NS_MUC_USER))
        .flat_map(|x| x.children().filter(|c| c.is("item", NS_MUC_USER)))
        .find_map(|i| i.attr("jid").map(str::to_owned))
}

/// The defined condition of an error stanza's `<error>` (`conflict`,
/// `forbidden`, `not-acceptable`…).
pub(crate) fn error_condition(payloads: &[Element]) -> Option<String> {
    payloads
        .iter()
        .filter(|p| p.name() == "error")
        .flat_map(|e| e.children())
        .find(|c| c.ns() == NS_STANZAS && c.name() != "text")
        .map(|c| c.name().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_names_its_message_and_the_quote_it_carries() {
        let r = reply("team@conference.example.org/Alice", "sid-1");
        assert!(r.is("reply", NS_REPLY));
        assert_eq!(r.attr("id"), Some("sid-1"));
        let f = reply_fallback(12);
        let body = f.get_child("body", NS_FALLBACK).expect("body");
        assert_eq!((body.attr("start"), body.attr("end")), (Some("0"), Some("12")));
        assert_eq!(f.attr("for"), Some(NS_REPLY));
    }

    #[test]
    fn an_archive_query_asks_for_the_page_after_an_id() {
        let q = mam_query("q1", "sid-9", 50);
        let set = q.get_child("set", NS_RSM).expect("set");
        assert_eq!(
            set.get_child("after", NS_RSM).map(Element::text),
            Some("sid-9".to_owned())
        );
        assert_eq!(
            set.get_child("max", NS_RSM).map(Element::text),
            Some("50".to_owned())
        );
    }

    #[test]
    fn status_codes_and_error_conditions_are_read() {
        let x = with_children(
            element("x", NS_MUC_USER, &[]),
            [
                element("status", NS_MUC_USER, &[("code", "110")]),
                element("status", NS_MUC_USER, &[("code", "307")]),
                element("status", NS_MUC_USER, &[("code", "x")]),
            ],
        );
        assert_eq!(muc_statuses(&[x]), [110, 307]);
        let err = with_children(
            element("error", "jabber:client", &[("type", "cancel")]),
            [element("conflict", NS_STANZAS, &[])],
        );
        assert_eq!(error_condition(&[err]), Some("conflict".to_owned()));
    }
}
