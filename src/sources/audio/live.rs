//! A live source that survives its device: [`ReconnectingSource`] reopens a lost (or not
//! yet present) device with exponential backoff and reports each outage once as a
//! [`SourceGap`].
//!
//! `read_chunk` never fails and never blocks for long: while the device is away it
//! waits at most [`ReconnectingSource::poll`] and returns `Ok(true)` with no samples, so
//! the pipeline's source thread keeps seeing stop requests.

use std::collections::VecDeque;
use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use super::error::AudioError;
use super::gap::SourceGap;
use super::rate::PIPELINE_RATE_HZ;
use super::source::AudioSource;
use crate::common::reconnect::{BackoffPolicy, Clock, Reconnector, SystemClock};

/// Opens the device behind a [`ReconnectingSource`], once at start and after each loss.
pub trait Opener: Send {
    type Error: Display;
    /// What is being opened, for log lines ("microphone \"USB\"").
    fn describe(&self) -> String;
    /// A fresh source, or why there is none (the error is logged, then retried).
    fn open(&mut self) -> Result<Box<dyn AudioSource>, Self::Error>;
}

/// An [`Opener`] from a name and a closure.
pub struct FnOpener<F> {
    what: String,
    open: F,
}

impl<F, E> FnOpener<F>
where
    F: FnMut() -> Result<Box<dyn AudioSource>, E> + Send,
    E: Display,
{
    pub fn new(what: impl Into<String>, open: F) -> Self {
        Self {
            what: what.into(),
            open,
        }
    }
}

impl<F, E> Opener for FnOpener<F>
where
    F: FnMut() -> Result<Box<dyn AudioSource>, E> + Send,
    E: Display,
{
    type Error = E;
    fn describe(&self) -> String {
        self.what.clone()
    }
    fn open(&mut self) -> Result<Box<dyn AudioSource>, E> {
        (self.open)()
    }
}

/// Gaps not yet taken are kept up to this many (older ones are dropped and logged), so
/// a caller that never calls `take_gap` cannot grow memory.
const MAX_PENDING_GAPS: usize = 16;

/// A live [`AudioSource`] over whatever [`Opener`] gives: on an error, a stall (the inner
/// source's error) or an unexpected end, it logs one line, drops the device and reopens
/// it with backoff. It never ends by itself.
pub struct ReconnectingSource<O: Opener> {
    opener: O,
    inner: Option<Box<dyn AudioSource>>,
    rc: Reconnector,
    clock: Arc<dyn Clock>,
    /// 16 kHz samples delivered so far: the stream clock.
    delivered: u64,
    /// Stream time at which the current outage began.
    gap_start_s: f64,
    gaps: VecDeque<SourceGap>,
    poll: Duration,
}

impl<O: Opener> ReconnectingSource<O> {
    /// Opens the device now; if that fails the failure is logged and retried from the
    /// first `read_chunk` on (the daemon starts without its device).
    pub fn new(opener: O, policy: BackoffPolicy) -> Self {
        Self::with_clock(opener, policy, Arc::new(SystemClock::new()))
    }

    pub fn with_clock(opener: O, policy: BackoffPolicy, clock: Arc<dyn Clock>) -> Self {
        let now = clock.now();
        let mut s = Self {
            rc: Reconnector::new(opener.describe(), policy, now),
            opener,
            inner: None,
            clock,
            delivered: 0,
            gap_start_s: 0.0,
            gaps: VecDeque::new(),
            poll: Duration::from_millis(100),
        };
        match s.opener.open() {
            Ok(src) => s.inner = Some(src),
            Err(e) => s.rc.open_failed_at_start(now, &e.to_string()),
        }
        s
    }

    /// Longest wait inside one `read_chunk` while the device is away (default 100 ms).
    pub fn poll(mut self, d: Duration) -> Self {
        self.poll = d.max(Duration::from_millis(1));
        self
    }

    /// Whether a device is open right now.
    pub fn is_connected(&self) -> bool {
        self.inner.is_some()
    }

    /// Outages so far (a failed start counts as one).
    pub fn outages(&self) -> u64 {
        self.rc.outages()
    }

    /// Gaps waiting for `take_gap` (at most 16).
    pub fn pending_gaps(&self) -> usize {
        self.gaps.len()
    }

    fn lose(&mut self, reason: String) {
        // Dropping the source releases the device (and stops its capture thread).
        self.inner = None;
        if self.rc.is_up() {
            self.gap_start_s = self.delivered as f64 / PIPELINE_RATE_HZ as f64;
        }
        self.rc.lost(self.clock.now(), &reason);
    }
}

impl<O: Opener> AudioSource for ReconnectingSource<O> {
    fn describe(&self) -> String {
        match &self.inner {
            Some(src) => format!("{} (reopened with backoff when lost)", src.describe()),
            None => format!(
                "{} (not available yet; retrying with backoff)",
                self.opener.describe()
            ),
        }
    }

    fn is_live(&self) -> bool {
        true
    }

    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        if let Some(src) = self.inner.as_mut() {
            let before = out.len();
            let res = src.read_chunk(out);
            let n = out.len().saturating_sub(before) as u64;
            if n > 0 {
                self.delivered += n;
                if let Some(o) = self.rc.delivered(self.clock.now()) {
                    if self.gaps.len() == MAX_PENDING_GAPS {
                        if let Some(old) = self.gaps.pop_front() {
                            log::warn!(
                                "{}: gap at {:.1} s was never taken; dropped",
                                self.opener.describe(),
                                old.start_s
                            );
                        }
                    }
                    self.gaps.push_back(SourceGap {
                        start_s: self.gap_start_s,
                        duration_s: o.reopened.saturating_sub(o.started).as_secs_f64(),
                        reason: o.reason,
                    });
                }
            }
            match res {
                Ok(true) => {}
                Ok(false) => self.lose("the stream ended".into()),
                Err(e) => self.lose(format!("device lost: {e}")),
            }
            return Ok(true);
        }
        let now = self.clock.now();
        match self.rc.wait_left(now) {
            Some(w) if !w.is_zero() => {
                self.clock.sleep(w.min(self.poll));
                return Ok(true);
            }
            _ => {}
        }
        match self.opener.open() {
            Ok(src) => {
                self.inner = Some(src);
                self.rc.reopened(self.clock.now());
            }
            Err(e) => self.rc.open_failed(self.clock.now(), &e.to_string()),
        }
        Ok(true)
    }

    fn take_gap(&mut self) -> Option<SourceGap> {
        self.gaps.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;

    /// Time that moves only when something sleeps or a test source says so.
    #[derive(Default)]
    struct ManualClock(Mutex<Duration>);
    impl ManualClock {
        fn advance(&self, d: Duration) {
            *self.0.lock().unwrap() += d;
        }
    }
    impl Clock for ManualClock {
        fn now(&self) -> Duration {
            *self.0.lock().unwrap()
        }
        fn sleep(&self, d: Duration) {
            self.advance(d)
        }
    }

    /// Delivers `chunks` chunks of 1600 samples (100 ms each, advancing the clock by
    /// as much), then fails. Counts live instances.
    struct Flaky {
        clock: Arc<ManualClock>,
        chunks: usize,
        alive: Arc<AtomicUsize>,
    }
    impl Drop for Flaky {
        fn drop(&mut self) {
            self.alive.fetch_sub(1, Ordering::SeqCst);
        }
    }
    impl AudioSource for Flaky {
        fn describe(&self) -> String {
            "flaky".into()
        }
        fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
            if self.chunks == 0 {
                return Err(AudioError::Read {
                    what: "flaky".into(),
                    seconds: 0.0,
                    reason: "unplugged".into(),
                });
            }
            self.chunks -= 1;
            self.clock.advance(Duration::from_millis(100));
            out.extend(std::iter::repeat_n(0.25, 1600));
            Ok(true)
        }
        fn is_live(&self) -> bool {
            true
        }
    }

    #[test]
    fn many_reconnect_cycles_keep_memory_bounded() {
        let clock = Arc::new(ManualClock::default());
        let alive = Arc::new(AtomicUsize::new(0));
        let opens = Arc::new(AtomicUsize::new(0));
        let (c, a, o) = (clock.clone(), alive.clone(), opens.clone());
        let opener = FnOpener::new("flaky mic", move || {
            // Every third attempt fails, the others give a source that lasts 2 chunks.
            if o.fetch_add(1, Ordering::SeqCst) % 3 == 2 {
                return Err("no device".to_string());
            }
            a.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(Flaky {
                clock: c.clone(),
                chunks: 2,
                alive: a.clone(),
            }) as Box<dyn AudioSource>)
        });
        let policy = BackoffPolicy {
            initial: Duration::from_millis(10),
            max: Duration::from_millis(40),
            log_every: Duration::from_secs(60),
        };
        let mut src = ReconnectingSource::with_clock(opener, policy, clock.clone());
        let mut buf = Vec::with_capacity(4096);
        let mut gaps = 0u64;
        for _ in 0..20_000 {
            buf.clear();
            assert!(src.read_chunk(&mut buf).unwrap());
            assert!(buf.capacity() <= 4096, "reader buffer grew");
            assert!(alive.load(Ordering::SeqCst) <= 1, "an old device was kept");
            if src.take_gap().is_some() {
                gaps += 1;
            }
            assert_eq!(src.pending_gaps(), 0);
        }
        assert!(opens.load(Ordering::SeqCst) > 3_000, "{opens:?}");
        // The last outage may still be open when the loop stops.
        let outages = src.outages();
        assert!(gaps > 2_000, "{gaps}");
        assert!(
            gaps == outages || gaps + 1 == outages,
            "{gaps} gaps, {outages} outages"
        );
    }

    #[test]
    fn gaps_not_taken_are_capped() {
        let clock = Arc::new(ManualClock::default());
        let alive = Arc::new(AtomicUsize::new(0));
        let (c, a) = (clock.clone(), alive.clone());
        let opener = FnOpener::new("flaky mic", move || {
            a.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(Box::new(Flaky {
                clock: c.clone(),
                chunks: 1,
                alive: a.clone(),
            }) as Box<dyn AudioSource>)
        });
        let mut src = ReconnectingSource::with_clock(opener, BackoffPolicy::default(), clock);
        let mut buf = Vec::new();
        for _ in 0..5_000 {
            buf.clear();
            src.read_chunk(&mut buf).unwrap();
        }
        assert_eq!(src.pending_gaps(), MAX_PENDING_GAPS);
    }
}
