//! `sarcasmd eval MANIFEST`: score a labelled manifest with the daemon's own pipeline and
//! heads and report it the way MuSAG does: every view and servable combination of views,
//! precision / recall / macro-F1 / accuracy beside the random and majority baselines,
//! with and without the preceding context, on the full-agreement subset where annotator
//! labels exist, plus confusion, calibration and inter-annotator agreement.
//!
//! Items with audio go through `pipeline::run_stream_av` exactly as a replay does (VAD,
//! Whisper, prosody, vision when the item has video); the text view reads the Whisper
//! transcript unless `gold_text` is asked for. Items with only text are scored by the text
//! view on their gold transcript (there is nothing else to score).
//!
//! Files: this one scores items and builds the rows; `metrics.rs` the measures,
//! `context.rs` the context condition's text, `training_keys.rs` which items each head
//! saw in training, `render.rs` the Markdown tables; `configs.rs` the configurations a row
//! is about, `item.rs` one item's scores, `report.rs` the report's rows and records.

mod configs;
mod context;
mod item;
pub mod metrics;
mod render;
mod report;
mod training_keys;

use configs::{ctx_key, CONFIGS, SERVED};
use context::with_context;
pub use context::{context_text, text_with_context, CONTEXT_WORDS_PER_S};
pub use item::ItemResult;
pub use metrics::ECE_BINS;
pub use render::render;
pub use report::{Agreement, EvalReport, HeadInfo, Row};
pub use training_keys::{text_key, TrainingKeys};

use std::collections::{BTreeMap, HashSet};

use crate::config::Config;
use crate::pipeline::{self, Engine, PipelineError, RunOptions};
use crate::sinks::event::VecSink;
use crate::sources::audio::{AudioSource, WavSource};
use crate::sources::video::{FileVideoOptions, FileVideoSource, FrameSource};
use crate::tools::manifest::{ManifestItem, ModalityLabels};
use crate::views::fusion::{Fusion, HeadError};
use crate::views::text::{TextEncoder, TextError};

use metrics::{best_threshold, expected_calibration_error, roc_auc, Baselines, Scores};

/// Field of a head's `training` metadata listing `text_key`s of its training items.
pub const TRAINING_KEYS_FIELD: &str = "item_text_sha8";

#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("eval: item {id}: the pipeline failed: {source}")]
    Pipeline {
        id: String,
        #[source]
        source: PipelineError,
    },
    #[error("eval: item {id}: the text encoder failed: {source}")]
    Text {
        id: String,
        #[source]
        source: TextError,
    },
    #[error("eval: item {id}: a head failed: {source}")]
    Head {
        id: String,
        #[source]
        source: HeadError,
    },
    #[error("eval: the engine has no trained heads or no text view; load it with Engine::load_for_eval and keep [text] enabled")]
    NoHeads,
    #[error(
        "eval: no labelled item left to score{0}; check the manifest's `label` fields and --split"
    )]
    NothingToScore(String),
}

#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Score the gold transcript instead of Whisper's for items with audio.
    pub gold_text: bool,
    /// The context condition: this many seconds of preceding turns (0 = no context rows).
    pub context_s: f32,
    /// Only items whose `split` is this.
    pub split: Option<String>,
    /// Only the first N items (after the split filter).
    pub limit: Option<usize>,
}

impl Default for EvalOptions {
    fn default() -> Self {
        Self {
            gold_text: false,
            context_s: 15.0,
            split: None,
            limit: None,
        }
    }
}

struct Scorer<'a> {
    encoder: &'a TextEncoder,
    fusion: &'a Fusion,
}

impl Scorer<'_> {
    fn text(&self, id: &str, text: &str) -> Result<f32, EvalError> {
        let e = self.encoder.embed(text).map_err(|source| EvalError::Text {
            id: id.into(),
            source,
        })?;
        let head = self.fusion.text.as_ref().ok_or(EvalError::NoHeads)?;
        head.predict(&e).map_err(|source| EvalError::Head {
            id: id.into(),
            source,
        })
    }

    /// Every configuration whose views the item has, plus "served". With `context`, `t`
    /// is the text view's score on context + text and only configurations with T are
    /// filled (under `ctx_key` names): the others do not read context.
    fn fill(
        &self,
        r: &mut ItemResult,
        t: Option<f32>,
        a: Option<f32>,
        v: Option<f32>,
        context: bool,
    ) -> Result<(), EvalError> {
        let key = |name: &str| {
            if context {
                ctx_key(name)
            } else {
                name.to_string()
            }
        };
        for (name, ut, ua, uv) in CONFIGS {
            let have = (!ut || t.is_some()) && (!ua || a.is_some()) && (!uv || v.is_some());
            if !have || (context && !ut) {
                continue;
            }
            let pick = |used: bool, p: Option<f32>| if used { p } else { None };
            let p = self
                .fusion
                .fuse_views(pick(ut, t), pick(ua, a), pick(uv, v))
                .map_err(|source| EvalError::Head {
                    id: r.id.clone(),
                    source,
                })?;
            if let Some(p) = p {
                r.p.insert(key(name), p);
            }
        }
        let served = self
            .fusion
            .fuse(t, a, v)
            .map_err(|source| EvalError::Head {
                id: r.id.clone(),
                source,
            })?;
        if let Some(p) = served {
            r.p.insert(key(SERVED), p);
        }
        Ok(())
    }
}

/// Score every selected item. `engine` must carry heads and the text encoder
/// (`Engine::load_for_eval`).
pub fn evaluate(
    engine: &Engine,
    cfg: &Config,
    manifest: &crate::tools::manifest::Manifest,
    opts: &EvalOptions,
) -> Result<EvalReport, EvalError> {
    let fusion = engine.fusion.as_ref().ok_or(EvalError::NoHeads)?;
    let encoder = engine.text.as_ref().ok_or(EvalError::NoHeads)?;
    if fusion.text.is_none() {
        return Err(EvalError::NoHeads);
    }
    let scorer = Scorer { encoder, fusion };
    // The text view is scored here from the item's whole transcript, with or without
    // context; the pipeline's own text score (which may read live context) is not used.
    let mut run_cfg = cfg.clone();
    run_cfg.context.text_uses_context = false;

    let selected: Vec<&ManifestItem> = manifest
        .items
        .iter()
        .filter(|it| opts.split.is_none() || it.split == opts.split)
        .take(opts.limit.unwrap_or(usize::MAX))
        .collect();
    let use_context = opts.context_s > 0.0 && selected.iter().any(|it| !it.context.is_empty());

    let mut items = Vec::with_capacity(selected.len());
    let mut skipped = Vec::new();
    let mut unlabelled = 0;
    for (k, it) in selected.iter().enumerate() {
        if it.label.is_none() {
            unlabelled += 1;
            continue;
        }
        match score_item(engine, &run_cfg, &scorer, it, opts, use_context)? {
            Some(r) => items.push(r),
            None => skipped.push(it.id.clone()),
        }
        if (k + 1) % 100 == 0 {
            log::info!("eval: {}/{} items", k + 1, selected.len());
        }
    }
    if items.is_empty() {
        let split = opts
            .split
            .as_ref()
            .map(|s| format!(" in split {s:?}"))
            .unwrap_or_default();
        return Err(EvalError::NothingToScore(split));
    }

    let mut heads = Vec::new();
    let mut keys = TrainingKeys::default();
    let mut push_head = |name: &'static str, h: &crate::views::fusion::Head| {
        let mut training = h.meta.training.clone();
        let recorded = training
            .as_object_mut()
            .and_then(|m| m.remove(TRAINING_KEYS_FIELD))
            .and_then(|v| {
                v.as_array().map(|a| {
                    a.iter()
                        .filter_map(|k| k.as_str().map(str::to_string))
                        .collect::<HashSet<String>>()
                })
            });
        let n = recorded.as_ref().map(HashSet::len);
        if let Some(set) = recorded {
            keys.by_head.insert(name, set);
        }
        heads.push(HeadInfo {
            name: name.into(),
            label: h.label(),
            feature_version: h.meta.feature_version.clone(),
            training,
            training_items_recorded: n,
        })
    };
    if let Some(h) = &fusion.text {
        push_head("text", h);
    }
    push_head("audio", &fusion.audio);
    if let Some(h) = &fusion.video {
        push_head("video", h);
    }
    push_head("fusion", &fusion.fused);
    let rows = build_rows(
        &items,
        fusion.threshold,
        use_context.then_some(opts.context_s),
        &keys,
    );
    let agreement = agreement(&items);

    let any_audio = items.iter().any(|r| r.has_audio);
    Ok(EvalReport {
        manifest: manifest.path.clone(),
        split: opts.split.clone(),
        text_from: if opts.gold_text || !any_audio {
            "gold"
        } else {
            "whisper"
        },
        threshold: fusion.threshold,
        context_s: opts.context_s,
        items_total: manifest.items.len(),
        items_scored: items.len(),
        items_unlabelled: unlabelled,
        items_silent: items.iter().filter(|r| r.silent).count(),
        items_skipped: skipped,
        rows,
        agreement,
        heads,
        models: engine.models.clone(),
        items,
    })
}

/// `None` when the item's audio cannot be opened (logged; the report lists it).
fn score_item(
    engine: &Engine,
    cfg: &Config,
    scorer: &Scorer,
    it: &ManifestItem,
    opts: &EvalOptions,
    use_context: bool,
) -> Result<Option<ItemResult>, EvalError> {
    let mut r = ItemResult {
        id: it.id.clone(),
        label: it.label,
        modality_labels: it.modality_labels.clone(),
        annotators: it.annotators.clone(),
        has_audio: it.audio.is_some(),
        has_video: false,
        utterances: 0,
        text_from: None,
        text: None,
        context_words: 0,
        p: BTreeMap::new(),
        silent: false,
        gold_key: it.text.as_deref().and_then(text_key),
    };
    let (mut p_audio, mut p_video) = (None, None);
    let mut asr_text = None;
    if let Some(audio) = &it.audio {
        let src = match WavSource::open(audio) {
            Ok(s) => s,
            Err(e) => {
                log::warn!("eval: {}: skipped: {e}", it.id);
                return Ok(None);
            }
        };
        let frames = match (&it.video, engine.vision.is_some()) {
            (Some(v), true) => match FileVideoSource::open(v, FileVideoOptions::default()) {
                Ok(f) => Some(Box::new(f) as Box<dyn FrameSource>),
                Err(e) => {
                    log::warn!("eval: {}: video left out: {e}", it.id);
                    None
                }
            },
            _ => None,
        };
        r.has_video = frames.is_some();
        let mut sink = VecSink::default();
        pipeline::run_stream_av(
            engine,
            cfg,
            Box::new(src) as Box<dyn AudioSource>,
            frames,
            &mut sink,
            &RunOptions::default(),
        )
        .map_err(|source| EvalError::Pipeline {
            id: it.id.clone(),
            source,
        })?;
        let utts = sink.0;
        r.utterances = utts.len();
        r.silent = utts.is_empty();
        // As in training: transcripts joined, the other views from the longest utterance.
        if let Some(longest) = utts
            .iter()
            .max_by(|a, b| (a.end_s - a.start_s).total_cmp(&(b.end_s - b.start_s)))
        {
            p_audio = longest.views.audio;
            p_video = longest.views.video;
        }
        let joined = utts
            .iter()
            .filter_map(|u| u.transcript.as_deref())
            .collect::<Vec<_>>()
            .join(" ");
        let joined = joined.trim();
        if !joined.is_empty() {
            asr_text = Some(joined.to_string());
        }
    }
    let (text, from) = match (&it.text, asr_text, it.audio.is_some() && !opts.gold_text) {
        (_, Some(asr), true) => (Some(asr), Some("whisper")),
        // Audio in but nothing recognised: the served text view has nothing to read.
        (_, None, true) => (None, None),
        (Some(gold), _, false) => (Some(gold.clone()), Some("gold")),
        (None, _, false) => (None, None),
    };
    let p_text = match &text {
        Some(t) => Some(scorer.text(&it.id, t)?),
        None => None,
    };
    scorer.fill(&mut r, p_text, p_audio, p_video, false)?;
    if use_context {
        if let Some(t) = &text {
            let (ctx, words) = context_text(it, opts.context_s);
            r.context_words = words;
            let p_ctx = scorer.text(&it.id, &with_context(&ctx, t))?;
            scorer.fill(&mut r, Some(p_ctx), p_audio, p_video, true)?;
        }
    }
    r.text = text;
    r.text_from = from;
    Ok(Some(r))
}

fn row(
    views: &str,
    context_s: Option<f32>,
    subset: &str,
    labels: &[bool],
    p: &[Option<f32>],
    threshold: f32,
    seen_in_training: Option<usize>,
) -> Row {
    let predicted: Vec<bool> = p
        .iter()
        .map(|x| x.is_some_and(|x| x >= threshold))
        .collect();
    let scores = Scores::of(labels, &predicted);
    // Calibration only over items with a probability (a silent item has none).
    let (yl, pl): (Vec<bool>, Vec<f32>) = labels
        .iter()
        .zip(p)
        .filter_map(|(&y, x)| x.map(|x| (y, x)))
        .unzip();
    let has_p = !pl.is_empty();
    Row {
        views: views.into(),
        context_s,
        subset: subset.into(),
        scores,
        baselines: Baselines::of(labels),
        ece: has_p.then(|| expected_calibration_error(&yl, &pl, ECE_BINS)),
        auc: roc_auc(&yl, &pl),
        oracle_threshold: has_p.then(|| best_threshold(&yl, &pl)),
        seen_in_training,
    }
}

fn build_rows(
    items: &[ItemResult],
    threshold: f32,
    context_s: Option<f32>,
    trained_on: &TrainingKeys,
) -> Vec<Row> {
    let full: Vec<&ItemResult> = items
        .iter()
        .filter(|r| r.annotators.len() >= 2 && r.annotators.iter().all(|&a| a == r.annotators[0]))
        .collect();
    let all: Vec<&ItemResult> = items.iter().collect();
    let mut subsets = vec![("all", all)];
    if !full.is_empty() {
        subsets.push(("full agreement", full));
    }
    let mut rows = Vec::new();
    for (subset, its) in &subsets {
        let mut keys: Vec<(String, String, Option<f32>)> = Vec::new();
        for (name, uses_text, _, _) in CONFIGS {
            keys.push((name.into(), name.into(), None));
            if uses_text && context_s.is_some() {
                keys.push((name.into(), ctx_key(name), context_s));
            }
        }
        keys.push((SERVED.into(), SERVED.into(), None));
        if context_s.is_some() {
            keys.push((SERVED.into(), ctx_key(SERVED), context_s));
        }
        for (views, key, ctx) in keys {
            let rows_items: Vec<&&ItemResult> = if views == SERVED {
                // Every item counts: a silent one is "not flagged".
                its.iter()
                    .filter(|r| r.p.contains_key(&key) || r.silent)
                    .collect()
            } else {
                its.iter().filter(|r| r.p.contains_key(&key)).collect()
            };
            if rows_items.is_empty() {
                continue;
            }
            let labels: Vec<bool> = rows_items
                .iter()
                .map(|r| r.label.unwrap_or(false))
                .collect();
            let p: Vec<Option<f32>> = rows_items.iter().map(|r| r.p.get(&key).copied()).collect();
            let seen = trained_on.seen(&views, &rows_items.iter().map(|r| **r).collect::<Vec<_>>());
            rows.push(row(&views, ctx, subset, &labels, &p, threshold, seen));
        }
        // Human agreement with the gold label: the annotators' majority vote.
        let voted: Vec<(&&ItemResult, bool)> = its
            .iter()
            .filter(|r| !r.annotators.is_empty())
            .map(|r| {
                let yes = r.annotators.iter().filter(|&&a| a).count();
                (r, 2 * yes > r.annotators.len())
            })
            .collect();
        if !voted.is_empty() {
            let labels: Vec<bool> = voted
                .iter()
                .map(|(r, _)| r.label.unwrap_or(false))
                .collect();
            let pred: Vec<bool> = voted.iter().map(|(_, v)| *v).collect();
            rows.push(Row {
                views: "annotators' majority".into(),
                context_s: None,
                subset: subset.to_string(),
                scores: Scores::of(&labels, &pred),
                baselines: Baselines::of(&labels),
                ece: None,
                auc: None,
                oracle_threshold: None,
                seen_in_training: None,
            });
        }
    }
    // Per-modality labels (SarcNet, MuSAG): each single view against its own label.
    for (view, pick) in [
        (
            "T",
            (|m: &ModalityLabels| m.text) as fn(&ModalityLabels) -> Option<bool>,
        ),
        ("A", |m: &ModalityLabels| m.audio),
        ("V", |m: &ModalityLabels| m.video),
    ] {
        let its: Vec<(&ItemResult, bool)> = items
            .iter()
            .filter(|r| r.p.contains_key(view))
            .filter_map(|r| pick(&r.modality_labels).map(|y| (r, y)))
            .collect();
        if its.is_empty() {
            continue;
        }
        let labels: Vec<bool> = its.iter().map(|(_, y)| *y).collect();
        let p: Vec<Option<f32>> = its.iter().map(|(r, _)| r.p.get(view).copied()).collect();
        let subset = format!("vs its {} label", modality_name(view));
        let seen = trained_on.seen(view, &its.iter().map(|(r, _)| *r).collect::<Vec<_>>());
        rows.push(row(view, None, &subset, &labels, &p, threshold, seen));
    }
    rows
}

fn modality_name(view: &str) -> &'static str {
    match view {
        "T" => "text",
        "A" => "audio",
        _ => "video",
    }
}

fn agreement(items: &[ItemResult]) -> Option<Agreement> {
    let rated: Vec<&ItemResult> = items.iter().filter(|r| r.annotators.len() >= 2).collect();
    if rated.is_empty() {
        return None;
    }
    // Fleiss' kappa needs one rater count: use the most common one.
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for r in &rated {
        *counts.entry(r.annotators.len()).or_default() += 1;
    }
    let (&raters, _) = counts.iter().max_by_key(|(m, c)| (**c, **m))?;
    let same: Vec<&&ItemResult> = rated
        .iter()
        .filter(|r| r.annotators.len() == raters)
        .collect();
    let votes: Vec<(usize, usize)> = same
        .iter()
        .map(|r| (r.annotators.iter().filter(|&&a| a).count(), raters))
        .collect();
    let cohen = (raters == 2).then(|| {
        let a: Vec<bool> = same.iter().map(|r| r.annotators[0]).collect();
        let b: Vec<bool> = same.iter().map(|r| r.annotators[1]).collect();
        metrics::cohen_kappa(&a, &b)
    });
    Some(Agreement {
        items: same.len(),
        raters,
        fleiss_kappa: metrics::fleiss_kappa(&votes),
        cohen_kappa: cohen.flatten(),
        full_agreement_items: rated
            .iter()
            .filter(|r| r.annotators.iter().all(|&a| a == r.annotators[0]))
            .count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item_with_context(turns: &[&str]) -> ManifestItem {
        let m = crate::tools::manifest::Manifest::parse(
            &format!(
                r#"{{"id":"a","text":"Oh great.","context":{}}}"#,
                serde_json::to_string(turns).unwrap()
            ),
            std::path::Path::new("/tmp/m.jsonl"),
        )
        .unwrap();
        m.items.into_iter().next().unwrap()
    }

    #[test]
    fn context_keeps_the_newest_turns_within_the_word_budget() {
        // 15 s at 2.5 words/s = 38 words (37.5 rounded).
        let old = vec!["w"; 30].join(" ");
        let mid = vec!["m"; 36].join(" ");
        let new = "the meeting moved again";
        let it = item_with_context(&[&old, &mid, new]);
        let (ctx, words) = context_text(&it, 15.0);
        // The newest (4 words) and the middle turn (crosses the budget: 40 words) are
        // kept; the oldest is beyond it.
        assert_eq!(words, 40);
        assert_eq!(ctx, format!("{mid} {new}"));
        let (none, w0) = context_text(&it, 0.0);
        assert_eq!((none.as_str(), w0), ("", 0));
        assert_eq!(with_context("", "x"), "x");
    }

    #[test]
    fn text_key_matches_the_training_scripts_normalisation() {
        // Values from models/recipe/lib/heads.py `text_keys` (Python's re and hashlib).
        assert_eq!(
            text_key("Well, she’s my patient that’s what you do with patients.").as_deref(),
            Some("8fdd4f01")
        );
        assert_eq!(
            text_key("  Oh   GREAT... another_meeting! Ünïcode ok?").as_deref(),
            Some("68bd7053")
        );
        assert_eq!(text_key(" ?! "), None);
    }

    fn result(id: &str, label: bool, p: &[(&str, f32)], annotators: &[bool]) -> ItemResult {
        ItemResult {
            id: id.into(),
            label: Some(label),
            modality_labels: ModalityLabels {
                text: Some(!label),
                ..Default::default()
            },
            annotators: annotators.to_vec(),
            has_audio: false,
            has_video: false,
            utterances: 0,
            text_from: Some("gold"),
            text: None,
            context_words: 0,
            p: p.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            silent: false,
            gold_key: text_key(&format!("text of {id}")),
        }
    }

    #[test]
    fn rows_cover_views_context_agreement_and_modality_labels() {
        let items = vec![
            result(
                "1",
                true,
                &[
                    ("T", 0.9),
                    ("served", 0.9),
                    ("T|ctx", 0.4),
                    ("served|ctx", 0.4),
                ],
                &[true, true, true],
            ),
            result(
                "2",
                false,
                &[
                    ("T", 0.2),
                    ("served", 0.2),
                    ("T|ctx", 0.3),
                    ("served|ctx", 0.3),
                ],
                &[false, true, false],
            ),
            result(
                "3",
                true,
                &[
                    ("T", 0.6),
                    ("served", 0.6),
                    ("T|ctx", 0.7),
                    ("served|ctx", 0.7),
                ],
                &[true, true, false],
            ),
            result(
                "4",
                false,
                &[
                    ("T", 0.7),
                    ("served", 0.7),
                    ("T|ctx", 0.1),
                    ("served|ctx", 0.1),
                ],
                &[false, false, false],
            ),
        ];
        let rows = build_rows(&items, 0.5, Some(15.0), &TrainingKeys::default());
        let find = |v: &str, ctx: bool, subset: &str| {
            rows.iter()
                .find(|r| r.views == v && r.context_s.is_some() == ctx && r.subset == subset)
                .unwrap_or_else(|| panic!("row {v} {ctx} {subset}"))
        };
        // T without context: 1 tp, 1 fp, 0 fn, 1 tn... item 3 (0.6) tp too.
        let t = find("T", false, "all");
        assert_eq!((t.scores.confusion.tp, t.scores.confusion.fp), (2, 1));
        assert_eq!(t.scores.n, 4);
        let tc = find("T", true, "all");
        assert_eq!((tc.scores.confusion.tp, tc.scores.confusion.fn_), (1, 1));
        // Full agreement: items 1 and 4.
        assert_eq!(find("T", false, "full agreement").scores.n, 2);
        // Majority vote of the annotators: 1 yes, 2 no, 3 yes, 4 no -> perfect.
        assert_eq!(
            find("annotators' majority", false, "all").scores.f1_macro,
            1.0
        );
        // The text view against its own (here inverted) text label.
        let vs = find("T", false, "vs its text label");
        assert_eq!(vs.scores.confusion.tp + vs.scores.confusion.tn, 1);
        // No audio anywhere: no A rows.
        assert!(rows.iter().all(|r| r.views != "A"));
        let a = agreement(&items).unwrap();
        assert_eq!((a.items, a.raters, a.full_agreement_items), (4, 3, 2));
    }

    #[test]
    fn a_silent_item_counts_as_not_flagged_only_in_the_served_row() {
        let mut silent = result("s", true, &[], &[]);
        silent.silent = true;
        silent.has_audio = true;
        let mut seen = result("1", true, &[("A", 0.8), ("served", 0.8)], &[]);
        seen.gold_key = text_key("seen before");
        let items = vec![seen, silent];
        let mut keys = TrainingKeys::default();
        keys.by_head
            .insert("audio", HashSet::from([text_key("Seen before!").unwrap()]));
        let rows = build_rows(&items, 0.5, None, &keys);
        let served = rows.iter().find(|r| r.views == SERVED).unwrap();
        assert_eq!(served.scores.n, 2);
        assert_eq!(served.scores.confusion.fn_, 1);
        let a = rows.iter().find(|r| r.views == "A").unwrap();
        assert_eq!(a.scores.n, 1);
        // The audio head recorded item 1's text (other punctuation and case): both rows
        // using the audio head say so.
        assert_eq!(a.seen_in_training, Some(1));
        assert_eq!(served.seen_in_training, Some(1));
        // ECE only over the item with a probability.
        assert!((served.ece.unwrap() - 0.2).abs() < 1e-6);
        let text = render(&EvalReport {
            manifest: "m.jsonl".into(),
            split: None,
            text_from: "whisper",
            threshold: 0.5,
            context_s: 15.0,
            items_total: 2,
            items_scored: 2,
            items_unlabelled: 0,
            items_skipped: vec![],
            items_silent: 1,
            rows,
            agreement: None,
            heads: vec![],
            models: BTreeMap::new(),
            items,
        });
        assert!(text.contains("| served | none | all | 2 | 2 |"), "{text}");
        assert!(text.contains("| **1** |"), "{text}");
        assert!(text.contains("overstates held-out accuracy"), "{text}");
        assert!(text.contains("| sarcastic | 1 | 1 |"), "{text}");
    }
}
