//! The live runtime of tactful: the sans-I/O engine driven by real time,
//! real agents, and platforms.
//!
//! - [`runtime`]: the task that owns the engine and runs turns;
//! - [`delivery`]: the one path replies leave by, for every platform;
//! - [`platform`]: the small trait a chat platform implements.

pub mod delivery;
pub mod metrics;
pub mod platform;
pub mod runtime;

pub use delivery::DeliveryConfig;
pub use metrics::Metrics;
pub use platform::{Capabilities, OutMessage, Platform, PlatformError};
pub use runtime::{Runtime, RuntimeConfig, RuntimeHandle, TraceEvent, wall_clock};
