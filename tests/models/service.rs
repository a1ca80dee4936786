//! `sarcasmd run` as systemd runs it (`Type=notify`): readiness, watchdog pings, SIGHUP
//! reload that validates first, SIGTERM that flushes and exits 0. The notify socket is a
//! real unix datagram socket in a temp dir, read the way systemd reads it.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::notify::Notify;
use crate::common::*;

fn events(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn notify_watchdog_reload_and_sigterm_as_systemd_sees_them() {
    let d = tempfile::tempdir().unwrap();
    let mut notify = Notify::bind(d.path());

    let events_path = d.path().join("events.jsonl");
    let cfg_path = d.path().join("room.toml");
    let base = format!(
        "[source]\nkind = \"stdin\"\nlive = true\n\n[output]\nevents = \"{}\"\n",
        events_path.display()
    );
    std::fs::write(&cfg_path, &base).unwrap();

    let mut child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg_path)
        .env("NOTIFY_SOCKET", notify.path())
        .env("WATCHDOG_USEC", "2000000")
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let stderr = child.stderr.take().unwrap();
    let log = Arc::new(std::sync::Mutex::new(String::new()));
    let log_reader = {
        let log = log.clone();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let mut l = log.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        })
    };

    // A microphone: speech and pauses, looped, delivered at real-time pace.
    let speech = compose(
        0.3,
        &[
            ("Oh great, the projector is broken again.", "en-us"),
            ("Let us move on to the budget.", "en-us"),
        ],
        1.0,
    );
    let pcm = to_s16le(&speech.samples);
    let feeding = Arc::new(AtomicBool::new(true));
    let mut stdin = child.stdin.take().unwrap();
    let feeder = {
        let feeding = feeding.clone();
        std::thread::spawn(move || {
            let chunk = 3200; // 100 ms of s16le at 16 kHz
            let t0 = Instant::now();
            let mut sent = 0usize;
            'outer: while feeding.load(Ordering::Relaxed) {
                for c in pcm.chunks(chunk) {
                    if !feeding.load(Ordering::Relaxed) || stdin.write_all(c).is_err() {
                        break 'outer;
                    }
                    sent += c.len();
                    let due = Duration::from_secs_f64(sent as f64 / 32_000.0);
                    if let Some(w) = due.checked_sub(t0.elapsed()) {
                        std::thread::sleep(w);
                    }
                }
            }
        })
    };

    let ready = notify.wait_for("READY=1", Duration::from_secs(60));
    assert!(ready.contains(&format!("MAINPID={pid}")), "{ready}");
    wait_until("a first event", Duration::from_secs(60), || {
        !events(&events_path).is_empty()
    });
    notify.wait_for("WATCHDOG=1", Duration::from_secs(5));

    // A broken config: rejected with its position, the stream keeps running.
    std::fs::write(&cfg_path, format!("{base}\n[fusion]\nthreshold = 7.0\n")).unwrap();
    notify.drain();
    let n_before = notify.seen.len();
    // SAFETY: kill(2) on the daemon child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    notify.wait_for("RELOADING=1", Duration::from_secs(5));
    notify.wait_for_since(n_before, "reload rejected", Duration::from_secs(5));
    assert!(
        child.try_wait().unwrap().is_none(),
        "daemon died on a bad reload"
    );
    wait_until("the rejection in the log", Duration::from_secs(5), || {
        let l = log.lock().unwrap();
        l.contains("reload rejected") && l.contains("fusion.threshold")
    });
    let count = events(&events_path).len();
    wait_until(
        "events to continue after a rejected reload",
        Duration::from_secs(30),
        || events(&events_path).len() > count,
    );

    // A config that parses but names models this machine does not have: rejected by
    // the preflight before the stream is touched (issue 25, class 9).
    std::fs::write(
        &cfg_path,
        format!(
            "{base}\n[models]\ndir = \"{}\"\n",
            d.path().join("no-models").display()
        ),
    )
    .unwrap();
    notify.drain();
    let n_before = notify.seen.len();
    // SAFETY: kill(2) on the daemon child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    // Synchronise on the state systemd sees (the unit's status), then check that the
    // log, which the journal keeps, names the field (read from the pipe by a thread).
    notify.wait_for_since(n_before, "reload rejected", Duration::from_secs(10));
    wait_until(
        "the preflight rejection in the log",
        Duration::from_secs(5),
        || {
            let l = log.lock().unwrap();
            l.matches("reload rejected").count() >= 2 && l.contains("models.dir")
        },
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "daemon died on a reload without models"
    );

    // A config that passes every check and still cannot start (its port is taken):
    // the previous config starts again and the failure is reported.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    std::fs::write(
        &cfg_path,
        format!("{base}\n[http]\nenabled = true\nbind = \"127.0.0.1:{port}\"\n"),
    )
    .unwrap();
    notify.drain();
    let n_before = notify.seen.len();
    // SAFETY: kill(2) on the daemon child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    // Synchronise on the status systemd sees (the previous config running again, with
    // the failure noted), then check the log says so too.
    notify.wait_for_since(n_before, "reload failed", Duration::from_secs(60));
    wait_until(
        "the failed reload in the log",
        Duration::from_secs(5),
        || {
            log.lock()
                .unwrap()
                .contains("reload failed, starting the previous config again")
        },
    );
    let count = events(&events_path).len();
    wait_until(
        "events to continue on the previous config after a failed reload",
        Duration::from_secs(60),
        || events(&events_path).len() > count,
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "daemon died on a reload that could not start"
    );
    drop(taken);

    // A valid change is applied: later events carry the new threshold.
    std::fs::write(&cfg_path, format!("{base}\n[fusion]\nthreshold = 0.93\n")).unwrap();
    // SAFETY: kill(2) on the daemon child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGHUP) };
    wait_until(
        "an event with the reloaded threshold",
        Duration::from_secs(60),
        || {
            events(&events_path)
                .iter()
                .any(|e| (e["threshold"].as_f64().unwrap() - 0.93).abs() < 1e-6)
        },
    );
    notify.drain();
    let watchdog_pings = notify
        .seen
        .iter()
        .filter(|m| m.contains("WATCHDOG=1"))
        .count();
    assert!(watchdog_pings >= 2, "{:?}", notify.seen);

    // SIGTERM while people are still talking: exit 0 quickly, every event whole.
    let t_term = Instant::now();
    // SAFETY: kill(2) on the daemon child this test started and has not reaped.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            t_term.elapsed() < Duration::from_secs(10),
            "still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let exit_ms = t_term.elapsed().as_millis();
    feeding.store(false, Ordering::Relaxed);
    let _ = feeder.join();
    let _ = log_reader.join();
    println!("SIGTERM -> exit: {exit_ms} ms");
    assert_eq!(status.code(), Some(0), "{}", log.lock().unwrap());
    notify.wait_for("STOPPING=1", Duration::from_secs(1));
    // Every line is a whole event (the reader would choke on a torn one).
    assert!(events(&events_path).len() >= 3);
}
