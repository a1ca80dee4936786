//! The count registry's promise (issue 35, item 4): every counter of a run is listed once
//! (`sarcasmd::common::counts`), and from there reaches the run summary and `/metrics`
//! with the same value. A counter field the registry does not list, or a listed count one
//! output lacks, fails here. Each output is built by the code the daemon uses: a real
//! `run_stream` for the summary and `Metrics::encode` for `/metrics`.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::common::*;
use sarcasmd::common::counts::{InMetrics, InSummary, GAUGES};
use sarcasmd::pipeline::Counters;
use sarcasmd::sinks::metrics::Metrics;

/// The `pub <name>: Atomic...` fields of `struct <name> { .. }` in a source file.
fn atomic_fields(src: &str, strukt: &str) -> Vec<String> {
    let start = src
        .find(&format!("pub struct {strukt} {{"))
        .unwrap_or_else(|| panic!("struct {strukt} not found"));
    let body = &src[start..start + src[start..].find("\n}").unwrap()];
    body.lines()
        .filter_map(|l| l.trim().strip_prefix("pub "))
        .filter_map(|l| l.split_once(": "))
        .filter(|(_, ty)| ty.starts_with("Atomic"))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn every_counter_field_is_in_the_registry_or_is_a_gauge() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/common");
    let counters = std::fs::read_to_string(root.join("counters.rs")).unwrap();
    let shed = std::fs::read_to_string(root.join("shed.rs")).unwrap();
    let mut fields: Vec<String> = atomic_fields(&counters, "Counters");
    fields.extend(
        atomic_fields(&counters, "VisionCounters")
            .into_iter()
            .map(|f| format!("vision.{f}")),
    );
    fields.extend(
        atomic_fields(&shed, "ShedCounters")
            .into_iter()
            .map(|f| format!("shed.{f}")),
    );
    assert!(fields.len() > 25, "read too few fields: {fields:?}");
    let registered: BTreeSet<&str> = Counters::default()
        .counts()
        .iter()
        .map(|c| c.field)
        .chain(GAUGES.iter().copied())
        .collect();
    let missing: Vec<&String> = fields
        .iter()
        .filter(|f| !registered.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "counter fields neither in Counters::counts() nor in GAUGES: {missing:?}"
    );
}

#[test]
fn every_count_reaches_the_run_summary_and_metrics_with_its_value() {
    let counters = Arc::new(Counters::default());
    let stats = run_silence_counted(&counters, 1.0);
    let summary = serde_json::to_value(&stats).unwrap();
    let m = Metrics::new(counters.clone(), &[]);
    // The sinks count events by type as they write them; have one of each counted.
    m.observe_partial();
    let metrics = m.encode();
    let value_of = |series: &str| -> Vec<f64> {
        metrics
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{series} ")))
            .map(|v| v.parse().unwrap())
            .collect()
    };
    let counts = counters.counts();
    assert!(counts.len() > 25, "{counts:?}");
    for c in &counts {
        let in_summary = match c.summary {
            InSummary::Top(k) => Some(&summary[k]),
            InSummary::Streaming(k) => Some(&summary["streaming"][k]),
            InSummary::Vision(k) => Some(&summary["vision"][k]),
            InSummary::Shed(k) => Some(&summary["shed"][k]),
            InSummary::Converted(k) => {
                assert!(summary.get(k).is_some(), "{}: summary lacks {k}", c.field);
                None
            }
        };
        if let Some(v) = in_summary {
            assert_eq!(
                v.as_u64(),
                Some(c.value),
                "{}: summary {:?}",
                c.field,
                c.summary
            );
        }
        match c.metrics {
            InMetrics::Own(name, _) => {
                let s = format!("sarcasmd_{name}_total");
                assert_eq!(
                    value_of(&s),
                    [c.value as f64],
                    "{}: {s} in\n{metrics}",
                    c.field
                );
            }
            InMetrics::Row(family, value) => {
                let label = sarcasmd::common::counts::FAMILIES
                    .iter()
                    .find(|f| f.name == family)
                    .unwrap_or_else(|| panic!("{}: family {family} not in FAMILIES", c.field))
                    .label;
                let s = format!("sarcasmd_{family}_total{{{label}=\"{value}\"}}");
                assert_eq!(
                    value_of(&s),
                    [c.value as f64],
                    "{}: {s} in\n{metrics}",
                    c.field
                );
            }
            InMetrics::Converted(name) => assert!(
                metrics.contains(&format!("sarcasmd_{name}")),
                "{}: /metrics lacks sarcasmd_{name}",
                c.field
            ),
        }
    }
    // Rows combined from several counts, each in a known family with its value.
    for d in counters.derived_rows() {
        let label = sarcasmd::common::counts::FAMILIES
            .iter()
            .find(|f| f.name == d.family)
            .unwrap_or_else(|| panic!("derived row: family {} not in FAMILIES", d.family))
            .label;
        let s = format!(
            "sarcasmd_{}_total{{{label}=\"{}\"}}",
            d.family, d.value_label
        );
        assert_eq!(value_of(&s), [d.value as f64], "{s} in\n{metrics}");
    }
    // The run did count: samples arrived and the summary says so.
    assert!(stats.audio_s > 0.9, "{summary}");
}
