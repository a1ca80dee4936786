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
//! Queues: the [`Hub`] fans events out through a bounded broadcast channel
//! (`client_buffer` messages per client). A client that falls further behind loses the
//! oldest messages it had not read; the loss is counted (`sse_client_lagged`) and the
//! client resynchronises from the next event. The sink thread never waits for a client.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use futures_util::stream::Stream;
use serde::{Deserialize, Serialize};
use thiserror::Error;
use tokio::sync::{broadcast, watch};

use crate::config::FieldError;
use crate::metrics::{self, Metrics};
use crate::sinks::captions::CaptionsConfig;

const OVERLAY_HTML: &str = include_str!("../../assets/overlay.html");
const MIN_TOKEN_LEN: usize = 16;

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
        Ok(())
    }
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
            let mut r = self.recent.lock().expect("hub lock");
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
        *self.status.lock().expect("hub lock") = Some(m.clone());
        let _ = self.tx.send(m);
    }

    pub fn clients(&self) -> u64 {
        self.clients.load(Ordering::Relaxed)
    }

    /// Messages lost by clients that fell more than `client_buffer` behind.
    pub fn lagged_events(&self) -> u64 {
        self.lagged.load(Ordering::Relaxed)
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
    token: Option<Arc<str>>,
    shutdown: watch::Receiver<bool>,
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
            (None, Some(p)) => {
                let t = crate::secret_file::read(p).map_err(|e| HttpError::TokenFile {
                    path: p.clone(),
                    reason: format!("cannot read: {e}"),
                })?;
                let t = t.as_str();
                check_token(t).map_err(|reason| HttpError::TokenFile {
                    path: p.clone(),
                    reason: format!("token {reason}"),
                })?;
                Some(Arc::<str>::from(t))
            }
            (None, None) => None,
        };
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
            token,
            shutdown: shutdown.clone(),
        };
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
                    let mut stop_rx = shutdown;
                    let app = router(state);
                    let served = axum::serve(listener, app)
                        .with_graceful_shutdown(async move {
                            let _ = stop_rx.wait_for(|s| *s).await;
                        })
                        .await;
                    if let Err(e) = served {
                        log::error!("http: server on {local} stopped: {e}");
                    }
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

async fn caption_file(path: Option<&PathBuf>, content_type: &'static str) -> Response {
    let Some(path) = path else {
        return (
            StatusCode::NOT_FOUND,
            "no caption file configured ([captions])\n",
        )
            .into_response();
    };
    match tokio::fs::read(path).await {
        Ok(body) => (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-store"),
            ],
            body,
        )
            .into_response(),
        Err(e) => {
            log::warn!("http: cannot read {}: {e}", path.display());
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "caption file not readable\n",
            )
                .into_response()
        }
    }
}

async fn captions_vtt(State(st): State<AppState>) -> Response {
    caption_file(st.vtt.as_deref(), "text/vtt; charset=utf-8").await
}

async fn captions_srt(State(st): State<AppState>) -> Response {
    caption_file(st.srt.as_deref(), "application/x-subrip; charset=utf-8").await
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
    if let Some(s) = hub.status.lock().expect("hub lock").as_ref() {
        first.push_back(s.to_event());
    }
    for m in hub.recent.lock().expect("hub lock").iter() {
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
    fn secrets_compare_exactly() {
        assert!(same_secret(b"abcdefgh", b"abcdefgh"));
        assert!(!same_secret(b"abcdefgh", b"abcdefgi"));
        assert!(!same_secret(b"abcdefgh", b"abcdefg"));
    }
}
