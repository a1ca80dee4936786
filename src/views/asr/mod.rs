//! Speech recognition with whisper.cpp (whisper-rs).
//!
//! Inputs are checked before they reach native code: the model header is read and
//! validated in Rust (a malformed file makes whisper.cpp abort the whole process), the
//! audio is finite and padded to the 1 s whisper.cpp needs. whisper.cpp's own logging is
//! routed into `log` so nothing native is printed on stdout.
//!
//! Files: this one the shared model and the per-stream decoder; `config.rs` the `[asr]`
//! section; `header.rs` the ggml header check; `native_log.rs` whisper.cpp's log and
//! abort callbacks; `guards.rs` hallucination guards on the output; `error.rs` the
//! error type; `transcript.rs` what a decode returns; `urgency.rs` who waits on one.

use std::ffi::c_void;
use std::path::{Path, PathBuf};

use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState,
};

use crate::sources::audio::PIPELINE_RATE_HZ;

mod config;
mod error;
mod guards;
mod header;
mod native_log;
pub mod streaming;
mod transcript;
mod urgency;

pub use config::*;
pub use error::AsrError;
pub use guards::*;
pub use header::*;
use native_log::*;
pub use transcript::{AsrSegment, AsrWord, Transcript};
pub use urgency::Urgency;

/// A loaded Whisper model, shared by all streams.
pub struct AsrModel {
    ctx: WhisperContext,
    pub multilingual: bool,
    pub path: PathBuf,
}

impl AsrModel {
    pub fn load(path: &Path) -> Result<Self, AsrError> {
        LOG_HOOKS.call_once(install_log_hooks);
        check_ggml_file(path)?;
        let ctx = WhisperContext::new_with_params(path, WhisperContextParameters::default())
            .map_err(|source| AsrError::Load {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Self {
            multilingual: ctx.is_multilingual(),
            ctx,
            path: path.to_path_buf(),
        })
    }

    pub fn stream(&self, cfg: &AsrConfig) -> Result<AsrStream, AsrError> {
        let state = self.ctx.create_state().map_err(|source| AsrError::Load {
            path: self.path.clone(),
            source,
        })?;
        Ok(AsrStream {
            state,
            cfg: cfg.clone(),
            multilingual: self.multilingual,
            padded: Vec::new(),
            first_special_token: self.ctx.token_eot(),
        })
    }
}

/// Per-stream decoder state.
pub struct AsrStream {
    state: WhisperState,
    cfg: AsrConfig,
    multilingual: bool,
    padded: Vec<f32>,
    /// Token ids at or above this (end of text, start of transcript, timestamps...) are
    /// not text.
    first_special_token: i32,
}

/// whisper.cpp refuses input shorter than 1 s; pad with a little margin.
const MIN_SAMPLES: usize = PIPELINE_RATE_HZ as usize * 105 / 100;

/// Seconds of silence the trimmed encoder sees after the audio (`asr.trim_encoder`).
/// Whisper learnt to end a transcript where speech gives way to silence in a 30 s
/// window; with only 1 s after the audio, tiny.en often ended its segment with a
/// timestamp short of the end, and whisper.cpp, which stops only at end-of-text or a
/// timestamp within 100 ms of the end, let it open a second segment and write the
/// sentence again ("Go to morning everyone, let's load! Go to morning everyone, let's
/// load!" for 2.31 s of speech cut off at SIGTERM, the copy timed 2.00-4.00 s). 129
/// House clips, 2026-11-25: a span of 5+ words written twice in 14 whole clips and 17
/// cut at 70 % with 1 s, none with 3 s; WER 31.9 -> 18.0 % (the untrimmed 30 s window:
/// 15.5 %, at 6x the time). The cost: 15-25 % more CPU per audio second (`sarcasmd
/// bench` on samples/meeting.wav, a busy 2-core machine: one-shot 0.052-0.055 -> 0.063,
/// streaming 0.067-0.070 -> 0.084-0.089; its WER went 21.3 -> 19.1 %).
const ENCODER_MARGIN_S: f64 = 3.0;

/// The margin for single-segment decodes (streaming steps, the decode at a pause, a
/// final tail after a commit): whisper.cpp cannot open a second segment there, so the
/// doubling above cannot happen, and every encoder position costs the event waiting on
/// the decode. 3-minute espeak meeting, a 2-core Zen 4 host shared with other work,
/// one run each (2026-11-26): 3 s -> 1 s took the end-of-speech -> flag p95 from
/// 974 to 607 ms and CPU from 0.119 to 0.088 CPU-s per audio-s; WER 11.7 -> 11.0 %.
const SINGLE_SEGMENT_ENCODER_MARGIN_S: f64 = 1.0;

impl AsrStream {
    /// A final transcript of `samples` (one-shot decoding).
    pub fn transcribe(&mut self, samples: &[f32]) -> Result<Transcript, AsrError> {
        self.transcribe_with(samples, false, Urgency::Event)
    }

    /// Decode `samples`, with word timings when `want_words` (streaming: one segment,
    /// words with token times).
    pub fn transcribe_with(
        &mut self,
        samples: &[f32],
        want_words: bool,
        urgency: Urgency,
    ) -> Result<Transcript, AsrError> {
        Ok(self
            .decode(samples, want_words, urgency, None)?
            .expect("a decode without an abandon condition completes"))
    }

    /// [`transcribe_with`](Self::transcribe_with), abandoned (`Ok(None)`) as soon as
    /// `abandon` returns true; whisper.cpp asks between graph steps of the encoder and
    /// before each decoder step, so an abandoned decode stops within milliseconds.
    pub fn transcribe_unless(
        &mut self,
        samples: &[f32],
        want_words: bool,
        urgency: Urgency,
        abandon: &dyn Fn() -> bool,
    ) -> Result<Option<Transcript>, AsrError> {
        if abandon() {
            return Ok(None);
        }
        self.decode(samples, want_words, urgency, Some(abandon))
    }

    fn decode(
        &mut self,
        samples: &[f32],
        want_words: bool,
        urgency: Urgency,
        abandon: Option<&dyn Fn() -> bool>,
    ) -> Result<Option<Transcript>, AsrError> {
        if let Some(i) = samples.iter().position(|s| !s.is_finite()) {
            return Err(AsrError::NonFinite(i));
        }
        self.padded.clear();
        self.padded.extend_from_slice(samples);
        if self.padded.len() < MIN_SAMPLES {
            self.padded.resize(MIN_SAMPLES, 0.0);
        }
        let seconds = self.padded.len() as f64 / PIPELINE_RATE_HZ as f64;

        let threads = self.cfg.threads_for(urgency);
        let lang: &str = if !self.multilingual {
            "en"
        } else if self.cfg.language == "auto" {
            self.detect_language(seconds, threads as usize)?
        } else {
            self.cfg.language.as_str()
        };
        let mut p = self.params(lang, seconds, threads, want_words);
        // `abandon` is this frame's argument, alive until `full` returns, which is as
        // long as whisper.cpp may call back with a pointer to it.
        if let Some(f) = abandon.as_ref() {
            // SAFETY: `abandon_if` reads `user_data` as `*const &dyn Fn() -> bool`,
            // which `f` is, and only during `full` below.
            unsafe {
                p.set_abort_callback(Some(abandon_if));
                p.set_abort_callback_user_data(f as *const &dyn Fn() -> bool as *mut c_void);
            }
        }
        ABANDONING.with(|a| a.set(false));
        let r = self.state.full(p, &self.padded);
        let abandoned = ABANDONING.with(|a| a.replace(false));
        if abandoned {
            return Ok(None);
        }
        r.map_err(|source| AsrError::Transcribe { seconds, source })?;

        let mut out = Transcript {
            language: lang.to_string(),
            ..Default::default()
        };
        out.segments = self.segments(seconds, want_words);
        apply_guards(&mut out, self.cfg.no_speech_threshold);
        Ok(Some(out))
    }

    /// Whisper's settings for one decode: greedy, no context carried over, no
    /// temperature fallback, a token cap and (with `trim_encoder`) an encoder window
    /// trimmed to the audio.
    fn params<'l>(
        &self,
        lang: &'l str,
        seconds: f64,
        threads: u32,
        want_words: bool,
    ) -> FullParams<'l, 'static> {
        let mut p = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        p.set_n_threads(threads as i32);
        p.set_translate(false);
        p.set_language(Some(lang));
        // Each utterance is decoded on its own: text carried over from a previous
        // utterance is a main source of repeated/hallucinated output.
        p.set_no_context(true);
        p.set_print_special(false);
        p.set_print_progress(false);
        p.set_print_realtime(false);
        p.set_print_timestamps(false);
        p.set_suppress_blank(true);
        p.set_suppress_nst(true);
        p.set_temperature(0.0);
        // No temperature fallback: it multiplies decode time on exactly the hard
        // utterances where latency matters; the repetition guard below covers loops.
        p.set_temperature_inc(0.0);
        p.set_no_speech_thold(self.cfg.no_speech_threshold);
        p.set_token_timestamps(want_words);
        if want_words {
            // Streaming decodes are short (a stretch between commit points): one
            // segment, so the decoder does not seek on through the padding and repeat
            // itself (seen with tiny.en: the same sentence three times).
            p.set_single_segment(true);
        }
        // Speech rarely exceeds ~4 tokens per second; a cap well above that stops a
        // hallucination loop ("A-H-H-H-...") within milliseconds instead of decoding
        // hundreds of tokens (seen: 1.5 s on a 1 s interim window).
        p.set_max_tokens((8.0 + 6.0 * seconds).ceil() as i32);
        if self.cfg.trim_encoder {
            // 50 encoder positions per second of audio, plus a margin; whisper.cpp
            // clamps to the model's 1500.
            let margin = if want_words {
                SINGLE_SEGMENT_ENCODER_MARGIN_S
            } else {
                ENCODER_MARGIN_S
            };
            let ctx = ((seconds + margin) * 50.0).ceil() as i32;
            p.set_audio_ctx(ctx.min(1500));
        }
        p
    }

    /// The decode's segments, with their words when asked (streaming decodes).
    fn segments(&self, seconds: f64, want_words: bool) -> Vec<AsrSegment> {
        let mut segments = Vec::new();
        for seg in self.state.as_iter() {
            let text = seg
                .to_str_lossy()
                .map(|c| c.into_owned())
                .unwrap_or_default();
            let words = if want_words {
                words_of(&seg, self.first_special_token)
            } else {
                Vec::new()
            };
            // With `single_segment`, whisper.cpp ends the segment at the end of its 30 s
            // window, not of the audio (seen: 0.34-30.34 s for a 1.6 s decode).
            segments.push(AsrSegment {
                start_s: (seg.start_timestamp() as f64 / 100.0).min(seconds),
                end_s: (seg.end_timestamp() as f64 / 100.0).min(seconds),
                text,
                no_speech_prob: seg.no_speech_probability(),
                words,
            });
        }
        segments
    }
}

/// The words of a segment from its tokens: a piece without a leading space continues
/// the word before it; special tokens are left out.
fn words_of(seg: &whisper_rs::WhisperSegment<'_>, first_special: i32) -> Vec<AsrWord> {
    let mut words: Vec<AsrWord> = Vec::new();
    for i in 0..seg.n_tokens() {
        let Some(tok) = seg.get_token(i) else {
            continue;
        };
        let d = tok.token_data();
        if d.id >= first_special {
            continue;
        }
        let piece = tok
            .to_str_lossy()
            .map(|c| c.into_owned())
            .unwrap_or_default();
        let (t0, t1) = (d.t0 as f64 / 100.0, d.t1 as f64 / 100.0);
        match words.last_mut() {
            // A piece without a leading space continues the word (sub-word
            // tokens, punctuation).
            Some(w) if !piece.starts_with(' ') => {
                w.text.push_str(&piece);
                w.end_s = w.end_s.max(t1);
            }
            _ => words.push(AsrWord {
                text: piece,
                start_s: t0,
                end_s: t1.max(t0),
            }),
        }
    }
    words
}

impl AsrStream {
    /// Most probable language among `auto_languages` (one extra encoder pass).
    fn detect_language(&mut self, seconds: f64, threads: usize) -> Result<&'static str, AsrError> {
        let err = |source| AsrError::Transcribe { seconds, source };
        self.state.pcm_to_mel(&self.padded, threads).map_err(err)?;
        let (_, probs) = self.state.lang_detect(0, threads).map_err(err)?;
        let mut best: Option<(&'static str, f32)> = None;
        for l in &self.cfg.auto_languages {
            let Some(id) = whisper_rs::get_lang_id(l) else {
                continue;
            };
            let p = probs.get(id as usize).copied().unwrap_or(0.0);
            let code = whisper_rs::get_lang_str(id).unwrap_or("en");
            if best.is_none_or(|(_, bp)| p > bp) {
                best = Some((code, p));
            }
        }
        Ok(best.map_or("en", |(c, _)| c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::validate::Validate;

    #[test]
    fn fallback_model_must_be_smaller_and_speak_the_language() {
        let cfg = |model: &str, language: &str, fallback: &str| AsrConfig {
            model: model.into(),
            language: language.into(),
            fallback_model: fallback.into(),
            ..Default::default()
        };
        assert!(cfg("base-q8_0", "en", "tiny.en-q8_0").validate().is_ok());
        assert!(cfg("base", "de", "base-q8_0").validate().is_ok());
        assert!(cfg("tiny.en-q8_0", "en", "").validate().is_ok());
        for (c, why) in [
            (cfg("tiny.en-q8_0", "en", "base-q8_0"), "not smaller"),
            (cfg("tiny.en-q8_0", "en", "tiny.en-q8_0"), "not smaller"),
            (cfg("base-q8_0", "auto", "tiny.en-q8_0"), "English-only"),
            (cfg("base-q8_0", "en", "small"), "is not one of"),
        ] {
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, "asr.fallback_model");
            assert!(e.reason.contains(why), "{}", e.reason);
        }
    }

    #[test]
    fn decodes_an_event_waits_on_use_final_threads() {
        let mut c = AsrConfig {
            threads: 1,
            ..Default::default()
        };
        // Unset, every decode uses `threads` (configs from before the key keep parsing
        // and behave as before).
        assert_eq!(c.threads_for(Urgency::Event), 1);
        c.final_threads = 2;
        assert_eq!(c.threads_for(Urgency::Event), 2);
        assert_eq!(c.threads_for(Urgency::Captions), 1);
        assert!(c.validate().is_ok());
        c.final_threads = 17;
        assert_eq!(c.validate().unwrap_err().field, "asr.final_threads");
    }

    #[test]
    fn loops_are_collapsed_but_emphasis_kept() {
        assert_eq!(collapse_repeats("no no no no no").0, "no");
        assert_eq!(
            collapse_repeats("I said, I said, I said, I said it").0,
            "I said, it"
        );
        let (s, changed) = collapse_repeats("no, no. Fine.");
        assert_eq!(s, "no, no. Fine.");
        assert!(!changed);
    }

    fn segment(start_s: f64, end_s: f64, text: &str) -> AsrSegment {
        AsrSegment {
            start_s,
            end_s,
            text: text.into(),
            no_speech_prob: 0.1,
            words: vec![],
        }
    }

    fn guarded(segments: Vec<AsrSegment>) -> Transcript {
        let mut t = Transcript {
            segments,
            ..Default::default()
        };
        apply_guards(&mut t, 0.6);
        t
    }

    #[test]
    fn a_sentence_written_twice_keeps_one_copy() {
        // As whisper.cpp returned it for speech cut off at SIGTERM: the copy is a segment
        // of its own.
        let t = guarded(vec![
            segment(0.0, 2.0, " Go to morning, everyone, let's load!"),
            segment(2.0, 2.31, " Go to morning, everyone, let's load!"),
        ]);
        assert_eq!(t.text, "Go to morning, everyone, let's load!");
        assert_eq!(t.guards, vec!["doubling_removed"]);
        // Captions are cut from the segments: the copy must not be there either.
        assert_eq!(t.segments.len(), 1, "{:?}", t.segments);
        assert_eq!(t.segments[0].text, " Go to morning, everyone, let's load!");

        // Inside one segment, with case and punctuation differing at the join.
        let t = guarded(vec![segment(
            0.0,
            3.0,
            " Go to morning, everyone, let's load. go to morning everyone, let's load!",
        )]);
        assert_eq!(t.text, "Go to morning, everyone, let's load.");
        assert_eq!(t.segments[0].text, " Go to morning, everyone, let's load.");
        assert_eq!(t.guards, vec!["doubling_removed"]);

        // A copy that starts after words said once.
        let t = guarded(vec![segment(
            0.0,
            4.0,
            " Well, I wonder if that's significant. I wonder if that's significant.",
        )]);
        assert_eq!(t.text, "Well, I wonder if that's significant.");
    }

    #[test]
    fn a_doubled_streaming_decode_loses_the_copy_from_its_words_too() {
        // Streaming rebuilds text from words (`without_overlap`, LocalAgreement), so the
        // words must agree with the text.
        let words: Vec<AsrWord> =
            "Oh great, another meeting today. Oh great, another meeting today."
                .split_whitespace()
                .enumerate()
                .map(|(i, w)| AsrWord {
                    text: format!(" {w}"),
                    start_s: i as f64 * 0.3,
                    end_s: i as f64 * 0.3 + 0.25,
                })
                .collect();
        let mut seg = segment(0.0, 3.0, "");
        seg.text = words.iter().map(|w| w.text.as_str()).collect();
        seg.words = words;
        let t = guarded(vec![seg]);
        assert_eq!(t.text, "Oh great, another meeting today.");
        let kept: String = t.segments[0]
            .words
            .iter()
            .map(|w| w.text.as_str())
            .collect();
        assert_eq!(kept, " Oh great, another meeting today.");
        assert_eq!(t.segments[0].text, kept);
        // The first copy's words, with their times.
        assert_eq!(t.segments[0].words.last().unwrap().start_s, 1.2);
    }

    #[test]
    fn repeats_people_make_are_kept() {
        // Back-to-back repeats of up to 4 words occur in real dialogue ("oh god I'm sorry,
        // oh god I'm sorry"); none of 5 or more in 37,520 texts of ../shared/data.
        for s in [
            "Oh god, I'm sorry. Oh god, I'm sorry.",
            "The redheads are coming, the redheads are coming!",
            "very very good",
            "no, no. Fine.",
            "Thank you. Thank you.",
        ] {
            let t = guarded(vec![segment(0.0, 2.0, &format!(" {s}"))]);
            assert_eq!(t.text, s);
            assert!(t.guards.is_empty(), "{s}: {:?}", t.guards);
        }
        // Not this guard's: "no, no, no" is below its span, and loops of short phrases are
        // `collapse_repeats`'s (which keeps emphasis said at most twice).
        let mut segs = vec![segment(0.0, 1.0, " no, no, no")];
        assert!(!remove_doubled_spans(&mut segs));
        assert_eq!(segs[0].text, " no, no, no");
        let t = guarded(vec![segment(0.0, 2.0, " no no no no no no no no no no")]);
        assert_eq!(t.text, "no");
        assert_eq!(t.guards, vec!["repetition_collapsed"]);
    }

    #[test]
    fn annotations_removed() {
        assert_eq!(
            strip_annotations("[Music] Oh great (laughs) *sigh*"),
            "Oh great"
        );
    }

    #[test]
    fn guards_drop_no_speech_segments() {
        let mut t = Transcript {
            segments: vec![
                AsrSegment {
                    start_s: 0.0,
                    end_s: 1.0,
                    text: " Thank you.".into(),
                    no_speech_prob: 0.9,
                    words: vec![],
                },
                AsrSegment {
                    start_s: 1.0,
                    end_s: 2.0,
                    text: " Oh, wonderful.".into(),
                    no_speech_prob: 0.1,
                    words: vec![],
                },
            ],
            ..Default::default()
        };
        apply_guards(&mut t, 0.6);
        assert_eq!(t.text, "Oh, wonderful.");
        assert_eq!(t.guards, vec!["no_speech"]);
    }

    #[test]
    fn header_check_rejects_garbage() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("bad.bin");
        std::fs::write(&p, vec![7u8; 100]).unwrap();
        let e = read_ggml_header(&p).unwrap_err();
        assert!(e.to_string().contains("magic"), "{e}");
        std::fs::write(&p, b"short").unwrap();
        assert!(read_ggml_header(&p).is_err());
    }

    /// A small file laid out as whisper.cpp reads a model: header, mel filters,
    /// vocabulary, one tensor.
    fn tiny_ggml() -> Vec<u8> {
        let mut v = Vec::new();
        let mut w = |x: i32| v.extend_from_slice(&x.to_le_bytes());
        w(0x6767_6d6c);
        for x in [51_864, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1] {
            w(x);
        }
        w(80);
        w(201);
        v.extend(std::iter::repeat_n(0u8, 80 * 201 * 4));
        v.extend_from_slice(&2i32.to_le_bytes());
        for tok in [&b"a"[..], b"bc"] {
            v.extend_from_slice(&(tok.len() as u32).to_le_bytes());
            v.extend_from_slice(tok);
        }
        for x in [2i32, 4, 0, 2, 3] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(b"enc.");
        v.extend(std::iter::repeat_n(0u8, 2 * 3 * 4));
        v
    }

    #[test]
    fn the_layout_walk_refuses_what_whisper_cpp_would_trust_blindly() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.bin");
        std::fs::write(&p, tiny_ggml()).unwrap();
        check_ggml_file(&p).unwrap();
        // The repro: bytes 48-4144 of 0xff (mel filter count -1).
        let mut bad = tiny_ggml();
        bad[48..4144].fill(0xff);
        std::fs::write(&p, &bad).unwrap();
        let e = check_ggml_file(&p).unwrap_err().to_string();
        assert!(e.contains("mel filters -1 x -1"), "{e}");
        // A truncated tensor, a huge vocabulary entry, a tensor with 9 dimensions.
        let good = tiny_ggml();
        std::fs::write(&p, &good[..good.len() - 1]).unwrap();
        let e = check_ggml_file(&p).unwrap_err().to_string();
        assert!(e.contains("only 23 are left"), "{e}");
        let voc = 48 + 8 + 80 * 201 * 4 + 4;
        let mut bad = good.clone();
        bad[voc..voc + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        assert!(check_ggml_file(&p)
            .unwrap_err()
            .to_string()
            .contains("bytes long"));
        let tensor = voc + 4 + 1 + 4 + 2;
        let mut bad = good;
        bad[tensor..tensor + 4].copy_from_slice(&9i32.to_le_bytes());
        std::fs::write(&p, &bad).unwrap();
        assert!(check_ggml_file(&p)
            .unwrap_err()
            .to_string()
            .contains("9 dimensions"));
    }

    #[test]
    fn german_needs_multilingual_model() {
        let c = AsrConfig {
            language: "de".into(),
            ..Default::default()
        };
        assert!(c.validate().unwrap_err().reason.contains("English-only"));
        let c = AsrConfig {
            language: "de".into(),
            model: "base-q8_0".into(),
            ..Default::default()
        };
        c.validate().unwrap();
    }
}
