//! The daemon as a user runs it: `sarcasmd run --config` in a temp dir, events to a file;
//! `replay` on stdin; the bundled sample; signals and exit codes. These start the binary
//! and learn that it is ready from the systemd notify socket (`READY=1`), not its log.
//! The service's reloads are also checked in-process, through the handle
//! ([`Daemon::from_file`]), where each reload's outcome is returned as a value.

use crate::common;

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::notify::Notify;
use crate::common::*;
use sarcasmd::daemon::builder::{Daemon, HandleError, ReloadOutcome};
use sarcasmd::sinks::event::MemorySink;

fn parse_lines(text: &str) -> Vec<serde_json::Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

fn check_schema(ev: &serde_json::Value) {
    for k in [
        "type",
        "id",
        "start_s",
        "end_s",
        "transcript",
        "language",
        "p_sarcastic",
        "sarcastic",
        "views",
        "latency_ms",
        "models",
    ] {
        assert!(ev.get(k).is_some(), "missing {k}: {ev}");
    }
    assert_eq!(ev["type"], "utterance");
    for v in ["text", "audio", "video"] {
        assert!(ev["views"].get(v).is_some(), "views.{v} missing");
    }
    for s in ["asr", "text", "audio", "fusion", "total"] {
        assert!(ev["latency_ms"][s].is_number(), "latency_ms.{s}");
    }
    let p = ev["p_sarcastic"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&p));
}

#[test]
fn run_with_config_writes_events_file() {
    let d = tempfile::tempdir().unwrap();
    let wav = d.path().join("in.wav");
    let c = compose(
        0.4,
        &[("Oh wonderful, the printer is jammed again.", "en-us")],
        0.8,
    );
    write_wav_i16(&wav, &c.samples, RATE);
    let events = d.path().join("events.jsonl");
    let cfg = d.path().join("room.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nkind = \"wav\"\npath = \"{}\"\n\n[output]\nevents = \"{}\"\n",
            wav.display(),
            events.display()
        ),
    )
    .unwrap();
    let out = Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .current_dir(d.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stdout.is_empty(),
        "events went to the file, stdout stays clean"
    );
    let evs = parse_lines(&std::fs::read_to_string(&events).unwrap());
    assert_eq!(evs.len(), 1);
    check_schema(&evs[0]);
    assert!(evs[0]["transcript"]
        .as_str()
        .unwrap()
        .to_lowercase()
        .contains("printer"));
}

#[test]
fn replay_stdin_pcm_and_transcripts_off() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("private.toml");
    std::fs::write(&cfg, "[output]\ninclude_transcript = false\n").unwrap();
    let c = compose(0.3, &[("I just love working on weekends.", "en-us")], 0.8);
    let mut child = Command::new(bin())
        .args(["replay", "-", "--rate", "16000", "--config"])
        .arg(&cfg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&to_s16le(&c.samples))
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = parse_lines(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(evs.len(), 1);
    check_schema(&evs[0]);
    assert!(evs[0]["transcript"].is_null());
    assert_eq!(evs[0]["asr_segments"].as_array().unwrap().len(), 0);
}

#[test]
fn bundled_sample_gives_five_events() {
    let sample = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/meeting.wav");
    let stats = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(bin())
        .arg("replay")
        .arg(&sample)
        .arg("--stats")
        .arg(stats.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let evs = parse_lines(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(evs.len(), 5, "{evs:#?}");
    for e in &evs {
        check_schema(e);
    }
    let s: serde_json::Value =
        serde_json::from_slice(&std::fs::read(stats.path()).unwrap()).unwrap();
    assert!(s["rtf_cpu"].as_f64().unwrap() > 0.0);
    assert!(s["peak_rss_mb"].as_f64().unwrap() > 0.0);
    assert_eq!(s["utterances"], 5);
}

/// Found by running the unit under a real systemd: `arecord` without `-t raw` stops at its
/// 2 GB WAV limit (18.6 h at 16 kHz), the daemon saw end of file and exited 0, and
/// `Restart=on-failure` left the room without a detector. A live capture that ends is a
/// failure: the events so far are flushed, the exit status is 1.
#[test]
fn stats_of_a_run_stopped_before_any_audio_have_no_per_audio_second_ratio() {
    // A live capture stopped before it delivered audio: the ratios would divide by zero
    // audio seconds (they read 29,894,000 CPU-s per audio-s), so they are null.
    let d = tempfile::tempdir().unwrap();
    let mut notify = Notify::bind(d.path());
    let stats = d.path().join("stats.json");
    let mut child = Command::new(bin())
        .args(["replay", "-", "--rate", "16000", "--stats"])
        .arg(&stats)
        .env("NOTIFY_SOCKET", notify.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut log = String::new();
    // Models loaded and the stream running.
    notify.wait_for("READY=1", READY_TIMEOUT);
    // SAFETY: plain kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    std::io::Read::read_to_string(&mut stderr, &mut log).unwrap();
    let status = child.wait().unwrap();
    drop(stdin);
    assert!(status.success(), "{status:?}\n{log}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert_eq!(s["audio_s"].as_f64(), Some(0.0), "{s}");
    assert!(s["rtf_cpu"].is_null() && s["rtf_wall"].is_null(), "{s}");
    assert!(log.contains("no audio read"), "{log}");
}

/// Issue 34, defect 14: 3 bytes of PCM on stdin gave `rtf_cpu` 309.3. A ratio over
/// less than a second of audio is noise; it is null, as for no audio at all.
#[test]
fn stats_of_a_few_bytes_of_audio_have_no_per_audio_second_ratio() {
    let d = tempfile::tempdir().unwrap();
    let stats = d.path().join("stats.json");
    let mut child = Command::new(bin())
        .args(["replay", "-", "--stats"])
        .arg(&stats)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&[1, 2, 3]).unwrap();
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats).unwrap()).unwrap();
    assert!(s["audio_s"].as_f64().unwrap() < 1.0, "{s}");
    assert!(s["rtf_cpu"].is_null() && s["rtf_wall"].is_null(), "{s}");
    assert!(log.contains("under 1 s of audio: no ratio"), "{log}");
}

#[test]
fn run_exits_1_when_the_live_capture_on_stdin_ends() {
    let d = tempfile::tempdir().unwrap();
    let events = d.path().join("events.jsonl");
    let cfg = d.path().join("room.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nkind = \"stdin\"\nlive = true\n\n[output]\nevents = \"{}\"\n",
            events.display()
        ),
    )
    .unwrap();
    let c = compose(
        0.3,
        &[("Oh wonderful, the printer is jammed again.", "en-us")],
        1.0,
    );
    let mut child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .current_dir(d.path())
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&to_s16le(&c.samples)).unwrap();
    drop(stdin); // the capture process exits
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{log}");
    assert!(log.contains("the live capture on stdin ended"), "{log}");
    let evs = parse_lines(&std::fs::read_to_string(&events).unwrap());
    assert_eq!(
        evs.len(),
        1,
        "the utterance before the end is still written"
    );
}

#[test]
fn sigterm_flushes_and_exits_cleanly_while_stdin_is_silent() {
    let c = compose(
        0.3,
        &[("Oh wonderful, the printer is jammed again.", "en-us")],
        1.0,
    );
    let mut child = Command::new(bin())
        .args(["replay", "-", "--rate", "16000"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Keep stdin open (a live capture that has gone quiet), then ask the daemon to stop.
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&to_s16le(&c.samples)).unwrap();
    stdin.flush().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
    assert!(line.contains("\"type\":\"utterance\""), "{line}");
    // SAFETY: plain kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let t0 = std::time::Instant::now();
    let status = wait_exit(&mut child, std::time::Duration::from_secs(10))
        .expect("daemon did not stop after SIGTERM");
    eprintln!("stopped {:?} after SIGTERM", t0.elapsed());
    assert!(status.success(), "{status:?}");
    drop(stdin);
}

#[test]
fn sigterm_ends_the_process_in_bounded_time_when_nobody_reads_stdout() {
    use std::os::fd::{FromRawFd, OwnedFd};
    // Events go to a pipe that is already full and that nobody reads: the first event's
    // write blocks for good. SIGTERM must still end the process (issue 25, class 10).
    let mut fds = [0i32; 2];
    // SAFETY: pipe2 fills the two descriptors, owned below.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (read_end, write_end) =
        // SAFETY: both descriptors were just opened by pipe2 and are owned nowhere else.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl/write on the pipe's write end, which `write_end` keeps open; `junk`
    // outlives each write.
    unsafe {
        libc::fcntl(fds[1], libc::F_SETPIPE_SZ, 4096);
        let flags = libc::fcntl(fds[1], libc::F_GETFL);
        libc::fcntl(fds[1], libc::F_SETFL, flags | libc::O_NONBLOCK);
        let junk = [b'#'; 512];
        while libc::write(fds[1], junk.as_ptr().cast(), junk.len()) > 0 {}
        libc::fcntl(fds[1], libc::F_SETFL, flags);
    }
    let c = compose(
        0.3,
        &[("Oh wonderful, the printer is jammed again.", "en-us")],
        1.5,
    );
    let d = tempfile::tempdir().unwrap();
    let mut notify = Notify::bind(d.path());
    let mut child = Command::new(bin())
        .args(["replay", "-", "--rate", "16000"])
        .env("NOTIFY_SOCKET", notify.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&to_s16le(&c.samples)).unwrap();
    stdin.flush().unwrap();
    // Wait until the pipeline has produced its event (and blocked writing it).
    let stderr = child.stderr.take().unwrap();
    let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            for line in
                std::io::BufRead::lines(std::io::BufReader::new(stderr)).map_while(Result::ok)
            {
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        })
    };
    notify.wait_for("READY=1", READY_TIMEOUT);
    // The one sleep left: time for the 3.3 s of input to be read, its utterance to end
    // and its event to block on the full pipe. Nothing outside the process shows a
    // thread blocked in write(2) (/proc's wchan reads 0 here), and SIGTERM before the
    // block would test the ordinary path instead.
    std::thread::sleep(std::time::Duration::from_secs(5));
    // SAFETY: plain kill(2) on our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let t_term = std::time::Instant::now();
    let Some(status) = wait_exit(&mut child, std::time::Duration::from_secs(30)) else {
        let _ = child.kill();
        panic!("still running 30 s after SIGTERM with a stalled stdout");
    };
    let _ = reader.join();
    let log = log.lock().unwrap().clone();
    eprintln!("exited {:?} after SIGTERM: {status:?}", t_term.elapsed());
    // Events were lost: not a clean exit, and the log says why.
    assert_eq!(status.code(), Some(1), "{log}");
    assert!(log.contains("shutdown did not finish"), "{log}");
    drop(stdin);
    drop(read_end);
}

/// The service held in-process: each reload is answered with its outcome (rejected,
/// failed and the previous config started again, applied) as the handle's return value,
/// and the stream's readiness says where the listener is bound. `tests/models/service.rs` checks
/// the same path through the binary, SIGHUP and the notify socket.
#[test]
fn reloads_report_their_outcome_to_the_handle() {
    let d = tempfile::tempdir().unwrap();
    let wav = common::daemon::meeting(d.path(), "a.wav", common::daemon::LINES_A);
    let cfg_path = d.path().join("room.toml");
    let source = format!(
        "[source]\nkind = \"wav\"\npath = \"{}\"\nrealtime = true\n",
        wav.display()
    );
    let http = |port: u16| format!("\n[http]\nenabled = true\nbind = \"127.0.0.1:{port}\"\n");
    std::fs::write(&cfg_path, format!("{source}{}", http(0))).unwrap();
    let events = MemorySink::default();
    let (daemon, ready) = hold(Daemon::from_file(&cfg_path).unwrap().sink(events.clone()));
    assert_eq!(ready.runs, 1);
    assert_ne!(ready.http_addr.unwrap().port(), 0, "{ready:?}");

    // A broken file: rejected with the field, the stream keeps running.
    std::fs::write(
        &cfg_path,
        format!("{source}{}\n[fusion]\nthreshold = 7.0\n", http(0)),
    )
    .unwrap();
    match daemon.reload(Duration::from_secs(10)).unwrap() {
        ReloadOutcome::Rejected(why) => assert!(why.contains("fusion.threshold"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(!daemon.has_ended());
    assert_eq!(daemon.wait_ready(Duration::ZERO).unwrap().runs, 1);

    // A file that passes every check and cannot start (its port is taken): the
    // previous config runs again.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    std::fs::write(&cfg_path, format!("{source}{}", http(port))).unwrap();
    match daemon.reload(Duration::from_secs(60)).unwrap() {
        ReloadOutcome::Failed(why) => assert!(why.contains(&port.to_string()), "{why}"),
        other => panic!("{other:?}"),
    }
    wait_until(
        "the previous config running again",
        Duration::from_secs(60),
        || daemon.wait_ready(Duration::ZERO).is_ok_and(|r| r.runs == 2),
    );
    drop(taken);

    // A good change is applied: the next stream runs with it.
    std::fs::write(
        &cfg_path,
        format!(
            "{source}{}\n[output]\ninclude_transcript = false\n",
            http(0)
        ),
    )
    .unwrap();
    match daemon.reload(Duration::from_secs(60)).unwrap() {
        ReloadOutcome::Applied(r) => assert_eq!(r.runs, 3, "{r:?}"),
        other => panic!("{other:?}"),
    }
    wait_until(
        "an event without its transcript",
        Duration::from_secs(60),
        || events.utterances().iter().any(|e| e.transcript.is_none()),
    );
    let report = daemon.stop(Duration::from_secs(10)).unwrap();
    assert!(report.stats.count("events") >= 1, "{:?}", report.stats);
}

/// A held daemon that cannot start does not leave its caller waiting for a timeout:
/// readiness reports that it ended and why, and the run's error keeps its exit code.
#[test]
fn a_held_daemon_that_cannot_start_says_why() {
    let d = tempfile::tempdir().unwrap();
    let cfg = parse_config(&format!(
        "[models]\ndir = \"{}\"\n",
        d.path().join("no-models").display()
    ));
    let daemon = Daemon::builder(cfg).start().unwrap();
    match daemon.wait_ready(Duration::from_secs(60)) {
        Err(HandleError::Ended { how, .. }) => assert!(how.contains("models.dir"), "{how}"),
        other => panic!("{other:?}"),
    }
    assert!(daemon.has_ended());
    assert!(matches!(
        daemon.reload(Duration::ZERO),
        Err(HandleError::NoConfigFile)
    ));
    match daemon.join(Duration::from_secs(10)) {
        Err(HandleError::Daemon(e)) => {
            assert_eq!(e.exit_code(), sarcasmd::daemon::EXIT_MODELS, "{e}")
        }
        other => panic!("{other:?}"),
    }
}
