//! The handle platforms hold on a running runtime: how they hand in what
//! they hear, save their bookkeeping, and report their accounts.

use tactful_core::{EngineError, Message, PersonasChanged, PolicyTable, RoomId, Timestamp};
use tactful_store::Op;
use tokio::sync::{mpsc, oneshot};

use crate::connections::{Account, Connections};
use crate::events::{Event, Personas};
use crate::persist::{NotSaved, Saver};

/// The leases held, by partition: the driver's, shared with the runtime
/// handle, which fences what a platform writes about a room with them
/// ([`RuntimeHandle::saver_for`]) as the runtime's own writes are.
pub(crate) type Fences =
    std::sync::Arc<std::sync::Mutex<std::collections::HashMap<u32, tactful_store::Lease>>>;

/// Sends inbound messages to a running runtime. Cheap to clone: each
/// platform adapter holds one.
#[derive(Clone)]
pub struct RuntimeHandle {
    pub(crate) tx: mpsc::UnboundedSender<Event>,
    pub(crate) saver: Option<Saver>,
    /// The leases held, when sharing the store (see [`Self::saver_for`]).
    pub(crate) fences: Option<Fences>,
    pub(crate) connections: Connections,
    pub(crate) id_block: Option<u64>,
    pub(crate) started: Timestamp,
}

impl RuntimeHandle {
    /// When the service started (wall clock): a platform that takes what
    /// was said before it first listened for history counts from here, not
    /// from when it connected (when several processes share the store, a
    /// platform connects when its lease comes, which can be seconds
    /// later; a question asked meanwhile is no history).
    pub fn started(&self) -> Timestamp {
        self.started
    }

    /// When this process shares its store with others (`[cluster]`), the
    /// first id of its own block: a platform that numbers its own messages
    /// (the web room) numbers from there, so no two processes hand out one
    /// id. `None` when the process is alone.
    pub fn id_block(&self) -> Option<u64> {
        self.id_block
    }

    /// The account of `persona` on `platform` ("Discord", as the log
    /// names it), whose connection state `/healthz`, the metrics and the
    /// banner show.
    pub fn account(&self, platform: &str, persona: &str) -> Account {
        self.connections.account(platform, persona)
    }

    /// Every platform account's connection state.
    pub fn connections(&self) -> &Connections {
        &self.connections
    }

    /// Hands a normalised inbound message to the engine. Returns `false`
    /// once the runtime has stopped. While the store cannot write, the
    /// message is refused (logged and counted): platforms that sync (Matrix)
    /// deliver it again after a restart.
    pub fn inbound(&self, msg: Message) -> bool {
        self.tx.send(Event::Inbound(msg)).is_ok()
    }

    /// Hands a message to the engine and resolves once it is stored,
    /// together with `also` (the platform's own records of it). A platform
    /// that shows messages itself (the web room) shows it only then: what
    /// people saw is never lost to a crash. Refused while the store cannot
    /// write or the service is stopping; nothing was taken then.
    pub fn inbound_saved(
        &self,
        msg: Message,
        also: Vec<Op>,
    ) -> impl Future<Output = Result<(), NotSaved>> + use<> {
        let (ack, done) = oneshot::channel();
        let sent = self.tx.send(Event::InboundSaved(msg, also, ack)).is_ok();
        async move {
            if !sent {
                return Err(NotSaved::Stopping);
            }
            done.await.unwrap_or(Err(NotSaved::Stopping))
        }
    }

    /// Hands over a message from before the service started (a platform's
    /// first sync): recorded as context, never answered.
    pub fn backlog(&self, msg: Message) -> bool {
        self.tx.send(Event::Backlog(msg)).is_ok()
    }

    /// Saves a platform's bookkeeping (a sync token, say) in order with
    /// the messages handed in before it: after a restart the store holds
    /// the value only if it holds those messages too.
    pub fn save_state(&self, key: String, value: String) -> bool {
        self.tx.send(Event::State(key, value, None)).is_ok()
    }

    /// [`RuntimeHandle::save_state`], resolving once the value is stored,
    /// with every message handed in before it. A platform that confirms
    /// what it received to its server (Telegram's next `getUpdates` offset
    /// drops the updates below it for good) waits for this first, so a
    /// crash between the two never loses a message. Refused, and nothing
    /// saved, while the store cannot write or the service stops. Such a
    /// platform hands its messages in with [`RuntimeHandle::inbound_saved`]
    /// and saves nothing past one that was refused: so, unlike
    /// [`RuntimeHandle::save_state`], this is saved even after another
    /// platform's message was refused.
    pub fn save_state_saved(
        &self,
        key: String,
        value: String,
    ) -> impl Future<Output = Result<(), NotSaved>> + use<> {
        let (ack, done) = oneshot::channel();
        let sent = self.tx.send(Event::State(key, value, Some(ack))).is_ok();
        async move {
            if !sent {
                return Err(NotSaved::Stopping);
            }
            done.await.unwrap_or(Err(NotSaved::Stopping))
        }
    }

    /// Saves a platform's bookkeeping that covers no incoming message
    /// (where its own posts went: Slack's thread state). Unlike
    /// [`RuntimeHandle::save_state`], it is saved even after a message was
    /// refused, since saving it cannot skip one.
    pub fn save_note(&self, key: String, value: String) -> bool {
        self.tx
            .send(Event::Note(Op::PlatformState { key, value }))
            .is_ok()
    }

    /// Saves a setting every process sharing the store follows (a room
    /// policy set in the console): like [`RuntimeHandle::save_note`], and
    /// announced to the other processes at commit ([`Op::SharedState`]).
    pub fn save_shared(&self, key: String, value: String) -> bool {
        self.tx.send(Event::Note(Op::SharedState { key, value })).is_ok()
    }

    /// Replaces the room policies of the running engine (a config
    /// reload): every room uses the new ones from its next message on;
    /// turns in flight keep theirs. `false` once the runtime has stopped.
    pub fn set_policies(&self, policies: PolicyTable) -> bool {
        self.tx.send(Event::Policies(Box::new(policies))).is_ok()
    }

    /// Replaces the personas and the agent backends of the running engine
    /// (a config reload; see [`Engine::set_personas`] for what happens to
    /// each persona). Turns in flight keep the agent they started with.
    /// Resolves to what changed, or the engine's reason for refusing
    /// (nothing changed then); `Err(None)` once the runtime has stopped.
    pub fn set_personas(
        &self,
        personas: Personas,
    ) -> impl Future<Output = Result<PersonasChanged, Option<EngineError>>> + use<> {
        let (tx, rx) = oneshot::channel();
        let sent = self.tx.send(Event::Personas(Box::new(personas), tx)).is_ok();
        async move {
            if !sent {
                return Err(None);
            }
            rx.await.map_err(|_| None)?.map_err(Some)
        }
    }

    /// Where a platform saves records of its own, in order with the
    /// runtime's; `None` without a store.
    pub fn saver(&self) -> Option<&Saver> {
        self.saver.as_ref()
    }

    /// Where a platform saves what it says about `room` (the web room's
    /// decision notes, announced to the other processes): fenced by the
    /// room's lease when several processes share the store, so a process
    /// that lost the room, or never held it, announces nothing there (the
    /// store refuses the batch); `None` when it holds no lease for the room
    /// or there is no store.
    pub fn saver_for(&self, room: &RoomId) -> Option<Saver> {
        let saver = self.saver.clone()?;
        let Some(fences) = &self.fences else {
            return Some(saver);
        };
        let lease = fences
            .lock()
            .ok()?
            .get(&tactful_store::partition_of(room))
            .cloned()?;
        Some(saver.fenced(Some(lease)))
    }
}
