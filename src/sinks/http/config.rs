//! The `[http]` section: bind address, token, allowed hosts, limits; checked before
//! anything listens.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::error::HttpError;
use crate::common::validate::{FieldError, Problems, Validate};

const MIN_TOKEN_LEN: usize = 16;
/// Upper bound of `http.max_connections`: with the unit's `LimitNOFILE=1024` this leaves
/// room for the models, devices, sinks and threads.
pub const MAX_CONNECTIONS_LIMIT: usize = 512;
/// Caption downloads at once at most: a file of a few MB that a client fetches now and
/// then; a slow reader holds its slot as long as it reads.
pub const MAX_CAPTION_DOWNLOADS: usize = 4;

#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    pub enabled: bool,
    /// `address:port`. Loopback unless a token is set: the overlay and `/events` carry
    /// transcripts.
    pub bind: String,
    /// Bearer token (at least 16 characters) required on every route but `/healthz`.
    pub token: Option<String>,
    /// File holding the token (e.g. a systemd credential); alternative to `token`.
    pub token_file: Option<PathBuf>,
    /// Final events a newly connected client receives first (the overlay's recent lines).
    pub replay_last: usize,
    /// Messages buffered per SSE client before its oldest unread ones are dropped.
    pub client_buffer: usize,
    /// Serve `/metrics`.
    pub metrics: bool,
    /// Open connections at most (SSE clients included); more are closed at once and
    /// counted. Bounded so that connections cannot use up the process's file descriptors.
    pub max_connections: usize,
    /// SSE clients (`/events`) connected at most; more get `503` at once (counted).
    /// Below `max_connections`, so that however many clients hold `/events` open,
    /// `/healthz`, `/metrics` and the overlay page still find a connection slot.
    /// None: half of `max_connections`.
    pub max_sse_clients: Option<usize>,
    /// A connection must send a complete request head within this time after it opens
    /// or after its previous response (idle keep-alive); otherwise it is closed.
    pub header_timeout_ms: u64,
    /// Host names (as in the `Host` header, without port) that may reach a listener
    /// without a token, besides loopback addresses, `localhost` and the bound address.
    /// When set, it is enforced with a token too.
    pub allowed_hosts: Vec<String>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            bind: "127.0.0.1:8790".into(),
            token: None,
            token_file: None,
            replay_last: 8,
            client_buffer: 256,
            metrics: true,
            max_connections: 64,
            max_sse_clients: None,
            header_timeout_ms: 10_000,
            allowed_hosts: Vec::new(),
        }
    }
}

impl HttpConfig {
    /// `max_sse_clients`, or its default: half of `max_connections`.
    pub fn sse_limit(&self) -> usize {
        self.max_sse_clients
            .unwrap_or((self.max_connections / 2).max(1))
    }

    /// Caption downloads at once: [`MAX_CAPTION_DOWNLOADS`], fewer when SSE clients and
    /// downloads together would otherwise take every connection slot.
    pub fn download_limit(&self) -> usize {
        MAX_CAPTION_DOWNLOADS.min(
            self.max_connections
                .saturating_sub(self.sse_limit())
                .saturating_sub(1),
        )
    }

    pub fn bind_addr(&self) -> Result<SocketAddr, FieldError> {
        self.bind.parse().map_err(|_| {
            FieldError::new(
                "http.bind",
                format!("`{}` is not address:port (e.g. 127.0.0.1:8790)", self.bind),
            )
        })
    }
}

impl Validate for HttpConfig {
    fn check(&self, problems: &mut Problems) {
        let addr = match self.bind_addr() {
            Ok(a) => Some(a),
            Err(e) => {
                problems.push(e.field, e.reason);
                None
            }
        };
        if self.token.is_some() && self.token_file.is_some() {
            problems.push(
                "http.token",
                "set either http.token or http.token_file, not both",
            );
        }
        if let Some(t) = &self.token {
            if let Err(r) = check_token(t) {
                problems.push("http.token", r);
            }
        }
        if let Some(addr) = addr.filter(|a| {
            self.enabled
                && !a.ip().is_loopback()
                && self.token.is_none()
                && self.token_file.is_none()
        }) {
            problems.push(
                "http.bind",
                format!(
                    "{addr} is reachable from the network and the listener serves transcripts: \
                     set http.token or http.token_file (>= {MIN_TOKEN_LEN} characters), or bind 127.0.0.1"
                ),
            );
        }
        if !(0..=100).contains(&self.replay_last) {
            problems.push("http.replay_last", "must be within 0..=100");
        }
        if !(16..=65_536).contains(&self.client_buffer) {
            problems.push("http.client_buffer", "must be within 16..=65536");
        }
        if !(2..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections) {
            problems.push(
                "http.max_connections",
                format!(
                    "must be within 2..={MAX_CONNECTIONS_LIMIT} (one slot at least stays free \
                     of SSE clients for /healthz and /metrics)"
                ),
            );
        } else if let Some(n) = self.max_sse_clients {
            if !(1..self.max_connections).contains(&n) {
                problems.push(
                    "http.max_sse_clients",
                    format!(
                        "must be within 1..={} (below http.max_connections, so that SSE \
                         clients can never take every slot from /healthz and /metrics)",
                        self.max_connections - 1
                    ),
                );
            }
        }
        if !(1_000..=120_000).contains(&self.header_timeout_ms) {
            problems.push("http.header_timeout_ms", "must be within 1000..=120000");
        }
        for h in &self.allowed_hosts {
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c));
            if !ok {
                problems.push(
                    "http.allowed_hosts",
                    format!("`{h}` is not a host name or address (e.g. \"room1.lan\", no scheme, port or path)"),
                );
            }
        }
    }
}

/// The token in `http.token_file`, checked as `http.token` is.
pub fn read_token_file(path: &std::path::Path) -> Result<String, HttpError> {
    let t = crate::common::secret_file::read(path).map_err(|e| HttpError::TokenFile {
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    })?;
    check_token(&t).map_err(|reason| HttpError::TokenFile {
        path: path.to_path_buf(),
        reason: format!("token {reason}"),
    })?;
    Ok(t)
}

pub(super) fn check_token(t: &str) -> Result<(), String> {
    if t.chars().count() < MIN_TOKEN_LEN {
        return Err(format!("must be at least {MIN_TOKEN_LEN} characters"));
    }
    if !t.chars().all(|c| c.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces (it travels in a header)".into());
    }
    Ok(())
}
