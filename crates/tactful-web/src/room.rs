//! One room of the web room: its history, its members, and the order in
//! which changes are shown.
//!
//! A message is shown only once it is stored, but it takes its place when
//! it is made: each change waits in the room's queue until it and every
//! change before it are ready, then all of them are published in order.
//! So a reply stored a moment before the question it answers still appears
//! after it, and a message the store refused is never shown at all.
//!
//! A message's notes (why each persona answered it or not) reach people
//! as `why` events, each after its message's `message` event: a note made
//! while the message still waits is kept on it and published right after
//! it, never before it (a page has nothing to put it on then) and never
//! only inside it (a client that follows `why` events would miss it).

use std::collections::{HashMap, VecDeque};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::broadcast;

/// A member of a room as the page shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    /// Account id (for mentions).
    pub id: String,
    /// Display name.
    pub name: String,
    /// Bot badge.
    pub bot: bool,
}

/// A message as the page shows it.
#[derive(Clone, Debug, Serialize)]
pub struct WebMsg {
    /// Its id (`w<n>`).
    pub id: String,
    /// Who wrote it.
    pub sender: Member,
    /// The text.
    pub text: String,
    /// The text as the page shows it: Markdown, sanitised.
    pub html: String,
    /// What it replies to.
    pub reply_to: Option<String>,
    /// The replied-to message, quoted: who and what.
    pub quote: Option<Value>,
    /// When, RFC 3339.
    pub time: String,
    /// Why each persona answered it or not, when the room shows that.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<crate::why::Why>,
    /// Reactions on it, in the order they came.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reactions: Vec<Reaction>,
}

/// One reaction on a message: an emoji and who put it there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Reaction {
    /// The emoji.
    pub emoji: String,
    /// The names of those who reacted with it.
    pub by: Vec<String>,
}

/// The most distinct reactions one message keeps: nothing grows without
/// bound.
pub const MAX_REACTIONS: usize = 20;

/// How many ids of messages another process deleted a room remembers (see
/// [`Room::deleted_elsewhere`]).
const DELETED_ELSEWHERE: usize = 64;

/// What became of a note set on a message ([`Room::note_why`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Noted {
    /// On a message people were shown: its `why` event is to be sent now.
    Shown,
    /// On a message still waiting its turn: its `why` event follows the
    /// message's when the message is shown.
    Waiting,
    /// Not set: the message says the persona answered it, and this note
    /// only says a batch's reply to another message read it.
    Kept,
    /// The room has no such message (yet).
    Unknown,
}

impl WebMsg {
    /// A plain message by `sender`, its text its id, for tests.
    #[cfg(test)]
    pub(crate) fn plain(id: &str, sender: Member) -> WebMsg {
        WebMsg {
            id: id.to_owned(),
            sender,
            text: id.to_owned(),
            html: String::new(),
            reply_to: None,
            quote: None,
            time: String::new(),
            why: Vec::new(),
            reactions: Vec::new(),
        }
    }

    /// Adds `name`'s `emoji`; false when it was there already or the
    /// message has [`MAX_REACTIONS`] kinds.
    fn react(&mut self, emoji: &str, name: &str) -> bool {
        let kinds = self.reactions.len();
        match self.reactions.iter_mut().find(|r| r.emoji == emoji) {
            Some(r) if r.by.iter().any(|b| b == name) => false,
            Some(r) => {
                r.by.push(name.to_owned());
                true
            }
            None if kinds >= MAX_REACTIONS => false,
            None => {
                self.reactions.push(Reaction {
                    emoji: emoji.to_owned(),
                    by: vec![name.to_owned()],
                });
                true
            }
        }
    }
}

/// A change waiting for its turn to be shown.
enum Change {
    New(Box<WebMsg>),
    Edit { id: String, text: String },
    Delete { id: String },
    React { id: String, emoji: String, by: String },
}

struct Queued {
    /// Which queued change this is, to mark it ready.
    ticket: u64,
    ready: bool,
    /// Refused by the store: skipped, never shown.
    dropped: bool,
    change: Change,
}

/// A published event, by room: what the sessions of its members forward.
pub type Event = (String, Value);

/// One room's state.
#[derive(Default)]
pub struct Room {
    history: VecDeque<WebMsg>,
    /// People present, with how many of their connections are.
    people: Vec<(Member, usize)>,
    queue: VecDeque<Queued>,
    next_ticket: u64,
    /// Idempotency keys of reply parts shown or waiting, to their ids.
    keys: HashMap<String, String>,
    /// Ids in the history or waiting, with their keys.
    key_of: HashMap<String, String>,
    /// Persona messages another process deleted here, newest last: an
    /// edit of one of them comes from a process that lost the room.
    deleted_elsewhere: VecDeque<String>,
}

impl Room {
    /// The message with this id, shown or waiting.
    pub fn knows(&self, id: &str) -> bool {
        self.history.iter().any(|m| m.id == id)
            || self
                .queue
                .iter()
                .any(|q| matches!(&q.change, Change::New(m) if m.id == id))
    }

    /// Sets one persona's line on a message, shown or waiting; says which,
    /// so the caller sends its `why` event now (shown) or leaves it to
    /// [`Room::flush`] (waiting). [`Noted::Unknown`] when the room does
    /// not have it (not here yet, or a persona's reply under its engine
    /// id).
    pub fn note_why(&mut self, id: &str, why: crate::why::Why) -> Noted {
        let (m, noted) = match self.history.iter_mut().find(|m| m.id == id) {
            Some(m) => (m, Noted::Shown),
            None => {
                let waiting = self
                    .queue
                    .iter_mut()
                    .filter_map(|q| match &mut q.change {
                        Change::New(m) => Some(&mut **m),
                        _ => None,
                    })
                    .find(|m| m.id == id);
                match waiting {
                    Some(m) => (m, Noted::Waiting),
                    None => return Noted::Unknown,
                }
            }
        };
        match m.why.iter_mut().find(|w| w.persona == why.persona) {
            // Answered stays answered when another reply of the same batch
            // turn goes to another message.
            Some(w) if w.state == "answered" && why.state == crate::why::READ => return Noted::Kept,
            Some(w) => *w = why,
            None => m.why.push(why),
        }
        noted
    }

    /// Another process deleted the message `id` here: the room's owner
    /// did, so a process editing it is one that lost the room (see
    /// [`Room::was_deleted_elsewhere`]).
    pub fn deleted_elsewhere(&mut self, id: &str) {
        if self.deleted_elsewhere.len() >= DELETED_ELSEWHERE {
            self.deleted_elsewhere.pop_front();
        }
        self.deleted_elsewhere.push_back(id.to_owned());
    }

    /// Whether another process deleted the message `id` here (of the last
    /// few it did).
    pub fn was_deleted_elsewhere(&self, id: &str) -> bool {
        self.deleted_elsewhere.iter().any(|d| d == id)
    }

    /// The id of the part sent before with `key`, if any.
    pub fn by_key(&self, key: &str) -> Option<&str> {
        self.keys.get(key).map(String::as_str)
    }

    /// The quote a reply to `reply_to` shows: the message may still be
    /// waiting to be shown (a reply can be ready before the question's
    /// store acknowledgement has been processed).
    pub fn quote(&self, reply_to: Option<&str>) -> Option<Value> {
        let r = reply_to?;
        let queued = self.queue.iter().filter_map(|q| match &q.change {
            Change::New(m) => Some(&**m),
            _ => None,
        });
        self.history.iter().chain(queued).find(|m| m.id == r).map(|m| {
            let text = clip(&m.text, 200);
            // Shown as the message is (Markdown rendered, sanitised),
            // not as raw backticks and asterisks.
            let html = crate::render::html(&text);
            json!({ "sender_name": m.sender.name, "text": text, "html": html })
        })
    }

    /// Puts a new message in line; returns its ticket.
    pub fn queue_new(&mut self, msg: WebMsg, key: Option<String>, ready: bool) -> u64 {
        if let Some(k) = key {
            self.keys.insert(k.clone(), msg.id.clone());
            self.key_of.insert(msg.id.clone(), k);
        }
        self.queue(Change::New(Box::new(msg)), ready)
    }

    /// Puts an edit in line, ready.
    pub fn queue_edit(&mut self, id: String, text: String) {
        self.queue(Change::Edit { id, text }, true);
    }

    /// Puts a reaction in line, ready.
    pub fn queue_react(&mut self, id: String, emoji: String, by: String) {
        self.queue(Change::React { id, emoji, by }, true);
    }

    /// Puts a deletion in line, ready.
    pub fn queue_delete(&mut self, id: String) {
        self.queue(Change::Delete { id }, true);
    }

    fn queue(&mut self, change: Change, ready: bool) -> u64 {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.queue.push_back(Queued {
            ticket,
            ready,
            dropped: false,
            change,
        });
        ticket
    }

    /// Marks a queued change stored (`ok`) or refused.
    pub fn settle(&mut self, ticket: u64, ok: bool) {
        if let Some(q) = self.queue.iter_mut().find(|q| q.ticket == ticket) {
            q.ready = true;
            q.dropped = !ok;
            if !ok && let Change::New(m) = &q.change {
                let id = m.id.clone();
                self.forget_key(&id);
            }
        }
    }

    fn forget_key(&mut self, id: &str) {
        if let Some(k) = self.key_of.remove(id) {
            self.keys.remove(&k);
        }
    }

    /// Shows every change at the head of the line that is ready, in order:
    /// applies it to the history (keeping the newest `limit`) and
    /// publishes it on `events` as `room`.
    pub fn flush(&mut self, room: &str, limit: usize, events: &broadcast::Sender<Event>) {
        while self.queue.front().is_some_and(|q| q.ready) {
            let Some(q) = self.queue.pop_front() else { break };
            if q.dropped {
                continue;
            }
            // The notes made while a new message waited: each a `why`
            // event right after it.
            let mut after: Vec<Value> = Vec::new();
            let event = match q.change {
                Change::New(mut m) => {
                    let why = std::mem::take(&mut m.why);
                    let event = json!({ "type": "message", "room": room, "message": &m });
                    after = why
                        .iter()
                        .map(|w| json!({ "type": "why", "room": room, "msg": m.id, "why": w }))
                        .collect();
                    m.why = why;
                    self.history.push_back(*m);
                    while self.history.len() > limit {
                        if let Some(old) = self.history.pop_front() {
                            self.forget_key(&old.id);
                        }
                    }
                    event
                }
                Change::Edit { id, text } => {
                    let html = crate::render::html(&text);
                    if let Some(m) = self.history.iter_mut().find(|m| m.id == id) {
                        m.text.clone_from(&text);
                        m.html.clone_from(&html);
                    }
                    json!({ "type": "edit", "room": room, "id": id, "text": text, "html": html })
                }
                Change::Delete { id } => {
                    self.history.retain(|m| m.id != id);
                    self.forget_key(&id);
                    json!({ "type": "delete", "room": room, "id": id })
                }
                Change::React { id, emoji, by } => {
                    let Some(m) = self.history.iter_mut().find(|m| m.id == id) else {
                        continue;
                    };
                    if !m.react(&emoji, &by) {
                        continue;
                    }
                    json!({ "type": "react", "room": room, "id": id, "emoji": emoji, "by": by })
                }
            };
            let _ = events.send((room.to_owned(), event));
            for line in after {
                let _ = events.send((room.to_owned(), line));
            }
        }
    }

    /// A message as the store keeps it, as this room shows it (its quote
    /// taken from what the room has).
    pub fn shown_as_web(&self, m: tactful_store::ShownMessage) -> WebMsg {
        let reply_to = m.reply_to.as_ref().map(tactful_core::MsgId::as_str);
        WebMsg {
            id: m.id.to_string(),
            sender: Member {
                id: m.sender.to_string(),
                name: m.sender_name,
                bot: m.is_bot,
            },
            quote: self.quote(reply_to),
            reply_to: reply_to.map(str::to_owned),
            html: crate::render::html(&m.text),
            text: m.text,
            time: m.time.to_rfc3339(),
            why: Vec::new(),
            reactions: m
                .reactions
                .into_iter()
                .map(|(emoji, by)| Reaction { emoji, by })
                .collect(),
        }
    }

    /// The text of the message `id`, shown or waiting.
    pub fn text_of(&self, id: &str) -> Option<&str> {
        self.history
            .iter()
            .chain(self.queue.iter().filter_map(|q| match &q.change {
                Change::New(m) => Some(&**m),
                _ => None,
            }))
            .find(|m| m.id == id)
            .map(|m| m.text.as_str())
    }

    /// Whether `by`'s `emoji` is on the shown message `id`.
    pub fn has_reaction(&self, id: &str, emoji: &str, by: &str) -> bool {
        self.history.iter().find(|m| m.id == id).is_some_and(|m| {
            m.reactions
                .iter()
                .any(|r| r.emoji == emoji && r.by.iter().any(|b| b == by))
        })
    }

    /// Adds a restored message to the history directly (at start, before
    /// anyone is connected).
    pub fn restore(&mut self, msg: WebMsg, key: Option<String>, limit: usize) {
        if let Some(k) = key {
            self.keys.insert(k.clone(), msg.id.clone());
            self.key_of.insert(msg.id.clone(), k);
        }
        self.history.push_back(msg);
        while self.history.len() > limit {
            if let Some(old) = self.history.pop_front() {
                self.forget_key(&old.id);
            }
        }
    }

    /// The history, oldest first.
    pub fn history(&self) -> impl Iterator<Item = &WebMsg> {
        self.history.iter()
    }

    /// The people present.
    pub fn people(&self) -> impl Iterator<Item = &Member> {
        self.people.iter().map(|(m, _)| m)
    }

    /// One more connection of `member` is here; `true` when they were not
    /// before (everyone is told then).
    pub fn arrive(&mut self, member: &Member) -> bool {
        match self.people.iter_mut().find(|(m, _)| m.id == member.id) {
            Some((_, n)) => {
                *n += 1;
                false
            }
            None => {
                self.people.push((member.clone(), 1));
                true
            }
        }
    }

    /// One connection of the member `id` left; `true` when it was their
    /// last (everyone is told then).
    pub fn leave(&mut self, id: &str) -> bool {
        let Some(i) = self.people.iter().position(|(m, _)| m.id == id) else {
            return false;
        };
        self.people[i].1 -= 1;
        if self.people[i].1 == 0 {
            self.people.remove(i);
            return true;
        }
        false
    }
}

fn clip(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str) -> Member {
        Member {
            id: id.to_owned(),
            name: id.to_owned(),
            bot: false,
        }
    }

    #[test]
    fn a_member_leaves_with_their_last_connection() {
        let mut r = Room::default();
        assert!(r.arrive(&member("web:Alice")), "first tab: everyone is told");
        assert!(!r.arrive(&member("web:Alice")), "second tab: nothing new");
        assert!(!r.leave("web:Alice"), "one tab closed: still here");
        assert_eq!(r.people().count(), 1);
        assert!(r.leave("web:Alice"), "the last tab closed: gone");
        assert!(!r.leave("web:Alice"), "gone is gone");
    }

    #[test]
    fn changes_are_shown_in_the_order_they_were_made() {
        let (events, mut rx) = broadcast::channel(16);
        let mut r = Room::default();
        let msg = |id: &str| WebMsg::plain(id, member("web:A"));
        let question = r.queue_new(msg("w1"), None, false);
        let answer = r.queue_new(msg("w2"), Some("k".into()), false);
        let refused = r.queue_new(msg("w3"), None, false);
        r.settle(answer, true);
        r.flush("lobby", 10, &events);
        assert!(rx.try_recv().is_err(), "the answer waits for the question");
        r.settle(refused, false);
        r.settle(question, true);
        r.flush("lobby", 10, &events);
        let shown: Vec<String> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|(_, v)| v["message"]["id"].as_str().unwrap_or_default().to_owned())
            .collect();
        assert_eq!(shown, ["w1", "w2"], "in order, the refused one never");
        assert_eq!(r.by_key("k"), Some("w2"));
        assert!(!r.knows("w3"));
    }

    fn line(persona: &str, state: &'static str) -> crate::why::Why {
        crate::why::Why {
            persona: persona.to_owned(),
            state,
            text: format!("{persona} {state}"),
        }
    }

    /// A note made while its message waits (a decision made before the
    /// message's store acknowledgement, or before another process's
    /// announcement of it was read) reaches people as a `why` event after
    /// the message, as one made later does: before it a page has nothing
    /// to put it on, and inside it alone a client following `why` events
    /// never sees it.
    #[test]
    fn a_note_on_a_waiting_message_follows_it_as_an_event() {
        let (events, mut rx) = broadcast::channel(16);
        let mut r = Room::default();
        let ticket = r.queue_new(WebMsg::plain("w1", member("web:A")), None, false);
        assert_eq!(r.note_why("w1", line("docs", "answering")), Noted::Waiting);
        assert_eq!(r.note_why("w1", line("chef", "quiet")), Noted::Waiting);
        assert_eq!(r.note_why("w9", line("chef", "quiet")), Noted::Unknown);
        r.flush("lobby", 10, &events);
        assert!(rx.try_recv().is_err(), "nothing before the message is stored");
        r.settle(ticket, true);
        r.flush("lobby", 10, &events);
        let got: Vec<Value> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|(_, v)| v)
            .collect();
        let kinds: Vec<&str> = got.iter().filter_map(|v| v["type"].as_str()).collect();
        assert_eq!(kinds, ["message", "why", "why"], "{got:?}");
        assert_eq!(got[1]["msg"], "w1");
        assert_eq!(got[1]["why"]["persona"], "docs");
        assert_eq!(got[2]["why"]["persona"], "chef");
        assert_eq!(
            r.history().next().map(|m| m.why.len()),
            Some(2),
            "the history keeps them (a newcomer's `history` carries them)"
        );
        assert_eq!(r.note_why("w1", line("docs", "answered")), Noted::Shown);
        assert_eq!(r.note_why("w1", line("docs", crate::why::READ)), Noted::Kept);
    }
}
