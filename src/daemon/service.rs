//! systemd integration (`Type=notify`): readiness, status, reload and stop notifications,
//! and a watchdog that only pings while the pipeline makes progress.
//!
//! Everything here is a no-op when `NOTIFY_SOCKET` is unset (a terminal, a test, a
//! container without systemd), so callers never branch on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sd_notify::NotifyState;

use crate::common::counters::Counters;
pub use crate::common::counters::{now_ms, Heartbeat};

fn send(states: &[NotifyState]) {
    if let Err(e) = sd_notify::notify(states) {
        log::debug!("sd_notify failed: {e}");
    }
}

/// Models are loaded and the stream runs. The daemon names itself the main process, in
/// case a unit starts it behind a shell that does not `exec` it.
pub fn ready(status: &str) {
    send(&[
        NotifyState::MainPid(std::process::id()),
        NotifyState::Ready,
        NotifyState::Status(status),
    ]);
}

pub fn status(status: &str) {
    send(&[NotifyState::Status(status)]);
}

/// systemd >= 253 requires the monotonic timestamp with `RELOADING=1`.
pub fn reloading() {
    let mut states = vec![NotifyState::Reloading];
    if let Ok(t) = NotifyState::monotonic_usec_now() {
        states.push(t);
    }
    states.push(NotifyState::Status("reloading configuration"));
    send(&states);
}

pub fn stopping() {
    send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
}

/// Keeps the service status (`systemctl status`, `STATUS=`) saying what an operator must
/// know while the stream runs: the events file cannot be written. Polls the counters
/// (a flag read, no lock) and sends a status only when that changes; nothing runs
/// without `NOTIFY_SOCKET`.
pub struct StatusWatch {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often [`StatusWatch`] looks: an outage shows within this (the events file is
/// retried with every event, so it cannot change much faster).
const STATUS_POLL: Duration = Duration::from_millis(200);

impl StatusWatch {
    /// `running` is the status sent with readiness, restored when the trouble ends.
    pub fn start(counters: Arc<Counters>, running: String) -> Option<Self> {
        std::env::var_os("NOTIFY_SOCKET")?;
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("status".into())
            .spawn(move || {
                let mut failing = false;
                while !d.load(Ordering::Relaxed) {
                    let now = counters.events_file_failing.load(Ordering::Relaxed);
                    if now != failing {
                        failing = now;
                        if failing {
                            status(&format!(
                                "{running}; events file: cannot write, lines wait and are retried with every event"
                            ));
                        } else {
                            status(&running);
                        }
                    }
                    std::thread::sleep(STATUS_POLL);
                }
            })
            .map_err(|e| log::warn!("cannot start the status thread: {e}"))
            .ok()?;
        Some(Self {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `WatchdogSec=` from the environment. `WATCHDOG_PID` is not checked: behind a shell
/// pipeline it names the shell, and [`ready`] makes this process the main one.
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    (usec > 0).then(|| Duration::from_micros(usec))
}

/// Pings `WATCHDOG=1` every half interval while the pipeline is healthy. When it is
/// stuck the pings stop and systemd restarts the service (`Restart=on-failure`).
pub struct Watchdog {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    pub fn start(counters: Arc<Counters>) -> Option<Self> {
        let interval = watchdog_interval()?;
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                let half = interval / 2;
                let mut next = Instant::now();
                let mut warned = false;
                while !d.load(Ordering::Relaxed) {
                    if Instant::now() >= next {
                        next += half;
                        let hb = &counters.heartbeat;
                        match hb.stalled(half, interval.max(Duration::from_secs(20))) {
                            None => {
                                warned = false;
                                send(&[NotifyState::Watchdog]);
                            }
                            Some(why) if !warned => {
                                warned = true;
                                log::error!("pipeline stalled ({why}): withholding watchdog pings so systemd restarts the service");
                            }
                            Some(_) => {}
                        }
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
            })
            .ok()?;
        log::info!("systemd watchdog every {:?}", interval / 2);
        Some(Self {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_detection_names_the_stuck_stage() {
        let h = Heartbeat::default();
        assert_eq!(
            h.stalled(Duration::ZERO, Duration::ZERO),
            None,
            "no beat yet"
        );
        h.beat();
        std::thread::sleep(Duration::from_millis(20));
        let why = h
            .stalled(Duration::from_millis(5), Duration::from_secs(60))
            .unwrap();
        assert!(why.contains("segmenter"), "{why}");
        h.beat();
        assert_eq!(
            h.stalled(Duration::from_secs(60), Duration::from_secs(60)),
            None
        );
        h.analysing(true);
        std::thread::sleep(Duration::from_millis(20));
        let why = h
            .stalled(Duration::from_secs(60), Duration::from_millis(5))
            .unwrap();
        assert!(why.contains("analysis"), "{why}");
        h.analysing(false);
        assert_eq!(
            h.stalled(Duration::from_secs(60), Duration::from_millis(5)),
            None
        );
    }

    #[test]
    fn notifications_are_noops_without_systemd() {
        // NOTIFY_SOCKET is unset under cargo test.
        ready("test");
        reloading();
        stopping();
    }
}
