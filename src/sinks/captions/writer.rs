//! The cues of an utterance and the writer that appends them to the caption files.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use thiserror::Error;

use crate::sinks::event::UtteranceEvent;

use super::config::CaptionsConfig;

#[derive(Debug, Error)]
pub enum CaptionsError {
    #[error("{path}: cannot write captions: {source} (check the directory exists and is writable by the daemon's user)")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// One caption cue in stream seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Cue {
    pub start_s: f64,
    pub end_s: f64,
    pub text: String,
}

/// Cues for one utterance: one per Whisper segment, split when longer than `max_cue_s`,
/// clamped into `[start_s, end_s]` of the utterance (widened by a small margin) and
/// starting no earlier than `not_before_s` (the previous cue's end).
pub fn cues_for(ev: &UtteranceEvent, max_cue_s: f64, not_before_s: f64) -> Vec<Cue> {
    // Whisper's timestamps may start a little before the VAD onset (pre-roll) and end
    // after the VAD end (post-roll); allow that much, no more.
    const MARGIN_S: f64 = 0.3;
    const MIN_CUE_S: f64 = 0.5;
    let lo = (ev.start_s - MARGIN_S).max(not_before_s).max(0.0);
    let hi = (ev.end_s + MARGIN_S).max(lo + MIN_CUE_S);
    let mut pieces: Vec<(f64, f64, String)> = ev
        .asr_segments
        .iter()
        .map(|s| (s.start_s, s.end_s, s.text.trim().to_string()))
        .filter(|(_, _, t)| !t.is_empty())
        .collect();
    if pieces.is_empty() {
        match ev.transcript.as_deref().map(str::trim) {
            Some(t) if !t.is_empty() => pieces.push((ev.start_s, ev.end_s, t.to_string())),
            _ => return Vec::new(),
        }
    }
    let mut out: Vec<Cue> = Vec::new();
    for (s, e, text) in pieces {
        let mut start = s.clamp(lo, hi);
        if let Some(prev) = out.last() {
            start = start.max(prev.end_s);
        }
        // An earlier cue stretched to MIN_CUE_S may already end past `hi`: this one then
        // gets MIN_CUE_S after it rather than a range whose bounds cross.
        let end = e.clamp(start, hi.max(start)).max(start + MIN_CUE_S);
        split_cue(start, end, &text, max_cue_s, &mut out);
    }
    out
}

/// Split a long cue at word boundaries into pieces of about equal length, dividing its
/// time by character count (speech rate is roughly constant within a segment).
fn split_cue(start: f64, end: f64, text: &str, max_cue_s: f64, out: &mut Vec<Cue>) {
    let words: Vec<&str> = text.split_whitespace().collect();
    let parts = (((end - start) / max_cue_s).ceil() as usize).clamp(1, words.len().max(1));
    if parts == 1 {
        out.push(Cue {
            start_s: start,
            end_s: end,
            text: words.join(" "),
        });
        return;
    }
    let total_chars: usize = words.iter().map(|w| w.len() + 1).sum();
    let secs_per_char = (end - start) / total_chars as f64;
    let target = total_chars as f64 / parts as f64;
    let (mut chars, mut done, mut from, mut piece_start) = (0usize, 0usize, 0usize, start);
    for (i, w) in words.iter().enumerate() {
        chars += w.len() + 1;
        let last = i + 1 == words.len();
        if last || chars as f64 >= target * (done + 1) as f64 {
            let piece_end = if last {
                end
            } else {
                start + chars as f64 * secs_per_char
            };
            out.push(Cue {
                start_s: piece_start,
                end_s: piece_end,
                text: words[from..=i].join(" "),
            });
            done += 1;
            from = i + 1;
            piece_start = piece_end;
        }
    }
}

/// `hh:mm:ss.mmm` (WebVTT) or `hh:mm:ss,mmm` (SRT); hours grow past two digits.
fn timestamp(t: f64, sep: char) -> String {
    let ms = (t.max(0.0) * 1000.0).round() as u64;
    format!(
        "{:02}:{:02}:{:02}{sep}{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// Escape cue text for WebVTT: `&`, `<` and `>` are markup (and `-->` needs `>`).
fn vtt_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// SRT has no escaping; keep its markup and the cue separator out of the text.
fn srt_clean(s: &str) -> String {
    s.replace('<', "‹").replace('>', "›").replace("\n\n", "\n")
}

/// The WebVTT block for one utterance: a NOTE with the score, then its cues.
pub fn vtt_block(ev: &UtteranceEvent, cues: &[Cue], speaker: Option<&str>) -> String {
    let mut b = String::new();
    // No weighted view (nothing recognised, text shed): no score rather than "NaN".
    let p = if ev.p_sarcastic.is_finite() {
        format!("{:.3}", ev.p_sarcastic)
    } else {
        "none".to_string()
    };
    let _ = writeln!(
        b,
        "NOTE utterance {} p_sarcastic={p} sarcastic={} threshold={:.3}\n",
        ev.id, ev.sarcastic, ev.threshold
    );
    for (i, c) in cues.iter().enumerate() {
        let mut text = vtt_escape(&c.text);
        if ev.sarcastic {
            text = format!("<c.sarcasm>{text}</c>");
        }
        if let Some(v) = speaker {
            text = format!("<v {}>{text}</v>", vtt_escape(v));
        }
        let _ = write!(
            b,
            "u{}-{}\n{} --> {}\n{}\n\n",
            ev.id,
            i,
            timestamp(c.start_s, '.'),
            timestamp(c.end_s, '.'),
            text
        );
    }
    b
}

/// The SRT block for one utterance; `index` is the running cue number (1-based).
pub fn srt_block(
    ev: &UtteranceEvent,
    cues: &[Cue],
    speaker: Option<&str>,
    index: &mut u64,
) -> String {
    let mut b = String::new();
    for c in cues {
        let mut text = srt_clean(&c.text);
        if let Some(v) = speaker {
            text = format!("{}: {text}", srt_clean(v));
        }
        if ev.sarcastic {
            text = format!("<font color=\"#ffb000\">{text}</font>");
        }
        let _ = write!(
            b,
            "{}\n{} --> {}\n{}\n\n",
            index,
            timestamp(c.start_s, ','),
            timestamp(c.end_s, ','),
            text
        );
        *index += 1;
    }
    b
}

struct CaptionFile {
    path: PathBuf,
    /// `None` while the path cannot be created (directory not mounted yet, permissions):
    /// every append tries again, so captions start as soon as the path becomes writable.
    file: Option<File>,
    written: u64,
    header: &'static str,
}

impl CaptionFile {
    /// A file that is not open yet; the first append creates it.
    fn pending(path: &Path, header: &'static str) -> Self {
        Self {
            path: path.to_path_buf(),
            file: None,
            written: 0,
            header,
        }
    }

    fn create(path: &Path, header: &'static str) -> Result<Self, CaptionsError> {
        let io = |source| CaptionsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .map_err(io)?;
        file.write_all(header.as_bytes()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Some(file),
            written: header.len() as u64,
            header,
        })
    }

    fn append(&mut self, block: &str, rotate_bytes: u64) -> Result<(), CaptionsError> {
        if block.is_empty() {
            return Ok(());
        }
        if self.file.is_none() {
            *self = Self::create(&self.path, self.header)?;
        }
        if self.written + block.len() as u64 > rotate_bytes {
            let mut old = self.path.clone().into_os_string();
            old.push(".1");
            std::fs::rename(&self.path, &old).map_err(|source| CaptionsError::Io {
                path: self.path.clone(),
                source,
            })?;
            *self = Self::create(&self.path, self.header)?;
        }
        let file = self.file.as_mut().expect("opened above");
        file.write_all(block.as_bytes())
            .and_then(|_| file.flush())
            .map_err(|source| CaptionsError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.written += block.len() as u64;
        Ok(())
    }
}

/// `ev` minus the leading words it shares with `shown` (compared without case and
/// punctuation: "lovely." then "lovely,"). Tokens that are punctuation only ("-", "...")
/// are skipped on both sides, and those right after the shared words go with them. When
/// the new decode changed those words, it is kept whole: the correction is worth a repeat.
fn without_shown_prefix(ev: &UtteranceEvent, shown: &str) -> UtteranceEvent {
    use crate::common::words::{normalise_word, normalise_words};
    let shown = normalise_words(shown);
    let words: Vec<&str> = ev
        .asr_segments
        .iter()
        .flat_map(|s| s.text.split_whitespace())
        .collect();
    // How many of `words` the shown prefix covers.
    let mut matched = 0;
    let mut covered = 0;
    for w in &words {
        if matched == shown.len() {
            break;
        }
        let n = normalise_word(w);
        if !n.is_empty() {
            if n != shown[matched] {
                return ev.clone();
            }
            matched += 1;
        }
        covered += 1;
    }
    if shown.is_empty() || matched < shown.len() {
        return ev.clone();
    }
    while covered < words.len() && normalise_word(words[covered]).is_empty() {
        covered += 1;
    }
    let mut out = ev.clone();
    let mut skip = covered;
    for seg in &mut out.asr_segments {
        let seg_words: Vec<&str> = seg.text.split_whitespace().collect();
        let d = skip.min(seg_words.len());
        seg.text = seg_words[d..].join(" ");
        skip -= d;
    }
    out.asr_segments.retain(|s| !s.text.is_empty());
    if let Some(t) = &mut out.transcript {
        *t = words[covered..].join(" ");
    }
    out
}

/// Writes WebVTT and/or SRT files as events arrive.
pub struct CaptionWriter {
    cfg: CaptionsConfig,
    vtt: Option<CaptionFile>,
    srt: Option<CaptionFile>,
    srt_index: u64,
    last_end_s: f64,
    /// Id and transcript of the last event with cues: a revising event repeats it.
    last_written: Option<(u64, String)>,
}

impl CaptionWriter {
    /// Creates (truncates) the configured files and writes their headers. A file that
    /// cannot be created now is logged and retried with every utterance instead of
    /// failing: captions are a secondary output, and a caption path on a share that
    /// mounts late must not stop the daemon.
    pub fn create_or_retry(cfg: &CaptionsConfig) -> Self {
        let open = |p: &Path, header| {
            CaptionFile::create(p, header).unwrap_or_else(|e| {
                log::warn!("{e}; captions retry with every utterance, events continue");
                CaptionFile::pending(p, header)
            })
        };
        Self {
            cfg: cfg.clone(),
            vtt: cfg.vtt.as_deref().map(|p| open(p, "WEBVTT\n\n")),
            srt: cfg.srt.as_deref().map(|p| open(p, "")),
            srt_index: 1,
            last_end_s: 0.0,
            last_written: None,
        }
    }

    /// Append the cues of one final utterance. Both files are attempted even when one
    /// fails; the first error is returned.
    pub fn write(&mut self, ev: &UtteranceEvent) -> Result<(), CaptionsError> {
        // A caption file cannot take back a cue: for an event that revises the last one
        // (the speaker went on after an early end), only the words after what that cue
        // already showed are added.
        let trimmed = match (&self.last_written, ev.revises) {
            (Some((id, shown)), Some(r)) if *id == r => Some(without_shown_prefix(ev, shown)),
            _ => None,
        };
        let ev_cued = trimmed.as_ref().unwrap_or(ev);
        let cues = cues_for(
            ev_cued,
            self.cfg.max_cue_ms as f64 / 1000.0,
            self.last_end_s,
        );
        if let Some(t) = &ev.transcript {
            self.last_written = Some((ev.id, t.clone()));
        }
        if cues.is_empty() {
            return Ok(());
        }
        let rotate = self.cfg.rotate_mb as u64 * 1024 * 1024;
        let speaker = self.cfg.speaker.as_deref();
        let mut first_err = None;
        if let Some(f) = self.vtt.as_mut() {
            if let Err(e) = f.append(&vtt_block(ev, &cues, speaker), rotate) {
                first_err = Some(e);
            }
        }
        if let Some(f) = self.srt.as_mut() {
            let mut index = self.srt_index;
            match f.append(&srt_block(ev, &cues, speaker, &mut index), rotate) {
                Ok(()) => self.srt_index = index,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        self.last_end_s = cues.last().map_or(self.last_end_s, |c| c.end_s);
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sinks::event::{LatencyMs, Views};
    use crate::views::asr::AsrSegment;

    #[test]
    fn a_short_utterance_with_two_segments_does_not_cross_its_bounds() {
        // Found by the full-outputs soak: "What?" (146.464-146.784 s) as two Whisper
        // segments; the first cue, stretched to 0.5 s, ended past the utterance's end
        // and the second one's range crossed (a panic in clamp).
        let e = ev(
            32,
            146.464,
            146.784,
            &[(146.7, 146.75, "What"), (146.76, 146.78, "?")],
            0.2,
        );
        let cues = cues_for(&e, 7.0, 0.0);
        assert_eq!(cues.len(), 2);
        assert!(
            cues[0].end_s <= cues[1].start_s && cues[1].end_s > cues[1].start_s,
            "{cues:?}"
        );
    }

    proptest::proptest! {
        // Never write failure files into the source tree.
        #![proptest_config(proptest::prelude::ProptestConfig {
            failure_persistence: None,
            ..proptest::prelude::ProptestConfig::default()
        })]
        #[test]
        fn cues_are_ordered_and_never_panic(
            start in 0.0f64..100.0,
            len in 0.0f64..20.0,
            not_before in 0.0f64..120.0,
            segs in proptest::collection::vec((-1.0f64..25.0, 0.0f64..25.0), 0..6),
        ) {
            let segs: Vec<(f64, f64, &str)> =
                segs.iter().map(|&(s, d)| (start + s, start + s + d, "word and more")).collect();
            let cues = cues_for(&ev(1, start, start + len, &segs, 0.5), 7.0, not_before);
            for (i, c) in cues.iter().enumerate() {
                proptest::prop_assert!(c.end_s > c.start_s, "{cues:?}");
                if i > 0 {
                    proptest::prop_assert!(c.start_s >= cues[i - 1].end_s - 1e-9, "{cues:?}");
                }
            }
        }
    }

    fn ev(id: u64, start: f64, end: f64, segs: &[(f64, f64, &str)], p: f32) -> UtteranceEvent {
        UtteranceEvent {
            kind: "utterance",
            id,
            start_s: start,
            end_s: end,
            transcript: Some(segs.iter().map(|s| s.2).collect::<Vec<_>>().join(" ")),
            language: "en".into(),
            p_sarcastic: p,
            sarcastic: p >= 0.5,
            threshold: 0.5,
            views: Views::default(),
            latency_ms: LatencyMs::default(),
            ready_ms: Default::default(),
            text_shed: false,
            models: Default::default(),
            forced_split: false,
            early_end: false,
            revises: None,
            asr_segments: segs
                .iter()
                .map(|&(s, e, t)| AsrSegment {
                    start_s: s,
                    end_s: e,
                    text: t.into(),
                    no_speech_prob: 0.01,
                    words: vec![],
                })
                .collect(),
            asr_guards: vec![],
            extras: None,
            room: None,
            features: None,
        }
    }

    fn golden_events() -> Vec<UtteranceEvent> {
        vec![
            ev(0, 0.8, 3.1, &[(0.6, 3.2, " Good morning, everyone.")], 0.12),
            ev(
                1,
                4.5,
                7.84,
                &[(
                    4.3,
                    7.9,
                    " Oh great, another meeting that could have been an email.",
                )],
                0.71,
            ),
            // Whisper timestamp before the previous cue's end and beyond the utterance.
            ev(
                2,
                7.9,
                9.0,
                &[(7.0, 12.0, " Fish & chips <3 --> later")],
                0.2,
            ),
            // A 16 s segment split into cues of at most 7 s.
            ev(
                3,
                3600.0,
                3616.0,
                &[(
                    3600.0,
                    3616.0,
                    " one two three four five six seven eight nine ten eleven twelve",
                )],
                0.9,
            ),
        ]
    }

    fn render(speaker: Option<&str>) -> (String, String) {
        let (mut vtt, mut srt) = (String::from("WEBVTT\n\n"), String::new());
        let mut last = 0.0;
        let mut idx = 1;
        for e in golden_events() {
            let cues = cues_for(&e, 7.0, last);
            last = cues.last().map_or(last, |c| c.end_s);
            vtt.push_str(&vtt_block(&e, &cues, speaker));
            srt.push_str(&srt_block(&e, &cues, speaker, &mut idx));
        }
        (vtt, srt)
    }

    #[test]
    fn webvtt_and_srt_match_golden_files() {
        let (vtt, srt) = render(None);
        assert_eq!(
            vtt,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/captions.golden.vtt"
            ))
        );
        assert_eq!(
            srt,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/captions.golden.srt"
            ))
        );
    }

    #[test]
    fn voice_tags_wrap_the_class_span() {
        let (vtt, srt) = render(Some("Chair"));
        assert!(vtt.contains("<v Chair><c.sarcasm>Oh great"), "{vtt}");
        assert!(srt.contains("Chair: Oh great"), "{srt}");
    }

    #[test]
    fn cues_never_overlap_and_stay_near_the_speech() {
        let mut last = 0.0;
        for e in golden_events() {
            let cues = cues_for(&e, 7.0, last);
            for c in &cues {
                assert!(c.start_s >= last - 1e-9, "{c:?} starts before {last}");
                assert!(c.end_s > c.start_s);
                assert!(c.end_s - c.start_s <= 7.0 + 1e-9, "{c:?}");
                assert!(c.end_s <= e.end_s + 0.3 + 0.5 + 1e-9, "{c:?}");
                last = c.end_s;
            }
        }
    }

    #[test]
    fn timestamps_keep_counting_past_99_hours() {
        assert_eq!(timestamp(360_000.5, '.'), "100:00:00.500");
        assert_eq!(timestamp(3.0456, ','), "00:00:03,046");
    }

    #[test]
    fn a_caption_path_that_appears_later_starts_receiving_cues() {
        let dir = tempfile::tempdir().unwrap();
        let later = dir.path().join("not-mounted-yet");
        let cfg = CaptionsConfig {
            vtt: Some(later.join("c.vtt")),
            ..Default::default()
        };
        let mut w = CaptionWriter::create_or_retry(&cfg);
        let evs = golden_events();
        assert!(w.write(&evs[0]).is_err(), "no directory yet");
        std::fs::create_dir(&later).unwrap();
        w.write(&evs[1]).unwrap();
        let vtt = std::fs::read_to_string(later.join("c.vtt")).unwrap();
        assert!(vtt.starts_with("WEBVTT\n\nNOTE utterance 1 "), "{vtt}");
    }

    #[test]
    fn a_revising_event_adds_only_the_words_not_shown_yet() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = CaptionsConfig {
            vtt: Some(dir.path().join("c.vtt")),
            ..Default::default()
        };
        let mut w = CaptionWriter::create_or_retry(&cfg);
        let mut early = ev(4, 1.0, 1.9, &[(1.0, 2.0, " How lovely.")], 0.2);
        early.early_end = true;
        w.write(&early).unwrap();
        let mut whole = ev(
            5,
            1.0,
            4.8,
            &[(
                1.0,
                4.9,
                " How lovely, the video call froze right at the important part.",
            )],
            0.8,
        );
        whole.revises = Some(4);
        w.write(&whole).unwrap();
        // A decode that changed the shown words is kept whole.
        let mut changed = ev(6, 6.0, 6.9, &[(6.0, 7.0, " Great.")], 0.2);
        changed.early_end = true;
        w.write(&changed).unwrap();
        let mut redone = ev(
            7,
            6.0,
            8.0,
            &[(6.0, 8.1, " Grey, so the fix took weeks.")],
            0.2,
        );
        redone.revises = Some(6);
        w.write(&redone).unwrap();
        let vtt = std::fs::read_to_string(dir.path().join("c.vtt")).unwrap();
        assert_eq!(vtt.matches("How lovely").count(), 1, "{vtt}");
        assert!(
            vtt.contains(">the video call froze right at the important part.<"),
            "{vtt}"
        );
        assert!(
            vtt.contains("Great.") && vtt.contains("Grey, so the fix took weeks."),
            "{vtt}"
        );
    }

    #[test]
    fn punctuation_tokens_do_not_break_the_shown_prefix() {
        let shown = "Oh, great.";
        let mut e = ev(
            9,
            1.0,
            3.0,
            &[
                (1.0, 1.6, " Oh - great"),
                (1.6, 3.1, " ... another meeting."),
            ],
            0.5,
        );
        e.transcript = Some("Oh - great ... another meeting.".into());
        let t = without_shown_prefix(&e, shown);
        assert_eq!(t.transcript.as_deref(), Some("another meeting."));
        assert_eq!(t.asr_segments.len(), 1);
        assert_eq!(t.asr_segments[0].text, "another meeting.");
        // Changed words still keep the event whole.
        let t = without_shown_prefix(&e, "Oh, grey.");
        assert_eq!(t.transcript, e.transcript);
        // Everything already shown: nothing left to cue.
        let t = without_shown_prefix(&e, "Oh great another meeting");
        assert!(t.asr_segments.is_empty(), "{:?}", t.asr_segments);
    }

    #[test]
    fn writer_rotates_and_restarts_with_a_header() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = CaptionsConfig {
            vtt: Some(dir.path().join("c.vtt")),
            srt: Some(dir.path().join("c.srt")),
            rotate_mb: 1,
            ..Default::default()
        };
        let mut w = CaptionWriter::create_or_retry(&cfg);
        let long = "word ".repeat(2000);
        for i in 0..150 {
            let t = i as f64 * 10.0;
            w.write(&ev(i, t, t + 5.0, &[(t, t + 5.0, &long)], 0.1))
                .unwrap();
        }
        let rotated = std::fs::read_to_string(dir.path().join("c.vtt.1")).unwrap();
        let current = std::fs::read_to_string(dir.path().join("c.vtt")).unwrap();
        assert!(rotated.starts_with("WEBVTT\n\n") && current.starts_with("WEBVTT\n\n"));
        assert!(current.len() < 1024 * 1024);
        assert!(dir.path().join("c.srt.1").exists());
    }
}
