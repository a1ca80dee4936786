//! Every setting a run derives from its config and its source, in one pure value.
//!
//! `run_stream_av` used to derive these inline between building queues and spawning
//! threads; here they are computed once, before anything runs, so a test can check
//! which threads a configuration starts and which full policy each queue gets
//! without loading a model or starting a thread.

use crate::common::shed::Applicable;
use crate::config::Config;
use crate::sources::audio::PIPELINE_RATE_HZ;
use crate::views::vad::VAD_CHUNK;

/// What the plan needs to know beyond the config: the source and the loaded models.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanInputs {
    /// The audio source is a live capture (microphone, `replay - --live`).
    pub live: bool,
    /// A file source is paced at real time (`RunOptions::realtime`).
    pub realtime: bool,
    /// A frame source and a vision analyser are both there.
    pub vision: bool,
    /// The frame source is a camera rather than a file.
    pub frames_live: bool,
    /// `asr.fallback_model` is loaded (the ASR shedding step exists).
    pub asr_fallback: bool,
    /// The text encoder is loaded (the text shedding step exists).
    pub text_encoder: bool,
}

/// What to do when a queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// Wait for room: nothing is lost, the producer slows down (files, pipes).
    Wait,
    /// Drop the newest item and count it: a live capture must never be blocked.
    DropNewest,
}

/// The derived settings of one run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// A file is delivered at real-time pace (`RunOptions::realtime`).
    pub realtime: bool,
    /// Audio ring between source and segmenter (`buffers.ring_ms`, at least four VAD
    /// chunks).
    pub ring_samples: usize,
    pub ring_full: WhenFull,
    /// Finished utterances waiting for the analyser (`buffers.utterance_queue`).
    pub utterance_queue: usize,
    pub utterance_full: WhenFull,
    /// Events waiting for the sink (`buffers.event_queue`).
    pub event_queue: usize,
    /// Camera frames waiting for the vision analyser (`vision.frame_queue`).
    pub frame_queue: usize,
    /// Audio the context keeps: the longest utterance with its rolls, plus a second.
    pub audio_keep_s: f64,
    /// Transcripts of the last `context.seconds` feed the text view.
    pub context_s: f64,
    /// Analysed frames kept as long as audio is, plus the context.
    pub frames_keep_s: f64,
    pub pre_roll_samples: u64,
    pub post_roll_samples: u64,
    /// Interim (`partial`) text is written: `asr.interim_every_ms` > 0 and transcripts
    /// are output.
    pub partials: bool,
    /// Samples between interim decodes of the separate interim thread (0 = off).
    pub interim_every_samples: u64,
    /// The separate interim decoder thread runs: partials without streaming (with
    /// streaming, partials come from the streaming steps at no extra cost).
    pub interim_thread: bool,
    /// Streaming recognition: `asr.stream_step_ms` > 0 and audio arrives in real time
    /// (a live source, or a file paced like one). A file read as fast as possible is
    /// all there already: it is decoded one-shot, which also keeps its events
    /// independent of thread timing (features, evaluation and tests rely on that).
    pub streaming: bool,
    pub step_every_samples: u64,
    /// The vision threads (frame reader, vision analyser) run.
    pub vision: bool,
    /// A camera (wait at most about one analysis period for an utterance's frames)
    /// rather than a file (wait until they are analysed: deterministic replays).
    pub frames_live: bool,
    /// A file's frames are released at real time (a paced replay with a video file).
    pub pace_frames: bool,
    /// Which shedding steps exist for this stream. None for a file read as fast as
    /// possible (`replay FILE`, `features`, `eval`): it is always "behind", and its
    /// events must not depend on thread timing. Shedding runs only where someone waits
    /// for the events (a live source, a paced file).
    pub shed: Applicable,
}

/// Stream samples in `ms` milliseconds.
pub fn ms_samples(ms: u32) -> u64 {
    ms as u64 * PIPELINE_RATE_HZ as u64 / 1000
}

impl Plan {
    pub fn new(cfg: &Config, i: PlanInputs) -> Self {
        let seg = &cfg.segment;
        let ring_samples =
            (cfg.buffers.ring_ms as usize * PIPELINE_RATE_HZ as usize / 1000).max(VAD_CHUNK * 4);
        let when_full = if i.live {
            WhenFull::DropNewest
        } else {
            WhenFull::Wait
        };
        let audio_keep_s =
            (seg.max_utterance_ms + seg.pre_roll_ms + seg.hangover_ms + seg.post_roll_ms) as f64
                / 1000.0
                + 1.0;
        let context_s = cfg.context.seconds as f64;
        let interim_every_samples = ms_samples(cfg.asr.interim_every_ms);
        let partials = interim_every_samples > 0 && cfg.output.include_transcript;
        let streaming = cfg.asr.stream_step_ms > 0 && (i.live || i.realtime);
        let sheds = i.live || i.realtime;
        Self {
            realtime: i.realtime,
            ring_samples,
            ring_full: when_full,
            utterance_queue: cfg.buffers.utterance_queue,
            utterance_full: when_full,
            event_queue: cfg.buffers.event_queue,
            frame_queue: cfg.vision.frame_queue,
            audio_keep_s,
            context_s,
            frames_keep_s: audio_keep_s + context_s,
            pre_roll_samples: ms_samples(seg.pre_roll_ms),
            post_roll_samples: ms_samples(seg.post_roll_ms),
            partials,
            interim_every_samples,
            interim_thread: partials && !streaming,
            streaming,
            step_every_samples: ms_samples(cfg.asr.stream_step_ms),
            vision: i.vision,
            frames_live: i.vision && i.frames_live,
            pace_frames: i.vision && i.realtime && !i.frames_live,
            shed: Applicable {
                vision_fps: sheds
                    && i.vision
                    && cfg.budget.shed_vision_fps > 0.0
                    && cfg.budget.shed_vision_fps < cfg.vision.analyse_fps,
                asr_model: sheds && i.asr_fallback,
                text: sheds && cfg.budget.shed_text_over_ms > 0 && i.text_encoder,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file() -> PlanInputs {
        PlanInputs {
            asr_fallback: true,
            text_encoder: true,
            ..PlanInputs::default()
        }
    }

    fn live() -> PlanInputs {
        PlanInputs {
            live: true,
            ..file()
        }
    }

    #[test]
    fn a_file_read_flat_out_waits_decodes_one_shot_and_never_sheds() {
        let p = Plan::new(&Config::default(), file());
        assert_eq!(p.ring_full, WhenFull::Wait);
        assert_eq!(p.utterance_full, WhenFull::Wait);
        assert!(!p.streaming, "streaming needs real-time audio");
        assert!(!p.shed.asr_model && !p.shed.text && !p.shed.vision_fps);
        assert!(!p.vision && !p.pace_frames);
    }

    #[test]
    fn a_live_source_drops_instead_of_waiting_and_streams() {
        let cfg = Config::default();
        let p = Plan::new(&cfg, live());
        assert_eq!(p.ring_full, WhenFull::DropNewest);
        assert_eq!(p.utterance_full, WhenFull::DropNewest);
        assert_eq!(p.streaming, cfg.asr.stream_step_ms > 0);
        assert!(p.shed.asr_model);
        assert_eq!(p.shed.text, cfg.budget.shed_text_over_ms > 0);
    }

    #[test]
    fn a_paced_file_streams_and_sheds_but_still_waits_for_room() {
        let p = Plan::new(
            &Config::default(),
            PlanInputs {
                realtime: true,
                ..file()
            },
        );
        assert_eq!(p.ring_full, WhenFull::Wait);
        assert!(p.shed.asr_model);
        assert_eq!(p.streaming, Config::default().asr.stream_step_ms > 0);
    }

    #[test]
    fn ring_and_queue_sizes_follow_the_config() {
        let mut cfg = Config::default();
        cfg.buffers.ring_ms = 2000;
        cfg.buffers.utterance_queue = 3;
        cfg.buffers.event_queue = 7;
        let p = Plan::new(&cfg, file());
        assert_eq!(p.ring_samples, 2 * PIPELINE_RATE_HZ as usize);
        assert_eq!((p.utterance_queue, p.event_queue), (3, 7));
        // A tiny ring still holds four VAD chunks.
        cfg.buffers.ring_ms = 1;
        assert_eq!(Plan::new(&cfg, file()).ring_samples, 4 * VAD_CHUNK);
    }

    #[test]
    fn audio_and_frames_are_kept_for_the_longest_utterance_and_the_context() {
        let mut cfg = Config::default();
        cfg.segment.max_utterance_ms = 15_000;
        cfg.segment.pre_roll_ms = 200;
        cfg.segment.hangover_ms = 500;
        cfg.segment.post_roll_ms = 300;
        cfg.context.seconds = 30.0;
        let p = Plan::new(&cfg, file());
        assert!((p.audio_keep_s - 17.0).abs() < 1e-9);
        assert!((p.frames_keep_s - 47.0).abs() < 1e-9);
        assert_eq!(p.pre_roll_samples, ms_samples(200));
        assert_eq!(p.post_roll_samples, ms_samples(300));
    }

    #[test]
    fn interim_text_has_its_own_thread_only_without_streaming() {
        let mut cfg = Config::default();
        cfg.asr.interim_every_ms = 1000;
        cfg.asr.stream_step_ms = 1000;
        let p = Plan::new(&cfg, live());
        assert!(p.partials && p.streaming && !p.interim_thread);
        cfg.asr.stream_step_ms = 0;
        let p = Plan::new(&cfg, live());
        assert!(p.partials && !p.streaming && p.interim_thread);
        assert_eq!(p.interim_every_samples, ms_samples(1000));
        // No transcripts in the output: no interim text either.
        cfg.output.include_transcript = false;
        let p = Plan::new(&cfg, live());
        assert!(!p.partials && !p.interim_thread);
    }

    #[test]
    fn the_frame_rate_step_exists_only_with_vision_and_a_lower_rate() {
        let mut cfg = Config::default();
        cfg.vision.analyse_fps = 4.0;
        cfg.budget.shed_vision_fps = 2.0;
        let with_camera = PlanInputs {
            vision: true,
            frames_live: true,
            ..live()
        };
        assert!(Plan::new(&cfg, with_camera).shed.vision_fps);
        assert!(!Plan::new(&cfg, live()).shed.vision_fps);
        cfg.budget.shed_vision_fps = 4.0;
        assert!(!Plan::new(&cfg, with_camera).shed.vision_fps);
    }

    #[test]
    fn only_a_paced_video_file_is_paced() {
        let cfg = Config::default();
        let paced_file = PlanInputs {
            realtime: true,
            vision: true,
            ..file()
        };
        assert!(Plan::new(&cfg, paced_file).pace_frames);
        let camera = PlanInputs {
            frames_live: true,
            ..paced_file
        };
        let p = Plan::new(&cfg, camera);
        assert!(!p.pace_frames && p.frames_live);
    }
}
