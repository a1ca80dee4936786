//! The daemon as a library: build the stages from a validated config, run the stream,
//! report. `sarcasmd run` and `sarcasmd replay` both go through
//! [`builder::Daemon::builder`], and so do the tests that hold a daemon in-process (an
//! engine loaded once, the HTTP listener on port 0, readiness and reload outcomes waited
//! on as state; see [`builder`] and docs/testing.md). Tests about outputs and reloads
//! do that; tests about the process itself (exit codes, signals, stdout, what it listens
//! on, the unit under a notify socket) start the binary.
//!
//! This module keeps what one run is made of: opening the configured source, frames and
//! event sink; the outputs besides the event stream are `crate::sinks::Outputs`, started
//! from their sections. [`builder`] runs them, once or as the reloading service. Imports
//! go one way: `builder` uses this module, this module does not use `builder`.

pub mod builder;
pub mod preflight;
pub mod room_watch;
pub mod service;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::config::{Config, ConfigError, SourceConfig};
use crate::pipeline::{Counters, EngineError, PipelineError, RunStats};
use crate::sinks::event::{EventSink, JsonLinesSink};
#[cfg(doc)]
use crate::sinks::file::EventsFile;
use crate::sinks::output::StartError;
use crate::sources::audio::{
    AudioError, AudioSource, MicCounters, MicOpener, MicOptions, PcmReaderSource,
    ReconnectingSource, WavSource,
};
use crate::sources::video::{
    CameraOpener, CameraOptions, FileVideoOptions, FileVideoSource, FrameSource,
    ReconnectingFrameSource, VideoError, MAX_FPS,
};
use crate::views::vision::VisionSourceConfig;

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
    /// An output besides the event stream could not start (a port in use, an
    /// unreadable secret).
    #[error(transparent)]
    Output(#[from] StartError),
    #[error(transparent)]
    Room(#[from] crate::views::room::RoomError),
    #[error(transparent)]
    Preflight(#[from] crate::daemon::preflight::PreflightError),
    /// `run` with a live stdin source reached end of file: the capture process in front
    /// of the daemon (arecord) exited. Not a clean end, so the exit status is 1 and
    /// `Restart=on-failure` brings capture back.
    #[error("the live capture on stdin ended after {audio_s:.1} s of audio ({events} events written): the capture process exited or lost its device; exiting 1 so the service manager restarts capture")]
    CaptureEnded { audio_s: f64, events: u64 },
}

/// Exit codes: 2 bad input (config, audio), 3 models missing or corrupt, 1 anything else.
pub const EXIT_BAD_INPUT: i32 = 2;
pub const EXIT_MODELS: i32 = 3;

impl DaemonError {
    /// The reader of the events on stdout went away (`| head -1`): not a failure.
    pub fn is_broken_pipe(&self) -> bool {
        matches!(self, DaemonError::Pipeline(PipelineError::Sink(io))
            if io.kind() == std::io::ErrorKind::BrokenPipe)
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::Config(_) | DaemonError::Audio(_) => EXIT_BAD_INPUT,
            // Unreadable token/password/CA files are configuration mistakes too.
            DaemonError::Output(StartError::BadInput(_)) => EXIT_BAD_INPUT,
            DaemonError::Pipeline(PipelineError::Audio(_)) => EXIT_BAD_INPUT,
            DaemonError::Engine(_) => EXIT_MODELS,
            DaemonError::Preflight(crate::daemon::preflight::PreflightError::Config(_)) => {
                EXIT_BAD_INPUT
            }
            DaemonError::Preflight(crate::daemon::preflight::PreflightError::Models(_)) => {
                EXIT_MODELS
            }
            _ => 1,
        }
    }
}

/// Open the configured frame source. The camera is optional: when it cannot be opened
/// the daemon says so and runs audio-only (`views.video` null, the metric
/// `vision_source_failed` set) rather than refusing to start.
///
/// `stop` ends a wait for a camera that is away (the stream is over).
pub fn open_frames(
    cfg: &Config,
    counters: &Counters,
    stop: Arc<AtomicBool>,
) -> Option<Box<dyn FrameSource>> {
    let opened: Result<Box<dyn FrameSource>, VideoError> = match &cfg.vision.source {
        VisionSourceConfig::None => return None,
        VisionSourceConfig::File { path, offset_s } => FileVideoSource::open(
            path,
            FileVideoOptions {
                fps: MAX_FPS,
                offset_s: *offset_s,
            },
        )
        .map(|f| Box::new(f) as Box<dyn FrameSource>),
        VisionSourceConfig::Camera { device } => {
            // Frames are stamped from now, as the audio clock starts with the stream
            // (the microphone starts capturing at its first read, a moment later).
            let opener = CameraOpener::new(
                CameraOptions {
                    device: device.clone(),
                    ..Default::default()
                },
                Instant::now(),
            );
            counters.drops.attach(opener.counters());
            // A camera missing at start is retried with backoff while audio runs.
            Ok(Box::new(ReconnectingFrameSource::new(
                opener,
                crate::common::reconnect::BackoffPolicy::default(),
                stop,
            )))
        }
    };
    match opened {
        Ok(f) => {
            log::info!("frames: {}", f.describe());
            Some(f)
        }
        Err(e) => {
            counters.vision.source_failed.store(true, Ordering::Relaxed);
            log::warn!("{e}; running audio-only (views.video null)");
            None
        }
    }
}

/// Open the configured source. Files are validated here, before any model loads.
pub fn open_source(cfg: &Config) -> Result<Box<dyn AudioSource>, AudioError> {
    open_source_parts(cfg).map(|s| s.source)
}

/// The configured source and, for a microphone, its counters.
pub struct OpenedSource {
    pub source: Box<dyn AudioSource>,
    /// Microphone only: audio dropped because the capture ring was full, and driver
    /// xruns, summed over every reconnection.
    pub mic_counters: Option<Arc<MicCounters>>,
}

/// [`open_source`], keeping the microphone's counters. A microphone that is missing at
/// start is not an error: it is logged and retried (see [`ReconnectingSource`]).
pub fn open_source_parts(cfg: &Config) -> Result<OpenedSource, AudioError> {
    let mut mic_counters = None;
    let source: Box<dyn AudioSource> = match &cfg.source {
        SourceConfig::Wav { path, .. } => Box::new(WavSource::open(path)?),
        SourceConfig::Stdin {
            sample_rate_hz,
            live,
        } => Box::new(
            PcmReaderSource::new("stdin", std::io::stdin(), *sample_rate_hz)?
                .live(*live)
                .poll_fd(0),
        ),
        SourceConfig::Mic {
            device,
            stall_timeout_ms,
            reconnect_initial_ms,
            reconnect_max_ms,
        } => {
            let opener = MicOpener::new(MicOptions {
                device: device.clone(),
                stall_timeout: Duration::from_millis(*stall_timeout_ms as u64),
                ..Default::default()
            });
            mic_counters = Some(opener.counters());
            let policy = crate::common::reconnect::BackoffPolicy {
                initial: Duration::from_millis(*reconnect_initial_ms as u64),
                max: Duration::from_millis(*reconnect_max_ms as u64),
                ..Default::default()
            };
            Box::new(ReconnectingSource::new(opener, policy))
        }
    };
    Ok(OpenedSource {
        source,
        mic_counters,
    })
}

/// The JSON-lines stream on stdout (a closed pipe ends the run). A file
/// (`output.events`) is kept by the builder across reloads (see [`EventsFile`]).
pub fn stdout_sink(cfg: &Config) -> Box<dyn EventSink> {
    Box::new(JsonLinesSink::new(std::io::stdout().lock()).with_partials(cfg.output.partials))
}

/// What a run reports besides the pipeline's own stats.
#[derive(Debug, Clone)]
pub struct DaemonReport {
    pub stats: RunStats,
    /// CPU seconds spent on the stream (model loading excluded).
    pub stream_cpu_s: f64,
    pub model_load_ms: f64,
    /// Where the HTTP listener was bound (the real port when `http.bind` asked for 0).
    pub http_addr: Option<std::net::SocketAddr>,
}
