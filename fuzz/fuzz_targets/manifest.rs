//! Any text as a dataset manifest. Parsing must never panic, and what it accepts must
//! hold the documented promises: unique ids, something to score per item, 0/1 labels.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::manifest(data));
