//! See `tactful_props::matrix_event` for the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tactful_props::matrix_event(data));
