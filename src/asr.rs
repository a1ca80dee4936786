//! Speech recognition with whisper.cpp (whisper-rs).
//!
//! Inputs are checked before they reach native code: the model header is read and
//! validated in Rust (a malformed file makes whisper.cpp abort the whole process), the
//! audio is finite and padded to the 1 s whisper.cpp needs. whisper.cpp's own logging is
//! routed into `log` so nothing native is printed on stdout.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CStr};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Once;

use serde::{Deserialize, Serialize};
use thiserror::Error;
use whisper_rs::{
    FullParams, SamplingStrategy, WhisperContext, WhisperContextParameters, WhisperState,
};

use crate::audio::PIPELINE_RATE_HZ;
use crate::config::FieldError;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct AsrConfig {
    /// `tiny.en`, `tiny.en-q8_0`, `base`, `base-q8_0` (from the model cache).
    pub model: String,
    /// `en`, `de` or `auto` (detect per utterance; needs a multilingual model).
    pub language: String,
    /// whisper.cpp threads for decodes only captions wait on (streaming steps while
    /// someone speaks, interim text). On 2 cores 1 is cheaper while the rest of the
    /// pipeline runs (ggml's workers busy-wait).
    pub threads: u32,
    /// whisper.cpp threads for decodes an event waits on: the final transcript and
    /// streaming's speculative decode at a pause. 0 = `threads`. These run while the
    /// speaker is silent, when the VAD and prosody need little CPU.
    pub final_threads: u32,
    /// Segments whose no-speech probability exceeds this are dropped as non-speech.
    pub no_speech_threshold: f32,
    /// Run the encoder only over the audio present (plus a margin) instead of the full
    /// 30 s window: several times faster on short utterances.
    pub trim_encoder: bool,
    /// With `language = "auto"`, the languages detection may choose from. Whisper's
    /// free choice among ~100 languages is unreliable on short utterances (short German
    /// sarcasm came out as Thai), so a room's languages are stated.
    pub auto_languages: Vec<String>,
    /// Decode the utterance in progress every this many milliseconds and emit its
    /// interim text as `partial` events (live captions). 0 = off. Costs a second
    /// Whisper state and roughly one extra decode per interval while someone speaks.
    pub interim_every_ms: u32,
    /// Streaming recognition: while someone speaks, decode the utterance so far every
    /// this many milliseconds and commit the words two decodes agree on, so the end of
    /// speech leaves only the tail to decode. 0 = decode each utterance once, after it
    /// ends (the one-shot baseline of `sarcasmd bench`). With streaming on, interim
    /// text (`interim_every_ms` > 0) comes from these steps at no extra cost.
    pub stream_step_ms: u32,
    /// Load shedding step 2: a smaller Whisper model (one of the `model` names) that
    /// decodes final transcripts while the analyser is behind. Loaded at start, so it
    /// costs its memory all the time. Empty = none (the step is skipped).
    pub fallback_model: String,
}

impl Default for AsrConfig {
    fn default() -> Self {
        Self {
            model: "tiny.en-q8_0".into(),
            language: "en".into(),
            threads: 1,
            final_threads: 0,
            no_speech_threshold: 0.6,
            trim_encoder: true,
            auto_languages: vec!["en".into(), "de".into()],
            interim_every_ms: 0,
            stream_step_ms: 1000,
            fallback_model: String::new(),
        }
    }
}

pub const KNOWN_MODELS: &[&str] = &["tiny.en", "tiny.en-q8_0", "base", "base-q8_0"];

impl AsrConfig {
    pub fn validate(&self) -> Result<(), FieldError> {
        if !KNOWN_MODELS.contains(&self.model.as_str()) {
            return Err(FieldError::new(
                "asr.model",
                format!("`{}` is not one of {}", self.model, KNOWN_MODELS.join(", ")),
            ));
        }
        match self.language.as_str() {
            "en" => {}
            "de" | "auto" if self.model.contains(".en") => {
                return Err(FieldError::new(
                    "asr.language",
                    format!(
                        "`{}` needs a multilingual model; `{}` is English-only (use `base` or `base-q8_0`)",
                        self.language, self.model
                    ),
                ))
            }
            "de" | "auto" => {}
            other => {
                return Err(FieldError::new(
                    "asr.language",
                    format!("`{other}` is not one of en, de, auto"),
                ))
            }
        }
        if self.interim_every_ms != 0 && !(300..=10_000).contains(&self.interim_every_ms) {
            return Err(FieldError::new(
                "asr.interim_every_ms",
                "must be 0 (off) or within 300..=10000",
            ));
        }
        if self.stream_step_ms != 0 && !(300..=5_000).contains(&self.stream_step_ms) {
            return Err(FieldError::new(
                "asr.stream_step_ms",
                "must be 0 (one-shot decoding) or within 300..=5000",
            ));
        }
        if self.auto_languages.is_empty() {
            return Err(FieldError::new(
                "asr.auto_languages",
                "must name at least one language",
            ));
        }
        for l in &self.auto_languages {
            if whisper_rs::get_lang_id(l).is_none() {
                return Err(FieldError::new(
                    "asr.auto_languages",
                    format!("`{l}` is not a Whisper language code"),
                ));
            }
        }
        if !self.fallback_model.is_empty() {
            let field = "asr.fallback_model";
            if !KNOWN_MODELS.contains(&self.fallback_model.as_str()) {
                return Err(FieldError::new(
                    field,
                    format!(
                        "`{}` is not one of {} (or empty for none)",
                        self.fallback_model,
                        KNOWN_MODELS.join(", ")
                    ),
                ));
            }
            if model_cost_rank(&self.fallback_model) >= model_cost_rank(&self.model) {
                return Err(FieldError::new(
                    field,
                    format!(
                        "`{}` is not smaller than asr.model `{}` (smallest first: {})",
                        self.fallback_model,
                        self.model,
                        BY_COST.join(", ")
                    ),
                ));
            }
            if self.language != "en" && self.fallback_model.contains(".en") {
                return Err(FieldError::new(
                    field,
                    format!(
                        "`{}` is English-only but asr.language is `{}`",
                        self.fallback_model, self.language
                    ),
                ));
            }
        }
        if !(1..=16).contains(&self.threads) {
            return Err(FieldError::new("asr.threads", "must be within 1..=16"));
        }
        if self.final_threads > 16 {
            return Err(FieldError::new(
                "asr.final_threads",
                "must be within 0..=16 (0 = asr.threads)",
            ));
        }
        if !(0.0..=1.0).contains(&self.no_speech_threshold) {
            return Err(FieldError::new(
                "asr.no_speech_threshold",
                "must be within 0..=1",
            ));
        }
        Ok(())
    }

    /// whisper.cpp threads for a decode of this urgency.
    pub fn threads_for(&self, urgency: Urgency) -> u32 {
        match urgency {
            Urgency::Captions => self.threads,
            Urgency::Event if self.final_threads > 0 => self.final_threads,
            Urgency::Event => self.threads,
        }
    }

    /// The model-store name of the configured Whisper model.
    pub fn store_name(&self) -> String {
        format!("whisper-{}", self.model)
    }

    /// The model-store name of the fallback model, if one is configured.
    pub fn fallback_store_name(&self) -> Option<String> {
        (!self.fallback_model.is_empty()).then(|| format!("whisper-{}", self.fallback_model))
    }
}

/// The models from cheapest to dearest to run (file size order).
const BY_COST: &[&str] = &["tiny.en-q8_0", "tiny.en", "base-q8_0", "base"];

fn model_cost_rank(model: &str) -> usize {
    BY_COST
        .iter()
        .position(|m| *m == model)
        .unwrap_or(usize::MAX)
}

#[derive(Debug, Error)]
pub enum AsrError {
    #[error("{path}: not a whisper.cpp ggml model: {reason}. Run `scripts/fetch-models.sh` to rebuild it")]
    BadModel { path: PathBuf, reason: String },
    #[error("{path}: whisper.cpp could not load the model ({source:?})")]
    Load {
        path: PathBuf,
        source: whisper_rs::WhisperError,
    },
    #[error("whisper.cpp failed to transcribe {seconds:.2} s of audio: {source:?}")]
    Transcribe {
        seconds: f64,
        source: whisper_rs::WhisperError,
    },
    #[error("audio for ASR contains a non-finite sample at index {0}")]
    NonFinite(usize),
}

/// The fields of a ggml Whisper header we check before loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgmlHeader {
    pub n_vocab: i32,
    pub n_audio_ctx: i32,
    pub n_audio_state: i32,
    pub n_audio_layer: i32,
    pub n_text_layer: i32,
    pub n_mels: i32,
    pub ftype: i32,
}

pub fn read_ggml_header(path: &Path) -> Result<GgmlHeader, AsrError> {
    let bad = |reason: String| AsrError::BadModel {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = crate::file_kind::regular_file(path)
        .and_then(|_| std::fs::File::open(path))
        .map_err(|e| bad(e.to_string()))?;
    let mut b = [0u8; 48];
    f.read_exact(&mut b)
        .map_err(|_| bad("shorter than a ggml header (48 bytes)".into()))?;
    let w = |i: usize| i32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
    if w(0) as u32 != 0x6767_6d6c {
        return Err(bad(format!(
            "magic is {:#010x}, expected 0x67676d6c",
            w(0) as u32
        )));
    }
    let h = GgmlHeader {
        n_vocab: w(1),
        n_audio_ctx: w(2),
        n_audio_state: w(3),
        n_audio_layer: w(5),
        n_text_layer: w(9),
        n_mels: w(10),
        ftype: w(11),
    };
    let sane = (51_000..=52_000).contains(&h.n_vocab)
        && h.n_audio_ctx == 1500
        && [384, 512, 768, 1024, 1280].contains(&h.n_audio_state)
        && (1..=64).contains(&h.n_audio_layer)
        && (1..=64).contains(&h.n_text_layer)
        && (h.n_mels == 80 || h.n_mels == 128);
    if !sane {
        return Err(bad(format!("implausible hyper-parameters {h:?}")));
    }
    Ok(h)
}

static LOG_HOOKS: Once = Once::new();

/// Where whisper.cpp's own log lines go in `log` (the target whisper-rs used, so
/// existing `RUST_LOG` filters keep working).
const NATIVE_LOG_TARGET: &str = "whisper_rs::whisper_logging_hook";

thread_local! {
    /// Set while a decode on this thread is being abandoned: whisper.cpp then logs
    /// "failed to encode/decode" as an error, which is expected and must not alarm.
    static ABANDONING: Cell<bool> = const { Cell::new(false) };
}

/// whisper.cpp's log lines into `log`, like whisper-rs's hook, except that errors of an
/// abandoned decode are debug lines.
unsafe extern "C" fn native_log(
    level: whisper_rs::whisper_rs_sys::ggml_log_level,
    text: *const c_char,
    _user_data: *mut c_void,
) {
    if text.is_null() {
        return;
    }
    // SAFETY: whisper.cpp passes a NUL-terminated string valid for this call.
    let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let level = match level {
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_ERROR => log::Level::Error,
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_WARN => log::Level::Warn,
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_INFO => log::Level::Info,
        whisper_rs::whisper_rs_sys::ggml_log_level_GGML_LOG_LEVEL_DEBUG => log::Level::Debug,
        _ => log::Level::Trace,
    };
    let level = if ABANDONING.with(Cell::get) {
        level.max(log::Level::Debug)
    } else {
        level
    };
    log::log!(target: NATIVE_LOG_TARGET, level, "{text}");
}

/// whisper.cpp's abort callback: `user_data` points at the caller's `&dyn Fn() -> bool`.
unsafe extern "C" fn abandon_if(user_data: *mut c_void) -> bool {
    // SAFETY: set in `decode` to a reference that outlives the `full` call.
    let should = unsafe { &*(user_data as *const &dyn Fn() -> bool) };
    let abandon = should();
    if abandon {
        ABANDONING.with(|a| a.set(true));
    }
    abandon
}

fn install_log_hooks() {
    // ggml's own lines through whisper-rs; whisper.cpp's through ours.
    whisper_rs::install_logging_hooks();
    // SAFETY: a plain function pointer and no user data.
    unsafe { whisper_rs::whisper_rs_sys::whisper_log_set(Some(native_log), std::ptr::null_mut()) };
}

/// A loaded Whisper model, shared by all streams.
pub struct AsrModel {
    ctx: WhisperContext,
    pub multilingual: bool,
    pub path: PathBuf,
}

impl AsrModel {
    pub fn load(path: &Path) -> Result<Self, AsrError> {
        LOG_HOOKS.call_once(install_log_hooks);
        read_ggml_header(path)?;
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

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AsrSegment {
    /// Seconds from the start of the audio handed in.
    pub start_s: f64,
    pub end_s: f64,
    pub text: String,
    pub no_speech_prob: f32,
    /// Words with their token ids (streaming decoding); only with `want_words`.
    #[serde(skip)]
    pub words: Vec<AsrWord>,
}

/// One word of a decode: text as Whisper wrote it (leading space included) and times
/// from whisper.cpp's token timestamps (approximate: often a word late with tiny.en).
#[derive(Debug, Clone, PartialEq)]
pub struct AsrWord {
    pub text: String,
    pub start_s: f64,
    pub end_s: f64,
}

#[derive(Debug, Clone, PartialEq, Default, Serialize)]
pub struct Transcript {
    pub text: String,
    pub language: String,
    pub segments: Vec<AsrSegment>,
    /// What the hallucination guards did, e.g. `no_speech`, `repetition_collapsed`.
    pub guards: Vec<&'static str>,
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

/// Who waits on a decode; sets its thread count (`asr.threads` / `asr.final_threads`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Urgency {
    /// Only captions: streaming steps during speech, interim text.
    Captions,
    /// An utterance event: its final transcript, or the speculative decode at a pause.
    Event,
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
        let mut p = FullParams::new(SamplingStrategy::Greedy { best_of: 1 });
        p.set_n_threads(threads as i32);
        p.set_translate(false);
        let lang: &str = if !self.multilingual {
            "en"
        } else if self.cfg.language == "auto" {
            self.detect_language(seconds, threads as usize)?
        } else {
            self.cfg.language.as_str()
        };
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
            let ctx = ((seconds + ENCODER_MARGIN_S) * 50.0).ceil() as i32;
            p.set_audio_ctx(ctx.min(1500));
        }
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
        for seg in self.state.as_iter() {
            let text = seg
                .to_str_lossy()
                .map(|c| c.into_owned())
                .unwrap_or_default();
            let mut words: Vec<AsrWord> = Vec::new();
            if want_words {
                for i in 0..seg.n_tokens() {
                    let Some(tok) = seg.get_token(i) else {
                        continue;
                    };
                    let d = tok.token_data();
                    if d.id >= self.first_special_token {
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
            }
            // With `single_segment`, whisper.cpp ends the segment at the end of its 30 s
            // window, not of the audio (seen: 0.34-30.34 s for a 1.6 s decode).
            out.segments.push(AsrSegment {
                start_s: (seg.start_timestamp() as f64 / 100.0).min(seconds),
                end_s: (seg.end_timestamp() as f64 / 100.0).min(seconds),
                text,
                no_speech_prob: seg.no_speech_probability(),
                words,
            });
        }
        apply_guards(&mut out, self.cfg.no_speech_threshold);
        Ok(Some(out))
    }
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

/// Hallucination guards on Whisper output (the VAD gate in front is the first one).
pub fn apply_guards(t: &mut Transcript, no_speech_threshold: f32) {
    let before = t.segments.len();
    t.segments
        .retain(|s| s.no_speech_prob <= no_speech_threshold);
    if t.segments.len() < before {
        t.guards.push("no_speech");
    }
    // On the segments, not only the text: captions are cut from them and streaming
    // rebuilds text from their words.
    if remove_doubled_spans(&mut t.segments) {
        t.guards.push("doubling_removed");
    }
    let joined: String = t
        .segments
        .iter()
        .map(|s| s.text.trim())
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join(" ");
    let cleaned = strip_annotations(&joined);
    if cleaned != joined.trim() {
        t.guards.push("annotation_removed");
    }
    let (collapsed, changed) = collapse_repeats(&cleaned);
    if changed {
        t.guards.push("repetition_collapsed");
    }
    t.text = collapsed;
}

/// Remove non-speech annotations Whisper emits on noise: `[Music]`, `(laughs)`, `*sigh*`.
pub fn strip_annotations(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut depth: Option<char> = None;
    for c in s.chars() {
        match (depth, c) {
            (None, '[') => depth = Some(']'),
            (None, '(') => depth = Some(')'),
            (None, '*') => depth = Some('*'),
            (Some(close), c) if c == close => depth = None,
            (Some(_), _) => {}
            (None, c) => out.push(c),
        }
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A span of at least this many words written twice in a row is Whisper copying itself
/// (a second segment over the last fraction of a second of audio, or past its end).
/// Speech repeats shorter spans: 37,520 texts of ../shared/data (sitcom dialogue,
/// tweets, headlines) have back-to-back repeats of up to 4 words ("oh god I'm sorry, oh
/// god I'm sorry"), none of 5 or more.
pub const MIN_DOUBLED_WORDS: usize = 5;

/// Drop every further copy of a span of [`MIN_DOUBLED_WORDS`]+ words that follows
/// itself (case and punctuation aside, across segment boundaries) from the segments'
/// text and words; segments left empty go. Loops of short phrases are left to
/// [`collapse_repeats`]. Returns whether anything was dropped.
pub fn remove_doubled_spans(segments: &mut Vec<AsrSegment>) -> bool {
    // Pieces (segment, word) in order: a decode with token times has its words, one
    // without has its text split at spaces.
    let mut pieces: Vec<(usize, String)> = Vec::new();
    for (i, seg) in segments.iter().enumerate() {
        if seg.words.is_empty() {
            pieces.extend(seg.text.split_whitespace().map(|w| (i, format!(" {w}"))));
        } else {
            pieces.extend(seg.words.iter().map(|w| (i, w.text.clone())));
        }
    }
    let mut drop = vec![false; pieces.len()];
    // Indices of pieces that are words (not punctuation alone), and their normal form.
    let (at, words): (Vec<usize>, Vec<String>) = pieces
        .iter()
        .enumerate()
        .map(|(i, (_, p))| (i, crate::streaming::normalise_word(p)))
        .filter(|(_, w)| !w.is_empty())
        .unzip();
    let mut i = 0;
    while i < words.len() {
        // The longest span starting here that follows itself, and how many copies.
        let found = (MIN_DOUBLED_WORDS..=(words.len() - i) / 2)
            .rev()
            .find(|&n| words[i..i + n] == words[i + n..i + 2 * n]);
        let Some(n) = found else {
            i += 1;
            continue;
        };
        let mut copies = 2;
        while i + (copies + 1) * n <= words.len()
            && words[i..i + n] == words[i + copies * n..i + (copies + 1) * n]
        {
            copies += 1;
        }
        let end = i + copies * n;
        if has_short_loop(&words[i..end]) {
            i += 1;
            continue;
        }
        // Everything from the first word of the second copy to the last of the last.
        for d in &mut drop[at[i + n]..=at[end - 1]] {
            *d = true;
        }
        i = end;
    }
    if !drop.contains(&true) {
        return false;
    }
    // Per segment, its pieces and whether each goes (in the order of its words).
    let mut per_segment: Vec<Vec<(String, bool)>> = vec![Vec::new(); segments.len()];
    for ((seg, piece), d) in pieces.into_iter().zip(drop) {
        per_segment[seg].push((piece, d));
    }
    for (seg, pieces) in segments.iter_mut().zip(per_segment) {
        if !pieces.iter().any(|(_, d)| *d) {
            continue;
        }
        if !seg.words.is_empty() {
            let mut goes = pieces.iter().map(|(_, d)| *d);
            seg.words.retain(|_| !goes.next().unwrap_or(false));
        }
        seg.text = pieces
            .into_iter()
            .filter(|(_, d)| !d)
            .map(|(p, _)| p)
            .collect();
    }
    segments.retain(|s| !s.text.trim().is_empty());
    true
}

/// Whether `words` is a phrase of up to 6 words said at least three times in a row:
/// [`collapse_repeats`]'s case.
fn has_short_loop(words: &[String]) -> bool {
    (1..=6).any(|p| words.len() >= 3 * p && (p..words.len()).all(|k| words[k] == words[k - p]))
}

/// Collapse an n-gram (n = 1..=6 words) repeated more than twice in a row to one copy:
/// Whisper's decoder loops produce exactly this.
pub fn collapse_repeats(s: &str) -> (String, bool) {
    let mut words: Vec<&str> = s.split_whitespace().collect();
    let norm = |w: &str| {
        w.trim_matches(|c: char| !c.is_alphanumeric())
            .to_lowercase()
    };
    let mut changed = false;
    for n in 1..=6usize {
        let mut i = 0;
        while i + 3 * n <= words.len() {
            let same =
                |a: usize, b: usize| (0..n).all(|k| norm(words[a + k]) == norm(words[b + k]));
            let mut reps = 1;
            while i + (reps + 1) * n <= words.len() && same(i, i + reps * n) {
                reps += 1;
            }
            if reps >= 3 {
                words.drain(i + n..i + reps * n);
                changed = true;
            }
            i += 1;
        }
    }
    (words.join(" "), changed)
}

#[cfg(test)]
mod tests {
    use super::*;

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
