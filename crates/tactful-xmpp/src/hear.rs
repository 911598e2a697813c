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

/// The most rooms invitations may add to the configured ones.
const MAX_INVITED_ROOMS: usize = 100;

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

/// Whether `id` has the form of the ids tactful gives what it sends
/// (`tf<epoch>-<n>-<random hex>`).
fn looks_sent_by_tactful(id: &str) -> bool {
    let mut parts = id.strip_prefix("tf").unwrap_or("").split('-');
    let digits = |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()));
    digits(parts.next())
        && digits(parts.next())
        && parts
            .next()
            .is_some_and(|p| !p.is_empty() && p.bytes().all(|c| c.is_ascii_hexdigit()))
        && parts.next().is_none()
}

/// The real JID a message carries for its author (a room that shows
/// them puts it in the archive's copy), if any.
fn real_jid_in(m: &Stanza_) -> Option<BareJid> {
    crate::stanzas::muc_real_jid(&m.payloads)
        .and_then(|j| BareJid::new(j.split('/').next().unwrap_or("")).ok())
}

/// A key for a room message that has no id at all (a room without
/// stanza-ids, a client without ids), the same for every persona that
/// hears it: who, when and what.
fn key_without_id(nick: &str, m: &Stanza_) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    nick.hash(&mut h);
    m.bodies.hash(&mut h);
    delay_of(&m.payloads).map(Timestamp::as_millis).hash(&mut h);
    format!("h{:016x}", h.finish())
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
            // Only from a room's archive this persona is reading (the room
            // itself, and the query's own id): an occupant can put a
            // `<result>` in a message, and must not pass for someone else.
            let reading = self
                .rooms
                .get(&bare)
                .and_then(|r| r.catching.as_ref())
                .is_some_and(|(_, q)| result.attr("queryid") == Some(q.as_str()));
            if from.resource().is_some() || !reading {
                tracing::debug!(persona = %self.persona.id, %from, "XMPP: skipped an archive result nobody asked for");
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
            // A post of this persona's bounced (sent while out of the
            // room, say): its send fails instead of waiting for an echo.
            let sent = origin_of(&m.payloads).or_else(|| m.id.as_ref().map(|i| i.0.clone()));
            if let Some(done) = sent.and_then(|id| self.echoes.remove(&id)) {
                let why =
                    crate::stanzas::error_condition(&m.payloads).unwrap_or_else(|| "an error".to_owned());
                let _ = done.send(Err(format!("{from} refused the message: {why}")));
            } else {
                tracing::debug!(persona = %self.persona.id, %from, "XMPP: an error came back for a message");
            }
            return;
        }
        if let Some((room, by)) = invite_of(&m, &bare, &self.shared.settings.rooms) {
            self.invited(room, by).await;
            return;
        }
        if self.rooms.contains_key(&bare) {
            if m.type_ != MessageType::Groupchat {
                return; // A private message through the room: not taken.
            }
            // The echo of a post of this persona's settles its send at
            // once, even while the room's archive is being read.
            if self.settles_echo(&bare, &m) {
                return;
            }
            if let Some(m) = self.wait_behind_archive(&bare, m) {
                self.room_message(&bare, m, None);
            }
            return;
        }
        // A person writes one to one (a server's own notices, from a JID
        // without a name, are not conversation).
        if matches!(m.type_, MessageType::Chat | MessageType::Normal) && bare.node().is_some() {
            self.direct_message(&bare, &m);
        }
    }

    /// Whether `m` is the room's echo of a post of this persona's (its
    /// origin-id, under the nick the persona has there): the post's send
    /// then learns the id the room gave it.
    fn settles_echo(&mut self, room: &BareJid, m: &Stanza_) -> bool {
        let nick = m.from.as_ref().and_then(|f| f.resource()).map(|r| r.to_string());
        let ours = self
            .rooms
            .get(room)
            .is_some_and(|r| nick.as_deref() == Some(r.nick.as_str()));
        let Some(origin) = origin_of(&m.payloads) else {
            return false;
        };
        if !ours || !self.echoes.contains_key(&origin) {
            return false;
        }
        if let Some(done) = self.echoes.remove(&origin) {
            let _ = done.send(Ok(stanza_id_by(&m.payloads, room)));
        }
        true
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
        if archived.is_none() && self.settles_echo(room, &m) {
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
            .unwrap_or_else(|| key_without_id(&nick, &m));
        // The room's history, sent as this persona joins: when another
        // persona joined first, what it holds was heard by that persona
        // (live, answerable, or as its own history). Taken here first, a
        // question asked while this persona was still joining would be
        // heard once as context and never answered.
        if archived.is_none()
            && delay_of(&m.payloads).is_some()
            && shared.joined_before(room, &self.persona.id)
        {
            return;
        }
        if !shared
            .seen
            .lock()
            .is_ok_and(|mut s| s.first(format!("{room}/{id}")))
        {
            return;
        }
        let state = self.rooms.get(room);
        // Who wrote it: the real JID the room shows now, for what is said
        // now; for the history or the archive, only what the message itself
        // carries (whoever has that nick today may not be its author).
        let live = archived.is_none() && delay_of(&m.payloads).is_none();
        let real = if live {
            state.and_then(|s| s.occupants.get(&nick).cloned().flatten())
        } else {
            real_jid_in(&m)
        };
        // Addressed by nick: the one a persona holds, and its own while it
        // is on a fallback and nobody else holds it.
        let mut names: Vec<(&str, &PersonaId)> = held.iter().map(|(p, n)| (n.as_str(), p)).collect();
        for p in personas {
            // The nick is someone else's while an occupant holds it that
            // the room does not show to be the persona's own account.
            let someone_else = state
                .and_then(|s| s.occupants.get(&p.nick))
                .is_some_and(|real| real.as_ref() != Some(&p.jid));
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
        // The message's own id: the one the person's client knows, which a
        // reply or a reaction to it must name in a one-to-one chat.
        let id =
            m.id.as_ref()
                .map(|i| i.0.clone())
                .or_else(|| origin_of(&m.payloads))
                .or_else(|| stanza_id_by(&m.payloads, &persona.jid))
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
        if self.rooms.len() >= self.shared.settings.rooms.len() + MAX_INVITED_ROOMS {
            tracing::warn!(persona = %self.persona.id, %room, inviter = %by, "XMPP: ignored an invite: already in {MAX_INVITED_ROOMS} rooms it was invited to");
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
fn invite_of(m: &Stanza_, from: &BareJid, services: &[BareJid]) -> Option<(BareJid, BareJid)> {
    let from_room = m.from.as_ref().is_some_and(|f| f.resource().is_none())
        && from.node().is_some()
        && services.iter().any(|r| r.domain() == from.domain());
    for p in &m.payloads {
        // A mediated invitation names its inviter itself: believed only
        // from a room (no resource) of a service the configured rooms are
        // on, which checked who invited.
        if p.is("x", NS_MUC_USER)
            && let Some(invite) = p.get_child("invite", NS_MUC_USER)
        {
            if !from_room {
                return None;
            }
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
        assert!(looks_sent_by_tactful("tf1764000000000-12-9f3ab0c2d4e5f607"));
        assert!(!looks_sent_by_tactful("tf1764000000000-12"));
        assert!(!looks_sent_by_tactful("tf-12-ab"));
        assert!(!looks_sent_by_tactful("abc"));
        assert!(!looks_sent_by_tactful("tf12-3-xyz"));
        assert!(!looks_sent_by_tactful("tf12-3-ab-cd"));
    }
}
