//! The coordinator's reads of the inbox: the rows notifications name, by
//! their key, and once a round everything waiting in the partitions held
//! (what a missed notification or a failed read left).

use std::collections::HashSet;

use tactful_store::{StoreError, Waiting, partition_of};

use super::{INBOX_READ, State};
use crate::events::Event;

impl State {
    /// Messages the engine task could not take: handed again at the next
    /// read.
    pub(super) fn untaken(&mut self, seqs: &[i64]) {
        for seq in seqs {
            self.handed.remove(seq);
        }
    }

    /// Hands the engine task the inbox rows `seqs` still waiting in the
    /// partitions held (and not handed yet). What a notification named
    /// and this misses (the row's partition moved, the read failed) the
    /// next round's whole read finds.
    pub(super) fn read_named(&mut self, seqs: &[i64]) -> Result<(), StoreError> {
        let waiting = self.cluster.waiting_at(seqs)?;
        self.hand(waiting);
        Ok(())
    }

    /// Hands the engine task what waits in the inbox for the partitions
    /// held; whether there may be more.
    pub(super) fn read_inbox(&mut self) -> Result<bool, StoreError> {
        if self.held.is_empty() {
            return Ok(false);
        }
        let parts: Vec<u32> = self.held.keys().copied().collect();
        let waiting = self.cluster.waiting(&parts, INBOX_READ)?;
        let full = waiting.len() == INBOX_READ;
        // What is no longer waiting was decided: forgotten here (but for
        // rows past a full read's last, handed when a notification named
        // them: still in the engine's hand).
        let seen: HashSet<i64> = waiting.iter().map(|w| w.seq).collect();
        let last = waiting.last().map(|w| w.seq).filter(|_| full);
        self.handed
            .retain(|s, _| seen.contains(s) || last.is_some_and(|last| *s > last));
        // A full read with nothing new waits on the engine task: the next
        // wake-up reads again.
        Ok(self.hand(waiting) && full)
    }

    /// Hands the engine task the rows of `waiting` in partitions held and
    /// not handed yet (a notification may name a row of a partition that
    /// moved, a read may return a row the engine already has); whether
    /// any was.
    fn hand(&mut self, waiting: Vec<Waiting>) -> bool {
        let new: Vec<_> = waiting
            .into_iter()
            .filter(|w| {
                let part = partition_of(&w.msg.room);
                self.held.contains_key(&part) && self.handed.insert(w.seq, part).is_none()
            })
            .collect();
        let any = !new.is_empty();
        if any {
            let _ = self.engine.send(Event::FromInbox(new));
        }
        any
    }
}
