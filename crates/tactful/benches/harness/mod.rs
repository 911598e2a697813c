//! What every benchmark's `main` starts with (they run without libtest's
//! harness): answering nextest's `--list` with one smoke test, and telling
//! a measured run (`--bench`) from the smoke run under `cargo test`.

/// `None` when the runner only asked for the list of tests (answered
/// here); else whether this is a measured run.
pub fn mode() -> Option<bool> {
    let args: Vec<String> = std::env::args().collect();
    // nextest asks for the list of tests first.
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("smoke: test");
        }
        return None;
    }
    Some(args.iter().any(|a| a == "--bench"))
}
