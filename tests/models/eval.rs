//! `sarcasmd eval` end to end: a manifest mixing spoken clips (espeak-ng, through VAD and
//! Whisper) and text-only items with context and annotator labels. The scores it reports
//! for a clip must be the ones `sarcasmd replay` serves for the same audio.

use crate::common;

use std::path::Path;
use std::process::Command;

use crate::common::{bin, silence, speak, write_wav_i16, RATE};
use serde_json::Value;

fn clip(dir: &Path, name: &str, text: &str) -> String {
    let mut x = silence(0.5);
    x.extend(speak(text, "en-us"));
    x.extend(silence(1.0));
    let p = dir.join(name);
    write_wav_i16(&p, &x, RATE);
    p.display().to_string()
}

fn eval(manifest: &Path, json: &Path, extra: &[&str]) -> (String, Value) {
    let out = Command::new(bin())
        .arg("eval")
        .arg(manifest)
        .arg("--json")
        .arg(json)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "eval failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    (String::from_utf8(out.stdout).unwrap(), report)
}

fn row<'a>(report: &'a Value, views: &str, context: bool, subset: &str) -> &'a Value {
    report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["views"] == views && r["context_s"].is_null() != context && r["subset"] == subset
        })
        .unwrap_or_else(|| panic!("no row {views} context={context} {subset}: {report:#}"))
}

#[test]
fn eval_scores_clips_as_replay_does_and_reports_every_view() {
    let dir = tempfile::tempdir().unwrap();
    let sarcastic = clip(
        dir.path(),
        "great.wav",
        "Oh great, another meeting. I just love meetings.",
    );
    let plain = clip(
        dir.path(),
        "report.wav",
        "The report is due on Friday at noon.",
    );
    let manifest = dir.path().join("m.jsonl");
    let lines = [
        serde_json::json!({"id": "clip-1", "audio": sarcastic, "text": "Oh great, another meeting. I just love meetings.", "label": 1}),
        serde_json::json!({"id": "clip-2", "audio": plain, "text": "The report is due on Friday at noon.", "label": 0}),
        serde_json::json!({"id": "t-1", "text": "Wow, you really outdid yourself this time.", "label": 1,
            "context": ["I burned the toast again.", {"speaker": "B", "text": "And the eggs?"}],
            "annotators": [1, 1, 1]}),
        serde_json::json!({"id": "t-2", "text": "Can you send me the slides after lunch?", "label": 0,
            "context": ["We meet at two."], "annotators": [0, 0, 1]}),
        serde_json::json!({"id": "t-3", "text": "Sure, because that worked so well last time.", "label": 1,
            "annotators": [1, 0, 1], "split": "test"}),
        serde_json::json!({"id": "t-4", "text": "No label here."}),
    ];
    let body: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&manifest, body.join("\n")).unwrap();

    let json = dir.path().join("report.json");
    let (table, report) = eval(&manifest, &json, &[]);
    assert!(
        table.contains("| views | context | subset | n |"),
        "{table}"
    );
    assert_eq!(report["items_scored"], 5);
    assert_eq!(report["items_unlabelled"], 1);
    assert_eq!(report["text_from"], "whisper");
    let items = report["items"].as_array().unwrap();
    let item = |id: &str| items.iter().find(|i| i["id"] == id).unwrap();
    // Clips: Whisper's transcript feeds the text view; text-only items use the gold text.
    let c1 = item("clip-1");
    assert_eq!(c1["text_from"], "whisper");
    assert!(c1["utterances"].as_u64().unwrap() >= 1);
    assert!(
        c1["text"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("meeting"),
        "{c1}"
    );
    assert_eq!(item("t-1")["text_from"], "gold");
    assert!(item("t-1")["context_words"].as_u64().unwrap() >= 8);

    // Rows: every view the items have, with and without context, the full-agreement
    // subset (t-1 only) and the annotators' own majority vote.
    assert_eq!(row(&report, "served", false, "all")["scores"]["n"], 5);
    assert_eq!(row(&report, "A", false, "all")["scores"]["n"], 2);
    assert_eq!(row(&report, "T+A", false, "all")["scores"]["n"], 2);
    assert_eq!(row(&report, "T", false, "all")["scores"]["n"], 5);
    assert_eq!(row(&report, "T", true, "all")["scores"]["n"], 5);
    assert_eq!(row(&report, "T", false, "full agreement")["scores"]["n"], 1);
    assert_eq!(
        row(&report, "annotators' majority", false, "all")["scores"]["n"],
        3
    );
    assert!(report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["views"] != "V"));
    assert_eq!(report["agreement"]["raters"], 3);
    let served = row(&report, "served", false, "all");
    let c = &served["scores"]["confusion"];
    let total: u64 = ["tp", "fp", "fn_", "tn"]
        .iter()
        .map(|k| c[k].as_u64().unwrap())
        .sum();
    assert_eq!(total, 5);
    let rand = served["baselines"]["random_f1_macro"].as_f64().unwrap();
    assert!((0.45..0.52).contains(&rand), "{rand}");

    // The clip's served score is what the daemon emits for the same audio.
    let out = Command::new(bin())
        .args(["replay", &sarcastic, "--events", "-"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "utterance")
        .collect();
    assert_eq!(events.len() as u64, c1["utterances"].as_u64().unwrap());
    if events.len() == 1 {
        let live = events[0]["p_sarcastic"].as_f64().unwrap();
        let ours = c1["p"]["served"].as_f64().unwrap();
        assert!((live - ours).abs() < 1e-5, "replay {live} vs eval {ours}");
        assert!(
            (events[0]["views"]["audio"].as_f64().unwrap() - c1["p"]["A"].as_f64().unwrap()).abs()
                < 1e-6
        );
    }

    // --gold-text and --split.
    let (_, gold) = eval(&manifest, &json, &["--gold-text", "--context-s", "0"]);
    assert_eq!(gold["text_from"], "gold");
    assert!(gold["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["context_s"].is_null()));
    let (_, test) = eval(&manifest, &json, &["--split", "test"]);
    assert_eq!(test["items_scored"], 1);
}

#[test]
fn eval_refuses_a_manifest_with_nothing_labelled() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("m.jsonl");
    std::fs::write(&manifest, r#"{"id":"a","text":"hello"}"#).unwrap();
    let out = Command::new(bin())
        .arg("eval")
        .arg(&manifest)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no labelled item"), "{err}");
}

/// Issue 34, defect 11: an item whose audio is a FIFO hung eval, and `/dev/zero` was
/// called "empty (0 bytes)". Audio is refused by kind before it is opened: the item is
/// skipped with what it is, and the rest are scored.
#[test]
fn an_item_whose_audio_is_not_a_regular_file_is_skipped_by_kind_at_once() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.wav");
    let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let manifest = dir.path().join("m.jsonl");
    let lines = [
        serde_json::json!({"id": "fifo", "audio": fifo.display().to_string(), "label": 1}),
        serde_json::json!({"id": "zero", "audio": "/dev/zero", "label": 0}),
        serde_json::json!({"id": "t-1", "text": "Oh great, more paperwork.", "label": 1}),
    ];
    let body: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    std::fs::write(&manifest, body.join("\n")).unwrap();
    let json = dir.path().join("report.json");
    let mut child = Command::new(bin())
        .arg("eval")
        .arg(&manifest)
        .arg("--json")
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    if common::wait_exit(&mut child, std::time::Duration::from_secs(120)).is_none() {
        let _ = child.kill();
        panic!("eval still running after 120 s (blocked on the FIFO?)");
    }
    let out = child.wait_with_output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("fifo: skipped") && log.contains("pipe (FIFO)"),
        "{log}"
    );
    assert!(
        log.contains("zero: skipped") && log.contains("is a device"),
        "{log}"
    );
    assert!(!log.contains("empty (0 bytes)"), "{log}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["items_skipped"], serde_json::json!(["fifo", "zero"]));
    assert_eq!(report["items_scored"], 1);
}
