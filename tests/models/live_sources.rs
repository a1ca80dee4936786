//! Live sources that fail on purpose: a device missing at start, one that disappears
//! mid-stream and comes back, one that stalls; all through `ReconnectingSource`, on a
//! clock the test drives (no timing asserts on the machine's clock). Then the real
//! thing where this machine has it: cpal on ALSA's `null` device, a microphone that
//! does not exist, `sarcasmd devices`, and the daemon running without its microphone.

use crate::common;

use std::collections::VecDeque;
use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sarcasmd::common::drops::DropReason;
use sarcasmd::common::reconnect::{BackoffPolicy, Clock};
use sarcasmd::sources::audio::{
    AudioError, AudioSource, MicCounters, MicOpener, MicOptions, MicSource, Opener,
    ReconnectingSource, SourceGap,
};

const CHUNK: usize = 1_600; // 100 ms at 16 kHz

/// Time that moves only when the wrapper sleeps or a test source delivers.
#[derive(Default)]
struct TestClock(Mutex<Duration>);

impl TestClock {
    fn advance(&self, d: Duration) {
        *self.0.lock().unwrap() += d;
    }
}

impl Clock for TestClock {
    fn now(&self) -> Duration {
        *self.0.lock().unwrap()
    }
    fn sleep(&self, d: Duration) {
        self.advance(d)
    }
}

/// How a scripted device behaves once open.
#[derive(Clone, Copy)]
enum Then {
    /// After its chunks, reads fail (device unplugged).
    Unplugged,
    /// After its chunks, no more data; after `stall` without data, a stall error (what
    /// `MicSource` does when callbacks stop).
    Stalls { stall: Duration },
    /// Keeps delivering.
    Runs,
}

#[derive(Clone, Copy)]
enum Step {
    /// This open attempt fails.
    Missing,
    /// This open attempt gives a device that delivers `chunks` of 100 ms, then `then`.
    Device { chunks: usize, then: Then },
}

struct ScriptedDevice {
    clock: Arc<TestClock>,
    chunks: usize,
    then: Then,
    quiet: Duration,
}

impl AudioSource for ScriptedDevice {
    fn describe(&self) -> String {
        "scripted device".into()
    }
    fn is_live(&self) -> bool {
        true
    }
    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        let step = Duration::from_millis(100);
        if self.chunks > 0 || matches!(self.then, Then::Runs) {
            self.chunks = self.chunks.saturating_sub(1);
            self.clock.advance(step);
            out.extend(std::iter::repeat_n(0.1f32, CHUNK));
            return Ok(true);
        }
        let reason = match self.then {
            Then::Unplugged => "No such device (os error 19)".to_string(),
            Then::Stalls { stall } => {
                // Wait for data as a microphone does (100 ms), then give up after `stall`.
                self.clock.advance(step);
                self.quiet += step;
                if self.quiet <= stall {
                    return Ok(true);
                }
                format!("stalled: no audio for {} ms", self.quiet.as_millis())
            }
            Then::Runs => unreachable!(),
        };
        Err(AudioError::Read {
            what: "scripted device".into(),
            seconds: 0.0,
            reason,
        })
    }
}

struct Script {
    clock: Arc<TestClock>,
    steps: VecDeque<Step>,
    opens: Arc<Mutex<usize>>,
}

impl Opener for Script {
    type Error = String;
    fn describe(&self) -> String {
        "scripted microphone".into()
    }
    fn open(&mut self) -> Result<Box<dyn AudioSource>, String> {
        *self.opens.lock().unwrap() += 1;
        match self.steps.pop_front().unwrap_or(Step::Device {
            chunks: 0,
            then: Then::Runs,
        }) {
            Step::Missing => Err("no audio input device matches \"USB\"".into()),
            Step::Device { chunks, then } => Ok(Box::new(ScriptedDevice {
                clock: self.clock.clone(),
                chunks,
                then,
                quiet: Duration::ZERO,
            })),
        }
    }
}

/// Run the script for `reads` reads; return every gap and the samples delivered.
fn run(steps: Vec<Step>, reads: usize) -> (Vec<SourceGap>, usize, usize) {
    let clock = Arc::new(TestClock::default());
    let opens = Arc::new(Mutex::new(0));
    let script = Script {
        clock: clock.clone(),
        steps: steps.into(),
        opens: opens.clone(),
    };
    let mut src = ReconnectingSource::with_clock(script, BackoffPolicy::default(), clock);
    assert!(src.is_live());
    let (mut gaps, mut samples) = (Vec::new(), 0);
    let mut buf = Vec::new();
    for _ in 0..reads {
        buf.clear();
        assert!(src.read_chunk(&mut buf).expect("never fails"), "never ends");
        samples += buf.len();
        while let Some(g) = src.take_gap() {
            gaps.push(g);
        }
    }
    let n = *opens.lock().unwrap();
    (gaps, samples, n)
}

#[test]
fn a_device_missing_at_start_is_retried_and_its_gap_starts_at_zero() {
    let (gaps, samples, opens) = run(
        vec![
            Step::Missing,
            Step::Missing,
            Step::Device {
                chunks: 0,
                then: Then::Runs,
            },
        ],
        100,
    );
    // Tried at 0 s (failed), 0.5 s (failed), 1.5 s (open); delivery from then on.
    assert_eq!(opens, 3);
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    assert_eq!(gaps[0].start_s, 0.0);
    assert_eq!(gaps[0].duration_s, 1.5);
    assert!(gaps[0].reason.contains("cannot open"), "{gaps:?}");
    assert!(gaps[0].reason.contains("USB"), "{gaps:?}");
    assert!(samples > 50 * CHUNK);
}

#[test]
fn a_device_that_disappears_mid_stream_and_comes_back_leaves_one_gap() {
    let (gaps, _, opens) = run(
        vec![
            Step::Device {
                chunks: 10,
                then: Then::Unplugged,
            },
            Step::Missing,
            Step::Device {
                chunks: 0,
                then: Then::Runs,
            },
        ],
        100,
    );
    assert_eq!(opens, 3);
    // 1 s of audio, lost at 1.0 s; retried at 1.5 s (missing) and 2.5 s (back).
    assert_eq!(
        gaps,
        [SourceGap {
            start_s: 1.0,
            duration_s: 1.5,
            reason: "device lost: scripted device: read failed after 0.00 s of audio: No such device (os error 19)".into(),
        }]
    );
}

#[test]
fn a_stalled_device_is_reopened_and_the_gap_includes_the_stall() {
    let (gaps, _, opens) = run(
        vec![
            Step::Device {
                chunks: 5,
                then: Then::Stalls {
                    stall: Duration::from_millis(2_000),
                },
            },
            Step::Device {
                chunks: 0,
                then: Then::Runs,
            },
        ],
        100,
    );
    assert_eq!(opens, 2);
    assert_eq!(gaps.len(), 1, "{gaps:?}");
    // Data until 0.5 s, silence until the stall is declared at 2.6 s, reopened 0.5 s
    // later: the gap runs from the last audio to the reopening.
    assert_eq!(gaps[0].start_s, 0.5);
    assert!((gaps[0].duration_s - 2.6).abs() < 1e-9, "{gaps:?}");
    assert!(gaps[0].reason.contains("stalled"), "{gaps:?}");
}

#[test]
fn repeated_outages_each_give_one_gap_on_the_stream_clock() {
    let mut steps = Vec::new();
    for _ in 0..50 {
        steps.push(Step::Device {
            chunks: 3,
            then: Then::Unplugged,
        });
        steps.push(Step::Missing);
    }
    let (gaps, _, _) = run(steps, 2_000);
    assert_eq!(gaps.len(), 50, "{}", gaps.len());
    for (k, g) in gaps.iter().enumerate() {
        // 0.3 s of audio per device; each outage: 0.5 s, then a failed attempt, 1 s.
        assert!(
            (g.start_s - 0.3 * (k + 1) as f64).abs() < 1e-9,
            "{k}: {g:?}"
        );
        assert_eq!(g.duration_s, 1.5, "{k}: {g:?}");
    }
}

/// ALSA's `null` device "captures" silence as fast as it can: the real cpal callback,
/// ring, conversion (f32 stereo 48 kHz by default) and resampler, without a microphone.
#[test]
fn the_real_capture_path_on_alsa_null() {
    let opts = MicOptions {
        device: Some("alsa:null".into()),
        ..Default::default()
    };
    let counters = Arc::new(MicCounters::default());
    let mut mic = match MicSource::open(&opts, counters.clone()) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("SKIPPED: ALSA's null capture device is not available here: {e}");
            return;
        }
    };
    assert!(mic.is_live());
    let what = mic.describe();
    assert!(what.contains("alsa:null") && what.contains("Hz"), "{what}");
    let mut out = Vec::new();
    let t0 = Instant::now();
    while out.len() < 16_000 && t0.elapsed() < Duration::from_secs(20) {
        mic.read_chunk(&mut out).expect("null device reads");
    }
    assert!(out.len() >= 16_000, "only {} samples", out.len());
    assert!(out.iter().all(|s| s.abs() < 1e-6), "null captures silence");
    // The callback outruns any reader: overruns are counted, not fatal.
    std::thread::sleep(Duration::from_millis(200));
    mic.read_chunk(&mut out).unwrap();
    eprintln!(
        "null device: {} samples read, {} overrun samples in {} events, {} xruns",
        out.len(),
        counters.drops.get(DropReason::MicOverrunSamples),
        counters.overrun_events.load(Ordering::Relaxed),
        counters.drops.get(DropReason::MicXruns)
    );
    assert!(counters.drops.get(DropReason::MicOverrunSamples) > 0);
    drop(mic);

    // Through the reconnecting wrapper, as the daemon opens it.
    let opener = MicOpener::new(opts);
    let mut src = ReconnectingSource::new(opener, BackoffPolicy::default());
    assert!(src.is_connected());
    let mut out = Vec::new();
    for _ in 0..20 {
        src.read_chunk(&mut out).unwrap();
    }
    assert!(!out.is_empty());
    assert_eq!(src.take_gap(), None);
}

#[test]
fn a_microphone_that_does_not_exist_is_retried_without_blocking() {
    let opener = MicOpener::new(MicOptions {
        device: Some("no-such-microphone-xyz".into()),
        ..Default::default()
    });
    let policy = BackoffPolicy {
        initial: Duration::from_millis(20),
        max: Duration::from_millis(80),
        ..Default::default()
    };
    let mut src = ReconnectingSource::new(opener, policy);
    assert!(!src.is_connected());
    assert!(
        src.describe().contains("no-such-microphone-xyz"),
        "{}",
        src.describe()
    );
    let t0 = Instant::now();
    let mut reads = 0;
    let mut out = Vec::new();
    while t0.elapsed() < Duration::from_millis(600) {
        let r0 = Instant::now();
        assert!(src.read_chunk(&mut out).unwrap());
        // One read waits at most the 100 ms poll (+ an ALSA device listing); a generous
        // bound, only to catch a read that blocks on the backoff.
        assert!(r0.elapsed() < Duration::from_secs(5), "{:?}", r0.elapsed());
        reads += 1;
    }
    assert!(out.is_empty() && reads > 1);
    assert_eq!(src.outages(), 1, "one outage, however many attempts");
    assert_eq!(src.take_gap(), None, "no gap before the device is back");
}

#[test]
fn sarcasmd_devices_runs_and_exits_0() {
    let bin = env!("CARGO_BIN_EXE_sarcasmd");
    let out = Command::new(bin).arg("devices").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    assert!(
        text.contains("Audio inputs") && text.contains("Cameras"),
        "{text}"
    );
    let out = Command::new(bin)
        .args(["devices", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mics = v["audio_inputs"].as_array().unwrap();
    let real = mics.iter().filter(|d| d["virtual"] == false).count();
    if real == 0 {
        assert!(text.contains("No microphone found"), "{text}");
    }
    if v["cameras"].as_array().unwrap().is_empty() && v["camera_error"].is_null() {
        assert!(text.contains("No camera found"), "{text}");
    }
}

/// `sarcasmd run` with a microphone that is not there: the daemon loads its models,
/// logs the missing device once, keeps retrying, and stops cleanly on SIGTERM.
#[test]
fn the_daemon_keeps_running_without_its_microphone() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("mic.toml");
    std::fs::write(
        &cfg,
        "[source]\nkind = \"mic\"\ndevice = \"no-such-microphone-xyz\"\nreconnect_initial_ms = 200\nreconnect_max_ms = 1000\n\n[output]\nevents = \"events.jsonl\"\n",
    )
    .unwrap();
    let stderr_path = dir.path().join("stderr.log");
    let mut notify = common::notify::Notify::bind(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sarcasmd"))
        .current_dir(dir.path())
        .args(["run", "--config"])
        .arg(&cfg)
        .env("RUST_LOG", "info")
        .env("NOTIFY_SOCKET", notify.path())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let log = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let t0 = Instant::now();
    // Models loaded and the stream running (the microphone's absence does not hold up
    // readiness), then an observation window: retries go on for at least 3 s, the
    // span over which the log must say "missing" once. Retries are not visible outside
    // the process, so the window is a duration, not a state.
    notify.wait_for("READY=1", Duration::from_secs(240));
    let ready_after = t0.elapsed();
    while t0.elapsed() < ready_after.max(Duration::from_secs(3)) {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("daemon exited early ({st}):\n{}", log());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let t1 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(30),
            "no exit after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let log = log();
    assert_eq!(status.code(), Some(0), "{log}");
    let lost = log
        .lines()
        .filter(|l| l.contains("The daemon keeps running without it"))
        .count();
    assert_eq!(lost, 1, "one line for the missing device:\n{log}");
    assert!(log.contains("no-such-microphone-xyz"), "{log}");
    // Retries at 0.2, 0.6, 1.4, 2.4, ... s all fail the same way: logged at debug
    // level, with a reminder at most once a minute.
    let reminders = log.matches("still unavailable").count() as u64;
    assert!(
        reminders <= t0.elapsed().as_secs() / 60,
        "{reminders}:\n{log}"
    );
}
