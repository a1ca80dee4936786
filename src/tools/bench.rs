//! `sarcasmd bench`: latency, CPU and memory of the whole pipeline on recordings
//! replayed in real time, with streaming recognition and, as a baseline in the same
//! process, one-shot decoding.
//!
//! The clips are joined into one stream with a silent gap after each, as utterances
//! in a room. End of speech is taken from each clip's own audio (the last 10 ms frame
//! above an energy floor), never from the VAD, so the endpointer's hangover and any
//! VAD error count against sarcasmd. Latency = when the clip's last event reached the
//! sink - when its speech ended in the paced stream.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use thiserror::Error;

use crate::config::Config;
use crate::pipeline::{run_stream, Counters, Engine, PipelineError, RunOptions, RunStats};
use crate::sinks::event::{EventSink, PartialEvent, UtteranceEvent};
use crate::sources::audio::{AudioError, AudioSource, WavSource, PIPELINE_RATE_HZ};
use crate::tools::manifest::{Manifest, ManifestError};

const RATE: f64 = PIPELINE_RATE_HZ as f64;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error(
        "{0}: no WAV files found (give a folder of .wav, a .wav, or a manifest .jsonl with audio)"
    )]
    NoClips(PathBuf),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    #[error(transparent)]
    Audio(#[from] AudioError),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
}

/// One recording with what it says, if known.
#[derive(Debug, Clone)]
pub struct Clip {
    pub name: String,
    pub samples: Vec<f32>,
    /// From a `.txt` beside the WAV, or the manifest's transcript (word error rate).
    pub reference: Option<String>,
    /// End of speech within the clip, from its energy (seconds).
    pub speech_end_s: f64,
}

/// End of speech in `samples` (seconds): the end of the last 10 ms frame whose RMS is
/// within 30 dB of the loud frames (95th percentile), and above -60 dBFS.
pub fn speech_end_s(samples: &[f32]) -> f64 {
    let frame = PIPELINE_RATE_HZ as usize / 100;
    let rms: Vec<f32> = samples
        .chunks(frame)
        .map(|c| (c.iter().map(|x| x * x).sum::<f32>() / c.len() as f32).sqrt())
        .collect();
    if rms.is_empty() {
        return 0.0;
    }
    let mut sorted = rms.clone();
    sorted.sort_by(f32::total_cmp);
    let loud = sorted[(sorted.len() - 1) * 95 / 100];
    let floor = (loud * 10f32.powf(-30.0 / 20.0)).max(1e-3);
    let last = rms.iter().rposition(|&r| r >= floor).map_or(0, |i| i + 1);
    (last * frame).min(samples.len()) as f64 / RATE
}

/// The reference transcript beside a clip (`x.wav` -> `x.txt`), read as every input is:
/// by kind and with a bound; a missing one means no word error rate for the clip.
fn reference_text(wav: &Path) -> Option<String> {
    let txt = wav.with_extension("txt");
    match crate::common::file_kind::read_text(&txt, crate::common::file_kind::MAX_TEXT_FILE_BYTES) {
        Ok(t) => Some(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            log::warn!(
                "{}: not used as the reference transcript: {e}",
                txt.display()
            );
            None
        }
    }
}

/// Clips from a folder (every `.wav` below it, sorted), one `.wav`, or a manifest.
pub fn load_clips(input: &Path, limit: Option<usize>) -> Result<Vec<Clip>, BenchError> {
    let mut found: Vec<(PathBuf, Option<String>)> = Vec::new();
    if input.is_dir() {
        let mut stack = vec![input.to_path_buf()];
        while let Some(d) = stack.pop() {
            let rd = std::fs::read_dir(&d).map_err(|source| BenchError::Io {
                path: d.clone(),
                source,
            })?;
            for e in rd.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x.eq_ignore_ascii_case("wav")) {
                    let txt = reference_text(&p);
                    found.push((p, txt));
                }
            }
        }
        found.sort();
    } else if input
        .extension()
        .is_some_and(|x| x.eq_ignore_ascii_case("wav"))
    {
        let txt = reference_text(input);
        found.push((input.to_path_buf(), txt));
    } else {
        let m = Manifest::load(input)?;
        for it in m.items {
            if let Some(a) = it.audio {
                found.push((a, it.text));
            }
        }
    }
    if let Some(n) = limit {
        found.truncate(n);
    }
    if found.is_empty() {
        return Err(BenchError::NoClips(input.to_path_buf()));
    }
    let mut clips = Vec::with_capacity(found.len());
    for (path, reference) in found {
        let mut src = WavSource::open(&path)?;
        let mut samples = Vec::new();
        while src.read_chunk(&mut samples)? {}
        let speech_end_s = speech_end_s(&samples);
        clips.push(Clip {
            name: path.display().to_string(),
            samples,
            reference: reference.map(|r| r.trim().to_string()),
            speech_end_s,
        });
    }
    Ok(clips)
}

/// Samples in memory, delivered in 32 ms blocks like a microphone's periods.
pub struct SamplesSource {
    samples: Arc<Vec<f32>>,
    pos: usize,
}

impl SamplesSource {
    pub fn new(samples: Arc<Vec<f32>>) -> Self {
        Self { samples, pos: 0 }
    }
}

impl AudioSource for SamplesSource {
    fn describe(&self) -> String {
        format!("{} samples in memory", self.samples.len())
    }
    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        let end = (self.pos + 512).min(self.samples.len());
        out.extend_from_slice(&self.samples[self.pos..end]);
        self.pos = end;
        Ok(self.pos < self.samples.len())
    }
}

/// The joined stream and, per clip, where it starts and its speech ends (seconds).
pub struct Stream {
    pub samples: Arc<Vec<f32>>,
    pub clip_start_s: Vec<f64>,
    pub speech_end_s: Vec<f64>,
}

pub fn join_clips(clips: &[Clip], gap_ms: u32) -> Stream {
    let gap = gap_ms as usize * PIPELINE_RATE_HZ as usize / 1000;
    let mut samples = Vec::new();
    let mut clip_start_s = Vec::new();
    let mut speech_end_s = Vec::new();
    for c in clips {
        let at = samples.len() as f64 / RATE;
        clip_start_s.push(at);
        speech_end_s.push(at + c.speech_end_s);
        samples.extend_from_slice(&c.samples);
        samples.resize(samples.len() + gap, 0.0);
    }
    Stream {
        samples: Arc::new(samples),
        clip_start_s,
        speech_end_s,
    }
}

/// Records every final event with the moment it reached the sink.
struct TimedSink {
    events: Vec<(UtteranceEvent, Instant)>,
    partials: u64,
}

impl EventSink for TimedSink {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.events.push((ev.clone(), Instant::now()));
        Ok(())
    }
    fn partial(&mut self, _p: &PartialEvent) -> std::io::Result<()> {
        self.partials += 1;
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Percentiles {
    pub n: usize,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(mut v: Vec<f64>) -> Self {
        if v.is_empty() {
            return Self::default();
        }
        v.sort_by(f64::total_cmp);
        // Nearest rank: the smallest value with at least q of the samples at or below.
        let q = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Self {
            n: v.len(),
            p50: q(0.5),
            p95: q(0.95),
            p99: q(0.99),
            max: v[v.len() - 1],
        }
    }
}

/// One run of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub mode: String,
    /// End of speech (from the audio) -> the clip's last event, in ms.
    pub latency_ms: Percentiles,
    /// The same for the audio view alone (`ready_ms.audio`, VAD end of speech).
    pub audio_view_ready_ms: Percentiles,
    pub stage_median_ms: BTreeMap<String, f64>,
    pub cpu_s_per_audio_s: f64,
    pub peak_rss_mb: f64,
    pub audio_s: f64,
    pub clips: usize,
    /// Clips with speech but no event.
    pub clips_without_event: usize,
    pub events: u64,
    pub partials: u64,
    pub dropped: BTreeMap<String, u64>,
    /// Clips whose latency exceeded the profile's `budget.event_latency_ms`.
    pub budget_violations: usize,
    pub budget_ms: u32,
    /// Word error rate of the final transcripts against the references, when known.
    pub wer: Option<f64>,
    pub reference_words: usize,
    pub streaming: crate::pipeline::StreamingStats,
    pub per_clip: Vec<ClipResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ClipResult {
    pub clip: String,
    /// Null when no event covered the clip.
    pub latency_ms: Option<f64>,
    /// Seconds of speech in the clip (to its end of speech): latency grows with it.
    pub speech_s: f64,
    /// The clip's last event's own stage times (`latency_ms` of the event: from the
    /// VAD's end of speech), where the latency above went.
    pub event_latency_ms: Option<crate::sinks::event::LatencyMs>,
    /// That event was ended by the sentence-end shortcut.
    pub early_end: bool,
    /// Events that stand for the clip (revised ones left out).
    pub events: usize,
    pub reference: Option<String>,
    pub transcript: String,
}

/// Median of each figure over repeated runs of one mode.
#[derive(Debug, Clone, Serialize)]
pub struct ModeSummary {
    pub mode: String,
    pub runs: usize,
    pub latency_p50_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_p99_ms: f64,
    pub audio_view_ready_p50_ms: f64,
    pub cpu_s_per_audio_s: f64,
    pub peak_rss_mb: f64,
    pub wer: Option<f64>,
    pub budget_violations: f64,
    pub dropped_total: f64,
    pub clips_without_event: f64,
    pub stage_median_ms: BTreeMap<String, f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BenchReport {
    pub input: String,
    pub clips: usize,
    pub audio_s: f64,
    pub gap_ms: u32,
    /// Memory the bench itself holds for the replayed stream (included in peak RSS).
    pub stream_buffer_mb: f64,
    /// The CPU this ran on: figures from different CPUs are not comparable.
    pub cpu: crate::common::resources::CpuInfo,
    pub config: String,
    pub runs: Vec<RunResult>,
    pub summary: Vec<ModeSummary>,
    /// One-shot p50 / streaming p50 (and p95), when both ran.
    pub speedup_p50: Option<f64>,
    pub speedup_p95: Option<f64>,
}

pub struct BenchOptions {
    pub runs: usize,
    pub gap_ms: u32,
    pub baseline: bool,
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub use crate::common::words::normalise_words;

/// Word-level edit distance.
pub fn word_edits(reference: &[String], hypothesis: &[String]) -> usize {
    let mut prev: Vec<usize> = (0..=hypothesis.len()).collect();
    for (i, r) in reference.iter().enumerate() {
        let mut cur = vec![i + 1; hypothesis.len() + 1];
        for (j, h) in hypothesis.iter().enumerate() {
            let sub = prev[j] + usize::from(r != h);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[hypothesis.len()]
}

/// Reset this process's peak RSS so each run reports its own (Linux >= 4.0), after
/// handing back what the previous run freed.
fn reset_peak_rss() {
    crate::common::resources::release_freed_memory();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn current_peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or_else(crate::common::resources::peak_rss_mb, |kb| kb / 1024.0)
}

pub fn run_once(
    engine: &Engine,
    cfg: &Config,
    mode: &str,
    clips: &[Clip],
    stream: &Stream,
) -> Result<RunResult, BenchError> {
    let mut sink = TimedSink {
        events: Vec::new(),
        partials: 0,
    };
    let opts = RunOptions {
        realtime: true,
        counters: Arc::new(Counters::default()),
        ..Default::default()
    };
    reset_peak_rss();
    let cpu0 = crate::common::resources::cpu_seconds();
    let t0 = Instant::now();
    let stats: RunStats = run_stream(
        engine,
        cfg,
        Box::new(SamplesSource::new(stream.samples.clone())),
        &mut sink,
        &opts,
    )?;
    let cpu_s = crate::common::resources::cpu_seconds() - cpu0;
    let peak_rss_mb = current_peak_rss_mb();

    let n = clips.len();
    let ByClip {
        last_event,
        events: events_per_clip,
        texts,
    } = ByClip::of(&sink.events, stream, n);
    let mut lat = Vec::new();
    let mut audio_ready = Vec::new();
    let mut without = 0;
    let mut per_clip = Vec::with_capacity(n);
    for (k, le) in last_event.iter().enumerate() {
        let mut clip_latency = None;
        let mut stages = None;
        let mut early_end = false;
        match le {
            Some(i) => {
                let (ev, at) = &sink.events[*i];
                stages = Some(ev.latency_ms.clone());
                early_end = ev.early_end;
                let emitted_s = at.duration_since(t0).as_secs_f64();
                let l = (emitted_s - stream.speech_end_s[k]) * 1e3;
                clip_latency = Some(l);
                lat.push(l);
                if let Some(a) = ev.ready_ms.audio {
                    audio_ready.push(a);
                }
            }
            None if clips[k].speech_end_s > 0.0 => without += 1,
            None => {}
        }
        per_clip.push(ClipResult {
            clip: clips[k].name.clone(),
            latency_ms: clip_latency,
            speech_s: clips[k].speech_end_s,
            event_latency_ms: stages,
            early_end,
            events: events_per_clip[k],
            reference: clips[k].reference.clone(),
            transcript: texts[k].join(" "),
        });
    }
    let (wer, ref_words) = word_error_rate(clips, &texts);
    let budget_ms = cfg.budget.event_latency_ms;
    let budget_violations = if budget_ms > 0 {
        lat.iter().filter(|&&l| l > budget_ms as f64).count()
    } else {
        0
    };
    Ok(RunResult {
        mode: mode.to_string(),
        latency_ms: Percentiles::of(lat),
        audio_view_ready_ms: Percentiles::of(audio_ready),
        stage_median_ms: stats
            .stages
            .iter()
            .map(|(k, v)| (k.clone(), v.median_ms))
            .collect(),
        cpu_s_per_audio_s: cpu_s / stats.audio_s.max(1e-9),
        peak_rss_mb,
        audio_s: stats.audio_s,
        clips: n,
        clips_without_event: without,
        events: stats.count("events"),
        partials: sink.partials,
        dropped: stats.dropped.clone(),
        budget_violations,
        budget_ms,
        wer,
        reference_words: ref_words,
        streaming: stats.streaming.clone(),
        per_clip,
    })
}

/// A run's events by the clip whose span holds their middle (revised early ends left
/// out): each clip's last event (its index in the run), count and transcripts.
struct ByClip {
    last_event: Vec<Option<usize>>,
    events: Vec<usize>,
    texts: Vec<Vec<String>>,
}

impl ByClip {
    fn of(events: &[(UtteranceEvent, Instant)], stream: &Stream, n: usize) -> Self {
        let mut by = ByClip {
            last_event: vec![None; n],
            events: vec![0; n],
            texts: vec![Vec::new(); n],
        };
        // An early-ended event that a later one revises is not the clip's final word: its
        // speech is in the revising event's transcript too.
        let revised: std::collections::HashSet<u64> =
            events.iter().filter_map(|(ev, _)| ev.revises).collect();
        for (i, (ev, _)) in events.iter().enumerate() {
            if revised.contains(&ev.id) {
                continue;
            }
            let mid = (ev.start_s + ev.end_s) / 2.0;
            let k = stream.clip_start_s.partition_point(|&s| s <= mid);
            if k == 0 {
                continue;
            }
            by.last_event[k - 1] = Some(i);
            by.events[k - 1] += 1;
            if let Some(t) = &ev.transcript {
                by.texts[k - 1].push(t.clone());
            }
        }
        by
    }
}

/// Word error rate over the clips with a reference transcript (`None` without one), and
/// the reference's word count.
fn word_error_rate(clips: &[Clip], texts: &[Vec<String>]) -> (Option<f64>, usize) {
    let (mut edits, mut ref_words, mut with_ref) = (0, 0, false);
    for (c, t) in clips.iter().zip(texts) {
        if let Some(r) = &c.reference {
            with_ref = true;
            let r = normalise_words(r);
            let h = normalise_words(&t.join(" "));
            edits += word_edits(&r, &h);
            ref_words += r.len();
        }
    }
    (
        (with_ref && ref_words > 0).then(|| edits as f64 / ref_words as f64),
        ref_words,
    )
}

fn summarise(mode: &str, runs: &[&RunResult]) -> ModeSummary {
    let m = |f: &dyn Fn(&RunResult) -> f64| median(runs.iter().map(|r| f(r)).collect());
    let mut stage_names: Vec<&String> =
        runs.iter().flat_map(|r| r.stage_median_ms.keys()).collect();
    stage_names.sort();
    stage_names.dedup();
    ModeSummary {
        mode: mode.to_string(),
        runs: runs.len(),
        latency_p50_ms: m(&|r| r.latency_ms.p50),
        latency_p95_ms: m(&|r| r.latency_ms.p95),
        latency_p99_ms: m(&|r| r.latency_ms.p99),
        audio_view_ready_p50_ms: m(&|r| r.audio_view_ready_ms.p50),
        cpu_s_per_audio_s: m(&|r| r.cpu_s_per_audio_s),
        peak_rss_mb: m(&|r| r.peak_rss_mb),
        wer: runs[0].wer.map(|_| m(&|r| r.wer.unwrap_or(f64::NAN))),
        budget_violations: m(&|r| r.budget_violations as f64),
        dropped_total: m(&|r| r.dropped.values().sum::<u64>() as f64),
        clips_without_event: m(&|r| r.clips_without_event as f64),
        stage_median_ms: stage_names
            .into_iter()
            .map(|k| {
                (
                    k.clone(),
                    m(&|r| r.stage_median_ms.get(k).copied().unwrap_or(f64::NAN)),
                )
            })
            .collect(),
    }
}

/// Run the bench: streaming as configured and, with `baseline`, one-shot decoding,
/// interleaved run by run so both see the same machine load.
pub fn run(
    engine: &Engine,
    cfg: &Config,
    config_name: &str,
    input: &Path,
    mut clips: Vec<Clip>,
    opts: &BenchOptions,
) -> Result<BenchReport, BenchError> {
    let stream = join_clips(&clips, opts.gap_ms);
    // Only the joined stream stays in memory: it is the bench's own share of the peak
    // RSS (reported as `stream_buffer_mb`), not the daemon's.
    for c in &mut clips {
        c.samples = Vec::new();
    }
    let clips = &clips[..];
    let mut streaming_cfg = cfg.clone();
    if streaming_cfg.asr.stream_step_ms == 0 {
        streaming_cfg.asr.stream_step_ms = crate::views::asr::AsrConfig::default().stream_step_ms;
    }
    let mut one_shot_cfg = cfg.clone();
    one_shot_cfg.asr.stream_step_ms = 0;
    let mut modes = vec![("streaming", &streaming_cfg)];
    if opts.baseline {
        modes.push(("one-shot", &one_shot_cfg));
    }
    let mut runs = Vec::new();
    for r in 0..opts.runs {
        for &(mode, mode_cfg) in &modes {
            let res = run_once(engine, mode_cfg, mode, clips, &stream)?;
            log::info!(
                "run {}/{} {mode}: p50 {:.0} ms, p95 {:.0} ms, {:.3} CPU-s/audio-s",
                r + 1,
                opts.runs,
                res.latency_ms.p50,
                res.latency_ms.p95,
                res.cpu_s_per_audio_s
            );
            runs.push(res);
        }
    }
    let mut summary = Vec::new();
    for mode in ["streaming", "one-shot"] {
        let rs: Vec<&RunResult> = runs.iter().filter(|r| r.mode == mode).collect();
        if !rs.is_empty() {
            summary.push(summarise(mode, &rs));
        }
    }
    let (speedup_p50, speedup_p95) = match summary.as_slice() {
        [s, o] => (
            Some(o.latency_p50_ms / s.latency_p50_ms),
            Some(o.latency_p95_ms / s.latency_p95_ms),
        ),
        _ => (None, None),
    };
    Ok(BenchReport {
        input: input.display().to_string(),
        clips: clips.len(),
        audio_s: stream.samples.len() as f64 / RATE,
        gap_ms: opts.gap_ms,
        stream_buffer_mb: (stream.samples.len() * 4) as f64 / (1024.0 * 1024.0),
        cpu: crate::common::resources::cpu_info(),
        config: config_name.to_string(),
        runs,
        summary,
        speedup_p50,
        speedup_p95,
    })
}

/// The report as a Markdown table.
pub fn table(r: &BenchReport) -> String {
    let mut s = format!(
        "{} clips, {:.0} s of audio with {} ms gaps, real time; medians of {} run(s) per mode; \
         peak RSS includes the bench's {:.0} MB copy of the stream\nCPU: {}\n\n",
        r.clips,
        r.audio_s,
        r.gap_ms,
        r.summary.first().map_or(0, |m| m.runs),
        r.stream_buffer_mb,
        r.cpu
    );
    s.push_str("| mode | latency p50 ms | p95 ms | p99 ms | audio view p50 ms | CPU-s/audio-s | peak RSS MB | WER | over budget | drops | clips without event |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
    for m in &r.summary {
        s.push_str(&format!(
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.3} | {:.0} | {} | {} | {} | {} |\n",
            m.mode,
            m.latency_p50_ms,
            m.latency_p95_ms,
            m.latency_p99_ms,
            m.audio_view_ready_p50_ms,
            m.cpu_s_per_audio_s,
            m.peak_rss_mb,
            m.wer.map_or("-".into(), |w| format!("{:.1} %", w * 100.0)),
            m.budget_violations,
            m.dropped_total,
            m.clips_without_event,
        ));
    }
    if let (Some(a), Some(b)) = (r.speedup_p50, r.speedup_p95) {
        s.push_str(&format!(
            "\none-shot / streaming latency: {a:.2}x at p50, {b:.2}x at p95\n"
        ));
    }
    s.push_str("\nper-stage medians (ms):\n\n| stage |");
    for m in &r.summary {
        s.push_str(&format!(" {} |", m.mode));
    }
    s.push_str("\n|---|");
    for _ in &r.summary {
        s.push_str("---|");
    }
    s.push('\n');
    if let Some(first) = r.summary.first() {
        for k in first.stage_median_ms.keys() {
            s.push_str(&format!("| {k} |"));
            for m in &r.summary {
                s.push_str(&format!(
                    " {:.2} |",
                    m.stage_median_ms.get(k).copied().unwrap_or(f64::NAN)
                ));
            }
            s.push('\n');
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speech_end_ignores_trailing_silence_and_hiss() {
        let mut s = vec![0.0f32; 16_000];
        for (i, x) in s.iter_mut().enumerate().take(8_000) {
            *x = 0.3 * (i as f32 * 0.05).sin();
        }
        for x in s.iter_mut().skip(8_000) {
            *x = 1e-5;
        }
        assert!((speech_end_s(&s) - 0.5).abs() < 0.011);
        assert_eq!(speech_end_s(&[]), 0.0);
    }

    #[test]
    fn word_error_counts() {
        let r = normalise_words("Oh, great. Another meeting!");
        let h = normalise_words("oh great a meeting");
        assert_eq!(word_edits(&r, &h), 1);
        assert_eq!(word_edits(&r, &[]), 4);
        assert_eq!(word_edits(&[], &h), 4);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let p = Percentiles::of((1..=100).map(f64::from).collect());
        assert_eq!((p.p50, p.p95, p.p99, p.max), (50.0, 95.0, 99.0, 100.0));
        assert_eq!(Percentiles::of(vec![]).n, 0);
    }

    #[test]
    fn clips_are_joined_with_gaps_and_speech_ends_placed() {
        let clip = |n: usize, end: f64| Clip {
            name: "c".into(),
            samples: vec![0.1; n],
            reference: None,
            speech_end_s: end,
        };
        let s = join_clips(&[clip(16_000, 0.9), clip(8_000, 0.4)], 500);
        assert_eq!(s.samples.len(), 16_000 + 8_000 + 2 * 8_000);
        assert_eq!(s.clip_start_s, vec![0.0, 1.5]);
        assert_eq!(s.speech_end_s, vec![0.9, 1.9]);
    }
}
