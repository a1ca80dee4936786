//! The daemon's outputs as their users meet them, each against a real peer: caption files
//! read back by ffmpeg, `/metrics` read by prometheus_client's OpenMetrics parser, the
//! overlay in headless Chromium (through a daemon restart, and an early-ended line replaced
//! by its revision), MQTT through a mosquitto restart, and the security and privacy
//! defaults.
//!
//! Peers come from `scripts/install-system-deps.sh --test` and
//! `scripts/install-test-tools.sh`; a test whose peer is missing prints `SKIP:` and passes.
//!
//! Daemons with an HTTP listener are held in-process (`hold_wav`): they bind port 0 and
//! the test reads the bound port from their readiness, instead of guessing a free port
//! and waiting for a connection to succeed.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::daemon::{
    events, finals, hold_wav, http_port, meeting, Daemon, LINES_A, LINES_B,
};
use crate::common::mosquitto::{Broker, Subscriber};
use crate::common::webdriver::Browser;
use crate::common::*;

const TOKEN: &str = "test-token-0123456789";

/// A minimal HTTP/1.1 GET (the daemon's own listener on loopback): status, headers, body.
fn http_get(port: u16, path: &str, token: Option<&str>) -> (u16, String, String) {
    http_get_auth(port, path, token.map(|t| format!("Bearer {t}")).as_deref())
}

/// `http_get` with the whole `Authorization` value as given.
fn http_get_auth(port: u16, path: &str, authorization: Option<&str>) -> (u16, String, String) {
    common::daemon::http_request(port, "GET", path, authorization, None)
}

/// Read SSE events (name, data) from `/events` until `enough` says so or the timeout.
fn sse_events(
    port: u16,
    token: Option<&str>,
    timeout: Duration,
    enough: impl Fn(&[(String, String)]) -> bool,
) -> Vec<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let q = token.map(|t| format!("?token={t}")).unwrap_or_default();
    write!(
        s,
        "GET /events{q} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let mut r = BufReader::new(s);
    let (mut out, mut name) = (Vec::new(), String::new());
    let t0 = Instant::now();
    let mut line = String::new();
    while t0.elapsed() < timeout && !enough(&out) {
        line.clear();
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(_) => continue, // read timeout: poll again
        }
        let l = line.trim_end();
        if let Some(n) = l.strip_prefix("event: ") {
            name = n.to_string();
        } else if let Some(d) = l.strip_prefix("data: ") {
            out.push((std::mem::take(&mut name), d.to_string()));
        }
    }
    out
}

/// `port` 0 lets the daemon pick one (read back from its readiness).
fn http_config(port: u16, extra: &str) -> String {
    format!(
        "[http]\nenabled = true\nbind = \"127.0.0.1:{port}\"\n{extra}\n\n[asr]\ninterim_every_ms = 1000\n\n[output]\npartials = true\n"
    )
}

/// How long a held daemon's WAV may take to play through at real-time pace.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

#[test]
fn captions_are_webvtt_and_srt_that_ffmpeg_reads_back() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", LINES_A);
    let cfg = "[captions]\nvtt = \"live.vtt\"\nsrt = \"live.srt\"\nspeaker = \"Chair\"\n";
    let (code, log) =
        Daemon::start(d.path(), cfg, &wav, false, "cap").wait(Duration::from_secs(300));
    assert_eq!(code, 0, "{log}");
    let evs = finals(&d.path().join("cap.jsonl"));
    assert!(evs.len() >= 3, "{evs:?}");
    let vtt = std::fs::read_to_string(d.path().join("live.vtt")).unwrap();
    let srt = std::fs::read_to_string(d.path().join("live.srt")).unwrap();
    assert!(vtt.starts_with("WEBVTT\n\n"), "{vtt}");

    // One NOTE with the score per utterance; the class span exactly on sarcastic ones.
    for ev in &evs {
        let id = ev["id"].as_u64().unwrap();
        let note = format!(
            "NOTE utterance {id} p_sarcastic={:.3} sarcastic={}",
            ev["p_sarcastic"].as_f64().unwrap(),
            ev["sarcastic"]
        );
        assert!(vtt.contains(&note), "missing `{note}` in\n{vtt}");
        let block = vtt
            .split("NOTE ")
            .find(|b| b.starts_with(&format!("utterance {id} ")))
            .unwrap();
        assert_eq!(
            block.contains("<v Chair><c.sarcasm>"),
            ev["sarcastic"] == true,
            "{block}"
        );
    }

    // Our cue times: inside each utterance's speech (with the margins), never overlapping.
    let times = |text: &str, sep: char| -> Vec<(f64, f64)> {
        let ts = |t: &str| {
            let t = t.trim().replace(sep, ".");
            // WebVTT allows mm:ss.ttt without hours (ffmpeg writes that).
            t.split(':')
                .map(|x| x.parse::<f64>().unwrap())
                .fold(0.0, |acc, x| acc * 60.0 + x)
        };
        text.lines()
            .filter_map(|l| l.split_once(" --> "))
            .map(|(a, b)| (ts(a), ts(b.split_whitespace().next().unwrap())))
            .collect()
    };
    let ours = times(&vtt, '.');
    assert_eq!(ours, times(&srt, ','), "WebVTT and SRT cues differ");
    assert!(ours.len() >= evs.len());
    for w in ours.windows(2) {
        assert!(w[1].0 >= w[0].1 - 1e-6, "overlap {w:?}");
    }
    for (a, b) in &ours {
        assert!(b > a);
        let inside = evs.iter().any(|e| {
            let (s, t) = (e["start_s"].as_f64().unwrap(), e["end_s"].as_f64().unwrap());
            *a >= s - 0.31 && *b <= t + 0.81
        });
        assert!(inside, "cue {a}-{b} is outside every utterance");
    }

    // An independent parser: ffmpeg converts each format into the other.
    if Command::new("ffmpeg").arg("-version").output().is_err() {
        println!(
            "SKIP: ffmpeg not installed (scripts/install-system-deps.sh --test); own checks passed"
        );
        return;
    }
    for (input, fmt, sep) in [("live.vtt", "srt", ','), ("live.srt", "webvtt", '.')] {
        let out = Command::new("ffmpeg")
            .current_dir(d.path())
            .args(["-v", "error", "-i", input, "-f", fmt, "-"])
            .output()
            .unwrap();
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "ffmpeg rejects {input}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let theirs = times(&String::from_utf8_lossy(&out.stdout), sep);
        assert_eq!(
            theirs.len(),
            ours.len(),
            "ffmpeg read a different cue count from {input}"
        );
        for (x, y) in theirs.iter().zip(&ours) {
            // ffmpeg keeps centiseconds in some paths.
            assert!(
                (x.0 - y.0).abs() < 0.011 && (x.1 - y.1).abs() < 0.011,
                "{x:?} vs {y:?}"
            );
        }
    }
}

#[test]
fn metrics_parse_as_openmetrics_and_the_token_guards_every_route() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", &LINES_A[..2]);
    let cfg = http_config(0, &format!("token = \"{TOKEN}\""))
        + &format!(
            "\n[captions]\nvtt = \"{}\"\n",
            d.path().join("live.vtt").display()
        );
    let (daemon, ready) = hold_wav(d.path(), &cfg, &wav, true, "m");
    let port = http_port(&ready);

    assert_eq!(http_get(port, "/healthz", None).0, 200);
    for path in ["/", "/events", "/metrics", "/captions.vtt"] {
        assert_eq!(http_get(port, path, None).0, 401, "{path} without a token");
        assert_eq!(
            http_get(port, path, Some("test-token-wrong-000000")).0,
            401,
            "{path} with a wrong token"
        );
    }
    let (st, head, _) = http_get(port, &format!("/?token={TOKEN}"), None);
    assert_eq!(st, 200, "{head}");
    // The scheme is case-insensitive (RFC 9110): curl and browsers may send `bearer`.
    for scheme in ["bearer", "BEARER"] {
        let (st, head, _) = http_get_auth(port, "/", Some(&format!("{scheme} {TOKEN}")));
        assert_eq!(st, 200, "{scheme}: {head}");
    }

    // Wait for the first final event, then scrape.
    let t0 = Instant::now();
    let text = loop {
        let (st, head, body) = http_get(port, "/metrics", Some(TOKEN));
        assert_eq!(st, 200, "{head}");
        assert!(
            head.to_ascii_lowercase()
                .contains("content-type: application/openmetrics-text; version=1.0.0"),
            "{head}"
        );
        if body.contains("sarcasmd_events_total{type=\"utterance\"}") {
            break body;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "no utterance counted:\n{body}"
        );
        std::thread::sleep(Duration::from_millis(250));
    };
    // The live WebVTT file, as text/vtt.
    let (st, head, body) = http_get(port, "/captions.vtt", Some(TOKEN));
    assert_eq!(st, 200, "{head}");
    assert!(
        head.to_ascii_lowercase().contains("content-type: text/vtt"),
        "{head}"
    );
    assert!(body.starts_with("WEBVTT"), "{body}");
    assert_eq!(http_get(port, "/captions.srt", Some(TOKEN)).0, 404);
    daemon.join(RUN_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));

    let py = std::env::var_os("SARCASMD_TEST_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cache"));
            cache.join("sarcasmd/venv-test/bin/python")
        });
    if !py.exists() {
        println!("SKIP: {} missing (scripts/install-test-tools.sh installs prometheus_client); the scrape itself passed", py.display());
        return;
    }
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
fams = {f.name: {"type": f.type, "samples": [[s.name, s.labels, s.value] for s in f.samples]}
        for f in text_string_to_metric_families(sys.stdin.read())}
print(json.dumps(fams))
"#;
    let mut child = Command::new(&py)
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the OpenMetrics parser rejects /metrics: {}\n{text}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fams: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for (name, kind) in [
        ("sarcasmd_stage_latency_seconds", "histogram"),
        ("sarcasmd_events", "counter"),
        ("sarcasmd_sarcasm_flags", "counter"),
        ("sarcasmd_utterances", "counter"),
        ("sarcasmd_dropped_events", "counter"),
        ("sarcasmd_dropped_samples", "counter"),
        ("sarcasmd_realtime_factor", "gauge"),
        ("sarcasmd_audio_seconds", "counter"),
        ("sarcasmd_device_up", "gauge"),
        ("sarcasmd_model_load_seconds", "gauge"),
        ("sarcasmd_queue_depth", "gauge"),
        ("sarcasmd_build", "info"),
        ("sarcasmd_sse_clients", "gauge"),
        ("sarcasmd_resident_memory_bytes", "gauge"),
    ] {
        assert_eq!(fams[name]["type"], kind, "{name} in {fams}");
    }
    let stages: Vec<String> = fams["sarcasmd_stage_latency_seconds"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s[1]["stage"].as_str().map(String::from))
        .collect();
    for s in [
        "endpoint", "queue", "asr", "text", "audio", "fusion", "total",
    ] {
        assert!(stages.iter().any(|x| x == s), "no {s} histogram");
    }
    // Every registered drop is in the real scrape, in the family and under the label
    // value the registry gives it (tests/models/drop_registry.rs checks the other outputs).
    for &r in sarcasmd::common::drops::DropReason::ALL {
        let f = r.family();
        let fam = format!("sarcasmd_{}", f.metric().unwrap_or(r.name()));
        let samples = fams[&fam]["samples"]
            .as_array()
            .unwrap_or_else(|| panic!("no {fam} for the drop {r}"));
        if let Some(label) = f.label() {
            assert!(
                samples.iter().any(|s| s[1][label] == r.name()),
                "no drop {r} in {fam}: {samples:?}"
            );
        }
    }
}

#[test]
fn a_network_bind_without_a_token_is_refused_at_validation() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("open.toml");
    std::fs::write(&cfg, "[http]\nenabled = true\nbind = \"0.0.0.0:8790\"\n").unwrap();
    let out = Command::new(bin())
        .arg("validate")
        .arg(&cfg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("http.bind") && err.contains("http.token"),
        "{err}"
    );

    std::fs::write(
        &cfg,
        format!("[http]\nenabled = true\nbind = \"0.0.0.0:8790\"\ntoken = \"{TOKEN}\"\n"),
    )
    .unwrap();
    let out = Command::new(bin())
        .arg("validate")
        .arg(&cfg)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The default is loopback.
    let def: sarcasmd::config::Config = sarcasmd::config::Config::default();
    let addr: std::net::SocketAddr = def.outputs.http.bind.parse().unwrap();
    assert!(addr.ip().is_loopback());
}

#[test]
fn transcripts_off_keeps_text_out_of_every_output_and_nothing_else_is_written() {
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", &LINES_A[..2]);
    let cfg = "[output]\ninclude_transcript = false\n\n[asr]\ninterim_every_ms = 1000\n\n[http]\nenabled = true\nbind = \"127.0.0.1:0\"\n";
    let (daemon, ready) = hold_wav(d.path(), cfg, &wav, true, "p");
    let seen = sse_events(http_port(&ready), None, Duration::from_secs(90), |ev| {
        ev.iter().filter(|(n, _)| n == "utterance").count() >= 2
    });
    daemon.join(RUN_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        seen.iter().filter(|(n, _)| n == "utterance").count() >= 2,
        "{seen:?}"
    );
    assert!(
        !seen.iter().any(|(n, _)| n == "partial"),
        "interim text while transcripts are off"
    );
    for (_, data) in &seen {
        let v: serde_json::Value = serde_json::from_str(data).unwrap();
        if v["type"] == "utterance" {
            assert!(v["transcript"].is_null(), "{v}");
            assert_eq!(v["asr_segments"], serde_json::json!([]), "{v}");
        }
    }
    for ev in events(&d.path().join("p.jsonl")) {
        assert_eq!(ev["type"], "utterance");
        assert!(ev["transcript"].is_null());
    }
    // No audio, no captions, nothing but what the test itself put there and the events.
    let mut files: Vec<String> = std::fs::read_dir(d.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files, ["a.wav", "p.jsonl"]);
}

#[test]
fn mqtt_delivers_every_event_across_a_broker_restart() {
    let Some(mut broker) = Broker::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let wav = meeting(d.path(), "a.wav", LINES_A);
    let sub = Subscriber::start(broker.port(), "outputs-test-sub", "#");
    let cfg = format!(
        "[mqtt]\nenabled = true\nport = {}\ndevice_id = \"room-7\"\nha_discovery = true\nstats_interval_s = 2\nreconnect_max_ms = 1000\n",
        broker.port()
    );
    let daemon = Daemon::start(d.path(), &cfg, &wav, true, "q");
    let ev_topic = "sarcasmd/room-7/event";
    assert!(
        sub.wait_for(
            |l| l.iter().any(|(t, _)| t == ev_topic),
            Duration::from_secs(120)
        ),
        "no first event: {:?}",
        sub.lines()
    );
    // The broker goes away while the meeting goes on, and comes back once an event has
    // been scored with nobody to take it (it must wait in the offline queue).
    let written = |d: &std::path::Path| finals(&d.join("q.jsonl")).len();
    broker.stop();
    let before = written(d.path());
    wait_until(
        "an event scored while the broker is down",
        Duration::from_secs(120),
        || written(d.path()) > before,
    );
    broker.restart();
    let (code, log) = daemon.wait(Duration::from_secs(180));
    assert_eq!(code, 0, "{log}");
    let written: Vec<u64> = finals(&d.path().join("q.jsonl"))
        .iter()
        .map(|e| e["id"].as_u64().unwrap())
        .collect();
    assert!(written.len() >= 3, "{written:?}");
    let got = |sub: &Subscriber| -> std::collections::BTreeSet<u64> {
        sub.payloads(ev_topic)
            .iter()
            .map(|p| {
                serde_json::from_str::<serde_json::Value>(p).unwrap()["id"]
                    .as_u64()
                    .unwrap()
            })
            .collect()
    };
    let want: std::collections::BTreeSet<u64> = written.iter().copied().collect();
    let t0 = Instant::now();
    while got(&sub) != want && t0.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        got(&sub),
        want,
        "events lost across the broker restart; daemon log:\n{log}"
    );
    assert!(log.contains("0 dropped"), "{log}");

    // Status: online after each connect, offline at the end (retained).
    let status = sub.payloads("sarcasmd/room-7/status");
    assert!(
        status.iter().filter(|s| *s == "online").count() >= 2,
        "{status:?}"
    );
    assert_eq!(
        status.last().map(String::as_str),
        Some("offline"),
        "{status:?}"
    );
    // Home Assistant discovery, and the final stats.
    let disc = sub.payloads("homeassistant/binary_sensor/room-7/sarcasm/config");
    let v: serde_json::Value = serde_json::from_str(disc.last().expect("discovery")).unwrap();
    assert_eq!(v["state_topic"], ev_topic);
    assert!(!sub
        .payloads("homeassistant/sensor/room-7/sarcasm_score/config")
        .is_empty());
    assert!(
        sub.payloads("sarcasmd/room-7/stats")
            .iter()
            .any(|s| s.contains("\"final_stats\"")),
        "{:?}",
        sub.lines()
    );
}

#[test]
fn overlay_shows_live_captions_and_reconnects_after_a_daemon_restart() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let wav_a = meeting(d.path(), "a.wav", LINES_A);
    let wav_b = meeting(d.path(), "b.wav", LINES_B);
    let (a, ready) = hold_wav(d.path(), &http_config(0, ""), &wav_a, true, "a");
    // The second daemon binds the port the first one was given: the page reconnects to
    // the address it was opened at.
    let port = http_port(&ready);
    browser
        .goto(&format!("http://127.0.0.1:{port}/?lines=6"))
        .unwrap();
    // Interim text shows while a sentence is still being spoken.
    let partial = browser
        .wait_for(
            "document.getElementById('partial').textContent.length > 0 && document.getElementById('partial').textContent",
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("no interim text on the page: {e}"));
    println!("interim text seen on the page: {partial}");
    browser
        .wait_for(
            "document.querySelectorAll('#captions .line').length >= 3",
            Duration::from_secs(120),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("overlay.png");
    browser.transparent_background().unwrap();
    browser.screenshot_png(&shot).unwrap();
    println!("overlay screenshot: {}", shot.display());
    a.join(RUN_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));

    // Every line on the page matches the daemon's own event, marking included.
    let lines = browser
        .execute(
            "return Array.from(document.querySelectorAll('#captions .line')).map(l => ({
               id: +l.dataset.id, sarcastic: l.dataset.sarcastic === 'true',
               cls: l.classList.contains('sarcastic'),
               text: l.querySelector('.text').textContent,
               badge: l.querySelector('.badge') ? l.querySelector('.badge').textContent : null}))",
            vec![],
        )
        .unwrap();
    let evs = finals(&d.path().join("a.jsonl"));
    assert!(lines.as_array().unwrap().len() >= 3, "{lines}");
    for l in lines.as_array().unwrap() {
        let ev = evs
            .iter()
            .find(|e| e["id"] == l["id"])
            .unwrap_or_else(|| panic!("line {l} has no event"));
        assert_eq!(l["text"], ev["transcript"], "{l}");
        let sarcastic = ev["sarcastic"] == true;
        assert_eq!(l["sarcastic"], sarcastic);
        assert_eq!(l["cls"], sarcastic);
        if sarcastic {
            let pct = (ev["p_sarcastic"].as_f64().unwrap() * 100.0).round();
            assert_eq!(l["badge"], format!("sarcasm {pct}%"), "{l}");
        } else {
            assert!(l["badge"].is_null(), "{l}");
        }
    }
    // The corner box holds the run's three highest-scored lines, flagged or not, best first.
    let moments = browser
        .execute(
            "return Array.from(document.querySelectorAll('#moments .moment')).map(m => ({
               id: +m.dataset.id, score: m.querySelector('.score').textContent,
               text: m.querySelector('.text').textContent}))",
            vec![],
        )
        .unwrap();
    // A revision replaces the line it names (an early end the speaker went on from).
    let revised: Vec<&serde_json::Value> = evs.iter().map(|e| &e["revises"]).collect();
    let mut best: Vec<&serde_json::Value> = evs
        .iter()
        .filter(|e| e["p_sarcastic"].is_number() && !revised.contains(&&e["id"]))
        .collect();
    best.sort_by(|a, b| {
        b["p_sarcastic"]
            .as_f64()
            .unwrap()
            .total_cmp(&a["p_sarcastic"].as_f64().unwrap())
    });
    let moments = moments.as_array().unwrap();
    assert_eq!(moments.len(), best.len().min(3), "{moments:?}");
    let want: Vec<_> = best
        .iter()
        .map(|e| {
            (
                e["id"].clone(),
                e["p_sarcastic"].clone(),
                e["revises"].clone(),
            )
        })
        .collect();
    for (m, ev) in moments.iter().zip(&best) {
        assert_eq!(m["id"], ev["id"], "page {moments:?}, events {want:?}");
        let pct = (ev["p_sarcastic"].as_f64().unwrap() * 100.0).round();
        assert_eq!(m["score"], format!("{pct}%"));
        assert_eq!(m["text"], ev["transcript"]);
    }
    assert!(
        events(&d.path().join("a.jsonl"))
            .iter()
            .any(|e| e["type"] == "partial"),
        "no interim text was produced"
    );

    // The daemon is gone: the page says so, then finds the new one by itself.
    browser
        .wait_for(
            "document.body.dataset.connection !== 'open'",
            Duration::from_secs(20),
        )
        .unwrap();
    let (b, _) = hold_wav(d.path(), &http_config(port, ""), &wav_b, true, "b");
    browser
        .wait_for(
            "+document.body.dataset.connections >= 2 && Array.from(document.querySelectorAll('#captions .line .text')).some(t => /break|printers/i.test(t.textContent))",
            Duration::from_secs(120),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    b.join(RUN_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    let log = browser.console_log().unwrap_or_default();
    assert!(
        !log.iter()
            .any(|l| l.contains("SEVERE") && !l.contains("/events")),
        "console errors: {log:?}"
    );
}

/// A turn the sentence-end shortcut ended early and the speaker went on from: the page
/// first shows the early line, then the revising event's line takes its place (one line
/// for the turn, not the early words twice). Same audio construction as
/// `tests/models/streaming.rs`, here through the daemon's SSE stream into the real overlay.
#[test]
fn overlay_replaces_an_early_ended_line_with_its_revision() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    // Lead silence: the page connects before the first words (5.0 s: see the helper).
    let samples = turn_going_on_after_a_full_stop(5.0);
    let wav = d.path().join("turn.wav");
    write_wav_i16(&wav, &samples, RATE);
    // No interim decodes: the analyser is then free for the decode at the pause, as in
    // `tests/models/streaming.rs` (an interim decode still running there delays it past the
    // pause, and the turn ends once, late).
    let cfg = "[http]\nenabled = true\nbind = \"127.0.0.1:0\"\n\n[segment]\nhangover_ms = 900\n";
    let (daemon, ready) = hold_wav(d.path(), cfg, &wav, true, "rev");
    let port = http_port(&ready);
    browser
        .goto(&format!("http://127.0.0.1:{port}/?lines=6"))
        .unwrap();
    browser
        .wait_for(
            "document.body.dataset.connection === 'open'",
            Duration::from_secs(20),
        )
        .unwrap();
    // Every line the page ever adds, in order: the early line must have been shown.
    browser
        .execute(
            "window.addedLines = []; new MutationObserver(ms => ms.forEach(m => m.addedNodes.forEach(n => { if (n.dataset) window.addedLines.push(n.dataset.id + ': ' + n.textContent); }))).observe(document.getElementById('captions'), {childList: true}); return true;",
            vec![],
        )
        .unwrap();
    daemon.join(RUN_TIMEOUT).unwrap_or_else(|e| panic!("{e}"));
    let evs = finals(&d.path().join("rev.jsonl"));
    let [early, whole] = &evs[..] else {
        panic!("expected an early event and its revision: {evs:#?}")
    };
    assert_eq!(early["early_end"], true, "{early}");
    assert_eq!(whole["revises"], early["id"], "{whole}");
    browser
        .wait_for(
            &format!(
                "document.querySelectorAll('#captions .line').length === 1 && document.querySelector('#captions .line').dataset.id === '{}'",
                whole["id"]
            ),
            Duration::from_secs(20),
        )
        .unwrap_or_else(|e| {
            let shown = browser
                .execute(
                    "return Array.from(document.querySelectorAll('#captions .line')).map(l => l.dataset.id + ': ' + l.textContent)",
                    vec![],
                )
                .unwrap_or_default();
            panic!("the revision did not replace the early line: {e}; page: {shown}")
        });
    let text = browser
        .execute(
            "return document.querySelector('#captions .line .text').textContent",
            vec![],
        )
        .unwrap();
    assert_eq!(text, whole["transcript"], "{whole}");
    let added = browser.execute("return window.addedLines", vec![]).unwrap();
    let ids: Vec<String> = added
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap().split(':').next().unwrap().to_string())
        .collect();
    assert_eq!(
        ids,
        [early["id"].to_string(), whole["id"].to_string()],
        "lines added: {added}"
    );
}
