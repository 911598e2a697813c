//! The workspace's test layout: each crate's integration tests are one
//! binary, `tests/it.rs`, whose modules are the files beside it. With
//! `autotests = false` Cargo no longer finds a new file by itself, so a
//! test file nobody listed would silently never run: this test says which.

use std::path::Path;

#[test]
fn every_test_file_is_compiled() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut missing = Vec::new();
    for krate in std::fs::read_dir(&crates).expect("crates/") {
        let krate = krate.expect("an entry").path();
        let tests = krate.join("tests");
        let Ok(files) = std::fs::read_dir(&tests) else {
            continue;
        };
        let manifest = std::fs::read_to_string(krate.join("Cargo.toml")).expect("Cargo.toml");
        let root = std::fs::read_to_string(tests.join("it.rs")).unwrap_or_default();
        for file in files {
            let name = file.expect("an entry").file_name().to_string_lossy().into_owned();
            let Some(module) = name.strip_suffix(".rs") else {
                continue;
            };
            let listed = root.contains(&format!("\nmod {module};\n"))
                || manifest.contains(&format!("path = \"tests/{name}\""))
                || !manifest.contains("autotests = false");
            if !listed {
                missing.push(tests.join(&name));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "never compiled: list each as `mod NAME;` in its crate's tests/it.rs: {missing:?}"
    );
}
