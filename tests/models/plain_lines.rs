//! Plain sentences are not sarcastic: the bundled sample `samples/meeting.wav` (five
//! espeak-ng lines, two of them sarcastic; samples/README.md) replayed with the defaults,
//! as `sarcasmd replay samples/meeting.wav` does. A meeting room switches off a detector
//! that flags "Good morning everyone".
//!
//! Both tests are ignored while they fail: they are issue 38's (before it 22's and 23's)
//! acceptance tests for the text view, which carries the fused score alone (audio and
//! video earned no weight, models/studies/cross_corpus/CROSS_CORPUS.md). The text head v3 (meeting
//! lines, models/studies/meeting_text/MEETING_TEXT.md) gives Whisper's "Good morning everyone, let's look
//! at the quarter leaders" 0.586 and "Thanks, the report is ready..." 0.519, above the
//! mis-heard sarcastic "All great, another meeting at Kudaf bin on email." 0.513 (served,
//! calibrated scores, fusion of 2026-11-27). The sample is never used to choose a head. Run them with
//! `cargo test --release --test models plain_lines -- --ignored`.

use std::path::Path;

use crate::common::*;
use sarcasmd::sinks::event::UtteranceEvent;
use sarcasmd::sources::audio::WavSource;

const SAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/meeting.wav");

/// The sample's events, and its plain ("Good morning everyone...", "Thanks, the
/// report...") and sarcastic ("Oh great, another meeting...", "Wow, what a
/// surprise...") lines. Five lines with a second of silence after each: one event per
/// line, in order (Whisper mis-hears some words of this synthetic voice, so lines are
/// matched by position, not by their words).
fn sample_lines() -> (Vec<UtteranceEvent>, [usize; 2], [usize; 2]) {
    let (events, _) = run(Box::new(WavSource::open(Path::new(SAMPLE)).unwrap()));
    for e in &events {
        eprintln!(
            "{:.3} (flag {}, text {:?}, audio {:?}) {}",
            e.p_sarcastic,
            e.sarcastic,
            e.views.text,
            e.views.audio,
            e.transcript.as_deref().unwrap_or("")
        );
    }
    assert_eq!(events.len(), 5, "{events:#?}");
    (events, [0, 4], [1, 3])
}

#[test]
#[ignore = "open (issue 38): the text view scores the plain 'Good morning everyone...' 0.586"]
fn plain_lines_of_the_sample_are_not_flagged() {
    let (events, plain, _) = sample_lines();
    for i in plain {
        let p = &events[i];
        assert!(
            p.p_sarcastic < 0.5 && !p.sarcastic,
            "plain line scored {} (flagged {}): {:?}",
            p.p_sarcastic,
            p.sarcastic,
            p.transcript
        );
    }
}

#[test]
#[ignore = "open (issue 38): the mis-heard sarcastic 'All great, another meeting...' scores below both plain lines"]
fn plain_lines_of_the_sample_score_below_every_sarcastic_line() {
    let (events, plain, sarcastic) = sample_lines();
    for i in plain {
        for j in sarcastic {
            let (p, s) = (&events[i], &events[j]);
            assert!(
                p.p_sarcastic < s.p_sarcastic,
                "plain {:?} ({}) not below sarcastic {:?} ({})",
                p.transcript,
                p.p_sarcastic,
                s.transcript,
                s.p_sarcastic
            );
        }
    }
}
