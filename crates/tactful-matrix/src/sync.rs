//! Syncing: one persona's sync loop, and each timeline event it brings
//! turned into tactful's inbound message (once, however many personas'
//! syncs saw it; the first sync's events as backlog, never answered).

use super::*;
use crate::session::SessionError;

/// The store key of an account's sync token.
pub fn state_key(user_id: &str) -> String {
    format!("matrix:sync:{user_id}")
}

impl Shared {
    pub(crate) async fn keep_syncing(self: Arc<Self>, i: usize) {
        let persona = self.settings.personas[i].clone();
        let mut backoff = self.roster.backoff_always(i);
        let client = backoff.until_ok(|| self.login(&persona)).await;
        tracing::info!(persona = %persona.id, user = %persona.user_id, "logged in to Matrix");
        if let Ok(mut clients) = self.clients.lock() {
            clients.insert(persona.id.clone(), client.clone());
        }
        self.logged_in.notify_waiters();
        self.join_configured(&persona, &client).await;
        let mut token = self.saved.lock().ok().and_then(|mut s| s.remove(&persona.id));
        let mut first = true;
        backoff.reset();
        loop {
            match self.sync(&persona, &client, token.as_deref(), first).await {
                Ok(next) => {
                    if first {
                        first = false;
                        self.synced.fetch_add(1, Ordering::SeqCst);
                        tracing::info!(persona = %persona.id, rooms = client.joined_rooms().len(), "Matrix sync is live");
                    }
                    token = Some(next);
                    backoff.connected();
                }
                Err(e) => backoff.wait(&e).await,
            }
        }
    }

    /// One sync: hands its messages in, accepts invites, then saves the
    /// token behind them. Returns the next token.
    pub(crate) async fn sync(
        &self,
        persona: &MatrixPersona,
        client: &Client,
        token: Option<&str>,
        first: bool,
    ) -> Result<String, SessionError> {
        let mut timeline = RoomEventFilter::default();
        timeline.limit = Some(UInt::from(TIMELINE_LIMIT));
        let mut filter = FilterDefinition::default();
        filter.room.timeline = timeline;
        let mut settings = SyncSettings::default()
            .filter(Filter::FilterDefinition(filter))
            .timeout(if first {
                Duration::ZERO
            } else {
                self.settings.sync_timeout
            });
        settings = match token {
            Some(t) => settings.token(t).full_state(first),
            None => settings.token(SyncToken::NoToken),
        };
        let response = client
            .sync_once(settings)
            .await
            .map_err(|e| SessionError::Sync(e.to_string()))?;
        // With no token at all this is the account's history: context only.
        let backlog_only = token.is_none();
        for (room_id, update) in &response.rooms.joined {
            let Some(room) = client.get_room(room_id) else {
                continue;
            };
            // Events before this persona's own join are the room's history.
            let join_at = update.timeline.events.iter().rposition(|e| {
                matches!(
                    e.raw().deserialize(),
                    Ok(AnySyncTimelineEvent::State(AnySyncStateEvent::RoomMember(SyncStateEvent::Original(m))))
                        if m.state_key.as_str() == persona.user_id
                            && m.content.membership == MembershipState::Join
                )
            });
            for (n, ev) in update.timeline.events.iter().enumerate() {
                let backlog = backlog_only || join_at.is_some_and(|j| n < j);
                self.heard(persona, &room, ev.raw(), backlog).await;
            }
        }
        for room in client.invited_rooms() {
            self.consider_invite(persona, room).await;
        }
        if let Some(handle) = self.roster.runtime() {
            handle.save_state(state_key(&persona.user_id), response.next_batch.clone());
        }
        Ok(response.next_batch)
    }

    /// One timeline event seen by `persona` in `room`.
    pub(crate) async fn heard(
        &self,
        persona: &MatrixPersona,
        room: &Room,
        raw: &matrix_sdk::ruma::serde::Raw<AnySyncTimelineEvent>,
        backlog: bool,
    ) {
        let ev = match raw.deserialize() {
            Ok(AnySyncTimelineEvent::MessageLike(AnySyncMessageLikeEvent::RoomMessage(
                SyncMessageLikeEvent::Original(ev),
            ))) => ev,
            Ok(_) => return, // State, reactions, redactions: not conversation.
            Err(e) => {
                tracing::warn!(persona = %persona.id, room = %room.room_id(), "Matrix: skipped an event that does not parse: {e}");
                return;
            }
        };
        // The personas' own events: the engine heard them when they were sent.
        if self.known.iter().any(|p| p.user_id == ev.sender.as_str()) {
            return;
        }
        if !self.first_sight(ev.event_id.as_str()) {
            return;
        }
        let (is_dm, dm_to) = if self.is_dm(room).await {
            (true, Some(persona.id.clone()))
        } else {
            (false, None)
        };
        let name = match room.get_member_no_sync(&ev.sender).await {
            Ok(Some(m)) => m.display_name().map(str::to_owned),
            _ => None,
        };
        let seen = Seen {
            room: room_id(room.room_id().as_str()),
            is_dm,
            dm_to,
            sender_name: name.as_deref(),
            personas: &self.known,
        };
        let Some(msg) = to_message(&ev, &seen) else {
            return;
        };
        if let Some(handle) = self.roster.runtime() {
            if backlog {
                handle.backlog(msg);
            } else {
                handle.inbound(msg);
            }
        }
    }

    /// Whether this is the first persona to see `event` (a shared room is
    /// heard once).
    pub(crate) fn first_sight(&self, event: &str) -> bool {
        self.seen.lock().is_ok_and(|mut s| s.first(event.to_owned()))
    }

    /// A DM: marked `m.direct`, or just this persona and one other member.
    pub(crate) async fn is_dm(&self, room: &Room) -> bool {
        if room.is_direct().await.unwrap_or(false) {
            return true;
        }
        room.joined_members_count() + room.invited_members_count() == 2
    }
}
