//! Polling: one bot's `getUpdates` loop from its saved offset, the
//! updates it brings turned into tactful's inbound messages (each stored
//! before the offset that confirms it moves on), and what the bot's saved
//! state is called.

use super::*;

/// The store key of a bot's update offset.
pub fn state_key(bot_id: u64) -> String {
    format!("telegram:offset:{bot_id}")
}

/// The offset `saved` holds for bot `bot_id`, if any.
pub(crate) fn saved_offset(saved: &BTreeMap<String, String>, bot_id: u64) -> Option<i32> {
    saved.get(&state_key(bot_id))?.parse().ok()
}

/// The store key of when tactful first polled a bot (Unix seconds): what
/// a first poll takes as history is what is older than this, however often
/// the poller started since (a restart before any update came, another
/// process taking the bot over, a reconnect), not older than the poller's
/// own start; else a question asked meanwhile was dropped as history.
pub fn since_key(bot_id: u64) -> String {
    format!("telegram:since:{bot_id}")
}

/// Why a bot could not poll; retried with backoff.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PollError {
    #[error("getMe failed: {0}")]
    Identify(String),
    #[error("the token belongs to bot {found}, not {want}")]
    WrongBot { want: u64, found: u64 },
    #[error("getUpdates failed: {0}")]
    Poll(String),
    #[error("updates not confirmed, as they could not be saved: {0}")]
    NotSaved(String),
}

impl Shared {
    pub(crate) fn known(&self) -> Vec<KnownBot> {
        self.known.read().map(|k| k.clone()).unwrap_or_default()
    }

    /// Identifies persona `i`'s bot, then, if this process holds it
    /// (`listening`), polls until the service stops.
    pub(crate) async fn keep_polling(self: Arc<Self>, i: usize, listening: bool) {
        let persona = self.settings.personas[i].clone();
        let bot = self.bots[i].clone();
        let mut backoff = self.roster.backoff(i, listening);
        backoff.until_ok(|| self.identify(i, &persona, &bot)).await;
        if !listening {
            return;
        }
        self.wait_for_the_others().await;
        let mut offset = self.saved.lock().ok().and_then(|mut s| s.remove(&persona.bot_id));
        // Without a saved offset, Telegram may hold a day of updates, more
        // than one poll brings: all of them dated before the bot was first
        // polled are history, whichever poll brings them.
        let history_before = match offset {
            Some(_) => None,
            None => Some(self.first_polled(&persona).await),
        };
        backoff.reset();
        tracing::info!(persona = %persona.id, "Telegram: listening");
        loop {
            let asked = tokio::time::Instant::now();
            match self.poll(&persona, &bot, offset, history_before).await {
                Ok(Some(next)) => {
                    offset = Some(next);
                    backoff.connected();
                }
                Ok(None) => {
                    backoff.connected();
                    tokio::time::sleep_until(asked + EMPTY_POLL_PAUSE).await;
                }
                Err(e) => backoff.wait(&e).await,
            }
        }
    }

    /// `getMe`: learns the bot's username (mentions name it); `i` is its
    /// place among the personas.
    pub(crate) async fn identify(
        &self,
        i: usize,
        persona: &TelegramPersona,
        bot: &Bot,
    ) -> Result<(), PollError> {
        let me = bot
            .get_me()
            .send()
            .await
            .map_err(|e| PollError::Identify(send::describe(&e)))?;
        if me.user.id.0 != persona.bot_id {
            return Err(PollError::WrongBot {
                want: persona.bot_id,
                found: me.user.id.0,
            });
        }
        let username = me.user.username.clone();
        if username.is_none() {
            tracing::warn!(persona = %persona.id, "Telegram: the bot has no username; people cannot @mention it");
        }
        if let Ok(mut known) = self.known.write()
            && let Some(k) = known.iter_mut().find(|k| k.bot_id == persona.bot_id)
        {
            k.username = username.clone();
        }
        self.roster.identified(i);
        tracing::info!(persona = %persona.id, username = ?username, "Telegram: bot identified");
        Ok(())
    }

    /// Waits (a while) until every bot is known, so a mention of any of
    /// them is recognised from the first message on.
    pub(crate) async fn wait_for_the_others(&self) {
        if !self.roster.all_identified(IDENTIFY_WAIT).await {
            tracing::warn!(
                "Telegram: not every bot could say who it is; mentions of the missing ones are not recognised yet"
            );
        }
    }

    /// When `persona`'s bot was first polled: as saved, else this start
    /// (the service's, when processes share the store), saved for the
    /// pollers after this one (a restart,
    /// another process taking it over). Not saved (the store cannot
    /// write): this start, as before there was a marker.
    pub(crate) async fn first_polled(&self, persona: &TelegramPersona) -> i64 {
        let handle = self.roster.runtime();
        // Sharing the store, a platform is built when its lease comes,
        // maybe seconds after the service started: from the start. (Alone,
        // from when it was built: a bot a reload adds starts then.)
        let started = handle
            .as_ref()
            .filter(|h| h.id_block().is_some())
            .map_or(self.started, |h| (h.started().as_millis() / 1000) as i64)
            .min(self.started);
        let known = self
            .since
            .lock()
            .ok()
            .and_then(|s| s.get(&persona.bot_id).copied());
        if let Some(since) = known {
            return since.min(started);
        }
        if let Ok(mut s) = self.since.lock() {
            s.insert(persona.bot_id, started);
        }
        if let Some(handle) = handle
            && let Err(e) = handle
                .save_state_saved(since_key(persona.bot_id), started.to_string())
                .await
        {
            tracing::warn!(persona = %persona.id, "Telegram: when the bot was first polled could not be saved: {e}");
        }
        started
    }

    /// One `getUpdates`: hands its messages in, then saves the offset
    /// behind them. Returns the next offset, if there were updates.
    /// Without a saved offset, messages dated before `history_before` are
    /// history.
    pub(crate) async fn poll(
        &self,
        persona: &TelegramPersona,
        bot: &Bot,
        offset: Option<i32>,
        history_before: Option<i64>,
    ) -> Result<Option<i32>, PollError> {
        let mut req = bot
            .get_updates()
            .timeout(self.settings.poll_timeout.as_secs() as u32)
            .allowed_updates([AllowedUpdate::Message]);
        if let Some(o) = offset {
            req = req.offset(o);
        }
        let updates = req
            .send()
            .await
            .map_err(|e| PollError::Poll(send::describe(&e)))?;
        let Some(last) = updates.last() else {
            return Ok(None);
        };
        let next = last.id.as_offset();
        let known = self.known();
        let Some(me) = known.iter().find(|k| k.bot_id == persona.bot_id) else {
            return Ok(Some(next));
        };
        let mut taking = Vec::new();
        for update in &updates {
            let msg = match &update.kind {
                UpdateKind::Message(m) => m,
                UpdateKind::Error(raw) => {
                    tracing::warn!(persona = %persona.id, update = update.id.0, "Telegram: skipped an update that does not parse: {}", send::clip(&raw.to_string()));
                    continue;
                }
                // Edits and everything else: not new messages.
                _ => continue,
            };
            let receiver = Receiver {
                bot: me,
                bots: &known,
            };
            let Some(heard) = to_message(msg, receiver) else {
                continue;
            };
            if !self.first_sight(&heard.room, msg.id.0) {
                continue;
            }
            let backlog = history_before.is_some_and(|before| msg.date.timestamp() < before);
            if let Some(handle) = self.roster.runtime() {
                if backlog {
                    handle.backlog(heard);
                } else {
                    taking.push((
                        heard.room.clone(),
                        msg.id.0,
                        handle.inbound_saved(heard, Vec::new()),
                    ));
                }
            }
        }
        // The next poll confirms these updates to Telegram, which then
        // drops them for good: first they and the offset are stored, so a
        // crash in between never loses one (they come again instead, and
        // are recognised). A message the store refused (it could not
        // write) is not confirmed: it is forgotten here, and the next poll,
        // from the same offset, brings it again.
        let mut refused = None;
        for (room, id, taken) in taking {
            if let Err(e) = taken.await {
                self.forget_sight(&room, id);
                refused.get_or_insert(e);
            }
        }
        if let Some(e) = refused {
            return Err(PollError::NotSaved(e.to_string()));
        }
        let handle = self.roster.runtime();
        if let Some(handle) = handle {
            handle
                .save_state_saved(state_key(persona.bot_id), next.to_string())
                .await
                .map_err(|e| PollError::NotSaved(e.to_string()))?;
        }
        Ok(Some(next))
    }

    /// A message handed in but not stored: the next poll hands it again.
    pub(crate) fn forget_sight(&self, room: &RoomId, id: i32) {
        if let Ok(mut s) = self.seen.lock() {
            s.forget(&(room.clone(), id));
        }
    }

    /// Whether this is the first bot to hand in this message.
    pub(crate) fn first_sight(&self, room: &RoomId, id: i32) -> bool {
        self.seen.lock().is_ok_and(|mut s| s.first((room.clone(), id)))
    }
}
