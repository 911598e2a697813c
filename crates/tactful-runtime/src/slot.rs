//! A platform a config reload can replace while the runtime runs.
//!
//! The runtime's room workers keep the [`Platform`] they were given for as
//! long as the process lives; a [`PlatformSlot`] is that platform, and
//! forwards every call to whichever connection is current. Replacing it
//! (a persona's token changed, a persona was added to Telegram) says
//! goodbye on the old connection, stops its tasks, and starts the new one:
//! replies decided meanwhile wait in their room's queue and go out through
//! the new connection, and what a platform redelivers after the switch is
//! dropped as a duplicate by the engine.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::future::BoxFuture;
use tactful_core::{MsgId, RoomId};
use tokio::task::JoinHandle;

use crate::handle::RuntimeHandle;
use crate::platform::{At, Capabilities, Connected, Done, Held, OutMessage, Platform, Sent};

/// How long the old connection's goodbye may take before its tasks stop.
const GOODBYE_WAIT: Duration = Duration::from_secs(3);

/// How long a call to a platform only its connection can post to waits
/// for this process to switch that connection in (see `for_call`): the
/// lease round that hands a process the rooms hands it the connection too.
const SWITCH_WAIT: Duration = Duration::from_secs(30);

/// One platform's current connection, replaceable (see the module docs).
pub struct PlatformSlot {
    name: &'static str,
    current: RwLock<Arc<dyn Connected>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// The accounts this process may connect: every one when alone with
    /// its store; when several processes share it, those whose lease it
    /// holds (one poller per bot token), `None` while it holds none.
    held: Mutex<Option<Held>>,
    /// Woken whenever a new connection is switched in.
    switched: tokio::sync::Notify,
}

impl std::fmt::Debug for PlatformSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlatformSlot").field("name", &self.name).finish()
    }
}

impl PlatformSlot {
    /// A slot holding `platform`, the config's `[platforms.<name>]`.
    pub fn new(name: &'static str, platform: Arc<dyn Connected>) -> Arc<PlatformSlot> {
        Arc::new(PlatformSlot {
            name,
            current: RwLock::new(platform),
            tasks: Mutex::new(Vec::new()),
            held: Mutex::new(Some(Held::Every)),
            switched: tokio::sync::Notify::new(),
        })
    }

    /// The `[platforms.<name>]` key.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The connection a call should go through. A platform that can only
    /// post through its own connection (IRC, Matrix, XMPP: the store's
    /// `CONNECTION_BOUND`) is not connected by a process that does not hold
    /// it, and the process taking its rooms over may carry a turn on a
    /// moment before it has switched the connection in: such a call waits
    /// (up to [`SWITCH_WAIT`]) for the switch instead of going to the
    /// platform that will never connect (which made it wait the platform's
    /// own 30 s for a connection and fail).
    async fn for_call(&self) -> Arc<dyn Connected> {
        if tactful_store::connection_partition(self.name).is_none() {
            return self.current();
        }
        crate::waiting::until(&self.switched, SWITCH_WAIT, || self.is_held().then_some(())).await;
        self.current()
    }

    /// The connection in use now.
    pub fn current(&self) -> Arc<dyn Connected> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn swap_tasks(&self, new: Vec<JoinHandle<()>>) -> Vec<JoinHandle<()>> {
        std::mem::replace(
            &mut *self.tasks.lock().unwrap_or_else(PoisonError::into_inner),
            new,
        )
    }

    /// The accounts this process may connect (see `held`).
    pub fn held(&self) -> Option<Held> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn set_held(&self, held: Option<Held>) {
        *self.held.lock().unwrap_or_else(PoisonError::into_inner) = held;
    }

    /// Connects the current platform's accounts this process holds.
    pub fn start(&self, runtime: RuntimeHandle) {
        let Some(held) = self.held() else {
            return;
        };
        let tasks = self.current().start(runtime, &held);
        for old in self.swap_tasks(tasks) {
            old.abort();
        }
    }

    /// Connects `new`, in place of the running connection, with the
    /// accounts `held`: a process taking over accounts' leases (or letting
    /// some go), with the state the store holds now (offsets the last
    /// holder saved). The accounts still held reconnect with the others.
    pub fn start_with(&self, new: Arc<dyn Connected>, runtime: RuntimeHandle, held: Held) {
        self.set_held(Some(held));
        self.switch_to(new, runtime);
    }

    /// Changes the accounts held to `held` within the running connection,
    /// when its platform can (see [`Connected::change_held`]; `saved`: the
    /// store's platform state now): the accounts whose part changed stop
    /// or start, the others stay connected. `false` when it cannot (this
    /// process held none of them, or the platform connects as a whole):
    /// then [`PlatformSlot::start_with`] a new connection.
    pub fn change_held(&self, held: Held, saved: &std::collections::BTreeMap<String, String>) -> bool {
        if !self.is_held() {
            return false;
        }
        let Some(started) = self.current().change_held(&held, saved) else {
            return false;
        };
        self.set_held(Some(held));
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        // The stopped ones go, so changes over a long life do not pile up.
        tasks.retain(|t| !t.is_finished());
        tasks.extend(started);
        true
    }

    /// Stops the running connection's tasks, forgets its accounts' states
    /// (the new connection registers those it connects: an account no
    /// longer connected here is no longer shown), and starts `new`.
    fn switch_to(&self, new: Arc<dyn Connected>, runtime: RuntimeHandle) {
        self.stop();
        runtime.connections().forget(self.name);
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = new;
        self.start(runtime);
        self.switched.notify_waiters();
    }

    /// Stops the connection because other processes hold its accounts
    /// now; a reload no longer connects it, until
    /// [`PlatformSlot::start_with`]. `runtime`: whose connection states
    /// forget its accounts (`None` before the runtime exists).
    pub fn let_go(&self, runtime: Option<&RuntimeHandle>) {
        self.set_held(None);
        self.stop();
        if let Some(r) = runtime {
            r.connections().forget(self.name);
        }
    }

    /// Whether this process connects any of its accounts.
    pub fn is_held(&self) -> bool {
        self.held().is_some()
    }

    /// Replaces the connection: the old one says goodbye (at most
    /// [`GOODBYE_WAIT`]) and stops, then `new` connects (when this process
    /// holds the platform).
    pub async fn replace(&self, new: Arc<dyn Connected>, runtime: RuntimeHandle) {
        let old = self.current();
        if tokio::time::timeout(GOODBYE_WAIT, old.close()).await.is_err() {
            tracing::warn!(
                platform = self.name,
                "the old connection did not say goodbye in time"
            );
        }
        self.switch_to(new, runtime);
    }

    /// The start banner's line for the current connection (or, when
    /// processes share the store and this one does not hold it, that one of
    /// them connects it).
    pub async fn describe(&self) -> String {
        if !self.is_held() {
            return format!(
                "{}: connected by one of the processes sharing the store at a time (the log says when this one does)",
                self.name
            );
        }
        self.current().describe().await
    }

    /// Stops the connection's tasks (the service is ending).
    pub fn stop(&self) {
        for task in self.swap_tasks(Vec::new()) {
            task.abort();
        }
    }
}

impl Platform for PlatformSlot {
    fn capabilities(&self) -> Capabilities {
        self.current().capabilities()
    }

    fn owns(&self, room: &RoomId) -> bool {
        self.current().owns(room)
    }

    fn react<'a>(&'a self, at: At<'a>, msg: &'a MsgId, emoji: &'a str) -> Done<'a> {
        Box::pin(async move {
            let p = self.for_call().await;
            p.react(at, msg, emoji).await
        })
    }

    fn parts(&self, room: &RoomId, reply_to: Option<&MsgId>, text: &str) -> Vec<String> {
        self.current().parts(room, reply_to, text)
    }

    fn send<'a>(&'a self, msg: OutMessage<'a>) -> Sent<'a> {
        Box::pin(async move {
            let p = self.for_call().await;
            p.send(msg).await
        })
    }

    fn edit<'a>(&'a self, at: At<'a>, id: &'a MsgId, text: &'a str) -> Done<'a> {
        Box::pin(async move {
            let p = self.for_call().await;
            p.edit(at, id, text).await
        })
    }

    fn typing<'a>(&'a self, at: At<'a>) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let p = self.for_call().await;
            p.typing(at).await
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        let p = self.current();
        Box::pin(async move { p.close().await })
    }

    fn delete<'a>(&'a self, at: At<'a>, id: &'a MsgId) -> Done<'a> {
        Box::pin(async move {
            let p = self.for_call().await;
            p.delete(at, id).await
        })
    }
}
