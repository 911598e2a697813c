//! See `tactful_props::replay` for the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tactful_props::replay(data));
