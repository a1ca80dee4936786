//! Prometheus metrics, served at `/metrics` in the OpenMetrics text format (which
//! Prometheus scrapes natively) by the HTTP listener.
//!
//! Two kinds of figures: histograms and counters that the sink thread updates as events
//! pass (`observe_*`), and values read at scrape time from the pipeline's own atomic
//! counters, the SSE hub and the process (a collector), so a scrape always shows the
//! live drop counts and queue depths without the pipeline knowing about Prometheus.

use crate::common::lock::LockOrRecover;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::metrics::info::Info;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::common::counters::Counters;
use crate::common::counts::{InMetrics, FAMILIES};
use crate::common::drops::{DropCounts, DropReason, MetricFamily};
use crate::common::feedback::{Feedback, RoomStats};
use crate::sinks::event::UtteranceEvent;
use serde::Serialize;

/// What the HTTP listener reports to `/metrics` (its hub implements it), so that
/// `metrics` does not import the sink that serves it.
pub trait ListenerStats: Send + Sync + fmt::Debug {
    /// SSE clients connected now.
    fn clients(&self) -> u64;
    /// Connections open now, SSE clients included.
    fn connections(&self) -> u64;
    /// Connections closed because `http.max_connections` were open.
    fn refused_connection_limit(&self) -> u64;
    /// Requests refused for their `Host` header.
    fn refused_host(&self) -> u64;
    /// Idle connections closed to admit a new one at `http.max_connections`.
    fn idle_closed(&self) -> u64;
    /// SSE clients refused at `http.max_sse_clients` (503).
    fn refused_sse_limit(&self) -> u64;
    /// Caption downloads refused at their own cap (503).
    fn refused_download_limit(&self) -> u64;
    /// Requests without exactly one `Host` header (400).
    fn refused_bad_request(&self) -> u64;
}

/// The MQTT sink's state (`sinks::mqtt` fills it; `/metrics` and the stats topic show it).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MqttStats {
    pub connected: bool,
    /// Successful connects (ConnAcks), the first one included.
    pub connects: u64,
    /// Connect attempts after a failure (a lost connection or a failed connect),
    /// successful or not.
    pub reconnect_attempts: u64,
    /// Event publishes written to the broker connection; a resend after a reconnect
    /// counts again. Written is not delivered: see `published` and `failed`.
    pub sent: u64,
    /// Events the broker acknowledged (PubAck). Only these count as published.
    pub published: u64,
    /// Event publishes written but not acknowledged when the connection closed, e.g. a
    /// broker that closes the connection on a publish it refuses. Each is re-sent after
    /// reconnecting, so one event can count here more than once and then in `published`.
    pub failed: u64,
    /// Events dropped, by reason (only the sink's own are counted here):
    /// `mqtt_offline_queue_full`, `offline_queue` events were already held;
    /// `mqtt_too_large`, payloads over `MAX_PAYLOAD_BYTES`, dropped without being
    /// queued; `mqtt_refused`, dropped after the broker closed the connection
    /// `MAX_CLOSES_UNACKED` times in a row while each was the oldest unacknowledged one
    /// (a payload over the broker's own `max_packet_size`, say): re-sending it for ever
    /// would block every event queued behind it.
    pub drops: DropCounts,
    /// Events held now: waiting for a connection or for their PubAck.
    pub queued: u64,
    pub last_error: Option<String>,
}

/// `Content-Type` of [`Metrics::encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

type Labels = Vec<(&'static str, String)>;
type HistogramFamily = Family<Labels, Histogram, fn() -> Histogram>;

fn latency_histogram() -> Histogram {
    // 1 ms .. ~16 s in powers of two: VAD chunks at the bottom, Whisper on 15 s at the top.
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

pub struct Metrics {
    registry: Registry,
    stage_latency: HistogramFamily,
    events: Family<Labels, Counter>,
    flags: Counter,
    live: Arc<LiveCollector>,
}

/// What the outputs and the daemon report for `/metrics` besides the pipeline's
/// counters, kept for each stream whether or not `/metrics` is served: MQTT's delivery
/// state (the MQTT output sets it), the model load time (the daemon), and each output's
/// failed writes (the set that holds the outputs counts them). [`Metrics`] reads it.
#[derive(Debug)]
pub struct Reports {
    mqtt: Mutex<Option<MqttStats>>,
    model_load_s: Mutex<Option<f64>>,
    sink_errors: Family<Labels, Counter>,
}

impl Default for Reports {
    fn default() -> Self {
        Self {
            mqtt: Mutex::new(None),
            model_load_s: Mutex::new(None),
            sink_errors: Family::default(),
        }
    }
}

impl Reports {
    pub fn set_mqtt(&self, stats: MqttStats) {
        *self.mqtt.lock_or_recover() = Some(stats);
    }

    pub fn set_model_load_seconds(&self, s: f64) {
        *self.model_load_s.lock_or_recover() = Some(s);
    }

    /// A write `sink` could not complete (`sarcasmd_sink_errors_total{sink}`).
    pub fn sink_error(&self, sink: &'static str) {
        self.sink_errors
            .get_or_create(&vec![("sink", sink.to_string())])
            .inc();
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Metrics")
    }
}

/// Read at scrape time.
#[derive(Debug)]
struct LiveCollector {
    counters: Arc<Counters>,
    hub: OnceLock<Arc<dyn ListenerStats>>,
    reports: Arc<Reports>,
    room: OnceLock<Arc<dyn Feedback>>,
    started: std::time::Instant,
}

impl Metrics {
    /// `build` labels go into `sarcasmd_build_info` (version, models, profile).
    pub fn new(counters: Arc<Counters>, build: &[(&'static str, String)]) -> Self {
        Self::reading(counters, build, Arc::new(Reports::default()))
    }

    /// [`Metrics::new`] showing what the outputs and the daemon put in `reports`.
    pub fn reading(
        counters: Arc<Counters>,
        build: &[(&'static str, String)],
        reports: Arc<Reports>,
    ) -> Self {
        let mut registry = Registry::with_prefix("sarcasmd");
        let stage_latency: HistogramFamily = Family::new_with_constructor(latency_histogram);
        registry.register(
            "stage_latency_seconds",
            "Per-utterance wall time of each pipeline stage; stage=total is end of speech to event",
            stage_latency.clone(),
        );
        let events = Family::<Labels, Counter>::default();
        registry.register(
            "events",
            "Events delivered to the sinks, by type (utterance, partial)",
            events.clone(),
        );
        let flags = Counter::default();
        registry.register(
            "sarcasm_flags",
            "Utterances flagged sarcastic (p_sarcastic >= threshold)",
            flags.clone(),
        );
        registry.register(
            "sink_errors",
            "Writes a secondary sink (captions, MQTT) could not complete; the daemon keeps running",
            reports.sink_errors.clone(),
        );
        let mut info: Labels = vec![("version", env!("CARGO_PKG_VERSION").to_string())];
        info.extend(build.iter().cloned());
        registry.register("build", "Build and model information", Info::new(info));
        let live = Arc::new(LiveCollector {
            counters,
            hub: OnceLock::new(),
            reports,
            room: OnceLock::new(),
            started: std::time::Instant::now(),
        });
        registry.register_collector(Box::new(live.clone()));
        Self {
            registry,
            stage_latency,
            events,
            flags,
            live,
        }
    }

    pub fn attach_hub(&self, hub: Arc<dyn ListenerStats>) {
        let _ = self.live.hub.set(hub);
    }

    /// The room head's corrections and refits (`[room]` enabled).
    pub fn attach_room(&self, room: Arc<dyn Feedback>) {
        let _ = self.live.room.set(room);
    }

    pub fn set_mqtt(&self, stats: MqttStats) {
        self.live.reports.set_mqtt(stats);
    }

    pub fn observe_utterance(&self, ev: &UtteranceEvent) {
        for (stage, ms) in ev.latency_ms.stages() {
            self.stage_latency
                .get_or_create(&vec![("stage", stage.to_string())])
                .observe(ms / 1000.0);
        }
        self.events
            .get_or_create(&vec![("type", "utterance".to_string())])
            .inc();
        if ev.sarcastic {
            self.flags.inc();
        }
    }

    pub fn observe_partial(&self) {
        self.events
            .get_or_create(&vec![("type", "partial".to_string())])
            .inc();
    }

    /// The whole exposition, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::with_capacity(8192);
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }
}

/// Reloads over the life of the process (each reload starts a new stream with new
/// [`Counters`], so these live outside them).
#[derive(Debug)]
pub struct ReloadCounters {
    /// A reloaded config that started.
    pub applied: AtomicU64,
    /// Refused before the stream was touched (invalid, or failed preflight).
    pub rejected: AtomicU64,
    /// Passed the checks but did not start; the previous config runs again.
    pub failed: AtomicU64,
}

pub static RELOADS: ReloadCounters = ReloadCounters {
    applied: AtomicU64::new(0),
    rejected: AtomicU64::new(0),
    failed: AtomicU64::new(0),
};

fn counter<N: prometheus_client::encoding::EncodeCounterValue>(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    v: N,
) -> fmt::Result {
    let c = ConstCounter::new(v);
    c.encode(enc.encode_descriptor(name, help, None, c.metric_type())?)
}

fn gauge(enc: &mut DescriptorEncoder, name: &str, help: &str, v: f64) -> fmt::Result {
    let g = ConstGauge::new(v);
    g.encode(enc.encode_descriptor(name, help, None, g.metric_type())?)
}

fn family(
    enc: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    label: &'static str,
    items: &[(&str, f64)],
) -> fmt::Result {
    let mut me = enc.encode_descriptor(name, help, None, kind)?;
    for &(value, v) in items {
        let labels = [(label, value)];
        let fe = me.encode_family(&labels)?;
        match kind {
            MetricType::Counter => ConstCounter::new(v).encode(fe)?,
            _ => ConstGauge::new(v).encode(fe)?,
        }
    }
    Ok(())
}

/// Every registered drop ([`crate::common::drops::DropReason`]) in the family its reason
/// names, so `/metrics` cannot list a drop the run summary and MQTT stats do not.
pub(crate) fn encode_drops(enc: &mut DescriptorEncoder, counts: &DropCounts) -> fmt::Result {
    for r in DropReason::ALL
        .iter()
        .filter(|r| r.family() == MetricFamily::Own)
    {
        counter(enc, r.name(), r.help(), counts.get(*r))?;
    }
    for fam in [MetricFamily::DroppedEvents, MetricFamily::DeviceDropped] {
        let (Some(name), Some(label)) = (fam.metric(), fam.label()) else {
            continue;
        };
        let items: Vec<(&str, f64)> = counts
            .iter()
            .filter(|(r, _)| r.family() == fam)
            .map(|(r, n)| (r.name(), n as f64))
            .collect();
        family(enc, name, fam.help(), MetricType::Counter, label, &items)?;
    }
    Ok(())
}

/// The room head: corrections held, taken by label, refused by reason, refits, events
/// it muted, and what its store dropped or skipped.
fn encode_room(enc: &mut DescriptorEncoder, r: &RoomStats) -> fmt::Result {
    gauge(
        enc,
        "room_corrections_held",
        "Corrections the room head holds (room.store)",
        r.corrections_held as f64,
    )?;
    family(
        enc,
        "room_corrections",
        "Corrections recorded since start, by label",
        MetricType::Counter,
        "label",
        &[
            ("sarcastic", r.sarcastic as f64),
            ("not_sarcastic", r.not_sarcastic as f64),
        ],
    )?;
    let refused: Vec<(&str, f64)> = r.refused.iter().map(|(k, v)| (*k, *v as f64)).collect();
    family(
        enc,
        "room_corrections_refused",
        "Corrections refused, by reason (unknown_event: no longer held; revised; already_corrected; no_text_view; bad_label, bad_body, bad_id; no_token; disabled; store: the file could not be written)",
        MetricType::Counter,
        "reason",
        &refused,
    )?;
    counter(
        enc,
        "room_refits",
        "Room heads rebuilt and swapped in after a correction",
        r.refits,
    )?;
    counter(
        enc,
        "room_muted_events",
        "Events scored just below the threshold because the room marked a near-duplicate not sarcastic",
        r.muted,
    )?;
    counter(
        enc,
        "room_corrections_dropped",
        "Oldest corrections dropped from the store at room.max_corrections",
        r.dropped,
    )?;
    counter(
        enc,
        "room_store_lines_skipped",
        "Lines of the corrections file skipped when read (torn by a power cut, unreadable, or from a newer version)",
        r.lines_skipped,
    )
}

/// Resident set size now, from `/proc/self/statm` (pages).
fn rss_bytes() -> Option<f64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * page.max(4096) as f64)
}

/// The live families, each read at scrape time, in the order a scrape lists them.
impl LiveCollector {
    /// Audio received, CPU time and their ratio.
    fn encode_process(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let audio_s = get(&c.samples_in) as f64 / crate::sources::audio::PIPELINE_RATE_HZ as f64;
        let cpu_s = crate::common::resources::cpu_seconds();
        counter(
            enc,
            "audio_seconds",
            "Audio received from the source",
            audio_s,
        )?;
        counter(
            enc,
            "cpu_seconds",
            "CPU time (user + system) of the whole process",
            cpu_s,
        )?;
        gauge(
            enc,
            "realtime_factor",
            "CPU seconds per audio second since start (below 1 keeps up on one core; 0 before a second of audio)",
            crate::common::resources::per_audio_second(cpu_s, audio_s).unwrap_or(0.0),
        )
    }

    /// Every count of the registry: its own counter, or its row of a family.
    fn encode_counts(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let counts = c.counts();
        let derived = c.derived_rows();
        for count in &counts {
            if let InMetrics::Own(name, help) = count.metrics {
                counter(enc, name, help, count.value)?;
            }
        }
        counter(
            enc,
            "source_gap_seconds",
            "Total length of the lost intervals, in seconds (whole milliseconds)",
            get(&c.source_gap_ms) as f64 / 1e3,
        )?;
        for fam in FAMILIES {
            let mut rows: Vec<(&str, f64)> = counts
                .iter()
                .filter_map(|k| match k.metrics {
                    InMetrics::Row(f, value) if f == fam.name => Some((value, k.value as f64)),
                    _ => None,
                })
                .collect();
            rows.extend(
                derived
                    .iter()
                    .filter(|d| d.family == fam.name)
                    .map(|d| (d.value_label, d.value as f64)),
            );
            family(
                enc,
                fam.name,
                fam.help,
                MetricType::Counter,
                fam.label,
                &rows,
            )?;
        }
        Ok(())
    }

    /// Drops, devices, queues, the events file, SSE clients and reloads.
    fn encode_state(&self, enc: &mut DescriptorEncoder, mqtt: Option<&MqttStats>) -> fmt::Result {
        let c = &self.counters;
        let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        let clients = self.hub.get().map_or(0, |h| h.clients());
        encode_drops(enc, &c.drops.snapshot())?;
        let v = &c.vision;
        family(
            enc,
            "vision_source",
            "Frame source state: running, or failed (the stream then runs audio-only)",
            MetricType::Gauge,
            "state",
            &[
                (
                    "running",
                    v.source_running.load(Ordering::Relaxed) as u8 as f64,
                ),
                (
                    "failed",
                    v.source_failed.load(Ordering::Relaxed) as u8 as f64,
                ),
            ],
        )?;
        gauge(
            enc,
            "shed_level",
            "Load shedding steps in force now (0 = nothing shed)",
            c.shed.level() as f64,
        )?;
        family(
            enc,
            "queue_depth",
            "Items waiting in each bounded queue now (audio ring in samples)",
            MetricType::Gauge,
            "queue",
            &[
                ("audio_ring_samples", get(&c.ring_fill_samples) as f64),
                ("utterances", get(&c.utterance_queue_depth) as f64),
                ("events", get(&c.event_queue_depth) as f64),
                ("mqtt_offline", mqtt.map_or(0.0, |m| m.queued as f64)),
            ],
        )?;
        family(
            enc,
            "device_up",
            "1 while the device delivers data, 0 when it is absent, stopped or failed",
            MetricType::Gauge,
            "device",
            &[(
                "audio",
                if c.source_running.load(Ordering::Relaxed) {
                    1.0
                } else {
                    0.0
                },
            )],
        )?;
        gauge(
            enc,
            "events_file_up",
            "1 while the events file is written, 0 while it cannot be (lines wait in a backlog)",
            if c.events_file_failing.load(Ordering::Relaxed) {
                0.0
            } else {
                1.0
            },
        )?;
        gauge(
            enc,
            "sse_clients",
            "Browser overlays and other SSE clients connected now",
            clients as f64,
        )?;
        family(
            enc,
            "reloads",
            "Configuration reloads (SIGHUP) by result: applied, rejected (invalid or failed preflight; old config kept), failed (did not start; old config restarted)",
            MetricType::Counter,
            "result",
            &[
                ("applied", RELOADS.applied.load(Ordering::Relaxed) as f64),
                ("rejected", RELOADS.rejected.load(Ordering::Relaxed) as f64),
                ("failed", RELOADS.failed.load(Ordering::Relaxed) as f64),
            ],
        )
    }

    /// The HTTP listener's connections and refusals.
    fn encode_listener(enc: &mut DescriptorEncoder, h: &dyn ListenerStats) -> fmt::Result {
        gauge(
            enc,
            "http_connections",
            "HTTP connections open now (SSE clients included; at most http.max_connections)",
            h.connections() as f64,
        )?;
        family(
            enc,
            "http_refused",
            "HTTP connections or requests refused, by reason (connection_limit: http.max_connections open, all serving; idle_closed: an idle connection closed to admit a new one; host: Host header not allowed; sse_limit: http.max_sse_clients SSE clients connected; download_limit: as many caption downloads as allowed under way; bad_request: no Host header or several)",
            MetricType::Counter,
            "reason",
            &[
                ("connection_limit", h.refused_connection_limit() as f64),
                ("idle_closed", h.idle_closed() as f64),
                ("host", h.refused_host() as f64),
                ("sse_limit", h.refused_sse_limit() as f64),
                ("download_limit", h.refused_download_limit() as f64),
                ("bad_request", h.refused_bad_request() as f64),
            ],
        )
    }

    /// The MQTT sink's connection and deliveries.
    fn encode_mqtt(enc: &mut DescriptorEncoder, m: &MqttStats) -> fmt::Result {
        gauge(
            enc,
            "mqtt_connected",
            "1 while connected to the MQTT broker",
            if m.connected { 1.0 } else { 0.0 },
        )?;
        family(
            enc,
            "mqtt_messages",
            "MQTT event messages (QoS 1): sent = written to the connection, published = \
             acknowledged by the broker, failed = connection closed before the acknowledgement",
            MetricType::Counter,
            "state",
            &[
                ("sent", m.sent as f64),
                ("published", m.published as f64),
                ("failed", m.failed as f64),
            ],
        )?;
        counter(
            enc,
            "mqtt_reconnect_attempts",
            "MQTT connect attempts after a lost connection or a failed connect",
            m.reconnect_attempts,
        )
    }

    /// Model load time, memory and uptime.
    fn encode_resources(&self, enc: &mut DescriptorEncoder) -> fmt::Result {
        if let Some(s) = *self.reports.model_load_s.lock_or_recover() {
            gauge(
                enc,
                "model_load_seconds",
                "Wall time to load and check every model at start",
                s,
            )?;
        }
        if let Some(b) = rss_bytes() {
            gauge(enc, "resident_memory_bytes", "Resident set size now", b)?;
        }
        gauge(
            enc,
            "peak_resident_memory_bytes",
            "Peak resident set size since start",
            crate::common::resources::peak_rss_mb() * 1024.0 * 1024.0,
        )?;
        gauge(
            enc,
            "uptime_seconds",
            "Seconds since the daemon started",
            self.started.elapsed().as_secs_f64(),
        )
    }
}

impl Collector for LiveCollector {
    fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
        self.encode_process(&mut enc)?;
        self.encode_counts(&mut enc)?;
        let mqtt = self.reports.mqtt.lock_or_recover().clone();
        self.encode_state(&mut enc, mqtt.as_ref())?;
        if let Some(h) = self.hub.get() {
            Self::encode_listener(&mut enc, h.as_ref())?;
        }
        if let Some(m) = &mqtt {
            Self::encode_mqtt(&mut enc, m)?;
        }
        if let Some(r) = self.room.get() {
            encode_room(&mut enc, &r.stats())?;
        }
        self.encode_resources(&mut enc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mqtt_delivery_counters_are_exported() {
        let m = Metrics::new(Arc::new(Counters::default()), &[]);
        m.set_mqtt(MqttStats {
            connected: true,
            reconnect_attempts: 4,
            sent: 5,
            published: 2,
            failed: 3,
            ..MqttStats::default()
        });
        let text = m.encode();
        for want in [
            "sarcasmd_mqtt_messages_total{state=\"sent\"} 5",
            "sarcasmd_mqtt_messages_total{state=\"published\"} 2",
            "sarcasmd_mqtt_messages_total{state=\"failed\"} 3",
            "sarcasmd_mqtt_reconnect_attempts_total 4",
            "sarcasmd_mqtt_connected 1",
        ] {
            assert!(text.contains(want), "{want} missing from:\n{text}");
        }
    }
}
