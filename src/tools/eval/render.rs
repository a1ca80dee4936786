//! The eval report as Markdown tables.

use super::configs::SERVED;
use super::metrics::ECE_BINS;
use super::report::EvalReport;
use std::fmt::Write;

pub(super) fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

/// The report as Markdown tables, for a terminal or a README.
pub fn render(report: &EvalReport) -> String {
    let mut s = String::new();
    rows(&mut s, report);
    row_notes(&mut s, report);
    confusion(&mut s, report);
    sources(&mut s, report);
    s
}

/// The title, what was scored, and one row per views, context and subset.
fn rows(s: &mut String, report: &EvalReport) {
    let _ = writeln!(
        s,
        "# sarcasmd eval: {}{}\n",
        report.manifest.display(),
        report
            .split
            .as_ref()
            .map(|x| format!(" (split {x})"))
            .unwrap_or_default()
    );
    let _ = writeln!(
        s,
        "{} items scored of {} ({} unlabelled, {} skipped, {} with audio but no utterance). \
         Text view reads the {} transcript. Threshold {:.2}. Percent; P and R are macro \
         averages over both classes; ECE over {ECE_BINS} bins.\n",
        report.items_scored,
        report.items_total,
        report.items_unlabelled,
        report.items_skipped.len(),
        report.items_silent,
        report.text_from,
        report.threshold,
    );
    let _ = writeln!(
        s,
        "| views | context | subset | n | sarcastic | P | R | macro-F1 | acc | AUC | ECE | random F1 | majority F1 | seen in training |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in &report.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.views,
            r.context_s
                .map(|c| format!("{c:.0} s"))
                .unwrap_or_else(|| "none".into()),
            r.subset,
            r.scores.n,
            r.scores.n_sarcastic,
            pct(r.scores.precision_macro),
            pct(r.scores.recall_macro),
            pct(r.scores.f1_macro),
            pct(r.scores.accuracy),
            r.auc.map(pct).unwrap_or_else(|| "-".into()),
            r.ece.map(pct).unwrap_or_else(|| "-".into()),
            pct(r.baselines.random_f1_macro),
            pct(r.baselines.majority_f1_macro),
            match r.seen_in_training {
                Some(0) => "0".to_string(),
                Some(k) => format!("**{k}**"),
                None => "?".into(),
            },
        );
    }
}

/// What the "seen in training" column's marks mean, when a row has one.
fn row_notes(s: &mut String, report: &EvalReport) {
    if report
        .rows
        .iter()
        .any(|r| r.seen_in_training.unwrap_or(0) > 0)
    {
        let _ = writeln!(
            s,
            "\n**seen in training**: that many of the row's items have the normalised text of an \
             item one of its heads was trained on (for a text head, the same words get the same \
             score), so the row overstates held-out accuracy; with most items seen it is not a \
             test figure. Evaluate held-out items, or heads trained without them (`--heads`)."
        );
    }
    if report
        .rows
        .iter()
        .any(|r| r.seen_in_training.is_none() && r.views != "annotators' majority")
    {
        let _ = writeln!(
            s,
            "\n`?`: no head of that row records its training items (older metadata), so \
             whether it saw these items is unknown."
        );
    }
}

/// The served fusion's confusion without context, and the threshold it could have had.
fn confusion(s: &mut String, report: &EvalReport) {
    if let Some(r) = report
        .rows
        .iter()
        .find(|r| r.views == SERVED && r.context_s.is_none() && r.subset == "all")
    {
        let c = r.scores.confusion;
        let _ = writeln!(
            s,
            "\nConfusion, served, no context (rows: gold; columns: flagged / not flagged):\n\n\
             | gold | flagged | not flagged | P | R | F1 |\n|---|---|---|---|---|---|\n\
             | sarcastic | {} | {} | {} | {} | {} |\n| not sarcastic | {} | {} | {} | {} | {} |",
            c.tp,
            c.fn_,
            pct(r.scores.sarcastic.precision),
            pct(r.scores.sarcastic.recall),
            pct(r.scores.sarcastic.f1),
            c.fp,
            c.tn,
            pct(r.scores.not_sarcastic.precision),
            pct(r.scores.not_sarcastic.recall),
            pct(r.scores.not_sarcastic.f1),
        );
        if let Some((t, f)) = r.oracle_threshold {
            let _ = writeln!(
                s,
                "\nThreshold {:.2} gives macro-F1 {}; the best threshold on these same items \
                 would be {t:.3} with {} (chosen on the test items: an optimistic bound, not a result).",
                report.threshold,
                pct(r.scores.f1_macro),
                pct(f)
            );
        }
    }
}

/// The annotators' agreement, the heads with what they were trained on, and what was
/// skipped.
fn sources(s: &mut String, report: &EvalReport) {
    if let Some(a) = &report.agreement {
        let k = |x: Option<f64>| x.map(|v| format!("{v:.3}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            s,
            "\nAnnotators: {} items with {} raters; Fleiss' kappa {}, Cohen's kappa {}; \
             {} items with full agreement.",
            a.items,
            a.raters,
            k(a.fleiss_kappa),
            k(a.cohen_kappa),
            a.full_agreement_items
        );
    }
    let _ = writeln!(s, "\nHeads (check that none was trained on these items):\n");
    for h in &report.heads {
        let training = match &h.training {
            serde_json::Value::Object(m) => m
                .get("train")
                .or_else(|| m.get("data"))
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string())
                })
                .unwrap_or_else(|| h.training.to_string()),
            v => v.to_string(),
        };
        let recorded = h
            .training_items_recorded
            .map(|n| format!(" ({n} training texts recorded)"))
            .unwrap_or_default();
        let _ = writeln!(s, "- {} `{}`: {}{}", h.name, h.label, training, recorded);
    }
    if !report.items_skipped.is_empty() {
        let _ = writeln!(
            s,
            "\nSkipped (audio unreadable): {}",
            report.items_skipped.join(", ")
        );
    }
}
