//! The bench picture: on the left, per mode (streaming, one-shot) the cumulative share
//! of clips whose flag had arrived x ms after their speech ended, with p50 and p95
//! marked; on the right, per mode the median time of each pipeline stage, stacked.
//! Several `bench --json` files are overlaid (two machines, two profiles).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use serde::Deserialize;

use super::{draw_err, file_label, read_json, series_colour, Legend, Mark, PlotError};
use crate::tools::bench::{BenchReport, Percentiles};

/// Stages in the order an utterance passes them after its speech ends: the stack
/// reads bottom to top as time goes. `total` is the sum, and `vad_chunk` is the cost
/// of one 32 ms VAD step while speech goes on, not a step after its end: neither is a
/// layer of the stack.
const STAGE_ORDER: [&str; 7] = [
    "endpoint", "queue", "audio", "video", "asr", "text", "fusion",
];
const NOT_A_LAYER: [&str; 2] = ["total", "vad_chunk"];
/// Muted layer colours (ColorBrewer Set2), apart from the modes' line colours.
const STAGE_RGB: [RGBColor; 8] = [
    RGBColor(102, 194, 165),
    RGBColor(252, 141, 98),
    RGBColor(141, 160, 203),
    RGBColor(231, 138, 195),
    RGBColor(166, 216, 84),
    RGBColor(255, 217, 47),
    RGBColor(229, 196, 148),
    RGBColor(179, 179, 179),
];

/// The parts of `bench --json` this picture reads (serde ignores the rest). Figures a
/// run could not measure are written as `null` (serde_json writes NaN so).
#[derive(Debug, Deserialize)]
struct BenchJson {
    runs: Vec<RunJson>,
    summary: Vec<SummaryJson>,
}

#[derive(Debug, Deserialize)]
struct RunJson {
    mode: String,
    clips_without_event: usize,
    per_clip: Vec<ClipJson>,
}

#[derive(Debug, Deserialize)]
struct ClipJson {
    latency_ms: Option<f64>,
}

#[derive(Debug, Deserialize)]
struct SummaryJson {
    mode: String,
    runs: usize,
    stage_median_ms: BTreeMap<String, Option<f64>>,
}

/// One mode of one bench run file: every clip latency of every repetition, pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchSeries {
    /// Which file (empty when only one is drawn).
    pub label: String,
    pub mode: String,
    pub runs: usize,
    /// End of speech -> flag, one per clip and run that got an event; sorted.
    pub latencies_ms: Vec<f64>,
    /// Clips with speech but no event, over all runs: they never arrive, so the
    /// curve stays below 1 by their share.
    pub clips_without_event: usize,
    /// Median of each stage (the events' `latency_ms`), medians over runs.
    pub stage_median_ms: BTreeMap<String, f64>,
}

impl BenchSeries {
    pub fn name(&self) -> String {
        if self.label.is_empty() {
            self.mode.clone()
        } else {
            format!("{} {}", self.label, self.mode)
        }
    }

    fn clips_total(&self) -> usize {
        self.latencies_ms.len() + self.clips_without_event
    }

    /// The empirical CDF as a staircase: (latency ms, share of all clips flagged by
    /// then), starting at (first latency, 0).
    pub fn cdf_points(&self) -> Vec<(f64, f64)> {
        let n = self.clips_total() as f64;
        let mut pts = Vec::with_capacity(2 * self.latencies_ms.len());
        for (i, &l) in self.latencies_ms.iter().enumerate() {
            pts.push((l, i as f64 / n));
            pts.push((l, (i + 1) as f64 / n));
        }
        pts
    }

    /// Share of all clips flagged within `ms` (the CDF's height there).
    pub fn share_within(&self, ms: f64) -> f64 {
        let k = self.latencies_ms.partition_point(|&l| l <= ms);
        k as f64 / self.clips_total().max(1) as f64
    }

    /// p50/p95 of the latencies drawn, nearest rank, as `bench` computes them per run.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles::of(self.latencies_ms.clone())
    }

    /// Stack layers in pipeline order, then any stage this code does not know yet.
    pub fn layers(&self) -> Vec<(String, f64)> {
        let mut out: Vec<(String, f64)> = STAGE_ORDER
            .iter()
            .filter_map(|&s| self.stage_median_ms.get(s).map(|&v| (s.to_string(), v)))
            .collect();
        for (k, &v) in &self.stage_median_ms {
            if !STAGE_ORDER.contains(&k.as_str()) && !NOT_A_LAYER.contains(&k.as_str()) {
                out.push((k.clone(), v));
            }
        }
        out
    }
}

/// The series of one `bench --json` document.
pub fn series_from_json(
    label: &str,
    v: serde_json::Value,
) -> Result<Vec<BenchSeries>, serde_json::Error> {
    let doc: BenchJson = serde_json::from_value(v)?;
    let mut out = Vec::new();
    for s in &doc.summary {
        let runs: Vec<&RunJson> = doc.runs.iter().filter(|r| r.mode == s.mode).collect();
        let mut latencies_ms: Vec<f64> = runs
            .iter()
            .flat_map(|r| r.per_clip.iter().filter_map(|c| c.latency_ms))
            .collect();
        latencies_ms.sort_by(f64::total_cmp);
        out.push(BenchSeries {
            label: label.to_string(),
            mode: s.mode.clone(),
            runs: s.runs,
            latencies_ms,
            clips_without_event: runs.iter().map(|r| r.clips_without_event).sum(),
            stage_median_ms: s
                .stage_median_ms
                .iter()
                .filter_map(|(k, v)| v.map(|v| (k.clone(), v)))
                .collect(),
        });
    }
    Ok(out)
}

/// The series of a report still in memory (`bench --plot`), through its JSON form.
pub fn series_of_report(report: &BenchReport) -> Result<Vec<BenchSeries>, PlotError> {
    let v = serde_json::to_value(report).map_err(|source| PlotError::Report {
        what: "bench",
        source,
    })?;
    series_from_json("", v).map_err(|source| PlotError::Report {
        what: "bench",
        source,
    })
}

/// The series of several `bench --json` files, each labelled by its file name.
pub fn load(paths: &[&Path]) -> Result<Vec<BenchSeries>, PlotError> {
    let mut out = Vec::new();
    for &p in paths {
        let v = read_json(p, "a `sarcasmd bench --json`")?;
        let label = if paths.len() > 1 {
            file_label(p)
        } else {
            String::new()
        };
        out.extend(
            series_from_json(&label, v).map_err(|source| PlotError::Json {
                path: p.to_path_buf(),
                what: "a `sarcasmd bench --json`",
                source,
            })?,
        );
    }
    Ok(out)
}

/// One colour per file when several are overlaid (modes told apart by dashes), else
/// one per mode.
fn style_of(series: &[BenchSeries], i: usize) -> (RGBColor, bool) {
    let mut labels: Vec<&str> = series.iter().map(|s| s.label.as_str()).collect();
    labels.dedup();
    if labels.len() > 1 {
        let k = labels
            .iter()
            .position(|&l| l == series[i].label)
            .unwrap_or(0);
        (series_colour(k), series[i].mode != "streaming")
    } else {
        (series_colour(i), false)
    }
}

const PICTURE_PX: (u32, u32) = (1200, 620);
const FONT: &str = "sans-serif";
/// Where legend entries start: under the y axis labels.
const LEGEND_LEFT_PX: i32 = 64;

/// What names a series under its stage bar: the name itself when every bar is one mode
/// of one file (short), else its number, which its legend entry starts with (file names
/// side by side under narrow bars ran into each other).
fn bar_names(series: &[BenchSeries]) -> Vec<String> {
    if series.iter().all(|s| s.label.is_empty()) {
        series.iter().map(BenchSeries::name).collect()
    } else {
        (1..=series.len()).map(|i| i.to_string()).collect()
    }
}

fn cdf_legend(series: &[BenchSeries]) -> Legend {
    let mut l = Vec::new();
    let numbered = series.iter().any(|s| !s.label.is_empty());
    for (i, s) in series.iter().enumerate() {
        if s.latencies_ms.is_empty() {
            continue;
        }
        let (colour, dashed) = style_of(series, i);
        let p = s.percentiles();
        let label = format!(
            "{}{}: p50 {:.0} ms, p95 {:.0} ms ({} clips x {} runs{}; dot p50, triangle p95)",
            if numbered {
                format!("{} ", i + 1)
            } else {
                String::new()
            },
            s.name(),
            p.p50,
            p.p95,
            s.clips_total() / s.runs.max(1),
            s.runs,
            if s.clips_without_event > 0 {
                format!(", {} without event", s.clips_without_event)
            } else {
                String::new()
            }
        );
        l.push((
            label,
            colour,
            if dashed { Mark::Dashed } else { Mark::Line },
        ));
    }
    Legend(l)
}

/// Every stage any series has, in stack order.
fn stage_names(series: &[BenchSeries]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for s in series {
        for (k, _) in s.layers() {
            if !names.contains(&k) {
                names.push(k);
            }
        }
    }
    names
}

fn stage_legend(series: &[BenchSeries]) -> Legend {
    Legend(
        stage_names(series)
            .into_iter()
            .enumerate()
            .map(|(k, name)| (name, STAGE_RGB[k % STAGE_RGB.len()], Mark::Box))
            .collect(),
    )
}

/// The picture as an SVG document.
pub fn render_svg(series: &[BenchSeries], title: &str) -> Result<String, PlotError> {
    if series.iter().all(|s| s.latencies_ms.is_empty()) {
        return Err(PlotError::NoData(
            "no clip got an event in any run, so there is no latency to draw".into(),
        ));
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, PICTURE_PX).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let root = root.titled(title, (FONT, 20)).map_err(draw_err)?;
        let (cdf, stages) = (cdf_legend(series), stage_legend(series));
        let strip_px = cdf.height_px().max(stages.height_px());
        let (charts, legends) = root.split_vertically(root.dim_in_pixel().1 - strip_px);
        let split_px = PICTURE_PX.0 * 3 / 5;
        let (left, right) = charts.split_horizontally(split_px);
        draw_cdf(&left, series)?;
        draw_stages(&right, series)?;
        let (l_left, l_right) = legends.split_horizontally(split_px);
        cdf.draw(&l_left, LEGEND_LEFT_PX)?;
        stages.draw(&l_right, LEGEND_LEFT_PX)?;
        root.present().map_err(draw_err)?;
    }
    Ok(svg)
}

fn draw_cdf<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[BenchSeries],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let x_max = series
        .iter()
        .filter_map(|s| s.latencies_ms.last().copied())
        .fold(0.0f64, f64::max)
        * 1.08;
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .caption(
            "end of speech -> flag: share of clips flagged within x ms",
            (FONT, 15),
        )
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d(0f64..x_max.max(1.0), 0f64..1.02)
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .x_desc("latency (ms, from the audio's end of speech to the event)")
        .y_desc("share of clips")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.1}"))
        .label_style((FONT, 12))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(draw_err)?;
    for (i, s) in series.iter().enumerate() {
        if s.latencies_ms.is_empty() {
            continue;
        }
        let (colour, dashed) = style_of(series, i);
        let p = s.percentiles();
        let style = colour.stroke_width(2);
        if dashed {
            chart
                .draw_series(DashedLineSeries::new(s.cdf_points(), 8, 5, style))
                .map_err(draw_err)?;
        } else {
            chart
                .draw_series(LineSeries::new(s.cdf_points(), style))
                .map_err(draw_err)?;
        }
        // p50 a dot, p95 a triangle, their values in the legend: text beside the
        // marks overprinted itself wherever two series' percentiles were close.
        for (p95, at) in [(false, p.p50), (true, p.p95)] {
            let h = s.share_within(at);
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(at, 0.0), (at, h)],
                    3,
                    3,
                    colour.stroke_width(1),
                ))
                .map_err(draw_err)?;
            if p95 {
                chart
                    .draw_series(std::iter::once(TriangleMarker::new(
                        (at, h),
                        6,
                        colour.filled(),
                    )))
                    .map_err(draw_err)?;
            } else {
                chart
                    .draw_series(std::iter::once(Circle::new((at, h), 4, colour.filled())))
                    .map_err(draw_err)?;
            }
        }
    }
    Ok(())
}

fn draw_stages<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    series: &[BenchSeries],
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    let stacks: Vec<Vec<(String, f64)>> = series.iter().map(BenchSeries::layers).collect();
    let stage_names = stage_names(series);
    let y_max = stacks
        .iter()
        .map(|st| st.iter().map(|(_, v)| v).sum::<f64>())
        .fold(0.0f64, f64::max)
        * 1.15;
    let names = bar_names(series);
    let mut chart = ChartBuilder::on(area)
        .margin(12)
        .caption(
            "median of each stage (events' latency_ms), stacked",
            (FONT, 15),
        )
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d((0..series.len()).into_segmented(), 0f64..y_max.max(1.0))
        .map_err(draw_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc("asr includes a pause's decode still running at the endpoint")
        .y_desc("ms")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style((FONT, 12))
        .light_line_style(RGBColor(235, 235, 235))
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) => names.get(*i).cloned().unwrap_or_default(),
            _ => String::new(),
        })
        .draw()
        .map_err(draw_err)?;
    // A series' stack, stage by stage: where each layer starts.
    let base_of = |i: usize, stage: &str| -> Option<(f64, f64)> {
        let mut y = 0.0;
        for (k, v) in &stacks[i] {
            if k == stage {
                return Some((y, y + v));
            }
            y += v;
        }
        None
    };
    for (k, stage) in stage_names.iter().enumerate() {
        // Stages have their own palette, so a layer is not read as the mode of the same
        // colour on the left.
        let colour = STAGE_RGB[k % STAGE_RGB.len()];
        let bars: Vec<Rectangle<(SegmentValue<usize>, f64)>> = (0..series.len())
            .filter_map(|i| {
                let (y0, y1) = base_of(i, stage)?;
                let mut r = Rectangle::new(
                    [
                        (SegmentValue::Exact(i), y0),
                        (SegmentValue::Exact(i + 1), y1),
                    ],
                    colour.filled(),
                );
                r.set_margin(0, 0, 14, 14);
                Some(r)
            })
            .collect();
        chart.draw_series(bars).map_err(draw_err)?;
    }
    for (i, st) in stacks.iter().enumerate() {
        let sum: f64 = st.iter().map(|(_, v)| v).sum();
        chart
            .draw_series(std::iter::once(Text::new(
                format!("{sum:.0} ms"),
                (SegmentValue::CenterOf(i), sum),
                (FONT, 12)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )))
            .map_err(draw_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::bench::{ClipResult, ModeSummary, RunResult};

    fn run(mode: &str, lat: &[Option<f64>], without: usize) -> RunResult {
        RunResult {
            mode: mode.into(),
            latency_ms: Percentiles::of(lat.iter().flatten().copied().collect()),
            audio_view_ready_ms: Percentiles::default(),
            stage_median_ms: BTreeMap::new(),
            cpu_s_per_audio_s: 0.1,
            peak_rss_mb: 200.0,
            audio_s: 60.0,
            clips: lat.len(),
            clips_without_event: without,
            events: lat.len() as u64,
            partials: 0,
            dropped: BTreeMap::new(),
            budget_violations: 0,
            budget_ms: 0,
            wer: None,
            reference_words: 0,
            streaming: Default::default(),
            per_clip: lat
                .iter()
                .map(|&l| ClipResult {
                    clip: "c.wav".into(),
                    latency_ms: l,
                    speech_s: 2.0,
                    event_latency_ms: None,
                    early_end: false,
                    events: usize::from(l.is_some()),
                    reference: None,
                    transcript: String::new(),
                })
                .collect(),
        }
    }

    fn summary(mode: &str, runs: usize, stages: &[(&str, f64)]) -> ModeSummary {
        ModeSummary {
            mode: mode.into(),
            runs,
            latency_p50_ms: 0.0,
            latency_p95_ms: 0.0,
            latency_p99_ms: 0.0,
            audio_view_ready_p50_ms: 0.0,
            cpu_s_per_audio_s: 0.0,
            peak_rss_mb: 0.0,
            wer: None,
            budget_violations: 0.0,
            dropped_total: 0.0,
            clips_without_event: 0.0,
            stage_median_ms: stages.iter().map(|&(k, v)| (k.to_string(), v)).collect(),
        }
    }

    /// A report as `sarcasmd bench` builds it: two runs of streaming, one of one-shot.
    fn report() -> BenchReport {
        BenchReport {
            input: "/tmp/meet".into(),
            clips: 3,
            audio_s: 60.0,
            gap_ms: 1000,
            stream_buffer_mb: 4.0,
            cpu: crate::common::resources::cpu_info(),
            config: "defaults".into(),
            runs: vec![
                run("streaming", &[Some(300.0), Some(250.0), None], 1),
                run("one-shot", &[Some(900.0), Some(700.0), Some(800.0)], 0),
                run("streaming", &[Some(280.0), Some(320.0), Some(260.0)], 0),
            ],
            summary: vec![
                summary(
                    "streaming",
                    2,
                    &[
                        ("total", 290.0),
                        ("asr", 2.0),
                        ("endpoint", 256.0),
                        ("vad_chunk", 0.4),
                        ("text", 1.9),
                        ("queue", f64::NAN),
                    ],
                ),
                summary("one-shot", 1, &[("endpoint", 320.0), ("asr", 450.0)]),
            ],
            speedup_p50: Some(3.0),
            speedup_p95: Some(3.0),
        }
    }

    #[test]
    fn series_pool_the_runs_of_a_mode_and_count_clips_without_event() {
        let s = series_of_report(&report()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].mode, "streaming");
        assert_eq!(s[0].latencies_ms, vec![250.0, 260.0, 280.0, 300.0, 320.0]);
        assert_eq!(s[0].clips_without_event, 1);
        assert_eq!(s[1].latencies_ms, vec![700.0, 800.0, 900.0]);
        // 5 of 6 clip-runs arrived: the curve tops out at 5/6.
        let cdf = s[0].cdf_points();
        assert_eq!(cdf.first(), Some(&(250.0, 0.0)));
        assert!((cdf.last().unwrap().1 - 5.0 / 6.0).abs() < 1e-12);
        assert!((s[0].share_within(280.0) - 3.0 / 6.0).abs() < 1e-12);
        assert_eq!(s[0].share_within(100.0), 0.0);
    }

    #[test]
    fn layers_follow_the_pipeline_and_leave_out_sums_and_nan() {
        let s = series_of_report(&report()).unwrap();
        let names: Vec<String> = s[0].layers().into_iter().map(|(k, _)| k).collect();
        // queue was NaN (written as null): not measured, not a zero-height layer.
        assert_eq!(names, vec!["endpoint", "asr", "text"]);
    }

    #[test]
    fn the_svg_names_modes_and_percentiles() {
        let s = series_of_report(&report()).unwrap();
        let svg = render_svg(&s, "bench").unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.trim_end().ends_with("</svg>"));
        for needle in [
            "streaming: p50 280 ms, p95 320 ms",
            "one-shot: p50 800 ms",
            "p95 320",
            "endpoint",
            "1 without event",
        ] {
            assert!(svg.contains(needle), "missing {needle:?}");
        }
    }

    #[test]
    fn files_overlaid_are_labelled_by_name_and_styled_by_file() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("laptop.json");
        let b = d.path().join("rpi4.json");
        for p in [&a, &b] {
            std::fs::write(p, serde_json::to_string(&report()).unwrap()).unwrap();
        }
        let s = load(&[&a, &b]).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(s[2].name(), "rpi4 streaming");
        assert_eq!(style_of(&s, 0), (series_colour(0), false));
        assert_eq!(style_of(&s, 1), (series_colour(0), true));
        assert_eq!(style_of(&s, 2), (series_colour(1), false));
        let svg = render_svg(&s, "two").unwrap();
        assert!(svg.contains("laptop one-shot: p50 800 ms"));
        assert!(svg.contains("rpi4 streaming: p50 280 ms"));
    }

    #[test]
    fn a_file_that_is_not_bench_json_is_named_in_the_error() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("eval.json");
        std::fs::write(&p, r#"{"items": []}"#).unwrap();
        let e = load(&[&p]).unwrap_err().to_string();
        assert!(e.contains("eval.json") && e.contains("bench"), "{e}");
    }

    #[test]
    fn nothing_arrived_is_an_error_not_an_empty_picture() {
        let mut r = report();
        r.runs = vec![run("streaming", &[None, None], 2)];
        r.summary.truncate(1);
        let s = series_of_report(&r).unwrap();
        assert!(matches!(render_svg(&s, "x"), Err(PlotError::NoData(_))));
    }
}
