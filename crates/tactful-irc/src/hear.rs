//! A line heard on a persona's connection, turned into tactful's inbound
//! message (once, however many personas' connections heard it).

use super::*;

impl Shared {
    /// A PRIVMSG reached persona `i`'s connection; `present(channel, nick)`
    /// says whether someone of that nick is in the channel.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn heard(
        &self,
        i: usize,
        persona: &IrcPersona,
        own_nick: &str,
        from: &str,
        target: &str,
        body: &str,
        present: &dyn Fn(&str, &str) -> bool,
    ) {
        // Each persona's nick as the network knows it now: the one its
        // connection got (maybe `nick_`), else the configured one.
        let nicks: Vec<(String, PersonaId, bool)> = {
            let Ok(live) = self.live.lock() else {
                return;
            };
            self.settings
                .personas
                .iter()
                .map(|p| match live.get(&p.id) {
                    Some((_, nick)) => (nick.clone(), p.id.clone(), true),
                    None => (p.nick.clone(), p.id.clone(), false),
                })
                .collect()
        };
        // On a fallback nick, a persona still answers to its own in a
        // channel where nobody of that name is (people keep typing
        // `docs:`); where the holder is present, the name is theirs.
        let fallbacks: Vec<(String, PersonaId, bool)> = self
            .settings
            .personas
            .iter()
            .filter(|p| {
                nicks
                    .iter()
                    .any(|(n, id, live)| *id == p.id && *live && !text::nick_eq(n, &p.nick))
                    && !present(target, &p.nick)
            })
            .map(|p| (p.nick.clone(), p.id.clone(), false))
            .collect();
        if nicks
            .iter()
            .any(|(nick, _, live)| *live && text::nick_eq(nick, from))
        {
            return; // A persona's own line: the engine heard it when it was sent.
        }
        let body = match body.strip_prefix('\u{1}') {
            // CTCP: only /me is conversation.
            Some(ctcp) => match ctcp.strip_prefix("ACTION ") {
                Some(action) => format!("* {from} {}", action.trim_end_matches('\u{1}')),
                None => return,
            },
            None => body.to_owned(),
        };
        let is_channel = target.starts_with(['#', '&', '+', '!']);
        let (room, is_dm, dm_to) = if is_channel {
            if i != 0 {
                return; // The first persona hears channels for everyone.
            }
            (RoomId::new(format!("irc:{target}")), false, None)
        } else if text::nick_eq(target, own_nick) {
            let room = format!(
                "irc:dm:{}:{}",
                persona.id,
                from.chars().map(text::irc_lower).collect::<String>()
            );
            (RoomId::new(room), true, Some(persona.id.clone()))
        } else {
            return;
        };
        let names: Vec<&str> = nicks
            .iter()
            .chain(&fallbacks)
            .map(|(n, _, _)| n.as_str())
            .collect();
        let mut mentions: Vec<UserId> = Vec::new();
        for n in text::mentioned(&body, &names) {
            if let Some((_, id, _)) = nicks.iter().chain(&fallbacks).find(|(nick, _, _)| nick == n)
                && !mentions.iter().any(|m| m.as_str() == id.as_str())
            {
                mentions.push(UserId::new(id.as_str()));
            }
        }
        // The author's nick travels in the id (a nick has no `.`): a reply
        // is addressed to them by whichever process sends it, after a
        // restart or on the process that took IRC over, not only by the
        // one that heard the line.
        let id = MsgId::new(format!("{}.{from}", self.new_id()));
        let msg = Message {
            id,
            room,
            thread: None,
            sender: Sender {
                // Namespaced: anyone may take a nick equal to a persona's id,
                // and must not be taken for the persona.
                id: UserId::new(format!("irc:{from}")),
                name: Arc::from(from),
                is_bot: false,
                handle: None,
            },
            text: Arc::from(body.as_str()),
            mentions: Mentions::Explicit(mentions),
            reply_to: None,
            is_dm,
            dm_to,
            time: wall_clock(),
        };
        if let Some(handle) = self.roster.runtime() {
            handle.inbound(msg);
        }
    }
}
