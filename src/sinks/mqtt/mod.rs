//! MQTT sink: one QoS 1 message per utterance on `<prefix>/<device>/event`, a retained
//! `online`/`offline` status with a Last Will, and optional Home Assistant discovery.
//!
//! # Delivery model
//! Events go into the sink's own bounded queue, not straight into rumqttc's request
//! channel, and stay there until the broker acknowledges them (PubAck):
//!
//! * `publish_event` only appends to that queue and never blocks.
//! * While connected, at most [`EVENT_WINDOW`] events are handed to rumqttc at a time;
//!   each PubAck removes one and lets the next one go.
//! * When the connection breaks, every event handed to rumqttc but not yet acknowledged
//!   goes back to the front of the queue, in order, and is published again after the next
//!   ConnAck. Delivery is therefore at-least-once: an event whose PubAck was lost with the
//!   connection reaches subscribers twice. Consumers dedupe on the event `id`.
//!
//! Why not rumqttc's own retransmission: in rumqttc 0.25.1 `EventLoop::poll` calls
//! `EventLoop::clean()` when the connection fails. That moves un-acked publishes
//! (`MqttState::clean`) *and every request still in the channel* into `EventLoop::pending`.
//! Then, on the next ConnAck, `pending.clear()` runs whenever `session_present` is false.
//! That is every time with `clean_session = true`, and with `clean_session = false` also
//! whenever the broker lost the session (a restart without persistence, or session
//! expiry). Relying on it would silently drop whatever was in flight at the break, so we
//! use `clean_session = true`, empty `pending` ourselves on every failure, and resend from
//! our own queue. rumqttc still does all the MQTT protocol work: packet ids, PubAck
//! matching, keep-alive and reconnecting.
//!
//! # What counts as published
//! An event counts as `published` only once the broker acknowledged it (PubAck); written
//! to the connection is only `sent`. Events written but unacknowledged when the
//! connection closes count as `failed` (and are re-sent): MQTT 3.1.1 has no negative
//! PubAck, so a broker that refuses a publish closes the connection instead (mosquitto
//! does for a packet over its `max_packet_size`). A publish denied by a mosquitto ACL is
//! acknowledged and dropped, which a 3.1.1 client cannot see. Stats messages are QoS 0
//! and counted nowhere: without an acknowledgement, written is all that could be known.
//!
//! # Reconnecting
//! A connection counts as healthy once it has stayed up [`HEALTHY_AFTER`]; only then is
//! the backoff reset and the outage over (see [`Pacer`]). A broker that accepts and then
//! drops us keeps one outage going: one WARN at its start, debug lines for the flaps, the
//! backoff doubling up to `reconnect_max_ms`, and one INFO when it ends.
//!
//! # Full-queue policy
//! `offline_queue` bounds every event not yet acknowledged: the queued ones plus the ones
//! in flight. When the queue is full, the **oldest queued** event is dropped so the newest
//! ones reach the fleet. If nothing is queued, because every held event is already in
//! flight (only possible when `offline_queue <= EVENT_WINDOW`), the new event is dropped
//! instead: an in-flight one may already be at the broker. Both cases count in
//! `mqtt_offline_queue_full`.
//!
//! # Files
//! This file: the sink's API; `state.rs` the delivery state it shares with the client
//! thread (queue, window, stats); `status.rs` the status payloads; `error.rs`;
//! `config.rs` the `[mqtt]` section and its checks; `connection.rs` the client thread
//! (event loop, reconnect pacing, what each broker packet does to the state); `tls.rs`;
//! `discovery.rs` (Home Assistant); `feedback.rs` corrections coming in on
//! `<prefix>/<device>/feedback` (with `[room]`); `stats.rs` the stats topic's payload and
//! ticker; `output.rs` MQTT as one of the daemon's outputs (kept across a reload while
//! `[mqtt]` stays the same); `tests.rs`.

use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{info, warn};
use rumqttc::{Client, LastWill, MqttOptions, QoS, TlsConfiguration, Transport};

use crate::common::drops::{DropReason, DropSource};
use crate::common::feedback::Feedback;
use crate::common::validate::Validate;

/// Events handed to rumqttc at once while connected. Kept below rumqttc's `inflight`
/// (100) with room for the control messages, so rumqttc never stalls on flow control.
pub const EVENT_WINDOW: usize = 64;
/// Largest event or stats payload accepted. rumqttc treats a packet larger than its
/// outgoing limit as a connection error, so one oversized event would otherwise bring
/// down the connection again on every reconnect.
pub const MAX_PAYLOAD_BYTES: usize = 256 * 1024;
/// Room for the topic and headers on top of the payload.
const MAX_PACKET_BYTES: usize = MAX_PAYLOAD_BYTES + 4 * 1024;
/// rumqttc request channel size: the event window, the status/discovery/offline control
/// messages and a few stats publishes. `try_publish` is never expected to find it full.
const REQUEST_CHANNEL_CAP: usize = EVENT_WINDOW + 16;
/// How long `Drop` (without `shutdown`) waits for pending acknowledgements.
const DROP_TIMEOUT: Duration = Duration::from_secs(1);
/// How long `shutdown` waits for the client thread to exit once it has been told to stop.
const JOIN_GRACE: Duration = Duration::from_millis(300);

mod config;
mod connection;
mod discovery;
mod error;
mod feedback;
mod output;
mod state;
pub mod stats;
mod status;
#[cfg(test)]
mod tests;
mod tls;

pub use config::*;
use connection::*;
pub use discovery::discovery_messages;
pub use error::MqttError;
use state::*;
use status::*;
pub use tls::rustls_config;

/// The sink's counters as `/metrics` and the stats topic show them; defined where
/// they are rendered, so `metrics` need not import the sink.
pub use crate::sinks::metrics::MqttStats;

pub struct MqttSink {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
    /// Disconnected when the client thread exits (its sender is dropped). crossbeam's
    /// receiver is `Sync`, so the sink can be shared (`Arc`) with the stats thread.
    exited: crossbeam_channel::Receiver<()>,
}

impl MqttSink {
    /// Starts the client thread and returns at once. A broker that is down now is not an
    /// error: the sink connects when it can. Errors only for bad local input.
    pub fn start(cfg: &MqttConfig) -> Result<Self, MqttError> {
        Self::start_with(cfg, None)
    }

    /// `room`: also subscribe to `<prefix>/<device>/feedback` and hand corrections to it
    /// (see `feedback.rs`).
    pub fn start_with(
        cfg: &MqttConfig,
        room: Option<Arc<dyn Feedback>>,
    ) -> Result<Self, MqttError> {
        cfg.validate().map_err(MqttError::Config)?;
        let device = cfg.device_id();
        let topics = Topics {
            event: cfg.topic("event"),
            stats: cfg.topic("stats"),
            status: cfg.topic("status"),
            feedback: cfg.topic("feedback"),
            discovery: if cfg.ha_discovery {
                discovery_messages(cfg, room.is_some())
                    .into_iter()
                    .map(|(t, v)| (t, serde_json::to_vec(&v).expect("JSON value serialises")))
                    .collect()
            } else {
                Vec::new()
            },
        };

        let mut opts = MqttOptions::new(cfg.client_id(), cfg.host.trim(), cfg.port);
        opts.set_keep_alive(Duration::from_secs(cfg.keep_alive_s.into()))
            // See the module doc: our own queue resends; a stale broker session would
            // only add a second copy of the same messages.
            .set_clean_session(true)
            .set_max_packet_size(10 * 1024, MAX_PACKET_BYTES)
            .set_last_will(LastWill::new(
                topics.status.as_str(),
                STATUS_OFFLINE,
                QoS::AtLeastOnce,
                true,
            ));
        if let Some(user) = &cfg.username {
            let password = match (&cfg.password, &cfg.password_file) {
                (Some(p), _) => p.clone(),
                (None, Some(path)) => read_password_file(path)?,
                (None, None) => String::new(),
            };
            opts.set_credentials(user.as_str(), password);
        }
        if let Some(tls) = &cfg.tls {
            let tls_cfg = rustls_config(tls)?;
            opts.set_transport(Transport::tls_with_config(TlsConfiguration::Rustls(
                Arc::new(tls_cfg),
            )));
        }

        let (client, connection) = Client::new(opts, REQUEST_CHANNEL_CAP);
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            cond: Condvar::new(),
            client,
            topics,
            offline_queue: cfg.offline_queue,
            window: EVENT_WINDOW.min(cfg.offline_queue),
            broker: format!("{}:{}", cfg.host.trim(), cfg.port),
            room,
        });
        let backoff = (
            Duration::from_millis(cfg.reconnect_min_ms.into()),
            Duration::from_millis(cfg.reconnect_max_ms.into()),
        );
        let (exit_tx, exited) = crossbeam_channel::bounded::<()>(1);
        let thread_shared = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("mqtt-sink".into())
            .spawn(move || {
                let _exit = exit_tx; // dropped when this thread ends, however it ends
                run_connection(&thread_shared, connection, backoff);
            })
            .map_err(MqttError::Thread)?;
        info!(
            "mqtt: publishing to {} on {} (device {device})",
            shared.topics.event, shared.broker
        );
        Ok(Self {
            shared,
            thread: Some(thread),
            exited,
        })
    }

    /// Queues one event for `<prefix>/<device>/event` (QoS 1, not retained). Never blocks.
    /// When `offline_queue` events are already held, the oldest queued one is dropped (see
    /// the module doc for the exact policy) and counted in `mqtt_offline_queue_full`.
    pub fn publish_event(&self, payload_json: &[u8]) {
        let sh = &self.shared;
        let mut st = sh.lock();
        if payload_json.len() > MAX_PAYLOAD_BYTES {
            st.stats.drops.add(DropReason::MqttTooLarge, 1);
            if !st.too_large_logged {
                st.too_large_logged = true;
                warn!(
                    "mqtt: dropping a {} byte event (limit {MAX_PAYLOAD_BYTES}); further ones are \
                     only counted in mqtt_too_large",
                    payload_json.len()
                );
            }
            return;
        }
        if st.held() >= sh.offline_queue {
            st.stats.drops.add(DropReason::MqttOfflineQueueFull, 1);
            if !st.overflow_logged {
                st.overflow_logged = true;
                warn!(
                    "mqtt: offline queue full ({} events): dropping the oldest; further drops are \
                     only counted in mqtt_offline_queue_full",
                    sh.offline_queue
                );
            }
            if st.waiting.pop_front().is_none() {
                // Everything held is already in flight: keep those, drop this one.
                return;
            }
        }
        st.waiting.push_back(payload_json.to_vec());
        sh.pump(&mut st);
    }

    /// Publishes caller-supplied JSON on `<prefix>/<device>/stats`, QoS 0, not retained.
    /// QoS 0 because each stats message supersedes the previous one: while disconnected
    /// it is dropped rather than taking room in the event queue.
    pub fn publish_stats(&self, payload_json: &[u8]) {
        let sh = &self.shared;
        let mut st = sh.lock();
        if !st.connected || st.stop || payload_json.len() > MAX_PAYLOAD_BYTES {
            return;
        }
        sh.hand_control(
            &mut st,
            &sh.topics.stats,
            QoS::AtMostOnce,
            false,
            payload_json.to_vec(),
            Kind::Stats,
        );
    }

    pub fn stats(&self) -> MqttStats {
        let st = self.shared.lock();
        self.shared.snapshot(&st)
    }

    /// The sink's drop counts, to attach to a run's [`crate::common::drops::DropRegistry`]
    /// (read live, also after [`MqttSink::shutdown`]).
    pub fn drop_source(&self) -> Arc<dyn DropSource> {
        self.shared.clone()
    }

    /// Graceful stop: publishes the retained "offline" status, waits up to `timeout` until
    /// every held event and that status are acknowledged, then disconnects. Returns after
    /// about `timeout` at most (plus a short grace for the client thread), even if the
    /// broker is unreachable. Events still held then are lost (counted in `queued` and
    /// as `mqtt_unsent_at_stop`).
    pub fn shutdown(mut self, timeout: Duration) -> MqttStats {
        self.stop(timeout)
    }

    fn stop(&mut self, timeout: Duration) -> MqttStats {
        let sh = Arc::clone(&self.shared);
        let Some(thread) = self.thread.take() else {
            return self.stats();
        };
        let deadline = Instant::now() + timeout;
        let mut st = sh.lock();
        st.shutting_down = true;
        if st.connected {
            sh.hand_offline(&mut st);
        }
        // Else: the client thread publishes "offline" if it connects before the deadline.
        loop {
            if st.held() == 0 && st.offline_acked {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            st = sh
                .cond
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let clean = st.held() == 0 && st.offline_acked;
        st.stop = true;
        let was_connected = st.connected;
        let held = st.held();
        // Events never acknowledged are lost with the sink: counted as a drop, so that
        // every event is delivered or counted.
        st.stats
            .drops
            .add(DropReason::MqttUnsentAtStop, held as u64);
        drop(st);
        sh.cond.notify_all();
        if was_connected {
            // Graceful DISCONNECT: the broker discards the will, hence the explicit "offline".
            let _ = sh.client.try_disconnect();
        }
        match self.exited.recv_timeout(JOIN_GRACE) {
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) | Ok(()) => {
                let _ = thread.join();
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
                // Stuck in a connect attempt (rumqttc times those out after 5 s); it exits on
                // its own once that ends. Detach rather than hang the daemon's shutdown.
                warn!(
                    "mqtt: client thread still busy after shutdown; leaving it to exit on its own"
                );
            }
        }
        if !clean {
            warn!(
                "mqtt: shutdown after {timeout:?} with {held} event(s) unacknowledged{}",
                if was_connected {
                    ""
                } else {
                    " (broker unreachable)"
                }
            );
        }
        let st = sh.lock();
        let mut stats = sh.snapshot(&st);
        stats.connected = false;
        stats
    }
}

impl Drop for MqttSink {
    /// Same as `shutdown` with a short timeout, so a retained "offline" is still published
    /// when possible and dropping never hangs.
    fn drop(&mut self) {
        if self.thread.is_some() {
            self.stop(DROP_TIMEOUT);
        }
    }
}
