//! The hub: the latest events and status for new clients, a bounded broadcast channel
//! for live ones, and the counts of connections and lagged clients.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::response::sse::Event;
use tokio::sync::broadcast;

use super::config::HttpConfig;
use crate::common::drops::{DropCounters, DropCounts, DropSource};
use crate::common::lock::LockOrRecover;
use crate::sinks::metrics::ListenerStats;

/// One SSE message, shared by every client.
#[derive(Debug)]
pub(super) struct Msg {
    pub(super) event: &'static str,
    pub(super) id: Option<u64>,
    pub(super) data: String,
}

impl Msg {
    pub(super) fn to_event(&self) -> Event {
        let e = Event::default().event(self.event).data(&self.data);
        match self.id {
            Some(id) => e.id(id.to_string()),
            None => e,
        }
    }
}

/// Fans events out to every connected client and keeps the last few final events for
/// clients that connect later (an overlay reloaded mid-meeting shows recent lines).
#[derive(Debug)]
pub struct Hub {
    pub(super) tx: broadcast::Sender<Arc<Msg>>,
    pub(super) recent: Mutex<VecDeque<Arc<Msg>>>,
    pub(super) status: Mutex<Option<Arc<Msg>>>,
    pub(super) replay_last: usize,
    pub(super) hello: String,
    pub(super) clients: AtomicU64,
    /// Messages lost by clients that fell more than `client_buffer` behind
    /// (`sse_client_lagged`).
    pub(super) drops: DropCounters,
    pub(super) connections: AtomicU64,
    pub(super) refused_connection_limit: AtomicU64,
    /// Idle connections closed to make room for a new one at `max_connections`.
    pub(super) idle_closed: AtomicU64,
    pub(super) refused_host: AtomicU64,
    /// Requests without exactly one `Host` header (400).
    pub(super) refused_bad_request: AtomicU64,
    /// Set while connections are being refused, so the warning is logged once per burst.
    pub(super) refusing: AtomicBool,
    /// Responses that stay open, each kind under a cap of its own (503 beyond it), the
    /// two together always below `max_connections`: SSE clients (`max_sse_clients`) and
    /// caption downloads.
    pub(super) sse: Arc<Pool>,
    pub(super) downloads: Arc<Pool>,
}

/// Slots for one kind of response that stays open.
#[derive(Debug)]
pub(super) struct Pool {
    what: &'static str,
    reason: &'static str,
    max: usize,
    open: AtomicUsize,
    refused: AtomicU64,
    /// When the refusals were last logged (ms on `counters::now_ms`, 0: never): clients
    /// churning at the cap would otherwise log a line each time a slot frees.
    warned_ms: AtomicU64,
}

/// Refusals at a cap are logged at most this often.
const WARN_EVERY_MS: u64 = 60_000;

impl Pool {
    fn new(what: &'static str, reason: &'static str, max: usize) -> Arc<Self> {
        Arc::new(Self {
            what,
            reason,
            max,
            open: AtomicUsize::new(0),
            refused: AtomicU64::new(0),
            warned_ms: AtomicU64::new(0),
        })
    }

    /// A slot, held by the response body until it ends; `None` at the cap (counted,
    /// logged once per burst).
    pub(super) fn take(self: &Arc<Self>) -> Option<PoolSlot> {
        let taken = self
            .open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            })
            .is_ok();
        if taken {
            return Some(PoolSlot(self.clone()));
        }
        let refused = self.refused.fetch_add(1, Ordering::Relaxed) + 1;
        let now = crate::common::counters::now_ms().max(1);
        let last = self.warned_ms.load(Ordering::Relaxed);
        if (last == 0 || now.saturating_sub(last) >= WARN_EVERY_MS)
            && self
                .warned_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            log::warn!(
                "http: {} {} open, the most allowed; answering 503 to new ones ({refused} so \
                 far, counted in sarcasmd_http_refused_total{{reason=\"{}\"}}; logged at most \
                 once a minute)",
                self.max,
                self.what,
                self.reason
            );
        }
        None
    }

    pub(super) fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }
}

/// One slot of a [`Pool`]; given back when dropped.
pub(super) struct PoolSlot(Arc<Pool>);
impl Drop for PoolSlot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What SSE clients lost, attached to the run's drop registry.
impl DropSource for Hub {
    fn drop_counts(&self) -> DropCounts {
        self.drops.snapshot()
    }
}

impl Hub {
    pub fn new(cfg: &HttpConfig, device: &str) -> Arc<Self> {
        let started_unix_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let hello = serde_json::json!({
            "type": "hello",
            "version": env!("CARGO_PKG_VERSION"),
            "device": device,
            "started_unix_ms": started_unix_ms,
        })
        .to_string();
        Arc::new(Self {
            tx: broadcast::channel(cfg.client_buffer).0,
            recent: Mutex::new(VecDeque::with_capacity(cfg.replay_last + 1)),
            status: Mutex::new(None),
            replay_last: cfg.replay_last,
            hello,
            clients: AtomicU64::new(0),
            drops: DropCounters::default(),
            connections: AtomicU64::new(0),
            refused_connection_limit: AtomicU64::new(0),
            idle_closed: AtomicU64::new(0),
            refused_host: AtomicU64::new(0),
            refused_bad_request: AtomicU64::new(0),
            refusing: AtomicBool::new(false),
            sse: Pool::new("SSE clients", "sse_limit", cfg.sse_limit()),
            downloads: Pool::new("caption downloads", "download_limit", cfg.download_limit()),
        })
    }

    /// A final utterance event (already serialised).
    pub fn utterance(&self, id: u64, json: String) {
        let m = Arc::new(Msg {
            event: "utterance",
            id: Some(id),
            data: json,
        });
        {
            let mut r = self.recent.lock_or_recover();
            r.push_back(m.clone());
            while r.len() > self.replay_last {
                r.pop_front();
            }
        }
        // No receivers is normal (no overlay open).
        let _ = self.tx.send(m);
    }

    pub fn partial(&self, json: String) {
        let _ = self.tx.send(Arc::new(Msg {
            event: "partial",
            id: None,
            data: json,
        }));
    }

    /// A lost interval of a live source (SSE event `gap`).
    pub fn gap(&self, json: String) {
        let _ = self.tx.send(Arc::new(Msg {
            event: "gap",
            id: None,
            data: json,
        }));
    }

    /// Daemon state (`running`, `finished`) and device status; the latest is also sent
    /// to clients that connect later.
    pub fn status(&self, json: String) {
        let m = Arc::new(Msg {
            event: "status",
            id: None,
            data: json,
        });
        *self.status.lock_or_recover() = Some(m.clone());
        let _ = self.tx.send(m);
    }

    pub(super) fn connection_refused(&self, max_connections: usize) {
        self.refused_connection_limit
            .fetch_add(1, Ordering::Relaxed);
        if !self.refusing.swap(true, Ordering::Relaxed) {
            log::warn!(
                "http: {max_connections} connections open (http.max_connections); closing new ones \
                 until some end (counted in sarcasmd_http_refused_total)"
            );
        }
    }

    pub(super) fn idle_connection_closed(&self, max_connections: usize) {
        if self.idle_closed.fetch_add(1, Ordering::Relaxed) == 0 {
            log::info!(
                "http: {max_connections} connections open (http.max_connections); closing the \
                 oldest idle one for each new connection (counted in sarcasmd_http_refused_total{{reason=\"idle_closed\"}})"
            );
        }
    }

    pub(super) fn connection_opened(&self) -> ConnectionGuard<'_> {
        if self.refusing.swap(false, Ordering::Relaxed) {
            log::info!(
                "http: accepting connections again ({} refused so far)",
                self.refused_connection_limit()
            );
        }
        self.connections.fetch_add(1, Ordering::Relaxed);
        ConnectionGuard(self)
    }
}

/// Counts a connection as open while it lives.
pub(super) struct ConnectionGuard<'a>(pub(super) &'a Hub);
impl Drop for ConnectionGuard<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Decrements the client count when a client's stream is dropped (disconnect).
pub(super) struct ClientGuard(pub(super) Arc<Hub>);
impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The listener's counters, read through the trait `metrics` defines (one definition).
impl ListenerStats for Hub {
    fn clients(&self) -> u64 {
        self.clients.load(Ordering::Relaxed)
    }
    fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }
    fn refused_connection_limit(&self) -> u64 {
        self.refused_connection_limit.load(Ordering::Relaxed)
    }
    fn refused_host(&self) -> u64 {
        self.refused_host.load(Ordering::Relaxed)
    }
    fn idle_closed(&self) -> u64 {
        self.idle_closed.load(Ordering::Relaxed)
    }
    fn refused_sse_limit(&self) -> u64 {
        self.sse.refused()
    }
    fn refused_download_limit(&self) -> u64 {
        self.downloads.refused()
    }
    fn refused_bad_request(&self) -> u64 {
        self.refused_bad_request.load(Ordering::Relaxed)
    }
}
