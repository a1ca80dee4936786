//! Vision stages: a frame reader (camera or video file -> bounded frame queue, at the
//! analysis frame rate, which the shedding ladder may lower) and a vision analyser
//! (faces, landmarks, expression -> the timeline the analyser reads per utterance).
//! Frames are analysed while the person speaks, so an utterance's video view costs
//! only its functionals and head. A failing camera never stops the stream: it goes
//! on audio-only with `views.video` null.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};

use crate::common::counters::Counters;
use crate::common::shed::ShedLadder;
use crate::sources::video::{FrameSource, VideoFrame};
use crate::views::vision::stream::{self as vstream, VisionTimeline};
use crate::views::vision::VisionAnalyser;

use super::queues::{record_gap, Emitted};
use super::shutdown::Shutdown;

pub struct FrameReaderStage<'a, 'l> {
    pub source: Box<dyn FrameSource>,
    pub frames: Sender<VideoFrame>,
    /// The queue's receiving end, for a camera to drop the oldest frame when full.
    pub oldest: Receiver<VideoFrame>,
    pub analyse_fps: f32,
    /// The shedding ladder and the frame rate its first step falls back to.
    pub shed: (&'a ShedLadder<'l>, f32),
    /// Release a file's frames at real time, counted from this instant.
    pub paced_from: Option<Instant>,
    pub counters: &'a Counters,
    /// Where `gap` events go.
    pub gaps: Sender<Emitted>,
    pub shutdown: Shutdown,
}

impl FrameReaderStage<'_, '_> {
    /// Read until the source ends or fails, or the run or its audio side is done.
    pub fn run(self) {
        let Self {
            source,
            frames,
            oldest,
            analyse_fps,
            shed,
            paced_from,
            counters,
            gaps,
            shutdown,
        } = self;
        let what = source.describe();
        let vc = &counters.vision;
        let rate = vstream::FrameRate {
            analyse_fps,
            shed: Some(shed),
        };
        let halted = || shutdown.frames_halted();
        let mut on_gap =
            |g: crate::sources::audio::SourceGap| record_gap(counters, &gaps, "video", &what, g);
        let r = vstream::read_frames(
            source,
            rate,
            frames,
            oldest,
            vc,
            &counters.drops,
            paced_from.map(|started| vstream::Pacing { started }),
            &halted,
            &mut on_gap,
        );
        if let Err(e) = r {
            vc.source_failed.store(true, Ordering::Relaxed);
            log::warn!("{e}; the stream continues audio-only (views.video null)");
        } else if !halted() {
            log::debug!("{what}: no more frames; later utterances have no video view");
        }
    }
}

pub struct VisionStage<'a> {
    pub analyser: VisionAnalyser,
    pub frames: Receiver<VideoFrame>,
    pub timeline: &'a VisionTimeline,
    pub counters: &'a Counters,
}

impl VisionStage<'_> {
    /// Analyse frames until the reader is done; the timeline then ends, so no
    /// utterance waits for frames that will not come.
    pub fn run(self) {
        let vc = &self.counters.vision;
        let mut analyser = self.analyser;
        if let Err(e) = vstream::analyse_frames(&mut analyser, self.frames, self.timeline, vc) {
            vc.source_failed.store(true, Ordering::Relaxed);
            log::warn!("vision stage stopped: {e}; the stream continues audio-only");
        }
        self.timeline.end();
    }
}
