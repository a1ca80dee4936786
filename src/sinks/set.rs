//! The outputs of one stream ([`Outputs`]) and the fan-out that puts them behind one
//! [`EventSink`] with the JSON-lines stream ([`SinkSet`]).
//!
//! The JSON-lines stream is primary: if it cannot be written the run stops (that is the
//! daemon's contract with whoever reads it). Every other output is secondary: a failure
//! is logged once when it starts and once when it recovers, counted in
//! `sarcasmd_sink_errors_total{sink}`, and retried with the next event, so a full disk or
//! a dead broker never stops captioning or the overlay. A bug that panics inside an
//! output turns that output off for the rest of the stream (logged, counted) instead of
//! ending the daemon.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::common::counters::Counters;
use crate::common::feedback::Feedback;
use crate::sinks::event::{EventSink, GapEvent, OutputConfig, PartialEvent, UtteranceEvent};
use crate::sinks::metrics::Reports;
use crate::sinks::output::{
    End, Lasting, Outgoing, Output, OutputError, Sections, Start, StartError, State,
};

/// What every output of a stream is started with, besides its own section.
pub struct StreamOutputs<'a> {
    /// Every output's section, in the order each event reaches them.
    pub sections: &'a Sections<'a>,
    /// The event stream's section (`[output]`).
    pub output: &'a OutputConfig,
    pub asr_model: &'a str,
    pub counters: &'a Arc<Counters>,
    /// Where corrections go (`[room]` enabled).
    pub feedback: Option<&'a Arc<dyn Feedback>>,
    /// Whether `feedback` is the previous stream's (a kept output may hold it).
    pub same_feedback: bool,
}

/// One output and whether its last write failed.
struct Slot {
    output: Box<dyn Output>,
    failing: bool,
}

/// The outputs of one stream, started before the models load so an overlay or a broker
/// sees the daemon come up (status `loading`, then `running`).
pub struct Outputs {
    slots: Vec<Slot>,
    reports: Arc<Reports>,
}

impl Outputs {
    /// Starts every enabled output of `s.sections`. `kept`: what outputs of the previous
    /// stream handed back ([`Output::finish`]); each goes back to its kind when it serves
    /// the new section as it is, and is stopped first otherwise.
    pub fn start(s: StreamOutputs<'_>, kept: Vec<Box<dyn Lasting>>) -> Result<Self, StartError> {
        let mut serving = Vec::new();
        for k in kept {
            let enabled = s
                .sections
                .iter()
                .any(|c| c.name() == k.name() && c.enabled());
            if enabled && k.serves(s.sections, s.same_feedback) {
                serving.push(k);
            } else {
                k.stop(Duration::from_secs(2));
            }
        }
        let reports = Arc::new(Reports::default());
        let mut slots = Vec::new();
        for section in s.sections.iter().filter(|c| c.enabled()) {
            let kept = serving
                .iter()
                .position(|k| k.name() == section.name())
                .map(|i| serving.swap_remove(i).into_any());
            let output = section.start(Start {
                output: s.output,
                sections: s.sections,
                asr_model: s.asr_model,
                counters: s.counters,
                reports: &reports,
                feedback: s.feedback,
                kept,
            })?;
            slots.push(Slot {
                output,
                failing: false,
            });
        }
        Ok(Self { slots, reports })
    }

    /// What the outputs report to `/metrics` (the daemon adds the model load time).
    pub fn reports(&self) -> &Arc<Reports> {
        &self.reports
    }

    /// Where an output listens (the HTTP listener's real port).
    pub fn listening(&self) -> Option<SocketAddr> {
        self.slots.iter().find_map(|s| s.output.listening())
    }

    /// Tells every output the daemon's state.
    pub fn state(&mut self, state: State) {
        self.each(
            || format!("{state:?}").to_lowercase(),
            |o| {
                o.state(state);
                Ok(())
            },
        );
    }

    /// Ends the stream for every output, in the reverse order of their start; returns
    /// what they keep for the next one.
    pub fn finish(self, end: &End<'_>) -> Vec<Box<dyn Lasting>> {
        let mut kept = Vec::new();
        for slot in self.slots.into_iter().rev() {
            let name = slot.output.name();
            match guarded(|| slot.output.finish(end)) {
                Ok(k) => kept.extend(k),
                Err(panic) => log::error!("{name}: internal error at its end ({panic})"),
            }
        }
        kept
    }

    /// Runs `step` on every output, in order. A panic turns that output off for the rest
    /// of the stream; an error is logged when the output starts failing and when it
    /// recovers, and counted each time. `what` names the event for the log.
    fn each(
        &mut self,
        what: impl Fn() -> String,
        mut step: impl FnMut(&mut dyn Output) -> Result<(), OutputError>,
    ) {
        let reports = &self.reports;
        self.slots.retain_mut(|slot| {
            let name = slot.output.name();
            match guarded(|| step(slot.output.as_mut())) {
                Ok(Ok(())) => {
                    if slot.failing {
                        log::info!("{name}: writing again");
                        slot.failing = false;
                    }
                    true
                }
                Ok(Err(e)) => {
                    if !slot.failing {
                        log::error!(
                            "{name}: {e}; events and other outputs continue, {name} tries again \
                             with the next event"
                        );
                        slot.failing = true;
                    }
                    reports.sink_error(name);
                    true
                }
                Err(panic) => {
                    // Its state is unknown after a panic: stop writing rather than
                    // append to a file that may be half-formed.
                    log::error!(
                        "{name}: internal error at {} ({panic}); the {name} output is off for \
                         the rest of this run, events and other outputs continue",
                        what()
                    );
                    reports.sink_error(name);
                    false
                }
            }
        });
    }
}

/// Runs an output's step and catches a panic in it, so one output's bug does not end
/// the primary stream. The panic hook has already printed where it happened.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into())
    })
}

/// The JSON-lines stream and the stream's outputs behind one [`EventSink`].
pub struct SinkSet<'a> {
    primary: Box<dyn EventSink>,
    outputs: &'a mut Outputs,
}

impl<'a> SinkSet<'a> {
    pub fn new(primary: Box<dyn EventSink>, outputs: &'a mut Outputs) -> Self {
        Self { primary, outputs }
    }
}

impl EventSink for SinkSet<'_> {
    fn write(&mut self, ev: &UtteranceEvent) -> std::io::Result<()> {
        self.primary.write(ev)?;
        let out = Outgoing::new(ev);
        self.outputs
            .each(|| format!("utterance {}", ev.id), |o| o.utterance(&out));
        Ok(())
    }

    fn partial(&mut self, p: &PartialEvent) -> std::io::Result<()> {
        self.primary.partial(p)?;
        let out = Outgoing::new(p);
        self.outputs
            .each(|| format!("partial {}", p.id), |o| o.partial(&out));
        Ok(())
    }

    fn gap(&mut self, g: &GapEvent) -> std::io::Result<()> {
        self.primary.gap(g)?;
        let out = Outgoing::new(g);
        self.outputs.each(|| "a gap".to_string(), |o| o.gap(&out));
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
