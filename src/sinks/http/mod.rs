//! The daemon's HTTP listener: the browser caption overlay (`/`), live events as
//! Server-Sent Events (`/events`), Prometheus metrics (`/metrics`), the live caption
//! files (`/captions.vtt`, `/captions.srt`), corrections (`POST /events/{id}/feedback`,
//! `GET /feedback`, `DELETE /feedback/{n}`; only with a token) and a health check (`/healthz`).
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
//! Requests: every request needs exactly one `Host` header (400 otherwise, RFC 9112).
//!
//! Connections: at most `max_connections` at once (SSE clients included). At the limit a
//! new connection takes the slot of the oldest idle one (`slots.rs`); when every open
//! connection is serving, the new one is closed at once, counted and logged once per
//! burst. Responses that stay open are capped on their own (503 beyond), together below
//! that: SSE clients at `max_sse_clients`, caption downloads at
//! [`MAX_CAPTION_DOWNLOADS`]. However many clients hold them, the remaining slots serve
//! short requests or are idle and give way, so `/healthz`, `/metrics` and the overlay
//! page always get through. A connection that has not sent a complete request head within
//! `header_timeout_ms` (idle keep-alive, or a client sending slowly) is closed. Caption
//! files are streamed, never read whole, and never more than the rotation size; a client
//! that leaves stops the read.
//!
//! Queues: the [`Hub`] fans events out through a bounded broadcast channel
//! (`client_buffer` messages per client). A client that falls further behind loses the
//! oldest messages it had not read; the loss is counted (`sse_client_lagged`) and the
//! client resynchronises from the next event. The sink thread never waits for a client.
//!
//! Files: this one the server (listener, connection limits, router); `config.rs` the
//! `[http]` section; `hub.rs` what clients are sent; `host_rule.rs` the host rule;
//! `access.rs` the checks run on each request (one `Host`, the host rule, the token);
//! `app_state.rs` what the handlers are given; `handlers.rs` the routes; `feedback.rs`
//! corrections of events (`POST /events/{id}/feedback`); `slots.rs` the connection
//! slots; `error.rs` the error type; `output.rs` the listener as one of the daemon's
//! outputs (started with each stream, given its events).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::middleware;
use axum::routing::{delete, get, post};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::watch;
use tower::ServiceExt;

use crate::common::feedback::Feedback;
use crate::sinks::captions::CaptionsConfig;
use crate::sinks::metrics::Metrics;

/// Descriptors the daemon needs besides HTTP connections (models, sockets, pipes).
const OTHER_FDS: u64 = 128;

mod access;
mod app_state;
mod config;
mod error;
mod feedback;
mod handlers;
mod host_rule;
mod hub;
mod output;
mod slots;

use access::*;
use app_state::AppState;
pub use config::*;
pub use error::HttpError;
use handlers::*;
use host_rule::*;
pub use hub::*;
use slots::{Admit, ServingBody, Slots};

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
        room: Option<Arc<dyn Feedback>>,
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
            room,
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
    let slots = Slots::new(limits.max_connections);
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
        let slot = match slots.admit() {
            Admit::Free(slot) => slot,
            Admit::TookIdle(slot) => {
                hub.idle_connection_closed(limits.max_connections);
                slot
            }
            Admit::Refused => {
                hub.connection_refused(limits.max_connections);
                drop(tcp);
                continue;
            }
        };
        let hub = hub.clone();
        let app = app.clone();
        let conn = slot.conn.clone();
        // Each response marks the connection as serving until its body is sent, so an
        // SSE client or a caption download is never the one closed for a newcomer.
        let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
            let serving = conn.serving();
            let app = app.clone();
            async move {
                let Ok(resp) = app.oneshot(req.map(Body::new)).await;
                Ok::<_, std::convert::Infallible>(resp.map(|inner| {
                    Body::new(ServingBody {
                        inner,
                        _serving: serving,
                    })
                }))
            }
        });
        let mut stop = stop.clone();
        tokio::spawn(async move {
            let _open = hub.connection_opened();
            let slot = slot;
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
                _ = slot.conn.closed() => {
                    log::debug!("http: closed idle connection from {peer} for a new one");
                }
                _ = stopped(&mut stop) => {
                    // Finish the response in flight (SSE streams end on the same signal).
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    // Every connection gives its slot back when it ends.
    slots.all_ended().await;
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
        .route("/events/{id}/feedback", post(feedback::feedback))
        .route("/feedback", get(feedback::list))
        .route("/feedback/{n}", delete(feedback::forget))
        .route_layer(middleware::from_fn_with_state(state.clone(), auth));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .merge(protected)
        .layer(middleware::from_fn_with_state(state.clone(), one_host))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::validate::Validate;

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
                "http.max_connections",
                HttpConfig {
                    max_connections: 1,
                    ..Default::default()
                },
            ),
            (
                "http.max_sse_clients",
                HttpConfig {
                    max_sse_clients: Some(64),
                    ..Default::default()
                },
            ),
            (
                "http.max_sse_clients",
                HttpConfig {
                    max_sse_clients: Some(0),
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
    fn streams_default_to_half_the_connections_and_stay_below_them() {
        let c = HttpConfig::default();
        assert_eq!((c.sse_limit(), c.download_limit()), (32, 4));
        let c = HttpConfig {
            max_connections: 2,
            ..Default::default()
        };
        assert_eq!(
            (c.sse_limit(), c.download_limit(), c.validate()),
            (1, 0, Ok(()))
        );
        let c = HttpConfig {
            max_connections: 8,
            max_sse_clients: Some(5),
            ..Default::default()
        };
        assert_eq!(
            (c.sse_limit(), c.download_limit(), c.validate()),
            (5, 2, Ok(()))
        );
    }

    #[test]
    fn secrets_compare_exactly() {
        assert!(same_secret(b"abcdefgh", b"abcdefgh"));
        assert!(!same_secret(b"abcdefgh", b"abcdefgi"));
        assert!(!same_secret(b"abcdefgh", b"abcdefg"));
    }
}
