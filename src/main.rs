//! `sarcasmd` command line. Errors carry their own exit code: 2 for bad input (config,
//! audio), 3 for missing or corrupt models, 1 otherwise.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

use sarcasmd::config::{Config, SourceConfig};
use sarcasmd::daemon::builder::Daemon;
use sarcasmd::daemon::DaemonError;
use sarcasmd::sources::video::FileVideoSource;

mod cli;

#[derive(Parser)]
#[command(
    name = "sarcasmd",
    version,
    about = "Real-time sarcasm detection from speech"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the daemon as configured (source, models, outputs all from the file).
    Run {
        #[arg(long)]
        config: PathBuf,
    },
    /// Run the same pipeline over a WAV file, or raw s16le mono PCM on stdin (`-`).
    Replay {
        /// WAV file, or `-` for raw PCM on stdin.
        input: String,
        /// Deliver audio at real-time pace, like a microphone.
        #[arg(long)]
        realtime: bool,
        /// Sample rate of raw PCM on stdin.
        #[arg(long, default_value_t = 16_000)]
        rate: u32,
        /// Config file for models, segmentation and outputs (its source is ignored).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Where events go (`-` = stdout); overrides the config.
        #[arg(long)]
        events: Option<String>,
        /// Write a JSON run summary (per-stage times, real-time factor, peak RSS) here.
        #[arg(long)]
        stats: Option<PathBuf>,
        /// Whisper model (tiny.en, tiny.en-q8_0, base, base-q8_0); overrides the config.
        #[arg(long)]
        model: Option<String>,
        /// en, de or auto; overrides the config.
        #[arg(long)]
        language: Option<String>,
        /// Raw PCM on stdin comes from a live capture (`arecord ... |`): never block it;
        /// when the pipeline falls behind, drop and count instead of waiting.
        #[arg(long)]
        live: bool,
        /// A video file recorded with the audio (same start): adds the vision view.
        #[arg(long)]
        video: Option<PathBuf>,
    },
    /// Check a config file; no side effects.
    Validate { file: PathBuf },
    /// List audio inputs (index, id, name, formats) and cameras, as `source.device`
    /// takes them. Exits 0 even when there are none.
    Devices {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Model cache: where it is and whether every file matches the pinned checksums.
    Models {
        #[command(subcommand)]
        cmd: ModelsCmd,
    },
    /// Print prosody frames of a WAV file as JSON lines (for checking F0 against Praat).
    Prosody { file: PathBuf },
    /// Per-utterance feature vectors of audio clips, computed by the live pipeline, for
    /// training. MANIFEST is JSON lines (docs/manifest.md); items without audio are skipped.
    Features {
        #[arg(long)]
        manifest: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Latency, CPU and memory of the whole pipeline: replay recordings in real time
    /// (streaming, then one-shot decoding as the baseline) and print a table; JSON with
    /// every run goes to --json. INPUT: a folder of .wav (a .txt beside each gives the
    /// reference transcript for word error rates), one .wav, or a manifest.
    Bench {
        input: PathBuf,
        /// Config (board profile) to bench; its source and outputs are ignored.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Repetitions of each mode (figures are medians).
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// Silence after each clip, in milliseconds.
        #[arg(long, default_value_t = 1000)]
        gap_ms: u32,
        /// Only the first N clips.
        #[arg(long)]
        limit: Option<usize>,
        /// Skip the one-shot baseline.
        #[arg(long)]
        no_baseline: bool,
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw the latency CDF per mode (p50/p95 marked) and the per-stage medians,
        /// stacked, as SVG here (docs/pictures.md).
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Score a labelled manifest with the real pipeline and the served heads; print a
    /// MuSAG-style table (every view and combination, with and without context, baselines,
    /// confusion, calibration, annotator agreement). Audio goes through VAD and Whisper;
    /// gold transcripts only with --gold-text.
    Eval {
        manifest: PathBuf,
        /// Config for models, heads and thresholds (its source and outputs are ignored).
        #[arg(long)]
        config: Option<PathBuf>,
        /// Heads directory (overrides the config), e.g. heads trained for one protocol.
        #[arg(long)]
        heads: Option<PathBuf>,
        /// Score the gold transcript instead of Whisper's for items with audio.
        #[arg(long)]
        gold_text: bool,
        /// Seconds of preceding context for the context rows; 0 leaves them out.
        #[arg(long, default_value_t = 15.0, value_parser = seconds_at_least_zero)]
        context_s: f32,
        /// Only items of this split (e.g. `test`).
        #[arg(long)]
        split: Option<String>,
        /// Only the first N items (after --split).
        #[arg(long)]
        limit: Option<usize>,
        /// Write the report with every row and every item's scores as JSON here.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Draw ROC curves and a reliability diagram of each view and the served
        /// fusion, with the baselines, as SVG here (docs/pictures.md).
        #[arg(long)]
        plot: Option<PathBuf>,
    },
    /// Draw saved `bench --json` / `eval --json` runs as SVG (several bench runs are
    /// overlaid, e.g. two machines or two profiles).
    Plot {
        #[command(subcommand)]
        cmd: PlotCmd,
    },
    /// One self-contained HTML page of a recorded meeting from its events (JSON lines):
    /// timeline coloured by p_sarcastic with each view's score on hover, the transcript
    /// with flagged lines marked, gaps and drops, and the latency summary. Opens offline.
    Report {
        /// The event stream (`sarcasmd replay ... > events.jsonl`, or `output.events`).
        events: PathBuf,
        /// The HTML file to write.
        #[arg(short, long)]
        out: PathBuf,
        /// `replay --stats` summary of the same run: adds its drop counters by reason.
        #[arg(long)]
        stats: Option<PathBuf>,
    },
    /// Corrections of the room head (`[room]`): record labels for events after the
    /// meeting (`--events EVENTS.jsonl --labels FILE`: `ID LABEL` per line, labels
    /// `sarcastic` / `not_sarcastic`), or `--list`, `--forget N`, `--reset` the store. A
    /// running daemon picks them up within 2 s.
    #[command(group(clap::ArgGroup::new("action").required(true).args(["events", "list", "forget", "reset"])))]
    Feedback {
        /// The daemon's config (its `room.store`, models and text settings).
        #[arg(long)]
        config: Option<PathBuf>,
        /// The event stream the labels refer to (`output.events`).
        #[arg(long, requires = "labels")]
        events: Option<PathBuf>,
        #[arg(long, requires = "events")]
        labels: Option<PathBuf>,
        /// Print the corrections held.
        #[arg(long)]
        list: bool,
        /// With --list: JSON lines (without the vectors).
        #[arg(long, requires = "list")]
        json: bool,
        /// Take correction N back (its number from --list).
        #[arg(long)]
        forget: Option<u64>,
        /// Remove every correction.
        #[arg(long)]
        reset: bool,
    },
    /// Sentence embeddings by the daemon's text encoder, for training text heads.
    /// Input: a manifest (docs/manifest.md); an item without text embeds "".
    Embed {
        #[arg(long = "in")]
        input: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Prepend the item's context turns of the last N seconds, exactly as
        /// `sarcasmd eval` builds its context condition (0 = the text alone).
        #[arg(long, default_value_t = 0.0, value_parser = seconds_at_least_zero)]
        context_s: f32,
    },
}

#[derive(Subcommand)]
enum PlotCmd {
    /// Latency CDFs and stage stacks of one or more `sarcasmd bench --json` files, each
    /// labelled by its file name.
    Bench {
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[arg(short, long)]
        out: PathBuf,
        /// Title above the picture (default: the file names).
        #[arg(long)]
        title: Option<String>,
    },
    /// ROC curves and reliability diagram of a `sarcasmd eval --json` file.
    Eval {
        file: PathBuf,
        #[arg(short, long)]
        out: PathBuf,
    },
}

#[derive(Subcommand)]
enum ModelsCmd {
    /// Check every model against models.lock.json (size and SHA-256).
    Verify {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Print the model directory.
    Dir,
    /// Fetch and convert the models (runs scripts/fetch-models.sh from the source tree,
    /// or the installed package's copy).
    Fetch {
        #[arg(long)]
        dir: Option<PathBuf>,
    },
}

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(
        "info,whisper_rs=warn,whisper_rs::whisper_logging_hook=warn,whisper_rs::ggml_logging_hook=warn",
    ))
    .target(env_logger::Target::Stderr)
    .init();
    let cli = Cli::parse();
    let code = match dispatch(cli) {
        Ok(code) => code,
        // `sarcasmd replay x.wav | head -1`: the reader leaving is not a failure.
        Err(e) if is_broken_pipe(&e) => {
            log::info!("event reader closed the pipe; stopping");
            0
        }
        Err(e) => {
            let code = e
                .downcast_ref::<DaemonError>()
                .map(DaemonError::exit_code)
                .unwrap_or(1);
            eprintln!("error: {}", sarcasmd::common::error::Chain(e.as_ref()));
            code
        }
    };
    std::process::exit(code);
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    matches!(
        e.downcast_ref::<DaemonError>(),
        Some(DaemonError::Pipeline(sarcasmd::pipeline::PipelineError::Sink(io)))
            if io.kind() == std::io::ErrorKind::BrokenPipe
    )
}

fn dispatch(cli: Cli) -> anyhow::Result<i32> {
    match cli.cmd {
        Cmd::Run { config } => {
            let stop = install_stop_handler()?;
            let reload = Arc::new(AtomicBool::new(false));
            signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
                .context("installing SIGHUP handler")?;
            let r = Daemon::from_file(&config)?
                .stop_on(stop)
                .reload_on(reload)
                .run()?;
            cli::summary::report_with_cpu(&r.stats, None, r.stream_cpu_s, r.model_load_ms)?;
            Ok(0)
        }
        Cmd::Replay {
            input,
            realtime,
            rate,
            config,
            events,
            stats,
            model,
            language,
            live,
            video,
        } => {
            let mut cfg = match &config {
                Some(p) => Config::load(p).map_err(DaemonError::from)?,
                None => Config::default(),
            };
            cfg.source = if input == "-" {
                SourceConfig::Stdin {
                    sample_rate_hz: rate,
                    live,
                }
            } else {
                SourceConfig::Wav {
                    path: input.clone().into(),
                    realtime,
                }
            };
            if let Some(e) = events {
                cfg.output.events = e;
            }
            if let Some(path) = video {
                // A file the user named must be readable: check it before models load
                // (the daemon would otherwise warn and run audio-only).
                FileVideoSource::probe(&path).map_err(DaemonError::VideoFile)?;
                cfg.vision.source = sarcasmd::views::vision::VisionSourceConfig::File {
                    path,
                    offset_s: 0.0,
                };
            }
            if let Some(m) = model {
                cfg.asr.model = m;
            }
            if let Some(l) = language {
                cfg.asr.language = l;
            }
            let origin = config.unwrap_or_else(|| PathBuf::from("<command line>"));
            cfg.validate().map_err(|problems| {
                DaemonError::Config(sarcasmd::config::ConfigError::Invalid {
                    path: origin,
                    problems,
                })
            })?;
            let stop = install_stop_handler()?;
            let r = Daemon::builder(cfg).stop_on(stop).run()?;
            cli::summary::report_with_cpu(
                &r.stats,
                stats.as_deref(),
                r.stream_cpu_s,
                r.model_load_ms,
            )?;
            Ok(0)
        }
        Cmd::Bench {
            input,
            config,
            runs,
            gap_ms,
            limit,
            no_baseline,
            json,
            plot,
        } => {
            cli::check_outputs(
                &[("--json", json.as_deref()), ("--plot", plot.as_deref())],
                &[("the input", Some(&input)), ("--config", config.as_deref())],
            )?;
            cli::bench::bench(
                &input,
                config.as_deref(),
                runs,
                gap_ms,
                limit,
                !no_baseline,
                cli::bench::BenchOutputs {
                    json: json.as_deref(),
                    plot: plot.as_deref(),
                },
            )
        }
        Cmd::Plot { cmd } => cli::plot::plot_cmd(cmd),
        Cmd::Report { events, out, stats } => cli::report::report(&events, &out, stats.as_deref()),
        Cmd::Validate { file } => cli::validate::validate(&file),
        Cmd::Models { cmd } => cli::models::models_cmd(cmd),
        Cmd::Devices { json } => cli::devices::devices(json),
        Cmd::Prosody { file } => cli::prosody::prosody(&file),
        Cmd::Features {
            manifest,
            out,
            config,
        } => {
            cli::check_outputs(
                &[("--out", Some(&out))],
                &[
                    ("--manifest", Some(&manifest)),
                    ("--config", config.as_deref()),
                ],
            )?;
            cli::training::features(&manifest, &out, config.as_deref())
        }
        Cmd::Feedback {
            config,
            events,
            labels,
            list,
            json,
            forget,
            reset,
        } => {
            use cli::feedback::Action;
            let action = match (&events, &labels, forget) {
                (Some(events), Some(labels), _) => Action::Record { events, labels },
                (_, _, Some(seq)) => Action::Forget(seq),
                _ if reset => Action::Reset,
                _ => {
                    debug_assert!(list);
                    Action::List { json }
                }
            };
            cli::feedback::feedback(config.as_deref(), action)
        }
        Cmd::Embed {
            input,
            out,
            context_s,
        } => {
            cli::check_outputs(&[("--out", Some(&out))], &[("--in", Some(&input))])?;
            cli::training::embed(&input, &out, context_s)
        }
        Cmd::Eval {
            manifest,
            config,
            heads,
            gold_text,
            context_s,
            split,
            limit,
            json,
            plot,
        } => cli::eval::eval(
            &manifest,
            config.as_deref(),
            heads,
            sarcasmd::tools::eval::EvalOptions {
                gold_text,
                context_s,
                split,
                limit,
            },
            cli::eval::EvalOutputs {
                json: json.as_deref(),
                plot: plot.as_deref(),
            },
        ),
    }
}

/// After SIGTERM or SIGINT the process ends within this time even when the graceful
/// path cannot finish (a stdout reader that stopped reading, a file open that blocks):
/// the unit's `TimeoutStopSec=5s` would otherwise end it with SIGKILL, and an
/// interactive user would wait forever.
const SHUTDOWN_DEADLINE: Duration = Duration::from_millis(4_500);

/// The stop flag set by SIGTERM/SIGINT. A second signal while stopping exits at once
/// (status 130); a stop that has not finished after [`SHUTDOWN_DEADLINE`] exits 1.
fn install_stop_handler() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // Registered first, so it sees the flag as it was before this signal.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let watched = stop.clone();
    std::thread::Builder::new()
        .name("stop-deadline".into())
        .spawn(move || {
            while !watched.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(SHUTDOWN_DEADLINE);
            log::error!(
                "shutdown did not finish within {:.1} s of the signal (a stalled reader of the \
                 events on stdout, or a file that blocks); exiting now, events in flight are lost",
                SHUTDOWN_DEADLINE.as_secs_f64()
            );
            std::process::exit(1);
        })
        .context("starting the shutdown deadline thread")?;
    Ok(stop)
}

/// `--context-s`: refused by clap (exit 2, with usage) unless a finite number >= 0.
fn seconds_at_least_zero(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds >= 0")),
    }
}

#[cfg(test)]
mod tests {

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config file /x.toml: {source}")]
    struct Embeds {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("--video needs a video file")]
    struct Wraps(#[source] std::io::Error);

    #[test]
    fn each_cause_is_printed_once() {
        let os = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(Embeds { source: os() });
        let line = sarcasmd::common::error::Chain(e.as_ref()).to_string();
        assert_eq!(line.matches(&os().to_string()).count(), 1, "{line}");
        assert!(
            line.starts_with("cannot read config file /x.toml: "),
            "{line}"
        );
        let e = anyhow::Error::new(Wraps(os()));
        assert_eq!(
            sarcasmd::common::error::Chain(e.as_ref()).to_string(),
            format!("--video needs a video file: {}", os())
        );
        let e = anyhow::Error::new(os()).context("opening the stats file");
        assert_eq!(
            sarcasmd::common::error::Chain(e.as_ref()).to_string(),
            format!("opening the stats file: {}", os())
        );
    }
}
