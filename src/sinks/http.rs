//! The daemon's HTTP listener: the browser caption overlay (`/`), live events as
//! Server-Sent Events (`/events`), Prometheus metrics (`/metrics`), the live caption
//! files (`/captions.vtt`, `/captions.srt`) and a health check (`/healthz`).
//!
//! Security: it binds to loopback by default; any other address is refused at config
//! validation unless a bearer token is configured, and then every route but `/healthz`
//! needs `Authorization: Bearer <token>` (or `?token=`, since a browser's EventSource
//! cannot send headers). Transcripts leave the device only through this listener and
//! MQTT, and only when `output.include_transcript` is on.
//!
//! DNS rebinding: without a token, a request is served only when its `Host` names a
//! loopback address, `localhost`, the bound address or an entry of `http.allowed_hosts`;
//! otherwise a web page the operator visits could point its own host name at 127.0.0.1
//! and read live transcripts. Refusals are counted (`sarcasmd_http_refused_total`).
//!
//! Connections: at most `max_connections` at once (SSE clients included); a connection
//! beyond that is closed at once, counted and logged once per burst. A connection that
//! has not sent a complete request head within `header_timeout_ms` (idle keep-alive, or
//! a client sending slowly) is closed. Caption files are streamed, never read whole,
//! and never more than the rotation size; a client that leaves stops the read.
//!
//! Queues: the [`Hub`] fans events out through a bounded broadcast channel
//! (`client_buffer` messages per client). A client that falls further behind loses the
//! oldest messages it had not read; the loss is counted (`sse_client_lagged`) and the
//! client resynchronises from the next event. The sink thread never waits for a client.

use crate::lock::LockOrRecover;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::Stream;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::io::AsyncReadExt;
use tokio::sync::{broadcast, watch, Semaphore};

use crate::config::FieldError;
use crate::metrics::{self, Metrics};
use crate::sinks::captions::CaptionsConfig;

const OVERLAY_HTML: &str = include_str!("../../assets/overlay.html");
const MIN_TOKEN_LEN: usize = 16;
/// Upper bound of `http.max_connections`: with the unit's `LimitNOFILE=1024` this leaves
/// room for the models, devices, sinks and threads.
pub const MAX_CONNECTIONS_LIMIT: usize = 512;
/// Descriptors the daemon needs besides HTTP connections (models, sockets, pipes).
const OTHER_FDS: u64 = 128;

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
            header_timeout_ms: 10_000,
            allowed_hosts: Vec::new(),
        }
    }
}

impl HttpConfig {
    pub fn bind_addr(&self) -> Result<SocketAddr, FieldError> {
        self.bind.parse().map_err(|_| {
            FieldError::new(
                "http.bind",
                format!("`{}` is not address:port (e.g. 127.0.0.1:8790)", self.bind),
            )
        })
    }

    pub fn validate(&self) -> Result<(), FieldError> {
        let addr = self.bind_addr()?;
        if self.token.is_some() && self.token_file.is_some() {
            return Err(FieldError::new(
                "http.token",
                "set either http.token or http.token_file, not both",
            ));
        }
        if let Some(t) = &self.token {
            check_token(t).map_err(|r| FieldError::new("http.token", r))?;
        }
        if self.enabled
            && !addr.ip().is_loopback()
            && self.token.is_none()
            && self.token_file.is_none()
        {
            return Err(FieldError::new(
                "http.bind",
                format!(
                    "{addr} is reachable from the network and the listener serves transcripts: \
                     set http.token or http.token_file (>= {MIN_TOKEN_LEN} characters), or bind 127.0.0.1"
                ),
            ));
        }
        if !(0..=100).contains(&self.replay_last) {
            return Err(FieldError::new(
                "http.replay_last",
                "must be within 0..=100",
            ));
        }
        if !(16..=65_536).contains(&self.client_buffer) {
            return Err(FieldError::new(
                "http.client_buffer",
                "must be within 16..=65536",
            ));
        }
        if !(1..=MAX_CONNECTIONS_LIMIT).contains(&self.max_connections) {
            return Err(FieldError::new(
                "http.max_connections",
                format!("must be within 1..={MAX_CONNECTIONS_LIMIT}"),
            ));
        }
        if !(1_000..=120_000).contains(&self.header_timeout_ms) {
            return Err(FieldError::new(
                "http.header_timeout_ms",
                "must be within 1000..=120000",
            ));
        }
        for h in &self.allowed_hosts {
            let ok = !h.is_empty()
                && h.len() <= 253
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c));
            if !ok {
                return Err(FieldError::new(
                    "http.allowed_hosts",
                    format!("`{h}` is not a host name or address (e.g. \"room1.lan\", no scheme, port or path)"),
                ));
            }
        }
        Ok(())
    }
}

/// The token in `http.token_file`, checked as `http.token` is.
pub fn read_token_file(path: &std::path::Path) -> Result<String, HttpError> {
    let t = crate::secret_file::read(path).map_err(|e| HttpError::TokenFile {
        path: path.to_path_buf(),
        reason: format!("cannot read: {e}"),
    })?;
    check_token(&t).map_err(|reason| HttpError::TokenFile {
        path: path.to_path_buf(),
        reason: format!("token {reason}"),
    })?;
    Ok(t)
}

fn check_token(t: &str) -> Result<(), String> {
    if t.chars().count() < MIN_TOKEN_LEN {
        return Err(format!("must be at least {MIN_TOKEN_LEN} characters"));
    }
    if !t.chars().all(|c| c.is_ascii_graphic()) {
        return Err("must be printable ASCII without spaces (it travels in a header)".into());
    }
    Ok(())
}

#[derive(Debug, Error)]
pub enum HttpError {
    #[error("http.bind {addr}: cannot listen: {source} (another sarcasmd or service on that port? choose another port in http.bind)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("http.token_file {path}: {reason}")]
    TokenFile { path: PathBuf, reason: String },
    #[error("cannot start the HTTP runtime: {0}")]
    Runtime(std::io::Error),
}

/// One SSE message, shared by every client.
#[derive(Debug)]
struct Msg {
    event: &'static str,
    id: Option<u64>,
    data: String,
}

impl Msg {
    fn to_event(&self) -> Event {
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
    tx: broadcast::Sender<Arc<Msg>>,
    recent: Mutex<VecDeque<Arc<Msg>>>,
    status: Mutex<Option<Arc<Msg>>>,
    replay_last: usize,
    hello: String,
    clients: AtomicU64,
    lagged: AtomicU64,
    connections: AtomicU64,
    refused_connection_limit: AtomicU64,
    refused_host: AtomicU64,
    /// Set while connections are being refused, so the warning is logged once per burst.
    refusing: AtomicBool,
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
            lagged: AtomicU64::new(0),
            connections: AtomicU64::new(0),
            refused_connection_limit: AtomicU64::new(0),
            refused_host: AtomicU64::new(0),
            refusing: AtomicBool::new(false),
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

    pub fn clients(&self) -> u64 {
        self.clients.load(Ordering::Relaxed)
    }

    /// Messages lost by clients that fell more than `client_buffer` behind.
    pub fn lagged_events(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
    }

    /// Open HTTP connections (SSE clients included).
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Connections closed at once because `max_connections` were open.
    pub fn refused_connection_limit(&self) -> u64 {
        self.refused_connection_limit.load(Ordering::Relaxed)
    }

    /// Requests refused because their `Host` is not allowed (DNS rebinding guard).
    pub fn refused_host(&self) -> u64 {
        self.refused_host.load(Ordering::Relaxed)
    }

    fn connection_refused(&self, max_connections: usize) {
        self.refused_connection_limit
            .fetch_add(1, Ordering::Relaxed);
        if !self.refusing.swap(true, Ordering::Relaxed) {
            log::warn!(
                "http: {max_connections} connections open (http.max_connections); closing new ones \
                 until some end (counted in sarcasmd_http_refused_total)"
            );
        }
    }

    fn connection_opened(&self) -> ConnectionGuard<'_> {
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
struct ConnectionGuard<'a>(&'a Hub);
impl Drop for ConnectionGuard<'_> {
    fn drop(&mut self) {
        self.0.connections.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Decrements the client count when a client's stream is dropped (disconnect).
struct ClientGuard(Arc<Hub>);
impl Drop for ClientGuard {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Clone)]
struct AppState {
    hub: Arc<Hub>,
    metrics: Option<Arc<Metrics>>,
    /// The live caption files, served as written (`[captions]`).
    vtt: Option<Arc<PathBuf>>,
    srt: Option<Arc<PathBuf>>,
    /// Bytes of a caption file served at most: its rotation size and one cue's slack.
    caption_limit_bytes: u64,
    token: Option<Arc<str>>,
    hosts: Arc<HostRule>,
    shutdown: watch::Receiver<bool>,
}

/// Which `Host` headers may reach the protected routes.
#[derive(Debug)]
struct HostRule {
    /// No token and no allow-list: loopback names only. With an allow-list: those too.
    /// With a token and no allow-list: any host (the token is the guard).
    enforce: bool,
    bound: IpAddr,
    allowed: Vec<String>,
}

impl HostRule {
    fn new(cfg: &HttpConfig, bound: IpAddr) -> Self {
        let has_token = cfg.token.is_some() || cfg.token_file.is_some();
        Self {
            enforce: !has_token || !cfg.allowed_hosts.is_empty(),
            bound,
            allowed: cfg
                .allowed_hosts
                .iter()
                .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                .collect(),
        }
    }

    /// Whether a request with this `Host` header may be served. No header at all is
    /// allowed: browsers always send one, so such a client is not a rebinding page.
    fn allows(&self, host: Option<&str>) -> bool {
        if !self.enforce {
            return true;
        }
        let Some(host) = host else { return true };
        let name = host_name(host).trim_end_matches('.').to_ascii_lowercase();
        if self.allowed.contains(&name) {
            return true;
        }
        // Browsers resolve `localhost` and `*.localhost` to loopback themselves (RFC 6761).
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        match bare.parse::<IpAddr>() {
            Ok(ip) => ip.is_loopback() || ip == self.bound,
            Err(_) => false,
        }
    }
}

/// The host part of a `Host` header value: `name`, `name:port`, `[v6]` or `[v6]:port`.
fn host_name(value: &str) -> &str {
    let v = value.trim();
    if v.starts_with('[') {
        return v.split_once(']').map_or(v, |(h, _)| &v[..h.len() + 1]);
    }
    match v.rsplit_once(':') {
        Some((h, port)) if !h.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => v,
    }
}

/// The running listener. Dropping it without [`HttpServer::shutdown`] also stops it.
pub struct HttpServer {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl HttpServer {
    /// Bind now (so a port in use is an error at start, not later) and serve on a
    /// one-thread tokio runtime of its own.
    pub fn start(
        cfg: &HttpConfig,
        hub: Arc<Hub>,
        metrics: Option<Arc<Metrics>>,
        captions: &CaptionsConfig,
    ) -> Result<Self, HttpError> {
        let addr = cfg.bind_addr().map_err(|e| HttpError::Bind {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e.reason),
        })?;
        let token = match (&cfg.token, &cfg.token_file) {
            (Some(t), _) => Some(Arc::<str>::from(t.as_str())),
            (None, Some(p)) => Some(Arc::<str>::from(read_token_file(p)?.as_str())),
            (None, None) => None,
        };
        check_fd_limit(cfg.max_connections);
        let std_listener =
            std::net::TcpListener::bind(addr).map_err(|source| HttpError::Bind { addr, source })?;
        std_listener
            .set_nonblocking(true)
            .map_err(|source| HttpError::Bind { addr, source })?;
        let local = std_listener
            .local_addr()
            .map_err(|source| HttpError::Bind { addr, source })?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(HttpError::Runtime)?;
        let (stop, shutdown) = watch::channel(false);
        let state = AppState {
            hub,
            metrics: if cfg.metrics { metrics } else { None },
            vtt: captions.vtt.clone().map(Arc::new),
            srt: captions.srt.clone().map(Arc::new),
            caption_limit_bytes: (u64::from(captions.rotate_mb) + 1) << 20,
            token,
            hosts: Arc::new(HostRule::new(cfg, local.ip())),
            shutdown: shutdown.clone(),
        };
        let limits = ConnectionLimits {
            max_connections: cfg.max_connections,
            header_timeout: Duration::from_millis(cfg.header_timeout_ms),
        };
        let hub = state.hub.clone();
        let thread = std::thread::Builder::new()
            .name("http".into())
            .spawn(move || {
                rt.block_on(async move {
                    let listener = match tokio::net::TcpListener::from_std(std_listener) {
                        Ok(l) => l,
                        Err(e) => {
                            log::error!("http: cannot use the listener on {local}: {e}");
                            return;
                        }
                    };
                    serve(listener, router(state), limits, hub, shutdown).await;
                });
            })
            .map_err(HttpError::Runtime)?;
        log::info!(
            "http: overlay http://{local}/  events /events  metrics /metrics{}",
            if cfg.token.is_some() || cfg.token_file.is_some() {
                " (bearer token required)"
            } else {
                ""
            }
        );
        Ok(Self {
            addr: local,
            stop,
            thread: Some(thread),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Ends every SSE stream after the messages already queued for it, then waits up to
    /// `grace` for connections to close.
    pub fn shutdown(mut self, grace: Duration) {
        self.stop_and_join(grace);
    }

    fn stop_and_join(&mut self, grace: Duration) {
        let _ = self.stop.send(true);
        if let Some(t) = self.thread.take() {
            let deadline = std::time::Instant::now() + grace;
            while !t.is_finished() && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if t.is_finished() {
                let _ = t.join();
            } else {
                // A client that never reads keeps its connection; the process is ending
                // anyway, so the thread is left to die with it.
                log::warn!("http: connections still open after {grace:?}; not waiting");
            }
        }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.stop_and_join(Duration::from_millis(500));
    }
}

#[derive(Debug, Clone, Copy)]
struct ConnectionLimits {
    max_connections: usize,
    header_timeout: Duration,
}

/// The accept loop. axum::serve has neither a header-read timeout nor a connection
/// cap, so connections are served by hyper directly, each holding one permit.
async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    limits: ConnectionLimits,
    hub: Arc<Hub>,
    mut stop: watch::Receiver<bool>,
) {
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let mut accept_failing = false;
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped(&mut stop) => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => {
                accept_failing = false;
                a
            }
            Err(e) => {
                // EMFILE and the like: say it once, and do not spin while it lasts.
                if !accept_failing {
                    log::warn!("http: cannot accept connections: {e}");
                    accept_failing = true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            hub.connection_refused(limits.max_connections);
            drop(tcp);
            continue;
        };
        let hub = hub.clone();
        let service = TowerToHyperService::new(app.clone());
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _open = hub.connection_opened();
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout);
            let conn = builder.serve_connection(TokioIo::new(tcp), service);
            tokio::pin!(conn);
            tokio::select! {
                r = conn.as_mut() => {
                    if let Err(e) = r {
                        log::debug!("http: connection from {peer}: {e}");
                    }
                }
                _ = stopped(&mut stop) => {
                    // Finish the response in flight (SSE streams end on the same signal).
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    // Every connection returns its permit when it ends.
    let _ = permits.acquire_many(limits.max_connections as u32).await;
}

/// Resolves once the server is told to stop (the watch guard is not held across awaits).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Warn when the process may not open `max_connections` sockets besides what the
/// daemon needs anyway; raise the soft limit towards the hard one first.
// rlim_t is u32 on 32-bit targets, u64 here.
#[allow(clippy::unnecessary_cast)]
fn check_fd_limit(max_connections: usize) {
    let need = max_connections as u64 + OTHER_FDS;
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct passed by pointer.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return;
        }
        if (lim.rlim_cur as u64) < need && (lim.rlim_cur as u64) < lim.rlim_max as u64 {
            lim.rlim_cur = (need as libc::rlim_t).min(lim.rlim_max);
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            let _ = libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    if (lim.rlim_cur as u64) < need {
        log::warn!(
            "http: the open-file limit is {} but http.max_connections = {max_connections} needs about {need}: \
             lower http.max_connections or raise LimitNOFILE= / ulimit -n",
            lim.rlim_cur
        );
    }
}

fn router(state: AppState) -> Router {
    let protected = Router::new()
        .route("/", get(overlay))
        .route("/overlay", get(overlay))
        .route("/events", get(events))
        .route("/metrics", get(metrics_text))
        .route("/captions.vtt", get(captions_vtt))
        .route("/captions.srt", get(captions_srt))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .merge(protected)
        .with_state(state)
}

/// Constant-time comparison so the token cannot be guessed byte by byte from timing.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The token of an `Authorization: Bearer <token>` value. The scheme is
/// case-insensitive (RFC 9110, section 11.1): `bearer` and `BEARER` are as good as
/// `Bearer`; one or more spaces separate it from the token.
fn bearer_credentials(value: &str) -> Option<&str> {
    let (scheme, rest) = value.trim().split_once(' ')?;
    let token = rest.trim_start();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

fn query_token(req: &Request) -> Option<String> {
    form_urlencoded::parse(req.uri().query()?.as_bytes())
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v.into_owned())
}

async fn auth(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .map(|v| v.to_str().unwrap_or("\u{fffd}"));
    if !st.hosts.allows(host) {
        st.hub.refused_host.fetch_add(1, Ordering::Relaxed);
        log::debug!("http: refused Host {host:?}");
        return (
            StatusCode::FORBIDDEN,
            "Host not allowed: use http://127.0.0.1 or localhost, add the name to http.allowed_hosts, or set http.token\n",
        )
            .into_response();
    }
    let Some(token) = st.token.as_deref() else {
        return next.run(req).await;
    };
    let from_header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer_credentials)
        .map(|t| same_secret(t.as_bytes(), token.as_bytes()))
        .unwrap_or(false);
    let ok = from_header
        || query_token(&req).is_some_and(|t| same_secret(t.as_bytes(), token.as_bytes()));
    if ok {
        next.run(req).await
    } else {
        let mut r = (StatusCode::UNAUTHORIZED, "bearer token required\n").into_response();
        r.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        r
    }
}

async fn overlay() -> Html<&'static str> {
    Html(OVERLAY_HTML)
}

async fn metrics_text(State(st): State<AppState>) -> Response {
    match &st.metrics {
        Some(m) => ([(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], m.encode()).into_response(),
        None => (StatusCode::NOT_FOUND, "metrics are off (http.metrics)\n").into_response(),
    }
}

/// Streams a caption file in chunks, at most `limit_bytes` of it; when the client goes
/// away the body is dropped and reading stops.
async fn caption_file(
    path: Option<&PathBuf>,
    content_type: &'static str,
    limit_bytes: u64,
) -> Response {
    let Some(path) = path else {
        return (
            StatusCode::NOT_FOUND,
            "no caption file configured ([captions])\n",
        )
            .into_response();
    };
    let unavailable = |why: String| {
        log::warn!("http: cannot serve {}: {why}", path.display());
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "caption file not readable\n",
        )
            .into_response()
    };
    let file = match tokio::fs::File::open(path).await {
        Ok(f) => f,
        Err(e) => return unavailable(e.to_string()),
    };
    let len = match file.metadata().await {
        Ok(m) if m.is_file() => m.len().min(limit_bytes),
        Ok(_) => return unavailable("not a regular file".into()),
        Err(e) => return unavailable(e.to_string()),
    };
    const CHUNK_BYTES: usize = 64 * 1024;
    let chunks = futures_util::stream::unfold(Some(file.take(len)), |reader| async move {
        let mut reader = reader?;
        let mut buf = vec![0u8; CHUNK_BYTES];
        match reader.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Bytes::from(buf)), Some(reader)))
            }
            // The error ends the body; the next poll ends the stream.
            Err(e) => Some((Err(e), None)),
        }
    });
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-store"),
        ],
        [(header::CONTENT_LENGTH, len.to_string())],
        Body::from_stream(chunks),
    )
        .into_response()
}

async fn captions_vtt(State(st): State<AppState>) -> Response {
    caption_file(
        st.vtt.as_deref(),
        "text/vtt; charset=utf-8",
        st.caption_limit_bytes,
    )
    .await
}

async fn captions_srt(State(st): State<AppState>) -> Response {
    caption_file(
        st.srt.as_deref(),
        "application/x-subrip; charset=utf-8",
        st.caption_limit_bytes,
    )
    .await
}

async fn events(
    State(st): State<AppState>,
) -> Sse<impl Stream<Item = Result<Event, std::convert::Infallible>>> {
    let hub = st.hub.clone();
    hub.clients.fetch_add(1, Ordering::Relaxed);
    let guard = ClientGuard(hub.clone());
    // Subscribe before taking the snapshot so nothing falls between the two; the
    // overlay de-duplicates by id.
    let rx = hub.tx.subscribe();
    let mut first: VecDeque<Event> = VecDeque::new();
    first.push_back(
        Event::default()
            .event("hello")
            .data(&hub.hello)
            .retry(Duration::from_millis(1000)),
    );
    if let Some(s) = hub.status.lock_or_recover().as_ref() {
        first.push_back(s.to_event());
    }
    for m in hub.recent.lock_or_recover().iter() {
        first.push_back(m.to_event());
    }
    struct S {
        first: VecDeque<Event>,
        rx: broadcast::Receiver<Arc<Msg>>,
        shutdown: watch::Receiver<bool>,
        _guard: ClientGuard,
    }
    let s = S {
        first,
        rx,
        shutdown: st.shutdown.clone(),
        _guard: guard,
    };
    let stream = futures_util::stream::unfold(s, |mut s| async move {
        if let Some(e) = s.first.pop_front() {
            return Some((Ok(e), s));
        }
        loop {
            // Deliver what is already queued before honouring shutdown, so the last
            // `finished` status reaches the page.
            let next = tokio::select! {
                biased;
                r = s.rx.recv() => Some(r),
                _ = s.shutdown.wait_for(|v| *v) => None,
            };
            match next {
                Some(Ok(m)) => return Some((Ok(m.to_event()), s)),
                Some(Err(broadcast::error::RecvError::Lagged(n))) => {
                    s._guard.0.lagged.fetch_add(n, Ordering::Relaxed);
                }
                Some(Err(broadcast::error::RecvError::Closed)) | None => return None,
            }
        }
    });
    Sse::new(stream).keep_alive(
        KeepAlive::new()
            .interval(Duration::from_secs(15))
            .text("keepalive"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bearer_scheme_is_case_insensitive() {
        assert_eq!(bearer_credentials("Bearer abc"), Some("abc"));
        assert_eq!(bearer_credentials("bearer abc"), Some("abc"));
        assert_eq!(bearer_credentials("BEARER  abc"), Some("abc"));
        assert_eq!(bearer_credentials("Basic abc"), None);
        assert_eq!(bearer_credentials("Bearer "), None);
        assert_eq!(bearer_credentials("Bearerabc"), None);
    }

    #[test]
    fn loopback_needs_no_token_but_other_addresses_do() {
        let mut c = HttpConfig {
            enabled: true,
            ..Default::default()
        };
        assert!(c.validate().is_ok());
        for bind in ["0.0.0.0:8790", "192.168.1.20:80", "[::]:8790"] {
            c.bind = bind.into();
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, "http.bind", "{bind}");
            assert!(e.reason.contains("http.token"), "{}", e.reason);
        }
        c.token = Some("short".into());
        assert_eq!(c.validate().unwrap_err().field, "http.token");
        c.token = Some("0123456789abcdef-room1".into());
        assert!(c.validate().is_ok());
        c.bind = "[::1]:8790".into();
        c.token = None;
        assert!(c.validate().is_ok());
    }

    #[test]
    fn bad_bind_names_the_field() {
        let c = HttpConfig {
            bind: "localhost".into(),
            ..Default::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "http.bind");
    }

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("localhost:8790"), "localhost");
        assert_eq!(host_name("127.0.0.1"), "127.0.0.1");
        assert_eq!(host_name("[::1]:8790"), "[::1]");
        assert_eq!(host_name("[::1]"), "[::1]");
        assert_eq!(host_name("room1.lan:"), "room1.lan");
        assert_eq!(host_name("::1"), "::1");
    }

    #[test]
    fn the_host_rule_admits_loopback_and_the_bound_address_only() {
        let cfg = HttpConfig::default();
        let r = HostRule::new(&cfg, "192.168.1.20".parse().unwrap());
        for ok in [
            None,
            Some("127.0.0.2"),
            Some("[::1]:1"),
            Some("localhost."),
            Some("a.localhost"),
            Some("192.168.1.20:8790"),
        ] {
            assert!(r.allows(ok), "{ok:?}");
        }
        for bad in [
            Some("192.168.1.21"),
            Some("evil.example"),
            Some("localhost.evil"),
            Some(""),
        ] {
            assert!(!r.allows(bad), "{bad:?}");
        }
    }

    #[test]
    fn connection_limits_and_hosts_are_validated() {
        for (field, c) in [
            (
                "http.max_connections",
                HttpConfig {
                    max_connections: 0,
                    ..Default::default()
                },
            ),
            (
                "http.max_connections",
                HttpConfig {
                    max_connections: 513,
                    ..Default::default()
                },
            ),
            (
                "http.header_timeout_ms",
                HttpConfig {
                    header_timeout_ms: 0,
                    ..Default::default()
                },
            ),
            (
                "http.allowed_hosts",
                HttpConfig {
                    allowed_hosts: vec!["http://x".into()],
                    ..Default::default()
                },
            ),
            (
                "http.allowed_hosts",
                HttpConfig {
                    allowed_hosts: vec!["".into()],
                    ..Default::default()
                },
            ),
        ] {
            assert_eq!(c.validate().unwrap_err().field, field);
        }
    }

    #[test]
    fn secrets_compare_exactly() {
        assert!(same_secret(b"abcdefgh", b"abcdefgh"));
        assert!(!same_secret(b"abcdefgh", b"abcdefgi"));
        assert!(!same_secret(b"abcdefgh", b"abcdefg"));
    }
}
