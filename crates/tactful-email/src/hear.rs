//! One mail from a persona's mailbox into the conversation: which room
//! and thread, who is addressed, and whether it may be answered at all.

use tactful_core::{Mentions, Message, MsgId, Sender, ThreadId, Timestamp, UserId};

use super::*;
use crate::read::{Mail, opened_with, read};

/// How a mail reached tactful.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arrival {
    /// What a mailbox held at its first start: context only.
    Backlog,
    /// Arrived while tactful was away: answered if it arrived within
    /// `answer_missed_minutes`.
    Missed,
    /// Arrived while watching.
    Live,
}

/// The prefix of the Message-IDs tactful gives its answers.
pub(crate) const OWN_ID_PREFIX: &str = "tactful.";

impl Shared {
    /// Hands in the mail `raw` (UID `uid` of `persona`'s mailbox), or says
    /// why not.
    pub(crate) fn hear(
        &self,
        persona: &EmailPersona,
        uid: u32,
        raw: &[u8],
        arrived: Option<Timestamp>,
        arrival: Arrival,
    ) {
        let Some(mail) = read(raw, &self.settings.lists) else {
            tracing::warn!(persona = %persona.id, uid, "email: skipped a mail that could not be read at all");
            return;
        };
        let Some(from) = mail.from.clone() else {
            tracing::info!(persona = %persona.id, uid, "email: skipped a mail without a sender address");
            return;
        };
        if let Some(other) = &mail.other_list {
            tracing::info!(persona = %persona.id, uid, list = %other, "email: skipped a post to a list that is not in `platforms.email.lists`");
            return;
        }
        let id = mail
            .id
            .clone()
            .unwrap_or_else(|| format!("uid.{uid}.{}", persona.address));
        let by_persona = self.settings.persona_at(&from);
        // A persona's own answer, back through the list: the engine heard
        // it when it was sent.
        if by_persona.is_some() && id.starts_with(OWN_ID_PREFIX) {
            return;
        }
        let room = match &mail.list {
            Some(list) => rooms::list_room(list),
            None => rooms::direct_room(&persona.id, &from),
        };
        if !self
            .seen
            .lock()
            .is_ok_and(|mut s| s.first(format!("{room} {id}")))
        {
            return;
        }
        let root = self.thread_of(&room, &mail, &id);
        let (mentions, is_dm) = self.addressed(persona, &mail);
        let machine = mail.automatic.or(by_persona.map(|_| "a persona's own address"));
        let answer = match arrival {
            Arrival::Backlog => false,
            Arrival::Live => true,
            Arrival::Missed => arrived.is_none_or(|t| within(t, self.settings.answer_missed)),
        } && machine.is_none();
        if let Some(why) = machine {
            tracing::info!(persona = %persona.id, %room, msg = %id, "email: heard as context, never answered: {why}");
        }
        let domain = from.split_once('@').map(|(_, d)| format!("@{d}"));
        let msg = Message {
            id: MsgId::new(id.clone()),
            room: room.clone(),
            thread: Some(ThreadId::new(root.clone())),
            sender: Sender {
                id: UserId::new(from.as_str()),
                name: Arc::from(mail.from_name.as_str()),
                is_bot: machine.is_some(),
                // `allowed_users = ["@example.org"]` admits a domain.
                handle: domain.map(|d| Arc::from(d.as_str())),
            },
            text: Arc::from(mail.text.as_str()),
            mentions: Mentions::Explicit(mentions),
            reply_to: mail.in_reply_to.as_ref().map(|r| MsgId::new(r.clone())),
            is_dm,
            dm_to: is_dm.then(|| persona.id.clone()),
            time: arrived.or(mail.date).unwrap_or_else(tactful_runtime::wall_clock),
        };
        self.remember(
            &id,
            Known {
                subject: mail.subject.clone(),
                references: mail.references.clone(),
                author: mail.from_name.clone(),
                text: mail.text.clone(),
                root: root.clone(),
            },
        );
        if let Some(handle) = self.roster.runtime() {
            if answer {
                handle.inbound(msg);
            } else {
                handle.backlog(msg);
            }
        }
    }

    /// The thread `mail` is in: by its headers, else by its subject
    /// (without `Re:`) in the same room, else its own.
    fn thread_of(&self, room: &RoomId, mail: &Mail, id: &str) -> String {
        let by_headers = mail.references.first().or(mail.in_reply_to.as_ref()).cloned();
        let key = (room.clone(), mail.base_subject.clone());
        let by_subject = || {
            (!mail.base_subject.is_empty() && mail.subject.to_ascii_lowercase().starts_with("re:"))
                .then(|| self.subjects.lock().ok().and_then(|s| s.get(&key).cloned()))
                .flatten()
        };
        let root = by_headers.or_else(by_subject).unwrap_or_else(|| id.to_owned());
        if !mail.base_subject.is_empty()
            && let Ok(mut s) = self.subjects.lock()
            && s.get(&key).is_none()
        {
            s.insert(key, root.clone());
        }
        root
    }

    /// The personas `mail` addresses: those in To or Cc and the one whose
    /// name opens it; and whether it is a DM (mail to the persona not
    /// through a list).
    fn addressed(&self, persona: &EmailPersona, mail: &Mail) -> (Vec<UserId>, bool) {
        if mail.list.is_none() {
            return (vec![UserId::new(persona.id.as_str())], true);
        }
        let personas = &self.settings.personas;
        let mut out: Vec<UserId> = personas
            .iter()
            .filter(|p| mail.recipients.contains(&p.address))
            .map(|p| UserId::new(p.id.as_str()))
            .collect();
        let names: Vec<&str> = personas.iter().map(|p| p.name.as_str()).collect();
        if let Some(name) = opened_with(&mail.text, &names)
            && let Some(p) = personas.iter().find(|p| p.name == name)
            && !out.iter().any(|u| u.as_str() == p.id.as_str())
        {
            out.push(UserId::new(p.id.as_str()));
        }
        (out, false)
    }

    /// Keeps what an answer to mail `id` needs: `known`, and that it is
    /// its thread's latest.
    pub(crate) fn remember(&self, id: &str, known: Known) {
        if let Ok(mut latest) = self.latest.lock() {
            latest.insert(known.root.clone(), id.to_owned());
        }
        if let Ok(mut all) = self.known.lock() {
            all.insert(id.to_owned(), known);
        }
    }
}
