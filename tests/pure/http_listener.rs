//! The HTTP listener against what an attacker or a careless client does (issue 25,
//! classes 1-3): idle and half-sent connections, more connections than allowed, a
//! foreign `Host` (DNS rebinding), and caption paths that are huge or not files. The
//! listener runs in-process on an ephemeral loopback port; no models are needed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sarcasmd::sinks::captions::CaptionsConfig;
use sarcasmd::sinks::http::{HttpConfig, HttpServer, Hub, MAX_CAPTION_DOWNLOADS};
use sarcasmd::sinks::metrics::ListenerStats;

fn start(cfg: HttpConfig, captions: CaptionsConfig) -> (HttpServer, std::sync::Arc<Hub>) {
    let cfg = HttpConfig {
        enabled: true,
        bind: "127.0.0.1:0".into(),
        ..cfg
    };
    let hub = Hub::new(&cfg, "test");
    let server =
        HttpServer::start(&cfg, hub.clone(), None, &captions, None).expect("listener starts");
    (server, hub)
}

/// One request on a fresh connection: status and the raw body bytes.
fn get(addr: SocketAddr, path: &str, extra_headers: &str) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\n{extra_headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).expect("response within 20 s");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8_lossy(&raw[..split]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, raw[split + 4..].to_vec())
}

/// Whether the server closes `s` (read returns end of file) within `within`.
fn closed_by_server(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).unwrap();
    let mut b = [0u8; 64];
    // A close with unread bytes in the server's buffer (a half-sent request) is a reset
    // (then end of file on the next read); an orderly close is end of file at once.
    let closed = |r: std::io::Result<usize>| {
        matches!(r, Ok(0)) || matches!(r, Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    };
    closed(s.read(&mut b)) || closed(s.read(&mut b))
}

/// An SSE client on a fresh connection, read until its `hello` arrived.
fn sse_client(addr: SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let mut seen = Vec::new();
    let mut b = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains("hello") {
        let n = s.read(&mut b).expect("SSE hello within 10 s");
        assert!(
            n > 0,
            "SSE connection closed: {}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&b[..n]);
    }
    s
}

#[test]
fn at_the_limit_idle_connections_give_way_serving_ones_do_not_and_idle_ones_time_out() {
    let (server, hub) = start(
        HttpConfig {
            max_connections: 4,
            max_sse_clients: Some(3),
            header_timeout_ms: 1_000,
            ..Default::default()
        },
        CaptionsConfig::default(),
    );
    let addr = server.local_addr();
    // Four idle connections (the oldest half-sent) take every slot.
    let mut idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    idle[0].write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
    // A real request still gets through, in the oldest idle connection's slot.
    let (status, body) = get(addr, "/healthz", "Host: 127.0.0.1\r\n");
    assert_eq!((status, body.as_slice()), (200, &b"ok\n"[..]));
    assert!(
        closed_by_server(&mut idle[0], Duration::from_secs(5)),
        "the oldest idle connection did not give way"
    );
    assert_eq!(hub.idle_closed(), 1);
    assert_eq!(hub.refused_connection_limit(), 0);
    // Three SSE clients (max_sse_clients) and one more connection: the idle ones give way.
    let mut sse: Vec<TcpStream> = (0..3).map(|_| sse_client(addr)).collect();
    let _last = TcpStream::connect(addr).unwrap();
    for (i, s) in idle.iter_mut().enumerate().skip(1) {
        assert!(
            closed_by_server(s, Duration::from_secs(5)),
            "idle connection {i} kept its slot beside the SSE clients"
        );
    }
    // The streams never take the last slot from a health check.
    let (status, _) = get(addr, "/healthz", "Host: 127.0.0.1\r\n");
    assert_eq!(status, 200);
    assert_eq!(hub.refused_connection_limit(), 0);
    // The SSE clients were never the ones closed.
    hub.status("{\"state\":\"running\"}".into());
    for (i, s) in sse.iter_mut().enumerate() {
        let mut b = [0u8; 256];
        let n = s.read(&mut b).unwrap_or(0);
        assert!(n > 0, "SSE client {i} lost its connection");
    }
    drop(sse);
    // An idle connection is closed after header_timeout_ms (bounded wait).
    let t0 = Instant::now();
    let mut lone = loop {
        // The SSE slots are given back as the server notices the clients left.
        let mut s = TcpStream::connect(addr).unwrap();
        if !closed_by_server(&mut s, Duration::from_millis(200))
            || t0.elapsed() > Duration::from_secs(10)
        {
            break s;
        }
    };
    assert!(
        closed_by_server(&mut lone, Duration::from_secs(15)),
        "an idle connection never timed out"
    );
    server.shutdown(Duration::from_secs(2));
}

/// A request on a fresh connection with the head given as is: its status.
fn status_of(addr: SocketAddr, head: &str) -> u16 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Issue 34, defect 2: 64 held `GET /events` locked `/healthz`, `/metrics` and the
/// overlay out for as long as they stayed open. SSE clients have a cap of their own,
/// below the connection cap, so health checks and scrapes always find a slot; caption
/// downloads have theirs, so SSE clients cannot starve them either.
#[test]
fn held_sse_clients_never_lock_out_health_checks_and_scrapes() {
    let d = tempfile::tempdir().unwrap();
    let vtt = d.path().join("live.vtt");
    std::fs::write(&vtt, vec![b'x'; 32 << 20]).unwrap();
    let captions = CaptionsConfig {
        vtt: Some(vtt),
        ..Default::default()
    };
    let (server, hub) = start(HttpConfig::default(), captions);
    let addr = server.local_addr();
    // The repro: 64 connections, each sending `GET /events` and holding on.
    let mut held: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
            s
        })
        .collect();
    // Whatever the order they were served in: 32 streams (half of max_connections),
    // the other requests answered 503 at once.
    let t0 = Instant::now();
    while hub.refused_sse_limit() + hub.clients() < 64 {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "not every request answered"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!((hub.clients(), hub.refused_sse_limit()), (32, 32));
    for path in ["/healthz", "/metrics", "/"] {
        let (status, _) = get(addr, path, "Host: 127.0.0.1\r\n");
        assert!(status == 200 || status == 404, "{path}: {status}");
    }
    assert_eq!(hub.refused_connection_limit(), 0);
    // Caption downloads have slots of their own: served while SSE clients fill theirs.
    assert_eq!(get(addr, "/captions.vtt", "Host: 127.0.0.1\r\n").0, 200);
    // Downloads nobody reads (32 MiB: more than the socket buffers take) hold the
    // download slots only; one more is refused, a health check is not.
    let slow: Vec<TcpStream> = (0..MAX_CAPTION_DOWNLOADS)
        .map(|_| {
            let mut s = TcpStream::connect(addr).unwrap();
            write!(s, "GET /captions.vtt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
            s
        })
        .collect();
    let t0 = Instant::now();
    while get(addr, "/captions.vtt", "Host: 127.0.0.1\r\n").0 != 503 {
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "downloads never capped"
        );
    }
    assert!(hub.refused_download_limit() >= 1);
    assert_eq!(get(addr, "/healthz", "Host: 127.0.0.1\r\n").0, 200);
    drop(slow);
    held.clear();
    server.shutdown(Duration::from_secs(2));
}

/// Issue 34, "to decide": a request without a `Host` header, or with two, was served.
/// RFC 9112 (3.2) says 400, and so does the listener now, on every route.
#[test]
fn a_request_needs_exactly_one_host_header() {
    let (server, hub) = start(HttpConfig::default(), CaptionsConfig::default());
    let addr = server.local_addr();
    for path in ["/healthz", "/metrics", "/events"] {
        let none = format!("GET {path} HTTP/1.1\r\nConnection: close\r\n\r\n");
        assert_eq!(status_of(addr, &none), 400, "{path} without Host");
        let two = format!(
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
        );
        assert_eq!(status_of(addr, &two), 400, "{path} with two");
    }
    assert_eq!(hub.refused_bad_request(), 6);
    let one = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    assert_eq!(status_of(addr, one), 200);
    server.shutdown(Duration::from_secs(2));
}

#[test]
fn a_foreign_host_is_refused_unless_allowed_or_a_token_is_set() {
    let (server, hub) = start(HttpConfig::default(), CaptionsConfig::default());
    let addr = server.local_addr();
    let port = addr.port();
    for host in [
        "127.0.0.1".to_string(),
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "LOCALHOST.".into(),
        "obs.localhost".into(),
    ] {
        let (status, _) = get(addr, "/", &format!("Host: {host}\r\n"));
        assert_eq!(status, 200, "Host {host}");
    }
    for host in [
        format!("evil.example:{port}"),
        "evil.example".into(),
        "127.0.0.1.evil.example".into(),
        "localhost.evil.example".into(),
    ] {
        let (status, body) = get(addr, "/events", &format!("Host: {host}\r\n"));
        assert_eq!(status, 403, "Host {host}");
        assert!(String::from_utf8_lossy(&body).contains("allowed_hosts"));
    }
    assert_eq!(hub.refused_host(), 4);
    // /healthz tells nothing and stays reachable for probes by any name.
    assert_eq!(get(addr, "/healthz", "Host: evil.example\r\n").0, 200);
    server.shutdown(Duration::from_secs(2));

    // An allow-list admits its names (and still loopback).
    let (server, _) = start(
        HttpConfig {
            allowed_hosts: vec!["room1.lan".into()],
            ..Default::default()
        },
        CaptionsConfig::default(),
    );
    let addr = server.local_addr();
    assert_eq!(get(addr, "/", "Host: Room1.lan:8790\r\n").0, 200);
    assert_eq!(get(addr, "/", "Host: room2.lan\r\n").0, 403);
    assert_eq!(get(addr, "/", "Host: [::1]:8790\r\n").0, 200);
    server.shutdown(Duration::from_secs(2));

    // With a token, the token is the guard.
    let token = "0123456789abcdef-room1";
    let (server, _) = start(
        HttpConfig {
            token: Some(token.into()),
            ..Default::default()
        },
        CaptionsConfig::default(),
    );
    let addr = server.local_addr();
    let auth = format!("Authorization: Bearer {token}\r\n");
    assert_eq!(get(addr, "/", &format!("Host: room1.lan\r\n{auth}")).0, 200);
    assert_eq!(get(addr, "/", "Host: room1.lan\r\n").0, 401);
    server.shutdown(Duration::from_secs(2));
}

#[test]
fn caption_files_are_streamed_bounded_and_must_be_regular_files() {
    let d = tempfile::tempdir().unwrap();
    // 3 MiB written as captions, served with rotate_mb = 1: 2 MiB at most.
    let big = d.path().join("big.vtt");
    std::fs::write(&big, vec![b'x'; 3 << 20]).unwrap();
    let captions = CaptionsConfig {
        vtt: Some(big),
        srt: Some("/dev/zero".into()),
        rotate_mb: 1,
        ..Default::default()
    };
    let (server, _) = start(HttpConfig::default(), captions);
    let addr = server.local_addr();
    let (status, body) = get(addr, "/captions.vtt", "Host: 127.0.0.1\r\n");
    assert_eq!(status, 200);
    assert_eq!(body.len(), 2 << 20, "served more than rotate_mb + 1 MiB");
    // A device is refused by kind, at once, instead of being read without end.
    let t0 = Instant::now();
    let (status, _) = get(addr, "/captions.srt", "Host: 127.0.0.1\r\n");
    assert_eq!(status, 503);
    assert!(t0.elapsed() < Duration::from_secs(20));
    server.shutdown(Duration::from_secs(2));
}
