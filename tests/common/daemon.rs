//! The daemon two ways: held in-process on a WAV file ([`hold_wav`], what most tests
//! use: readiness and the bound port as state), and the binary as a user starts it
//! (`sarcasmd replay ... --config`, [`Daemon`]) in a temp dir, for tests of the process
//! itself (exit codes, signals, what it listens on, its log).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sarcasmd::config::SourceConfig;
use sarcasmd::daemon::builder::{DaemonHandle, Ready};

use super::{bin, compose, hold, parse_config, write_wav_i16, RATE};

/// A daemon held in-process: the config `toml` with `wav` as its source, events to
/// `dir/TAG.jsonl`; returns once the stream runs. Paths in `toml` must be absolute (the
/// test's working directory is the source tree).
pub fn hold_wav(
    dir: &Path,
    toml: &str,
    wav: &Path,
    realtime: bool,
    tag: &str,
) -> (DaemonHandle, Ready) {
    let mut cfg = parse_config(toml);
    cfg.source = SourceConfig::Wav {
        path: wav.to_path_buf(),
        realtime,
    };
    cfg.output.events = dir.join(format!("{tag}.jsonl")).display().to_string();
    hold(sarcasmd::daemon::builder::Daemon::builder(cfg))
}

/// One HTTP/1.1 request to the daemon's own listener on loopback (`Connection: close`):
/// status, head and body. `authorization` is the whole header value.
pub fn http_request(
    port: u16,
    method: &str,
    path: &str,
    authorization: Option<&str>,
    body: Option<&str>,
) -> (u16, String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let auth = authorization
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let body_head = body
        .map(|b| {
            format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                b.len()
            )
        })
        .unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}{body_head}Connection: close\r\n\r\n{}",
        body.unwrap_or("")
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

/// The port of a held daemon's HTTP listener.
pub fn http_port(ready: &Ready) -> u16 {
    ready.http_addr.expect("[http] enabled").port()
}

/// Four sentences with pauses: about 16 s of espeak-ng speech.
pub fn meeting(dir: &Path, name: &str, lines: &[&str]) -> PathBuf {
    let parts: Vec<(&str, &str)> = lines.iter().map(|l| (*l, "en-us")).collect();
    let c = compose(0.5, &parts, 1.2);
    let wav = dir.join(name);
    write_wav_i16(&wav, &c.samples, RATE);
    wav
}

pub const LINES_A: &[&str] = &[
    "Good morning everyone, the quarterly numbers are in.",
    "Oh great, another meeting that could have been an email.",
    "The server crashed again during the demo.",
    "Wow, what a surprise, I am totally shocked.",
];
pub const LINES_B: &[&str] = &[
    "Welcome back after the break.",
    "Sure, because printers always work on Mondays.",
];

pub struct Daemon {
    pub child: Child,
    pub stderr: PathBuf,
}

impl Daemon {
    /// `sarcasmd replay WAV --config CFG --events EVENTS` with the temp dir as cwd.
    pub fn start(dir: &Path, cfg: &str, wav: &Path, realtime: bool, tag: &str) -> Daemon {
        let events = dir.join(format!("{tag}.jsonl"));
        Self::start_events(dir, cfg, wav, realtime, tag, &events)
    }

    /// Like `start`, with the events going to `events`.
    pub fn start_events(
        dir: &Path,
        cfg: &str,
        wav: &Path,
        realtime: bool,
        tag: &str,
        events: &Path,
    ) -> Daemon {
        Self::start_notifying(dir, cfg, wav, realtime, tag, events, None)
    }

    /// Like `start_events`, with `NOTIFY_SOCKET` set to `notify` (a
    /// [`super::notify::Notify`]'s path) so a test waits on the state systemd would see.
    pub fn start_notifying(
        dir: &Path,
        cfg: &str,
        wav: &Path,
        realtime: bool,
        tag: &str,
        events: &Path,
        notify: Option<&Path>,
    ) -> Daemon {
        let cfg_path = dir.join(format!("{tag}.toml"));
        std::fs::write(&cfg_path, cfg).unwrap();
        let stderr = dir.join(format!("{tag}.stderr"));
        let mut cmd = Command::new(bin());
        cmd.current_dir(dir)
            .arg("replay")
            .arg(wav)
            .arg("--config")
            .arg(&cfg_path)
            .arg("--events")
            .arg(events)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap());
        if realtime {
            cmd.arg("--realtime");
        }
        if let Some(n) = notify {
            cmd.env("NOTIFY_SOCKET", n);
        }
        Daemon {
            child: cmd.spawn().expect("start sarcasmd"),
            stderr,
        }
    }

    pub fn wait(mut self, timeout: Duration) -> (i32, String) {
        let t0 = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                return (st.code().unwrap_or(-1), log);
            }
            if t0.elapsed() > timeout {
                let _ = self.child.kill();
                let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                panic!("daemon still running after {timeout:?}; stderr:\n{log}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn events(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

pub fn finals(path: &Path) -> Vec<serde_json::Value> {
    events(path)
        .into_iter()
        .filter(|e| e["type"] == "utterance")
        .collect()
}
