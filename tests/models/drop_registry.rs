//! The drop registry's promise (issue 27, item 3): every registered drop reason appears
//! in the run summary, `/metrics` and the MQTT stats payload under the same name with the
//! same count, none of them lists a drop the registry does not know, and the queue docs
//! name every reason. Each output is built by the code the daemon uses: a real
//! `run_stream` for the summary, `Metrics::encode` (the body `/metrics` serves) and
//! `sinks::mqtt::stats::live_stats` (the payload of `<prefix>/<device>/stats`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Instant;

use crate::common::*;
use sarcasmd::common::drops::{DropCounters, DropReason};
use sarcasmd::pipeline::Counters;
use sarcasmd::sinks::metrics::Metrics;
use sarcasmd::sinks::mqtt::stats::live_stats;

/// A distinct count per reason, so a value read under the wrong name is caught too.
fn count_of(i: usize) -> u64 {
    1000 + i as u64
}

/// `sarcasmd_<family>_total{<label>="<name>"}` or `sarcasmd_<name>_total`.
fn series(r: DropReason) -> String {
    let f = r.family();
    match (f.metric(), f.label()) {
        (Some(m), Some(l)) => format!("sarcasmd_{m}_total{{{l}=\"{}\"}}", r.name()),
        _ => format!("sarcasmd_{}_total", r.name()),
    }
}

#[test]
fn every_drop_reason_reaches_the_run_summary_metrics_and_mqtt_stats_under_one_name() {
    let counters = Arc::new(Counters::default());
    // Counted by an attached source, as a microphone, camera or sink counts its own.
    let source = Arc::new(DropCounters::default());
    for (i, &r) in DropReason::ALL.iter().enumerate() {
        source.add(r, count_of(i));
    }
    counters.drops.attach(source);
    let stats = run_silence_counted(&counters, 1.0);
    let summary = serde_json::to_value(&stats).unwrap();
    let metrics = Metrics::new(counters.clone(), &[]).encode();
    let mqtt = live_stats(&counters, Instant::now());

    for (i, &r) in DropReason::ALL.iter().enumerate() {
        let (name, want) = (r.name(), count_of(i));
        assert_eq!(stats.dropped.get(name), Some(&want), "run summary: {name}");
        assert_eq!(summary["dropped"][name], want, "summary JSON: {name}");
        assert_eq!(mqtt["dropped"][name], want, "MQTT stats: {name}");
        let s = series(r);
        let got: Vec<f64> = metrics
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{s} ")))
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(got, [want as f64], "/metrics: {s} in\n{metrics}");
    }

    // And nothing else: a drop listed by hand in one output would show up here.
    let names: BTreeSet<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
    let keys = |v: &serde_json::Value| -> BTreeSet<String> {
        v.as_object().unwrap().keys().cloned().collect()
    };
    let names_owned: BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    assert_eq!(keys(&summary["dropped"]), names_owned, "summary JSON");
    assert_eq!(keys(&mqtt["dropped"]), names_owned, "MQTT stats");
    let registered: BTreeSet<String> = DropReason::ALL.iter().map(|&r| series(r)).collect();
    for l in metrics.lines() {
        let Some(s) = l.split_whitespace().next() else {
            continue;
        };
        if s.starts_with("sarcasmd_dropped_") || s.starts_with("sarcasmd_device_dropped_") {
            assert!(
                registered.contains(s),
                "{s} is in /metrics but not registered"
            );
        }
    }
}

#[test]
fn the_queue_docs_name_every_drop_reason() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/queues.md")).unwrap();
    for &r in DropReason::ALL {
        assert!(
            doc.contains(&format!("`{}`", r.name())),
            "docs/queues.md does not name the drop `{}` ({})",
            r.name(),
            r.help()
        );
    }
}
