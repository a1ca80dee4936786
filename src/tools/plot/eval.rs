//! The eval picture: ROC curves (left) and a reliability diagram (right) of the text,
//! audio and video views and of the served fusion, with the baselines every figure of
//! `sarcasmd eval` is read against: the random/majority ROC diagonal (AUC 0.5), perfect
//! calibration, and the class rate (what a constant "prior" score predicts).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;
use serde::Deserialize;

use super::{draw_err, read_json, series_colour, Legend, Mark, PlotError};
use crate::tools::eval::metrics::{expected_calibration_error, reliability_bins, roc_auc};
use crate::tools::eval::{EvalReport, ECE_BINS};

/// `eval`'s configuration keys drawn, and their names in the picture: each view
/// alone, and "served", the late fusion over whatever views an item has, as the daemon
/// serves it.
const DRAWN: [(&str, &str); 4] = [
    ("T", "text"),
    ("A", "audio"),
    ("V", "video"),
    ("served", "served fusion"),
];

#[derive(Debug, Deserialize)]
struct EvalJson {
    manifest: String,
    text_from: String,
    items: Vec<ItemJson>,
    #[serde(default)]
    rows: Vec<RowJson>,
}

/// A table row, for how many of its items a head had seen in training.
#[derive(Debug, Deserialize)]
struct RowJson {
    views: String,
    context_s: Option<f64>,
    subset: String,
    seen_in_training: Option<usize>,
}

#[derive(Debug, Deserialize)]
struct ItemJson {
    label: Option<bool>,
    p: BTreeMap<String, f64>,
}

/// One view's scores over the labelled items it scored.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoredView {
    pub name: String,
    pub labels: Vec<bool>,
    pub p: Vec<f64>,
    /// Items whose text a head of this view was trained on (eval's check): the curve
    /// is then partly in-sample. `None` when the heads do not record it.
    pub seen_in_training: Option<usize>,
}

impl ScoredView {
    pub fn positives(&self) -> usize {
        self.labels.iter().filter(|&&y| y).count()
    }

    /// ROC curve from (0, 0) to (1, 1): thresholds from the highest score down, items
    /// with equal scores entering together (a diagonal step), so the area under it is
    /// the Mann-Whitney AUC with ties counted half. Empty when a class is missing.
    pub fn roc_points(&self) -> Vec<(f64, f64)> {
        let pos = self.positives() as f64;
        let neg = (self.labels.len() - self.positives()) as f64;
        if pos == 0.0 || neg == 0.0 {
            return Vec::new();
        }
        let mut order: Vec<usize> = (0..self.p.len()).collect();
        order.sort_by(|&a, &b| self.p[b].total_cmp(&self.p[a]));
        let (mut tp, mut fp) = (0.0, 0.0);
        let mut pts = vec![(0.0, 0.0)];
        let mut i = 0;
        while i < order.len() {
            let score = self.p[order[i]];
            while i < order.len() && self.p[order[i]] == score {
                if self.labels[order[i]] {
                    tp += 1.0;
                } else {
                    fp += 1.0;
                }
                i += 1;
            }
            pts.push((fp / neg, tp / pos));
        }
        pts
    }

    pub fn auc(&self) -> Option<f64> {
        roc_auc(&self.labels, &self.p_f32())
    }

    pub fn ece(&self) -> f64 {
        expected_calibration_error(&self.labels, &self.p_f32(), ECE_BINS)
    }

    /// Reliability bins (eval's ECE bins): per non-empty bin, (mean predicted
    /// probability, observed share of sarcastic items, items).
    pub fn reliability(&self) -> Vec<(f64, f64, usize)> {
        reliability_bins(&self.labels, &self.p, ECE_BINS)
            .into_iter()
            .filter(|b| b.items > 0)
            .map(|b| {
                let n = b.items as f64;
                (b.sum_p / n, b.sum_y / n, b.items)
            })
            .collect()
    }

    /// The scores as eval's metrics take them.
    fn p_f32(&self) -> Vec<f32> {
        self.p.iter().map(|&x| x as f32).collect()
    }
}

/// What the picture draws from one `eval --json` document.
#[derive(Debug, Clone)]
pub struct EvalPicture {
    /// The manifest's file name and which transcript the text view read.
    pub title: String,
    pub views: Vec<ScoredView>,
    /// Share of sarcastic items among all labelled items.
    pub class_rate: f64,
    pub labelled: usize,
}

pub fn picture_from_json(v: serde_json::Value) -> Result<EvalPicture, serde_json::Error> {
    let doc: EvalJson = serde_json::from_value(v)?;
    let labelled: Vec<&ItemJson> = doc.items.iter().filter(|it| it.label.is_some()).collect();
    let views = DRAWN
        .iter()
        .map(|&(key, name)| {
            let (labels, p) = labelled
                .iter()
                .filter_map(|it| Some((it.label?, *it.p.get(key)?)))
                .unzip();
            let seen_in_training = doc
                .rows
                .iter()
                .find(|r| r.views == key && r.context_s.is_none() && r.subset == "all")
                .and_then(|r| r.seen_in_training);
            ScoredView {
                name: name.to_string(),
                labels,
                p,
                seen_in_training,
            }
        })
        .filter(|v| !v.labels.is_empty())
        .collect();
    let positives = labelled.iter().filter(|it| it.label == Some(true)).count();
    let manifest = Path::new(&doc.manifest)
        .file_name()
        .map_or(doc.manifest.clone(), |n| n.to_string_lossy().into_owned());
    Ok(EvalPicture {
        title: format!("sarcasmd eval: {manifest} ({} transcripts)", doc.text_from),
        views,
        class_rate: positives as f64 / labelled.len().max(1) as f64,
        labelled: labelled.len(),
    })
}

/// The picture of a report still in memory (`eval --plot`), through its JSON form.
pub fn picture_of_report(report: &EvalReport) -> Result<EvalPicture, PlotError> {
    let v = serde_json::to_value(report).map_err(|source| PlotError::Report {
        what: "eval",
        source,
    })?;
    picture_from_json(v).map_err(|source| PlotError::Report {
        what: "eval",
        source,
    })
}

pub fn load(path: &Path) -> Result<EvalPicture, PlotError> {
    let what = "a `sarcasmd eval --json`";
    picture_from_json(read_json(path, what)?).map_err(|source| PlotError::Json {
        path: path.to_path_buf(),
        what,
        source,
    })
}

const PICTURE_PX: (u32, u32) = (1200, 660);
/// Where legend entries start: under the y axis labels.
const LEGEND_LEFT_PX: i32 = 64;

fn in_sample_note(v: &ScoredView) -> String {
    match v.seen_in_training {
        Some(k) if k > 0 => format!(", {k} seen in training: in-sample"),
        _ => String::new(),
    }
}

fn roc_legend(pic: &EvalPicture) -> Legend {
    let mut l = vec![(
        "random or majority guess (AUC 0.50)".to_string(),
        grey(),
        Mark::Dashed,
    )];
    for (i, v) in pic.views.iter().enumerate() {
        if v.roc_points().is_empty() {
            continue;
        }
        l.push((
            format!(
                "{}: AUC {} (n {}{})",
                v.name,
                v.auc().map_or("-".into(), |a| format!("{a:.2}")),
                v.labels.len(),
                in_sample_note(v)
            ),
            series_colour(i),
            Mark::Line,
        ));
    }
    Legend(l)
}

fn reliability_legend(pic: &EvalPicture) -> Legend {
    let mut l = vec![
        ("perfect calibration".to_string(), grey(), Mark::Dashed),
        (
            format!(
                "class rate {:.2}: where a constant score sits (calibrated, uninformative)",
                pic.class_rate
            ),
            RATE_RGB,
            Mark::Dashed,
        ),
    ];
    for (i, v) in pic.views.iter().enumerate() {
        l.push((
            format!("{}: ECE {:.3} (n {})", v.name, v.ece(), v.labels.len()),
            series_colour(i),
            Mark::Line,
        ));
    }
    Legend(l)
}

const RATE_RGB: RGBColor = RGBColor(40, 40, 40);
const FONT: &str = "sans-serif";

pub fn render_svg(pic: &EvalPicture) -> Result<String, PlotError> {
    if pic.views.is_empty() {
        return Err(PlotError::NoData(
            "no labelled item has a score (check the manifest's labels)".into(),
        ));
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, PICTURE_PX).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let root = root
            .titled(
                &format!(
                    "{}: {} labelled items, {:.0} % sarcastic",
                    pic.title,
                    pic.labelled,
                    pic.class_rate * 100.0
                ),
                (FONT, 18),
            )
            .map_err(draw_err)?;
        let (roc, rel) = (roc_legend(pic), reliability_legend(pic));
        let strip_px = roc.height_px().max(rel.height_px());
        let (charts, legends) = root.split_vertically(root.dim_in_pixel().1 - strip_px);
        let (left, right) = charts.split_horizontally(PICTURE_PX.0 / 2);
        draw_roc(&left, pic)?;
        draw_reliability(&right, pic)?;
        let (l_left, l_right) = legends.split_horizontally(PICTURE_PX.0 / 2);
        roc.draw(&l_left, LEGEND_LEFT_PX)?;
        rel.draw(&l_right, LEGEND_LEFT_PX)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

fn unit_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, plotters::coord::Shift>,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
) -> Result<
    ChartContext<
        'a,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    PlotError,
>
where
    DB::ErrorType: 'static,
{
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .caption(caption, (FONT, 15))
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..1.0, 0f64..1.0)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| format!("{v:.1}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .label_style((FONT, 12))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(draw_err)?;
    Ok(chart)
}

fn grey() -> RGBColor {
    RGBColor(110, 110, 110)
}

/// The dashed y = x line: a random or constant score's ROC, and perfect calibration.
fn diagonal() -> DashedLineSeries<std::vec::IntoIter<(f64, f64)>, i32> {
    DashedLineSeries::new(vec![(0.0, 0.0), (1.0, 1.0)], 6, 4, grey().stroke_width(1))
}

fn draw_roc<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    pic: &EvalPicture,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let mut chart = unit_chart(
        area,
        "ROC: sarcastic items found vs others flagged",
        "false positive rate",
        "true positive rate",
    )?;
    chart.draw_series(diagonal()).map_err(draw_err)?;
    for (i, v) in pic.views.iter().enumerate() {
        let pts = v.roc_points();
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(pts, series_colour(i).stroke_width(2)))
            .map_err(draw_err)?;
    }
    Ok(())
}

fn draw_reliability<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    pic: &EvalPicture,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let mut chart = unit_chart(
        area,
        &format!("reliability ({ECE_BINS} bins; dot area = items)"),
        "predicted probability (bin mean)",
        "observed share sarcastic",
    )?;
    chart.draw_series(diagonal()).map_err(draw_err)?;
    let rate = pic.class_rate;
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, rate), (1.0, rate)],
            2,
            4,
            RATE_RGB.stroke_width(1),
        ))
        .map_err(draw_err)?;
    let most = pic
        .views
        .iter()
        .flat_map(|v| v.reliability())
        .map(|(_, _, n)| n)
        .max()
        .unwrap_or(1) as f64;
    for (i, v) in pic.views.iter().enumerate() {
        let colour = series_colour(i);
        let bins = v.reliability();
        chart
            .draw_series(LineSeries::new(
                bins.iter().map(|&(p, y, _)| (p, y)),
                colour.stroke_width(2),
            ))
            .map_err(draw_err)?;
        // Dot area grows with the bin's items: a bin of 2 items says little.
        chart
            .draw_series(bins.iter().map(|&(p, y, n)| {
                let r = (3.0 + 7.0 * (n as f64 / most).sqrt()).round() as i32;
                Circle::new((p, y), r, colour.mix(0.55).filled())
            }))
            .map_err(draw_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(labels: &[bool], p: &[f64]) -> ScoredView {
        ScoredView {
            name: "t".into(),
            labels: labels.to_vec(),
            p: p.to_vec(),
            seen_in_training: None,
        }
    }

    fn trapezoid(pts: &[(f64, f64)]) -> f64 {
        pts.windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[1].1 + w[0].1) / 2.0)
            .sum()
    }

    #[test]
    fn roc_area_is_evals_auc_ties_included() {
        let v = view(
            &[true, false, true, false, true, false, false],
            &[0.9, 0.8, 0.6, 0.6, 0.3, 0.2, 0.6],
        );
        let pts = v.roc_points();
        assert_eq!(pts.first(), Some(&(0.0, 0.0)));
        assert_eq!(pts.last(), Some(&(1.0, 1.0)));
        let auc = v.auc().unwrap();
        assert!((trapezoid(&pts) - auc).abs() < 1e-9, "{pts:?} vs {auc}");
        assert!(view(&[true, true], &[0.1, 0.2]).roc_points().is_empty());
    }

    #[test]
    fn reliability_bins_match_the_ece() {
        let v = view(
            &[true, false, true, true, false],
            &[0.95, 0.91, 0.15, 0.55, 1.0],
        );
        let bins = v.reliability();
        // 0.95, 0.91 and 1.0 share the last bin; 0.15 and 0.55 have their own.
        assert_eq!(bins.len(), 3);
        let last = bins[2];
        assert!((last.0 - (0.95 + 0.91 + 1.0) / 3.0).abs() < 1e-9);
        assert!((last.1 - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(last.2, 3);
        let ece: f64 = bins
            .iter()
            .map(|&(p, y, n)| (p - y).abs() * n as f64 / 5.0)
            .sum();
        assert!((ece - v.ece()).abs() < 1e-6);
    }

    #[test]
    fn eval_items_become_views_and_unlabelled_items_are_left_out() {
        use crate::tools::eval::ItemResult;
        let item = |id: &str, label: Option<bool>, p: &[(&str, f32)]| ItemResult {
            id: id.into(),
            label,
            modality_labels: Default::default(),
            annotators: Vec::new(),
            has_audio: true,
            has_video: false,
            utterances: 1,
            text_from: Some("whisper"),
            text: Some("a <b> & c".into()),
            context_words: 0,
            p: p.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
            silent: false,
            gold_key: None,
        };
        let items = vec![
            item(
                "1",
                Some(true),
                &[("T", 0.8), ("A", 0.4), ("served", 0.7), ("T|ctx", 0.1)],
            ),
            item("2", Some(false), &[("T", 0.3), ("A", 0.6), ("served", 0.3)]),
            item("3", None, &[("T", 0.9)]),
            item("4", Some(false), &[("T", 0.2)]),
        ];
        let doc = serde_json::json!({
            "manifest": "/x/speech.jsonl", "text_from": "whisper", "items": items,
            "rows": [
                {"views": "A", "context_s": null, "subset": "all", "seen_in_training": 2},
                {"views": "A", "context_s": 15.0, "subset": "all", "seen_in_training": 1},
                {"views": "T", "context_s": null, "subset": "all", "seen_in_training": 0},
            ],
        });
        let pic = picture_from_json(doc).unwrap();
        let names: Vec<&str> = pic.views.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["text", "audio", "served fusion"]);
        assert_eq!(pic.views[0].labels, vec![true, false, false]);
        assert_eq!(pic.views[1].p.len(), 2);
        assert_eq!(pic.labelled, 3);
        assert!((pic.class_rate - 1.0 / 3.0).abs() < 1e-12);
        assert!(pic.title.contains("speech.jsonl") && pic.title.contains("whisper"));
        let svg = render_svg(&pic).unwrap();
        for needle in [
            "text: AUC 1.00 (n 3)",
            "audio: AUC 0.00 (n 2, 2 seen in training: in-sample)",
            "class rate 0.33",
            "ECE",
            "random or majority",
        ] {
            assert!(svg.contains(needle), "missing {needle:?}");
        }
        // The text head saw none of these items: no in-sample note.
        assert!(!svg.contains("text: AUC 1.00 (n 3, "));
    }

    #[test]
    fn no_scored_item_is_an_error() {
        let doc = serde_json::json!({"manifest": "m", "text_from": "gold", "items": []});
        let pic = picture_from_json(doc).unwrap();
        assert!(matches!(render_svg(&pic), Err(PlotError::NoData(_))));
    }
}
