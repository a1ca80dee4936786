//! Every kind of bad input ends with a message naming the file and the problem, a
//! non-zero exit code (2 for bad input, 3 for models), no panic and no event line.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

fn replay(args: &[&str], envs: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(bin());
    c.arg("replay").args(args);
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn assert_clean_failure(out: &Output, code: i32, must_mention: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "stderr: {stderr}");
    assert!(
        out.stdout.is_empty(),
        "no event may be printed: {:?}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    for m in must_mention {
        assert!(stderr.contains(m), "stderr lacks {m:?}: {stderr}");
    }
}

fn good_wav(dir: &Path) -> PathBuf {
    let p = dir.join("good.wav");
    let mut x = silence(0.3);
    x.extend(speak("Hello there.", "en-us"));
    write_wav_i16(&p, &x, RATE);
    p
}

#[test]
fn truncated_wav() {
    let d = tempfile::tempdir().unwrap();
    let good = good_wav(d.path());
    let bytes = std::fs::read(&good).unwrap();
    let p = d.path().join("truncated.wav");
    std::fs::write(&p, &bytes[..bytes.len() / 2]).unwrap();
    let out = replay(&[p.to_str().unwrap()], &[]);
    assert_clean_failure(&out, 2, &["truncated.wav", "truncated"]);
}

#[test]
fn header_only_wav_is_truncated_or_empty() {
    let d = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(good_wav(d.path())).unwrap();
    let p = d.path().join("cut_in_header.wav");
    std::fs::write(&p, &bytes[..30]).unwrap();
    let out = replay(&[p.to_str().unwrap()], &[]);
    assert_clean_failure(&out, 2, &["cut_in_header.wav"]);
}

#[test]
fn non_audio_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("notes.txt");
    std::fs::write(&p, "this is not audio at all, just some text\n".repeat(20)).unwrap();
    let out = replay(&[p.to_str().unwrap()], &[]);
    assert_clean_failure(&out, 2, &["notes.txt", "not a readable WAV"]);
}

#[test]
fn unsupported_sample_format() {
    let d = tempfile::tempdir().unwrap();
    let good = good_wav(d.path());
    for (name, args) in [
        ("alaw.wav", &["-e", "a-law"][..]),
        ("u8.wav", &["-b", "8"][..]),
        // sox writes a plain IEEE-float fmt chunk (tag 3), which hound refuses with
        // "bits per sample is not 32" (issue 25, class 14); ffmpeg's extensible
        // header took another path.
        ("f64.wav", &["-e", "floating-point", "-b", "64"][..]),
    ] {
        let p = d.path().join(name);
        let st = Command::new("sox")
            .arg(&good)
            .args(args)
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
        let out = replay(&[p.to_str().unwrap()], &[]);
        assert_clean_failure(&out, 2, &[name, "unsupported", "sox"]);
    }
}

#[test]
fn empty_file() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("empty.wav");
    std::fs::write(&p, b"").unwrap();
    let out = replay(&[p.to_str().unwrap()], &[]);
    assert_clean_failure(&out, 2, &["empty.wav", "empty"]);
}

#[test]
fn wav_with_zero_samples() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("zero.wav");
    write_wav_i16(&p, &[], RATE);
    let out = replay(&[p.to_str().unwrap()], &[]);
    assert_clean_failure(&out, 2, &["zero.wav", "no audio samples"]);
}

#[test]
fn missing_input_file() {
    let out = replay(&["/nonexistent/dir/meeting.wav"], &[]);
    assert_clean_failure(&out, 2, &["/nonexistent/dir/meeting.wav"]);
}

#[test]
fn a_video_named_on_the_command_line_that_cannot_be_read_is_bad_input() {
    // Missing, a directory, or not a video: exit 2 with the path and what --video
    // takes, not a warning and an audio-only run that exits 0.
    let d = tempfile::tempdir().unwrap();
    let wav = good_wav(d.path());
    let text = d.path().join("notes.mp4");
    std::fs::write(&text, "not a video\n").unwrap();
    let missing = d.path().join("missing.mp4");
    let dir = d.path().to_path_buf();
    for (video, says) in [
        (&missing, "no such file"),
        (&dir, "is a directory"),
        (&text, "--video"),
    ] {
        let out = replay(
            &[wav.to_str().unwrap(), "--video", video.to_str().unwrap()],
            &[],
        );
        assert_clean_failure(&out, 2, &[video.to_str().unwrap(), "--video", says]);
    }
}

#[test]
fn the_os_error_is_printed_once() {
    // Errors that name their cause and also chain it printed it twice ("No such file or
    // directory (os error 2): No such file or directory (os error 2)").
    let d = tempfile::tempdir().unwrap();
    let missing = d.path().join("missing");
    let m = missing.to_str().unwrap();
    for args in [
        vec!["validate", m],
        vec!["run", "--config", m],
        vec!["eval", m],
        vec!["replay", m],
    ] {
        let out = Command::new(bin()).args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("os error 2").count(),
            1,
            "{args:?}: {stderr}"
        );
    }
}

#[test]
fn empty_stdin() {
    let out = Command::new(bin())
        .args(["replay", "-"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_clean_failure(&out, 2, &["stdin", "no audio samples"]);
}

/// A model dir whose files are links to the real cache, with one file replaced.
fn model_dir_with(replace: Option<(&str, &[u8])>) -> tempfile::TempDir {
    let real = sarcasmd::common::models::model_dir(None);
    let d = tempfile::tempdir().unwrap();
    for e in sarcasmd::common::models::lock().unwrap().outputs {
        let dst = d.path().join(&e.path);
        std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
        match replace {
            Some((name, bytes)) if name == e.name => std::fs::write(&dst, bytes).unwrap(),
            _ => std::os::unix::fs::symlink(real.join(&e.path), &dst).unwrap(),
        }
    }
    d
}

#[test]
fn missing_model() {
    let d = tempfile::tempdir().unwrap();
    let wav = good_wav(d.path());
    let empty = tempfile::tempdir().unwrap();
    let out = replay(
        &[wav.to_str().unwrap()],
        &[("SARCASMD_MODEL_DIR", empty.path())],
    );
    assert_clean_failure(&out, 3, &["missing", "fetch-models.sh"]);
}

#[test]
fn corrupt_models_are_caught_before_native_code() {
    let d = tempfile::tempdir().unwrap();
    let wav = good_wav(d.path());
    let lock = sarcasmd::common::models::lock().unwrap();
    // Same size, wrong bytes: the checksum tells, and for Whisper already the walk of
    // its layout at the start (issue 34: also without checksums).
    for (name, says) in [
        ("whisper-tiny.en-q8_0", "not a whisper.cpp ggml model"),
        ("silero-vad", "SHA-256"),
    ] {
        let e = lock.outputs.iter().find(|o| o.name == name).unwrap();
        let garbage = vec![0x5au8; e.bytes as usize];
        let md = model_dir_with(Some((name, &garbage)));
        let out = replay(
            &[wav.to_str().unwrap()],
            &[("SARCASMD_MODEL_DIR", md.path())],
        );
        assert_clean_failure(&out, 3, &[&e.path, says]);
        // Truncated: the size check catches it.
        let md = model_dir_with(Some((name, b"ggml")));
        let out = replay(
            &[wav.to_str().unwrap()],
            &[("SARCASMD_MODEL_DIR", md.path())],
        );
        assert_clean_failure(&out, 3, &[&e.path, "size"]);
    }
}

#[test]
fn invalid_configs() {
    let d = tempfile::tempdir().unwrap();
    let cases = [
        (
            "syntax.toml",
            "[segment\nthreshold = 0.5\n",
            "syntax.toml:1:",
        ),
        ("typo.toml", "[segment]\nhangover = 300\n", "typo.toml:2:1"),
        (
            "range.toml",
            "[segment]\nthreshold = 2.0\n",
            "segment.threshold",
        ),
        ("lang.toml", "[asr]\nlanguage = \"de\"\n", "English-only"),
    ];
    for (name, text, expect) in cases {
        let p = d.path().join(name);
        std::fs::write(&p, text).unwrap();
        for sub in [vec!["validate"], vec!["run", "--config"]] {
            let out = Command::new(bin()).args(&sub).arg(&p).output().unwrap();
            assert_clean_failure(&out, 2, &[expect]);
        }
    }
    let out = Command::new(bin())
        .args(["validate", "/nonexistent.toml"])
        .output()
        .unwrap();
    assert_clean_failure(&out, 2, &["/nonexistent.toml"]);
}

/// `sarcasmd validate PATH`: whether it passed, and what it printed on stderr.
fn validate(path: &Path) -> (bool, String) {
    let out = Command::new(bin())
        .arg("validate")
        .arg(path)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Issue 24, item 4: a profile whose budget is below what its board measured for its
/// Whisper settings (the Pi 5 profile with 2 decode threads: p95 5014 ms emulated
/// against a 2500 ms budget) is warned about, and still validates.
#[test]
fn a_budget_below_what_the_board_measured_is_warned_about() {
    let d = tempfile::tempdir().unwrap();
    let shipped =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("firmware-config/rpi5.toml");
    let text = std::fs::read_to_string(shipped).unwrap();
    assert!(
        text.contains("threads = 1"),
        "the Pi 5 profile decodes on 1 thread"
    );
    let p = d.path().join("rpi5-2-threads.toml");
    std::fs::write(&p, text.replacen("threads = 1", "threads = 2", 1)).unwrap();
    let (ok, stderr) = validate(&p);
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains("warning:")
            && stderr.contains("budget.event_latency_ms")
            && stderr.contains("rpi5"),
        "{stderr}"
    );
}

#[test]
fn shipped_configs_validate() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("firmware-config");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            let (ok, stderr) = validate(&p);
            assert!(ok, "{}: {stderr}", p.display());
            // A shipped profile meets what its board was measured to deliver
            // (src/config/boards.rs), except the two the per-core emulation of issue 36
            // showed missing it (docs/boards.md): the Pi 5's budget (p95 5.9 s against
            // 2.5 s) and the Pi 4's keep-up and budget (p95 73 s). Those warnings are
            // what a user of the profile should see until a profile meets its board;
            // nothing else may warn.
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let expected: &[&str] = match name.as_str() {
                "rpi5" => &["budget.event_latency_ms = 2500 is below"],
                "rpi4" => &["did not keep up", "budget.event_latency_ms = 3000 is below"],
                _ => &[],
            };
            let warnings: Vec<&str> = stderr
                .lines()
                .filter(|l| l.starts_with("warning:"))
                .collect();
            assert_eq!(warnings.len(), expected.len(), "{}: {stderr}", p.display());
            for (w, e) in warnings.iter().zip(expected) {
                assert!(w.contains(e), "{}: expected {e:?} in {w}", p.display());
            }
            n += 1;
        }
    }
    assert!(n > 0);
}
