//! One shutdown signal for a run, instead of a stop flag per reason.
//!
//! A run ends in three ways, and every stage asks the same handle which applies:
//! - asked from outside (`RunOptions::stop`, SIGTERM): sources stop reading, the
//!   current utterance is finished and flushed;
//! - a stage failed or the sink is gone ([`Shutdown::fail`]): sources stop feeding a
//!   pipeline that can no longer drain (a file source would otherwise wait forever
//!   for ring space), and stages parked on a queue are woken to see it;
//! - the audio side is done ([`Shutdown::finish_audio`]): the frame reader stops too,
//!   and so does a frame source waiting for a lost camera (`RunOptions::frame_source_stop`).
//!
//! The end of the audio itself is not a shutdown: it flows down the queues (the ring
//! is closed, channels disconnect) so every stage drains what is already queued.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::Thread;

use crate::common::lock::LockOrRecover;

/// A clone-able handle to the run's shutdown signal.
#[derive(Clone)]
pub struct Shutdown(Arc<Inner>);

struct Inner {
    /// `RunOptions::stop`: set from outside; nobody is notified, so a wait that must
    /// notice it is bounded (see `queues::RING_WAIT_MAX`).
    requested: Arc<AtomicBool>,
    /// `RunOptions::frame_source_stop`, set with `audio_done`.
    frame_source_stop: Option<Arc<AtomicBool>>,
    failed: AtomicBool,
    audio_done: AtomicBool,
    /// Threads parked on the audio ring, woken by `fail`.
    parked: Mutex<Vec<Thread>>,
}

impl Shutdown {
    pub fn new(requested: Arc<AtomicBool>, frame_source_stop: Option<Arc<AtomicBool>>) -> Self {
        Self(Arc::new(Inner {
            requested,
            frame_source_stop,
            failed: AtomicBool::new(false),
            audio_done: AtomicBool::new(false),
            parked: Mutex::new(Vec::new()),
        }))
    }

    /// A stage failed or the sink is gone: nothing downstream can drain any more.
    pub fn fail(&self) {
        self.0.failed.store(true, Ordering::Relaxed);
        for t in self.0.parked.lock_or_recover().iter() {
            t.unpark();
        }
    }

    /// Some stage failed (the analyser stops waiting for frames).
    pub fn failed_flag(&self) -> &AtomicBool {
        &self.0.failed
    }

    /// Sources stop reading: asked from outside, or a stage failed.
    pub fn stopping(&self) -> bool {
        self.0.requested.load(Ordering::Relaxed) || self.0.failed.load(Ordering::Relaxed)
    }

    /// The analyser is done with the audio: frames are no longer needed.
    pub fn finish_audio(&self) {
        self.0.audio_done.store(true, Ordering::Relaxed);
        if let Some(f) = &self.0.frame_source_stop {
            f.store(true, Ordering::Relaxed);
        }
    }

    /// The frame reader stops: the run is stopping, or the audio side is done.
    pub fn frames_halted(&self) -> bool {
        self.stopping() || self.0.audio_done.load(Ordering::Relaxed)
    }

    /// Wake `thread` (parked waiting on the audio ring) when a stage fails.
    pub fn wake_on_fail(&self, thread: Thread) {
        self.0.parked.lock_or_recover().push(thread);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_outside_stop_stops_sources_and_frames_but_is_no_failure() {
        let stop = Arc::new(AtomicBool::new(false));
        let s = Shutdown::new(stop.clone(), None);
        assert!(!s.stopping() && !s.frames_halted());
        stop.store(true, Ordering::Relaxed);
        assert!(s.stopping() && s.frames_halted());
        assert!(!s.failed_flag().load(Ordering::Relaxed));
    }

    #[test]
    fn a_failure_is_seen_by_every_clone_and_wakes_parked_threads() {
        let s = Shutdown::new(Arc::new(AtomicBool::new(false)), None);
        let seen = s.clone();
        std::thread::scope(|scope| {
            let h = scope.spawn(|| {
                seen.wake_on_fail(std::thread::current());
                while !seen.stopping() {
                    std::thread::park();
                }
            });
            s.fail();
            h.join().unwrap();
        });
        assert!(s.failed_flag().load(Ordering::Relaxed));
    }

    #[test]
    fn the_end_of_the_audio_halts_only_the_frames_and_tells_the_frame_source() {
        let frame_stop = Arc::new(AtomicBool::new(false));
        let s = Shutdown::new(Arc::new(AtomicBool::new(false)), Some(frame_stop.clone()));
        s.finish_audio();
        assert!(s.frames_halted());
        assert!(!s.stopping());
        assert!(frame_stop.load(Ordering::Relaxed));
    }
}
