//! The HTTP listener as one of the daemon's outputs: `[http]` for the preflight, and the
//! output of a stream (the overlay's hub, `/metrics` and the listener serving both).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use super::config::{read_token_file, HttpConfig};
use super::error::HttpError;
use super::hub::Hub;
use super::HttpServer;
use crate::common::validate::{FieldError, Problems, Validate};
use crate::sinks::captions::CaptionsConfig;
use crate::sinks::event::{GapEvent, OutputConfig, PartialEvent, UtteranceEvent};
use crate::sinks::metrics::Metrics;
use crate::sinks::mqtt::MqttConfig;
use crate::sinks::output::{
    End, Files, Lasting, Outgoing, Output, OutputError, OutputKind, Start, StartError, State,
};

impl OutputKind for HttpConfig {
    fn name(&self) -> &'static str {
        "http"
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check_section(&self, _output: &OutputConfig, problems: &mut Problems) {
        Validate::check(self, problems);
    }

    fn files(&self) -> Files<'_> {
        Files {
            writes: Vec::new(),
            reads: self
                .token_file
                .as_deref()
                .map(|p| ("http.token_file", p))
                .into_iter()
                .collect(),
        }
    }

    fn preflight(&self, problems: &mut Problems) {
        if let (true, Some(p)) = (self.enabled, &self.token_file) {
            if let Err(e) = read_token_file(p) {
                problems.add(Err(FieldError::under("http.token_file", e)));
            }
        }
    }

    /// The hub, `/metrics` (with `http.metrics`) and the listener, bound now so a port
    /// in use is an error at start. The device is named as MQTT names it (`mqtt.device_id`).
    fn start(&self, s: Start<'_>) -> Result<Box<dyn Output>, StartError> {
        let device = s
            .section::<MqttConfig>()
            .map(MqttConfig::device_id)
            .unwrap_or_default();
        let metrics = self.metrics.then(|| {
            Arc::new(Metrics::reading(
                s.counters.clone(),
                &[
                    ("asr_model", s.asr_model.to_string()),
                    ("device", device.clone()),
                ],
                s.reports.clone(),
            ))
        });
        let hub = Hub::new(self, &device);
        s.counters.drops.attach(hub.clone());
        if let Some(m) = &metrics {
            m.attach_hub(hub.clone());
            if let Some(f) = s.feedback {
                m.attach_room(f.clone());
            }
        }
        let captions = s.section::<CaptionsConfig>().cloned().unwrap_or_default();
        let server = HttpServer::start(
            self,
            hub.clone(),
            metrics.clone(),
            &captions,
            s.feedback.cloned(),
        )
        .map_err(|e| match e {
            // An unreadable token file is a configuration mistake; a port in use is not.
            HttpError::TokenFile { .. } => StartError::BadInput(e.into()),
            e => StartError::Other(e.into()),
        })?;
        Ok(Box::new(HttpOutput {
            hub,
            metrics,
            server,
        }))
    }
}

/// The listener of one stream and what it shows: events to SSE clients and the overlay,
/// counts to `/metrics`.
pub struct HttpOutput {
    hub: Arc<Hub>,
    metrics: Option<Arc<Metrics>>,
    server: HttpServer,
}

impl HttpOutput {
    /// The daemon's state to every client (the latest also to clients that come later).
    fn status(&self, state: &str) {
        // The source was opened before any status is sent; it is down once the run
        // has finished (live device faults will report here too).
        let audio = if state == "finished" { "down" } else { "up" };
        self.hub.status(
            serde_json::json!({
                "type": "status", "state": state, "audio": audio, "camera": "absent",
            })
            .to_string(),
        );
    }
}

impl Output for HttpOutput {
    fn name(&self) -> &'static str {
        "http"
    }

    fn state(&mut self, state: State) {
        self.status(match state {
            State::Loading => "loading",
            State::Running => "running",
        });
    }

    fn utterance(&mut self, ev: &Outgoing<'_, UtteranceEvent>) -> Result<(), OutputError> {
        if let Some(m) = &self.metrics {
            m.observe_utterance(ev.event);
        }
        self.hub.utterance(ev.event.id, ev.json()?.to_string());
        Ok(())
    }

    fn partial(&mut self, p: &Outgoing<'_, PartialEvent>) -> Result<(), OutputError> {
        if let Some(m) = &self.metrics {
            m.observe_partial();
        }
        self.hub.partial(p.json()?.to_string());
        Ok(())
    }

    fn gap(&mut self, g: &Outgoing<'_, GapEvent>) -> Result<(), OutputError> {
        self.hub.gap(g.json()?.to_string());
        Ok(())
    }

    fn listening(&self) -> Option<SocketAddr> {
        Some(self.server.local_addr())
    }

    /// Tells every client the stream is over, then stops the listener.
    fn finish(self: Box<Self>, end: &End<'_>) -> Option<Box<dyn Lasting>> {
        self.status("finished");
        self.server
            .shutdown(end.grace.min(Duration::from_millis(500)));
        None
    }
}
