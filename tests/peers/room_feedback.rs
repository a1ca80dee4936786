//! Corrections from the room, end to end: a daemon held in-process on a live PCM pipe
//! (as `arecord | sarcasmd` feeds it) hears a line, a person corrects it by HTTP or by
//! MQTT through a real broker, and the next identical line is scored by the room head.
//! The corrections survive a restart; bad input is refused with its reason and loses
//! nothing; a torn store file is read up to the tear.
//!
//! The line is short espeak-ng speech that Whisper hears the same way each time (the
//! room head compares what was heard). The threshold is set low (0.01) so the line is
//! flagged whatever this CPU's Whisper makes of it: what is checked is what a correction
//! does to the score, not the shipped head's score. So far below the line's score, a
//! mute needs more than its default 3 log-odds: the cap is raised to its maximum (10).

use crate::common;

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::common::daemon::{finals, http_port, http_request};
use crate::common::mosquitto::{Broker, Subscriber};
use crate::common::{parse_config, pipe, silence, speak, to_s16le, wait_until, READY_TIMEOUT};
use sarcasmd::config::SourceConfig;
use sarcasmd::daemon::builder::{Daemon, DaemonHandle};
use sarcasmd::pipeline::Engine;
use sarcasmd::sources::audio::PcmReaderSource;

const TOKEN: &str = "room-token-0123456789";

/// The line, then 2 s of silence to end it.
fn line_pcm() -> Vec<u8> {
    static PCM: OnceLock<Vec<u8>> = OnceLock::new();
    PCM.get_or_init(|| {
        let mut x = silence(0.5);
        x.extend(speak("Oh great, the printer is broken again.", "en-us"));
        x.extend(silence(2.0));
        to_s16le(&x)
    })
    .clone()
}

/// The models with a threshold of 0.01, loaded once for this test binary.
fn engine() -> Arc<Engine> {
    static E: OnceLock<Arc<Engine>> = OnceLock::new();
    E.get_or_init(|| {
        let cfg = parse_config("[fusion]\nthreshold = 0.01\n");
        Arc::new(Engine::load(&cfg).unwrap_or_else(|e| panic!("{e}; run scripts/setup.sh first")))
    })
    .clone()
}

struct Held {
    daemon: DaemonHandle,
    port: u16,
    writer: File,
    events: PathBuf,
}

impl Held {
    fn start(dir: &Path, tag: &str, extra: &str) -> Held {
        let store = dir.join("room").join("corrections.jsonl");
        let toml = format!(
            "[http]\nenabled = true\nbind = \"127.0.0.1:0\"\n{extra}\n\n[room]\nenabled = true\nstore = \"{}\"\nkeep_transcripts = true\nmax_shift_logit = 10.0\n\n[fusion]\nthreshold = 0.01\n",
            store.display()
        );
        let mut cfg = parse_config(&toml);
        cfg.source = SourceConfig::Stdin {
            sample_rate_hz: 16_000,
            live: true,
        };
        let events = dir.join(format!("{tag}.jsonl"));
        cfg.output.events = events.display().to_string();
        let (reader, writer) = pipe();
        let fd = reader.as_raw_fd();
        let source = PcmReaderSource::new("pipe", reader, 16_000)
            .unwrap()
            .live(true)
            .poll_fd(fd);
        let daemon = Daemon::builder(cfg)
            .engine(engine())
            .source(Box::new(source))
            .start()
            .expect("spawn the daemon thread");
        let ready = daemon
            .wait_ready(READY_TIMEOUT)
            .unwrap_or_else(|e| panic!("{e}"));
        let mut h = Held {
            port: http_port(&ready),
            daemon,
            writer,
            events,
        };
        // Whisper hears the very first line of a stream differently ("All great, ..."
        // against "Oh great, ..." later): a first line puts every test line after one.
        let mut x = silence(0.5);
        x.extend(speak("Good morning everyone.", "en-us"));
        x.extend(silence(2.0));
        h.say(&to_s16le(&x));
        h
    }

    /// Writes `pcm` and returns the event it produced.
    fn say(&mut self, pcm: &[u8]) -> serde_json::Value {
        let before = finals(&self.events).len();
        self.writer.write_all(pcm).unwrap();
        wait_until("the line's event", Duration::from_secs(120), || {
            finals(&self.events).len() > before
        });
        finals(&self.events).pop().unwrap()
    }

    /// Says the line once more and returns its event.
    fn say_line(&mut self) -> serde_json::Value {
        self.say(&line_pcm())
    }

    fn stop(self) {
        self.daemon
            .stop(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
        drop(self.writer);
    }
}

/// A POST on the daemon's listener: status and JSON body.
fn post(port: u16, path: &str, token: Option<&str>, body: &str) -> (u16, serde_json::Value) {
    let auth = token.map(|t| format!("Bearer {t}"));
    let (status, _, body) = http_request(port, "POST", path, auth.as_deref(), Some(body));
    (
        status,
        serde_json::from_str(body.trim()).unwrap_or(serde_json::Value::Null),
    )
}

fn metrics(port: u16) -> String {
    let auth = format!("Bearer {TOKEN}");
    http_request(port, "GET", "/metrics", Some(&auth), None).2
}

fn feedback(
    port: u16,
    id: &serde_json::Value,
    token: Option<&str>,
    label: &str,
) -> (u16, serde_json::Value) {
    post(
        port,
        &format!("/events/{id}/feedback"),
        token,
        &format!("{{\"label\": \"{label}\"}}"),
    )
}

#[test]
fn a_correction_by_http_mutes_the_next_identical_line_a_restart_keeps_it_and_bad_input_is_refused()
{
    let d = tempfile::tempdir().unwrap();
    let token_line = format!("token = \"{TOKEN}\"");
    let mut h = Held::start(d.path(), "first", &token_line);
    let first = h.say_line();
    assert_eq!(first["sarcastic"], true, "{first}");
    assert_eq!(first["room"]["muted_by"], serde_json::Value::Null);
    assert_eq!(first["models"]["room_head"], "room-mute-v1 (0 corrections)");
    let id = &first["id"];

    // Refused, each with its reason, and nothing recorded.
    let (code, _) = feedback(h.port, id, None, "not_sarcastic");
    assert_eq!(code, 401, "no token");
    let (code, body) = feedback(h.port, id, Some(TOKEN), "meh");
    assert_eq!(
        (code, body["reason"].as_str()),
        (400, Some("bad_label")),
        "{body}"
    );
    let (code, body) = post(
        h.port,
        &format!("/events/{id}/feedback"),
        Some(TOKEN),
        "not json",
    );
    assert_eq!(
        (code, body["reason"].as_str()),
        (400, Some("bad_body")),
        "{body}"
    );
    let (code, body) = post(
        h.port,
        "/events/x42/feedback",
        Some(TOKEN),
        r#"{"label":"not_sarcastic"}"#,
    );
    assert_eq!(
        (code, body["reason"].as_str()),
        (400, Some("bad_id")),
        "{body}"
    );
    let (code, body) = feedback(
        h.port,
        &serde_json::json!(4242),
        Some(TOKEN),
        "not_sarcastic",
    );
    assert_eq!(
        (code, body["reason"].as_str()),
        (404, Some("unknown_event")),
        "{body}"
    );
    assert!(
        body["error"].as_str().unwrap().contains("not held"),
        "{body}"
    );
    let store = d.path().join("room").join("corrections.jsonl");
    assert_eq!(
        std::fs::read_to_string(&store).unwrap_or_default(),
        "",
        "nothing recorded yet"
    );

    let (code, body) = feedback(h.port, id, Some(TOKEN), "not_sarcastic");
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        (body["status"].as_str(), body["correction"].as_u64()),
        (Some("recorded"), Some(1))
    );
    let (code, body) = feedback(h.port, id, Some(TOKEN), "not_sarcastic");
    assert_eq!(
        (code, body["status"].as_str()),
        (200, Some("unchanged")),
        "{body}"
    );
    let (code, body) = feedback(h.port, id, Some(TOKEN), "sarcastic");
    assert_eq!(
        (code, body["reason"].as_str()),
        (409, Some("already_corrected")),
        "{body}"
    );

    let second = h.say_line();
    assert_eq!(
        second["room"]["muted_by"], 1,
        "first: {}\nsecond: {}",
        first["transcript"], second["transcript"]
    );
    assert_eq!(second["sarcastic"], false, "{second}");
    let (p, t) = (
        second["p_sarcastic"].as_f64().unwrap(),
        second["threshold"].as_f64().unwrap(),
    );
    assert!(
        p < t && p > t * 0.9,
        "muted just below the threshold: {p} vs {t}"
    );
    assert_eq!(
        second["models"]["room_head"],
        "room-mute-v1 (1 corrections)"
    );
    let m = metrics(h.port);
    for want in [
        "sarcasmd_room_corrections_total{label=\"not_sarcastic\"} 1",
        "sarcasmd_room_corrections_held 1",
        "sarcasmd_room_refits_total 1",
        "sarcasmd_room_muted_events_total 1",
        "sarcasmd_room_corrections_refused_total{reason=\"unknown_event\"} 1",
        "sarcasmd_room_corrections_refused_total{reason=\"bad_label\"} 1",
        "sarcasmd_room_corrections_refused_total{reason=\"bad_id\"} 1",
    ] {
        assert!(m.contains(want), "{want} missing from:\n{m}");
    }
    h.stop();

    // A restart keeps the correction; a listener without a token refuses feedback.
    let mut h = Held::start(d.path(), "second", "");
    let again = h.say_line();
    assert_eq!(again["room"]["muted_by"], 1, "{again}");
    let (code, body) = feedback(h.port, &again["id"], None, "not_sarcastic");
    assert_eq!(
        (code, body["reason"].as_str()),
        (403, Some("no_token")),
        "{body}"
    );
    assert_eq!(http_request(h.port, "GET", "/feedback", None, None).0, 403);
    h.stop();

    // The store holds what adaptation needs.
    let text = std::fs::read_to_string(&store).unwrap();
    let rec: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(
        (rec["kind"].as_str(), rec["label"].as_str()),
        (Some("correction"), Some("not_sarcastic"))
    );
    assert_eq!(rec["text_embedding"].as_array().unwrap().len(), 512);
    assert!(!rec["prosody"].as_array().unwrap().is_empty());
    assert!(rec["models"]["text_encoder"]
        .as_str()
        .unwrap()
        .starts_with("usem3@"));
    assert_eq!(rec["transcript"], first["transcript"]);
}

#[test]
fn a_torn_store_is_read_up_to_the_tear_and_the_cli_lists_forgets_resets_and_records_after_the_meeting(
) {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("room").join("corrections.jsonl");
    // One correction made by a first daemon, then a write cut short by a power loss.
    let token_line = format!("token = \"{TOKEN}\"");
    let mut h = Held::start(d.path(), "first", &token_line);
    let first = h.say_line();
    assert_eq!(
        feedback(h.port, &first["id"], Some(TOKEN), "not_sarcastic").0,
        201
    );
    h.stop();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&store)
        .unwrap();
    f.write_all(br#"{"kind":"correction","v":1,"seq":2,"at_unix_ms":17"#)
        .unwrap();
    drop(f);

    let mut h = Held::start(d.path(), "second", &token_line);
    let again = h.say_line();
    assert_eq!(again["room"]["muted_by"], 1, "{again}");
    assert!(metrics(h.port).contains("sarcasmd_room_store_lines_skipped_total 1"));
    assert_eq!(
        feedback(h.port, &again["id"], Some(TOKEN), "sarcastic").0,
        201
    );
    // What the room has said, and one taken back over HTTP.
    let auth = format!("Bearer {TOKEN}");
    let (code, _, body) = http_request(h.port, "GET", "/feedback", Some(&auth), None);
    assert_eq!(code, 200, "{body}");
    let listed: serde_json::Value = serde_json::from_str(&body).unwrap();
    let labels: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["not_sarcastic", "sarcastic"]);
    let (code, _, body) = http_request(h.port, "DELETE", "/feedback/2", Some(&auth), None);
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"forgotten\""), "{body}");
    let (code, _, body) = http_request(h.port, "DELETE", "/feedback/2", Some(&auth), None);
    assert_eq!(code, 404, "{body}");
    let (code, _, body) = http_request(h.port, "DELETE", "/feedback/two", Some(&auth), None);
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("\"bad_id\""), "{body}");
    h.stop();

    // The CLI reads the same store (a config naming it), forgets one and resets.
    let cfg = d.path().join("cli.toml");
    std::fs::write(
        &cfg,
        format!("[room]\nenabled = true\nstore = \"{}\"\n", store.display()),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(common::bin())
            .arg("feedback")
            .arg("--config")
            .arg(&cfg)
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let listed = run(&["--list", "--json"]);
    let labels: Vec<String> = listed
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["label"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(labels, ["not_sarcastic"]);
    run(&["--forget", "1"]);
    assert_eq!(run(&["--list"]).lines().count(), 0);
    run(&["--reset"]);
    assert_eq!(run(&["--list"]).lines().count(), 0);
    let out = Command::new(common::bin())
        .args(["feedback", "--config"])
        .arg(&cfg)
        .args(["--forget", "9"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no correction 9"));

    // After the meeting, with the daemon running (as under systemd): a labels file for
    // the events file; the daemon picks the correction up from the store by itself.
    let mut h = Held::start(d.path(), "third", &token_line);
    let labels = d.path().join("labels.txt");
    std::fs::write(
        &labels,
        format!("# from the report\n{} not_sarcastic\n", again["id"]),
    )
    .unwrap();
    let events = d.path().join("second.jsonl");
    let out = run(&[
        "--events",
        events.to_str().unwrap(),
        "--labels",
        labels.to_str().unwrap(),
    ]);
    assert!(out.contains("not_sarcastic"), "{out}");
    std::fs::write(&labels, "99999 not_sarcastic\n").unwrap();
    let out = Command::new(common::bin())
        .args(["feedback", "--config"])
        .arg(&cfg)
        .args([
            "--events",
            events.to_str().unwrap(),
            "--labels",
            labels.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("event 99999 is not in"));
    let held = || {
        let (_, _, body) = http_request(h.port, "GET", "/feedback", Some(&auth), None);
        serde_json::from_str::<serde_json::Value>(&body).unwrap()[0]["label"].clone()
    };
    let t0 = std::time::Instant::now();
    while held() != "not_sarcastic" {
        assert!(
            t0.elapsed() < sarcasmd::daemon::room_watch::STORE_POLL * 5,
            "the running daemon did not pick up the CLI's correction"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let next = h.say_line();
    assert_eq!(next["room"]["muted_by"], 1, "{next}");
    h.stop();
}

#[test]
fn a_correction_by_mqtt_acts_on_the_last_flag_and_is_answered() {
    let Some(broker) = Broker::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let sub = Subscriber::start(broker.port(), "room-test-sub", "#");
    let extra = format!(
        "\n[mqtt]\nenabled = true\nport = {}\ndevice_id = \"room-9\"\nha_discovery = true\nreconnect_max_ms = 1000\n",
        broker.port()
    );
    let mut h = Held::start(d.path(), "mqtt", &extra);
    let first = h.say_line();
    assert_eq!(first["sarcastic"], true, "{first}");
    // The subscription is made on connect; the feedback button's discovery says where.
    assert!(
        sub.wait_for(
            |l| l
                .iter()
                .any(|(t, _)| t == "homeassistant/button/room-9/feedback_not_sarcastic/config"),
            Duration::from_secs(20)
        ),
        "no discovery for the feedback buttons: {:?}",
        sub.lines()
    );
    let publish = |payload: &str| {
        let ok = Command::new("mosquitto_pub")
            .args(["-h", "127.0.0.1", "-p", &broker.port().to_string()])
            .args(["-q", "1", "-t", "sarcasmd/room-9/feedback", "-m", payload])
            .status()
            .unwrap()
            .success();
        assert!(ok, "mosquitto_pub");
    };
    let results = |n: usize| {
        assert!(
            sub.wait_for(
                |l| l
                    .iter()
                    .filter(|(t, _)| t == "sarcasmd/room-9/feedback/result")
                    .count()
                    >= n,
                Duration::from_secs(20)
            ),
            "no answer on feedback/result: {:?}",
            sub.lines()
        );
        sub.payloads("sarcasmd/room-9/feedback/result")
    };
    publish("perhaps");
    let r: serde_json::Value = serde_json::from_str(&results(1)[0]).unwrap();
    assert_eq!(
        (r["status_code"].as_u64(), r["reason"].as_str()),
        (Some(400), Some("bad_label")),
        "{r}"
    );
    // What a Home Assistant button sends: the newest flagged event (every line is
    // flagged at this threshold).
    publish(r#"{"label":"not_sarcastic"}"#);
    let r: serde_json::Value = serde_json::from_str(&results(2)[1]).unwrap();
    assert_eq!(
        (r["status_code"].as_u64(), r["event"].clone()),
        (Some(201), first["id"].clone()),
        "{r}"
    );
    let second = h.say_line();
    assert_eq!(
        second["room"]["muted_by"], 1,
        "first: {first}\nsecond: {second}"
    );
    assert_eq!(second["sarcastic"], false, "{second}");
    h.stop();
}

#[test]
fn the_overlay_sends_a_correction_with_its_token() {
    let Some(browser) = common::webdriver::Browser::start() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let token_line = format!("token = \"{TOKEN}\"");
    let mut h = Held::start(d.path(), "overlay", &token_line);
    browser
        .goto(&format!(
            "http://127.0.0.1:{}/?token={TOKEN}&feedback=1&lines=6",
            h.port
        ))
        .unwrap();
    browser
        .wait_for(
            "document.body.dataset.connection === 'open'",
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    let first = h.say_line();
    let line = format!("#captions .line[data-id='{}']", first["id"]);
    browser
        .wait_for(
            &format!("document.querySelector(\"{line} .feedback button[data-label=not_sarcastic]\") !== null"),
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("no feedback buttons on the flagged line: {e}"));
    browser
        .execute(
            &format!("document.querySelector(\"{line} .feedback button[data-label=not_sarcastic]\").click(); return true;"),
            vec![],
        )
        .unwrap();
    let state = browser
        .wait_for(
            &format!("(s => s !== 'sending' && s !== '' && s)(document.querySelector(\"{line} .feedback\").dataset.state)"),
            Duration::from_secs(30),
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(state, "sent");
    let second = h.say_line();
    assert_eq!(second["room"]["muted_by"], 1, "{second}");
    h.stop();
}
