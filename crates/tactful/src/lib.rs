//! The `tactful` binary's library half: config loading and the replay
//! driver, kept in a library so tests can drive them directly.

pub mod config;
pub mod replay;
pub mod scenario;
