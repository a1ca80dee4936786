//! Any bytes as a WAV file, through the same open/decode/downmix/resample path as
//! `sarcasmd replay FILE`. Must never panic, allocate without bound or emit samples the
//! later stages cannot take (non-finite, or outside [-1, 1]).
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::wav(data));
