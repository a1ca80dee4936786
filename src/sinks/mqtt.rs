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
//! `dropped_queue_full`.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use log::{debug, info, warn};
use rumqttc::{
    Client, Connection, ConnectionError, Event, LastWill, MqttOptions, Outgoing, Packet, QoS,
    TlsConfiguration, Transport,
};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::config::FieldError;
use crate::reconnect::{Backoff, BackoffPolicy};

/// Closes in a row with the same event oldest unacknowledged before it is dropped.
const MAX_CLOSES_UNACKED: u32 = 3;

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
/// How long a connection must stay up to count as healthy. Only then does the backoff
/// start again from `reconnect_min_ms` and the outage end: a broker that accepts us and
/// then drops the connection (a publish it refuses, a proxy, a second client with our
/// id) would otherwise be reconnected to every `reconnect_min_ms`, with a WARN each time.
const HEALTHY_AFTER: Duration = Duration::from_secs(5);

const STATUS_ONLINE: &str = "online";
const STATUS_OFFLINE: &str = "offline";

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MqttConfig {
    pub enabled: bool,
    pub host: String,
    /// 1883 plain, 8883 is the usual TLS port.
    pub port: u16,
    /// None: the host name. Anything outside `[A-Za-z0-9_-]` becomes `_`.
    pub device_id: Option<String>,
    pub topic_prefix: String,
    /// None: `sarcasmd-<device_id>`.
    pub client_id: Option<String>,
    /// 0 disables MQTT keep-alive (a dead broker is then only noticed on write).
    pub keep_alive_s: u16,
    /// Events held while the broker is unreachable (and awaiting PubAck while reachable).
    pub offline_queue: usize,
    /// How often the daemon calls [`MqttSink::publish_stats`]; 0 = only at shutdown. The
    /// sink does not schedule stats itself: see [`MqttConfig::stats_interval`].
    pub stats_interval_s: u32,
    pub username: Option<String>,
    pub password: Option<String>,
    /// Alternative to `password` (e.g. a systemd credential); trailing newlines stripped.
    pub password_file: Option<PathBuf>,
    pub tls: Option<MqttTlsConfig>,
    pub ha_discovery: bool,
    pub discovery_prefix: String,
    pub reconnect_min_ms: u32,
    pub reconnect_max_ms: u32,
}

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MqttTlsConfig {
    /// PEM file with the CA certificate(s) the broker's certificate must chain to.
    pub ca_file: PathBuf,
    /// PEM client certificate chain for mutual TLS; needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) for `client_cert`.
    pub client_key: Option<PathBuf>,
}

impl Default for MqttConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            host: "127.0.0.1".into(),
            port: 1883,
            device_id: None,
            topic_prefix: "sarcasmd".into(),
            client_id: None,
            keep_alive_s: 30,
            offline_queue: 1000,
            stats_interval_s: 30,
            username: None,
            password: None,
            password_file: None,
            tls: None,
            ha_discovery: false,
            discovery_prefix: "homeassistant".into(),
            reconnect_min_ms: 500,
            reconnect_max_ms: 30_000,
        }
    }
}

impl MqttConfig {
    pub fn validate(&self) -> Result<(), FieldError> {
        if self.host.trim().is_empty() {
            return Err(FieldError::new("mqtt.host", "must not be empty"));
        }
        if self.port == 0 {
            return Err(FieldError::new(
                "mqtt.port",
                "must be within 1..=65535 (1883 plain, 8883 TLS)",
            ));
        }
        check_topic_prefix("mqtt.topic_prefix", &self.topic_prefix)?;
        if self.ha_discovery {
            check_topic_prefix("mqtt.discovery_prefix", &self.discovery_prefix)?;
        }
        if self.device_id().is_empty() {
            return Err(FieldError::new(
                "mqtt.device_id",
                "is empty after keeping only [A-Za-z0-9_-]; set device_id explicitly",
            ));
        }
        if self.device_id().len() > 64 {
            return Err(FieldError::new(
                "mqtt.device_id",
                "must be at most 64 characters",
            ));
        }
        if let Some(id) = &self.client_id {
            if id.trim().is_empty() || id.len() > 128 {
                return Err(FieldError::new(
                    "mqtt.client_id",
                    "must be 1..=128 characters (omit it for sarcasmd-<device_id>)",
                ));
            }
        }
        if self.offline_queue == 0 || self.offline_queue > 1_000_000 {
            return Err(FieldError::new(
                "mqtt.offline_queue",
                "must be within 1..=1000000",
            ));
        }
        if self.password.is_some() && self.password_file.is_some() {
            return Err(FieldError::new(
                "mqtt.password_file",
                "set either password or password_file, not both",
            ));
        }
        match &self.username {
            Some(u) if u.is_empty() => {
                return Err(FieldError::new(
                    "mqtt.username",
                    "must not be empty (omit it to connect anonymously)",
                ))
            }
            None if self.password.is_some() || self.password_file.is_some() => {
                return Err(FieldError::new(
                    "mqtt.username",
                    "is required when a password or password_file is set",
                ))
            }
            _ => {}
        }
        if let Some(tls) = &self.tls {
            if tls.ca_file.as_os_str().is_empty() {
                return Err(FieldError::new("mqtt.tls.ca_file", "must not be empty"));
            }
            match (&tls.client_cert, &tls.client_key) {
                (Some(_), None) => {
                    return Err(FieldError::new(
                        "mqtt.tls.client_key",
                        "is required when client_cert is set",
                    ))
                }
                (None, Some(_)) => {
                    return Err(FieldError::new(
                        "mqtt.tls.client_cert",
                        "is required when client_key is set",
                    ))
                }
                _ => {}
            }
        }
        if self.reconnect_min_ms < 10 {
            return Err(FieldError::new(
                "mqtt.reconnect_min_ms",
                "must be at least 10 (lower would spin on a dead broker)",
            ));
        }
        if self.reconnect_max_ms > 3_600_000 {
            return Err(FieldError::new(
                "mqtt.reconnect_max_ms",
                "must be at most 3600000 (1 h)",
            ));
        }
        if self.reconnect_min_ms > self.reconnect_max_ms {
            return Err(FieldError::new(
                "mqtt.reconnect_min_ms",
                "must not exceed reconnect_max_ms",
            ));
        }
        Ok(())
    }

    /// The configured device id, or the host name, sanitised to `[A-Za-z0-9_-]`.
    pub fn device_id(&self) -> String {
        match &self.device_id {
            Some(id) => sanitize_device_id(id),
            None => sanitize_device_id(&hostname()),
        }
    }

    /// `<prefix>/<device>/<leaf>`.
    pub fn topic(&self, leaf: &str) -> String {
        format!("{}/{}/{}", self.topic_prefix, self.device_id(), leaf)
    }

    pub fn client_id(&self) -> String {
        self.client_id
            .clone()
            .unwrap_or_else(|| format!("sarcasmd-{}", self.device_id()))
    }

    /// How often the daemon should call `publish_stats`; None = only at shutdown.
    pub fn stats_interval(&self) -> Option<Duration> {
        (self.stats_interval_s > 0).then(|| Duration::from_secs(self.stats_interval_s.into()))
    }
}

/// MQTT's limit on a topic name (a UTF-8 string with a 16-bit length, MQTT 3.1.1 1.5.3).
pub const MAX_TOPIC_BYTES: usize = 65_535;
/// What the daemon appends to a prefix at most: `/` + device id (<= 64) + `/` + the
/// longest leaf or discovery path it publishes.
const TOPIC_SUFFIX_RESERVE_BYTES: usize = 256;

fn check_topic_prefix(field: &str, p: &str) -> Result<(), FieldError> {
    if p.is_empty() {
        return Err(FieldError::new(field, "must not be empty"));
    }
    // Brokers keep `$` topics for themselves ($SYS): a client's publish there is dropped
    // or refused, and the daemon would count events as sent that nobody can receive.
    if p.starts_with('$') {
        return Err(FieldError::new(
            field,
            "must not start with '$' (topics starting with '$' belong to the broker, e.g. $SYS)",
        ));
    }
    if p.len() > MAX_TOPIC_BYTES - TOPIC_SUFFIX_RESERVE_BYTES {
        return Err(FieldError::new(
            field,
            format!(
                "is {} bytes; with the device id and topic names after it, a topic would pass MQTT's \
                 limit of {MAX_TOPIC_BYTES} bytes",
                p.len()
            ),
        ));
    }
    if p.contains(['+', '#']) {
        return Err(FieldError::new(
            field,
            "must not contain MQTT wildcards '+' or '#'",
        ));
    }
    if p.starts_with('/') || p.ends_with('/') || p.contains("//") {
        return Err(FieldError::new(
            field,
            "must not start or end with '/' or contain an empty level ('//')",
        ));
    }
    if p.contains('\0') {
        return Err(FieldError::new(field, "must not contain NUL"));
    }
    Ok(())
}

/// Every character outside `[A-Za-z0-9_-]` becomes `_` (so `pi.local` -> `pi_local`),
/// keeping ids distinct and usable in topics and HA unique ids. Surrounding whitespace is
/// trimmed; an id made only of replaced characters sanitises to empty.
pub fn sanitize_device_id(raw: &str) -> String {
    let s: String = raw
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.chars().all(|c| c == '_') {
        String::new()
    } else {
        s
    }
}

/// gethostname(2) first (it is what the kernel uses, also in containers), then
/// /etc/hostname.
fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its full length; gethostname NUL-terminates or
    // truncates within it, and we stop at the first NUL.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        let name = String::from_utf8_lossy(&buf[..end]).trim().to_string();
        if !name.is_empty() {
            return name;
        }
    }
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

#[derive(Debug, Error)]
pub enum MqttError {
    #[error("invalid MQTT configuration: `{}`: {}", .0.field, .0.reason)]
    Config(FieldError),
    #[error(
        "mqtt.password_file: cannot read {path}: {source} (check the path and that the daemon \
         user may read it, e.g. via systemd LoadCredential=)"
    )]
    PasswordFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("mqtt.password_file: {path} is empty; put the broker password in it")]
    EmptyPasswordFile { path: PathBuf },
    #[error(
        "mqtt.tls.ca_file: cannot load CA certificates from {path}: {reason} (it must be a \
         readable PEM file with at least one CERTIFICATE block)"
    )]
    CaFile { path: PathBuf, reason: String },
    #[error(
        "mqtt.tls.client_cert: cannot load the client certificate from {path}: {reason} (it must \
         be a readable PEM file with the CERTIFICATE chain)"
    )]
    ClientCert { path: PathBuf, reason: String },
    #[error(
        "mqtt.tls.client_key: cannot load the private key from {path}: {reason} (it must be a \
         readable PEM file with one PKCS#8, PKCS#1 or SEC1 private key)"
    )]
    ClientKey { path: PathBuf, reason: String },
    #[error(
        "mqtt.tls: TLS setup failed: {0} (check that client_cert and client_key belong together)"
    )]
    Tls(String),
    #[error("cannot start the MQTT client thread: {0}")]
    Thread(std::io::Error),
}

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
    /// Events dropped because `offline_queue` events were already held.
    pub dropped_queue_full: u64,
    /// Event payloads over [`MAX_PAYLOAD_BYTES`], dropped without being queued.
    pub dropped_too_large: u64,
    /// Events dropped after the broker closed the connection [`MAX_CLOSES_UNACKED`]
    /// times in a row while each was the oldest unacknowledged one (a payload over the
    /// broker's own `max_packet_size`, say): re-sending it for ever would block every
    /// event queued behind it.
    pub dropped_refused: u64,
    /// Events held now: waiting for a connection or for their PubAck.
    pub queued: u64,
    pub last_error: Option<String>,
}

/// What a message handed to rumqttc was, so its PubAck can be attributed.
#[derive(Debug)]
enum Kind {
    Event(Vec<u8>),
    /// Online status and HA discovery: re-sent after every ConnAck anyway.
    Control,
    /// The retained "offline" of a graceful shutdown.
    Offline,
    /// QoS 0: done once written.
    Stats,
}

#[derive(Debug)]
struct Handed {
    kind: Kind,
    /// Set when rumqttc reports writing it (`Outgoing::Publish(pkid)`); 0 for QoS 0.
    pkid: Option<u16>,
}

#[derive(Default)]
struct State {
    connected: bool,
    /// `shutdown` started: no "online"/discovery after a ConnAck, "offline" instead.
    shutting_down: bool,
    /// The client thread must exit at the next chance instead of reconnecting.
    stop: bool,
    offline_acked: bool,
    /// Events not yet handed to rumqttc, oldest first.
    waiting: VecDeque<Vec<u8>>,
    /// Messages handed to rumqttc in hand-off order. rumqttc writes requests from its
    /// single channel in order (we keep `pending` empty), so `Outgoing::Publish` events
    /// arrive in this order too.
    handed: VecDeque<Handed>,
    events_in_flight: usize,
    stats: MqttStats,
    /// A close with unacknowledged events was logged in the current outage.
    unacked_close_logged: bool,
    /// The oldest event that was unacknowledged at a close, and at how many closes in a
    /// row it was; reset when any event is acknowledged.
    suspect: Option<(Vec<u8>, u32)>,
    overflow_logged: bool,
    too_large_logged: bool,
}

impl State {
    fn held(&self) -> usize {
        self.waiting.len() + self.events_in_flight
    }
}

struct Topics {
    event: String,
    stats: String,
    status: String,
    /// (topic, retained JSON) for HA discovery; empty when disabled.
    discovery: Vec<(String, Vec<u8>)>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled on PubAck, connect state changes and stop.
    cond: Condvar,
    client: Client,
    topics: Topics,
    offline_queue: usize,
    window: usize,
    broker: String,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere must not turn every later publish into a panic.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands queued events to rumqttc while connected and the window has room.
    /// Non-blocking: `try_publish` into a channel sized for the window.
    fn pump(&self, st: &mut State) {
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
    fn hand_control(
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

    fn snapshot(&self, st: &State) -> MqttStats {
        let mut s = st.stats.clone();
        s.connected = st.connected;
        s.queued = st.held() as u64;
        s
    }
}

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
        cfg.validate().map_err(MqttError::Config)?;
        let device = cfg.device_id();
        let topics = Topics {
            event: cfg.topic("event"),
            stats: cfg.topic("stats"),
            status: cfg.topic("status"),
            discovery: if cfg.ha_discovery {
                discovery_messages(cfg)
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
    /// the module doc for the exact policy) and counted in `dropped_queue_full`.
    pub fn publish_event(&self, payload_json: &[u8]) {
        let sh = &self.shared;
        let mut st = sh.lock();
        if payload_json.len() > MAX_PAYLOAD_BYTES {
            st.stats.dropped_too_large += 1;
            if !st.too_large_logged {
                st.too_large_logged = true;
                warn!(
                    "mqtt: dropping a {} byte event (limit {MAX_PAYLOAD_BYTES}); further ones are \
                     only counted in dropped_too_large",
                    payload_json.len()
                );
            }
            return;
        }
        if st.held() >= sh.offline_queue {
            st.stats.dropped_queue_full += 1;
            if !st.overflow_logged {
                st.overflow_logged = true;
                warn!(
                    "mqtt: offline queue full ({} events): dropping the oldest; further drops are \
                     only counted in dropped_queue_full",
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

    /// Graceful stop: publishes the retained "offline" status, waits up to `timeout` until
    /// every held event and that status are acknowledged, then disconnects. Returns after
    /// about `timeout` at most (plus a short grace for the client thread), even if the
    /// broker is unreachable. Events still held then are lost (counted in `queued`).
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
            let queued = sh.hand_control(
                &mut st,
                &sh.topics.status,
                QoS::AtLeastOnce,
                true,
                STATUS_OFFLINE.into(),
                Kind::Offline,
            );
            // Without it we could only wait for the timeout; nothing to wait for then.
            st.offline_acked = !queued;
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

/// Reconnect pacing and outage bookkeeping, kept free of I/O and clock reads so the
/// sequence of waits can be tested without a broker.
///
/// An outage starts at the first failure after a healthy connection (or at start) and
/// ends only once a connection has stayed up for [`HEALTHY_AFTER`]. Connections that
/// break sooner are flaps within the same outage: the backoff keeps doubling up to the
/// maximum and nothing new is logged.
#[derive(Debug)]
struct Pacer {
    /// Gives the wait after each failure; reset only by a healthy connection.
    backoff: Backoff,
    /// ConnAck time of the current connection; None while disconnected.
    up_since: Option<Instant>,
    outage: Option<Outage>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Outage {
    started: Instant,
    /// Connect attempts since it started, the one that ended it included.
    attempts: u64,
}

/// An outage that ended: a connection stayed up for [`HEALTHY_AFTER`].
#[derive(Debug, PartialEq)]
struct Recovery {
    /// From the first failure to the ConnAck of the connection that proved healthy.
    down: Duration,
    attempts: u64,
}

#[derive(Debug, PartialEq)]
struct Failure {
    /// How long to wait before the next connect attempt.
    wait: Duration,
    /// This failure began an outage (log it); false for a flap within one.
    outage_started: bool,
    /// The connection that broke had proved healthy and so ended an outage that no
    /// earlier event had reported yet.
    recovered: Option<Recovery>,
}

impl Pacer {
    fn new(min: Duration, max: Duration) -> Self {
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

    fn in_outage(&self) -> bool {
        self.outage.is_some()
    }

    fn connected(&mut self, now: Instant) {
        self.up_since = Some(now);
    }

    /// The open connection delivered something at `now`. Once it has been up for
    /// [`HEALTHY_AFTER`] the backoff starts again from the minimum and a running outage
    /// ends (returned, to be logged once).
    fn alive(&mut self, now: Instant) -> Option<Recovery> {
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
    fn failed(&mut self, now: Instant) -> Failure {
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
    fn retrying(&mut self) {
        if let Some(o) = &mut self.outage {
            o.attempts += 1;
        }
    }
}

/// The client thread: drives rumqttc's event loop, keeps the queue bookkeeping in step
/// with what rumqttc reports, and paces reconnects.
fn run_connection(sh: &Shared, mut conn: Connection, (min, max): (Duration, Duration)) {
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

fn log_recovery(sh: &Shared, st: &mut State, r: &Recovery) {
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
fn on_connack(sh: &Shared, in_outage: bool) -> bool {
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
        let queued = sh.hand_control(
            &mut st,
            &sh.topics.status,
            QoS::AtLeastOnce,
            true,
            STATUS_OFFLINE.into(),
            Kind::Offline,
        );
        st.offline_acked = !queued;
    } else {
        sh.hand_control(
            &mut st,
            &sh.topics.status,
            QoS::AtLeastOnce,
            true,
            STATUS_ONLINE.into(),
            Kind::Control,
        );
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

fn on_written(sh: &Shared, pkid: u16) {
    let mut st = sh.lock();
    apply_written(&mut st, pkid);
}

fn apply_written(st: &mut State, pkid: u16) {
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

fn on_puback(sh: &Shared, pkid: u16) {
    let mut st = sh.lock();
    if apply_puback(&mut st, pkid) {
        sh.pump(&mut st);
    }
    drop(st);
    sh.cond.notify_all();
}

/// Returns true when an event left the window (room to hand over the next one).
fn apply_puback(st: &mut State, pkid: u16) -> bool {
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
fn on_error(sh: &Shared, conn: &mut Connection, e: &ConnectionError, failure: &Failure) -> bool {
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
    let unacked = apply_disconnect(&mut st);
    let msg = e.to_string();
    st.stats.last_error = Some(msg.clone());
    if let Some(r) = &failure.recovered {
        log_recovery(sh, &mut st, r);
    }
    // A broker that refuses a publish may just close the connection (MQTT 3.1.1 has no
    // negative PubAck): say so once per outage, not once per event or per flap.
    let unacked_note = if unacked > 0 && !st.unacked_close_logged {
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
            "mqtt: {} closed the connection: {msg}{unacked_note} (logged once per outage)",
            sh.broker
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

/// The connection is gone: events written but never acknowledged count as failed, and
/// every event handed to rumqttc goes back to the front of the queue in order, to be
/// re-sent after the next ConnAck. An event that was the oldest unacknowledged one at
/// [`MAX_CLOSES_UNACKED`] closes in a row is dropped instead (the broker refuses it and
/// closes; MQTT 3.1.1 has no other way to say so). Returns how many failed.
fn apply_disconnect(st: &mut State) -> u64 {
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
    if let Some(p) = oldest_unacked {
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
                st.stats.dropped_refused += 1;
                warn!(
                    "mqtt: the broker closed the connection {MAX_CLOSES_UNACKED} times in a row \
                     with an event of {} bytes written and unacknowledged: dropped it so the \
                     events behind it are delivered (over the broker's max_packet_size? \
                     counted in dropped_refused)",
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

pub fn read_password_file(path: &Path) -> Result<String, MqttError> {
    let p = crate::secret_file::read(path).map_err(|source| MqttError::PasswordFile {
        path: path.to_path_buf(),
        source,
    })?;
    if p.is_empty() {
        return Err(MqttError::EmptyPasswordFile {
            path: path.to_path_buf(),
        });
    }
    Ok(p)
}

/// rustls client config with the ring provider passed explicitly (no aws-lc, no reliance on
/// a process default), trusting only the configured CA.
pub fn rustls_config(tls: &MqttTlsConfig) -> Result<rustls::ClientConfig, MqttError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    // Harmless if already installed; anything else in the process that asks rustls for
    // the default provider then gets ring too.
    let _ = rustls::crypto::ring::default_provider().install_default();

    let ca_err = |reason: String| MqttError::CaFile {
        path: tls.ca_file.clone(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    let cas = CertificateDer::pem_file_iter(&tls.ca_file)
        .map_err(|e| ca_err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| ca_err(e.to_string()))?;
    if cas.is_empty() {
        return Err(ca_err("no certificate found".into()));
    }
    for ca in cas {
        roots.add(ca).map_err(|e| ca_err(e.to_string()))?;
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| MqttError::Tls(e.to_string()))?
    .with_root_certificates(roots);

    match (&tls.client_cert, &tls.client_key) {
        (Some(cert), Some(key)) => {
            let cert_err = |reason: String| MqttError::ClientCert {
                path: cert.clone(),
                reason,
            };
            let chain = CertificateDer::pem_file_iter(cert)
                .map_err(|e| cert_err(e.to_string()))?
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| cert_err(e.to_string()))?;
            if chain.is_empty() {
                return Err(cert_err("no certificate found".into()));
            }
            let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| MqttError::ClientKey {
                path: key.clone(),
                reason: e.to_string(),
            })?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| MqttError::Tls(e.to_string()))
        }
        _ => Ok(builder.with_no_client_auth()),
    }
}

/// Home Assistant MQTT discovery configs: (topic, payload). Retained, re-sent after every
/// ConnAck so a broker that lost its retained store is repopulated.
pub fn discovery_messages(cfg: &MqttConfig) -> Vec<(String, serde_json::Value)> {
    use serde_json::json;
    let dev = cfg.device_id();
    let status = cfg.topic("status");
    let event = cfg.topic("event");
    let device = json!({
        "identifiers": [format!("sarcasmd_{dev}")],
        "name": format!("sarcasmd {dev}"),
        "manufacturer": "sarcasmd",
        "model": "sarcasmd edge daemon",
        "sw_version": env!("CARGO_PKG_VERSION"),
    });
    let binary = json!({
        "name": "Sarcasm detected",
        "unique_id": format!("{dev}_sarcasm"),
        "state_topic": event,
        "value_template": "{{ 'ON' if value_json.sarcastic else 'OFF' }}",
        "payload_on": "ON",
        "payload_off": "OFF",
        // Events are instantaneous; fall back to OFF unless another sarcastic one follows.
        "off_delay": 5,
        "availability_topic": status,
        "payload_available": STATUS_ONLINE,
        "payload_not_available": STATUS_OFFLINE,
        "device": device,
    });
    let score = json!({
        "name": "Sarcasm score",
        "unique_id": format!("{dev}_sarcasm_score"),
        "state_topic": event,
        "value_template": "{{ value_json.p_sarcastic }}",
        "state_class": "measurement",
        "availability_topic": status,
        "payload_available": STATUS_ONLINE,
        "payload_not_available": STATUS_OFFLINE,
        "device": device,
    });
    let p = &cfg.discovery_prefix;
    vec![
        (format!("{p}/binary_sensor/{dev}/sarcasm/config"), binary),
        (format!("{p}/sensor/{dev}/sarcasm_score/config"), score),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn cfg() -> MqttConfig {
        MqttConfig {
            device_id: Some("pi-kitchen".into()),
            ..MqttConfig::default()
        }
    }

    fn field(c: &MqttConfig) -> String {
        c.validate().unwrap_err().field
    }

    #[test]
    fn topic_prefixes_a_broker_would_drop_are_refused() {
        let with = |prefix: &str| MqttConfig {
            enabled: true,
            topic_prefix: prefix.into(),
            ..MqttConfig::default()
        };
        let e = with("$SYS/sarcasmd").validate().unwrap_err();
        assert_eq!(e.field, "mqtt.topic_prefix");
        assert!(e.reason.contains("'$'"), "{}", e.reason);
        let long = "a".repeat(MAX_TOPIC_BYTES);
        let e = with(&long).validate().unwrap_err();
        assert!(e.reason.contains("65535"), "{}", e.reason);
        assert!(with("site/floor-3").validate().is_ok());
        let mut c = with("sarcasmd");
        c.ha_discovery = true;
        c.discovery_prefix = "$homeassistant".into();
        assert_eq!(c.validate().unwrap_err().field, "mqtt.discovery_prefix");
    }

    #[test]
    fn defaults_are_valid_and_as_documented() {
        let c = MqttConfig::default();
        assert!(!c.enabled);
        assert_eq!((c.host.as_str(), c.port), ("127.0.0.1", 1883));
        assert_eq!(c.topic_prefix, "sarcasmd");
        assert_eq!(c.keep_alive_s, 30);
        assert_eq!(c.offline_queue, 1000);
        assert_eq!(c.stats_interval_s, 30);
        assert_eq!(c.discovery_prefix, "homeassistant");
        assert_eq!((c.reconnect_min_ms, c.reconnect_max_ms), (500, 30_000));
        assert!(!c.ha_discovery && c.tls.is_none() && c.username.is_none());
        assert_eq!(cfg().validate(), Ok(()));
    }

    #[test]
    fn empty_json_is_default_and_unknown_keys_are_rejected() {
        let c: MqttConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, MqttConfig::default());
        assert!(serde_json::from_str::<MqttConfig>(r#"{"hots":"x"}"#).is_err());
        assert!(serde_json::from_str::<MqttConfig>(r#"{"tls":{"ca_file":"/a","x":1}}"#).is_err());
        let c: MqttConfig =
            serde_json::from_str(r#"{"port":8883,"tls":{"ca_file":"/etc/ca.pem"}}"#).unwrap();
        assert_eq!(c.tls.unwrap().ca_file, PathBuf::from("/etc/ca.pem"));
    }

    #[test]
    fn validation_names_the_field() {
        let cases: Vec<(MqttConfig, &str)> = vec![
            (
                MqttConfig {
                    host: " ".into(),
                    ..cfg()
                },
                "mqtt.host",
            ),
            (MqttConfig { port: 0, ..cfg() }, "mqtt.port"),
            (
                MqttConfig {
                    topic_prefix: "a/+".into(),
                    ..cfg()
                },
                "mqtt.topic_prefix",
            ),
            (
                MqttConfig {
                    topic_prefix: "a/#".into(),
                    ..cfg()
                },
                "mqtt.topic_prefix",
            ),
            (
                MqttConfig {
                    topic_prefix: "/a".into(),
                    ..cfg()
                },
                "mqtt.topic_prefix",
            ),
            (
                MqttConfig {
                    topic_prefix: "a/".into(),
                    ..cfg()
                },
                "mqtt.topic_prefix",
            ),
            (
                MqttConfig {
                    topic_prefix: "a//b".into(),
                    ..cfg()
                },
                "mqtt.topic_prefix",
            ),
            (
                MqttConfig {
                    topic_prefix: "".into(),
                    ..cfg()
                },
                "mqtt.topic_prefix",
            ),
            (
                MqttConfig {
                    ha_discovery: true,
                    discovery_prefix: "ha/".into(),
                    ..cfg()
                },
                "mqtt.discovery_prefix",
            ),
            (
                MqttConfig {
                    device_id: Some("...".into()),
                    ..cfg()
                },
                "mqtt.device_id",
            ),
            (
                MqttConfig {
                    device_id: Some("".into()),
                    ..cfg()
                },
                "mqtt.device_id",
            ),
            (
                MqttConfig {
                    client_id: Some("".into()),
                    ..cfg()
                },
                "mqtt.client_id",
            ),
            (
                MqttConfig {
                    offline_queue: 0,
                    ..cfg()
                },
                "mqtt.offline_queue",
            ),
            (
                MqttConfig {
                    offline_queue: 1_000_001,
                    ..cfg()
                },
                "mqtt.offline_queue",
            ),
            (
                MqttConfig {
                    username: Some("u".into()),
                    password: Some("p".into()),
                    password_file: Some("/run/credentials/p".into()),
                    ..cfg()
                },
                "mqtt.password_file",
            ),
            (
                MqttConfig {
                    password: Some("p".into()),
                    ..cfg()
                },
                "mqtt.username",
            ),
            (
                MqttConfig {
                    password_file: Some("/p".into()),
                    ..cfg()
                },
                "mqtt.username",
            ),
            (
                MqttConfig {
                    username: Some("".into()),
                    ..cfg()
                },
                "mqtt.username",
            ),
            (
                MqttConfig {
                    tls: Some(MqttTlsConfig {
                        ca_file: "/ca.pem".into(),
                        client_cert: Some("/c.pem".into()),
                        client_key: None,
                    }),
                    ..cfg()
                },
                "mqtt.tls.client_key",
            ),
            (
                MqttConfig {
                    tls: Some(MqttTlsConfig {
                        ca_file: "/ca.pem".into(),
                        client_cert: None,
                        client_key: Some("/k.pem".into()),
                    }),
                    ..cfg()
                },
                "mqtt.tls.client_cert",
            ),
            (
                MqttConfig {
                    tls: Some(MqttTlsConfig {
                        ca_file: "".into(),
                        client_cert: None,
                        client_key: None,
                    }),
                    ..cfg()
                },
                "mqtt.tls.ca_file",
            ),
            (
                MqttConfig {
                    reconnect_min_ms: 5_000,
                    reconnect_max_ms: 1_000,
                    ..cfg()
                },
                "mqtt.reconnect_min_ms",
            ),
            (
                MqttConfig {
                    reconnect_min_ms: 0,
                    ..cfg()
                },
                "mqtt.reconnect_min_ms",
            ),
            (
                MqttConfig {
                    reconnect_max_ms: 4_000_000,
                    ..cfg()
                },
                "mqtt.reconnect_max_ms",
            ),
        ];
        for (c, want) in cases {
            assert_eq!(field(&c), want, "{c:?}");
        }
        // Username without password is a valid (password-less) login.
        assert_eq!(
            MqttConfig {
                username: Some("u".into()),
                ..cfg()
            }
            .validate(),
            Ok(())
        );
        // A bad discovery prefix only matters when discovery is on.
        assert_eq!(
            MqttConfig {
                discovery_prefix: "ha/".into(),
                ..cfg()
            }
            .validate(),
            Ok(())
        );
    }

    #[test]
    fn topics_and_ids() {
        let c = cfg();
        assert_eq!(c.topic("event"), "sarcasmd/pi-kitchen/event");
        assert_eq!(c.topic("status"), "sarcasmd/pi-kitchen/status");
        assert_eq!(c.client_id(), "sarcasmd-pi-kitchen");
        let c = MqttConfig {
            topic_prefix: "home/office".into(),
            device_id: Some("pi.local".into()),
            client_id: Some("custom".into()),
            ..cfg()
        };
        assert_eq!(c.topic("stats"), "home/office/pi_local/stats");
        assert_eq!(c.client_id(), "custom");
        assert_eq!(cfg().stats_interval(), Some(Duration::from_secs(30)));
        assert_eq!(
            MqttConfig {
                stats_interval_s: 0,
                ..cfg()
            }
            .stats_interval(),
            None
        );
    }

    #[test]
    fn device_id_sanitising() {
        assert_eq!(sanitize_device_id("pi-kitchen_2"), "pi-kitchen_2");
        assert_eq!(sanitize_device_id(" pi.local \n"), "pi_local");
        assert_eq!(sanitize_device_id("a/b+c#d é"), "a_b_c_d__");
        assert_eq!(sanitize_device_id("..."), "");
        assert_eq!(sanitize_device_id(""), "");
        // The host name fallback is sanitised too and never contains topic separators.
        let host = MqttConfig::default().device_id();
        assert!(host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'));
    }

    fn held_event(st: &mut State, payload: &[u8]) {
        st.handed.push_back(Handed {
            kind: Kind::Event(payload.to_vec()),
            pkid: None,
        });
        st.events_in_flight += 1;
    }

    #[test]
    fn published_means_acknowledged_and_a_close_before_the_ack_is_a_failure() {
        let mut st = State::default();
        held_event(&mut st, b"a");
        held_event(&mut st, b"b");
        held_event(&mut st, b"c");
        apply_written(&mut st, 1);
        apply_written(&mut st, 2);
        assert_eq!((st.stats.sent, st.stats.published), (2, 0), "written only");
        apply_puback(&mut st, 1);
        assert_eq!(st.stats.published, 1);
        // The broker closes the connection: "b" was written but never acknowledged, "c"
        // was never written. Both go back to the queue, only "b" is a failure.
        assert_eq!(apply_disconnect(&mut st), 1);
        assert_eq!((st.stats.published, st.stats.failed), (1, 1));
        assert_eq!(st.waiting, [b"b".to_vec(), b"c".to_vec()]);
        assert_eq!((st.events_in_flight, st.handed.len()), (0, 0));
        // Re-sent on the next connection and acknowledged there.
        for p in std::mem::take(&mut st.waiting) {
            held_event(&mut st, &p);
        }
        apply_written(&mut st, 1);
        apply_written(&mut st, 2);
        apply_puback(&mut st, 2);
        apply_puback(&mut st, 1);
        assert_eq!(
            (st.stats.sent, st.stats.published, st.stats.failed),
            (4, 3, 1)
        );
        assert_eq!(apply_disconnect(&mut st), 0);
    }

    #[test]
    fn an_event_the_broker_keeps_closing_on_is_dropped_and_the_rest_go_on() {
        let mut st = State::default();
        for close in 1..=MAX_CLOSES_UNACKED {
            for p in std::mem::take(&mut st.waiting) {
                held_event(&mut st, &p);
            }
            if close == 1 {
                held_event(&mut st, b"big");
                held_event(&mut st, b"next");
            }
            apply_written(&mut st, 1);
            apply_written(&mut st, 2);
            apply_disconnect(&mut st);
        }
        assert_eq!(st.stats.dropped_refused, 1);
        assert_eq!(st.waiting, [b"next".to_vec()]);
        // An acknowledgement in between resets the count: a flaky network is not a refusal.
        let mut st = State::default();
        for round in 0..(2 * MAX_CLOSES_UNACKED) {
            held_event(&mut st, b"x");
            apply_written(&mut st, 1);
            if round % 2 == 1 {
                apply_puback(&mut st, 1);
                continue;
            }
            apply_disconnect(&mut st);
            st.waiting.clear();
        }
        assert_eq!(st.stats.dropped_refused, 0);
    }

    #[test]
    fn flaps_keep_backing_off_and_one_outage_is_reported_once() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut p = Pacer::new(ms(500), ms(30_000));
        p.connected(t0);
        assert_eq!(p.alive(t0 + ms(10)), None);
        // The broker accepts each connect and drops it 100 ms later.
        let mut now = t0 + ms(100);
        let mut waits = Vec::new();
        let mut started = Vec::new();
        for _ in 0..9 {
            let f = p.failed(now);
            assert_eq!(f.recovered, None);
            waits.push(f.wait.as_millis());
            started.push(f.outage_started);
            now += f.wait;
            p.retrying();
            p.connected(now);
            assert_eq!(p.alive(now + ms(50)), None, "a flap is no recovery");
            now += ms(100);
        }
        assert_eq!(
            waits,
            [500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]
        );
        assert_eq!(
            started,
            [true, false, false, false, false, false, false, false, false]
        );
        // The 9th reconnect stays up: the outage ends once, with its length and attempts.
        let up = now - ms(100);
        let r = p.alive(up + HEALTHY_AFTER).expect("recovered");
        assert_eq!(r.attempts, 9);
        assert_eq!(r.down, up - (t0 + ms(100)));
        assert_eq!(p.alive(up + HEALTHY_AFTER + ms(1)), None, "reported once");
        // The next failure is a new outage, backed off from the minimum again.
        let f = p.failed(up + HEALTHY_AFTER * 2);
        assert_eq!(
            (f.wait, f.outage_started, f.recovered),
            (ms(500), true, None)
        );
    }

    #[test]
    fn a_healthy_connection_that_breaks_before_any_event_still_ends_the_outage() {
        let ms = Duration::from_millis;
        let t0 = Instant::now();
        let mut p = Pacer::new(ms(100), ms(1_000));
        // Broker down at start: connect attempts fail.
        assert!(p.failed(t0).outage_started);
        p.retrying();
        assert_eq!(p.failed(t0 + ms(100)).wait, ms(200));
        p.retrying();
        p.connected(t0 + ms(300));
        // Up long enough, but nothing arrived until it broke: recovery and a new outage.
        let f = p.failed(t0 + ms(300) + HEALTHY_AFTER + ms(1));
        assert_eq!(
            f.recovered,
            Some(Recovery {
                down: ms(300),
                attempts: 2
            })
        );
        assert!(f.outage_started);
        assert_eq!(f.wait, ms(100));
    }

    #[test]
    fn ha_discovery_payloads() {
        let c = MqttConfig {
            ha_discovery: true,
            discovery_prefix: "ha".into(),
            ..cfg()
        };
        let msgs = discovery_messages(&c);
        assert_eq!(msgs.len(), 2);
        let (t, b) = &msgs[0];
        assert_eq!(t, "ha/binary_sensor/pi-kitchen/sarcasm/config");
        assert_eq!(b["name"], "Sarcasm detected");
        assert_eq!(b["state_topic"], "sarcasmd/pi-kitchen/event");
        assert_eq!(
            b["value_template"],
            "{{ 'ON' if value_json.sarcastic else 'OFF' }}"
        );
        assert_eq!(
            (b["payload_on"].as_str(), b["payload_off"].as_str()),
            (Some("ON"), Some("OFF"))
        );
        assert_eq!(b["availability_topic"], "sarcasmd/pi-kitchen/status");
        assert_eq!(b["payload_available"], "online");
        assert_eq!(b["payload_not_available"], "offline");
        assert_eq!(b["unique_id"], "pi-kitchen_sarcasm");
        assert_eq!(b["off_delay"], 5);
        let d = &b["device"];
        assert_eq!(d["identifiers"], serde_json::json!(["sarcasmd_pi-kitchen"]));
        assert_eq!(d["name"], "sarcasmd pi-kitchen");
        assert_eq!(d["sw_version"], env!("CARGO_PKG_VERSION"));
        assert!(d["manufacturer"].is_string() && d["model"].is_string());

        let (t, s) = &msgs[1];
        assert_eq!(t, "ha/sensor/pi-kitchen/sarcasm_score/config");
        assert_eq!(s["name"], "Sarcasm score");
        assert_eq!(s["value_template"], "{{ value_json.p_sarcastic }}");
        assert_eq!(s["unique_id"], "pi-kitchen_sarcasm_score");
        assert_eq!(s["state_class"], "measurement");
        assert_eq!(s["state_topic"], b["state_topic"]);
        assert_eq!(s["availability_topic"], b["availability_topic"]);
        assert_eq!(s["device"], b["device"]);
        // Round-trips through bytes as sent.
        let bytes = serde_json::to_vec(s).unwrap();
        let back: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(&back, s);
    }

    #[test]
    fn bad_local_files_are_errors_that_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let c = MqttConfig {
            username: Some("u".into()),
            password_file: Some(missing.clone()),
            ..cfg()
        };
        let e = MqttSink::start(&c)
            .err()
            .expect("missing password file must fail");
        assert!(matches!(e, MqttError::PasswordFile { .. }), "{e}");
        assert!(
            e.to_string().contains(&missing.display().to_string()),
            "{e}"
        );

        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let c = MqttConfig {
            password_file: Some(empty),
            ..c
        };
        assert!(matches!(
            MqttSink::start(&c),
            Err(MqttError::EmptyPasswordFile { .. })
        ));

        let pw = dir.path().join("pw");
        std::fs::write(&pw, "s3cret\r\n").unwrap();
        assert_eq!(read_password_file(&pw).unwrap(), "s3cret");

        let not_pem = dir.path().join("ca.pem");
        std::fs::write(&not_pem, "hello").unwrap();
        let c = MqttConfig {
            tls: Some(MqttTlsConfig {
                ca_file: not_pem,
                client_cert: None,
                client_key: None,
            }),
            ..cfg()
        };
        let e = MqttSink::start(&c)
            .err()
            .expect("CA without certificates must fail");
        assert!(matches!(e, MqttError::CaFile { .. }), "{e}");
        let c = MqttConfig {
            tls: Some(MqttTlsConfig {
                ca_file: missing,
                client_cert: None,
                client_key: None,
            }),
            ..cfg()
        };
        assert!(matches!(MqttSink::start(&c), Err(MqttError::CaFile { .. })));

        let e = MqttSink::start(&MqttConfig { port: 0, ..cfg() })
            .err()
            .unwrap();
        assert!(e.to_string().contains("mqtt.port"), "{e}");
    }
}
