//! The `<prefix>/<device>/stats` topic: the run's counters as JSON, published every
//! `mqtt.stats_interval_s` by a thread of the MQTT output while a stream runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::MqttSink;
use crate::common::counters::Counters;
use crate::sinks::metrics::Reports;

/// Counters as JSON for the MQTT stats topic. `dropped` is every registered drop
/// ([`crate::common::drops::DropReason`]) by the name the run summary and `/metrics` use.
pub fn live_stats(c: &Counters, started: Instant) -> serde_json::Value {
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let audio_s = get(&c.samples_in) as f64 / crate::sources::audio::PIPELINE_RATE_HZ as f64;
    let cpu_s = crate::common::resources::cpu_seconds();
    serde_json::json!({
        "type": "stats",
        "uptime_s": started.elapsed().as_secs_f64(),
        "audio_s": audio_s,
        "cpu_s_per_audio_s": crate::common::resources::per_audio_second(cpu_s, audio_s),
        "utterances": get(&c.utterances),
        "events": get(&c.events),
        "dropped": c.drops.snapshot(),
        "peak_rss_mb": crate::common::resources::peak_rss_mb(),
    })
}

/// The thread that publishes the stats every `every` and shows the sink's delivery state
/// on `/metrics` every 100 ms, until it is stopped.
pub(super) struct Ticker {
    done: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    /// `None` when `every` is zero (stats only at the end) or the thread cannot start.
    pub(super) fn start(
        mqtt: Arc<MqttSink>,
        every: Duration,
        counters: Arc<Counters>,
        reports: Arc<Reports>,
    ) -> Option<Self> {
        if every.is_zero() {
            return None;
        }
        let done = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let stop = done.clone();
        let thread = std::thread::Builder::new()
            .name("stats".into())
            .spawn(move || {
                let mut next = started + every;
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    reports.set_mqtt(mqtt.stats());
                    if Instant::now() >= next {
                        next += every;
                        let s = live_stats(&counters, started);
                        mqtt.publish_stats(s.to_string().as_bytes());
                    }
                }
            })
            .ok()?;
        Some(Self {
            done,
            thread: Some(thread),
        })
    }
}

/// Stops the thread and waits for it (at most one 100 ms round).
impl Drop for Ticker {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
