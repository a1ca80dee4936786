//! The `[mqtt]` section: broker, identity, topics (checked against the MQTT spec), TLS
//! files and the password file, parsed, validated, and turned into client options.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::error::MqttError;
use crate::common::validate::{FieldError, Problems, Validate};

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

impl Validate for MqttConfig {
    fn check(&self, problems: &mut Problems) {
        if self.host.trim().is_empty() {
            problems.push("mqtt.host", "must not be empty");
        }
        if self.port == 0 {
            problems.push(
                "mqtt.port",
                "must be within 1..=65535 (1883 plain, 8883 TLS)",
            );
        }
        problems.add(check_topic_prefix("mqtt.topic_prefix", &self.topic_prefix));
        if self.ha_discovery {
            problems.add(check_topic_prefix(
                "mqtt.discovery_prefix",
                &self.discovery_prefix,
            ));
        }
        if self.device_id().is_empty() {
            problems.push(
                "mqtt.device_id",
                "is empty after keeping only [A-Za-z0-9_-]; set device_id explicitly",
            );
        }
        if self.device_id().len() > 64 {
            problems.push("mqtt.device_id", "must be at most 64 characters");
        }
        if let Some(id) = &self.client_id {
            if id.trim().is_empty() || id.len() > 128 {
                problems.push(
                    "mqtt.client_id",
                    "must be 1..=128 characters (omit it for sarcasmd-<device_id>)",
                );
            }
        }
        if self.offline_queue == 0 || self.offline_queue > 1_000_000 {
            problems.push("mqtt.offline_queue", "must be within 1..=1000000");
        }
        if self.password.is_some() && self.password_file.is_some() {
            problems.push(
                "mqtt.password_file",
                "set either password or password_file, not both",
            );
        }
        // MQTT strings carry a 16-bit length: a longer one was sent with a wrapped length
        // prefix, and the broker's refusal was logged as "unreachable".
        for (field, value) in [
            ("mqtt.username", self.username.as_deref()),
            ("mqtt.password", self.password.as_deref()),
        ] {
            if let Some(v) = value.filter(|v| v.len() > MAX_STRING_BYTES) {
                problems.push(
                    field,
                    format!(
                        "is {} bytes; MQTT allows at most {MAX_STRING_BYTES} (a 16-bit length)",
                        v.len()
                    ),
                );
            }
        }
        match &self.username {
            Some(u) if u.is_empty() => {
                problems.push(
                    "mqtt.username",
                    "must not be empty (omit it to connect anonymously)",
                );
            }
            None if self.password.is_some() || self.password_file.is_some() => {
                problems.push(
                    "mqtt.username",
                    "is required when a password or password_file is set",
                );
            }
            _ => {}
        }
        if let Some(tls) = &self.tls {
            if tls.ca_file.as_os_str().is_empty() {
                problems.push("mqtt.tls.ca_file", "must not be empty");
            }
            match (&tls.client_cert, &tls.client_key) {
                (Some(_), None) => {
                    problems.push("mqtt.tls.client_key", "is required when client_cert is set");
                }
                (None, Some(_)) => {
                    problems.push("mqtt.tls.client_cert", "is required when client_key is set");
                }
                _ => {}
            }
        }
        if self.reconnect_min_ms < 10 {
            problems.push(
                "mqtt.reconnect_min_ms",
                "must be at least 10 (lower would spin on a dead broker)",
            );
        }
        if self.reconnect_max_ms > 3_600_000 {
            problems.push("mqtt.reconnect_max_ms", "must be at most 3600000 (1 h)");
        }
        if self.reconnect_min_ms > self.reconnect_max_ms {
            problems.push("mqtt.reconnect_min_ms", "must not exceed reconnect_max_ms");
        }
    }
}

/// MQTT's limit on a topic name (a UTF-8 string with a 16-bit length, MQTT 3.1.1 1.5.3).
pub const MAX_TOPIC_BYTES: usize = 65_535;
/// MQTT's limit on any string or binary field of CONNECT: user name, password, client id.
pub const MAX_STRING_BYTES: usize = 65_535;
/// What the daemon appends to a prefix at most: `/` + device id (<= 64) + `/` + the
/// longest leaf or discovery path it publishes.
pub(super) const TOPIC_SUFFIX_RESERVE_BYTES: usize = 256;

pub(super) fn check_topic_prefix(field: &str, p: &str) -> Result<(), FieldError> {
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
pub(super) fn hostname() -> String {
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

pub fn read_password_file(path: &Path) -> Result<String, MqttError> {
    let p = crate::common::secret_file::read(path).map_err(|source| MqttError::PasswordFile {
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
