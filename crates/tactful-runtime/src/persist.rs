//! Saving what the engine did, off the engine's task.
//!
//! SQLite is synchronous, and the engine task must never wait on a disk.
//! The [`Persister`] owns the [`Store`] on a thread of its own; the engine
//! task hands it one [`Batch`] of [`Op`]s per event and moves on. Batches
//! that queue up while a transaction runs are merged into the next one, so
//! a burst costs a few commits, not one per message.
//!
//! A reply must be durable before it leaves: otherwise a crash right after
//! the platform accepted it would make the restart resume its turn and
//! post it twice. So a batch holding a reply carries `acks`, which fire once
//! it is committed, and the delivery worker waits for its ack before
//! sending.

use std::sync::mpsc;
use std::thread::JoinHandle;

use tactful_store::{Op, Store};
use tokio::sync::oneshot;

/// Changes to save together, and who waits for them.
#[derive(Default)]
pub struct Batch {
    /// The changes, in order.
    pub ops: Vec<Op>,
    /// Fired once the ops are committed (or failed to be: delivery must not
    /// hang on a broken disk; the error is logged).
    pub acks: Vec<oneshot::Sender<()>>,
}

/// The store's writer thread.
pub struct Persister {
    tx: Option<mpsc::Sender<Batch>>,
    thread: Option<JoinHandle<()>>,
}

/// How many queued batches one transaction takes at most.
const MAX_MERGE: usize = 256;

impl Persister {
    /// Starts the writer thread owning `store`.
    pub fn start(mut store: Store) -> std::io::Result<Persister> {
        let (tx, rx) = mpsc::channel::<Batch>();
        let thread = std::thread::Builder::new()
            .name("tactful-store".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    let mut ops = first.ops;
                    let mut acks = first.acks;
                    for more in rx.try_iter().take(MAX_MERGE) {
                        ops.extend(more.ops);
                        acks.extend(more.acks);
                    }
                    if let Err(e) = store.apply(&ops) {
                        tracing::error!(ops = ops.len(), "could not save to the store: {e}");
                    }
                    for ack in acks {
                        let _ = ack.send(());
                    }
                }
            })?;
        Ok(Persister {
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    /// Queues a batch. Never blocks.
    pub fn save(&self, batch: Batch) {
        if batch.ops.is_empty() && batch.acks.is_empty() {
            return;
        }
        if let Some(tx) = &self.tx
            && tx.send(batch).is_err()
        {
            tracing::error!("the store writer has stopped: changes are not saved");
        }
    }

    /// Writes everything queued, then stops the thread.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("the store writer panicked");
        }
    }
}

impl Drop for Persister {
    fn drop(&mut self) {
        self.stop();
    }
}
