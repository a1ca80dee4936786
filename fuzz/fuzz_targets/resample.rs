//! The streaming resampler at any accepted input rate and any chunking: streamed output
//! must equal one-shot output bit for bit, have the exact resampled length, and stay
//! finite. The first 4 bytes pick the rate and chunk size; the rest are i16 samples.
#![no_main]

#[path = "../checks.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::resample(data));
