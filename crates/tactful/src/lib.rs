//! The `tactful` binary's library half: config loading, the replay driver
//! and the live service, kept in a library so tests can drive them directly.

pub mod config;
pub mod console;
pub mod demo;
pub mod doctor;
pub mod dry_run;
pub mod eval;
pub mod live;
pub mod live_policies;
pub mod logging;
pub mod registry;
pub mod reload;
pub mod replay;
pub mod scenario;
mod trace_lines;
mod web_notes;
