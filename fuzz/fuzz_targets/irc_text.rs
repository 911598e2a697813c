//! See `tactful_props::irc_text` for the properties checked.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tactful_props::irc_text(data));
