//! The delivery state shared by the sink and its client thread: the queue, what was
//! handed to rumqttc, the counters, and the topics.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use log::debug;
use rumqttc::{Client, QoS};

use super::status::STATUS_OFFLINE;
use crate::common::drops::{DropCounts, DropSource};
use crate::common::feedback::Feedback;
use crate::common::lock::LockOrRecover;
use crate::sinks::metrics::MqttStats;

/// What a message handed to rumqttc was, so its PubAck can be attributed.
#[derive(Debug)]
pub(super) enum Kind {
    Event(Vec<u8>),
    /// Online status and HA discovery: re-sent after every ConnAck anyway.
    Control,
    /// The retained "offline" of a graceful shutdown.
    Offline,
    /// QoS 0: done once written.
    Stats,
}

#[derive(Debug)]
pub(super) struct Handed {
    pub(super) kind: Kind,
    /// Set when rumqttc reports writing it (`Outgoing::Publish(pkid)`); 0 for QoS 0.
    pub(super) pkid: Option<u16>,
}

#[derive(Default)]
pub(super) struct State {
    pub(super) connected: bool,
    /// `shutdown` started: no "online"/discovery after a ConnAck, "offline" instead.
    pub(super) shutting_down: bool,
    /// The client thread must exit at the next chance instead of reconnecting.
    pub(super) stop: bool,
    pub(super) offline_acked: bool,
    /// Events not yet handed to rumqttc, oldest first.
    pub(super) waiting: VecDeque<Vec<u8>>,
    /// Messages handed to rumqttc in hand-off order. rumqttc writes requests from its
    /// single channel in order (we keep `pending` empty), so `Outgoing::Publish` events
    /// arrive in this order too.
    pub(super) handed: VecDeque<Handed>,
    pub(super) events_in_flight: usize,
    pub(super) stats: MqttStats,
    /// A close with unacknowledged events was logged in the current outage.
    pub(super) unacked_close_logged: bool,
    /// The oldest event that was unacknowledged at a close, and at how many closes in a
    /// row it was; reset when any event is acknowledged.
    pub(super) suspect: Option<(Vec<u8>, u32)>,
    pub(super) overflow_logged: bool,
    pub(super) too_large_logged: bool,
}

impl State {
    pub(super) fn held(&self) -> usize {
        self.waiting.len() + self.events_in_flight
    }
}

pub(super) struct Topics {
    pub(super) event: String,
    pub(super) stats: String,
    pub(super) status: String,
    /// Corrections come in here (subscribed when `[room]` is enabled).
    pub(super) feedback: String,
    /// (topic, retained JSON) for HA discovery; empty when disabled.
    pub(super) discovery: Vec<(String, Vec<u8>)>,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    /// Signalled on PubAck, connect state changes and stop.
    pub(super) cond: Condvar,
    pub(super) client: Client,
    pub(super) topics: Topics,
    pub(super) offline_queue: usize,
    pub(super) window: usize,
    pub(super) broker: String,
    /// Where corrections go (`[room]` enabled).
    pub(super) room: Option<Arc<dyn Feedback>>,
}

impl Shared {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not turn every later publish into a panic.
        self.state.lock_or_recover()
    }

    /// Hands the retained "offline" status to rumqttc. When it cannot even be queued
    /// there is no acknowledgement to wait for, so it counts as done.
    pub(super) fn hand_offline(&self, st: &mut State) {
        let queued = self.hand_control(
            st,
            &self.topics.status,
            QoS::AtLeastOnce,
            true,
            STATUS_OFFLINE.into(),
            Kind::Offline,
        );
        st.offline_acked = !queued;
    }

    /// Hands queued events to rumqttc while connected and the window has room.
    /// Non-blocking: `try_publish` into a channel sized for the window.
    pub(super) fn pump(&self, st: &mut State) {
        if !st.connected || st.stop {
            return;
        }
        while st.events_in_flight < self.window {
            let Some(payload) = st.waiting.pop_front() else {
                break;
            };
            match self.client.try_publish(
                self.topics.event.as_str(),
                QoS::AtLeastOnce,
                false,
                payload.clone(),
            ) {
                Ok(()) => {
                    st.handed.push_back(Handed {
                        kind: Kind::Event(payload),
                        pkid: None,
                    });
                    st.events_in_flight += 1;
                }
                Err(e) => {
                    // Channel full (not expected with our sizing): retry on the next PubAck.
                    debug!("mqtt: request channel busy ({e}); event stays queued");
                    st.waiting.push_front(payload);
                    break;
                }
            }
        }
    }

    /// Publishes a non-event message and records it so its write/PubAck is attributed.
    pub(super) fn hand_control(
        &self,
        st: &mut State,
        topic: &str,
        qos: QoS,
        retain: bool,
        payload: Vec<u8>,
        kind: Kind,
    ) -> bool {
        match self.client.try_publish(topic, qos, retain, payload) {
            Ok(()) => {
                st.handed.push_back(Handed { kind, pkid: None });
                true
            }
            Err(e) => {
                debug!("mqtt: could not queue message for {topic}: {e}");
                false
            }
        }
    }

    pub(super) fn snapshot(&self, st: &State) -> MqttStats {
        let mut s = st.stats.clone();
        s.connected = st.connected;
        s.queued = st.held() as u64;
        s
    }
}

/// The sink's drops, attached to the run's drop registry.
impl DropSource for Shared {
    fn drop_counts(&self) -> DropCounts {
        self.lock().stats.drops
    }
}
