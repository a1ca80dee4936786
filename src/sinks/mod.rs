//! Where results go besides the JSON-lines stream: caption files ([`captions`]), the
//! browser overlay, SSE and `/metrics` ([`http`]), and MQTT for fleets ([`mqtt`]).
//!
//! Scores are final before an event gets here: the room head runs as a pipeline step
//! before the sinks (`crate::pipeline`), and the feedback routes reach the room through
//! [`crate::common::feedback::Feedback`], so this folder does not import the views.
//!
//! [`SinkSet`] puts them behind one [`EventSink`]. The JSON-lines stream is primary: if
//! it cannot be written the run stops (that is the daemon's contract with whoever reads
//! it). Every other sink is secondary: a failure is logged once when it starts and once
//! when it recovers, counted in `sarcasmd_sink_errors_total{sink}`, and retried with the
//! next event, so a full disk or a dead broker never stops captioning or the overlay.
//! A bug that panics inside the caption writer turns captions off for the rest of the
//! run (logged, counted) instead of ending the daemon.

pub mod captions;
pub mod event;
pub mod file;
pub mod http;
pub mod metrics;
pub mod mqtt;

use std::sync::Arc;

use crate::sinks::event::{EventSink, PartialEvent, UtteranceEvent};
use crate::sinks::metrics::Metrics;
use captions::CaptionWriter;
use http::Hub;
use mqtt::MqttSink;

pub struct SinkSet {
    primary: Box<dyn EventSink>,
    captions: Option<CaptionWriter>,
    captions_failing: bool,
    hub: Option<Arc<Hub>>,
    mqtt: Option<Arc<MqttSink>>,
    metrics: Option<Arc<Metrics>>,
}

impl SinkSet {
    pub fn new(primary: Box<dyn EventSink>) -> Self {
        Self {
            primary,
            captions: None,
            captions_failing: false,
            hub: None,
            mqtt: None,
            metrics: None,
        }
    }

    pub fn with_captions(mut self, w: CaptionWriter) -> Self {
        self.captions = Some(w);
        self
    }

    pub fn with_hub(mut self, hub: Arc<Hub>) -> Self {
        self.hub = Some(hub);
        self
    }

    pub fn with_mqtt(mut self, m: Arc<MqttSink>) -> Self {
        self.mqtt = Some(m);
        self
    }

    pub fn with_metrics(mut self, m: Arc<Metrics>) -> Self {
        self.metrics = Some(m);
        self
    }
}

/// Runs a secondary output's step and catches a panic in it, so one output's bug does
/// not end the primary stream. The panic hook has already printed where it happened.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into())
    })
}

impl EventSink for SinkSet {
    fn gap(&mut self, g: &crate::sinks::event::GapEvent) -> std::io::Result<()> {
        self.primary.gap(g)?;
        if let Some(h) = &self.hub {
            if let Ok(json) = serde_json::to_string(g) {
                h.gap(json);
            }
        }
        Ok(())
    }

    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.primary.write(ev)?;
        if let Some(m) = &self.metrics {
            m.observe_utterance(ev);
        }
        if self.hub.is_some() || self.mqtt.is_some() {
            let json = serde_json::to_string(ev)?;
            if let Some(mq) = &self.mqtt {
                mq.publish_event(json.as_bytes());
                if let Some(m) = &self.metrics {
                    m.set_mqtt(mq.stats());
                }
            }
            if let Some(h) = &self.hub {
                h.utterance(ev.id, json);
            }
        }
        if let Some(c) = self.captions.as_mut() {
            let written = match guarded(|| c.write(ev)) {
                Ok(r) => r,
                Err(panic) => {
                    // Its state is unknown after a panic: stop writing rather than
                    // append to a file that may be half-formed.
                    log::error!(
                        "captions: internal error at utterance {} ({panic}); captions are off \
                         for the rest of this run, events and other outputs continue",
                        ev.id
                    );
                    self.captions = None;
                    if let Some(m) = &self.metrics {
                        m.sink_error("captions");
                    }
                    return Ok(());
                }
            };
            match written {
                Ok(()) if self.captions_failing => {
                    log::info!("captions: writing again");
                    self.captions_failing = false;
                }
                Ok(()) => {}
                Err(e) => {
                    if !self.captions_failing {
                        log::error!("{e}; events and other outputs continue, captions retry with the next utterance");
                        self.captions_failing = true;
                    }
                    if let Some(m) = &self.metrics {
                        m.sink_error("captions");
                    }
                }
            }
        }
        Ok(())
    }

    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        self.primary.partial(p)?;
        if let Some(m) = &self.metrics {
            m.observe_partial();
        }
        if let Some(h) = &self.hub {
            h.partial(serde_json::to_string(p)?);
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.primary.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_output_step_is_caught_and_named() {
        assert_eq!(guarded(|| 7), Ok(7));
        let e = guarded(|| -> u32 { panic!("min > max in clamp") }).unwrap_err();
        assert!(e.contains("min > max"), "{e}");
    }
}
