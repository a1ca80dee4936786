//! What `sarcasmd replay` sets on its command line over a config file's values: the
//! source is the input, and a few keys are named by flags.

use std::path::{Path, PathBuf};

use super::{Config, ConfigError, SourceConfig};
use crate::views::vision::VisionSourceConfig;

/// `replay`'s flags that override the config.
#[derive(Debug, Clone, Default)]
pub struct ReplayOverrides {
    /// A WAV file, or `-` for raw s16le mono PCM on stdin.
    pub input: String,
    /// Pace a WAV file like a microphone.
    pub realtime: bool,
    /// Sample rate of raw PCM on stdin.
    pub rate_hz: u32,
    /// Raw PCM comes from a live capture: drop and count rather than block it.
    pub live: bool,
    /// `output.events`.
    pub events: Option<String>,
    /// `asr.model`.
    pub model: Option<String>,
    /// `asr.language`.
    pub language: Option<String>,
    /// A video file recorded with the audio (same start): `vision.source`.
    pub video: Option<PathBuf>,
}

impl Config {
    /// This config with `replay`'s flags applied, validated again; errors name `origin`
    /// (the config file, or `<command line>` without one).
    pub fn with_replay_overrides(
        mut self,
        o: ReplayOverrides,
        origin: &Path,
    ) -> Result<Config, ConfigError> {
        self.source = if o.input == "-" {
            SourceConfig::Stdin {
                sample_rate_hz: o.rate_hz,
                live: o.live,
            }
        } else {
            SourceConfig::Wav {
                path: o.input.into(),
                realtime: o.realtime,
            }
        };
        if let Some(e) = o.events {
            self.output.events = e;
        }
        if let Some(path) = o.video {
            self.vision.source = VisionSourceConfig::File {
                path,
                offset_s: 0.0,
            };
        }
        if let Some(m) = o.model {
            self.asr.model = m;
        }
        if let Some(l) = o.language {
            self.asr.language = l;
        }
        self.validate().map_err(|problems| ConfigError::Invalid {
            path: origin.to_path_buf(),
            problems,
        })?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_flags_set_the_source_and_the_named_keys_and_are_validated() {
        let o = ReplayOverrides {
            input: "-".into(),
            rate_hz: 44_100,
            live: true,
            model: Some("base".into()),
            ..Default::default()
        };
        let c = Config::default()
            .with_replay_overrides(o, Path::new("<command line>"))
            .unwrap();
        assert_eq!(
            c.source,
            SourceConfig::Stdin {
                sample_rate_hz: 44_100,
                live: true
            }
        );
        assert_eq!(c.asr.model, "base");
        let o = ReplayOverrides {
            input: "a.wav".into(),
            rate_hz: 16_000,
            events: Some(String::new()),
            ..Default::default()
        };
        let e = Config::default()
            .with_replay_overrides(o, Path::new("<command line>"))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("<command line>: ") && e.contains("output.events"),
            "{e}"
        );
    }
}
