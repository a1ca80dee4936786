//! Streaming recognition: decode an utterance while it is still being spoken, so that
//! the flag does not wait for a whole decode after the end of speech.
//!
//! - **Speculative decode at each pause.** At the second silent VAD chunk inside an
//!   utterance, the audio since the commit point is decoded while the endpointer's
//!   hangover elapses. If the utterance ends at that pause, this decode *is* the final
//!   transcript (same audio as a one-shot decode, minus the post-roll). If Whisper
//!   ended it with `.`, `?` or `!`, the segmenter may end the utterance after
//!   `segment.sentence_end_hangover_ms` instead of the full hangover.
//! - **Commits** (audio never decoded again) happen at pauses of at least
//!   [`MIN_COMMIT_PAUSE_S`] after at least [`MIN_COMMIT_CHUNK_S`] of speech, a boundary
//!   no word crosses, and, in pause-free stretches longer than [`LONG_STRETCH_S`], by
//!   LocalAgreement-2 (as in whisper_streaming): the longest word prefix two
//!   consecutive decodes agree on, among words ending at least [`COMMIT_LAG_S`] before
//!   the audio does, minus its last word, with the cut just before that word.
//! - Regular steps (every `asr.stream_step_ms`) feed interim captions with the
//!   committed text and the tentative rest; without captions they decode only in long
//!   stretches.
//!
//! Measured on the espeak meeting (docs/streaming.md): every commit costs accuracy with tiny.en,
//! whose token times are often a word late and which decodes short fragments badly
//! (LocalAgreement commits at every 1 s step: 19-21 % WER against 11 % one-shot), so
//! the thresholds keep commits rare and the speculative decode does the work. Decodes
//! get no prompt: tiny.en repeated the committed text given as a prompt ("Good morning
//! everyone, Good morning everyone, ..."). Each decode runs with Whisper's encoder
//! trimmed to the audio it is given.

use std::time::Instant;

use crate::common::words::normalise_word;
use crate::sources::audio::PIPELINE_RATE_HZ;
use crate::views::asr::error::AsrError;
use crate::views::asr::transcript::{AsrSegment, AsrWord, Transcript};
use crate::views::asr::urgency::Urgency;
use crate::views::asr::AsrStream;

const RATE: f64 = PIPELINE_RATE_HZ as f64;

/// Steps with less uncommitted audio than this are skipped: Whisper pads to 1 s anyway
/// and a fragment this short rarely holds a whole word.
const MIN_STEP_SAMPLES: usize = PIPELINE_RATE_HZ as usize / 2;

/// A pause must last this long to be a commit point: the VAD dips for a chunk or two
/// inside words (plosives), and a cut there splits the word; short pauses inside a
/// sentence also leave Whisper too little context on either side (measured with 90 ms:
/// 19 % WER on a 2-minute espeak meeting where one-shot decoding had 11 %).
pub const MIN_COMMIT_PAUSE_S: f64 = 0.25;

/// A shorter pause is a commit point too when the decode up to it ends a sentence: the
/// VAD measures espeak's ~300 ms sentence pauses as 224 or 288 ms, and a turn of two
/// sentences was otherwise decoded whole at its end (~6.5 s of audio: ~0.8 s on a 2-core
/// Zen 4 host). 3-minute espeak meeting: p95 607 -> 552 ms, WER 11.0 % both (one run each).
pub const MIN_SENTENCE_COMMIT_PAUSE_S: f64 = 0.2;

/// Audio before a pause must be this long to be committed: Whisper decodes a short
/// fragment badly without the speech around it, so it is decoded again with more.
pub const MIN_COMMIT_CHUNK_S: f64 = 3.0;

/// An agreement cut goes this far before the first uncommitted word's start.
const CUT_MARGIN_S: f64 = 0.15;

/// Uncommitted audio beyond which LocalAgreement commits words without a pause.
pub const LONG_STRETCH_S: f64 = 8.0;

/// Words ending closer than this to the end of the decoded audio are never committed
/// by agreement: Whisper revises the last second most (seen: two decodes 0.35 s apart
/// of 1.3 s of onset agreeing on the same wrong words).
pub const COMMIT_LAG_S: f64 = 1.0;

/// LocalAgreement-2 over word hypotheses in stream time. Pure: no model inside, so the
/// commit rules are tested with hand-made hypotheses.
#[derive(Debug, Clone, Default)]
pub struct LocalAgreement {
    committed: Vec<AsrWord>,
    /// The previous hypothesis, minus what has been committed since.
    previous: Vec<AsrWord>,
    /// Stream sample where the uncommitted audio starts.
    commit_sample: u64,
}

impl LocalAgreement {
    pub fn new(start_sample: u64) -> Self {
        Self {
            commit_sample: start_sample,
            ..Default::default()
        }
    }

    pub fn commit_sample(&self) -> u64 {
        self.commit_sample
    }

    pub fn committed(&self) -> &[AsrWord] {
        &self.committed
    }

    /// The tentative words after the committed ones (for interim captions).
    pub fn tentative(&self) -> &[AsrWord] {
        &self.previous
    }

    /// Take a new hypothesis of the audio from `commit_sample` to `audio_end` (words in
    /// stream seconds). With `commit_lag_s`, commit the prefix it shares with the
    /// previous hypothesis, among words ending at least that long before `audio_end`;
    /// without, only remember it. Returns how many words were committed.
    pub fn update(
        &mut self,
        hypothesis: Vec<AsrWord>,
        audio_end: u64,
        commit_lag_s: Option<f64>,
    ) -> usize {
        let Some(lag) = commit_lag_s else {
            self.previous = hypothesis;
            return 0;
        };
        let latest_end_s = audio_end as f64 / RATE - lag;
        let n = self
            .previous
            .iter()
            .zip(&hypothesis)
            .take_while(|(a, b)| {
                let (na, nb) = (normalise_word(&a.text), normalise_word(&b.text));
                !na.is_empty() && na == nb && b.end_s <= latest_end_s
            })
            .count();
        // The last agreed word is held back and decoded again: the cut goes just
        // before it. Token times from tiny.en are often late by a word; a cut before
        // the word's real start at worst repeats the end of the previous word, which
        // `overlap` removes, while a cut after it would lose words (seen).
        let m = n.saturating_sub(1);
        let mut hypothesis = hypothesis;
        let rest = hypothesis.split_off(m);
        if m > 0 {
            let last = &hypothesis[m - 1];
            let next_start = rest.first().map_or(last.end_s, |w| w.start_s);
            let cut_s = (next_start - CUT_MARGIN_S).max((last.start_s + last.end_s) / 2.0);
            let cut = ((cut_s * RATE).round() as u64).clamp(self.commit_sample, audio_end);
            self.commit_sample = cut;
            self.committed.extend(hypothesis);
        }
        self.previous = rest;
        m
    }

    /// How many leading `words` repeat the last committed words (a decode after a cut
    /// that fell inside the last committed word).
    pub fn overlap(&self, words: &[AsrWord]) -> usize {
        (1..=2.min(words.len()).min(self.committed.len()))
            .rev()
            .find(|&k| {
                let tail = &self.committed[self.committed.len() - k..];
                tail.iter()
                    .zip(&words[..k])
                    .all(|(a, b)| normalise_word(&a.text) == normalise_word(&b.text))
            })
            .unwrap_or(0)
    }

    /// Commit a whole decode whose audio ends at `cut` (a pause): no word crosses it.
    pub fn commit_all(&mut self, words: Vec<AsrWord>, cut: u64) {
        self.committed.extend(words);
        self.commit_sample = cut.max(self.commit_sample);
        self.previous.clear();
    }
}

/// Join Whisper words into text the way Whisper writes it.
pub fn words_text(words: &[AsrWord]) -> String {
    words
        .iter()
        .map(|w| w.text.as_str())
        .collect::<String>()
        .trim()
        .to_string()
}

/// The decode of the audio up to a pause, made by a speculative step.
#[derive(Debug, Clone)]
struct Speculation {
    id: u64,
    /// The utterance's audio starts here (stream sample): a reopened utterance starts
    /// where the one it continues did.
    audio_start: u64,
    /// The audio it decoded ended here (stream sample), inside the pause.
    audio_end: u64,
    /// Where the pause began (end of the speech decoded).
    speech_end: u64,
    /// Length of the decoded audio and whether a hallucination guard fired on it.
    seconds: f64,
    guarded: bool,
    /// Words in stream time.
    words: Vec<AsrWord>,
    /// The final transcript if the utterance ends at this pause.
    transcript: Transcript,
    /// When its decode finished: an utterance that waited for it after its endpoint
    /// waited for its own transcript (`final_decoded_at`).
    decoded_at: Instant,
}

/// Per-stream streaming state around one Whisper decoder state.
pub struct StreamingAsr {
    utterance: Option<u64>,
    agreement: LocalAgreement,
    speculation: Option<Speculation>,
    /// The state of the last utterance whose final was its speculative decode, kept
    /// in case the segmenter reopens it (an early end the speaker went on after): the
    /// reopened utterance then goes on from it, and the decode at that pause may be
    /// committed like any other pause's, instead of decoding the whole turn again.
    ended: Option<(LocalAgreement, Speculation)>,
    /// When the decode behind the last final from [`finish`](Self::finish) ended, if it
    /// was a speculative one (made before the endpoint, maybe still running after it).
    final_decoded_at: Option<Instant>,
    abandoned: u64,
    superseded: u64,
    carried: u64,
    commits: u64,
}

/// Where a step's audio sits in the stream, and what the VAD knows about the
/// utterance so far.
#[derive(Debug, Clone, Copy)]
pub struct StepAt {
    pub id: u64,
    pub audio_start: u64,
    pub speech_end: u64,
    /// A finished pause: (start sample, length in samples); the one after the speech of
    /// the last speculative step when it has finished (see `StepRequest::last_gap`).
    pub last_gap: Option<(u64, u64)>,
}

/// When a step's decode is abandoned midway (whisper.cpp asks between graph steps).
#[derive(Clone, Copy)]
pub struct GiveUp<'a> {
    /// The length (s) of the step's pause once speech has resumed after it. A
    /// speculative decode is abandoned then, unless it may still be committed (a long
    /// enough pause after enough speech): the utterance did not end there, and the
    /// analyser is needed for the next pause.
    pub pause_ended: &'a dyn Fn() -> Option<f64>,
    /// A regular step's decode (only captions wait on it) is abandoned as soon as this
    /// says something more urgent waits: a pause began (its decode may be the final
    /// transcript) or a finished utterance is queued. Otherwise the event waits for a
    /// whole decode of up to 15 s of audio that nobody needs any more.
    pub superseded: &'a dyn Fn() -> bool,
}

/// What one streaming step produced (interim captions).
#[derive(Debug, Clone)]
pub struct StepResult {
    pub committed_text: String,
    pub tentative_text: String,
    pub language: String,
    pub committed_words: usize,
}

impl Default for StreamingAsr {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamingAsr {
    pub fn new() -> Self {
        Self {
            utterance: None,
            agreement: LocalAgreement::new(0),
            speculation: None,
            ended: None,
            final_decoded_at: None,
            abandoned: 0,
            superseded: 0,
            carried: 0,
            commits: 0,
        }
    }

    /// Speculative decodes abandoned because the speaker went on (see [`step`](Self::step)).
    pub fn abandoned_decodes(&self) -> u64 {
        self.abandoned
    }

    /// Regular steps' decodes abandoned for something more urgent (see [`step`](Self::step)).
    pub fn superseded_decodes(&self) -> u64 {
        self.superseded
    }

    /// Reopened utterances that went on from the early end's decode (see `ended`).
    pub fn carried_over(&self) -> u64 {
        self.carried
    }

    /// When the speculative decode that became the last final ended (`None` when the
    /// last final was decoded in [`finish`](Self::finish) itself).
    pub fn final_decoded_at(&self) -> Option<Instant> {
        self.final_decoded_at
    }

    /// Pause decodes committed (their audio is not decoded again).
    pub fn commits(&self) -> u64 {
        self.commits
    }

    fn enter(&mut self, id: u64, audio_start: u64) {
        if self.utterance != Some(id) {
            self.utterance = Some(id);
            self.agreement = LocalAgreement::new(audio_start);
            self.speculation = None;
            // A later utterance that starts where the early-ended one did is that one
            // reopened (ids only grow; a new turn starts after the old one's audio).
            if let Some((agreement, sp)) = self.ended.take() {
                if sp.id < id && sp.audio_start == audio_start {
                    self.agreement = agreement;
                    self.speculation = Some(Speculation { id, ..sp });
                    self.carried += 1;
                }
            }
        }
    }

    /// Speech went on after the pause a speculative step decoded: if that pause was
    /// long enough and the decode is trustworthy, its words are final.
    fn commit_speculation(&mut self, id: u64, last_gap: Option<(u64, u64)>) {
        let Some(sp) = self.speculation.take() else {
            return;
        };
        let pause_s = match last_gap {
            Some((at, len)) if at == sp.speech_end => len as f64 / RATE,
            _ => 0.0,
        };
        let commit = sp.id == id
            && sp.seconds >= MIN_COMMIT_CHUNK_S
            && !sp.guarded
            && (pause_s >= MIN_COMMIT_PAUSE_S
                || (pause_s >= MIN_SENTENCE_COMMIT_PAUSE_S && sp.ends_sentence()));
        log::debug!(
            "utterance {id}: the decode at the pause after {:.2} s ({:.2} s of audio) and a {:.0} ms pause: {}",
            sp.speech_end as f64 / RATE,
            sp.seconds,
            pause_s * 1e3,
            if commit { "committed" } else { "not committed" }
        );
        if commit {
            self.agreement.commit_all(sp.words, sp.audio_end);
            self.commits += 1;
        }
    }

    /// A step on the utterance in progress; `audio` runs from `at.audio_start` to now.
    /// `speculative`: the VAD has just heard a pause. `want_text`: interim captions are
    /// on (otherwise regular steps decode only when the uncommitted stretch is long).
    /// `give_up` says when a decode under way is no longer wanted.
    pub fn step(
        &mut self,
        asr: &mut AsrStream,
        at: &StepAt,
        audio: &[f32],
        speculative: bool,
        want_text: bool,
        give_up: &GiveUp,
    ) -> Result<Option<StepResult>, AsrError> {
        let GiveUp {
            pause_ended,
            superseded,
        } = *give_up;
        self.enter(at.id, at.audio_start);
        let audio_end = at.audio_start + audio.len() as u64;
        self.commit_speculation(at.id, at.last_gap);
        let from = self
            .agreement
            .commit_sample()
            .clamp(at.audio_start, audio_end);
        let off = (from - at.audio_start) as usize;
        let uncommitted = audio.len() - off;
        let seconds = uncommitted as f64 / RATE;
        let long = seconds > LONG_STRETCH_S;
        if speculative && uncommitted < PIPELINE_RATE_HZ as usize / 10 {
            // Everything before the pause is committed already: nothing to decode (and
            // Whisper on padding alone invents words).
            self.speculation = Some(Speculation {
                id: at.id,
                audio_start: at.audio_start,
                audio_end,
                speech_end: at.speech_end,
                seconds,
                guarded: false,
                words: Vec::new(),
                transcript: join(self.agreement.committed(), Transcript::default(), from),
                decoded_at: Instant::now(),
            });
            return Ok(None);
        }
        if !speculative && (uncommitted < MIN_STEP_SAMPLES || !(want_text || long)) {
            return Ok(None);
        }
        // The decode at a pause may be the final transcript, so an event waits on it.
        let urgency = if speculative {
            Urgency::Event
        } else {
            Urgency::Captions
        };
        let tr = if speculative {
            let useless = || {
                pause_ended().is_some_and(|pause_s| {
                    pause_s < MIN_SENTENCE_COMMIT_PAUSE_S || seconds < MIN_COMMIT_CHUNK_S
                })
            };
            match asr.transcribe_unless(&audio[off..], true, urgency, &useless)? {
                Some(tr) => tr,
                None => {
                    self.abandoned += 1;
                    return Ok(None);
                }
            }
        } else {
            match asr.transcribe_unless(&audio[off..], true, urgency, superseded)? {
                Some(tr) => tr,
                None => {
                    self.superseded += 1;
                    return Ok(None);
                }
            }
        };
        let guarded = !tr.guards.is_empty();
        let mut hypothesis = absolute_words(&tr, from);
        let tr = self.without_overlap(tr, &mut hypothesis);
        let mut n = 0;
        if speculative {
            self.speculation = Some(Speculation {
                id: at.id,
                audio_start: at.audio_start,
                audio_end,
                speech_end: at.speech_end,
                seconds,
                guarded,
                words: hypothesis.clone(),
                transcript: join(self.agreement.committed(), tr.clone(), from),
                decoded_at: Instant::now(),
            });
            self.agreement.update(hypothesis, audio_end, None);
        } else {
            let commit = (long && !guarded).then_some(COMMIT_LAG_S);
            n = self.agreement.update(hypothesis, audio_end, commit);
        }
        Ok(Some(StepResult {
            committed_text: words_text(self.agreement.committed()),
            tentative_text: words_text(self.agreement.tentative()),
            language: tr.language,
            committed_words: n,
        }))
    }

    /// The final transcript of utterance `id` whose speech ended at stream sample
    /// `speech_end`; `audio` (with post-roll) starts at `audio_start`. Only the audio
    /// after the commit point is decoded, or nothing if the speculative step at the
    /// final pause already did (then the flag is true).
    pub fn finish(
        &mut self,
        asr: &mut AsrStream,
        id: u64,
        audio_start: u64,
        audio: &[f32],
        speech_end: u64,
    ) -> Result<(Transcript, bool), AsrError> {
        self.enter(id, audio_start);
        self.utterance = None;
        self.ended = None;
        self.final_decoded_at = None;
        if let Some(sp) = self.speculation.take() {
            if sp.id == id && sp.audio_end >= speech_end && !sp.guarded {
                let transcript = sp.transcript.clone();
                self.final_decoded_at = Some(sp.decoded_at);
                self.ended = Some((self.agreement.clone(), sp));
                return Ok((transcript, true));
            }
        }
        let audio_end = audio_start + audio.len() as u64;
        let from = self.agreement.commit_sample().clamp(audio_start, audio_end);
        let off = (from - audio_start) as usize;
        let committed = self.agreement.committed().to_vec();
        if committed.is_empty() && off == 0 {
            // Nothing committed: exactly the one-shot decode.
            let mut tr = asr.transcribe(audio)?;
            shift(&mut tr, audio_start);
            return Ok((tr, false));
        }
        let tr = asr.transcribe_with(&audio[off..], true, Urgency::Event)?;
        let mut words = absolute_words(&tr, from);
        let tr = self.without_overlap(tr, &mut words);
        Ok((join(&committed, tr, from), false))
    }
}

impl Speculation {
    /// The decode ends with a finished sentence and no hallucination guard fired on it.
    fn ends_sentence(&self) -> bool {
        let t = self.transcript.text.trim_end();
        // "..." is Whisper's mark for speech trailing off, not a finished sentence.
        !self.guarded && t.ends_with(['.', '?', '!']) && !t.ends_with("...")
    }
}

impl StreamingAsr {
    /// Whether the decode made at the current pause of utterance `id` ends with a
    /// finished sentence (and no hallucination guard fired on it).
    pub fn speculation_ends_sentence(&self, id: u64) -> bool {
        self.speculation
            .as_ref()
            .is_some_and(|s| s.id == id && s.ends_sentence())
    }

    /// Drop words of a decode that repeat the committed end, from its words and text.
    fn without_overlap(&self, mut tr: Transcript, words: &mut Vec<AsrWord>) -> Transcript {
        let k = self.agreement.overlap(words);
        if k > 0 {
            words.drain(..k);
            tr.text = words_text(words);
            let mut left = k;
            for seg in &mut tr.segments {
                let d = left.min(seg.words.len());
                seg.words.drain(..d);
                left -= d;
                seg.text = format!(" {}", words_text(&seg.words));
            }
        }
        tr
    }
}

fn shift(tr: &mut Transcript, at_sample: u64) {
    let off = at_sample as f64 / RATE;
    for s in &mut tr.segments {
        s.start_s += off;
        s.end_s += off;
        for w in &mut s.words {
            w.start_s += off;
            w.end_s += off;
        }
    }
}

fn absolute_words(tr: &Transcript, at_sample: u64) -> Vec<AsrWord> {
    let off = at_sample as f64 / RATE;
    tr.segments
        .iter()
        .flat_map(|s| s.words.iter())
        .map(|w| AsrWord {
            start_s: w.start_s + off,
            end_s: w.end_s + off,
            ..w.clone()
        })
        .collect()
}

/// Committed words (stream time) followed by a decode of the audio from `tail_at`.
/// Segment times come out in stream seconds.
fn join(committed: &[AsrWord], mut tail: Transcript, tail_at: u64) -> Transcript {
    shift(&mut tail, tail_at);
    if committed.is_empty() {
        return tail;
    }
    let head = words_text(committed);
    let mut segments = vec![AsrSegment {
        start_s: committed[0].start_s,
        end_s: committed[committed.len() - 1].end_s,
        text: format!(" {head}"),
        no_speech_prob: 0.0,
        words: committed.to_vec(),
    }];
    segments.append(&mut tail.segments);
    let text = if tail.text.is_empty() {
        head
    } else {
        format!("{head} {}", tail.text.trim_start())
    };
    Transcript {
        text,
        language: tail.language,
        segments,
        guards: tail.guards,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn w(text: &str, start_s: f64, end_s: f64) -> AsrWord {
        AsrWord {
            text: text.into(),
            start_s,
            end_s,
        }
    }

    #[test]
    fn commits_the_agreed_prefix_and_cuts_in_the_gap() {
        let mut la = LocalAgreement::new(0);
        let lag = Some(COMMIT_LAG_S);
        assert_eq!(
            la.update(vec![w(" Oh", 0.1, 0.3), w(" great", 0.4, 0.8)], 16_000, lag),
            0
        );
        let n = la.update(
            vec![
                w(" oh,", 0.1, 0.3),
                w(" great", 0.4, 0.8),
                w(" another", 1.0, 1.4),
            ],
            32_000,
            lag,
        );
        // "great" is agreed but held back; the cut goes 0.15 s before it.
        assert_eq!(n, 1);
        assert_eq!(words_text(la.committed()), "oh,");
        assert_eq!(words_text(la.tentative()), "great another");
        assert_eq!(la.commit_sample(), 4_000);
        assert_eq!(la.overlap(&[w(" Oh", 0.2, 0.3), w(" great", 0.4, 0.8)]), 1);
        assert_eq!(la.overlap(&[w(" great", 0.4, 0.8)]), 0);
    }

    #[test]
    fn disagreement_commits_nothing() {
        let mut la = LocalAgreement::new(8_000);
        la.update(vec![w(" to", 0.6, 0.9)], 16_000, Some(0.0));
        assert_eq!(la.update(vec![w(" today", 0.6, 1.1)], 24_000, Some(0.0)), 0);
        assert_eq!(la.commit_sample(), 8_000);
        assert!(la.committed().is_empty());
    }

    #[test]
    fn commit_point_never_moves_back_or_past_the_audio() {
        let mut la = LocalAgreement::new(16_000);
        la.update(vec![w(" a", 0.2, 0.3)], 20_000, Some(0.0));
        la.update(vec![w(" a", 0.2, 0.3)], 20_000, Some(0.0));
        assert_eq!(la.commit_sample(), 16_000);
        let mut la = LocalAgreement::new(0);
        let hyp = vec![w(" a", 0.2, 0.4), w(" b", 0.45, 0.48), w(" c", 9.0, 9.5)];
        la.update(hyp.clone(), 8_000, Some(0.0));
        assert_eq!(la.update(hyp, 8_000, Some(0.0)), 1);
        // max(middle of "a", 0.15 s before "b") = 0.3 s; "c" lies past the audio.
        assert_eq!(la.commit_sample(), 4_800);
    }

    #[test]
    fn words_near_the_end_of_the_audio_wait() {
        let mut la = LocalAgreement::new(0);
        let hyp = vec![
            w(" one", 0.1, 0.5),
            w(" two", 0.6, 0.9),
            w(" three", 2.2, 2.6),
        ];
        la.update(hyp.clone(), 48_000, Some(COMMIT_LAG_S));
        // Audio ends at 3.0 s: "three" ends 0.4 s before it, inside the lag; "two" is
        // the last agreed word and is held back.
        assert_eq!(la.update(hyp, 48_000, Some(COMMIT_LAG_S)), 1);
        assert_eq!(words_text(la.tentative()), "two three");
    }

    #[test]
    fn remembering_without_a_lag_commits_nothing() {
        let mut la = LocalAgreement::new(0);
        la.update(vec![w(" a", 0.1, 0.2)], 48_000, None);
        assert_eq!(la.update(vec![w(" a", 0.1, 0.2)], 48_000, None), 0);
        la.commit_all(vec![w(" a", 0.1, 0.2)], 16_000);
        assert_eq!(la.commit_sample(), 16_000);
        assert!(la.tentative().is_empty());
    }

    proptest! {
        // A failing case is printed, not saved: tests never write into the source tree.
        #![proptest_config(ProptestConfig { failure_persistence: None, ..ProptestConfig::default() })]
        /// If every step's hypothesis is a prefix of what the whole utterance says,
        /// committed + tentative after the last step is exactly that text: the policy
        /// never loses or duplicates a word.
        #[test]
        fn consistent_hypotheses_lose_nothing(n_words in 1usize..30, cuts in proptest::collection::vec(0usize..30, 1..12)) {
            let all: Vec<AsrWord> = (0..n_words)
                .map(|i| w(&format!(" w{i}"), i as f64 * 0.3, i as f64 * 0.3 + 0.2))
                .collect();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c.min(n_words)).collect();
            cuts.sort();
            cuts.push(n_words);
            let mut la = LocalAgreement::new(0);
            for c in cuts {
                let from = la.committed().len();
                let hyp = all[from..c.max(from)].to_vec();
                la.update(hyp, (c as u64 * 3 + 3) * 1_600, Some(0.0));
            }
            let mut got = la.committed().to_vec();
            got.extend_from_slice(la.tentative());
            prop_assert_eq!(words_text(&got), words_text(&all));
        }
    }
}
