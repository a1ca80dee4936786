//! Daemon configuration: parsed from TOML, validated, then used to build the stages.
//!
//! Every section has defaults so an empty file is a valid config; unknown keys are
//! rejected so a typo never silently falls back to a default.
//!
//! Files: this one the file's sections and their checks; `sections.rs` how the file's
//! tables are read (the outputs' through their own list, `crate::sinks::OutputsConfig`);
//! `replay.rs` what `sarcasmd replay`'s flags override; `boards.rs` what each board
//! class measured.

pub mod boards;
pub mod replay;
mod sections;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

pub use crate::sinks::event::OutputConfig;
use crate::sinks::OutputsConfig;
use crate::views::asr::AsrConfig;
use crate::views::fusion::FusionConfig;
use crate::views::prosody::ProsodyConfig;
use crate::views::room::RoomConfig;
use crate::views::text::TextConfig;
use crate::views::vad::SegmentConfig;
use crate::views::vision::VisionConfig;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// Every invalid value in the file, not only the first.
    #[error("{path}: {problems}")]
    Invalid { path: PathBuf, problems: Problems },
}

/// Stages check their own sections with the leaf module's type; kept here too, so
/// `config::FieldError` goes on naming it.
pub use crate::common::validate::{FieldError, Problems, Validate};

/// The whole file: one table per stage, every table optional. The outputs besides the
/// event stream are tables of the same level (`[http]`, `[mqtt]`, `[captions]`), listed
/// by [`OutputsConfig`] and read by the visitor in `sections.rs`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Config {
    pub models: ModelsConfig,
    pub source: SourceConfig,
    pub buffers: BufferConfig,
    pub segment: SegmentConfig,
    pub asr: AsrConfig,
    pub prosody: ProsodyConfig,
    pub text: TextConfig,
    pub fusion: FusionConfig,
    pub context: ContextConfig,
    pub output: OutputConfig,
    /// Every output's section, each a table of its own in the file.
    #[serde(flatten)]
    pub outputs: OutputsConfig,
    pub budget: BudgetConfig,
    pub vision: VisionConfig,
    pub room: RoomConfig,
    /// The file this config was loaded from (not a key): an input like any other, so no
    /// output may name it (`crate::daemon::preflight`).
    #[serde(skip)]
    pub loaded_from: Option<PathBuf>,
}

/// What the board promises; violations are counted and reported, not enforced.
/// Latency budget and load shedding (see `crate::common::shed` for the order of the steps).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// End of speech -> event, in milliseconds (hangover included). 0 = no budget.
    pub event_latency_ms: u32,
    /// Shedding step 1: while shedding, the camera is analysed at this rate instead of
    /// `vision.analyse_fps`. 0, or not below `analyse_fps`, skips the step.
    pub shed_vision_fps: f32,
    /// Shedding step 3: while further finished utterances wait for analysis, or one has
    /// waited past `event_latency_ms`, those longer than this (ms of speech) get only
    /// the audio view, no transcript or text view (counted as `text_shed`). 0 = never.
    pub shed_text_over_ms: u32,
    /// Take one shedding step back after this many utterances in a row were analysed
    /// on time (none waiting, budget kept).
    pub recover_after: u32,
    /// The board class this profile is for (`rpi4`, `rpi5`, `jetson-orin-nano`; "" =
    /// not stated). `validate` and `run` then warn when `event_latency_ms` is below what
    /// the profile's Whisper model was measured to deliver there (`crate::config::boards`).
    pub board: String,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            event_latency_ms: 0,
            shed_vision_fps: 1.0,
            shed_text_over_ms: 0,
            recover_after: 3,
            board: String::new(),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsConfig {
    /// Where `scripts/fetch-models.sh` put the converted models. Empty: the default
    /// cache (`$SARCASMD_MODEL_DIR`, else `$XDG_CACHE_HOME/sarcasmd/models`, else
    /// `~/.cache/sarcasmd/models`).
    pub dir: Option<PathBuf>,
    /// Skip the SHA-256 check of model files at start (saves ~1 s on a Pi; the header
    /// checks still run).
    pub skip_checksums: bool,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SourceConfig {
    /// A WAV file of any common rate, channel count and sample format.
    Wav {
        path: PathBuf,
        #[serde(default)]
        realtime: bool,
    },
    /// Raw signed 16-bit little-endian mono PCM on standard input.
    Stdin {
        #[serde(default = "default_stdin_rate")]
        sample_rate_hz: u32,
        /// The pipe is fed by a live capture (e.g. `arecord ... |`): never block it;
        /// drop and count samples when the pipeline falls behind.
        #[serde(default)]
        live: bool,
    },
    /// A microphone through ALSA (any rate, format and channel count it offers),
    /// reopened with exponential backoff whenever it is missing, unplugged or stalls.
    Mic {
        /// An index from `sarcasmd devices`, or part of a device id or name (case
        /// insensitive): `device = 1`, `device = "USB"`, `device = "plughw:CARD=Device,DEV=0"`.
        /// Unset: the system default input.
        #[serde(
            default,
            deserialize_with = "name_or_index",
            skip_serializing_if = "Option::is_none"
        )]
        device: Option<String>,
        /// No audio from the device for this long counts as a lost device.
        #[serde(default = "default_stall_timeout_ms")]
        stall_timeout_ms: u32,
        /// First wait before reopening a lost device; doubles after each failed attempt...
        #[serde(default = "default_reconnect_initial_ms")]
        reconnect_initial_ms: u32,
        /// ...up to this.
        #[serde(default = "default_reconnect_max_ms")]
        reconnect_max_ms: u32,
    },
}

fn default_stdin_rate() -> u32 {
    16_000
}

fn default_stall_timeout_ms() -> u32 {
    2_000
}

fn default_reconnect_initial_ms() -> u32 {
    500
}

fn default_reconnect_max_ms() -> u32 {
    30_000
}

/// `device = 2` or `device = "USB"`: both end up as the string `select_device` parses.
fn name_or_index<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a device index (0, 1, ...) or part of a device name")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
            Ok(Some(v.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
            if v < 0 {
                return Err(E::custom(format!(
                    "device index {v} is negative; `sarcasmd devices` lists the indices"
                )));
            }
            Ok(Some(v.to_string()))
        }
    }
    d.deserialize_any(V)
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig::Stdin {
            sample_rate_hz: default_stdin_rate(),
            live: false,
        }
    }
}

/// Sizes of the queues between stages. Full policies are stated where each queue is
/// built (see `pipeline`).
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct BufferConfig {
    /// Lock-free ring between the source and the segmenter, in milliseconds of 16 kHz audio.
    pub ring_ms: u32,
    /// Finished utterances waiting for analysis.
    pub utterance_queue: usize,
    /// Events waiting for the sinks.
    pub event_queue: usize,
}

impl Default for BufferConfig {
    fn default() -> Self {
        Self {
            ring_ms: 5_000,
            utterance_queue: 8,
            event_queue: 64,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ContextConfig {
    /// How much recent audio, prosody and transcript the context store keeps.
    pub seconds: f32,
    /// Feed the previous transcripts within `seconds` to the text view. Off by default:
    /// see docs/accuracy.md ("Context") for the measurement this follows.
    pub text_uses_context: bool,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            seconds: 15.0,
            text_uses_context: false,
        }
    }
}

impl Config {
    /// Parse TOML text; `path` only names the origin in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map(|s| line_col(text, s.start)).unwrap_or((0, 0));
            ConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: e.message().to_string(),
            }
        })?;
        cfg.validate().map_err(|problems| ConfigError::Invalid {
            path: path.to_path_buf(),
            problems,
        })?;
        Ok(cfg)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = crate::common::file_kind::read_text(
            path,
            crate::common::file_kind::MAX_TEXT_FILE_BYTES,
        )
        .map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let mut cfg = Self::parse(&text, path)?;
        cfg.loaded_from = Some(path.to_path_buf());
        Ok(cfg)
    }

    /// Budgets this profile cannot meet: below its own hangover, or below what its board
    /// was measured to deliver with the nearest settings (`crate::config::boards`); warnings, not
    /// errors: the daemon runs and counts the violations.
    pub fn board_warnings(&self) -> Vec<String> {
        crate::config::boards::budget_warnings(&crate::config::boards::ProfileSettings {
            board: &self.budget.board,
            model: &self.asr.model,
            stream_step_ms: self.asr.stream_step_ms,
            threads: self.asr.threads,
            final_threads: self.asr.final_threads,
            event_latency_ms: self.budget.event_latency_ms,
            hangover_ms: self.segment.hangover_ms,
        })
    }

    /// Every problem in the file, in the order of its sections.
    pub fn validate(&self) -> Result<(), Problems> {
        let mut problems = Problems::default();
        self.check(&mut problems);
        problems.into_result()
    }

    fn check(&self, problems: &mut Problems) {
        match &self.source {
            SourceConfig::Stdin { sample_rate_hz, .. } => {
                if let Err(r) = crate::sources::audio::validate_rate(*sample_rate_hz) {
                    problems.push("source.sample_rate_hz", r);
                }
            }
            SourceConfig::Wav { path, .. } => {
                if path.as_os_str().is_empty() {
                    problems.push("source.path", "must name a WAV file");
                }
            }
            SourceConfig::Mic {
                device,
                stall_timeout_ms,
                reconnect_initial_ms,
                reconnect_max_ms,
            } => {
                if device.as_deref().is_some_and(|d| d.trim().is_empty()) {
                    problems.push(
                        "source.device",
                        "is empty: leave it out for the system default input, or give an index or name from `sarcasmd devices`",
                    );
                }
                if !(100..=60_000).contains(stall_timeout_ms) {
                    problems.push("source.stall_timeout_ms", "must be within 100..=60000");
                }
                if !(10..=60_000).contains(reconnect_initial_ms) {
                    problems.push("source.reconnect_initial_ms", "must be within 10..=60000");
                }
                if !(*reconnect_initial_ms..=600_000).contains(reconnect_max_ms) {
                    problems.push(
                        "source.reconnect_max_ms",
                        "must be within reconnect_initial_ms..=600000",
                    );
                }
            }
        }
        if !(100..=120_000).contains(&self.buffers.ring_ms) {
            problems.push("buffers.ring_ms", "must be within 100..=120000");
        }
        if !(1..=1024).contains(&self.buffers.utterance_queue) {
            problems.push("buffers.utterance_queue", "must be within 1..=1024");
        }
        if !(1..=65_536).contains(&self.buffers.event_queue) {
            problems.push("buffers.event_queue", "must be within 1..=65536");
        }
        if !(self.context.seconds >= 0.0 && self.context.seconds <= 120.0) {
            problems.push("context.seconds", "must be within 0..=120 seconds");
        }
        if self.output.events.is_empty() {
            problems.push("output.events", "use \"-\" for stdout or a file path");
        }
        self.segment.check(problems);
        self.asr.check(problems);
        if let Err(e) = self.prosody.validate() {
            problems.push("prosody", e.to_string());
        }
        self.text.check(problems);
        self.fusion.check(problems);
        self.vision.check(problems);
        self.room.check(problems);
        if self.budget.event_latency_ms > 600_000 {
            problems.push(
                "budget.event_latency_ms",
                "must be at most 600000 (0 = no budget)",
            );
        }
        if !(0.0..=60.0).contains(&self.budget.shed_vision_fps) {
            problems.push(
                "budget.shed_vision_fps",
                "must be within 0..=60 (0 = keep the camera rate while shedding)",
            );
        }
        if !(1..=1000).contains(&self.budget.recover_after) {
            problems.push("budget.recover_after", "must be within 1..=1000 utterances");
        }
        if !self.budget.board.is_empty()
            && !crate::config::boards::boards().contains(&self.budget.board.as_str())
        {
            problems.push(
                "budget.board",
                format!(
                    "must be one of {:?} (or left out)",
                    crate::config::boards::boards()
                ),
            );
        }
        self.outputs.check(&self.output, problems);
    }
}

/// 1-based line and column of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_file_is_default() {
        let c = Config::parse("", Path::new("x.toml")).unwrap();
        assert_eq!(c, Config::default());
    }

    #[test]
    fn unknown_key_names_line_and_column() {
        let err = Config::parse("[segment]\nhangover = 3\n", Path::new("room.toml")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.starts_with("room.toml:2:1:"), "{msg}");
        assert!(msg.contains("hangover"), "{msg}");
    }

    #[test]
    fn out_of_range_names_field() {
        let err = Config::parse("[fusion]\nthreshold = 1.5\n", Path::new("a.toml")).unwrap_err();
        assert!(err.to_string().contains("fusion.threshold"), "{err}");
    }

    #[test]
    fn every_invalid_value_is_reported_not_only_the_first() {
        let text = "[segment]\nthreshold = 2.0\n[fusion]\nthreshold = 1.5\nprior = 0.0\n\
                    [http]\nenabled = true\nreplay_last = 1000\n[mqtt]\ntopic_prefix = \"$SYS/x\"\n";
        let err = Config::parse(text, Path::new("room.toml")).unwrap_err();
        let ConfigError::Invalid { problems, .. } = &err else {
            panic!("{err}")
        };
        let fields: Vec<&str> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "segment.threshold",
                "fusion.threshold",
                "fusion.prior",
                "http.replay_last",
                "mqtt.topic_prefix"
            ]
        );
        let msg = err.to_string();
        assert!(
            msg.starts_with("room.toml: 5 invalid values:\n  `segment.threshold`: "),
            "{msg}"
        );
        // One problem keeps the one-line form that scripts and older docs quote.
        let one = Config::parse("[text]\nmax_tokens = 1\n", Path::new("a.toml")).unwrap_err();
        assert_eq!(
            one.to_string(),
            "a.toml: invalid value for `text.max_tokens`: must be within 8..=512"
        );
    }

    #[test]
    fn wav_source_parses() {
        let c = Config::parse(
            "[source]\nkind = \"wav\"\npath = \"a.wav\"\nrealtime = true\n",
            Path::new("a.toml"),
        )
        .unwrap();
        assert_eq!(
            c.source,
            SourceConfig::Wav {
                path: "a.wav".into(),
                realtime: true
            }
        );
    }

    #[test]
    fn mic_source_parses_with_defaults_and_an_index_or_a_name() {
        let c = Config::parse("[source]\nkind = \"mic\"\n", Path::new("m.toml")).unwrap();
        assert_eq!(
            c.source,
            SourceConfig::Mic {
                device: None,
                stall_timeout_ms: 2_000,
                reconnect_initial_ms: 500,
                reconnect_max_ms: 30_000
            }
        );
        for (v, want) in [("2", "2"), ("\"USB Audio\"", "USB Audio")] {
            let c = Config::parse(
                &format!("[source]\nkind = \"mic\"\ndevice = {v}\nstall_timeout_ms = 500\n"),
                Path::new("m.toml"),
            )
            .unwrap();
            let SourceConfig::Mic {
                device,
                stall_timeout_ms,
                ..
            } = c.source
            else {
                panic!("{:?}", c.source)
            };
            assert_eq!((device.as_deref(), stall_timeout_ms), (Some(want), 500));
        }
        // Serialized and read back: the same.
        let text = toml::to_string(&c).unwrap();
        assert_eq!(Config::parse(&text, Path::new("m.toml")).unwrap(), c);
    }

    #[test]
    fn mic_source_errors_name_the_field() {
        for (body, field) in [
            ("device = \"\"", "source.device"),
            ("device = -1", "negative"),
            ("stall_timeout_ms = 5", "source.stall_timeout_ms"),
            ("reconnect_initial_ms = 0", "source.reconnect_initial_ms"),
            (
                "reconnect_initial_ms = 1000\nreconnect_max_ms = 500",
                "source.reconnect_max_ms",
            ),
            ("sample_rate_hz = 48000", "sample_rate_hz"),
        ] {
            let err = Config::parse(
                &format!("[source]\nkind = \"mic\"\n{body}\n"),
                Path::new("m.toml"),
            )
            .unwrap_err()
            .to_string();
            assert!(err.contains(field), "{body}: {err}");
        }
    }

    #[test]
    fn a_config_from_the_first_release_still_loads_with_its_values() {
        let path = Path::new("tests/fixtures/config/v0.1-core-pipeline.toml");
        let c = Config::parse(
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/config/v0.1-core-pipeline.toml"
            )),
            path,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            c.source,
            SourceConfig::Stdin {
                sample_rate_hz: 48_000,
                live: true
            }
        );
        assert_eq!(c.segment.hangover_ms, 400);
        assert_eq!(c.asr.model, "base-q8_0");
        assert_eq!(c.asr.auto_languages, ["de", "en"]);
        assert_eq!(c.text.max_tokens, 96);
        assert_eq!(c.fusion.threshold, 0.6);
        assert!(!c.output.include_transcript);
        // Sections added since then take their defaults: everything off.
        assert_eq!(c.asr.interim_every_ms, 0);
        assert!(!c.output.partials && !c.outputs.http.enabled && !c.outputs.mqtt.enabled);
        assert!(!c.outputs.captions.enabled());
    }
}
