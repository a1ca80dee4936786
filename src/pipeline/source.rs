//! Source feeder stage: reads the audio source into the ring, fills a live source's
//! gaps with silence so the stream clock stays on wall time, and paces a file at
//! real time when asked. The ring's full policy (drop for live, wait for files) is
//! `queues::RingWriter`'s.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::common::counters::Counters;
use crate::common::drops::DropReason;
use crate::sources::audio::{AudioError, AudioSource};

use super::clock::RATE;
use super::queues::{record_gap, Emitted, RingWriter};
use super::shutdown::Shutdown;

/// Longest outage filled with silence to keep the stream clock on wall time. Beyond
/// it the clock simply skips ahead by less: minutes of zeros would only cost VAD time.
pub const MAX_GAP_FILL_S: f64 = 60.0;

pub struct SourceStage {
    pub source: Box<dyn AudioSource>,
    pub ring: RingWriter,
    /// Deliver a file at real-time pace, as a microphone would.
    pub realtime: bool,
    pub counters: Arc<Counters>,
    /// Where `gap` events go.
    pub gaps: Sender<Emitted>,
    pub shutdown: Shutdown,
}

impl SourceStage {
    /// Feed until the source ends or the run stops; the ring is closed either way.
    pub fn run(self) -> Result<(), AudioError> {
        let Self {
            mut source,
            mut ring,
            realtime,
            counters,
            gaps,
            shutdown,
        } = self;
        ring.attach(&shutdown);
        let halted = || shutdown.stopping();
        counters.source_running.store(true, Ordering::Relaxed);
        let mut buf = Vec::with_capacity(8192);
        let started = Instant::now();
        let mut pushed: u64 = 0;
        let res = (|| {
            while !halted() {
                buf.clear();
                let more = source.read_chunk(&mut buf)?;
                if let Some(gap) = source.take_gap() {
                    // The read that resumed delivery reports the gap: silence for the
                    // lost interval goes before its audio, keeping the stream clock on
                    // wall time (camera frames still line up).
                    let fill = (gap.duration_s.min(MAX_GAP_FILL_S) * RATE) as usize;
                    ring.push_silence(fill, &halted);
                    pushed += fill as u64;
                    counters
                        .samples_in
                        .fetch_add(fill as u64, Ordering::Relaxed);
                    record_gap(&counters, &gaps, "audio", &source.describe(), gap);
                }
                counters
                    .samples_in
                    .fetch_add(buf.len() as u64, Ordering::Relaxed);
                let dropped = ring.push(&buf, &halted);
                if dropped > 0 {
                    counters
                        .drops
                        .add(DropReason::DroppedSamples, dropped as u64);
                }
                pushed += buf.len() as u64;
                if realtime {
                    let due = Duration::from_secs_f64(pushed as f64 / RATE);
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
                if !more {
                    break;
                }
            }
            Ok(())
        })();
        counters.source_running.store(false, Ordering::Relaxed);
        ring.close();
        res
    }
}
