//! Sample rates: the pipeline's, and the input rates a source accepts.

/// The rate every stage after the source works at (Silero VAD and Whisper want 16 kHz).
pub const PIPELINE_RATE_HZ: u32 = 16_000;

/// Accepted input rates. Outside this range a "rate" is almost surely a corrupt header.
pub const MIN_INPUT_RATE_HZ: u32 = 4_000;
pub const MAX_INPUT_RATE_HZ: u32 = 384_000;

pub fn validate_rate(sample_rate_hz: u32) -> Result<(), String> {
    if (MIN_INPUT_RATE_HZ..=MAX_INPUT_RATE_HZ).contains(&sample_rate_hz) {
        Ok(())
    } else {
        Err(format!(
            "sample rate {sample_rate_hz} Hz is outside {MIN_INPUT_RATE_HZ}..={MAX_INPUT_RATE_HZ} Hz"
        ))
    }
}
