//! Several tactful processes on one PostgreSQL database: the coordinator
//! that keeps this process's share of the rooms.
//!
//! Processes find each other only through the database
//! ([`tactful_store::Cluster`]). The coordinator runs on a thread of its
//! own (the cluster calls block) and, every third of a lease (every second
//! at least):
//! 1. heartbeats and balances: renews the leases it holds, takes free or
//!    expired partitions up to its share, names those above it;
//! 2. tells the engine task: partitions lost (a renewal that failed: this
//!    process was stopped or cut off past the expiry) are dropped at once;
//!    partitions above its share are handed over and released once their
//!    rooms delivered and saved what they decided; partitions gained are
//!    read back from the store and adopted;
//! 3. reads the inbox of what it holds;
//! 4. keeps the bot accounts it holds ([`Leased`]: one process at a time
//!    polls a Telegram token, listens to a Slack app, keeps a Discord
//!    gateway session), shared out over the processes like the
//!    partitions, and takes over those whose holder died;
//! 5. reads what the other processes' rooms spent of the personas' own
//!    budgets, for the engine to count with its own.
//!
//! Between rounds it reads the inbox rows a `NOTIFY` names in a partition
//! it holds (each new message's, by its key), and the others' spend whenever one says
//! it changed (at most every [`SPEND_READ_GAP`]). The [`Tenure`] tells the delivery
//! workers until when the leases are surely held (the local clock, from
//! before the renewal was asked): past it, nothing is posted until a
//! renewal comes, so a process that was stopped past its lease never posts
//! what its rooms' new owners are posting; and a watchdog
//! ([`hold::watch_tenure`]) disconnects the bot accounts when it passes,
//! however long the coordinator's own call to the store hangs.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use tactful_core::{PersonaId, RoomId, Timestamp};
use tactful_store::{
    Balance, Cluster, INBOX_CHANNEL, Lease, LoadLimits, Location, PARTITIONS, SPEND_CHANNEL, Store,
    StoreError, account_key, partition_key, partition_of,
};

use crate::platform::Held;
use tokio::sync::{mpsc, oneshot, watch};

use crate::events::{Adoption, Event, Spend};

/// How this process shares its database with others.
#[derive(Clone, Debug)]
pub struct ClusterConfig {
    /// How long a lease lasts without renewal: after a process dies, its
    /// rooms answer again within about this long.
    pub lease: Duration,
    /// What the process says about itself to the others (host, pid,
    /// listen address): what an operator reads in `members`.
    pub about: String,
}

/// The default lease: a dead process's rooms move within ten seconds.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(10);

/// Until when this process's leases are surely held. Without a cluster,
/// always.
#[derive(Clone, Debug)]
pub(crate) struct Tenure(Option<watch::Receiver<Option<Instant>>>);

impl Tenure {
    /// A process alone with its store.
    pub fn always() -> Tenure {
        Tenure(None)
    }

    /// Waits until the leases are surely held; `false` if they never will
    /// be again (the coordinator stopped).
    pub async fn held(&mut self) -> bool {
        let Some(rx) = &mut self.0 else {
            return true;
        };
        loop {
            if rx.borrow_and_update().is_some_and(|until| Instant::now() < until) {
                return true;
            }
            // Past it: until a renewal says otherwise (or the room is
            // taken from this worker).
            let until = *rx.borrow();
            let wait = until.map_or(Duration::from_secs(3600), |u| {
                u.saturating_duration_since(Instant::now())
            });
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return false },
                () = tokio::time::sleep(wait) => {}
            }
        }
    }
}

/// A platform's connections, each account held by one process at a time
/// (one `getUpdates` poller per Telegram token, one Socket Mode listener
/// per Slack app, one gateway session per Discord bot; IRC's and Matrix's
/// accounts all with their rooms).
pub struct Leased {
    /// How its accounts are held.
    pub held_by: HeldBy,
    /// Connects the accounts this process holds now, from the state the
    /// store holds now (offsets the last holder saved, read by the
    /// coordinator just before), in place of what was connected; `None`:
    /// disconnects at once, other processes hold
    /// them all (or, with `None`, this process's tenure ran out). Called
    /// on a thread that may block (the coordinator's, or the watchdog's
    /// blocking task), inside the runtime, one call at a time, each time
    /// what this process holds changes. Whether it did: one
    /// that could not (the store could not be read) leaves the old
    /// connection running, and is asked again at the next round.
    pub connect: Connect,
}

/// The platforms' state the store holds (`matrix:sync:docs`, Telegram
/// offsets…), by key.
pub type Saved = BTreeMap<String, String>;

/// How a [`Leased`] connects (see [`Leased::connect`]).
pub type Connect = Box<dyn Fn(Option<(Held, &Saved)>) -> bool + Send>;

/// What gives a process a platform's accounts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeldBy {
    /// A lease per account ([`tactful_store::account_key`]:
    /// `account:telegram:docs`), shared out over the processes as the
    /// partitions are: sending needs no connection (each room's owner
    /// posts over HTTP), so any process may listen with any account.
    Accounts {
        /// The `[platforms]` key.
        platform: String,
        /// The personas with an account there.
        personas: Vec<PersonaId>,
    },
    /// The lease of the partition every room of the platform belongs to
    /// ([`tactful_store::connection_partition`]): IRC can only post through
    /// its connection, Matrix through its logged-in client, so the process
    /// owning their rooms holds it, from the
    /// moment it takes the partition until it lets it go (after a
    /// hand-over, once the rooms have delivered what they decided).
    Partition(u32),
}

impl HeldBy {
    /// The lease keys of the accounts held one by one (none when held
    /// with a partition).
    fn account_keys(&self) -> Vec<String> {
        match self {
            HeldBy::Accounts { platform, personas } => {
                personas.iter().map(|p| account_key(platform, p)).collect()
            }
            HeldBy::Partition(_) => Vec::new(),
        }
    }

    /// The accounts the leases `now` give.
    fn held(&self, now: &BTreeMap<String, Lease>) -> Held {
        match self {
            HeldBy::Accounts { platform, personas } => Held::Only(
                personas
                    .iter()
                    .filter(|p| now.contains_key(&account_key(platform, p)))
                    .cloned()
                    .collect(),
            ),
            HeldBy::Partition(_) => Held::Every,
        }
    }
}

impl std::fmt::Display for HeldBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HeldBy::Accounts { platform, .. } => write!(f, "{platform} accounts"),
            HeldBy::Partition(p) => write!(f, "{}", partition_key(*p)),
        }
    }
}

impl std::fmt::Debug for Leased {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leased")
            .field("held_by", &self.held_by)
            .finish_non_exhaustive()
    }
}

enum Wake {
    /// Connections to hold when this process can.
    Connections(Vec<Leased>),
    /// A partition has a message waiting (in this row, when named).
    Inbox(tactful_store::InboxWake),
    /// Notifications may have been missed: read everything held.
    Read,
    /// A room's spend of a persona's budget changed, in this partition
    /// (`None`: anywhere, notifications may have been missed).
    Spend(Option<u32>),
    /// Messages handed to the engine that it could not take (the store
    /// could not write): hand them again at the next read.
    Untaken(Vec<i64>),
    /// The engine task ended: leave.
    Stop,
}

/// Gives the coordinator back inbox messages the engine task could not
/// take (the store could not write): they stay in the inbox, and are
/// handed again at the next read instead of waiting, forgotten, until the
/// partition moves.
#[derive(Clone)]
pub(crate) struct GiveBack(std_mpsc::Sender<Wake>);

impl GiveBack {
    pub(crate) fn untaken(&self, seqs: Vec<i64>) {
        if !seqs.is_empty() {
            let _ = self.0.send(Wake::Untaken(seqs));
        }
    }
}

/// The running coordinator.
pub(crate) struct Coordinator {
    wake: std_mpsc::Sender<Wake>,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The notification listeners and the tenure's watchdog.
    listeners: [tokio::task::JoinHandle<()>; 3],
}

impl Coordinator {
    /// Joins the database's processes and starts coordinating; returns the
    /// coordinator, the tenure, and the first id of this process's block.
    pub fn start(
        at: &Location,
        config: &ClusterConfig,
        limits: LoadLimits,
        engine: mpsc::UnboundedSender<Event>,
    ) -> Result<(Coordinator, Tenure, u64), StoreError> {
        let mut cluster = Cluster::join(at, &config.about, config.lease)?;
        let block = cluster.id_block()?;
        let store = Store::open_at(at)?;
        tracing::info!(
            member = cluster.id(),
            lease_s = config.lease.as_secs_f64(),
            "joined the processes sharing the store"
        );
        let (tenure_tx, tenure_rx) = watch::channel(None);
        let (wake_tx, wake_rx) = std_mpsc::channel();
        let mut state = State::new(cluster, store, limits, engine, tenure_tx, config.lease);
        let watchdog = tokio::spawn(hold::watch_tenure(tenure_rx.clone(), state.connections.clone()));
        let thread = std::thread::Builder::new()
            .name("tactful-cluster".into())
            .spawn(move || {
                let _span = tracing::info_span!("cluster", member = %state.cluster.id()).entered();
                state.run(&wake_rx);
            })
            .map_err(StoreError::Io)?;
        let listener = tokio::spawn(forward_notifications(
            at.clone(),
            INBOX_CHANNEL,
            wake_tx.clone(),
            |payload| tactful_store::InboxWake::parse(payload).map(Wake::Inbox),
            || Wake::Read,
        ));
        let spend_listener = tokio::spawn(forward_notifications(
            at.clone(),
            SPEND_CHANNEL,
            wake_tx.clone(),
            |payload| Some(Wake::Spend(payload.parse::<u32>().ok())),
            || Wake::Spend(None),
        ));
        Ok((
            Coordinator {
                wake: wake_tx,
                thread: Some(thread),
                listeners: [listener, spend_listener, watchdog],
            },
            Tenure(Some(tenure_rx)),
            block,
        ))
    }

    /// Where the engine task gives back inbox messages it could not take.
    pub(crate) fn giving_back(&self) -> GiveBack {
        GiveBack(self.wake.clone())
    }

    /// Hands the coordinator the connections to hold while this process
    /// has their lease.
    pub fn hold(&self, connections: Vec<Leased>) {
        let _ = self.wake.send(Wake::Connections(connections));
    }

    /// Leaves the others (every lease let go at once) and stops. Call once
    /// the engine task has saved everything.
    pub async fn stop(mut self) {
        for l in &self.listeners {
            l.abort();
        }
        let _ = self.wake.send(Wake::Stop);
        if let Some(t) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || t.join()).await;
        }
    }
}

/// Forwards the `NOTIFY`s of `channel` to the coordinator as `wake` makes
/// them, listening again when the connection ends; `missed` is sent each
/// time it (re)starts listening (what came meanwhile is read then).
async fn forward_notifications(
    at: Location,
    channel: &'static str,
    wake: std_mpsc::Sender<Wake>,
    what: fn(&str) -> Option<Wake>,
    missed: fn() -> Wake,
) {
    loop {
        match tactful_store::listen(&at, channel) {
            Ok(mut rx) => {
                if wake.send(missed()).is_err() {
                    return;
                }
                while let Some(n) = rx.recv().await {
                    if let Some(w) = what(&n.payload)
                        && wake.send(w).is_err()
                    {
                        return;
                    }
                }
                tracing::warn!(channel, "listening to other processes stopped; listening again");
            }
            Err(e) => tracing::warn!(channel, "cannot listen to other processes: {e}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The longest wait between two rounds (a third of the lease, unless
/// that is longer).
const ROUND_AT_MOST: Duration = Duration::from_secs(1);

/// The shortest time between two reads of the spend other processes
/// announced.
const SPEND_READ_GAP: Duration = Duration::from_millis(100);

/// How many inbox rows notifications may name before they are read with
/// the rest instead.
const NAMED_AT_MOST: usize = 20_000;

/// How many waiting messages one read of the inbox takes.
const INBOX_READ: usize = 500;

struct State {
    cluster: Cluster,
    store: Store,
    limits: LoadLimits,
    keys: Vec<String>,
    held: BTreeMap<u32, Lease>,
    /// Inbox rows handed to the engine and not yet seen decided, with
    /// their partition: handed again if this process takes the partition
    /// anew (the decision of a lost one was refused).
    handed: HashMap<i64, u32>,
    engine: mpsc::UnboundedSender<Event>,
    tenure: watch::Sender<Option<Instant>>,
    ttl: Duration,
    /// Whether the last round failed (said once per streak).
    failing: bool,
    /// Whether the inbox must be read whole before a notification's rows
    /// are read alone: a read failed, so older rows may wait unread before
    /// the ones named.
    whole_due: bool,
    /// The connections to hold, with the leases they are connected
    /// under, by key (shared with the tenure's watchdog).
    connections: Holding,
    /// Partitions above this process's share, being handed over.
    releasing: BTreeMap<u32, Lease>,
    /// The hand-overs under way: their partitions, and the engine task's
    /// word once their rooms delivered and saved everything.
    handovers: Vec<(Vec<u32>, oneshot::Receiver<()>)>,
    /// The runtime connections start in.
    tokio: tokio::runtime::Handle,
    /// What the engine task was last told other processes' rooms spent.
    spend_told: Option<Vec<(tactful_core::PersonaId, Timestamp, u64)>>,
}

impl State {
    /// A member's state before its first round: nothing held, no
    /// connection handed over yet; connections start in the current
    /// runtime.
    fn new(
        cluster: Cluster,
        store: Store,
        limits: LoadLimits,
        engine: mpsc::UnboundedSender<Event>,
        tenure: watch::Sender<Option<Instant>>,
        ttl: Duration,
    ) -> State {
        State {
            cluster,
            store,
            limits,
            keys: (0..PARTITIONS).map(partition_key).collect(),
            held: BTreeMap::new(),
            handed: HashMap::new(),
            engine,
            tenure,
            ttl,
            failing: false,
            whole_due: true,
            connections: Holding::default(),
            releasing: BTreeMap::new(),
            handovers: Vec::new(),
            tokio: tokio::runtime::Handle::current(),
            spend_told: None,
        }
    }

    fn run(&mut self, wake: &std_mpsc::Receiver<Wake>) {
        // Often enough that a dead process's partitions are taken within a
        // second of running out, and a renewal is never late.
        let every = (self.ttl / 3).min(ROUND_AT_MOST);
        let mut next = Instant::now();
        let mut read = false;
        // Inbox rows named by notifications: read alone when nothing
        // asks for a whole read.
        let mut named: Vec<i64> = Vec::new();
        let mut spend = false;
        let mut spend_read = Instant::now();
        loop {
            let until = if spend {
                next.min(spend_read + SPEND_READ_GAP)
            } else {
                next
            };
            let timeout = until.saturating_duration_since(Instant::now());
            let mut woken = match wake.recv_timeout(timeout) {
                Ok(w) => vec![w],
                Err(std_mpsc::RecvTimeoutError::Timeout) => Vec::new(),
                Err(std_mpsc::RecvTimeoutError::Disconnected) => break,
            };
            woken.extend(wake.try_iter());
            for w in woken {
                match w {
                    Wake::Inbox(w) if self.held.contains_key(&w.part) => match w.seq {
                        Some(seq) => named.push(seq),
                        None => read = true,
                    },
                    Wake::Inbox(_) => {}
                    Wake::Read => read = true,
                    // This process's own spend changes nothing it reads.
                    Wake::Spend(part) => spend |= part.is_none_or(|p| !self.held.contains_key(&p)),
                    Wake::Untaken(seqs) => {
                        self.untaken(&seqs);
                        read = true;
                    }
                    Wake::Connections(c) => {
                        lock(&self.connections).extend(c.into_iter().map(|l| (l, BTreeMap::new())));
                        next = Instant::now();
                    }
                    Wake::Stop => {
                        self.leave();
                        return;
                    }
                }
            }
            if Instant::now() >= next {
                next = Instant::now() + every;
                match self.round() {
                    Ok(()) => read = true,
                    Err(e) => self.failed(&e),
                }
            }
            if !self.handovers.is_empty() {
                if let Err(e) = self.let_go_handed_over() {
                    self.failed(&e);
                }
                self.follow_partitions();
            }
            // Announced spend is read at once, at most ten times a second
            // (a round reads it anyway); after the round's adoptions.
            if spend && spend_read.elapsed() >= SPEND_READ_GAP {
                spend = false;
                spend_read = Instant::now();
                if let Err(e) = self.read_spend() {
                    self.failed(&e);
                }
            }
            // Named rows are read alone only while nothing older may wait
            // unread before them (a room's messages are handed in order),
            // and only so many at a time (a bound far above what comes
            // between two reads: a low one made whole reads, which are
            // slower, exactly when the coordinator fell behind).
            if !named.is_empty() && (self.whole_due || named.len() > NAMED_AT_MOST) {
                read = true;
            }
            if read {
                named.clear();
                // A full read does not keep the named rows waiting: under
                // load, rows in the engine's hand fill a read, and reading
                // whole at every notification is what this avoids (tried:
                // at 1,700 questions a second it queued again).
                (read, self.whole_due) = match self.read_inbox() {
                    Ok(more) => (more, false),
                    Err(e) => {
                        self.failed(&e);
                        (false, true)
                    }
                };
            } else if !named.is_empty() {
                // The rows notifications named, alone: every round reads
                // the whole inbox of the partitions held anyway.
                if let Err(e) = self.read_named(&std::mem::take(&mut named)) {
                    self.failed(&e);
                    self.whole_due = true;
                }
            }
        }
        self.leave();
    }

    /// A call to the store failed (said once per streak). The
    /// connections need nothing here: the tenure's watchdog lets them go
    /// if no renewal comes in time ([`hold::watch_tenure`]).
    fn failed(&mut self, e: &StoreError) {
        if !self.failing {
            self.failing = true;
            tracing::warn!("cannot reach the processes sharing the store: {e}; trying again");
        }
    }

    fn leave(&mut self) {
        match self.cluster.leave() {
            Ok(()) => tracing::info!("left the processes sharing the store: its rooms move at once"),
            Err(e) => tracing::warn!(
                "could not leave the processes sharing the store (its rooms move when the leases run out): {e}"
            ),
        }
    }

    /// One round: renew, balance, and tell the engine task what changed.
    fn round(&mut self) -> Result<(), StoreError> {
        let asked = Instant::now();
        let renewed = self.cluster.heartbeat()?;
        let balance = self.cluster.balance_with(&self.keys, &renewed)?;
        if std::mem::take(&mut self.failing) {
            tracing::info!("the processes sharing the store are reachable again");
        }
        // Kept even with no reader: the watchdog may subscribe later.
        self.tenure.send_replace(Some(asked + self.ttl));
        let now_held: BTreeMap<u32, Lease> = balance
            .held
            .iter()
            .filter_map(|l| Some((part_of_key(&l.key)?, l.clone())))
            .collect();
        let lost: Vec<u32> = self
            .held
            .keys()
            .filter(|p| now_held.get(p).is_none_or(|l| Some(l) != self.held.get(p)))
            .copied()
            .collect();
        // Being handed over and run out meanwhile: nothing left to let go.
        self.releasing
            .retain(|p, l| now_held.get(p).is_some_and(|now| now == l));
        if !lost.is_empty() {
            tracing::warn!(partitions = ?lost, "leases lost (this process was stopped or cut off past their expiry): their rooms are another's now");
            for p in &lost {
                self.held.remove(p);
            }
            self.spend_before_release();
            let _ = self.engine.send(Event::Release(lost, None));
        }
        // Above its share: handed over, and let go once its rooms have
        // delivered and saved (the leases are renewed meanwhile, so the
        // deliveries are not held up).
        let surplus: Vec<(u32, Lease)> = balance
            .surplus
            .iter()
            .filter_map(|l| Some((part_of_key(&l.key)?, l.clone())))
            .filter(|(p, _)| self.held.contains_key(p))
            .collect();
        if !surplus.is_empty() {
            let parts: Vec<u32> = surplus.iter().map(|(p, _)| *p).collect();
            for (p, lease) in &surplus {
                self.held.remove(p);
                self.releasing.insert(*p, lease.clone());
            }
            self.spend_before_release();
            let (done, handed_over) = oneshot::channel();
            if self
                .engine
                .send(Event::Release(parts.clone(), Some(done)))
                .is_ok()
            {
                self.handovers.push((parts, handed_over));
            }
        }
        self.let_go_handed_over()?;
        // Taken in this round (a renewal is not a gain: a partition being
        // handed over is renewed until it is let go).
        let gained: Vec<(u32, Lease)> = balance
            .gained
            .iter()
            .filter_map(|l| Some((part_of_key(&l.key)?, l.clone())))
            .filter(|(p, _)| !self.held.contains_key(p) && !self.releasing.contains_key(p))
            .collect();
        if !gained.is_empty() {
            let parts: HashSet<u32> = gained.iter().map(|(p, _)| *p).collect();
            let wanted = |room: &RoomId| parts.contains(&partition_of(room));
            let restored = self.store.load_rooms(self.limits, &wanted)?;
            let last_runs = crate::schedules::last_runs(&self.store.platform_state()?);
            // Read before the partitions count as held: a failed read must
            // not keep them from being adopted (the round's last read tries
            // again).
            let taking: Vec<u32> = parts.iter().copied().collect();
            let spent_elsewhere = match self.spend_now(&taking) {
                Ok(spend) => {
                    self.spend_told = Some(spend.clone());
                    Some(spend)
                }
                Err(e) => {
                    self.failed(&e);
                    None
                }
            };
            for (p, l) in &gained {
                self.held.insert(*p, l.clone());
            }
            self.handed.retain(|_, p| !parts.contains(p));
            tracing::debug!(gained = ?gained.iter().map(|(p, l)| (p, l.epoch)).collect::<Vec<_>>(), "partitions taken");
            let _ = self.engine.send(Event::Adopt(Box::new(Adoption {
                leases: gained,
                restored,
                last_runs,
                spent_elsewhere,
            })));
        }
        // After the adoption: a connection that comes with a partition
        // hands its first messages to rooms already adopted.
        self.keep_connections(&renewed)?;
        self.read_spend()
    }

    /// Tells the engine task what the rooms of partitions not held here
    /// spent of the personas' own budgets, when that changed. Sent after
    /// this round's hand-overs and adoptions, which the engine task takes
    /// first: its own count and this one never cover the same room.
    fn read_spend(&mut self) -> Result<(), StoreError> {
        let spend = self.spend_now(&[])?;
        if self.spend_told.as_ref() != Some(&spend) {
            self.spend_told = Some(spend.clone());
            let _ = self.engine.send(Event::SpentElsewhere(spend));
        }
        Ok(())
    }

    /// What the rooms of the partitions neither held here nor in
    /// `taking` spent, as the store says now. A partition being handed
    /// over is another's already: its rooms' spend left this engine with
    /// the `Release`.
    fn spend_now(&mut self, taking: &[u32]) -> Result<Spend, StoreError> {
        let held: Vec<u32> = self.held.keys().chain(taking).copied().collect();
        self.cluster.spent_elsewhere(&held, crate::clock::wall_clock())
    }

    /// Partitions just lost or being handed over (no longer in `held`):
    /// their rooms' spend is counted by the new holder once the engine
    /// lets them go, so it is told as another's before the `Release`,
    /// making it counted twice for a moment (a call refused) rather than
    /// nowhere (a budget overspent). A failed read is tried again at the
    /// round's end; the rooms go regardless.
    fn spend_before_release(&mut self) {
        if let Err(e) = self.read_spend() {
            self.failed(&e);
        }
    }

    /// Lets go of the partitions whose rooms have been handed over.
    fn let_go_handed_over(&mut self) -> Result<(), StoreError> {
        let mut pending = Vec::new();
        for (parts, mut done) in std::mem::take(&mut self.handovers) {
            match done.try_recv() {
                Err(oneshot::error::TryRecvError::Empty) => pending.push((parts, done)),
                // Handed over (or the engine task ended: leaving lets go).
                _ => {
                    for p in parts {
                        if let Some(lease) = self.releasing.remove(&p) {
                            self.cluster.release(&lease)?;
                        }
                    }
                }
            }
        }
        self.handovers = pending;
        Ok(())
    }

    /// Shares out the bot accounts as the partitions are (renewed in
    /// this round's heartbeat, `renewed`): takes free ones up to this
    /// process's share (their holder left or died, or none yet), lets go
    /// of those above it once disconnected, and reconnects each platform
    /// whose accounts held here changed; those held with a partition
    /// follow it.
    fn keep_connections(&mut self, renewed: &[Lease]) -> Result<(), StoreError> {
        let _inside = self.tokio.enter();
        let keys: Vec<String> = lock(&self.connections)
            .iter()
            .flat_map(|(l, _)| l.held_by.account_keys())
            .collect();
        let accounts = if keys.is_empty() {
            Balance::default()
        } else {
            self.cluster.balance_with(&keys, renewed)?
        };
        let nows: Vec<Option<BTreeMap<String, Lease>>> = lock(&self.connections)
            .iter()
            .map(|(leased, _)| {
                Some(match &leased.held_by {
                    HeldBy::Accounts { .. } => {
                        let mine = leased.held_by.account_keys();
                        accounts
                            .held
                            .iter()
                            .filter(|l| mine.contains(&l.key) && !accounts.surplus.contains(l))
                            .map(|l| (l.key.clone(), l.clone()))
                            .collect()
                    }
                    HeldBy::Partition(p) => self.partition_lease(*p),
                })
            })
            .collect();
        let stuck = self.follow_all(nows);
        // Disconnected above: another process may listen with them now
        // (not those of a platform that could not connect again without
        // them: still listened with here).
        for lease in accounts.surplus.iter().filter(|l| !stuck.contains(&l.key)) {
            tracing::info!(account = %lease.key, "above this process's share of the accounts: let go");
            self.cluster.release(lease)?;
        }
        Ok(())
    }

    /// The lease of partition `p` while this process holds it (or is
    /// handing it over), as a connection held with it keeps it.
    fn partition_lease(&self, p: u32) -> BTreeMap<String, Lease> {
        self.held
            .get(&p)
            .or_else(|| self.releasing.get(&p))
            .map(|l| (l.key.clone(), l.clone()))
            .into_iter()
            .collect()
    }

    /// The connections held with a partition, after partitions were let
    /// go between rounds.
    fn follow_partitions(&mut self) {
        let _inside = self.tokio.enter();
        let nows: Vec<Option<BTreeMap<String, Lease>>> = lock(&self.connections)
            .iter()
            .map(|(leased, _)| match leased.held_by {
                HeldBy::Partition(p) => Some(self.partition_lease(p)),
                HeldBy::Accounts { .. } => None,
            })
            .collect();
        self.follow_all(nows);
    }

    /// Follows each connection to the leases `nows` gives it (by index;
    /// `None`: left as it is), and returns the account keys of those that
    /// could not connect. The platforms' saved state (offsets, sync
    /// tokens) is read first when one connects, outside the lock: a read
    /// can hang on a silent network, and the watchdog must be able to
    /// take the lock meanwhile. Once the tenure has passed nothing
    /// connects (the watchdog may have let go already; the next round
    /// that reaches the store connects again).
    fn follow_all(&mut self, nows: Vec<Option<BTreeMap<String, Lease>>>) -> HashSet<String> {
        let connecting = lock(&self.connections)
            .iter()
            .zip(&nows)
            .any(|((_, held), now)| now.as_ref().is_some_and(|n| !n.is_empty() && n != held));
        let saved = if connecting {
            self.store
                .platform_state()
                .map_err(|e| {
                    tracing::warn!(
                        "cannot read the platforms' saved state (sync tokens, offsets) to connect; trying again at the next round: {e}"
                    );
                })
                .ok()
        } else {
            None
        };
        let surely_held = self.tenure.borrow().is_some_and(|until| Instant::now() < until);
        let mut stuck = HashSet::new();
        for ((leased, held), now) in lock(&self.connections).iter_mut().zip(nows) {
            let Some(mut now) = now else { continue };
            if !surely_held {
                now.clear();
            }
            if !follow(leased, held, now, saved.as_ref()) {
                stuck.extend(leased.held_by.account_keys());
            }
        }
        stuck
    }
}

/// The partition a lease key names.
fn part_of_key(key: &str) -> Option<u32> {
    key.strip_prefix("partition:")?.parse().ok()
}

mod hold;
mod inbox;
#[cfg(test)]
mod tests;

use hold::{Holding, follow, lock};
