//! Hallucination guards and clean-up on Whisper's output.

use super::transcript::{AsrSegment, Transcript};

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
        .map(|(i, (_, p))| (i, crate::common::words::normalise_word(p)))
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
pub(super) fn has_short_loop(words: &[String]) -> bool {
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
