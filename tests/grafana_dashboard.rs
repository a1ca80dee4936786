//! The Grafana dashboard in `docs/grafana/sarcasmd.json` queries only metrics the daemon
//! exports: every `sarcasmd_*` series in its panels' expressions is looked up in a real
//! scrape of `/metrics` from `sarcasmd run` after it has scored the bundled sample, and
//! every label it groups by exists on that metric.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{bin, read_wav_16k, to_s16le, wait_exit};

const DASHBOARD: &str = include_str!("../docs/grafana/sarcasmd.json");

/// Metric names (series names, as in the exposition) and their label names.
fn scrape() -> BTreeMap<String, BTreeSet<String>> {
    let d = tempfile::tempdir().unwrap();
    let events = d.path().join("events.jsonl");
    let cfg = d.path().join("room.toml");
    std::fs::write(
        &cfg,
        format!(
            "[source]\nkind = \"stdin\"\nlive = true\n\n[output]\nevents = \"{}\"\n\n[http]\nenabled = true\nbind = \"127.0.0.1:0\"\n",
            events.display()
        ),
    )
    .unwrap();
    let mut child = Command::new(bin())
        .args(["run", "--config"])
        .arg(&cfg)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The listener's real port, from the log line that announces it.
    let mut log = BufReader::new(child.stderr.take().unwrap());
    let port = loop {
        let mut line = String::new();
        assert!(
            log.read_line(&mut line).unwrap() > 0,
            "daemon exited before listening"
        );
        if let Some(rest) = line.split("http://127.0.0.1:").nth(1) {
            break rest.split('/').next().unwrap().parse::<u16>().unwrap();
        }
    };
    std::thread::spawn(move || std::io::copy(&mut log, &mut std::io::sink()));
    // One spoken line of the sample, then silence with stdin held open (a quiet room).
    let wav = concat!(env!("CARGO_MANIFEST_DIR"), "/samples/meeting.wav");
    let mut first_line = read_wav_16k(std::path::Path::new(wav));
    // The first line ("Good morning everyone...") ends by 5.5 s; 2 s of silence end it.
    first_line.truncate(16_000 * 11 / 2);
    first_line.extend(std::iter::repeat_n(0.0, 16_000 * 2));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&to_s16le(&first_line)).unwrap();
    let t0 = Instant::now();
    while std::fs::read_to_string(&events)
        .unwrap_or_default()
        .is_empty()
    {
        assert!(t0.elapsed() < Duration::from_secs(120), "no events");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    s.read_to_string(&mut raw).unwrap();
    // SAFETY: plain kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    drop(stdin);
    if wait_exit(&mut child, Duration::from_secs(30)).is_none() {
        let _ = child.kill();
    }
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
