//! Watching one persona's mailbox: log in, read what arrived since the
//! saved mark, then IDLE until the server says something changed (or
//! `recheck_minutes` pass), and again. Each mail is handed in before the
//! mark past it is saved, so a restart neither misses nor repeats one.

use futures::TryStreamExt;

use super::*;
use crate::hear::Arrival;
use crate::imap::Session;

/// The most of one mail fetched: enough for any text a person writes;
/// an attachment past it is never downloaded.
const FETCH_BYTES: u32 = 1 << 20;

/// Mail fetched per round trip (each at most [`FETCH_BYTES`]).
const FETCH_BATCH: usize = 16;

/// What a mailbox holds at its first start that is read as backlog (the
/// latest ones; older mail is not worth a model's context).
const FIRST_BACKLOG: usize = 50;

/// Whether the server announced new mail since this was last asked
/// (the announcements async-imap set aside), emptying them.
fn news(session: &mut Session) -> bool {
    let mut any = false;
    while let Ok(r) = session.unsolicited_responses.try_recv() {
        any |= matches!(
            r,
            async_imap::types::UnsolicitedResponse::Exists(_)
                | async_imap::types::UnsolicitedResponse::Recent(_)
        );
    }
    any
}

impl Shared {
    /// Watches mailbox `i` while this process holds it, reconnecting with
    /// a backoff; a mailbox another process holds is left alone.
    pub(crate) async fn keep_watching(self: Arc<Self>, i: usize, listening: bool) {
        if !listening {
            return;
        }
        let persona = self.settings.personas[i].clone();
        let mut backoff = self.roster.backoff(i, true);
        loop {
            let result = self.watch(&persona, &mut backoff).await;
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            match result {
                Ok(()) => {
                    backoff.reset();
                    backoff.wait(&"the IMAP connection closed").await;
                }
                Err(e) => backoff.wait(&e).await,
            }
        }
    }

    /// One connection, until it fails.
    async fn watch(
        &self,
        persona: &EmailPersona,
        backoff: &mut tactful_runtime::account::Backoff,
    ) -> Result<(), String> {
        let server = &self.settings.imap;
        let mut session = imap::login(server, persona).await?;
        let mailbox = session
            .select("INBOX")
            .await
            .map_err(|e| format!("IMAP {server}: selecting INBOX of {}: {e}", persona.username))?;
        let validity = mailbox.uid_validity.unwrap_or(0);
        backoff.connected();
        tracing::info!(persona = %persona.id, "email: watching {}'s mailbox", persona.address);
        let saved = self.marks.lock().ok().and_then(|m| m.get(&persona.id).copied());
        match saved {
            Some(mark) if mark.validity == validity => {
                self.read_since(&mut session, persona, mark, Arrival::Missed)
                    .await?;
            }
            other => {
                if other.is_some() {
                    tracing::warn!(persona = %persona.id, "email: {}'s mailbox was renumbered (UIDVALIDITY changed): what it holds is read as backlog", persona.address);
                }
                self.first_look(&mut session, persona, validity).await?;
            }
        }
        loop {
            // Mail announced while tactful was reading (an EXISTS in the
            // answer to a FETCH) is not announced again in IDLE: read it
            // first.
            if news(&mut session) {
                self.read_again(&mut session, persona, validity).await?;
                continue;
            }
            let mut idle = session.idle();
            idle.init()
                .await
                .map_err(|e| format!("IMAP {server}: IDLE: {e}"))?;
            let (wait, _stop) = idle.wait_with_timeout(self.settings.recheck);
            let woke = wait.await.map_err(|e| format!("IMAP {server}: IDLE: {e}"))?;
            tracing::trace!(persona = %persona.id, "email: IDLE ended: {woke:?}");
            session = idle
                .done()
                .await
                .map_err(|e| format!("IMAP {server}: ending IDLE: {e}"))?;
            let _ = news(&mut session);
            self.read_again(&mut session, persona, validity).await?;
        }
    }

    /// Reads what arrived since the mark, as live mail.
    async fn read_again(
        &self,
        session: &mut Session,
        persona: &EmailPersona,
        validity: u32,
    ) -> Result<(), String> {
        let mark = self
            .marks
            .lock()
            .ok()
            .and_then(|m| m.get(&persona.id).copied())
            .unwrap_or(Mark { validity, uid: 0 });
        self.read_since(session, persona, mark, Arrival::Live).await
    }

    /// At a mailbox's first start: the latest mail it holds is backlog,
    /// and the mark is put past everything it holds.
    async fn first_look(
        &self,
        session: &mut Session,
        persona: &EmailPersona,
        validity: u32,
    ) -> Result<(), String> {
        let mut uids: Vec<u32> = session
            .uid_search("ALL")
            .await
            .map_err(|e| format!("IMAP: searching {}'s mailbox: {e}", persona.address))?
            .into_iter()
            .collect();
        uids.sort_unstable();
        let last = uids.last().copied().unwrap_or(0);
        let recent = &uids[uids.len().saturating_sub(FIRST_BACKLOG)..];
        self.fetch_and_hear(session, persona, validity, recent, Arrival::Backlog)
            .await?;
        self.set_mark(persona, Mark { validity, uid: last });
        Ok(())
    }

    /// Reads every mail past `mark`.
    async fn read_since(
        &self,
        session: &mut Session,
        persona: &EmailPersona,
        mark: Mark,
        arrival: Arrival,
    ) -> Result<(), String> {
        let mut uids: Vec<u32> = session
            .uid_search(format!("UID {}:*", mark.uid.saturating_add(1)))
            .await
            .map_err(|e| format!("IMAP: searching {}'s mailbox: {e}", persona.address))?
            .into_iter()
            // `n:*` names the last mail even when it is below n.
            .filter(|u| *u > mark.uid)
            .collect();
        uids.sort_unstable();
        self.fetch_and_hear(session, persona, mark.validity, &uids, arrival)
            .await
    }

    /// Fetches `uids` in batches and hands each mail in, in order, saving
    /// the mark after each.
    async fn fetch_and_hear(
        &self,
        session: &mut Session,
        persona: &EmailPersona,
        validity: u32,
        uids: &[u32],
        arrival: Arrival,
    ) -> Result<(), String> {
        for batch in uids.chunks(FETCH_BATCH) {
            let set = batch.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
            let mut fetched: Vec<(u32, Option<tactful_core::Timestamp>, Vec<u8>)> = session
                .uid_fetch(&set, format!("(UID INTERNALDATE BODY.PEEK[]<0.{FETCH_BYTES}>)"))
                .await
                .map_err(|e| format!("IMAP: fetching from {}'s mailbox: {e}", persona.address))?
                .map_ok(|f| {
                    let arrived = f
                        .internal_date()
                        .and_then(|d| u64::try_from(d.timestamp_millis()).ok())
                        .map(tactful_core::Timestamp::from_millis);
                    (
                        f.uid.unwrap_or(0),
                        arrived,
                        f.body().map(<[u8]>::to_vec).unwrap_or_default(),
                    )
                })
                .try_collect()
                .await
                .map_err(|e| format!("IMAP: fetching from {}'s mailbox: {e}", persona.address))?;
            fetched.sort_by_key(|(uid, ..)| *uid);
            for (uid, arrived, raw) in fetched {
                if !batch.contains(&uid) {
                    continue; // An unsolicited FETCH (a flag changed elsewhere).
                }
                self.hear(persona, uid, &raw, arrived, arrival);
                self.set_mark(persona, Mark { validity, uid });
            }
        }
        Ok(())
    }

    /// Moves `persona`'s mark, here and in the store (after what was
    /// handed in: the runtime saves in order).
    fn set_mark(&self, persona: &EmailPersona, mark: Mark) {
        let moved = self
            .marks
            .lock()
            .ok()
            .map(|mut m| m.insert(persona.id.clone(), mark) != Some(mark))
            .unwrap_or(true);
        if moved && let Some(handle) = self.roster.runtime() {
            handle.save_state(state_key(&persona.id), mark.to_saved());
        }
    }
}

impl Shared {
    /// Mail `id` as `persona`'s mailbox holds it, looked up over IMAP: an
    /// answer after a restart still threads under the mail it answers,
    /// quoting it, though this process never read it.
    pub(crate) async fn look_up(&self, persona: &EmailPersona, id: &str) -> Option<Known> {
        if id.is_empty() || id.contains(['"', '\\']) || id.len() > 250 {
            return None;
        }
        let found = async {
            let mut session = imap::login(&self.settings.imap, persona).await.ok()?;
            session.examine("INBOX").await.ok()?;
            let uid = session
                .uid_search(format!("HEADER Message-ID \"{id}\""))
                .await
                .ok()?
                .into_iter()
                .max()?;
            let fetched: Vec<Vec<u8>> = session
                .uid_fetch(uid.to_string(), format!("(UID BODY.PEEK[]<0.{FETCH_BYTES}>)"))
                .await
                .ok()?
                .map_ok(|f| f.body().map(<[u8]>::to_vec).unwrap_or_default())
                .try_collect()
                .await
                .ok()?;
            let _ = session.logout().await;
            let mail = read::read(fetched.first()?, &self.settings.lists)?;
            let root = mail
                .references
                .first()
                .or(mail.in_reply_to.as_ref())
                .cloned()
                .unwrap_or_else(|| id.to_owned());
            Some(Known {
                subject: mail.subject,
                references: mail.references,
                author: mail.from_name,
                text: mail.text,
                root,
            })
        };
        tokio::time::timeout(Duration::from_secs(20), found)
            .await
            .ok()
            .flatten()
    }
}
