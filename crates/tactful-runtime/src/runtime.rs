//! The live runtime: the sans-I/O engine driven by real time.
//!
//! One task owns the [`Engine`] ([`crate::driver`]): it takes inbound
//! messages, agent results and timer wake-ups in the order they arrive (so
//! a room's messages are decided in arrival order), and acts on every
//! output. Deciding takes microseconds and never waits on an agent: each
//! turn runs in a task of its own (at most `max_concurrent_turns` at once,
//! the rest queued in order), so a slow agent in one room never delays
//! another room. Timers use the same engine calls as `tactful replay`
//! ([`Engine::poll_timeout`], [`Engine::handle_timeout`]), so the live
//! service and a replay of the same events decide the same things.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tactful_agents::Agent;
use tactful_agents::hooks::Hooks;
use tactful_core::{Engine, EngineConfig, EngineError};
use tactful_store::{LoadLimits, Store, StoreError};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::connections::Connections;
use crate::delivery::DeliveryConfig;
use crate::driver::Driver;
use crate::persist::{Health, Persister};
use crate::platform::Platform;
use crate::restart::Restart;

pub use crate::clock::wall_clock;
pub(crate) use crate::events::Event;
pub use crate::events::{Personas, TraceEvent};
pub use crate::handle::RuntimeHandle;

/// The default for [`RuntimeConfig::max_concurrent_turns`].
pub const DEFAULT_MAX_CONCURRENT_TURNS: usize = 16;

/// Everything the runtime is built from.
pub struct RuntimeConfig {
    /// The engine's config.
    pub engine: EngineConfig,
    /// Agent backends by `[agents]` key.
    pub agents: HashMap<String, Arc<dyn Agent>>,
    /// Delivery settings.
    pub delivery: DeliveryConfig,
    /// How long shutdown waits for turns in flight before cancelling them.
    pub shutdown_grace: Duration,
    /// Where state is saved, and restored from at start. `None` keeps
    /// everything in memory (replays, some tests).
    pub store: Option<Store>,
    /// Agent turns running at once, process-wide; more wait in a queue, in
    /// the order they were decided. One person opening sixty rooms and
    /// mentioning six personas in each must not start 360 agent processes,
    /// nor a restart start every unfinished turn at once.
    pub max_concurrent_turns: usize,
    /// The before-send hooks the engine's `hooks` names.
    pub hooks: Hooks,
    /// Sharing the store with other processes (PostgreSQL): this process
    /// owns only the rooms of the partitions it holds, and every message
    /// received goes through the store's inbox to its room's owner.
    pub cluster: Option<crate::cluster::ClusterConfig>,
}

/// Why the runtime could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The engine refused its config.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// The store could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// There is nowhere to deliver replies.
    #[error("no platform is configured")]
    NoPlatform,
    /// The store's writer thread could not start.
    #[error("cannot start the store writer: {0}")]
    Thread(#[from] std::io::Error),
}

/// A running runtime.
pub struct Runtime {
    handle: RuntimeHandle,
    health: Option<Arc<Health>>,
    task: JoinHandle<()>,
    /// Sharing the store with other processes.
    coordinator: Option<crate::cluster::Coordinator>,
}

impl Runtime {
    /// Starts the engine task, delivering to `platforms` (a room goes to the
    /// first that [`Platform::owns`] it). With a store, the engine is first rebuilt
    /// from it: reply turns that were running are asked again, replies
    /// decided but not confirmed are sent again from the first part that
    /// had not gone out, and placeholders left on screen become their reply
    /// or are removed. `trace` receives every engine output and delivery
    /// confirmation, for logs, metrics and tests.
    pub fn start(
        config: RuntimeConfig,
        platforms: Vec<Arc<dyn Platform>>,
        trace: Option<mpsc::UnboundedSender<TraceEvent>>,
    ) -> Result<Runtime, StartError> {
        if platforms.is_empty() {
            return Err(StartError::NoPlatform);
        }
        let limits = LoadLimits {
            history: config.engine.context.history,
            own_ids: config.engine.context.own_ids,
        };
        let mut engine = Engine::new(config.engine)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let mut coordinator = None;
        let mut id_block = None;
        let (persist, restart, key_prefix) = match (config.store, &config.cluster) {
            // Rooms come as their partitions are taken (`cluster`).
            (Some(mut store), Some(cluster)) => {
                let key_prefix = store.id()?;
                let (c, tenure, block) =
                    crate::cluster::Coordinator::start(store.location(), cluster, limits, tx.clone())?;
                let mut counters = engine.counters();
                counters.next_turn = block;
                for (_, sent) in &mut counters.sent {
                    *sent = block;
                }
                engine.restore_counters(&counters);
                coordinator = Some((c, tenure));
                id_block = Some(block);
                (Some(Persister::start(store)?), Restart::default(), key_prefix)
            }
            (Some(mut store), None) => {
                let key_prefix = store.id()?;
                let restored = store.load(limits)?;
                let last_runs = crate::schedules::last_runs(&store.platform_state()?);
                let restart = Restart::rebuild(&mut engine, restored, wall_clock());
                engine.start_schedules(wall_clock(), &last_runs);
                (Some(Persister::start(store)?), restart, key_prefix)
            }
            // No store: keys only need to be unique to this process.
            (None, _) => {
                engine.start_schedules(wall_clock(), &[]);
                (
                    None,
                    Restart::default(),
                    format!("{:x}", wall_clock().as_millis()),
                )
            }
        };
        let fences = coordinator.as_ref().map(|_| crate::handle::Fences::default());
        let handle = RuntimeHandle {
            tx: tx.clone(),
            saver: persist.as_ref().map(Persister::saver),
            fences: fences.clone(),
            connections: Connections::default(),
            id_block,
            started: wall_clock(),
        };
        let health = persist.as_ref().map(Persister::health);
        let driver = Driver::new(
            engine,
            crate::driver::Parts {
                agents: config.agents,
                hooks: Arc::new(config.hooks),
                delivery: config.delivery,
                grace: config.shutdown_grace,
                platforms,
                trace,
                tx,
                persist,
                max_turns: config.max_concurrent_turns.max(1),
                key_prefix: Arc::from(key_prefix),
                owned: coordinator.as_ref().map(|(c, tenure)| {
                    let fences = fences.clone().unwrap_or_default();
                    crate::driver::Owned::new(tenure.clone(), c.giving_back(), fences)
                }),
            },
        );
        let task = tokio::spawn(driver.run(rx, restart));
        Ok(Runtime {
            handle,
            health,
            task,
            coordinator: coordinator.map(|(c, _)| c),
        })
    }

    /// Connects platform accounts: at once when this process is alone with
    /// its store; when it shares it, each while this process holds its
    /// lease (another process connects it when this one dies).
    pub fn hold(&self, connections: Vec<crate::cluster::Leased>) {
        match &self.coordinator {
            Some(c) => c.hold(connections),
            None => {
                // Alone: every account, from the state read at the start
                // (nobody else saved any since).
                let saved = crate::cluster::Saved::new();
                for c in connections {
                    let _ = (c.connect)(Some((crate::platform::Held::Every, &saved)));
                }
            }
        }
    }

    /// A handle for platform adapters.
    pub fn handle(&self) -> RuntimeHandle {
        self.handle.clone()
    }

    /// Every platform account's connection state: what `/healthz` and the
    /// metrics report besides the store.
    pub fn connections(&self) -> Connections {
        self.handle.connections.clone()
    }

    /// Whether the store is writing (`None` without a store): what
    /// `/healthz` reports.
    pub fn health(&self) -> Option<Arc<Health>> {
        self.health.clone()
    }

    /// Stops taking messages, lets turns in flight finish within the grace
    /// period (then cancels them), delivers what was decided, and returns.
    pub async fn shutdown(self) {
        let (done_tx, done_rx) = oneshot::channel();
        if self.handle.tx.send(Event::Shutdown(done_tx)).is_ok() {
            let _ = done_rx.await;
        }
        let _ = self.task.await;
        // Everything is saved: the others may take the rooms at once.
        if let Some(c) = self.coordinator {
            c.stop().await;
        }
    }
}
