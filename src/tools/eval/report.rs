//! The report eval writes: the rows of figures, annotator agreement, the heads and the
//! items.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;

use super::item::ItemResult;
use super::metrics::{Baselines, Scores};

#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Configuration: "T", "A", ..., or "served" (late fusion over whatever views an item
    /// has, as the daemon serves it), or "annotators' majority" (human agreement).
    pub views: String,
    /// Seconds of preceding context given to the text view, when it has any.
    pub context_s: Option<f32>,
    /// "all", "full agreement", or which per-modality label the row is scored against.
    pub subset: String,
    pub scores: Scores,
    pub baselines: Baselines,
    pub ece: Option<f64>,
    /// ROC-AUC over the items with a probability (threshold-free ranking quality).
    pub auc: Option<f64>,
    /// Threshold maximising macro-F1 on these very items (optimistic) and that figure.
    pub oracle_threshold: Option<(f32, f64)>,
    /// Items of this row whose gold text a head scoring them was trained on: a row with
    /// any is not a test figure. `None`: the heads do not record it.
    pub seen_in_training: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Agreement {
    /// Items with annotator labels, and the number of raters the kappa used.
    pub items: usize,
    pub raters: usize,
    pub fleiss_kappa: Option<f64>,
    /// Only with exactly two raters.
    pub cohen_kappa: Option<f64>,
    /// Items where every rater agrees.
    pub full_agreement_items: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct HeadInfo {
    pub name: String,
    pub label: String,
    pub feature_version: String,
    /// The metadata's training record, without the list of training keys.
    pub training: serde_json::Value,
    /// Training items the head records (by `text_key`), if it records them.
    pub training_items_recorded: Option<usize>,
}

#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub manifest: PathBuf,
    pub split: Option<String>,
    pub text_from: &'static str,
    pub threshold: f32,
    pub context_s: f32,
    pub items_total: usize,
    pub items_scored: usize,
    pub items_unlabelled: usize,
    /// Items whose audio could not be opened (named in the log).
    pub items_skipped: Vec<String>,
    pub items_silent: usize,
    pub rows: Vec<Row>,
    pub agreement: Option<Agreement>,
    pub heads: Vec<HeadInfo>,
    pub models: BTreeMap<String, String>,
    pub items: Vec<ItemResult>,
}
