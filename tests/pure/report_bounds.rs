//! What `sarcasmd report` and `sarcasmd plot` do with hostile input (issue 34, defects
//! 6, 7 and 12): every file they read is read by kind and with a bound, every quantity
//! they allocate from it is bounded, and no output may be one of their inputs. Only the
//! binary is needed (no models).

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{bin, wait_exit};

/// Runs `sarcasmd ARGS`, failing the test if it takes more than 60 s.
fn run(args: &[&str]) -> (Output, Duration) {
    let t0 = Instant::now();
    let mut child = Command::new(bin())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if wait_exit(&mut child, Duration::from_secs(60)).is_none() {
        let _ = child.kill();
        panic!("sarcasmd {args:?} still running after 60 s");
    }
    (child.wait_with_output().unwrap(), t0.elapsed())
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn utterance(id: u64, start: f64, end: f64) -> String {
    serde_json::json!({
        "type": "utterance", "id": id, "start_s": start, "end_s": end, "transcript": "x",
        "p_sarcastic": 0.2, "sarcastic": false, "threshold": 0.5,
        "views": {"text": 0.2, "audio": 0.4, "video": null},
    })
    .to_string()
}

/// Defect 6: one line with `"id":10000000` or `"end_s":1e12` allocated 5.5 GB;
/// `"end_s":1e308` hung.
#[test]
fn one_hostile_event_line_costs_bounded_memory_and_time() {
    let d = tempfile::tempdir().unwrap();
    let ev = d.path().join("ev.jsonl");
    let out_html = d.path().join("m.html");
    let o = out_html.to_str().unwrap();
    std::fs::write(&ev, utterance(10_000_000, 1.0, 2.0)).unwrap();
    let (out, took) = run(&["report", ev.to_str().unwrap(), "-o", o]);
    assert!(out.status.success(), "{}", stderr(&out));
    let size = std::fs::metadata(&out_html).unwrap().len();
    assert!(size < 2_000_000, "{size} bytes for one event");
    assert!(took < Duration::from_secs(30), "{took:?}");
    for end in ["1e12", "1e308"] {
        std::fs::write(&ev, utterance(0, 1.0, end.parse().unwrap())).unwrap();
        let (out, took) = run(&["report", ev.to_str().unwrap(), "-o", o]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        assert!(stderr(&out).contains("`end_s`"), "{}", stderr(&out));
        assert!(took < Duration::from_secs(30), "{took:?}");
    }
}

/// Defect 7: `/dev/zero` as any input was read until about 1 GB.
#[test]
fn devices_and_fifos_are_refused_by_kind_at_once() {
    let d = tempfile::tempdir().unwrap();
    let ev = d.path().join("ev.jsonl");
    std::fs::write(&ev, utterance(0, 1.0, 2.0)).unwrap();
    let e = ev.to_str().unwrap();
    let o = d.path().join("out");
    let o = o.to_str().unwrap();
    for args in [
        vec!["report", "/dev/zero", "-o", o],
        vec!["report", e, "--stats", "/dev/zero", "-o", o],
        vec!["plot", "eval", "/dev/zero", "-o", o],
        vec!["plot", "bench", "/dev/zero", "-o", o],
    ] {
        let (out, took) = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is a device"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(took < Duration::from_secs(10), "{args:?}: {took:?}");
    }
}

/// Defect 12: `report ev.jsonl -o ev.jsonl` replaced the events with the page, exit 0.
#[test]
fn no_command_writes_over_what_it_reads() {
    let d = tempfile::tempdir().unwrap();
    let ev = d.path().join("ev.jsonl");
    let text = utterance(0, 1.0, 2.0);
    std::fs::write(&ev, &text).unwrap();
    let link = d.path().join("link.jsonl");
    std::os::unix::fs::symlink(&ev, &link).unwrap();
    let e = ev.to_str().unwrap();
    let eval_json = d.path().join("eval.json");
    std::fs::write(&eval_json, "{}").unwrap();
    let j = eval_json.to_str().unwrap();
    for args in [
        vec!["report", e, "-o", e],
        vec!["report", e, "-o", link.to_str().unwrap()],
        vec!["report", e, "--stats", j, "-o", j],
        vec!["plot", "eval", j, "-o", j],
        vec!["plot", "bench", e, j, "-o", j],
        vec!["eval", e, "--json", e],
        vec!["eval", e, "--json", j, "--plot", j],
        vec!["bench", e, "--json", e],
        vec!["embed", "--in", e, "--out", e],
    ] {
        let (out, _) = run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is the same file as"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert_eq!(std::fs::read_to_string(&ev).unwrap(), text);
    assert_eq!(std::fs::read_to_string(&eval_json).unwrap(), "{}");
    assert!(Path::new(&ev).exists());
}
