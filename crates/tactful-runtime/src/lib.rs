//! The live runtime of tactful: the sans-I/O engine driven by real time,
//! real agents, and platforms.
//!
//! - [`runtime`]: the task that owns the engine and runs turns;
//! - [`delivery`]: the one path replies leave by, for every platform;
//! - [`platform`]: the small trait a chat platform implements;
//! - [`markup`]: an agent's Markdown as platforms that take markup want it;
//! - [`persist`]: saving to the store off the engine's task;
//! - [`seam`]: what a platform crate hands the binary.

pub mod account;
mod calls;
mod clock;
pub mod cluster;
pub mod connections;
pub mod delivery;
mod driver;
mod events;
mod handle;
pub mod markup;
pub mod metrics;
pub mod persist;
pub mod platform;
pub mod rate_pause;
mod restart;
pub mod roster;
pub mod runtime;
pub mod saved;
mod schedules;
pub mod seam;
pub mod slot;
pub mod waiting;

pub use cluster::{ClusterConfig, DEFAULT_LEASE};
pub use connections::{Account, Connections, LinkState};
pub use delivery::{DeliveryConfig, PLACEHOLDER};
pub use markup::{escape_markup, markdown_html, markdown_plain, markdown_styled};
pub use metrics::Metrics;
pub use persist::{Health, NotSaved, ROOM_MOVED, Saver};
pub use platform::{
    At, CALL_DEADLINE, Capabilities, Connected, Done, Held, OutMessage, PROBE_TIMEOUT, Platform,
    PlatformError, Probe, ProbeFailed, RoomScheme, Sent, account_index, past_deadline, within_deadline,
};
pub use roster::Roster;
pub use runtime::{
    DEFAULT_MAX_CONCURRENT_TURNS, Personas, Runtime, RuntimeConfig, RuntimeHandle, StartError, TraceEvent,
    wall_clock,
};
pub use slot::PlatformSlot;
pub use tactful_store::Store;
