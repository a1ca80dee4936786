//! The vision side of a stream: frame source -> bounded frame queue -> analyser ->
//! timeline of [`FrameObs`] that utterances read their frames from.
//!
//! Queue policy: a live camera never waits. When the queue is full the oldest frame is
//! dropped (counted as the drop `frame_queue_full`), so the analyser always works on the newest
//! frames. A file waits for room instead, so replaying a file is deterministic. Frames
//! beyond `analyse_fps` are skipped before the queue (`frames_skipped`): that is the
//! CPU budget, not a loss.

use crate::common::lock::LockOrRecover;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender, TrySendError};

use super::{FrameObs, VisionAnalyser, VisionError};
use crate::common::drops::{DropReason, DropRegistry};
use crate::common::shed::{ShedLadder, ShedStep};
use crate::sources::audio::SourceGap;
use crate::sources::video::{FrameSource, VideoError, VideoFrame};

pub use crate::common::counters::{VisionCounters, VisionStats};

struct TimelineState {
    frames: VecDeque<FrameObs>,
    /// Time of the newest analysed frame: every earlier queued frame is analysed.
    covered_s: f64,
    ended: bool,
}

/// A live camera whose newest analysed frame is older than this (or 4 waits, if longer)
/// before an utterance's end is taken to be down: the utterance does not wait for it.
const STALE_CAMERA_MIN_S: f64 = 2.0;

/// Analysed frames of the last `keep_s` seconds, in time order.
pub struct VisionTimeline {
    state: Mutex<TimelineState>,
    changed: Condvar,
    keep_s: f64,
}

impl VisionTimeline {
    pub fn new(keep_s: f64) -> Self {
        Self {
            state: Mutex::new(TimelineState {
                frames: VecDeque::new(),
                covered_s: f64::NEG_INFINITY,
                ended: false,
            }),
            changed: Condvar::new(),
            keep_s,
        }
    }

    fn update(&self, f: impl FnOnce(&mut TimelineState)) {
        let mut s = self.state.lock_or_recover();
        f(&mut s);
        drop(s);
        self.changed.notify_all();
    }

    pub fn push(&self, obs: FrameObs) {
        let keep = self.keep_s;
        self.update(|s| {
            s.covered_s = s.covered_s.max(obs.t_s);
            s.frames.push_back(obs);
            while s.frames.front().is_some_and(|f| f.t_s < obs.t_s - keep) {
                s.frames.pop_front();
            }
        });
    }

    /// No more frames will come (source ended or failed).
    pub fn end(&self) {
        self.update(|s| s.ended = true);
    }

    /// The analysed frames within `[start_s, end_s)`. Waits until the analyser has
    /// covered `end_s`, the source ended, `max_wait` passed (`None`: no limit), or
    /// `halted` is set.
    pub fn window(
        &self,
        start_s: f64,
        end_s: f64,
        max_wait: Option<Duration>,
        halted: &AtomicBool,
    ) -> Vec<FrameObs> {
        let deadline = max_wait.map(|w| Instant::now() + w);
        let mut s = self.state.lock_or_recover();
        // A live camera that has analysed nothing near the utterance's end (absent,
        // unplugged and retrying, stalled) is not waited for: its frames will not come
        // within the wait, and every event would pay all of it (375 ms at 4 fps, measured
        // on the Pi 5 profile without a camera, docs/boards.md).
        let stale = max_wait
            .is_some_and(|w| s.covered_s < end_s - (4.0 * w.as_secs_f64()).max(STALE_CAMERA_MIN_S));
        while !stale && !s.ended && s.covered_s < end_s && !halted.load(Ordering::Relaxed) {
            // Short waits so `halted` is noticed without a notification.
            let mut step = Duration::from_millis(50);
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    break;
                }
                step = step.min(d - now);
            }
            s = self
                .changed
                .wait_timeout(s, step)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        s.frames
            .iter()
            .filter(|f| f.t_s >= start_s && f.t_s < end_s)
            .copied()
            .collect()
    }
}

/// Pace for a file replayed in real time: frame `t_s` is released at `started + t_s`.
pub struct Pacing {
    pub started: Instant,
}

/// How many frames per second to analyse: `analyse_fps`, or `shed_fps` while the load
/// shedding ladder has taken its frame-rate step.
#[derive(Clone, Copy)]
pub struct FrameRate<'a> {
    pub analyse_fps: f32,
    pub shed: Option<(&'a ShedLadder<'a>, f32)>,
}

impl FrameRate<'_> {
    pub fn fixed(analyse_fps: f32) -> Self {
        Self {
            analyse_fps,
            shed: None,
        }
    }
}

/// Read frames, keep those due under the frame rate, queue them. Returns when the
/// source ends, fails, `halted` is set, or the analyser is gone.
#[allow(clippy::too_many_arguments)]
pub fn read_frames(
    mut source: Box<dyn FrameSource>,
    rate: FrameRate,
    tx: Sender<VideoFrame>,
    oldest: Receiver<VideoFrame>,
    counters: &VisionCounters,
    drops: &DropRegistry,
    pacing: Option<Pacing>,
    halted: &dyn Fn() -> bool,
    on_gap: &mut dyn FnMut(SourceGap),
) -> Result<(), VideoError> {
    let live = source.is_live();
    // Only a live source takes frames back out of the queue. For a file this handle
    // must go, so a send fails (instead of waiting forever) once the analyser is gone.
    let oldest = live.then_some(oldest);
    let period_s = 1.0 / rate.analyse_fps as f64;
    let mut last_kept_s = f64::NEG_INFINITY;
    // The frames the normal rate would keep: those skipped among them are the shed ones.
    let mut normal_last_s = f64::NEG_INFINITY;
    counters.source_running.store(true, Ordering::Relaxed);
    let res = (|| {
        // `source_failed` is also set when the vision stage stops on an error.
        while !halted() && !counters.source_failed.load(Ordering::Relaxed) {
            let Some(frame) = source.next_frame()? else {
                return Ok(());
            };
            counters.frames_in.fetch_add(1, Ordering::Relaxed);
            if let Some(g) = source.take_gap() {
                on_gap(g);
            }
            if let Some(p) = &pacing {
                let due = Duration::from_secs_f64(frame.t_s.max(0.0));
                if let Some(wait) = due.checked_sub(p.started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            let shed = rate
                .shed
                .filter(|(ladder, _)| ladder.is_active(ShedStep::VisionFps));
            let period = shed.map_or(period_s, |(_, fps)| 1.0 / fps as f64);
            // A small tolerance so a 15 fps source at 5 fps keeps every third frame.
            let due_normally = frame.t_s + 1e-6 >= normal_last_s + period_s;
            if due_normally {
                normal_last_s = frame.t_s;
            }
            if frame.t_s + 1e-6 < last_kept_s + period {
                counters.frames_skipped.fetch_add(1, Ordering::Relaxed);
                if let Some((ladder, _)) = shed.filter(|_| due_normally) {
                    ladder
                        .counters()
                        .vision_frames_shed
                        .fetch_add(1, Ordering::Relaxed);
                }
                continue;
            }
            last_kept_s = frame.t_s;
            if live {
                let mut frame = frame;
                loop {
                    match tx.try_send(frame) {
                        Ok(()) => break,
                        Err(TrySendError::Full(f)) => {
                            if oldest.as_ref().is_some_and(|o| o.try_recv().is_ok()) {
                                drops.add(DropReason::FrameQueueFull, 1);
                            }
                            frame = f;
                        }
                        Err(TrySendError::Disconnected(_)) => return Ok(()),
                    }
                }
            } else if tx.send(frame).is_err() {
                return Ok(());
            }
        }
        Ok(())
    })();
    counters.source_running.store(false, Ordering::Relaxed);
    res
}

/// Analyse queued frames into the timeline until the queue closes.
pub fn analyse_frames(
    analyser: &mut VisionAnalyser,
    rx: Receiver<VideoFrame>,
    timeline: &VisionTimeline,
    counters: &VisionCounters,
) -> Result<(), VisionError> {
    for frame in rx.iter() {
        let obs = analyser.analyse(&frame)?;
        counters.frames_analysed.fetch_add(1, Ordering::Relaxed);
        if obs.face.is_some() {
            counters.frames_with_face.fetch_add(1, Ordering::Relaxed);
        }
        timeline.push(obs);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(t_s: f64) -> FrameObs {
        FrameObs { t_s, face: None }
    }

    #[test]
    fn window_returns_frames_in_span_and_prunes_old_ones() {
        let tl = VisionTimeline::new(1.0);
        for k in 0..30 {
            tl.push(obs(k as f64 * 0.1));
        }
        let halted = AtomicBool::new(false);
        let w = tl.window(2.0, 2.5, None, &halted);
        assert_eq!(w.len(), 5, "{w:?}");
        // Older than 1 s before the newest frame (2.9 s) is gone.
        assert!(tl.window(0.0, 1.85, None, &halted).is_empty());
    }

    #[test]
    fn window_waits_for_coverage_or_end() {
        let tl = std::sync::Arc::new(VisionTimeline::new(10.0));
        let halted = AtomicBool::new(false);
        let tl2 = tl.clone();
        let h = std::thread::spawn(move || {
            tl2.push(obs(0.5));
            tl2.push(obs(1.2));
        });
        // No time limit: returns only once a frame at or after 1.0 s is analysed, so
        // every earlier frame is in.
        let w = tl.window(0.0, 1.0, None, &halted);
        h.join().unwrap();
        assert_eq!(w.len(), 1);
        // A bounded wait gives up with what is there.
        let w = tl.window(0.0, 5.0, Some(Duration::from_millis(20)), &halted);
        assert_eq!(w.len(), 2);
        tl.end();
        assert_eq!(tl.window(0.0, 99.0, None, &halted).len(), 2);
    }

    #[test]
    fn a_camera_that_delivers_nothing_is_not_waited_for() {
        let halted = AtomicBool::new(false);
        // Absent from the start (nothing analysed), and gone since 1.0 s (long before the
        // utterance: more than 4 waits).
        let absent = VisionTimeline::new(10.0);
        let gone = VisionTimeline::new(10.0);
        gone.push(obs(1.0));
        let t0 = Instant::now();
        assert!(absent
            .window(500.0, 503.0, Some(Duration::from_secs(60)), &halted)
            .is_empty());
        assert!(gone
            .window(500.0, 503.0, Some(Duration::from_secs(60)), &halted)
            .is_empty());
        // Not a timing test: a wait would take 2 minutes.
        assert!(t0.elapsed() < Duration::from_secs(30));
    }

    struct Frames {
        n: usize,
        fps: f64,
        live: bool,
    }
    impl FrameSource for Frames {
        fn describe(&self) -> String {
            "test frames".into()
        }
        fn next_frame(&mut self) -> Result<Option<VideoFrame>, VideoError> {
            if self.n == 0 {
                return Ok(None);
            }
            self.n -= 1;
            Ok(Some(VideoFrame {
                t_s: (100 - self.n) as f64 / self.fps,
                width: 2,
                height: 2,
                rgb: vec![0; 12],
            }))
        }
        fn is_live(&self) -> bool {
            self.live
        }
    }

    #[test]
    fn frames_are_thinned_to_the_budget_and_a_slow_consumer_drops_the_oldest() {
        let counters = VisionCounters::default();
        let drops = DropRegistry::default();
        let (tx, rx) = crossbeam_channel::bounded(4);
        let src = Frames {
            n: 100,
            fps: 15.0,
            live: true,
        };
        // Nobody consumes: a live source must not block, only drop.
        let halted = || false;
        read_frames(
            Box::new(src),
            FrameRate::fixed(5.0),
            tx,
            rx.clone(),
            &counters,
            &drops,
            None,
            &halted,
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(counters.frames_in.load(Ordering::Relaxed), 100);
        assert_eq!(
            counters.frames_skipped.load(Ordering::Relaxed),
            66,
            "every third frame kept"
        );
        assert_eq!(drops.get(DropReason::FrameQueueFull), 34 - 4);
        // The queue holds the newest frames.
        let kept: Vec<f64> = rx.try_iter().map(|f| f.t_s).collect();
        assert_eq!(kept.len(), 4);
        assert!((kept[3] - 100.0 / 15.0).abs() < 1e-9, "{kept:?}");
    }

    #[test]
    fn the_shedding_step_lowers_the_frame_rate_and_counts_what_it_skipped() {
        use crate::common::shed::{Applicable, ShedCounters};
        let shed_counters = ShedCounters::default();
        let ladder = ShedLadder::new(
            Applicable {
                vision_fps: true,
                ..Default::default()
            },
            1,
            &shed_counters,
        );
        ladder.observe(true);
        let run = |ladder: &ShedLadder| {
            let counters = VisionCounters::default();
            let (tx, rx) = crossbeam_channel::bounded(200);
            let src = Frames {
                n: 100,
                fps: 15.0,
                live: false,
            };
            let rate = FrameRate {
                analyse_fps: 5.0,
                shed: Some((ladder, 1.0)),
            };
            read_frames(
                Box::new(src),
                rate,
                tx,
                rx.clone(),
                &counters,
                &DropRegistry::default(),
                None,
                &|| false,
                &mut |_| {},
            )
            .unwrap();
            (
                counters.frames_in.load(Ordering::Relaxed),
                counters.frames_skipped.load(Ordering::Relaxed),
            )
        };
        // 6.7 s at 15 fps: 1 fps while shedding keeps 7 frames, 5 fps would keep 34.
        let s = run(&ladder);
        assert_eq!(s, (100, 93));
        assert_eq!(
            shed_counters.vision_frames_shed.load(Ordering::Relaxed),
            34 - 7
        );
        // Given back: the normal rate again.
        ladder.observe(false);
        assert!(!ladder.is_active(ShedStep::VisionFps));
        let s = run(&ladder);
        assert_eq!(s.1, 66);
        assert_eq!(shed_counters.vision_frames_shed.load(Ordering::Relaxed), 27);
    }
}
