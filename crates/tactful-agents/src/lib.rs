//! Agent backends.
