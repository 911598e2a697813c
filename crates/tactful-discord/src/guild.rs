//! What a guild message needs before it is handed in: which channel is a
//! thread (and its parent), the roles a persona's bot holds (role mentions
//! address it), and threads a mentioned persona joins.

use super::*;

impl Shared {
    pub(crate) fn note_thread(&self, ch: &Channel) {
        if let Ok(mut p) = self.parents.lock() {
            if p.len() > REMEMBERED_CHANNELS {
                p.clear();
            }
            p.insert(ch.id, ch.kind.is_thread().then_some(ch.parent_id).flatten());
        }
    }

    pub(crate) fn user_of(&self, i: usize) -> Option<Id<UserMarker>> {
        self.bots
            .read()
            .ok()
            .and_then(|b| b[i].1.as_ref().map(|(id, _)| *id))
    }

    /// A thread's parent channel, asked over HTTP the first time.
    pub(crate) async fn parent_of(&self, i: usize, channel: Id<ChannelMarker>) -> Option<Id<ChannelMarker>> {
        if let Some(known) = self.parents.lock().ok().and_then(|p| p.get(&channel).copied()) {
            return known;
        }
        match send::deadline(self.clients[i].channel(channel)).await {
            Ok(r) => match r.model().await {
                Ok(ch) => {
                    self.note_thread(&ch);
                    ch.kind.is_thread().then_some(ch.parent_id).flatten()
                }
                Err(e) => {
                    tracing::warn!(%channel, "Discord: cannot read a channel: {e}");
                    None
                }
            },
            Err(e) => {
                tracing::warn!(%channel, "Discord: cannot read a channel: {}", e.0);
                None
            }
        }
    }

    /// The roles persona `j`'s bot holds in `guild`, asked over HTTP the
    /// first time.
    pub(crate) async fn roles_of(&self, j: usize, guild: Id<GuildMarker>) -> Vec<Id<RoleMarker>> {
        let cached = self.roles.lock().ok().and_then(|r| r.get(&(j, guild)).cloned());
        if let Some((at, r)) = &cached
            && at.elapsed() < ROLES_FOR
        {
            return r.clone();
        }
        let Some(me) = self.user_of(j) else {
            return Vec::new();
        };
        let member = match send::deadline(self.clients[j].guild_member(guild, me)).await {
            Ok(r) => r.model().await.ok(),
            Err(e) => {
                tracing::debug!(%guild, "Discord: cannot read the bot's roles: {}", e.0);
                None
            }
        };
        // A failure (the bot is not in that guild, or Discord did not
        // answer) counts as no roles until the next refresh, so a flood of
        // role mentions cannot turn into a flood of lookups.
        let roles = member.map(|m| m.roles).unwrap_or_default();
        if let Ok(mut all) = self.roles.lock() {
            if all.len() > REMEMBERED_CHANNELS {
                all.clear();
            }
            all.insert((j, guild), (tokio::time::Instant::now(), roles.clone()));
        }
        roles
    }

    pub(crate) async fn heard(&self, i: usize, msg: &twilight_model::channel::Message) {
        if !self.seen.lock().is_ok_and(|mut s| s.first(msg.id.get())) {
            return;
        }
        let parent = match msg.guild_id {
            Some(_) => self.parent_of(i, msg.channel_id).await,
            None => None,
        };
        let mut known: Vec<KnownBot> = self
            .bots
            .read()
            .map(|b| {
                b.iter()
                    .map(|(persona, user)| KnownBot {
                        persona: persona.clone(),
                        user: user.as_ref().map(|(id, _)| *id),
                        roles: Vec::new(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(guild) = msg.guild_id
            && !msg.mention_roles.is_empty()
        {
            for (j, k) in known.iter_mut().enumerate() {
                k.roles = self.roles_of(j, guild).await;
            }
        }
        let seen = Seen {
            receiver: &self.settings.personas[i].id,
            bots: &known,
            parent,
            everyone_addresses: self.settings.everyone_addresses,
        };
        let Some(heard) = to_message(msg, seen) else {
            return;
        };
        if parent.is_some() {
            self.join_mentioned(&heard.mentions, msg.channel_id).await;
        }
        if let Some(handle) = self.roster.runtime() {
            handle.inbound(heard);
        }
    }

    /// Personas mentioned in a thread join it, to hear what follows.
    pub(crate) async fn join_mentioned(&self, mentions: &Mentions, thread: Id<ChannelMarker>) {
        let Mentions::Explicit(ids) = mentions else {
            return;
        };
        for (j, p) in self.settings.personas.iter().enumerate() {
            if !ids.iter().any(|u| u.as_str() == p.id.as_str()) {
                continue;
            }
            if self.joined.lock().is_ok_and(|s| s.contains(&(j, thread))) {
                continue;
            }
            match send::deadline(self.clients[j].join_thread(thread)).await {
                // Remembered once joined: a failure is tried again next time.
                Ok(_) => {
                    if let Ok(mut s) = self.joined.lock() {
                        if s.len() > REMEMBERED_CHANNELS {
                            s.clear();
                        }
                        s.insert((j, thread));
                    }
                }
                Err(e) => {
                    tracing::warn!(persona = %p.id, %thread, "Discord: cannot join the thread: {}", e.0)
                }
            }
        }
    }
}
