//! A message stanza a persona's connection received, turned into
//! tactful's inbound message: a room's (once, however many personas sit
//! in the room), a one-to-one chat's, an archive result, or an invite.

use std::str::FromStr;

use tactful_core::{Mentions, Message, Sender, Timestamp};
use tokio_xmpp::minidom::Element;
use tokio_xmpp::parsers::date::DateTime;
use tokio_xmpp::parsers::message::{Message as Stanza_, MessageType};

use super::*;
use crate::session::Session;
use crate::stanzas::{
    NS_CONFERENCE, NS_DELAY, NS_FALLBACK, NS_FORWARD, NS_MAM, NS_MUC_USER, NS_REFERENCE, NS_REPLY, NS_SID,
};

/// Live messages that may wait behind a room's archive being read; past
/// this the oldest waiting one is dropped (the archive has it).
const MAX_WAITING: usize = 10_000;

/// A message read from a room's archive: its id there and when it was said.
pub(crate) struct Archived {
    id: String,
    stamp: Option<Timestamp>,
}

/// When a `<delay>` (XEP-0203) says a message was sent.
fn delay_of(payloads: &[Element]) -> Option<Timestamp> {
    payloads
        .iter()
        .find(|p| p.is("delay", NS_DELAY))
        .and_then(|d| d.attr("stamp"))
        .and_then(stamp)
}

fn stamp(text: &str) -> Option<Timestamp> {
    let t = DateTime::from_str(text).ok()?;
    u64::try_from(t.0.timestamp_millis())
        .ok()
        .map(Timestamp::from_millis)
}

/// The id `by` gave the message (XEP-0359 stanza-id).
fn stanza_id_by(payloads: &[Element], by: &BareJid) -> Option<String> {
    payloads
        .iter()
        .filter(|p| p.is("stanza-id", NS_SID))
        .find(|p| p.attr("by").and_then(|b| BareJid::new(b).ok()).as_ref() == Some(by))
        .and_then(|p| p.attr("id").map(str::to_owned))
}

fn origin_of(payloads: &[Element]) -> Option<String> {
    payloads
        .iter()
        .find(|p| p.is("origin-id", NS_SID))
        .and_then(|p| p.attr("id").map(str::to_owned))
}

/// The body without the quote a reply carries for clients without
/// replies (XEP-0428's range, in characters).
fn body_of(m: &Stanza_) -> Option<String> {
    let body = m.get_best_body_cloned(vec![])?.1;
    let range = m
        .payloads
        .iter()
        .filter(|p| p.is("fallback", NS_FALLBACK) && p.attr("for") == Some(NS_REPLY))
        .find_map(|f| f.get_child("body", NS_FALLBACK))
        .and_then(|b| {
            Some((
                b.attr("start")?.parse::<usize>().ok()?,
                b.attr("end")?.parse::<usize>().ok()?,
            ))
        });
    let text = match range {
        Some((start, end)) if start <= end => body
            .chars()
            .enumerate()
            .filter(|(i, _)| *i < start || *i >= end)
            .map(|(_, c)| c)
            .collect(),
        _ => body,
    };
    let text = text.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// The mention references' URIs (XEP-0372), without `xmpp:`.
fn mentioned(payloads: &[Element]) -> Vec<String> {
    payloads
        .iter()
        .filter(|p| p.is("reference", NS_REFERENCE) && p.attr("type") == Some("mention"))
        .filter_map(|p| p.attr("uri"))
        .filter_map(|u| u.strip_prefix("xmpp:"))
        .map(|u| u.split('?').next().unwrap_or(u).to_owned())
        .collect()
}

fn reply_of(payloads: &[Element]) -> Option<MsgId> {
    payloads
        .iter()
        .find(|p| p.is("reply", NS_REPLY))
        .and_then(|p| p.attr("id"))
        .map(MsgId::new)
}

/// Whether `id` has the form of the ids tactful gives what it sends.
fn looks_sent_by_tactful(id: &str) -> bool {
    id.strip_prefix("tf")
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(a, b)| {
            !a.is_empty() && a.bytes().all(|c| c.is_ascii_digit()) && b.bytes().all(|c| c.is_ascii_digit())
        })
}

impl Session<'_> {
    /// A message stanza; `archived` when it came out of a room's archive.
    pub(crate) async fn message(&mut self, m: Stanza_, archived: Option<Archived>) {
        let Some(from) = m.from.clone() else {
            return;
        };
        let bare = from.to_bare();
        if archived.is_none()
            && let Some(result) = m.payloads.iter().find(|p| p.is("result", NS_MAM))
        {
            // Only rooms' archives are asked for.
            if !self.rooms.contains_key(&bare) {
                return;
            }
            let Some((inner, found)) = unwrap_result(result) else {
                tracing::warn!(persona = %self.persona.id, room = %bare, "XMPP: skipped an archive result that does not parse");
                return;
            };
            if inner.from.as_ref().is_some_and(|f| f.to_bare() == bare)
                && inner.type_ == MessageType::Groupchat
            {
                self.room_message(&bare, inner, Some(found));
            }
            return;
        }
        if m.type_ == MessageType::Error {
            tracing::debug!(persona = %self.persona.id, %from, "XMPP: an error came back for a message");
            return;
        }
        if let Some((room, by)) = invite_of(&m, &bare) {
            self.invited(room, by).await;
            return;
        }
        if self.rooms.contains_key(&bare) {
            if m.type_ != MessageType::Groupchat {
                return; // A private message through the room: not taken.
            }
            // The echo of a post of this persona's settles its send at
            // once, even while the room's archive is being read.
            if let Some(origin) = origin_of(&m.payloads)
                && let Some(done) = self.echoes.remove(&origin)
            {
                let _ = done.send(Ok(stanza_id_by(&m.payloads, &bare)));
                return;
            }
            let Some(state) = self.rooms.get_mut(&bare) else {
                return;
            };
            if let Some(waiting) = state.waiting.as_mut() {
                if waiting.len() >= MAX_WAITING {
                    waiting.remove(0);
                }
                waiting.push(m);
                return;
            }
            self.room_message(&bare, m, None);
            return;
        }
        if matches!(m.type_, MessageType::Chat | MessageType::Normal) {
            self.direct_message(&bare, &m);
        }
    }

    /// A room's message, live or from its archive or history.
    fn room_message(&mut self, room: &BareJid, m: Stanza_, archived: Option<Archived>) {
        let shared = self.shared;
        let Some(nick) = m.from.as_ref().and_then(|f| f.resource()).map(|r| r.to_string()) else {
            return; // The room's own notices.
        };
        let origin = origin_of(&m.payloads);
        let stanza_id = archived
            .as_ref()
            .map(|a| a.id.clone())
            .or_else(|| stanza_id_by(&m.payloads, room));
        // The echo of what this persona sent: its send learns the id the
        // room gave it.
        if let Some(o) = &origin
            && let Some(done) = self.echoes.remove(o)
        {
            let _ = done.send(Ok(stanza_id));
            return;
        }
        let Some(body) = body_of(&m) else {
            return; // Chat states, reactions, a subject: not conversation.
        };
        if m.payloads
            .iter()
            .any(|p| p.is("replace", crate::stanzas::NS_CORRECT))
        {
            return; // A correction: the message it corrects was heard already.
        }
        let personas = &shared.settings.personas;
        let held: Vec<(PersonaId, String)> = personas
            .iter()
            .filter_map(|p| shared.nick_in(room, &p.id).map(|n| (p.id.clone(), n)))
            .collect();
        // A persona's message (the engine heard it when it was sent): an id
        // of the form tactful gives what it sends, under a persona's nick
        // (held now, or its own or a fallback, for the history). Never by
        // the nick alone: someone else on a persona's nick, or the
        // persona's account used by hand, is a person.
        let by_persona = held.iter().any(|(_, n)| *n == nick)
            || personas.iter().any(|p| nick.trim_end_matches('_') == p.nick);
        if by_persona && origin.as_deref().is_some_and(looks_sent_by_tactful) {
            return;
        }
        let id = stanza_id
            .or_else(|| m.id.as_ref().map(|i| i.0.clone()))
            .unwrap_or_else(|| shared.new_id());
        if !shared
            .seen
            .lock()
            .is_ok_and(|mut s| s.first(format!("{room}/{id}")))
        {
            return;
        }
        let state = self.rooms.get(room);
        let real = state.and_then(|s| s.occupants.get(&nick).cloned().flatten());
        // Addressed by nick: the one a persona holds, and its own while it
        // is on a fallback and nobody else holds it.
        let mut names: Vec<(&str, &PersonaId)> = held.iter().map(|(p, n)| (n.as_str(), p)).collect();
        for p in personas {
            let someone_else = state.is_some_and(|s| s.occupants.contains_key(&p.nick));
            if !someone_else && !names.iter().any(|(n, _)| *n == p.nick) {
                names.push((p.nick.as_str(), &p.id));
            }
        }
        let mut mentions: Vec<UserId> = Vec::new();
        let mut mention = |p: &PersonaId| {
            if !mentions.iter().any(|m| m.as_str() == p.as_str()) {
                mentions.push(UserId::new(p.as_str()));
            }
        };
        let nick_list: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
        if let Some(n) = text::addressed(&body, &nick_list)
            && let Some((_, p)) = names.iter().find(|(x, _)| *x == n)
        {
            mention(p);
        }
        for uri in mentioned(&m.payloads) {
            let by_jid = personas.iter().find(|p| p.jid.as_str() == uri);
            let by_nick = uri
                .split_once('/')
                .filter(|(r, _)| BareJid::new(r).ok().as_ref() == Some(room))
                .and_then(|(_, n)| names.iter().find(|(x, _)| *x == n).map(|(_, p)| *p));
            if let Some(p) = by_jid.map(|p| &p.id).or(by_nick) {
                mention(p);
            }
        }
        let when = archived
            .as_ref()
            .and_then(|a| a.stamp)
            .or_else(|| delay_of(&m.payloads));
        let answer = match (&archived, when) {
            (None, None) => true,
            (Some(_), Some(t)) => wall_clock().saturating_since(t) <= shared.settings.answer_missed,
            _ => false,
        };
        let msg = Message {
            id: MsgId::new(id.clone()),
            room: rooms::muc_room(room),
            thread: None,
            sender: Sender {
                id: rooms::person_in_room(room, &nick, real.as_ref()),
                name: Arc::from(nick.as_str()),
                is_bot: false,
                handle: None,
            },
            text: Arc::from(body.as_str()),
            mentions: Mentions::Explicit(mentions),
            reply_to: reply_of(&m.payloads),
            is_dm: false,
            dm_to: None,
            time: when.unwrap_or_else(wall_clock),
        };
        if let Ok(mut texts) = shared.texts.lock() {
            texts.insert(id.clone(), (format!("{room}/{nick}"), body));
        }
        if let Some(handle) = shared.roster.runtime() {
            if answer {
                handle.inbound(msg);
            } else {
                handle.backlog(msg);
            }
            handle.save_state(state_key(room), id.clone());
        }
        if let Ok(mut last) = shared.last.lock() {
            last.insert(room.clone(), id);
        }
    }

    /// A one-to-one message to this persona.
    fn direct_message(&mut self, from: &BareJid, m: &Stanza_) {
        let shared = self.shared;
        let persona = self.persona;
        if shared.settings.personas.iter().any(|p| &p.jid == from) {
            return; // Personas do not talk to each other one to one.
        }
        let Some(body) = body_of(m) else {
            return;
        };
        if m.payloads
            .iter()
            .any(|p| p.is("replace", crate::stanzas::NS_CORRECT))
        {
            return;
        }
        let id = stanza_id_by(&m.payloads, &persona.jid)
            .or_else(|| m.id.as_ref().map(|i| i.0.clone()))
            .unwrap_or_else(|| shared.new_id());
        let room = rooms::direct_room(&persona.id, from);
        if !shared
            .seen
            .lock()
            .is_ok_and(|mut s| s.first(format!("{room}/{id}")))
        {
            return;
        }
        // Kept for us while the persona was offline: answered if recent.
        let when = delay_of(&m.payloads);
        let answer = when.is_none_or(|t| wall_clock().saturating_since(t) <= shared.settings.answer_missed);
        let name = from.node().map_or_else(|| from.to_string(), |n| n.to_string());
        let msg = Message {
            id: MsgId::new(id.clone()),
            room,
            thread: None,
            sender: Sender {
                id: UserId::new(from.as_str()),
                name: Arc::from(name.as_str()),
                is_bot: false,
                handle: None,
            },
            text: Arc::from(body.as_str()),
            mentions: Mentions::Explicit(Vec::new()),
            reply_to: reply_of(&m.payloads),
            is_dm: true,
            dm_to: Some(persona.id.clone()),
            time: when.unwrap_or_else(wall_clock),
        };
        if let Ok(mut texts) = shared.texts.lock() {
            texts.insert(id, (from.to_string(), body));
        }
        if let Some(handle) = shared.roster.runtime() {
            if answer {
                handle.inbound(msg);
            } else {
                handle.backlog(msg);
            }
        }
    }

    /// An invitation into `room` by `by`: joined when `invites_from`
    /// names them (a bare JID, or a whole domain).
    async fn invited(&mut self, room: BareJid, by: BareJid) {
        let allowed = self.shared.settings.invites_from.iter().any(|a| {
            let a = a.trim_start_matches('@');
            a == by.as_str() || (!a.contains('@') && a == by.domain().as_str())
        });
        if !allowed {
            tracing::info!(persona = %self.persona.id, %room, inviter = %by, "XMPP: ignored an invite from someone not in platforms.xmpp.invites_from");
            return;
        }
        if self.rooms.contains_key(&room) {
            return;
        }
        tracing::info!(persona = %self.persona.id, %room, inviter = %by, "XMPP: invited; joining the room");
        self.rooms.insert(room.clone(), Default::default());
        let nick = self.persona.nick.clone();
        self.join(&room, &nick).await;
    }
}

/// An archive result's message and where it stands in the archive.
fn unwrap_result(result: &Element) -> Option<(Stanza_, Archived)> {
    let id = result.attr("id")?.to_owned();
    let forwarded = result.get_child("forwarded", NS_FORWARD)?;
    let stamp = delay_of(&forwarded.children().cloned().collect::<Vec<_>>());
    let inner = forwarded.children().find(|c| c.name() == "message")?;
    let message = Stanza_::try_from(inner.clone()).ok()?;
    Some((message, Archived { id, stamp }))
}

/// A mediated invite (XEP-0045, from the room) or a direct one
/// (XEP-0249, from the person): the room and who invites.
fn invite_of(m: &Stanza_, from: &BareJid) -> Option<(BareJid, BareJid)> {
    for p in &m.payloads {
        if p.is("x", NS_MUC_USER)
            && let Some(invite) = p.get_child("invite", NS_MUC_USER)
        {
            let by = invite
                .attr("from")
                .and_then(|f| BareJid::new(f.split('/').next()?).ok())?;
            return Some((from.clone(), by));
        }
        if p.is("x", NS_CONFERENCE) {
            let room = p.attr("jid").and_then(|j| BareJid::new(j).ok())?;
            return Some((room, from.clone()));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_tactfuls_form_are_told_from_others() {
        assert!(looks_sent_by_tactful("tf1764000000000-12"));
        assert!(!looks_sent_by_tactful("tf-12"));
        assert!(!looks_sent_by_tactful("abc"));
        assert!(!looks_sent_by_tactful("tf12-x"));
    }
}
