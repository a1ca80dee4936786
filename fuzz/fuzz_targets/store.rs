//! Any bytes as the room's corrections file. Reading must never panic; what it keeps is
//! numbered once each within range, and reads back the same when written out again.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::store(data));
