//! A camera that survives being unplugged: [`ReconnectingFrameSource`] reopens a lost (or
//! not yet present) camera with the same backoff as the microphone
//! ([`crate::common::reconnect`]).
//!
//! `next_frame` blocks while the camera is away (a frame source has no "nothing yet"
//! answer) but checks its stop flag at least every `poll`, and returns `Ok(None)` once
//! it is set. Outages need no gap record: frame timestamps show them.

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use super::camera::{CameraCounters, CameraError, CameraOptions, CameraSource};
use super::error::VideoError;
use super::frame::VideoFrame;
use super::source::FrameSource;
use crate::common::reconnect::{BackoffPolicy, Clock, Reconnector, SystemClock};
use crate::sources::audio::SourceGap;

/// Opens the camera behind a [`ReconnectingFrameSource`].
pub trait FrameOpener: Send {
    type Error: Display;
    fn describe(&self) -> String;
    fn open(&mut self) -> Result<Box<dyn FrameSource>, Self::Error>;
}

/// Opens [`CameraSource`]s on one shared stream clock and one set of counters.
pub struct CameraOpener {
    opts: CameraOptions,
    clock_origin: std::time::Instant,
    counters: Arc<CameraCounters>,
}

impl CameraOpener {
    /// `clock_origin`: the stream's start, shared with the audio.
    pub fn new(opts: CameraOptions, clock_origin: std::time::Instant) -> Self {
        Self {
            opts,
            clock_origin,
            counters: Arc::default(),
        }
    }

    /// Delivered and dropped frames, across reconnections.
    pub fn counters(&self) -> Arc<CameraCounters> {
        self.counters.clone()
    }
}

impl FrameOpener for CameraOpener {
    type Error = CameraError;

    fn describe(&self) -> String {
        match &self.opts.device {
            Some(d) => format!("camera \"{d}\""),
            None => "camera (first one)".into(),
        }
    }

    fn open(&mut self) -> Result<Box<dyn FrameSource>, CameraError> {
        let src = CameraSource::open(&self.opts, self.clock_origin, self.counters.clone())?;
        log::info!("opened {}", src.describe());
        Ok(Box::new(src))
    }
}

pub struct ReconnectingFrameSource<O: FrameOpener> {
    opener: O,
    inner: Option<Box<dyn FrameSource>>,
    rc: Reconnector,
    clock: Arc<dyn Clock>,
    stop: Arc<AtomicBool>,
    poll: Duration,
    /// Stream time of the last frame delivered: where an outage starts.
    last_t_s: f64,
    gap: Option<SourceGap>,
}

impl<O: FrameOpener> ReconnectingFrameSource<O> {
    /// Opens the camera now; a failure is logged and retried from `next_frame` on.
    /// `stop` ends a wait for the camera (then `next_frame` returns `Ok(None)`).
    pub fn new(opener: O, policy: BackoffPolicy, stop: Arc<AtomicBool>) -> Self {
        Self::with_clock(opener, policy, stop, Arc::new(SystemClock::new()))
    }

    pub fn with_clock(
        opener: O,
        policy: BackoffPolicy,
        stop: Arc<AtomicBool>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let now = clock.now();
        let mut s = Self {
            rc: Reconnector::new(opener.describe(), policy, now),
            opener,
            inner: None,
            clock,
            stop,
            poll: Duration::from_millis(100),
            last_t_s: 0.0,
            gap: None,
        };
        match s.opener.open() {
            Ok(src) => s.inner = Some(src),
            Err(e) => s.rc.open_failed_at_start(now, &e.to_string()),
        }
        s
    }

    pub fn is_connected(&self) -> bool {
        self.inner.is_some()
    }

    pub fn outages(&self) -> u64 {
        self.rc.outages()
    }
}

impl<O: FrameOpener> FrameSource for ReconnectingFrameSource<O> {
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

    fn take_gap(&mut self) -> Option<SourceGap> {
        self.gap.take()
    }

    fn next_frame(&mut self) -> Result<Option<VideoFrame>, VideoError> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(src) = self.inner.as_mut() {
                let reason = match src.next_frame() {
                    Ok(Some(f)) => {
                        if let Some(o) = self.rc.delivered(self.clock.now()) {
                            self.gap = Some(SourceGap {
                                start_s: self.last_t_s,
                                duration_s: o.reopened.saturating_sub(o.started).as_secs_f64(),
                                reason: o.reason,
                            });
                        }
                        self.last_t_s = f.t_s;
                        return Ok(Some(f));
                    }
                    Ok(None) => "the stream ended".to_string(),
                    Err(e) => format!("device lost: {e}"),
                };
                self.inner = None;
                self.rc.lost(self.clock.now(), &reason);
                continue;
            }
            let now = self.clock.now();
            if let Some(w) = self.rc.wait_left(now).filter(|w| !w.is_zero()) {
                self.clock.sleep(w.min(self.poll));
                continue;
            }
            match self.opener.open() {
                Ok(src) => {
                    self.inner = Some(src);
                    self.rc.reopened(self.clock.now());
                }
                Err(e) => self.rc.open_failed(self.clock.now(), &e.to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Default)]
    struct ManualClock(Mutex<Duration>);
    impl Clock for ManualClock {
        fn now(&self) -> Duration {
            *self.0.lock().unwrap()
        }
        fn sleep(&self, d: Duration) {
            *self.0.lock().unwrap() += d;
        }
    }

    /// `frames` frames, then an error.
    struct Cam {
        frames: u32,
        t: f64,
    }
    impl FrameSource for Cam {
        fn describe(&self) -> String {
            "test camera".into()
        }
        fn next_frame(&mut self) -> Result<Option<VideoFrame>, VideoError> {
            if self.frames == 0 {
                return Err(VideoError::Lost {
                    what: "test camera".into(),
                    reason: "unplugged".into(),
                });
            }
            self.frames -= 1;
            self.t += 1.0 / 15.0;
            Ok(Some(VideoFrame {
                t_s: self.t,
                width: 2,
                height: 1,
                rgb: vec![0; 6],
            }))
        }
    }

    struct Script {
        /// Per open attempt: `Some(frames)` opens a camera giving that many frames,
        /// `None` fails.
        plan: Vec<Option<u32>>,
        opens: usize,
        stop: Arc<AtomicBool>,
    }
    impl FrameOpener for Script {
        type Error = String;
        fn describe(&self) -> String {
            "scripted camera".into()
        }
        fn open(&mut self) -> Result<Box<dyn FrameSource>, String> {
            let step = self.plan.get(self.opens).copied();
            self.opens += 1;
            match step {
                Some(Some(frames)) => Ok(Box::new(Cam { frames, t: 0.0 })),
                Some(None) => Err("no /dev/video0".into()),
                None => {
                    // Plan exhausted: the test is over.
                    self.stop.store(true, Ordering::Relaxed);
                    Err("plan exhausted".into())
                }
            }
        }
    }

    #[test]
    fn a_camera_missing_at_start_then_unplugged_comes_back_each_time() {
        let stop = Arc::new(AtomicBool::new(false));
        let clock = Arc::new(ManualClock::default());
        let opener = Script {
            plan: vec![None, None, Some(3), Some(0), Some(2)],
            opens: 0,
            stop: stop.clone(),
        };
        let mut src = ReconnectingFrameSource::with_clock(
            opener,
            BackoffPolicy::default(),
            stop,
            clock.clone(),
        );
        assert!(!src.is_connected());
        let (mut frames, mut gaps) = (0, Vec::new());
        while let Some(f) = src.next_frame().unwrap() {
            assert_eq!(f.rgb.len(), 6);
            frames += 1;
            gaps.extend(src.take_gap());
        }
        assert_eq!(frames, 5);
        // Each outage that ended is reported once: the one at start (from 0 s) and the
        // unplug after the third frame (from that frame's time).
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        assert_eq!(gaps[0].start_s, 0.0);
        assert!((gaps[1].start_s - 3.0 / 15.0).abs() < 1e-9, "{gaps:?}");
        assert!(gaps.iter().all(|g| g.duration_s > 0.0), "{gaps:?}");
        // Missing at start (one outage), unplugged after 3 frames (the failed reopen
        // right after belongs to it), unplugged after 2 (still down when stopped).
        assert_eq!(src.outages(), 3);
        // Waits were 0.5 + 1 s at start, then 0.5 + 1 s, then 0.5 s (+ stop): the
        // clock only moved by sleeping, in steps of at most 100 ms.
        assert_eq!(clock.now(), Duration::from_millis(3_500));
    }
}
