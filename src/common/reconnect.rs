//! What the reconnecting wrappers share: an exponential backoff, a clock that tests can
//! drive, and the outage bookkeeping with its log lines (one line when a device is lost,
//! retries logged at a bounded rate, one line when it is back).
//!
//! Used by [`crate::sources::audio::ReconnectingSource`] (microphones) and
//! [`crate::sources::video::ReconnectingFrameSource`] (cameras).

use std::time::{Duration, Instant};

/// How a lost device is retried.
#[derive(Debug, Clone, PartialEq)]
pub struct BackoffPolicy {
    /// Wait before the first attempt to reopen.
    pub initial: Duration,
    /// The wait doubles after each failed attempt, up to this.
    pub max: Duration,
    /// While attempts keep failing with the same error, at most one warning per this
    /// (each attempt is still logged at debug level).
    pub log_every: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(500),
            max: Duration::from_secs(30),
            log_every: Duration::from_secs(60),
        }
    }
}

/// Exponential backoff: `initial`, `2 * initial`, ... capped at `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
    attempts: u32,
}

impl Backoff {
    pub fn new(policy: &BackoffPolicy) -> Self {
        // A zero initial wait would retry in a busy loop; 1 ms is the floor.
        let initial = policy.initial.max(Duration::from_millis(1));
        let max = policy.max.max(initial);
        Self {
            initial,
            max,
            next: initial,
            attempts: 0,
        }
    }

    /// The wait before the next attempt; each call doubles the following one.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        self.attempts = self.attempts.saturating_add(1);
        d
    }

    /// Waits handed out since the last reset.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    pub fn reset(&mut self) {
        self.next = self.initial;
        self.attempts = 0;
    }
}

/// Time as the wrappers see it. [`SystemClock`] in the daemon; tests drive their own.
pub trait Clock: Send + Sync {
    /// Monotonic time since an arbitrary origin.
    fn now(&self) -> Duration;
    fn sleep(&self, d: Duration);
}

/// The real clock: monotonic time since construction, real sleeps.
#[derive(Debug, Clone)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    pub fn new() -> Self {
        Self {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for SystemClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
    fn sleep(&self, d: Duration) {
        std::thread::sleep(d)
    }
}

/// A finished outage, from the last delivery before it to the reopening after it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Outage {
    /// Clock time of the last delivery before the loss (or when the stream started).
    pub started: Duration,
    /// Clock time at which the device was open again.
    pub reopened: Duration,
    /// What happened first ("... device lost: ..."), for logs and gap records.
    pub reason: String,
}

enum State {
    /// Delivering. `recovering` holds an outage whose device is open again but has not
    /// delivered yet: it ends (and is reported) with the first delivery.
    Up { recovering: Option<Outage> },
    Down {
        started: Duration,
        reason: String,
        retry_at: Duration,
    },
}

/// Outage state of one device, with its log lines. Memory is constant: one state, one
/// backoff, the last logged error.
pub(crate) struct Reconnector {
    what: String,
    policy: BackoffPolicy,
    backoff: Backoff,
    state: State,
    last_data: Duration,
    last_warn: Option<Duration>,
    last_warned_error: String,
    outages: u64,
}

/// A changed error is logged as a warning again after this, even within `log_every`.
const CHANGED_ERROR_LOG_GAP: Duration = Duration::from_secs(5);

impl Reconnector {
    /// `now`: when the stream started (an outage at start is measured from here).
    pub fn new(what: String, policy: BackoffPolicy, now: Duration) -> Self {
        Self {
            what,
            backoff: Backoff::new(&policy),
            policy,
            state: State::Up { recovering: None },
            last_data: now,
            last_warn: None,
            last_warned_error: String::new(),
            outages: 0,
        }
    }

    pub fn is_up(&self) -> bool {
        matches!(self.state, State::Up { .. })
    }

    /// Outages so far (each counted once, however many attempts it took).
    pub fn outages(&self) -> u64 {
        self.outages
    }

    /// The device delivered at `now`. Returns the outage this delivery ends, once.
    pub fn delivered(&mut self, now: Duration) -> Option<Outage> {
        self.last_data = now;
        match &mut self.state {
            State::Up { recovering } => {
                let done = recovering.take();
                if done.is_some() {
                    self.backoff.reset();
                }
                done
            }
            State::Down { .. } => None,
        }
    }

    /// The device failed (open at start, read error, stall, end of stream).
    pub fn lost(&mut self, now: Duration, reason: &str) {
        let recovering = match &mut self.state {
            State::Up { recovering } => recovering.take(),
            State::Down { .. } => return,
        };
        let wait = self.backoff.next_delay();
        let (started, reason) = match recovering {
            // Reopened but failed again before delivering anything: the same outage goes
            // on, with the backoff where it was (no fast flapping between open and lost).
            Some(o) => {
                log::debug!(
                    "{}: failed again right after reopening: {reason}",
                    self.what
                );
                (o.started, o.reason)
            }
            None => {
                self.outages += 1;
                log::warn!(
                    "{}: {reason}. The daemon keeps running without it and reopens it in {:.1} s, then backing off up to {:.0} s between attempts.",
                    self.what,
                    wait.as_secs_f64(),
                    self.policy.max.as_secs_f64()
                );
                self.last_warn = Some(now);
                self.last_warned_error = reason.to_string();
                (self.last_data.min(now), reason.to_string())
            }
        };
        self.state = State::Down {
            started,
            reason,
            retry_at: now + wait,
        };
    }

    /// The first attempt to open the device failed (`error` as the opener gives it, so
    /// retries failing the same way are recognised as no news).
    pub fn open_failed_at_start(&mut self, now: Duration, error: &str) {
        self.lost(now, &format!("cannot open: {error}"));
        error.clone_into(&mut self.last_warned_error);
    }

    /// While down: how long until the next attempt is due (zero: now).
    pub fn wait_left(&self, now: Duration) -> Option<Duration> {
        match &self.state {
            State::Down { retry_at, .. } => Some(retry_at.saturating_sub(now)),
            State::Up { .. } => None,
        }
    }

    /// An attempt to reopen failed.
    pub fn open_failed(&mut self, now: Duration, error: &str) {
        let State::Down {
            started, retry_at, ..
        } = &mut self.state
        else {
            return;
        };
        let wait = self.backoff.next_delay();
        *retry_at = now + wait;
        let down_for = now.saturating_sub(*started);
        let since_warn = self
            .last_warn
            .map_or(Duration::MAX, |t| now.saturating_sub(t));
        let changed = error != self.last_warned_error;
        if since_warn >= self.policy.log_every || (changed && since_warn >= CHANGED_ERROR_LOG_GAP) {
            log::warn!(
                "{}: still unavailable after {} attempts ({:.0} s): {error}; next attempt in {:.1} s",
                self.what,
                self.backoff.attempts() - 1,
                down_for.as_secs_f64(),
                wait.as_secs_f64()
            );
            self.last_warn = Some(now);
            if changed {
                error.clone_into(&mut self.last_warned_error);
            }
        } else {
            log::debug!(
                "{}: reopen attempt failed: {error}; next in {:.1} s",
                self.what,
                wait.as_secs_f64()
            );
        }
    }

    /// The device is open again at `now`; the outage is reported with its first delivery.
    pub fn reopened(&mut self, now: Duration) {
        let State::Down {
            started, reason, ..
        } = std::mem::replace(&mut self.state, State::Up { recovering: None })
        else {
            return;
        };
        log::info!(
            "{}: back after {:.1} s ({} attempts); resuming",
            self.what,
            now.saturating_sub(started).as_secs_f64(),
            self.backoff.attempts().saturating_sub(1)
        );
        self.state = State::Up {
            recovering: Some(Outage {
                started,
                reopened: now,
                reason,
            }),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = Backoff::new(&BackoffPolicy {
            initial: ms(500),
            max: ms(30_000),
            log_every: ms(60_000),
        });
        let got: Vec<u64> = (0..10).map(|_| b.next_delay().as_millis() as u64).collect();
        assert_eq!(
            got,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000, 30000]
        );
        assert_eq!(b.attempts(), 10);
        b.reset();
        assert_eq!(b.next_delay(), ms(500));
    }

    #[test]
    fn degenerate_policies_neither_spin_nor_shrink() {
        let mut b = Backoff::new(&BackoffPolicy {
            initial: Duration::ZERO,
            max: Duration::ZERO,
            log_every: Duration::ZERO,
        });
        assert_eq!(b.next_delay(), ms(1));
        assert_eq!(b.next_delay(), ms(1));
        let mut b = Backoff::new(&BackoffPolicy {
            initial: ms(800),
            max: ms(100),
            log_every: ms(1),
        });
        assert_eq!(b.next_delay(), ms(800));
        assert_eq!(b.next_delay(), ms(800));
    }

    #[test]
    fn an_outage_runs_from_the_last_delivery_to_the_reopening() {
        let mut r = Reconnector::new("mic".into(), BackoffPolicy::default(), ms(0));
        assert_eq!(r.delivered(ms(1_000)), None);
        r.lost(ms(1_200), "device lost: unplugged");
        assert!(!r.is_up());
        assert_eq!(r.wait_left(ms(1_200)), Some(ms(500)));
        r.open_failed(ms(1_700), "no device");
        assert_eq!(r.wait_left(ms(1_700)), Some(ms(1_000)));
        r.reopened(ms(2_700));
        assert!(r.is_up());
        let o = r
            .delivered(ms(2_800))
            .expect("outage ends with the first delivery");
        assert_eq!(o.started, ms(1_000));
        assert_eq!(o.reopened, ms(2_700));
        assert_eq!(o.reason, "device lost: unplugged");
        assert_eq!(r.delivered(ms(2_900)), None, "reported once");
        assert_eq!(r.outages(), 1);
        // The backoff starts over after a successful delivery.
        r.lost(ms(3_000), "again");
        assert_eq!(r.wait_left(ms(3_000)), Some(ms(500)));
    }

    #[test]
    fn an_unchanged_error_is_repeated_at_most_once_per_log_every() {
        let _ = env_logger::builder().is_test(true).try_init();
        let mut r = Reconnector::new("mic".into(), BackoffPolicy::default(), ms(0));
        r.open_failed_at_start(ms(0), "no device");
        assert_eq!(r.last_warn, Some(ms(0)));
        for t in (500..59_000).step_by(500) {
            r.open_failed(ms(t), "no device");
        }
        assert_eq!(r.last_warn, Some(ms(0)), "no repeat within a minute");
        r.open_failed(ms(60_000), "no device");
        assert_eq!(r.last_warn, Some(ms(60_000)));
        // A new error is news, but not more than once per 5 s.
        r.open_failed(ms(62_000), "permission denied");
        assert_eq!(r.last_warn, Some(ms(60_000)));
        r.open_failed(ms(65_000), "permission denied");
        assert_eq!(r.last_warn, Some(ms(65_000)));
        r.open_failed(ms(66_000), "permission denied");
        assert_eq!(r.last_warn, Some(ms(65_000)));
    }

    #[test]
    fn failing_right_after_reopening_continues_the_same_outage() {
        let mut r = Reconnector::new("mic".into(), BackoffPolicy::default(), ms(0));
        r.lost(ms(0), "no device at start");
        r.reopened(ms(500));
        r.lost(ms(600), "gone again");
        // Backoff kept growing: 500, then 1000.
        assert_eq!(r.wait_left(ms(600)), Some(ms(1_000)));
        r.reopened(ms(1_600));
        let o = r.delivered(ms(1_700)).unwrap();
        assert_eq!((o.started, o.reopened), (ms(0), ms(1_600)));
        assert_eq!(o.reason, "no device at start");
        assert_eq!(r.outages(), 1);
    }
}
