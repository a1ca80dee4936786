//! A real mosquitto broker on loopback for integration tests, and a `mosquitto_sub`
//! subscriber whose received messages the test can read back.
//!
//! Only std, tempfile and libc. The Debian package starts no service; each `Broker` runs
//! its own `/usr/sbin/mosquitto -c <tempconf>` on a free port with persistence in a
//! temp dir, so a `restart()` keeps retained messages and persistent sessions.
//!
//! mosquitto cannot bind port 0 and say which port it got, so the port is picked here
//! and released before mosquitto binds it; when another process takes it in between,
//! mosquitto exits at start and the broker is started again on another port.
#![allow(dead_code)]

use std::fs;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MOSQUITTO: &str = "/usr/sbin/mosquitto";
const READY_TIMEOUT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(20);

pub struct Broker {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
}

impl Broker {
    /// Starts a broker, or prints a SKIP line and returns None when mosquitto is missing.
    pub fn start() -> Option<Broker> {
        Self::start_with("")
    }

    /// Like `start`, with `listener_conf` lines (e.g. TLS `cafile`/`certfile`/`keyfile`,
    /// or `allow_anonymous false` + `password_file`) applied after the defaults, so they
    /// override them.
    pub fn start_with(listener_conf: &str) -> Option<Broker> {
        if !Path::new(MOSQUITTO).exists() {
            println!("SKIP: mosquitto not installed (scripts/install-system-deps.sh installs it)");
            return None;
        }
        let dir = tempfile::Builder::new()
            .prefix("mosquitto-test")
            .tempdir()
            .expect("create temp dir for mosquitto");
        let mut b = Broker {
            child: None,
            port: 0,
            dir,
        };
        const ATTEMPTS: usize = 5;
        for attempt in 1..=ATTEMPTS {
            b.port = free_port();
            b.write_conf(listener_conf);
            match b.try_spawn() {
                Ok(()) => return Some(b),
                Err(e) if attempt < ATTEMPTS => {
                    println!(
                        "mosquitto did not start on port {} ({e}); another port",
                        b.port
                    )
                }
                Err(e) => panic!("{e}"),
            }
        }
        unreachable!("the last attempt panics")
    }

    fn write_conf(&self, listener_conf: &str) {
        let port = self.port;
        let conf = format!(
            "listener {port} 127.0.0.1\n\
             allow_anonymous true\n\
             {listener_conf}\n\
             persistence true\n\
             persistence_location {dir}/\n\
             log_dest file {dir}/mosquitto.log\n\
             log_type all\n\
             # The default (1000) makes mosquitto drop messages for a persistent\n\
             # subscriber that reconnects later than the publisher after a restart.\n\
             max_queued_messages 100000\n\
             # As root, mosquitto would otherwise switch to user `mosquitto`, who cannot\n\
             # write our temp dir. Ignored when not running as root.\n\
             user root\n",
            dir = self.dir.path().display()
        );
        fs::write(self.dir.path().join("mosquitto.conf"), conf).expect("write mosquitto.conf");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// The broker's own log so far (for assertion messages).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("mosquitto.log")).unwrap_or_default()
    }

    /// SIGTERM and wait for exit, so the persistence file is written. SIGKILL after 10 s.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match child.try_wait() {
                Ok(Some(_)) => break,
                Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    break;
                }
            }
        }
    }

    /// Stops (if running) and starts again on the same port with the same persistence.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Starts it again after `stop()`.
    pub fn start_again(&mut self) {
        if self.child.is_none() {
            self.spawn();
        }
    }

    /// Start mosquitto again on the broker's port (a restart keeps the port).
    fn spawn(&mut self) {
        if let Err(e) = self.try_spawn() {
            panic!("{e}");
        }
    }

    /// Start mosquitto and wait until it accepts connections; an error when it exits at
    /// start (e.g. its port was taken), a panic when it does not accept in time.
    fn try_spawn(&mut self) -> Result<(), String> {
        let conf = self.dir.path().join("mosquitto.conf");
        let mut child = Command::new(MOSQUITTO)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mosquitto");
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!(
                    "mosquitto exited at start ({status}) on port {}; log:\n{}",
                    self.port,
                    self.log()
                ));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "mosquitto not accepting on port {} after {READY_TIMEOUT:?}; log:\n{}",
                    self.port,
                    self.log()
                );
            }
            std::thread::sleep(POLL);
        }
        self.child = Some(child);
        Ok(())
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A port nothing listens on right now (the OS picks it; released before mosquitto binds).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind a free loopback port")
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on the pid of a child we have not reaped yet.
    unsafe {
        libc::kill(child.id() as libc::pid_t, sig);
    }
}

/// `mosquitto_sub -q 1 -c -i <id> -v` writing to a file. The persistent session (`-c`)
/// makes the broker queue messages for it while it is disconnected, and mosquitto_sub
/// reconnects by itself after a broker restart (checked with mosquitto 2.0.11).
pub struct Subscriber {
    child: Child,
    out: PathBuf,
    probe_topic: String,
    _dir: tempfile::TempDir,
}

impl Subscriber {
    /// Subscribes `filter` and returns once the subscription is live (a probe message on
    /// a private topic has come back), so nothing published afterwards can be missed.
    pub fn start(port: u16, client_id: &str, filter: &str) -> Subscriber {
        let dir = tempfile::tempdir().expect("temp dir for subscriber");
        let out = dir.path().join("sub.out");
        let probe_topic = format!("sarcasmd-test-probe/{client_id}");
        let stdout = fs::File::create(&out).expect("create subscriber output");
        let child = Command::new("mosquitto_sub")
            .args(["-h", "127.0.0.1", "-p", &port.to_string()])
            .args(["-q", "1", "-c", "-i", client_id, "-v"])
            .args(["-t", filter, "-t", &probe_topic])
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .expect("mosquitto_sub not found: run scripts/install-system-deps.sh");
        let s = Subscriber {
            child,
            out,
            probe_topic,
            _dir: dir,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let _ = Command::new("mosquitto_pub")
                .args(["-h", "127.0.0.1", "-p", &port.to_string()])
                .args(["-q", "1", "-t", &s.probe_topic, "-m", "ready"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            if s.wait_raw(
                |l| l.iter().any(|(t, _)| *t == s.probe_topic),
                Duration::from_millis(500),
            ) {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "mosquitto_sub on port {port} never received its probe message"
            );
        }
    }

    /// (topic, payload) in arrival order, the probe messages left out.
    pub fn lines(&self) -> Vec<(String, String)> {
        self.raw_lines()
            .into_iter()
            .filter(|(t, _)| *t != self.probe_topic)
            .collect()
    }

    /// Payloads received on exactly `topic`.
    pub fn payloads(&self, topic: &str) -> Vec<String> {
        self.lines()
            .into_iter()
            .filter(|(t, _)| t == topic)
            .map(|(_, p)| p)
            .collect()
    }

    /// Polls `lines()` until `pred` holds; false on timeout.
    pub fn wait_for(&self, pred: impl Fn(&[(String, String)]) -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(&self.lines()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }

    fn wait_raw(&self, pred: impl Fn(&[(String, String)]) -> bool, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if pred(&self.raw_lines()) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(POLL);
        }
    }

    fn raw_lines(&self) -> Vec<(String, String)> {
        let text = fs::read_to_string(&self.out).unwrap_or_default();
        // Only complete lines: the last one may still be being written.
        let complete = match text.rfind('\n') {
            Some(i) => &text[..i],
            None => return Vec::new(),
        };
        complete
            .lines()
            .map(|l| match l.split_once(' ') {
                Some((t, p)) => (t.to_string(), p.to_string()),
                // `-v` prints an empty payload as "topic " or just "topic".
                None => (l.to_string(), String::new()),
            })
            .collect()
    }
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
