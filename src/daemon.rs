//! The daemon as a library function: build the stages from a validated config, run
//! the stream, report. `sarcasmd run` and `sarcasmd replay` both end up here, and tests
//! call it directly in a temp dir.

use std::fs::OpenOptions;
use std::io::BufWriter;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use thiserror::Error;

use crate::audio::{AudioError, AudioSource, PcmReaderSource, WavSource};
use crate::config::{Config, ConfigError, SourceConfig};
use crate::event::{EventSink, JsonLinesSink};
use crate::pipeline::{self, Engine, EngineError, PipelineError, RunOptions, RunStats};

#[derive(Debug, Error)]
pub enum DaemonError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    #[error("{path}: cannot open event output: {source}")]
    Output {
        path: String,
        source: std::io::Error,
    },
}

/// Exit codes: 2 bad input (config, audio), 3 models missing or corrupt, 1 anything else.
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_MODELS: i32 = 3;

impl DaemonError {
    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::Config(_) | DaemonError::Audio(_) => EXIT_BAD_INPUT,
            DaemonError::Pipeline(PipelineError::Audio(_)) => EXIT_BAD_INPUT,
            DaemonError::Engine(_) => EXIT_MODELS,
            _ => 1,
        }
    }
}

/// Open the configured source. Files are validated here, before any model loads.
pub fn open_source(cfg: &Config) -> Result<Box<dyn AudioSource>, AudioError> {
    Ok(match &cfg.source {
        SourceConfig::Wav { path, .. } => Box::new(WavSource::open(path)?),
        SourceConfig::Stdin {
            sample_rate_hz,
            live,
        } => Box::new(
            PcmReaderSource::new("stdin", std::io::stdin(), *sample_rate_hz)?
                .live(*live)
                .poll_fd(0),
        ),
    })
}

pub fn open_sink(cfg: &Config) -> Result<Box<dyn EventSink>, DaemonError> {
    if cfg.output.events == "-" {
        return Ok(Box::new(JsonLinesSink::new(std::io::stdout().lock())));
    }
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&cfg.output.events)
        .map_err(|source| DaemonError::Output {
            path: cfg.output.events.clone(),
            source,
        })?;
    Ok(Box::new(JsonLinesSink::new(BufWriter::new(f))))
}

/// Run the daemon on `cfg` until the source ends or `stop` is set.
pub fn run(cfg: &Config, stop: Arc<AtomicBool>) -> Result<RunStats, DaemonError> {
    let source = open_source(cfg)?;
    log::info!("source: {}", source.describe());
    let engine = Engine::load(cfg)?;
    log::info!(
        "models loaded in {:.0} ms: {:?}",
        engine.load_ms,
        engine.models
    );
    let mut sink = open_sink(cfg)?;
    let realtime = matches!(cfg.source, SourceConfig::Wav { realtime: true, .. });
    let opts = RunOptions {
        realtime,
        stop,
        ..Default::default()
    };
    let stats = pipeline::run_stream(&engine, cfg, source, sink.as_mut(), &opts)?;
    Ok(stats)
}
