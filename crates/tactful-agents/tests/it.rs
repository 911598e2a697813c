//! The agent backends' integration tests, as one test binary: each file beside this one is a module
//! of it (`cargo test -p tactful-agents --test it MODULE::` runs one file's tests),
//! linked once instead of once per file. The crate sets `autotests =
//! false`, so a new file is compiled once it is listed here (the workspace
//! test `every_test_file_is_compiled` says when one is not).

// Set-up the files share.
mod common;

// The tests, one module per file.
mod acp;
mod command;
mod hooks;
mod kb;
mod kb_sets;
mod openai;
