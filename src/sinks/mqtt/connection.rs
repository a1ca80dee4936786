//! The client thread: rumqttc's event loop, reconnect pacing and outage bookkeeping,
//! and what each ConnAck, write, PubAck and error does to the delivery state.

use std::time::{Duration, Instant};

use log::{debug, info, warn};
use rumqttc::{Connection, ConnectionError, Event, Outgoing, Packet, QoS};

use super::state::{Kind, Shared, State};
use super::status::STATUS_ONLINE;
use crate::common::drops::DropReason;
use crate::common::reconnect::{Backoff, BackoffPolicy};

/// Closes in a row with the same event oldest unacknowledged before it is dropped.
pub(super) const MAX_CLOSES_UNACKED: u32 = 3;

/// How long a connection must stay up to count as healthy. Only then does the backoff
/// start again from `reconnect_min_ms` and the outage end: a broker that accepts us and
/// then drops the connection (a publish it refuses, a proxy, a second client with our
/// id) would otherwise be reconnected to every `reconnect_min_ms`, with a WARN each time.
pub(super) const HEALTHY_AFTER: Duration = Duration::from_secs(5);

/// Reconnect pacing and outage bookkeeping, kept free of I/O and clock reads so the
/// sequence of waits can be tested without a broker.
///
/// An outage starts at the first failure after a healthy connection (or at start) and
/// ends only once a connection has stayed up for [`HEALTHY_AFTER`]. Connections that
/// break sooner are flaps within the same outage: the backoff keeps doubling up to the
/// maximum and nothing new is logged.
#[derive(Debug)]
pub(super) struct Pacer {
    /// Gives the wait after each failure; reset only by a healthy connection.
    pub(super) backoff: Backoff,
    /// ConnAck time of the current connection; None while disconnected.
    pub(super) up_since: Option<Instant>,
    pub(super) outage: Option<Outage>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Outage {
    pub(super) started: Instant,
    /// Connect attempts since it started, the one that ended it included.
    pub(super) attempts: u64,
}

/// An outage that ended: a connection stayed up for [`HEALTHY_AFTER`].
#[derive(Debug, PartialEq)]
pub(super) struct Recovery {
    /// From the first failure to the ConnAck of the connection that proved healthy.
    pub(super) down: Duration,
    pub(super) attempts: u64,
}

#[derive(Debug, PartialEq)]
pub(super) struct Failure {
    /// How long to wait before the next connect attempt.
    pub(super) wait: Duration,
    /// This failure began an outage (log it); false for a flap within one.
    pub(super) outage_started: bool,
    /// The connection that broke had proved healthy and so ended an outage that no
    /// earlier event had reported yet.
    pub(super) recovered: Option<Recovery>,
}

impl Pacer {
    pub(super) fn new(min: Duration, max: Duration) -> Self {
        Self {
            backoff: Backoff::new(&BackoffPolicy {
                initial: min,
                max,
                ..BackoffPolicy::default()
            }),
            up_since: None,
            outage: None,
        }
    }

    pub(super) fn in_outage(&self) -> bool {
        self.outage.is_some()
    }

    pub(super) fn connected(&mut self, now: Instant) {
        self.up_since = Some(now);
    }

    /// The open connection delivered something at `now`. Once it has been up for
    /// [`HEALTHY_AFTER`] the backoff starts again from the minimum and a running outage
    /// ends (returned, to be logged once).
    pub(super) fn alive(&mut self, now: Instant) -> Option<Recovery> {
        let up = self.up_since?;
        if now.saturating_duration_since(up) < HEALTHY_AFTER {
            return None;
        }
        self.backoff.reset();
        let o = self.outage.take()?;
        Some(Recovery {
            down: up.saturating_duration_since(o.started),
            attempts: o.attempts,
        })
    }

    /// The connection broke, or a connect attempt failed, at `now`.
    pub(super) fn failed(&mut self, now: Instant) -> Failure {
        let recovered = self.alive(now);
        self.up_since = None;
        let outage_started = self.outage.is_none();
        if outage_started {
            self.outage = Some(Outage {
                started: now,
                attempts: 0,
            });
        }
        let wait = self.backoff.next_delay();
        Failure {
            wait,
            outage_started,
            recovered,
        }
    }

    /// The wait is over; a connect attempt follows.
    pub(super) fn retrying(&mut self) {
        if let Some(o) = &mut self.outage {
            o.attempts += 1;
        }
    }
}

/// The client thread: drives rumqttc's event loop, keeps the queue bookkeeping in step
/// with what rumqttc reports, and paces reconnects.
pub(super) fn run_connection(sh: &Shared, mut conn: Connection, (min, max): (Duration, Duration)) {
    let mut pacer = Pacer::new(min, max);
    loop {
        let ev = match conn.recv() {
            Ok(ev) => ev,
            // Only when every request sender is gone; the event loop holds one itself.
            Err(_) => break,
        };
        // Without a timer of our own the end of an outage is noticed at the next event
        // after HEALTHY_AFTER: a publish, a PubAck, or at the latest the keep-alive ping.
        if matches!(&ev, Ok(e) if !matches!(e, Event::Incoming(Packet::ConnAck(_)))) {
            if let Some(r) = pacer.alive(Instant::now()) {
                log_recovery(sh, &mut sh.lock(), &r);
            }
        }
        match ev {
            Ok(Event::Incoming(Packet::ConnAck(_))) => {
                pacer.connected(Instant::now());
                if !on_connack(sh, pacer.in_outage()) {
                    break;
                }
            }
            Ok(Event::Outgoing(Outgoing::Publish(pkid))) => on_written(sh, pkid),
            Ok(Event::Incoming(Packet::PubAck(ack))) => on_puback(sh, ack.pkid),
            Ok(Event::Incoming(Packet::Publish(p))) if p.topic == sh.topics.feedback => {
                super::feedback::on_feedback(sh, &p.payload)
            }
            Ok(Event::Outgoing(Outgoing::Disconnect)) => {
                // rumqttc flushed the DISCONNECT before reporting it.
                let mut st = sh.lock();
                st.connected = false;
                drop(st);
                sh.cond.notify_all();
                break;
            }
            Ok(_) => {}
            Err(e) => {
                let failure = pacer.failed(Instant::now());
                if !on_error(sh, &mut conn, &e, &failure) {
                    break;
                }
                let st = sh.lock();
                let (mut st, _) = sh
                    .cond
                    .wait_timeout_while(st, failure.wait, |st| !st.stop)
                    .unwrap_or_else(|e| e.into_inner());
                if st.stop {
                    break;
                }
                st.stats.reconnect_attempts += 1;
                drop(st);
                pacer.retrying();
            }
        }
    }
    let mut st = sh.lock();
    st.connected = false;
    drop(st);
    sh.cond.notify_all();
    debug!("mqtt: client thread exits");
}

pub(super) fn log_recovery(sh: &Shared, st: &mut State, r: &Recovery) {
    st.unacked_close_logged = false;
    info!(
        "mqtt: reconnected to {} after {:.1} s down and {} attempt(s); {} event(s) not yet acknowledged",
        sh.broker,
        r.down.as_secs_f64(),
        r.attempts,
        st.held()
    );
}

/// `in_outage`: a reconnect that has yet to prove healthy (see [`Pacer`]).
/// Returns false when the thread should stop.
pub(super) fn on_connack(sh: &Shared, in_outage: bool) -> bool {
    let mut st = sh.lock();
    if st.stop {
        return false;
    }
    st.connected = true;
    st.stats.connects += 1;
    st.overflow_logged = false;
    if in_outage {
        debug!(
            "mqtt: connected to {} again; {} event(s) waiting; the outage ends once the \
             connection stays up {HEALTHY_AFTER:?}",
            sh.broker,
            st.held()
        );
    } else {
        info!("mqtt: connected to {}", sh.broker);
    }
    if st.shutting_down {
        // Flush what we hold, then say we are gone; no "online" in between.
        sh.pump(&mut st);
        sh.hand_offline(&mut st);
    } else {
        sh.hand_control(
            &mut st,
            &sh.topics.status,
            QoS::AtLeastOnce,
            true,
            STATUS_ONLINE.into(),
            Kind::Control,
        );
        if sh.room.is_some() {
            // Clean sessions: subscribe again on every connect.
            if let Err(e) = sh
                .client
                .try_subscribe(sh.topics.feedback.as_str(), QoS::AtLeastOnce)
            {
                log::warn!("mqtt: cannot subscribe to {}: {e}", sh.topics.feedback);
            }
        }
        for (topic, payload) in &sh.topics.discovery {
            sh.hand_control(
                &mut st,
                topic,
                QoS::AtLeastOnce,
                true,
                payload.clone(),
                Kind::Control,
            );
        }
        sh.pump(&mut st);
    }
    drop(st);
    sh.cond.notify_all();
    true
}

pub(super) fn on_written(sh: &Shared, pkid: u16) {
    let mut st = sh.lock();
    apply_written(&mut st, pkid);
}

pub(super) fn apply_written(st: &mut State, pkid: u16) {
    let Some(i) = st.handed.iter().position(|h| h.pkid.is_none()) else {
        debug!("mqtt: write of pkid {pkid} not matched to a queued message");
        return;
    };
    if pkid == 0 {
        // QoS 0 (stats): nothing comes back.
        st.handed.remove(i);
        return;
    }
    st.handed[i].pkid = Some(pkid);
    if matches!(st.handed[i].kind, Kind::Event(_)) {
        st.stats.sent += 1;
    }
}

pub(super) fn on_puback(sh: &Shared, pkid: u16) {
    let mut st = sh.lock();
    if apply_puback(&mut st, pkid) {
        sh.pump(&mut st);
    }
    drop(st);
    sh.cond.notify_all();
}

/// Returns true when an event left the window (room to hand over the next one).
pub(super) fn apply_puback(st: &mut State, pkid: u16) -> bool {
    // rumqttc never reuses a pkid before its PubAck (it holds a colliding publish back),
    // so the oldest entry with this pkid is the one acknowledged.
    let Some(i) = st.handed.iter().position(|h| h.pkid == Some(pkid)) else {
        debug!("mqtt: PubAck for unknown pkid {pkid}");
        return false;
    };
    match st.handed.remove(i).map(|h| h.kind) {
        Some(Kind::Event(_)) => {
            st.events_in_flight -= 1;
            st.stats.published += 1;
            // The broker accepts events again: earlier closes were not about one event.
            st.suspect = None;
            true
        }
        Some(Kind::Offline) => {
            st.offline_acked = true;
            false
        }
        _ => false,
    }
}

/// Connection lost or connect failed. Returns false when the thread should stop.
pub(super) fn on_error(
    sh: &Shared,
    conn: &mut Connection,
    e: &ConnectionError,
    failure: &Failure,
) -> bool {
    let mut st = sh.lock();
    let was_connected = st.connected;
    st.connected = false;
    // `readb` decodes a batch of packets into `state.events` and may fail part-way; rumqttc
    // keeps those events and `select` returns them *after the next ConnAck*. Apply them now,
    // while the packet ids still refer to this connection: the PubAcks among them are real
    // acknowledgements (fewer duplicates), and stale ones must not be matched against the
    // packet ids of the next connection.
    for ev in std::mem::take(&mut conn.eventloop.state.events) {
        match ev {
            Event::Outgoing(Outgoing::Publish(pkid)) => apply_written(&mut st, pkid),
            Event::Incoming(Packet::PubAck(ack)) => {
                apply_puback(&mut st, ack.pkid);
            }
            _ => {}
        }
    }
    // `MqttState::clean` leaves a publish held back on a packet-id collision in place; with
    // a clean session its PubAck never comes and rumqttc would stop taking requests. It is
    // still in `handed` (never reported written), so it is requeued below.
    conn.eventloop.state.collision = None;
    // `poll` already ran `clean()` on a lost connection; running it again under our lock
    // also catches requests a publisher pushed into the channel since then. Then drop
    // rumqttc's copy: everything in it is in `handed`, which we requeue ourselves.
    conn.eventloop.clean();
    conn.eventloop.pending.clear();
    let closed = Close::of(e);
    let unacked = apply_disconnect(&mut st, closed);
    let msg = e.to_string();
    st.stats.last_error = Some(msg.clone());
    if let Some(r) = &failure.recovered {
        log_recovery(sh, &mut st, r);
    }
    // A broker that refuses a publish may just close the connection (MQTT 3.1.1 has no
    // negative PubAck): say so once per outage, not once per event or per flap. A
    // connection we gave up on (no ping answer) is a stalled broker, not a refusal.
    let unacked_note = if closed == Close::Stalled && unacked > 0 && !st.unacked_close_logged {
        st.unacked_close_logged = true;
        format!(
            "; the broker stopped answering (our keep-alive timed out), {unacked} event(s) \
             written but not acknowledged count as failed and are re-sent"
        )
    } else if unacked > 0 && !st.unacked_close_logged {
        st.unacked_close_logged = true;
        format!(
            "; {unacked} event(s) written but not acknowledged count as failed and are re-sent \
             (a broker that closes the connection after every attempt is refusing them, e.g. \
             over its max_packet_size)"
        )
    } else {
        String::new()
    };
    if st.stop {
        debug!(
            "mqtt: connection to {} ended while stopping: {msg}",
            sh.broker
        );
    } else if failure.outage_started {
        warn!(
            "mqtt: {} {}: {msg}; holding up to {} events and retrying{unacked_note} (logged once \
             per outage)",
            sh.broker,
            if was_connected {
                "connection lost"
            } else {
                "unreachable"
            },
            sh.offline_queue
        );
    } else if !unacked_note.is_empty() {
        warn!(
            "mqtt: {} {}: {msg}{unacked_note} (logged once per outage)",
            sh.broker,
            match closed {
                Close::ByBroker => "closed the connection",
                Close::Stalled => "stopped answering",
            }
        );
    } else {
        debug!(
            "mqtt: {} {}: {msg}; next attempt in {:?}",
            sh.broker,
            if was_connected {
                "dropped the connection again"
            } else {
                "still unreachable"
            },
            failure.wait
        );
    }
    let keep_going = !st.stop;
    drop(st);
    sh.cond.notify_all();
    keep_going
}

/// Who ended a connection, as far as the client can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Close {
    /// The broker closed or reset it (or it could not be opened): what a broker that
    /// refuses a publish does, having no negative acknowledgement in MQTT 3.1.1.
    ByBroker,
    /// We gave up on it: no answer to our ping within the keep-alive, a write or connect
    /// that timed out. The broker stalled; it refused nothing.
    Stalled,
}

impl Close {
    pub(super) fn of(e: &ConnectionError) -> Self {
        use rumqttc::StateError;
        match e {
            ConnectionError::MqttState(
                StateError::AwaitPingResp | StateError::CollisionTimeout,
            )
            | ConnectionError::NetworkTimeout
            | ConnectionError::FlushTimeout => Close::Stalled,
            ConnectionError::Io(io) | ConnectionError::MqttState(StateError::Io(io))
                if io.kind() == std::io::ErrorKind::TimedOut =>
            {
                Close::Stalled
            }
            _ => Close::ByBroker,
        }
    }
}

/// The connection is gone: events written but never acknowledged count as failed, and
/// every event handed to rumqttc goes back to the front of the queue in order, to be
/// re-sent after the next ConnAck. An event that was the oldest unacknowledged one at
/// [`MAX_CLOSES_UNACKED`] closes *by the broker* in a row is dropped instead (the broker
/// refuses it and closes; MQTT 3.1.1 has no other way to say so); a connection that
/// stalled does not count towards that (a broker that stopped reading refused nothing:
/// its keep-alive timeouts once dropped an event as `mqtt_refused`). Returns how many
/// failed.
pub(super) fn apply_disconnect(st: &mut State, closed: Close) -> u64 {
    let handed = std::mem::take(&mut st.handed);
    let unacked = handed
        .iter()
        .filter(|h| h.pkid.is_some() && matches!(h.kind, Kind::Event(_)))
        .count() as u64;
    st.stats.failed += unacked;
    let oldest_unacked = handed.iter().find_map(|h| match &h.kind {
        Kind::Event(p) if h.pkid.is_some() => Some(p.clone()),
        _ => None,
    });
    let mut refused = None;
    if let Some(p) = oldest_unacked.filter(|_| closed == Close::ByBroker) {
        let closes = match &st.suspect {
            Some((s, n)) if *s == p => n + 1,
            _ => 1,
        };
        if closes >= MAX_CLOSES_UNACKED {
            st.suspect = None;
            refused = Some(p);
        } else {
            st.suspect = Some((p, closes));
        }
    }
    for h in handed.into_iter().rev() {
        if let Kind::Event(p) = h.kind {
            if refused.as_ref() == Some(&p) {
                st.stats.drops.add(DropReason::MqttRefused, 1);
                warn!(
                    "mqtt: the broker closed the connection {MAX_CLOSES_UNACKED} times in a row \
                     with an event of {} bytes written and unacknowledged: dropped it so the \
                     events behind it are delivered (over the broker's max_packet_size? \
                     counted in mqtt_refused)",
                    p.len()
                );
                continue;
            }
            st.waiting.push_front(p);
        }
    }
    st.events_in_flight = 0;
    unacked
}
