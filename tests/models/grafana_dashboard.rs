//! The Grafana dashboard in `docs/grafana/sarcasmd.json` queries only metrics the daemon
//! exports: every `sarcasmd_*` series in its panels' expressions is looked up in a real
//! scrape of `/metrics` from a running daemon (held in-process, as `sarcasmd run` builds
//! it) after it has scored the bundled sample, and every label it groups by exists on
//! that metric.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Duration;

use crate::common::daemon::http_port;
use crate::common::{hold, parse_config, pipe, read_wav_16k, to_s16le, wait_until};
use sarcasmd::config::SourceConfig;
use sarcasmd::daemon::builder::Daemon;
use sarcasmd::sources::audio::PcmReaderSource;

const DASHBOARD: &str = include_str!("../../docs/grafana/sarcasmd.json");

/// Metric names (series names, as in the exposition) and their label names, from a
/// daemon held in-process: its listener on port 0 (the bound port comes with its
/// readiness), a live PCM pipe as its source, held open after one spoken line (a quiet
/// room) so the scrape sees a running stream.
fn scrape() -> BTreeMap<String, BTreeSet<String>> {
    let d = tempfile::tempdir().unwrap();
    let events = d.path().join("events.jsonl");
    let mut cfg = parse_config("[http]\nenabled = true\nbind = \"127.0.0.1:0\"\n");
    cfg.source = SourceConfig::Stdin {
        sample_rate_hz: 16_000,
        live: true,
    };
    cfg.output.events = events.display().to_string();
    let (reader, mut writer) = pipe();
    let fd = reader.as_raw_fd();
    let source = PcmReaderSource::new("pipe", reader, 16_000)
        .unwrap()
        .live(true)
        .poll_fd(fd);
    let (daemon, ready) = hold(Daemon::builder(cfg).source(Box::new(source)));
    let port = http_port(&ready);
    // One spoken line of the sample, then silence with the pipe held open.
    let wav = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/meeting.wav");
    let mut first_line = read_wav_16k(std::path::Path::new(wav));
    // The first line ("Good morning everyone...") ends by 5.5 s; 2 s of silence end it.
    first_line.truncate(16_000 * 11 / 2);
    first_line.extend(std::iter::repeat_n(0.0, 16_000 * 2));
    let pcm = to_s16le(&first_line);
    // The pipe holds less than the audio: write from a thread, keep the writer open.
    let feeder = std::thread::spawn(move || {
        writer.write_all(&pcm).unwrap();
        writer
    });
    wait_until("a first event", Duration::from_secs(120), || {
        !std::fs::read_to_string(&events)
            .unwrap_or_default()
            .is_empty()
    });
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    daemon
        .stop(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    drop(feeder.join().unwrap());
    let (_, body) = raw.split_once("\r\n\r\n").expect("a response");
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in body
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let series = line.split(' ').next().unwrap();
        let (name, labels) = match series.split_once('{') {
            Some((n, rest)) => (n, rest.trim_end_matches('}')),
            None => (series, ""),
        };
        let e = out.entry(name.to_string()).or_default();
        for kv in labels.split(',').filter(|kv| !kv.is_empty()) {
            e.insert(kv.split('=').next().unwrap().to_string());
        }
    }
    out
}

fn exprs() -> Vec<String> {
    let d: serde_json::Value = serde_json::from_str(DASHBOARD).expect("valid JSON");
    let mut v = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().expect("targets") {
            v.push(t["expr"].as_str().expect("expr").to_string());
        }
    }
    let vars = d["templating"]["list"].as_array().unwrap();
    v.extend(vars.iter().filter_map(|x| {
        x["query"]
            .as_str()
            .filter(|q| q.contains("sarcasmd_"))
            .map(String::from)
    }));
    v
}

/// `sarcasmd_*` names in a PromQL expression, each with the labels it is grouped by
/// (`by (a, b)` right before the aggregated expression; attributed to every name in it).
fn queried(expr: &str) -> Vec<(String, Vec<String>)> {
    let names: Vec<String> = expr
        .match_indices("sarcasmd_")
        .map(|(i, _)| {
            expr[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    let mut by = Vec::new();
    for (i, _) in expr.match_indices("by (") {
        let inner = &expr[i + 4..];
        let inner = &inner[..inner.find(')').unwrap()];
        by.extend(
            inner
                .split(',')
                .map(|s| s.trim().to_string())
                // Prometheus's own target labels and the histogram bucket label.
                .filter(|s| !["instance", "job", "le"].contains(&s.as_str())),
        );
    }
    names.into_iter().map(|n| (n, by.clone())).collect()
}

#[test]
fn every_metric_the_dashboard_queries_exists_in_a_real_scrape() {
    let scraped = scrape();
    assert!(
        scraped.contains_key("sarcasmd_stage_latency_seconds_bucket"),
        "{scraped:?}"
    );
    let mut checked = 0;
    for expr in exprs() {
        for (name, by) in queried(&expr) {
            let labels = scraped
                .get(&name)
                .unwrap_or_else(|| panic!("{name} (in `{expr}`) is not exported"));
            for l in by {
                // A label the whole family has is enough; histogram buckets carry it too.
                assert!(
                    labels.contains(&l)
                        || scraped
                            .get(&format!("{name}_bucket"))
                            .is_some_and(|b| b.contains(&l)),
                    "{name} has no label `{l}` (in `{expr}`): {labels:?}"
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 20, "{checked}");
}
