//! Any text as a config file. Parsing must never panic; a config that validates must
//! build the model-free stages without error (validation is the only gate before them)
//! and survive a write/read round trip unchanged.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::config(data));
