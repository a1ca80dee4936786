//! Sink stage, on the caller's thread: writes events, interim text and gaps to the
//! `EventSink` in order, each event first through the room step ([`super::room`]) so
//! its score is final before any output sees it, drops interim text whose final event
//! already went out,
//! counts latency-budget violations and collects per-stage latencies for the run
//! summary. A sink that fails stops the run (nothing downstream can take events) but
//! the queue is still drained, so no stage blocks on a full event queue.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use crossbeam_channel::Receiver;

use crate::common::counters::Counters;
use crate::common::drops::DropReason;
use crate::sinks::event::EventSink;
use crate::views::room::Room;

use super::queues::Emitted;
use super::shutdown::Shutdown;

pub struct SinkStage<'a> {
    pub events: Receiver<Emitted>,
    pub counters: &'a Counters,
    /// `budget.event_latency_ms` (0 = no budget).
    pub budget_ms: u32,
    /// The room head (`[room]` enabled), applied to each event before it is written.
    pub room: Option<&'a Room>,
    pub shutdown: Shutdown,
}

/// What the sink stage saw.
pub struct SinkOutcome {
    /// Every event's latency by stage (ms), for the run summary.
    pub stages: BTreeMap<String, Vec<f64>>,
    /// The first write error; later events were not written.
    pub error: Option<std::io::Error>,
}

impl SinkStage<'_> {
    /// Write until every sender is gone.
    pub fn run(self, sink: &mut dyn EventSink) -> SinkOutcome {
        let Self {
            events,
            counters,
            budget_ms,
            room,
            shutdown,
        } = self;
        let mut stages: BTreeMap<String, Vec<f64>> = BTreeMap::new();
        let mut sink_err = None;
        let fail = |e, sink_err: &mut Option<std::io::Error>| {
            shutdown.fail();
            *sink_err = Some(e);
        };
        let mut last_final: Option<u64> = None;
        for emitted in events.iter() {
            counters
                .event_queue_depth
                .store(events.len() as u64, Ordering::Relaxed);
            let ev = match emitted {
                Emitted::Utterance(ev) => ev,
                Emitted::Gap(g) => {
                    if sink_err.is_none() {
                        if let Err(e) = sink.gap(&g) {
                            fail(e, &mut sink_err);
                        }
                    }
                    continue;
                }
                Emitted::Partial(p) => {
                    // The final event of this utterance already went out.
                    if last_final.is_some_and(|l| p.id <= l) {
                        counters.drops.add(DropReason::PartialStale, 1);
                        continue;
                    }
                    if sink_err.is_none() {
                        match sink.partial(&p) {
                            Ok(()) => {
                                counters.partials.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => fail(e, &mut sink_err),
                        }
                    }
                    continue;
                }
            };
            last_final = Some(ev.id);
            if budget_ms > 0 && ev.latency_ms.total > budget_ms as f64 {
                let n = counters.budget_violations.fetch_add(1, Ordering::Relaxed);
                // First one, then every 100th: an overloaded board must not also flood its log.
                if n % 100 == 0 {
                    log::warn!(
                        "utterance {} flagged {:.0} ms after the end of speech, over the {budget_ms} ms budget ({} violations so far)",
                        ev.id,
                        ev.latency_ms.total,
                        n + 1
                    );
                }
            }
            for (k, v) in ev.latency_ms.stages() {
                stages.entry(k.to_string()).or_default().push(v);
            }
            if sink_err.is_none() {
                let ev = match room {
                    Some(room) => Box::new(super::room::scored(room, *ev)),
                    None => ev,
                };
                match sink.write(&ev) {
                    Ok(()) => {
                        counters.events.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => fail(e, &mut sink_err),
                }
            }
        }
        SinkOutcome {
            stages,
            error: sink_err,
        }
    }
}
