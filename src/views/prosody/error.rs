//! The prosody stage's error type.

/// Errors of the prosody stage.
#[derive(Debug, thiserror::Error)]
pub enum ProsodyError {
    /// A configuration value is outside its allowed range.
    #[error(
        "invalid prosody config: `prosody.{field}` = {value} is not allowed (allowed: {allowed}); \
         fix the [prosody] section of the config file or remove the key to use the default"
    )]
    InvalidConfig {
        field: &'static str,
        value: String,
        allowed: String,
    },
    /// The audio handed to the prosody stage is not at the required sample rate.
    #[error(
        "prosody stage got audio at {got_hz} Hz but only accepts {required_hz} Hz mono; \
         resample the audio to {required_hz} Hz before feature extraction"
    )]
    UnsupportedSampleRate { got_hz: u32, required_hz: u32 },
}
