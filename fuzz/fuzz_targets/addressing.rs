//! See `tactful_props::addressing` for the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tactful_props::addressing(data));
