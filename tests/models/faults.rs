//! Faults a board meets in a room, and the privacy defaults: a full disk, an output
//! directory that appears late, SIGKILL in the middle of a run, and what listens.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::daemon::{events, finals, meeting, Daemon, LINES_A};
use crate::common::notify::Notify;

/// The service status while the events file cannot be written (`StatusWatch`).
const EVENTS_FILE_FAILING: &str = "events file: cannot write";

fn stderr_of(d: &Daemon) -> String {
    std::fs::read_to_string(&d.stderr).unwrap_or_default()
}

#[test]
fn a_full_disk_is_logged_once_the_daemon_keeps_going_and_the_lost_events_exit_1() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", &LINES_A[..2]);
    let daemon = Daemon::start_events(d.path(), "", &wav, false, "full", Path::new("/dev/full"));
    let (code, log) = daemon.wait(Duration::from_secs(300));
    // Every utterance was processed, but the primary output lost them: exit 1, as for a
    // failing stdout, so a service manager or script sees it.
    assert_eq!(code, 1, "{log}");
    assert_eq!(
        log.matches("holding up to").count(),
        1,
        "one log line per outage:\n{log}"
    );
    assert!(log.contains("No space left on device"), "{log}");
    assert!(log.contains("events could not be written"), "{log}");
}

#[test]
fn events_wait_for_a_missing_directory_and_none_is_lost() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", LINES_A);
    let late = d.path().join("late");
    let path = late.join("events.jsonl");
    let mut notify = Notify::bind(d.path());
    let daemon =
        Daemon::start_notifying(d.path(), "", &wav, true, "late", &path, Some(notify.path()));
    // The state systemd sees: the service status says the events file cannot be written.
    notify.wait_for(EVENTS_FILE_FAILING, Duration::from_secs(90));
    // The mount appears (or an operator fixes the path) while the meeting goes on.
    std::fs::create_dir(&late).unwrap();
    let (code, log) = daemon.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("writing events again"), "{log}");
    let ids: Vec<u64> = finals(&path)
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert!(ids.len() >= 3, "{ids:?}");
    assert_eq!(
        ids,
        (0..ids.len() as u64).collect::<Vec<_>>(),
        "lost or reordered"
    );
}

/// Waits (generously) until `cond` holds for the daemon's log or events.
fn wait_for(what: &str, d: &Daemon, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "{what}: {}",
            stderr_of(d)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Issue 34, defect 1: events went into the deleted file, nothing was logged, exit 0.
#[test]
fn a_removed_events_directory_is_reopened_by_path_and_no_event_is_lost() {
    let d = tempfile::tempdir().unwrap();
    let lines: Vec<&str> = LINES_A.iter().chain(LINES_A).copied().collect();
    let wav = meeting(d.path(), "a.wav", &lines);
    let dir = d.path().join("e");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join("ev.jsonl");
    let mut notify = Notify::bind(d.path());
    let daemon =
        Daemon::start_notifying(d.path(), "", &wav, true, "rm", &path, Some(notify.path()));
    wait_for("a first event", &daemon, || !finals(&path).is_empty());
    let before = finals(&path).len() as u64;
    std::fs::remove_dir_all(&dir).unwrap();
    // Noticed when the next event is written: the file is reopened by path, which fails
    // while the directory is missing, and the service status says so.
    notify.wait_for(EVENTS_FILE_FAILING, Duration::from_secs(120));
    std::fs::create_dir(&dir).unwrap();
    let (code, log) = daemon.wait(Duration::from_secs(180));
    assert_eq!(code, 0, "{log}");
    let ids: Vec<u64> = finals(&path)
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    // Whatever was written before the removal went with the directory; every later
    // event is in the new file, in order, none lost (the summary counts them all).
    let total: u64 = log
        .lines()
        .find_map(|l| {
            l.split(" utterances, ")
                .nth(1)?
                .split(" events")
                .next()?
                .parse()
                .ok()
        })
        .expect("run summary");
    assert!(ids.first().is_some_and(|&f| f <= before), "{ids:?}");
    assert_eq!(
        ids,
        (ids[0]..total).collect::<Vec<_>>(),
        "lost or reordered:\n{log}"
    );
}

#[test]
fn a_removed_events_directory_that_never_comes_back_is_an_error_that_counts_the_loss() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", LINES_A);
    let dir = d.path().join("e");
    std::fs::create_dir(&dir).unwrap();
    let path = dir.join("ev.jsonl");
    let daemon = Daemon::start_events(d.path(), "", &wav, true, "gone", &path);
    wait_for("a first event", &daemon, || !finals(&path).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
    let (code, log) = daemon.wait(Duration::from_secs(180));
    assert_eq!(code, 1, "{log}");
    assert!(
        log.contains("was removed while the daemon wrote it"),
        "{log}"
    );
    assert!(log.contains("events could not be written"), "{log}");
}

#[test]
fn after_sigkill_mid_run_every_output_file_is_valid_on_restart() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", LINES_A);
    let events_path = d.path().join("events.jsonl");
    let cfg = "[captions]\nvtt = \"live.vtt\"\nsrt = \"live.srt\"\n";
    let mut daemon = Daemon::start_events(d.path(), cfg, &wav, true, "k1", &events_path);
    let t0 = Instant::now();
    while finals(&events_path).len() < 2 {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "{}",
            stderr_of(&daemon)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon.child.kill().unwrap(); // SIGKILL
    daemon.child.wait().unwrap();
    // A kill can land inside a write: leave the torn line such a kill would leave.
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&events_path)
            .unwrap();
        f.write_all(b"{\"type\":\"utterance\",\"id\":2,\"start_s\":9.1,\"transcr")
            .unwrap();
    }
    let before = std::fs::read_to_string(&events_path).unwrap();
    let whole_before = before.lines().count() - 1;

    let daemon = Daemon::start_events(d.path(), cfg, &wav, false, "k2", &events_path);
    let (code, log) = daemon.wait(Duration::from_secs(300));
    assert_eq!(code, 0, "{log}");
    assert!(log.contains("removed a torn last line"), "{log}");
    let text = std::fs::read_to_string(&events_path).unwrap();
    assert!(text.ends_with('\n'));
    let all = events(&events_path); // panics on any line that is not whole JSON
    assert!(
        all.len() > whole_before,
        "the restarted run appended nothing"
    );
    let vtt = std::fs::read_to_string(d.path().join("live.vtt")).unwrap();
    assert!(
        vtt.starts_with("WEBVTT\n\n") && vtt.ends_with("\n\n"),
        "{vtt}"
    );
    let srt = std::fs::read_to_string(d.path().join("live.srt")).unwrap();
    assert!(srt.starts_with("1\n") && srt.ends_with("\n\n"), "{srt}");
}

/// Local addresses of the TCP sockets `pid` is listening on, from /proc.
fn listening(pid: u32) -> Vec<String> {
    let inodes: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|rd| {
            rd.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
                .filter_map(|l| {
                    let s = l.to_string_lossy().into_owned();
                    s.strip_prefix("socket:[")?
                        .strip_suffix(']')
                        .map(String::from)
                })
                .collect()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).unwrap_or_default();
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            // st 0A = LISTEN; field 9 = inode.
            if f.len() > 9 && f[3] == "0A" && inodes.iter().any(|i| i == f[9]) {
                out.push(format!("{table}:{}", f[1]));
            }
        }
    }
    out
}

#[test]
fn by_default_nothing_listens_beyond_loopback_and_no_audio_reaches_disk() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", &LINES_A[..2]);
    // Default config: no listener at all.
    let daemon = Daemon::start(d.path(), "", &wav, true, "dflt");
    let t0 = Instant::now();
    while finals(&d.path().join("dflt.jsonl")).is_empty() {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "{}",
            stderr_of(&daemon)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(listening(daemon.child.id()), Vec::<String>::new());
    let (code, log) = daemon.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");

    // The HTTP listener with its default address family: loopback only. Port 0: the
    // process is the one under test here, so the port is read from its sockets.
    let cfg = "[http]\nenabled = true\nbind = \"127.0.0.1:0\"\n";
    let daemon = Daemon::start(d.path(), cfg, &wav, true, "http");
    let t0 = Instant::now();
    let socks = loop {
        let s = listening(daemon.child.id());
        if !s.is_empty() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "{}",
            stderr_of(&daemon)
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // /proc/net/tcp prints the address as little-endian hex: 127.0.0.1 = 0100007F.
    assert_eq!(socks.len(), 1, "{socks:?}");
    assert!(socks[0].starts_with("tcp:0100007F:"), "{socks:?}");
    let (code, log) = daemon.wait(Duration::from_secs(120));
    assert_eq!(code, 0, "{log}");

    // Nothing but the test's own input and the configured outputs in the working dir.
    let mut files: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "a.wav",
            "dflt.jsonl",
            "dflt.stderr",
            "dflt.toml",
            "http.jsonl",
            "http.stderr",
            "http.toml"
        ]
    );
}

/// A source that loses its device between two sentences (not marked live, so the test
/// can hand over whole sentences without ring drops): the pipeline writes one
/// `gap` event for the lost interval, counts it, and keeps the stream clock on wall
/// time, so the second sentence is stamped after the outage.
#[test]
fn a_lost_interval_becomes_a_gap_event_and_later_times_include_it() {
    use sarcasmd::sources::audio::{AudioError, AudioSource, SourceGap};
    struct Unplugged {
        parts: Vec<Vec<f32>>,
        pending_gap: Option<SourceGap>,
        delivered: usize,
    }
    impl AudioSource for Unplugged {
        fn describe(&self) -> String {
            "microphone that was unplugged for 2 s".into()
        }
        fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
            if self.parts.is_empty() {
                return Ok(false);
            }
            let part = self.parts.remove(0);
            if self.delivered > 0 {
                // Delivery resumed after the outage.
                self.pending_gap = Some(SourceGap {
                    start_s: self.delivered as f64 / 16_000.0,
                    duration_s: 2.0,
                    reason: "device disappeared: test".into(),
                });
            }
            self.delivered += part.len();
            out.extend_from_slice(&part);
            Ok(true)
        }
        fn take_gap(&mut self) -> Option<SourceGap> {
            self.pending_gap.take()
        }
    }
    let a = common::compose(
        0.5,
        &[("The first sentence before the cable came out.", "en-us")],
        1.0,
    );
    let b = common::compose(
        0.5,
        &[("And the second one after it was plugged back in.", "en-us")],
        1.0,
    );
    let first_len_s = a.samples.len() as f64 / 16_000.0;
    let src = Unplugged {
        parts: vec![a.samples, b.samples],
        pending_gap: None,
        delivered: 0,
    };
    let mut sink = sarcasmd::sinks::event::VecSink::default();
    let stats = sarcasmd::pipeline::run_stream(
        common::engine(),
        &sarcasmd::config::Config::default(),
        Box::new(src),
        &mut sink,
        &Default::default(),
    )
    .unwrap();
    assert_eq!(sink.2.len(), 1, "{:?}", sink.2);
    let g = &sink.2[0];
    assert_eq!(g.source, "audio");
    assert!((g.start_s - first_len_s).abs() < 1e-3, "{g:?}");
    assert!((g.end_s - g.start_s - 2.0).abs() < 1e-3, "{g:?}");
    assert_eq!(stats.count("source_gaps"), 1);
    assert!((stats.source_gap_s - 2.0).abs() < 1e-3);
    assert_eq!(sink.0.len(), 2, "{:#?}", sink.0);
    // The second sentence starts 0.5 s into its part, after the 2 s of silence.
    let expected = first_len_s + 2.0 + 0.5;
    assert!(
        (sink.0[1].start_s - expected).abs() < 0.35,
        "second utterance at {} s, expected ~{expected} s",
        sink.0[1].start_s
    );
}

/// A budget no utterance can keep (1 ms, the hangover alone is 320 ms) keeps the
/// analyser "behind": in a real-time replay the ladder takes its model step at the
/// first utterance, and every later one is decoded by the smaller model, which the
/// event names. (Giving the step back is covered by `shed`'s unit tests.) A file read
/// as fast as possible never sheds: its events must not depend on thread timing.
#[test]
fn behind_its_budget_the_daemon_decodes_with_the_fallback_model() {
    let dir = tempfile::tempdir().unwrap();
    let wav = meeting(dir.path(), "m.wav", LINES_A);
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "[asr]\nmodel = \"tiny.en\"\nfallback_model = \"tiny.en-q8_0\"\nstream_step_ms = 0\n\
         [budget]\nevent_latency_ms = 1\n",
    )
    .unwrap();
    let replay = |realtime: bool| {
        let stats = dir.path().join(format!("stats-{realtime}.json"));
        let mut cmd = std::process::Command::new(common::bin());
        cmd.current_dir(dir.path())
            .arg("replay")
            .arg(&wav)
            .arg("--config")
            .arg(&cfg)
            .arg("--stats")
            .arg(&stats);
        if realtime {
            cmd.arg("--realtime");
        }
        let out = cmd.output().unwrap();
        let log = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{log}");
        let evs: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|e: &serde_json::Value| e["type"] == "utterance")
            .collect();
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
        (evs, s, log)
    };
    let model = |e: &serde_json::Value| e["models"]["asr"].as_str().unwrap().to_string();

    let (evs, s, log) = replay(true);
    assert_eq!(evs.len(), LINES_A.len(), "{log}");
    let shed = &s["shed"];
    println!("real time: {}", shed);
    assert_eq!(shed["steps"], serde_json::json!(["asr_model"]), "{s}");
    assert_eq!(shed["asr_model_taken"].as_u64().unwrap(), 1, "{s}");
    assert!(log.contains("shedding AsrModel"), "{log}");
    // The step is taken as the first utterance starts, so all are decoded by q8_0.
    assert!(
        evs.iter()
            .all(|e| model(e).starts_with("whisper-tiny.en-q8_0@")),
        "{evs:?}"
    );
    assert_eq!(shed["fallback_decodes"].as_u64().unwrap(), evs.len() as u64);
    // The smaller model really decoded them: words of the sentence, not just a label.
    // (Its quality is not judged here: q8_0 tiny.en heard "Oh great, another meeting
    // ..." as "All great, a hahah, meeting at cut-up in an email.")
    for e in &evs {
        let t = e["transcript"].as_str().unwrap().to_lowercase();
        let i = e["id"].as_u64().unwrap() as usize;
        let hits = LINES_A[i]
            .to_lowercase()
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.len() > 3 && t.contains(*w))
            .count();
        assert!(hits >= 2, "utterance {i}: {t:?} vs {:?}", LINES_A[i]);
    }

    // The same file read as fast as possible: no ladder, the configured model.
    let (evs, s, _) = replay(false);
    assert_eq!(s["shed"]["steps"], serde_json::json!([]), "{s}");
    assert!(
        evs.iter().all(|e| model(e).starts_with("whisper-tiny.en@")),
        "{evs:?}"
    );
}
