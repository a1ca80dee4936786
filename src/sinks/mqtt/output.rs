//! MQTT as one of the daemon's outputs: `[mqtt]` for the preflight, the output of a
//! stream (events, the stats ticker, the final stats), and the connection kept across a
//! reload while `[mqtt]` and the room stay the same, so that events it holds for a broker
//! that is down are not dropped.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use super::config::{read_password_file, MqttConfig};
use super::stats::Ticker;
use super::tls::rustls_config;
use super::MqttSink;
use crate::common::counters::Counters;
use crate::common::drops::{DropDelta, DropReason};
use crate::common::validate::{FieldError, Problems, Validate};
use crate::sinks::event::{OutputConfig, UtteranceEvent};
use crate::sinks::metrics::Reports;
use crate::sinks::output::{
    section, End, Files, Lasting, Outgoing, Output, OutputError, OutputKind, Sections, Start,
    StartError, State,
};

impl OutputKind for MqttConfig {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check_section(&self, _output: &OutputConfig, problems: &mut Problems) {
        Validate::check(self, problems);
    }

    fn files(&self) -> Files<'_> {
        let mut reads = Vec::new();
        if let Some(p) = &self.password_file {
            reads.push(("mqtt.password_file", p.as_path()));
        }
        if let Some(tls) = &self.tls {
            reads.push(("mqtt.tls.ca_file", tls.ca_file.as_path()));
            for (what, p) in [
                ("mqtt.tls.client_cert", &tls.client_cert),
                ("mqtt.tls.client_key", &tls.client_key),
            ] {
                if let Some(p) = p {
                    reads.push((what, p.as_path()));
                }
            }
        }
        Files {
            writes: Vec::new(),
            reads,
        }
    }

    fn preflight(&self, problems: &mut Problems) {
        if !self.enabled {
            return;
        }
        if let (Some(_), Some(p)) = (&self.username, &self.password_file) {
            if let Err(e) = read_password_file(p) {
                problems.add(Err(FieldError::under("mqtt.password_file", e)));
            }
        }
        if let Some(tls) = &self.tls {
            if let Err(e) = rustls_config(tls) {
                problems.add(Err(FieldError::under("mqtt.tls", e)));
            }
        }
    }

    /// The connection the previous stream kept, or a new one (every failure to start is
    /// bad local input: a broker that is down is not an error).
    fn start(&self, s: Start<'_>) -> Result<Box<dyn Output>, StartError> {
        let kept = s.kept.and_then(|k| k.downcast::<Arc<MqttSink>>().ok());
        let sink = match kept {
            Some(m) => {
                // Its counts so far belong to earlier streams.
                s.counters
                    .drops
                    .attach(Arc::new(DropDelta::new(m.drop_source())));
                *m
            }
            None => {
                let m = MqttSink::start_with(self, s.feedback.cloned())
                    .map_err(|e| StartError::BadInput(e.into()))?;
                s.counters.drops.attach(m.drop_source());
                Arc::new(m)
            }
        };
        Ok(Box::new(MqttOutput {
            cfg: self.clone(),
            sink,
            counters: s.counters.clone(),
            reports: s.reports.clone(),
            ticker: None,
        }))
    }
}

/// MQTT for one stream: each event on the event topic, the stats on their topic while
/// the stream runs, the final stats at its end.
pub struct MqttOutput {
    cfg: MqttConfig,
    sink: Arc<MqttSink>,
    counters: Arc<Counters>,
    reports: Arc<Reports>,
    ticker: Option<Ticker>,
}

impl Output for MqttOutput {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    fn state(&mut self, state: State) {
        if state == State::Running && self.ticker.is_none() {
            self.ticker = Ticker::start(
                self.sink.clone(),
                Duration::from_secs(self.cfg.stats_interval_s as u64),
                self.counters.clone(),
                self.reports.clone(),
            );
        }
    }

    fn utterance(&mut self, ev: &Outgoing<'_, UtteranceEvent>) -> Result<(), OutputError> {
        self.sink.publish_event(ev.json()?.as_bytes());
        self.reports.set_mqtt(self.sink.stats());
        Ok(())
    }

    /// Stops the ticker, publishes the run summary as `final_stats`, and keeps the
    /// connection for the next stream.
    fn finish(mut self: Box<Self>, end: &End<'_>) -> Option<Box<dyn Lasting>> {
        drop(self.ticker.take());
        if let Some(st) = end.stats {
            let mut v = st.clone();
            v["type"] = "final_stats".into();
            self.sink.publish_stats(v.to_string().as_bytes());
        }
        Some(Box::new(KeptMqtt {
            cfg: self.cfg,
            sink: self.sink,
        }))
    }
}

/// The connection between two streams.
struct KeptMqtt {
    cfg: MqttConfig,
    sink: Arc<MqttSink>,
}

impl Lasting for KeptMqtt {
    fn name(&self) -> &'static str {
        "mqtt"
    }

    /// The sink holds the room it hands corrections to: a new room, a new sink.
    fn serves(&self, next: &Sections<'_>, same_feedback: bool) -> bool {
        same_feedback && section::<MqttConfig>(next).is_some_and(|c| c.enabled && *c == self.cfg)
    }

    fn into_any(self: Box<Self>) -> Box<dyn Any + Send> {
        Box::new(self.sink)
    }

    fn stop(self: Box<Self>, grace: Duration) {
        stop(self.sink, grace);
    }
}

/// The end of an MQTT sink: deliver what is queued within `grace` (short when a signal
/// asked us to stop: systemd expects the process gone within 2 s of SIGTERM), then say
/// what it did; events still unacknowledged are counted as `mqtt_unsent_at_stop`.
fn stop(mqtt: Arc<MqttSink>, grace: Duration) {
    match Arc::try_unwrap(mqtt) {
        Ok(m) => {
            let s = m.shutdown(grace);
            log::info!(
                "mqtt: {} events published (acknowledged), {} failed (connection closed \
                 before the acknowledgement; re-sent), {} reconnect attempts, {} dropped \
                 (offline queue full), {} unsent at stop",
                s.published,
                s.failed,
                s.reconnect_attempts,
                s.drops.get(DropReason::MqttOfflineQueueFull),
                s.drops.get(DropReason::MqttUnsentAtStop)
            );
        }
        Err(_) => {
            log::warn!("mqtt: still shared at shutdown; not waiting for acknowledgements")
        }
    }
}
