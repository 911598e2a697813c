//! Saving what the engine did, off the engine's task, and saying honestly
//! when that is not possible.
//!
//! SQLite is synchronous, and the engine task must never wait on a disk.
//! The [`Persister`] owns the [`Store`] on a thread of its own; the engine
//! task hands it one [`Batch`] of [`Op`]s per event and moves on. Batches
//! that queue up while a transaction runs are merged into the next one, so
//! a burst costs a few commits, not one per message.
//!
//! The writer also runs the WAL checkpoints (SQLite's own run inside the
//! commit that crosses 1,000 pages, making its waiters wait for two disk
//! syncs): after the waiters are answered, when nothing is queued.
//!
//! Nothing leaves before it is saved: a reply's delivery waits for its
//! batch's ack, the web room shows a message only once it is stored. So
//! when the store cannot write (a full disk, a read-only file, another
//! process holding the lock) the writer keeps trying the same batch, with
//! backoff, instead of dropping it; [`Health`] turns unhealthy (and
//! `/healthz` with it) and the runtime refuses new messages until a write
//! succeeds again. A write that fails for any other reason (a bug, a
//! corrupt file) would fail forever: that batch is dropped, loudly.
//!
//! When several processes share a PostgreSQL database, a batch written
//! under a partition's lease is refused once another process took the
//! lease over ([`NotSaved::Fenced`]). Merged batches are then written again
//! one by one, so only those of the lost partition are dropped (at INFO:
//! the room is the new owner's), never a neighbour's; each one dropped is
//! counted ([`Health::fenced`], `tactful_fenced_writes_total`), so an
//! operator sees fencing at work without reading the log.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tactful_store::{Op, Store, StoreError};
use tokio::sync::oneshot;

/// Why a change was not saved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NotSaved {
    /// The store cannot write right now; try again later.
    #[error("the service cannot save messages right now ({0}); nothing was lost, try again shortly")]
    StoreDown(String),
    /// The service is stopping.
    #[error("the service is stopping")]
    Stopping,
    /// The store refused the change for good.
    #[error("the change could not be saved: {0}")]
    Failed(String),
    /// The room's partition is another process's now (several processes
    /// on one database): whatever this process decided there after losing
    /// it is not its to save, nor to send.
    #[error("this process no longer owns the room: {0}")]
    Fenced(String),
}

/// What an error says when the room it is about moved to another process
/// (the start of [`NotSaved::Fenced`]'s words): a platform that learns it
/// otherwise (the web room, of a message the new owner deleted) says it
/// with these words too, and delivery's log tells such a failure, a
/// correct fencing, from a platform failing.
pub const ROOM_MOVED: &str = "this process no longer owns the room";

/// The fate of a batch, for whoever waits on it.
pub type Ack = oneshot::Sender<Result<(), NotSaved>>;

/// Changes to save together, and who waits for them.
#[derive(Default)]
pub struct Batch {
    /// The changes, in order.
    pub ops: Vec<Op>,
    /// Fired once the ops are committed, or dropped for good.
    pub acks: Vec<Ack>,
}

/// Whether the store is writing, as `/healthz` and the runtime see it.
#[derive(Debug)]
pub struct Health {
    ok: AtomicBool,
    error: Mutex<Option<String>>,
    failures: AtomicU64,
    fenced: AtomicU64,
    commits: AtomicU64,
    commit_micros: AtomicU64,
}

impl Health {
    pub(crate) fn new() -> Health {
        Health {
            ok: AtomicBool::new(true),
            error: Mutex::new(None),
            failures: AtomicU64::new(0),
            fenced: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            commit_micros: AtomicU64::new(0),
        }
    }

    /// Whether the last write succeeded.
    pub fn is_ok(&self) -> bool {
        self.ok.load(Ordering::SeqCst)
    }

    /// Why writes are failing, while they are.
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }

    /// Failed write attempts since the start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// Batches the store refused since the start because the lease they
    /// were written under was no longer this process's (another took the
    /// room over, or the lease ran out while this process was stopped or
    /// cut off): a correct fencing, not the store failing.
    pub fn fenced(&self) -> u64 {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Transactions committed since the start, and the time they took,
    /// in seconds: every reply waits for a few commits (a person's
    /// message is stored before it is shown, a reply before it is sent),
    /// so their mean is where a slow disk shows in a reply's latency.
    pub fn commits(&self) -> (u64, f64) {
        let micros = self.commit_micros.load(Ordering::Relaxed);
        (self.commits.load(Ordering::Relaxed), micros as f64 / 1e6)
    }

    fn count_commit(&self, took: Duration) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.commit_micros.fetch_add(micros, Ordering::Relaxed);
    }

    fn count_fenced(&self) {
        self.fenced.fetch_add(1, Ordering::SeqCst);
    }

    fn set_ok(&self) {
        if !self.ok.swap(true, Ordering::SeqCst) {
            tracing::warn!("the store is writing again");
        }
        if let Ok(mut e) = self.error.lock() {
            *e = None;
        }
    }

    fn set_failing(&self, error: String) {
        self.failures.fetch_add(1, Ordering::SeqCst);
        if self.ok.swap(false, Ordering::SeqCst) {
            tracing::error!("the store cannot write: {error}; retrying, and refusing new messages meanwhile");
        }
        if let Ok(mut e) = self.error.lock() {
            *e = Some(error);
        }
    }
}

enum Msg {
    Batch(Batch),
    Stop,
}

/// Lets a platform save its own records (the web room's shown messages)
/// in the same ordered stream as the runtime's, and wait for them.
#[derive(Clone)]
pub struct Saver {
    tx: mpsc::Sender<Msg>,
    health: Arc<Health>,
    /// Carried by every save: written only while this process holds the
    /// room's partition (several processes on one database).
    fence: Option<tactful_store::Lease>,
}

impl std::fmt::Debug for Saver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Saver").finish_non_exhaustive()
    }
}

impl Saver {
    /// This saver, its saves written only under `lease`.
    pub(crate) fn fenced(mut self, lease: Option<tactful_store::Lease>) -> Saver {
        self.fence = lease;
        self
    }

    fn with_fence(&self, mut ops: Vec<Op>) -> Vec<Op> {
        if let Some(lease) = &self.fence {
            ops.insert(0, Op::Fence(lease.clone()));
        }
        ops
    }

    /// Saves `ops` in one transaction; resolves once they are committed.
    pub async fn save(&self, ops: Vec<Op>) -> Result<(), NotSaved> {
        let ops = self.with_fence(ops);
        let (ack, done) = oneshot::channel();
        self.tx
            .send(Msg::Batch(Batch { ops, acks: vec![ack] }))
            .map_err(|_| NotSaved::Stopping)?;
        done.await.unwrap_or(Err(NotSaved::Stopping))
    }

    /// Queues `ops` without waiting (an edit whose loss a crash may cost).
    pub fn save_later(&self, ops: Vec<Op>) {
        let _ = self.tx.send(Msg::Batch(Batch {
            ops: self.with_fence(ops),
            acks: Vec::new(),
        }));
    }

    /// The store's health.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }
}

/// The store's writer thread.
pub struct Persister {
    tx: mpsc::Sender<Msg>,
    thread: Option<JoinHandle<()>>,
    health: Arc<Health>,
    stopping: Arc<AtomicBool>,
}

/// How many queued batches one transaction takes at most.
const MAX_MERGE: usize = 256;
/// The first wait before trying a failed write again; doubles up to
/// [`MAX_RETRY_WAIT`].
const FIRST_RETRY_WAIT: Duration = Duration::from_millis(50);
const MAX_RETRY_WAIT: Duration = Duration::from_secs(2);
/// While stopping, a store that still cannot write is given this long.
const STOP_GRACE: Duration = Duration::from_secs(10);

impl Persister {
    /// Starts the writer thread owning `store`.
    pub fn start(mut store: Store) -> std::io::Result<Persister> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let health = Arc::new(Health::new());
        let stopping = Arc::new(AtomicBool::new(false));
        let (h, stop) = (health.clone(), stopping.clone());
        let thread = std::thread::Builder::new()
            .name("tactful-store".into())
            .spawn(move || {
                if let Err(e) = store.writer_upkeep() {
                    tracing::warn!("the store checkpoints inside commits: {e}");
                }
                write_loop(&mut store, &rx, &h, &stop);
            })?;
        Ok(Persister {
            tx,
            thread: Some(thread),
            health,
            stopping,
        })
    }

    /// Queues a batch. Never blocks.
    pub fn save(&self, batch: Batch) {
        if batch.ops.is_empty() && batch.acks.is_empty() {
            return;
        }
        if let Err(mpsc::SendError(Msg::Batch(batch))) = self.tx.send(Msg::Batch(batch)) {
            tracing::error!("the store writer has stopped: changes are not saved");
            for ack in batch.acks {
                let _ = ack.send(Err(NotSaved::Stopping));
            }
        }
    }

    /// A handle platforms save through.
    pub fn saver(&self) -> Saver {
        Saver {
            tx: self.tx.clone(),
            health: self.health.clone(),
            fence: None,
        }
    }

    /// The store's health.
    pub fn health(&self) -> Arc<Health> {
        self.health.clone()
    }

    /// Writes everything queued, then stops the thread.
    pub fn finish(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        let _ = self.tx.send(Msg::Stop);
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

/// Commits after which the writer checkpoints once nothing is queued.
const CHECKPOINT_WHEN_IDLE: u32 = 64;
/// Commits after which it checkpoints even with work queued, so the WAL
/// stays bounded (a few MiB) under a load that never pauses.
const CHECKPOINT_AT_LEAST: u32 = 1024;

fn write_loop(store: &mut Store, rx: &mpsc::Receiver<Msg>, health: &Health, stopping: &AtomicBool) {
    let mut stop = false;
    let mut next: Option<Msg> = None;
    let mut commits = 0u32;
    while !stop {
        let first = match next.take() {
            Some(m) => m,
            None => match rx.recv() {
                Ok(m) => m,
                Err(_) => return,
            },
        };
        let mut batch = match first {
            Msg::Batch(b) => b,
            Msg::Stop => {
                stop = true;
                Batch::default()
            }
        };
        let mut parts = vec![Part::of(&batch)];
        stop |= merge(rx, &mut batch, &mut parts);
        let mut wait = FIRST_RETRY_WAIT;
        let mut failing_since: Option<Instant> = None;
        let outcome = loop {
            let began = Instant::now();
            match store.apply(&batch.ops) {
                Ok(()) => {
                    health.count_commit(began.elapsed());
                    health.set_ok();
                    break Ok(());
                }
                Err(e) if e.is_transient() => {
                    health.set_failing(e.to_string());
                    let since = *failing_since.get_or_insert_with(Instant::now);
                    if stopping.load(Ordering::SeqCst) && since.elapsed() > STOP_GRACE {
                        tracing::error!(
                            ops = batch.ops.len(),
                            "stopping with changes the store never took: {e}"
                        );
                        break Err(NotSaved::StoreDown(e.to_string()));
                    }
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(MAX_RETRY_WAIT);
                    // Later changes join the retry, in order.
                    stop |= merge(rx, &mut batch, &mut parts);
                }
                Err(StoreError::Fenced { .. }) => {
                    health.set_ok();
                    apply_apart(store, &mut batch, &parts, health);
                    break Ok(());
                }
                Err(e) => {
                    tracing::error!(ops = batch.ops.len(), "could not save to the store, dropped: {e}");
                    break Err(NotSaved::Failed(e.to_string()));
                }
            }
        };
        // (Batches written apart were answered one by one.)
        for ack in batch.acks {
            let _ = ack.send(outcome.clone());
        }
        // The checkpoint's disk syncs come after the waiters were
        // answered, and while nothing waits if that can be.
        commits += 1;
        if commits >= CHECKPOINT_WHEN_IDLE && !stop {
            next = rx.try_recv().ok();
            if next.is_none() || commits >= CHECKPOINT_AT_LEAST {
                if let Err(e) = store.idle() {
                    tracing::debug!("a WAL checkpoint did not run: {e}");
                }
                commits = 0;
            }
        }
    }
}

/// Where one of the batches merged into a transaction ends: its ops and
/// acks are those up to these lengths.
#[derive(Clone, Copy)]
struct Part {
    ops: usize,
    acks: usize,
}

impl Part {
    fn of(batch: &Batch) -> Part {
        Part {
            ops: batch.ops.len(),
            acks: batch.acks.len(),
        }
    }
}

/// Merges queued batches into `batch`, noting where each ends in `parts`;
/// whether a stop was read.
fn merge(rx: &mpsc::Receiver<Msg>, batch: &mut Batch, parts: &mut Vec<Part>) -> bool {
    let mut stop = false;
    for msg in rx.try_iter().take(MAX_MERGE) {
        match msg {
            Msg::Batch(more) => {
                batch.ops.extend(more.ops);
                batch.acks.extend(more.acks);
                parts.push(Part::of(batch));
            }
            Msg::Stop => stop = true,
        }
    }
    stop
}

/// Writes the batches merged into `batch` one by one, after the whole was
/// refused because one of them was fenced out: each is answered with its
/// own fate. A store that fails otherwise meanwhile (it went down) fails
/// the rest as it would have failed the whole. Each batch fenced out is
/// counted in `health`.
fn apply_apart(store: &mut Store, batch: &mut Batch, parts: &[Part], health: &Health) {
    let (mut ops_at, mut acks_at) = (0, 0);
    let mut acks = std::mem::take(&mut batch.acks).into_iter();
    for part in parts {
        let ops = &batch.ops[ops_at..part.ops];
        let outcome = match store.apply(ops) {
            Ok(()) => Ok(()),
            Err(StoreError::Fenced { key, epoch }) => {
                health.count_fenced();
                tracing::info!(
                    ops = ops.len(),
                    "not saved: the lease {key} (epoch {epoch}) is no longer this process's; the room's new owner carries on"
                );
                Err(NotSaved::Fenced(key))
            }
            Err(e) => {
                tracing::error!(ops = ops.len(), "could not save to the store, dropped: {e}");
                Err(NotSaved::Failed(e.to_string()))
            }
        };
        for ack in acks.by_ref().take(part.acks - acks_at) {
            let _ = ack.send(outcome.clone());
        }
        (ops_at, acks_at) = (part.ops, part.acks);
    }
}

#[cfg(test)]
mod tests {
    use tactful_core::{Message, Timestamp};

    use super::*;

    fn heard(id: &str) -> Op {
        Op::Heard(Message::new(id, "lobby", "alice", "hello", Timestamp(1)))
    }

    /// Batches merged into one transaction, one of them written under a
    /// lease another process took over: only that one is refused (its
    /// waiters told so), its neighbours are written.
    #[test]
    fn a_fenced_batch_is_refused_alone_not_with_the_batches_merged_with_it() {
        let Some(schema) = tactful_store::testing::Schema::new() else {
            return;
        };
        let at = schema.location();
        let mut cluster = tactful_store::Cluster::join(&at, "t", Duration::from_secs(10)).expect("joins");
        let kept = cluster.acquire("partition:1").expect("asks").expect("free");
        let lost = cluster.acquire("partition:2").expect("asks").expect("free");
        schema
            .exec("UPDATE leases SET expires_at = now() - interval '1 second' WHERE key = 'partition:2'")
            .expect("runs out");
        let mut store = Store::open_at(&at).expect("opens");
        // Queued before the writer reads any: it merges them all.
        let (tx, rx) = mpsc::channel();
        let mut waits = Vec::new();
        for ops in [
            vec![Op::Fence(kept.clone()), heard("m1")],
            vec![Op::Fence(lost), heard("m2")],
            vec![heard("m3")],
            vec![Op::Fence(kept), heard("m4")],
        ] {
            let (ack, done) = oneshot::channel();
            waits.push(done);
            tx.send(Msg::Batch(Batch { ops, acks: vec![ack] }))
                .expect("queued");
        }
        tx.send(Msg::Stop).expect("queued");
        let health = Arc::new(Health::new());
        write_loop(&mut store, &rx, &health, &AtomicBool::new(false));
        let outcomes: Vec<Result<(), NotSaved>> = waits
            .into_iter()
            .map(|mut w| w.try_recv().expect("answered"))
            .collect();
        assert_eq!(
            outcomes,
            [
                Ok(()),
                Err(NotSaved::Fenced("partition:2".into())),
                Ok(()),
                Ok(())
            ]
        );
        assert!(health.is_ok(), "a lost lease is not the store failing");
        let kept: Vec<Option<String>> = schema
            .column("SELECT id FROM messages ORDER BY id")
            .expect("reads");
        assert_eq!(kept, [Some("m1".into()), Some("m3".into()), Some("m4".into())]);
        // Counted once (the merged transaction it made fail is not), and
        // shown in /metrics.
        assert_eq!(health.fenced(), 1);
        let metrics = crate::metrics::Metrics::new();
        metrics.watch_store(health.clone());
        let text = metrics.render();
        let count = text
            .lines()
            .find_map(|l| l.strip_prefix("tactful_fenced_writes_total "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        assert_eq!(count, Some(1), "{text}");
        assert_eq!(health.failures(), 0, "nor a failed write: {text}");
    }

    /// The words that tell a moved room from a failing platform are the
    /// fenced refusal's own.
    #[test]
    fn a_fenced_refusal_says_the_room_moved() {
        let said = NotSaved::Fenced("partition:2".into()).to_string();
        assert!(said.starts_with(ROOM_MOVED), "{said}");
    }

    /// The writer checkpoints by itself (SQLite's own checkpoints are off
    /// on its connection): four thousand commits leave a WAL the size of
    /// a thousand at most, not of all of them, and a new file has small
    /// pages.
    #[tokio::test]
    async fn the_writer_keeps_the_wal_short_and_pages_small() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("t.db");
        let persister = Persister::start(Store::open(&path).expect("opens")).expect("starts");
        let saver = persister.saver();
        for i in 0..4000 {
            let m = Message::new(
                format!("m{i}"),
                format!("room{}", i % 20).as_str(),
                "alice",
                "hello there",
                Timestamp(i),
            );
            saver.save(vec![Op::Heard(m)]).await.expect("saved");
        }
        let wal = std::fs::metadata(dir.path().join("t.db-wal"))
            .expect("a WAL")
            .len();
        // About 5 KiB a commit: 4,000 commits unchecked would be some
        // 20 MB; a checkpoint at least every 1,024 commits keeps it under
        // about 5 MB whatever the timing.
        assert!(wal < 7_000_000, "the WAL grew to {wal} bytes");
        persister.finish();
        let db = rusqlite::Connection::open(&path).expect("opens");
        let page: i64 = db.query_row("PRAGMA page_size", [], |r| r.get(0)).expect("reads");
        assert_eq!(page, 1024);
        let heard: i64 = db
            .query_row("SELECT count(*) FROM messages", [], |r| r.get(0))
            .expect("reads");
        assert_eq!(heard, 4000, "nothing lost");
    }
}
