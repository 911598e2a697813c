//! A persona in its rooms: joining (with the history at the first join
//! only), keeping its nick (a taken one is `Nick_` until its own is free),
//! noticing a kick, a ban or a room that forgot it (XEP-0410 self-ping),
//! and leaving politely.

use super::*;

use tokio_xmpp::jid::Jid;
use tokio_xmpp::parsers::presence::{Presence, Type as PresenceType};

use crate::session::{HISTORY, Pending, Session};
use crate::stanzas;

impl Session<'_> {
    /// Joins every room under the persona's own nick.
    pub(crate) async fn join_all(&mut self) {
        let rooms: Vec<BareJid> = self.rooms.keys().cloned().collect();
        let nick = self.persona.nick.clone();
        for room in rooms {
            self.join(&room, &nick).await;
        }
    }

    /// Joins `room` as `nick`: the room's history at the first join ever
    /// (backlog), else none and the archive from the last id handed in.
    pub(crate) async fn join(&mut self, room: &BareJid, nick: &str) {
        let Some(state) = self.rooms.get_mut(room) else {
            return;
        };
        if state.banned {
            return;
        }
        let Ok(to) = room.with_resource_str(nick) else {
            tracing::warn!(persona = %self.persona.id, %room, "XMPP: {nick:?} cannot be a nick in {room}");
            return;
        };
        state.nick = nick.to_owned();
        state.joining_at = Some(tokio::time::Instant::now());
        let known = self.shared.last.lock().is_ok_and(|l| l.contains_key(room));
        let history = if known || self.careful() { 0 } else { HISTORY };
        let presence = Presence::available()
            .with_to(to)
            .with_payloads(vec![stanzas::muc_join(history)]);
        self.send(presence).await;
    }

    pub(crate) async fn leave_rooms(&mut self) {
        let rooms: Vec<(BareJid, String)> = self
            .rooms
            .iter()
            .filter(|(_, r)| r.joined)
            .map(|(j, r)| (j.clone(), r.nick.clone()))
            .collect();
        for (room, nick) in rooms {
            if let Ok(to) = room.with_resource_str(&nick) {
                let mut p = Presence::unavailable().with_to(to);
                p.set_status("en", "tactful is stopping; back soon");
                self.send(p).await;
            }
        }
    }

    /// Every self-ping period: is the persona still in each room? And a
    /// room it is not in (a join refused, or not answered) is asked again.
    pub(crate) async fn self_ping(&mut self) {
        if !self.online {
            return;
        }
        let now = tokio::time::Instant::now();
        let refused: Vec<BareJid> = self
            .rooms
            .iter()
            .filter(|(_, r)| {
                !r.joined
                    && !r.banned
                    && r.joining_at
                        .is_none_or(|at| now.duration_since(at) >= self.shared.settings.self_ping)
            })
            .map(|(j, _)| j.clone())
            .collect();
        for room in refused {
            let own = self.persona.nick.clone();
            self.join(&room, &own).await;
        }
        let joined: Vec<(BareJid, String)> = self
            .rooms
            .iter()
            .filter(|(_, r)| r.joined)
            .map(|(j, r)| (j.clone(), r.nick.clone()))
            .collect();
        for (room, nick) in joined {
            let Ok(to) = room.with_resource_str(&nick) else {
                continue;
            };
            self.send_iq(Jid::from(to), false, stanzas::ping(), Pending::Ping(room))
                .await;
        }
    }

    /// Every nick-retry period: on a fallback nick, ask for its own.
    pub(crate) async fn reclaim_nicks(&mut self) {
        let own = self.persona.nick.clone();
        let rooms: Vec<BareJid> = self
            .rooms
            .iter()
            .filter(|(_, r)| {
                r.joined && r.nick != own && r.asking.is_none() && !r.occupants.contains_key(&own)
            })
            .map(|(j, _)| j.clone())
            .collect();
        for room in rooms {
            self.ask_nick(&room).await;
        }
    }

    pub(crate) async fn ask_nick(&mut self, room: &BareJid) {
        let own = self.persona.nick.clone();
        let Ok(to) = room.with_resource_str(&own) else {
            return;
        };
        if let Some(r) = self.rooms.get_mut(room) {
            r.asking = Some(own);
        }
        self.send(Presence::available().with_to(to)).await;
    }

    pub(crate) async fn presence(&mut self, p: Presence) {
        let Some(from) = p.from.clone() else {
            return;
        };
        let room = from.to_bare();
        // Someone asks to see the persona's presence (from their bare
        // JID): let them, so their client offers a one-to-one chat.
        if p.type_ == PresenceType::Subscribe && !self.rooms.contains_key(&room) {
            self.send(Presence::subscribed().with_to(Jid::from(room))).await;
            return;
        }
        let Some(nick) = from.resource().map(|r| r.to_string()) else {
            return;
        };
        if !self.rooms.contains_key(&room) {
            return;
        }
        let statuses = stanzas::muc_statuses(&p.payloads);
        let persona = self.persona;
        if p.type_ == PresenceType::Error {
            let condition = stanzas::error_condition(&p.payloads).unwrap_or_default();
            self.join_refused(&room, &nick, &condition).await;
            return;
        }
        let own = statuses.contains(&110);
        let Some(state) = self.rooms.get_mut(&room) else {
            return;
        };
        if !own {
            if p.type_ == PresenceType::Unavailable {
                state.occupants.remove(&nick);
                // Whoever held the persona's own nick left: take it.
                if nick == persona.nick
                    && state.joined
                    && state.nick != persona.nick
                    && state.asking.is_none()
                {
                    self.ask_nick(&room).await;
                }
            } else {
                let real = stanzas::muc_real_jid(&p.payloads)
                    .and_then(|j| BareJid::new(j.split('/').next().unwrap_or("")).ok());
                state.occupants.insert(nick, real);
            }
            return;
        }
        if p.type_ == PresenceType::Unavailable {
            if statuses.contains(&303) {
                return; // A nick change: the presence under the new nick follows.
            }
            state.joined = false;
            state.asking = None;
            state.occupants.clear();
            self.shared.set_nick(&room, &persona.id, None);
            if statuses.contains(&301) {
                state.banned = true;
                tracing::warn!(persona = %persona.id, %room, "XMPP: banned from the room; it stays out (an admin can lift the ban and restart tactful)");
                return;
            }
            if statuses.contains(&307) {
                tracing::warn!(persona = %persona.id, %room, "XMPP: kicked from the room; joining again");
            } else {
                tracing::warn!(persona = %persona.id, %room, ?statuses, "XMPP: out of the room; joining again");
            }
            let own = persona.nick.clone();
            self.join(&room, &own).await;
            return;
        }
        let first = !state.joined;
        let previous = std::mem::take(&mut state.nick);
        state.joined = true;
        state.joining_at = None;
        state.asking = None;
        state.nick.clone_from(&nick);
        self.shared.set_nick(&room, &persona.id, Some(&nick));
        // Posts waiting for the persona to be in the room may go.
        self.shared.connected.notify_waiters();
        if !first && nick == previous {
            return; // Its presence again (a join repeated): nothing changed.
        }
        if nick == persona.nick {
            tracing::info!(persona = %persona.id, %room, %nick, "joined the XMPP room");
        } else {
            tracing::warn!(persona = %persona.id, %room, %nick, "in the XMPP room as {nick}: {} was taken; it takes it back once it is free", persona.nick);
        }
        if first {
            self.catch_up(&room).await;
        }
    }

    /// The room refused a join or a nick change as `nick`.
    pub(crate) async fn join_refused(&mut self, room: &BareJid, nick: &str, condition: &str) {
        let persona = self.persona;
        let Some(state) = self.rooms.get_mut(room) else {
            return;
        };
        if state.asking.as_deref() == Some(nick) {
            // Asking for its own nick back: still taken. Stay as it is.
            state.asking = None;
            return;
        }
        if state.joined || state.nick != nick {
            return;
        }
        match condition {
            "conflict" if nick.len() < persona.nick.len() + 3 => {
                let next = format!("{nick}_");
                self.join(room, &next).await;
            }
            "forbidden" => {
                state.banned = true;
                tracing::warn!(persona = %persona.id, %room, "XMPP: the room refuses the persona (banned); it stays out");
            }
            other => {
                tracing::warn!(persona = %persona.id, %room, %nick, "XMPP: could not join the room: {other}; it tries again at the next self-ping");
                state.nick.clear();
            }
        }
    }
}
