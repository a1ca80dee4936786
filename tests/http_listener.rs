//! The HTTP listener against what an attacker or a careless client does (issue 25,
//! classes 1-3): idle and half-sent connections, more connections than allowed, a
//! foreign `Host` (DNS rebinding), and caption paths that are huge or not files. The
//! listener runs in-process on an ephemeral loopback port; no models are needed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use sarcasmd::sinks::captions::CaptionsConfig;
use sarcasmd::sinks::http::{HttpConfig, HttpServer, Hub};

fn start(cfg: HttpConfig, captions: CaptionsConfig) -> (HttpServer, std::sync::Arc<Hub>) {
    let cfg = HttpConfig {
        enabled: true,
        bind: "127.0.0.1:0".into(),
        ..cfg
    };
    let hub = Hub::new(&cfg, "test");
    let server = HttpServer::start(&cfg, hub.clone(), None, &captions).expect("listener starts");
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
    matches!(s.read(&mut b), Ok(0))
        || matches!(s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
}

#[test]
fn connections_beyond_the_limit_are_closed_and_idle_ones_time_out() {
    let (server, hub) = start(
        HttpConfig {
            max_connections: 4,
            header_timeout_ms: 1_000,
            ..Default::default()
        },
        CaptionsConfig::default(),
    );
    let addr = server.local_addr();
    // Four idle connections (one half-sent) take every slot.
    let mut idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(addr).unwrap()).collect();
    idle[0].write_all(b"GET / HTTP/1.1\r\nHo").unwrap();
    // The fifth is closed at once and counted.
    let mut fifth = TcpStream::connect(addr).unwrap();
    assert!(
        closed_by_server(&mut fifth, Duration::from_secs(10)),
        "a connection beyond max_connections was kept open"
    );
    assert_eq!(hub.refused_connection_limit(), 1);
    // The idle and half-sent ones are closed after header_timeout_ms (bounded wait).
    for (i, s) in idle.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, Duration::from_secs(15)),
            "idle connection {i} never closed"
        );
    }
    // Then a real request gets through again.
    let t0 = Instant::now();
    loop {
        let (status, body) = get(addr, "/healthz", "Host: 127.0.0.1\r\n");
        if status == 200 {
            assert_eq!(body, b"ok\n");
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "status {status}");
        std::thread::sleep(Duration::from_millis(50));
    }
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
