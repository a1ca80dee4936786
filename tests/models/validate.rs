//! `sarcasmd validate` refuses what `run` would refuse (issue 25, classes 5 and 6): the
//! unit's `ExecStartPre` runs it, so a config it passes must start. Secrets, outputs,
//! models and heads are checked on this machine; paths that are not regular files are
//! refused by kind and never read without bound. Each case is checked on `validate` and
//! on `replay --config` (the start), with the same exit code and field.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::{bin, wait_exit};

fn validate(cfg: &Path) -> Output {
    Command::new(bin())
        .arg("validate")
        .arg(cfg)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn validate_refuses_what_the_start_would_refuse() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let short_token = dir.join("short-token");
    std::fs::write(&short_token, "abc\n").unwrap();
    let empty_password = dir.join("empty-password");
    std::fs::write(&empty_password, "").unwrap();
    let events_dir = dir.join("events-dir");
    std::fs::create_dir(&events_dir).unwrap();
    let d_ = dir.display();
    let cases: Vec<(&str, String, i32, &str)> = vec![
        (
            "token file missing",
            format!("[http]\nenabled = true\ntoken_file = \"{d_}/missing-token\"\n"),
            2,
            "http.token_file",
        ),
        (
            "token file too short",
            format!("[http]\nenabled = true\ntoken_file = \"{}\"\n", short_token.display()),
            2,
            "at least 16 characters",
        ),
        (
            "password file empty",
            format!(
                "[mqtt]\nenabled = true\nhost = \"127.0.0.1\"\nusername = \"room\"\npassword_file = \"{}\"\n",
                empty_password.display()
            ),
            2,
            "mqtt.password_file",
        ),
        (
            "password file missing",
            format!(
                "[mqtt]\nenabled = true\nhost = \"127.0.0.1\"\nusername = \"room\"\npassword_file = \"{d_}/missing-password\"\n"
            ),
            2,
            "mqtt.password_file",
        ),
        (
            // Issue 34, defect 9: once sent with a wrapped 16-bit length prefix.
            "MQTT user name longer than an MQTT string",
            format!(
                "[mqtt]\nenabled = true\nhost = \"127.0.0.1\"\nusername = \"{}\"\n",
                "u".repeat(70_000)
            ),
            2,
            "mqtt.username",
        ),
        (
            // Issue 34, defect 7's class: a PEM file is read by kind, never without bound.
            "MQTT CA file is a device",
            "[mqtt]\nenabled = true\nhost = \"127.0.0.1\"\nport = 8883\n\n[mqtt.tls]\nca_file = \"/dev/zero\"\n"
                .to_string(),
            2,
            "is a device",
        ),
        (
            "events path is a directory",
            format!("[output]\nevents = \"{}\"\n", events_dir.display()),
            2,
            "is a directory",
        ),

        (
            "events and captions are one file",
            format!("[output]\nevents = \"{d_}/out.txt\"\n\n[captions]\nvtt = \"{d_}/out.txt\"\n"),
            2,
            "same file as output.events",
        ),
        (
            "captions to a directory",
            format!("[captions]\nvtt = \"{}\"\n", events_dir.display()),
            2,
            "is a directory",
        ),
        (
            "models missing",
            format!("[models]\ndir = \"{d_}/no-models\"\n"),
            3,
            "models.dir",
        ),
        (
            "heads missing",
            format!("[fusion]\nheads_dir = \"{d_}\"\n"),
            3,
            "fusion.heads_dir",
        ),
    ];
    let wav = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/meeting.wav");
    for (what, text, code, says) in cases {
        let cfg = dir.join("room.toml");
        std::fs::write(&cfg, &text).unwrap();
        let out = validate(&cfg);
        assert_eq!(
            out.status.code(),
            Some(code),
            "validate, {what}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(says),
            "validate, {what}: {}",
            stderr(&out)
        );
        // The start refuses it the same way, before any audio is read.
        let out = Command::new(bin())
            .arg("replay")
            .arg(&wav)
            .arg("--config")
            .arg(&cfg)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "replay, {what}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(says),
            "replay, {what}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "replay, {what}: events were written");
    }
    // An events file in a missing directory: refused by validate; the start waits for
    // the directory (a late mount; tests/models/faults.rs) instead of refusing.
    let cfg = dir.join("late.toml");
    std::fs::write(
        &cfg,
        format!("[output]\nevents = \"{d_}/no/such/dir/events.jsonl\"\n"),
    )
    .unwrap();
    let out = validate(&cfg);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("does not exist"), "{}", stderr(&out));
    // A config this machine can run passes.
    std::fs::write(
        dir.join("ok.toml"),
        format!(
            "[output]\nevents = \"{d_}/events.jsonl\"\n\n[captions]\nvtt = \"{d_}/live.vtt\"\n"
        ),
    )
    .unwrap();
    let out = validate(&dir.join("ok.toml"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !dir.join("events.jsonl").exists(),
        "validate created a file"
    );
}

#[test]
fn paths_that_are_not_regular_files_are_refused_by_kind_at_once() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("fifo");
    mkfifo(&fifo);
    let dev_zero = Path::new("/dev/zero");
    for (args, says) in [
        (
            vec!["validate".into(), dev_zero.to_path_buf()],
            "is a device",
        ),
        (
            vec!["validate".into(), d.path().to_path_buf()],
            "is a directory",
        ),
        (vec!["validate".into(), fifo.clone()], "pipe"),
        (vec!["eval".into(), dev_zero.to_path_buf()], "is a device"),
        (vec!["eval".into(), fifo.clone()], "pipe"),
    ] {
        let mut child = Command::new(bin())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Before the fix these grew memory without bound or blocked on the FIFO.
        if wait_exit(&mut child, Duration::from_secs(30)).is_none() {
            let _ = child.kill();
            panic!("{args:?} still running after 30 s");
        }
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("No such file"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// One round of fixes, not one per mistake (issue 27, item 2): every invalid value of a
/// file is named, and then every file it names that this machine cannot use.
/// Issue 25, classes 1 and 3: the bounds that keep memory and file descriptors finite
/// are enforced on the way in (a caption file is served whole to each overlay client; a
/// connection cap above the unit's LimitNOFILE would let idle clients exhaust it).
#[test]
fn resource_bounds_have_upper_limits() {
    let d = tempfile::tempdir().unwrap();
    let cfg = d.path().join("big.toml");
    std::fs::write(
        &cfg,
        "[captions]\nrotate_mb = 100000\n[http]\nenabled = true\nmax_connections = 100000\n",
    )
    .unwrap();
    let out = validate(&cfg);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for (field, bound) in [
        ("captions.rotate_mb", "1..=256"),
        ("http.max_connections", "2..=512"),
    ] {
        assert!(
            err.contains(&format!("`{field}`")) && err.contains(bound),
            "{field} {bound}: {err}"
        );
    }
}

#[test]
fn validate_names_every_problem_not_only_the_first() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let values = dir.join("values.toml");
    std::fs::write(
        &values,
        "[segment]\nmax_utterance_ms = 100000\n[fusion]\nprior = 2.0\n[captions]\nrotate_mb = 0\n",
    )
    .unwrap();
    let out = validate(&values);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("3 invalid values"), "{err}");
    for field in [
        "segment.max_utterance_ms",
        "fusion.prior",
        "captions.rotate_mb",
    ] {
        assert!(
            err.contains(&format!("`{field}`")),
            "{field} missing: {err}"
        );
    }

    let files = dir.join("files.toml");
    std::fs::write(
        &files,
        format!(
            "[output]\nevents = \"{}\"\n[http]\nenabled = true\ntoken_file = \"{}/missing-token\"\n",
            dir.display(),
            dir.display()
        ),
    )
    .unwrap();
    let out = validate(&files);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("2 problems"), "{err}");
    for field in ["output.events", "http.token_file"] {
        assert!(
            err.contains(&format!("`{field}`")),
            "{field} missing: {err}"
        );
    }
}

/// Issue 34, defect 3: `output.events` naming the input WAV or the config file passed
/// validate, and the start's torn-line repair then cut 55 KB off the recording. One rule
/// for every output, on validate and on the start alike: never a file the daemon reads.
#[test]
fn an_output_may_not_be_an_input_or_the_config() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let wav = dir.join("in.wav");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/meeting.wav"),
        &wav,
    )
    .unwrap();
    let original = std::fs::read(&wav).unwrap();
    let cfg = dir.join("room.toml");
    let link = dir.join("link.wav");
    std::os::unix::fs::symlink(&wav, &link).unwrap();
    for (what, events, says) in [
        ("the input WAV", wav.clone(), "same file as source.path"),
        (
            "the input WAV by a link",
            link.clone(),
            "same file as source.path",
        ),
        (
            "the config file",
            cfg.clone(),
            "same file as the config file",
        ),
    ] {
        let text = format!(
            "[source]\nkind = \"wav\"\npath = \"{}\"\n[output]\nevents = \"{}\"\n",
            wav.display(),
            events.display()
        );
        std::fs::write(&cfg, &text).unwrap();
        let out = validate(&cfg);
        assert_eq!(
            out.status.code(),
            Some(2),
            "validate, {what}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains(says),
            "validate, {what}: {}",
            stderr(&out)
        );
        let out = Command::new(bin())
            .args(["run", "--config"])
            .arg(&cfg)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "run, {what}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "run, {what}: {}", stderr(&out));
        assert_eq!(std::fs::read(&cfg).unwrap(), text.as_bytes(), "{what}");
    }
    // replay's --events is an output like any other.
    let out = Command::new(bin())
        .arg("replay")
        .arg(&wav)
        .arg("--events")
        .arg(&link)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(&wav).unwrap(),
        original,
        "the WAV was touched"
    );
    // Two outputs in one file, through a relative path.
    std::fs::write(
        &cfg,
        format!(
            "[output]\nevents = \"{}/ev.jsonl\"\n[captions]\nvtt = \"{}/x/../ev.jsonl\"\n",
            dir.display(),
            dir.display()
        ),
    )
    .unwrap();
    std::fs::create_dir(dir.join("x")).unwrap();
    let out = validate(&cfg);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("same file as output.events"),
        "{}",
        stderr(&out)
    );
}

/// Issue 34, defect 8: with `models.skip_checksums` a Whisper file of the right size but
/// corrupt inside passed validate and aborted replay inside whisper.cpp (SIGABRT). Its
/// layout is walked before native code sees it: exit 3 from both, with what is wrong.
#[test]
fn a_corrupt_whisper_file_of_the_right_size_is_refused_without_checksums() {
    let models = sarcasmd::common::models::model_dir(None);
    let tiny = models.join("whisper/ggml-tiny.en-q8_0.bin");
    if !tiny.exists() {
        println!("SKIP: no models in {}", models.display());
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let copy = d.path().join("models");
    std::fs::create_dir_all(copy.join("whisper")).unwrap();
    for sub in ["vad", "text", "vision"] {
        std::os::unix::fs::symlink(models.join(sub), copy.join(sub)).unwrap();
    }
    let mut bytes = std::fs::read(&tiny).unwrap();
    bytes[48..4144].fill(0xff);
    std::fs::write(copy.join("whisper/ggml-tiny.en-q8_0.bin"), &bytes).unwrap();
    let cfg = d.path().join("skip.toml");
    std::fs::write(
        &cfg,
        format!(
            "[models]\ndir = \"{}\"\nskip_checksums = true\n",
            copy.display()
        ),
    )
    .unwrap();
    let out = validate(&cfg);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("mel filters"), "{}", stderr(&out));
    let wav = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/meeting.wav");
    let out = Command::new(bin())
        .arg("replay")
        .arg(&wav)
        .arg("--config")
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a whisper.cpp ggml model"),
        "{}",
        stderr(&out)
    );
    // Without skip_checksums, validate verifies the checksum as the start does.
    std::fs::write(&cfg, format!("[models]\ndir = \"{}\"\n", copy.display())).unwrap();
    let out = validate(&cfg);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("SHA-256"), "{}", stderr(&out));
}
