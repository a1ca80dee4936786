//! Shared helpers for the integration tests: real speech from espeak-ng, the real
//! models from the cache, and the pipeline exactly as the daemon runs it.
#![allow(dead_code)]

pub mod daemon;
pub mod mosquitto;
pub mod notify;
pub mod webdriver;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use sarcasmd::config::Config;
use sarcasmd::daemon::builder::{DaemonBuilder, DaemonHandle, Ready};
use sarcasmd::pipeline::{self, Engine, RunOptions, RunStats};
use sarcasmd::sinks::event::{UtteranceEvent, VecSink};
use sarcasmd::sources::audio::{AudioSource, StreamResampler, PIPELINE_RATE_HZ};

pub const RATE: u32 = PIPELINE_RATE_HZ;

/// One engine per test binary: models load once, as in the daemon.
pub fn engine() -> &'static Engine {
    shared_engine().as_ref()
}

/// The same engine, to hand to [`DaemonBuilder::engine`].
pub fn engine_arc() -> Arc<Engine> {
    shared_engine().clone()
}

fn shared_engine() -> &'static Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| {
        Arc::new(Engine::load(&Config::default()).unwrap_or_else(|e| {
            panic!("cannot load models ({e}); run scripts/setup.sh first (it fetches them)")
        }))
    })
}

/// How long a held daemon may take to be ready (models are loaded once per test
/// binary; the first daemon pays for it on a slow board).
pub const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Start a daemon in-process with this test binary's engine and wait until its stream
/// runs: the handle, and where its HTTP listener is (`http.bind` may ask for port 0).
/// The config must name the default models (the engine is shared).
pub fn hold(builder: DaemonBuilder) -> (DaemonHandle, Ready) {
    let handle = builder
        .engine(engine_arc())
        .start()
        .expect("spawn the daemon thread");
    let ready = handle
        .wait_ready(READY_TIMEOUT)
        .unwrap_or_else(|e| panic!("{e}"));
    (handle, ready)
}

/// A config from TOML text, as the daemon would load it from a file.
pub fn parse_config(toml: &str) -> Config {
    Config::parse(toml, Path::new("<test>")).unwrap_or_else(|e| panic!("{e}\n{toml}"))
}

/// Wait until `ready()` holds, checking every 20 ms; panics naming `what` after
/// `timeout`. For state that has no notification to wait on (a file's contents, a
/// peer's view); the daemon's own state is waited on through its handle.
pub fn wait_until(what: &str, timeout: Duration, mut ready: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !ready() {
        assert!(t0.elapsed() < timeout, "not {what} within {timeout:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Synthesise `text` with espeak-ng and return 16 kHz mono samples (resampled by the
/// pipeline's own resampler from espeak's 22.05 kHz).
pub fn speak(text: &str, voice: &str) -> Vec<f32> {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("s.wav");
    let st = Command::new("espeak-ng")
        .args(["-v", voice, "-s", "150", "-w"])
        .arg(&wav)
        .arg(text)
        .status()
        .expect("espeak-ng not found: run scripts/install-system-deps.sh");
    assert!(st.success(), "espeak-ng failed");
    read_wav_16k(&wav)
}

/// A 16-bit WAV file at the pipeline's rate, resampled by the pipeline's own resampler.
pub fn read_wav_16k(wav: &Path) -> Vec<f32> {
    let mut r = hound::WavReader::open(wav).unwrap();
    let rate = r.spec().sample_rate;
    let x: Vec<f32> = r
        .samples::<i16>()
        .map(|s| s.unwrap() as f32 / 32768.0)
        .collect();
    let mut rs = StreamResampler::new(rate, RATE).unwrap();
    let mut y = Vec::new();
    rs.process(&x, &mut y).unwrap();
    rs.finish(&mut y).unwrap();
    y
}

/// The child's exit status once it has exited, or None after `timeout` (still running).
pub fn wait_exit(
    child: &mut std::process::Child,
    timeout: std::time::Duration,
) -> Option<std::process::ExitStatus> {
    let t0 = std::time::Instant::now();
    while t0.elapsed() < timeout {
        if let Some(st) = child.try_wait().unwrap() {
            return Some(st);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    None
}

/// First and last sample above a small amplitude: where the speech really is.
pub fn speech_bounds(x: &[f32]) -> (usize, usize) {
    let thr = 0.01;
    let a = x.iter().position(|v| v.abs() > thr).unwrap_or(0);
    let b = x
        .iter()
        .rposition(|v| v.abs() > thr)
        .map_or(x.len(), |i| i + 1);
    (a, b)
}

pub fn silence(seconds: f64) -> Vec<f32> {
    vec![0.0; (seconds * RATE as f64) as usize]
}

/// A stream of sentences separated by silences, with the true speech boundaries (s).
pub struct Composed {
    pub samples: Vec<f32>,
    pub truth: Vec<(f64, f64, String)>,
}

pub fn compose(lead_s: f64, parts: &[(&str, &str)], gap_s: f64) -> Composed {
    let mut samples = silence(lead_s);
    let mut truth = Vec::new();
    for (text, voice) in parts {
        let s = speak(text, voice);
        let (a, b) = speech_bounds(&s);
        let base = samples.len();
        truth.push((
            (base + a) as f64 / RATE as f64,
            (base + b) as f64 / RATE as f64,
            text.to_string(),
        ));
        samples.extend_from_slice(&s);
        samples.extend(silence(gap_s));
    }
    Composed { samples, truth }
}

/// One turn with a pause after words Whisper ends with a full stop ("How lovely." |
/// "the video call froze right at the important part."), after `lead_s` of silence:
/// the sentence-end shortcut ends it at the pause and the speaker goes on within a
/// long enough full hangover (the tests set 900 ms), so it is reopened and revised.
/// `lead_s` also sets where the 32 ms VAD chunks fall in the speech, which changes what
/// tiny.en makes of the first words at the pause: with 2.0 or 6.0 s it wrote "How
/// lovely, how lovely, ..." (no full stop, so no early end); 0.6, 3.0, 3.2, 4.0, 5.0,
/// 5.12 and 5.6 s gave "How lovely." (2026-11-23).
pub fn turn_going_on_after_a_full_stop(lead_s: f64) -> Vec<f32> {
    let first = speak("How lovely.", "en-us");
    let second = speak("the video call froze right at the important part.", "en-us");
    let (a, b) = speech_bounds(&first);
    let (c, d) = speech_bounds(&second);
    let mut samples = silence(lead_s);
    samples.extend_from_slice(&first[a..b]);
    // Past the 96 ms shortcut with room for the decode at the pause on a slow or busy
    // CPU (it must return before speech resumes: with 0.4 s it did not on a 2-core Zen 4
    // sharing its cores), and well inside the tests' 900 ms hangover.
    samples.extend(silence(0.65));
    samples.extend_from_slice(&second[c..d]);
    samples.extend(silence(1.5));
    samples
}

pub fn write_wav_i16(path: &Path, x: &[f32], rate: u32) {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    for v in x {
        w.write_sample((v.clamp(-1.0, 1.0) * 32767.0).round() as i16)
            .unwrap();
    }
    w.finalize().unwrap();
}

pub fn to_s16le(x: &[f32]) -> Vec<u8> {
    x.iter()
        .flat_map(|v| ((v.clamp(-1.0, 1.0) * 32767.0).round() as i16).to_le_bytes())
        .collect()
}

pub fn run(source: Box<dyn AudioSource>) -> (Vec<UtteranceEvent>, RunStats) {
    run_with(&Config::default(), source)
}

pub fn run_with(cfg: &Config, source: Box<dyn AudioSource>) -> (Vec<UtteranceEvent>, RunStats) {
    let mut sink = VecSink::default();
    let stats = pipeline::run_stream(engine(), cfg, source, &mut sink, &RunOptions::default())
        .expect("pipeline run");
    (sink.0, stats)
}

/// `seconds` of silence through the pipeline with these counters (the registry tests:
/// what they count before the run must reach the summary the run returns).
pub fn run_silence_counted(counters: &Arc<pipeline::Counters>, seconds: f64) -> RunStats {
    let opts = RunOptions {
        counters: counters.clone(),
        ..Default::default()
    };
    let source = sarcasmd::tools::bench::SamplesSource::new(Arc::new(silence(seconds)));
    pipeline::run_stream(
        engine(),
        &Config::default(),
        Box::new(source),
        &mut VecSink::default(),
        &opts,
    )
    .expect("pipeline run")
}

/// Word error rate (the bench's word edit distance over normalised words) and the
/// reference length.
pub fn wer(reference: &str, hypothesis: &str) -> (f64, usize) {
    use sarcasmd::tools::bench::{normalise_words, word_edits};
    let r = normalise_words(reference);
    let h = normalise_words(hypothesis);
    (word_edits(&r, &h) as f64 / r.len().max(1) as f64, r.len())
}

/// `../shared` beside the repo, when present (CI has it; a user's fresh clone does not).
pub fn shared_dir() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if p.join("data").is_dir() {
        Some(p)
    } else {
        eprintln!("SKIP: ../shared/data not found beside the repo; this test needs the shared speech clips");
        None
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_sarcasmd")
}

/// A pipe's read and write ends (`std::io::pipe` is newer than the crate's MSRV): a
/// live PCM source a test feeds, like `arecord | sarcasmd` without the processes.
pub fn pipe() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two descriptors, owned below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just opened by pipe2 and are owned nowhere else.
    unsafe {
        (
            std::fs::File::from_raw_fd(fds[0]),
            std::fs::File::from_raw_fd(fds[1]),
        )
    }
}
