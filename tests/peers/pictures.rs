//! The pictures end to end: `bench --plot` and `eval --plot` on real runs (espeak-ng
//! speech through the real models), `plot bench` overlaying saved runs, and the meeting
//! report opened in a real headless Chromium (DOM checks, hover, screenshot).
//!
//! Every file goes to a temporary directory or `CARGO_TARGET_TMPDIR`, never the source tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common::webdriver::Browser;
use crate::common::{bin, silence, speak, write_wav_i16, RATE};
use sarcasmd::sinks::event::{GapEvent, LatencyMs, PartialEvent, ReadyMs, UtteranceEvent, Views};
use serde_json::Value;

fn run_ok(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "sarcasmd {args:?} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn clip(dir: &Path, name: &str, text: &str) -> PathBuf {
    let mut x = silence(0.3);
    x.extend(speak(text, "en-us"));
    x.extend(silence(0.5));
    let p = dir.join(name);
    write_wav_i16(&p, &x, RATE);
    p
}

fn assert_svg(path: &Path, needles: &[&str]) -> String {
    let svg = std::fs::read_to_string(path).unwrap();
    assert!(svg.starts_with("<svg"), "{}: {:.100}", path.display(), svg);
    assert!(svg.trim_end().ends_with("</svg>"));
    for n in needles {
        assert!(svg.contains(n), "{} lacks {n:?}", path.display());
    }
    svg
}

#[test]
fn bench_plot_draws_a_real_run_and_plot_bench_overlays_saved_ones() {
    let d = tempfile::tempdir().unwrap();
    let clips = d.path().join("clips");
    std::fs::create_dir(&clips).unwrap();
    let text = "Oh great, another meeting that could have been an email.";
    clip(&clips, "turn1.wav", text);
    std::fs::write(clips.join("turn1.txt"), text).unwrap();
    let json = d.path().join("laptop.json");
    let svg = d.path().join("bench.svg");
    let table = run_ok(&[
        "bench",
        clips.to_str().unwrap(),
        "--runs",
        "1",
        "--gap-ms",
        "800",
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    // The legend's p50 is the run's own: one clip per mode, so p50 = its latency.
    for mode in ["streaming", "one-shot"] {
        let run = report["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["mode"] == mode)
            .unwrap_or_else(|| panic!("no {mode} run: {table}"));
        let l = run["per_clip"][0]["latency_ms"]
            .as_f64()
            .unwrap_or_else(|| panic!("{mode}: the clip got no event: {table}"));
        assert_svg(&svg, &[&format!("{mode}: p50 {l:.0} ms, p95 {l:.0} ms")]);
    }
    assert_svg(
        &svg,
        &["endpoint", "asr", "share of clips", "median of each stage"],
    );

    // Two saved runs overlaid, each named by its file.
    let other = d.path().join("rpi4.json");
    std::fs::copy(&json, &other).unwrap();
    let both = d.path().join("both.svg");
    run_ok(&[
        "plot",
        "bench",
        json.to_str().unwrap(),
        other.to_str().unwrap(),
        "-o",
        both.to_str().unwrap(),
    ]);
    assert_svg(
        &both,
        &[
            "laptop streaming: p50",
            "rpi4 one-shot: p50",
            "laptop vs rpi4",
        ],
    );

    // A file of another kind is refused with its name.
    let out = Command::new(bin())
        .args(["plot", "bench", "-o"])
        .arg(d.path().join("x.svg"))
        .arg(clips.join("turn1.txt"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("turn1.txt"), "{err}");
}

#[test]
fn eval_plot_draws_each_view_with_its_baselines() {
    let d = tempfile::tempdir().unwrap();
    let a = clip(
        d.path(),
        "great.wav",
        "Oh great, another meeting. I just love meetings.",
    );
    let b = clip(
        d.path(),
        "report.wav",
        "The report is due on Friday at noon.",
    );
    let lines = [
        serde_json::json!({"id": "c1", "audio": a, "text": "Oh great, another meeting. I just love meetings.", "label": 1}),
        serde_json::json!({"id": "c2", "audio": b, "text": "The report is due on Friday at noon.", "label": 0}),
        serde_json::json!({"id": "t1", "text": "Wow, you really outdid yourself this time.", "label": 1}),
        serde_json::json!({"id": "t2", "text": "Can you send me the slides after lunch?", "label": 0}),
        serde_json::json!({"id": "t3", "text": "Sure, because that worked so well last time.", "label": 1}),
        serde_json::json!({"id": "t4", "text": "The meeting room is booked until three.", "label": 0}),
    ];
    let manifest = d.path().join("m.jsonl");
    let body: Vec<String> = lines.iter().map(Value::to_string).collect();
    std::fs::write(&manifest, body.join("\n")).unwrap();
    let json = d.path().join("eval.json");
    let svg = d.path().join("eval.svg");
    run_ok(&[
        "eval",
        manifest.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let auc = |views: &str| {
        report["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["views"] == views && r["context_s"].is_null() && r["subset"] == "all")
            .and_then(|r| r["auc"].as_f64())
    };
    // The picture's AUCs are eval's own figures.
    let text_auc = auc("T").expect("text row with an AUC");
    let drawn = assert_svg(
        &svg,
        &[
            &format!("text: AUC {text_auc:.2} (n 6)"),
            "audio: AUC",
            "served fusion: AUC",
            "random or majority guess (AUC 0.50)",
            "perfect calibration",
            "class rate 0.50",
            "m.jsonl (whisper transcripts)",
        ],
    );
    assert!(!drawn.contains("video:"), "no item has video");
    // The same picture again from the saved JSON.
    let again = d.path().join("again.svg");
    run_ok(&[
        "plot",
        "eval",
        json.to_str().unwrap(),
        "-o",
        again.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read_to_string(&again).unwrap(), drawn);
}

const HOSTILE: &str =
    "<script>window.__pwned = 1</script> Tom & Jerry <b>bold</b> \"quoted\" 'single'";

fn utterance(
    id: u64,
    start_s: f64,
    end_s: f64,
    text: &str,
    p: f32,
    video: Option<f32>,
) -> UtteranceEvent {
    let total = 250.0 + 10.0 * id as f64;
    UtteranceEvent {
        kind: "utterance",
        id,
        start_s,
        end_s,
        transcript: Some(text.into()),
        language: "en".into(),
        p_sarcastic: p,
        sarcastic: p >= 0.5,
        threshold: 0.5,
        views: Views {
            text: Some(p),
            audio: Some(0.4),
            video,
        },
        latency_ms: LatencyMs {
            endpoint: 240.0,
            asr: 5.0,
            text: 3.0,
            audio: 0.5,
            fusion: 0.1,
            total,
            ..Default::default()
        },
        ready_ms: ReadyMs {
            audio: Some(240.5),
            text: Some(total),
            video: None,
            fused: total,
        },
        text_shed: false,
        models: BTreeMap::new(),
        forced_split: false,
        early_end: false,
        revises: None,
        asr_segments: Vec::new(),
        asr_guards: Vec::new(),
        extras: None,
        room: None,
        features: None,
    }
}

/// A meeting in the daemon's own event types: five utterances (two flagged, one with a
/// transcript full of markup), an interim line, an audio gap, and id 3 missing (dropped).
fn meeting_events(dir: &Path) -> (PathBuf, PathBuf) {
    let mut lines: Vec<String> = Vec::new();
    let ev = |e: &UtteranceEvent| serde_json::to_string(e).unwrap();
    lines.push(ev(&utterance(
        0,
        1.0,
        3.5,
        "Good morning everyone, let's start.",
        0.12,
        None,
    )));
    lines.push(
        serde_json::to_string(&PartialEvent {
            kind: "partial",
            id: 1,
            start_s: 4.2,
            end_s: 5.0,
            text: "Oh".into(),
            language: "en".into(),
            decode_ms: 40.0,
        })
        .unwrap(),
    );
    lines.push(ev(&utterance(1, 4.2, 7.9, HOSTILE, 0.81, Some(0.66))));
    lines.push(ev(&utterance(
        2,
        9.0,
        11.0,
        "The server went down again.",
        0.35,
        None,
    )));
    lines.push(
        serde_json::to_string(&GapEvent {
            kind: "gap",
            source: "audio",
            start_s: 12.0,
            end_s: 15.5,
            reason: "device disappeared: <hw:1> & gone".into(),
        })
        .unwrap(),
    );
    lines.push(ev(&utterance(
        4,
        18.0,
        21.0,
        "Wow, what a surprise, I am totally shocked.",
        0.93,
        None,
    )));
    lines.push(ev(&utterance(
        5,
        22.0,
        24.0,
        "Please send me the slides.",
        0.05,
        None,
    )));
    let events = dir.join("events.jsonl");
    std::fs::write(&events, lines.join("\n") + "\n").unwrap();
    let stats = sarcasmd::pipeline::RunStats {
        audio_s: 25.0,
        wall_s: 25.4,
        dropped: [
            ("utterance_queue_full".to_string(), 1u64),
            ("dropped_samples".to_string(), 0),
        ]
        .into_iter()
        .collect(),
        counts: [("source_gaps", 1u64)].into_iter().collect(),
        source_gap_s: 3.5,
        ..Default::default()
    };
    let stats_path = dir.join("stats.json");
    std::fs::write(&stats_path, serde_json::to_string(&stats).unwrap()).unwrap();
    (events, stats_path)
}

#[test]
fn report_page_works_offline_in_chromium() {
    let d = tempfile::tempdir().unwrap();
    let (events, stats) = meeting_events(d.path());
    let page = d.path().join("meeting.html");
    run_ok(&[
        "report",
        events.to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
        "--stats",
        stats.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    for bad in ["http:", "https:", " src=", "<link", "@import"] {
        assert!(!html.contains(bad), "the page refers elsewhere: {bad:?}");
    }
    assert!(
        !html.contains("<script>window"),
        "transcript inserted as markup"
    );

    let Some(browser) = Browser::start() else {
        return;
    };
    browser.goto(&format!("file://{}", page.display())).unwrap();
    browser
        .wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(20),
        )
        .unwrap();
    let q = |js: &str| browser.execute(js, vec![]).unwrap();

    // The hostile transcript is text on the page, exactly, and ran nothing.
    assert_eq!(q("return window.__pwned === undefined"), true);
    assert_eq!(q("return document.scripts.length"), 1);
    assert_eq!(
        q("return document.querySelector('#u-1 .said').textContent"),
        HOSTILE
    );
    assert_eq!(
        q("return document.querySelectorAll('#transcript b, #transcript script').length"),
        0
    );

    // Timeline: five utterances, two flagged, the gap and the dropped id 3.
    assert_eq!(
        q("return document.querySelectorAll('svg.timeline rect.utt').length"),
        5
    );
    assert_eq!(
        q("return Array.from(document.querySelectorAll('svg.timeline rect.utt.flagged')).map(r => +r.dataset.id)"),
        serde_json::json!([1, 4])
    );
    assert_eq!(
        q("return Array.from(document.querySelectorAll('tr.utt-row.flagged')).map(r => r.id + ':' + r.querySelector('.badge').textContent)"),
        serde_json::json!(["u-1:flagged", "u-4:flagged"])
    );
    assert_eq!(
        q("return document.querySelectorAll('svg.timeline rect.gap').length"),
        1
    );
    assert_eq!(
        q("return document.querySelector('svg.timeline g.drop').dataset.id"),
        "3"
    );
    let drops = q("return document.getElementById('drops').textContent").to_string();
    assert!(
        drops.contains("device disappeared: <hw:1> & gone"),
        "{drops}"
    );
    assert!(drops.contains("ids 3"), "{drops}");
    assert!(drops.contains("utterance_queue_full 1"), "{drops}");
    // Each view has a lane; the video lane is empty where there was no face.
    assert_eq!(
        q("return document.querySelectorAll('rect.view[data-view=video][fill=none]').length"),
        4
    );

    // Latency summary: nearest-rank p50/p95/max of latency_ms.total (250 + 10 * id).
    let totals: Vec<f64> = [0u64, 1, 2, 4, 5]
        .iter()
        .map(|&id| 250.0 + 10.0 * id as f64)
        .collect();
    let p = sarcasmd::tools::bench::Percentiles::of(totals);
    let summary = q("return document.getElementById('latency-total').textContent").to_string();
    let want = format!(
        "p50 {:.0} ms, p95 {:.0} ms, max {:.0} ms over 5 utterances",
        p.p50, p.p95, p.max
    );
    assert!(summary.contains(&want), "{summary} lacks {want}");

    // Hover: the tooltip shows every view's score and the transcript, as text.
    let tip = q(
        "var r = document.querySelector('svg.timeline rect.utt[data-id=\"1\"]').getBoundingClientRect();
         var t = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
         t.dispatchEvent(new MouseEvent('mousemove', {bubbles: true, clientX: r.left + r.width / 2, clientY: r.top + r.height / 2}));
         var tip = document.getElementById('tip');
         return {hidden: tip.hidden, text: tip.textContent, children: tip.children.length};",
    );
    assert_eq!(tip["hidden"], false, "{tip}");
    assert_eq!(tip["children"], 0, "{tip}");
    let tip_text = tip["text"].as_str().unwrap();
    assert!(
        tip_text.contains("p_sarcastic 0.81 (flagged)"),
        "{tip_text}"
    );
    assert!(
        tip_text.contains("text 0.81 / audio 0.40 / video 0.66"),
        "{tip_text}"
    );
    assert!(tip_text.contains(HOSTILE), "{tip_text}");

    // The policy let the page's own style and script run and nothing load.
    assert_eq!(
        q("return getComputedStyle(document.body).maxWidth"),
        "1100px"
    );
    assert_eq!(
        q("return getComputedStyle(document.querySelector('#u-1 .chip')).backgroundColor"),
        format!("rgb({})", chip_rgb(0.81))
    );
    assert_eq!(
        q("return performance.getEntriesByType('resource').length"),
        0
    );
    let console = browser.console_log().unwrap_or_default();
    assert!(
        !console
            .iter()
            .any(|l| l.contains("Content Security Policy") || l.starts_with("SEVERE")),
        "{console:?}"
    );

    let shot = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("meeting-report.png");
    browser.screenshot_png(&shot).unwrap();
    let png = std::fs::read(&shot).unwrap();
    assert_eq!(&png[1..4], b"PNG");
    assert!(png.len() > 20_000, "a blank page? {} bytes", png.len());
    println!("report screenshot: {}", shot.display());
}

/// The chip colour of a score, as CSS computes it (`report::score_colour`).
fn chip_rgb(p: f64) -> String {
    let hex = sarcasmd::tools::report::score_colour(Some(p));
    let c = |i: usize| u8::from_str_radix(&hex[i..i + 2], 16).unwrap();
    format!("{}, {}, {}", c(1), c(3), c(5))
}
