//! The crate's integration tests, one binary.

mod inbound;
