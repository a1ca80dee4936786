//! The MQTT sink against a real mosquitto on loopback (plain and mutual TLS).
//! Needs `mosquitto`, `mosquitto-clients` and `openssl` (scripts/install-system-deps.sh);
//! skips with a message when mosquitto is missing.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::mosquitto::{free_port, Broker, Subscriber};
use sarcasmd::common::drops::DropReason;
use sarcasmd::sinks::mqtt::{MqttConfig, MqttSink, MqttStats};

const T: Duration = Duration::from_secs(20);

fn init_log() {
    let _ = env_logger::builder().is_test(true).try_init();
}

fn config(port: u16, device: &str) -> MqttConfig {
    MqttConfig {
        enabled: true,
        port,
        device_id: Some(device.into()),
        ..MqttConfig::default()
    }
}

fn event(id: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "type": "utterance", "id": id, "p_sarcastic": 0.87, "sarcastic": true
    }))
    .unwrap()
}

fn ids(sub: &Subscriber, topic: &str) -> Vec<u64> {
    sub.payloads(topic)
        .iter()
        .map(|p| {
            serde_json::from_str::<serde_json::Value>(p).unwrap()["id"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

fn wait_stats(sink: &MqttSink, pred: impl Fn(&MqttStats) -> bool) -> MqttStats {
    let deadline = Instant::now() + T;
    loop {
        let s = sink.stats();
        if pred(&s) {
            return s;
        }
        assert!(Instant::now() < deadline, "stats never matched: {s:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn events_arrive_in_order_with_status_and_discovery() {
    init_log();
    let Some(broker) = Broker::start() else {
        return;
    };
    let sub = Subscriber::start(broker.port(), "t1-sub", "#");
    let cfg = MqttConfig {
        ha_discovery: true,
        ..config(broker.port(), "dev1")
    };
    let t0 = Instant::now();
    let sink = MqttSink::start(&cfg).unwrap();
    wait_stats(&sink, |s| s.connected);
    println!("connected {:?} after start", t0.elapsed());
    for id in 0..50 {
        sink.publish_event(&event(id));
    }
    sink.publish_stats(br#"{"utterances":50}"#);
    let ev = cfg.topic("event");
    assert!(
        sub.wait_for(|_| ids(&sub, &ev).len() >= 50, T),
        "got {:?}",
        sub.lines()
    );
    assert_eq!(ids(&sub, &ev), (0..50).collect::<Vec<_>>());
    let s = wait_stats(&sink, |s| s.published == 50);
    assert_eq!(
        (
            s.sent,
            s.failed,
            s.queued,
            s.connects,
            s.drops.get(DropReason::MqttOfflineQueueFull)
        ),
        (50, 0, 0, 1, 0)
    );
    assert!(sub.wait_for(|l| l.iter().any(|(t, _)| t.ends_with("/stats")), T));
    assert_eq!(sub.payloads(&cfg.topic("status")), vec!["online"]);

    // Retained: a subscriber arriving later still gets status and both discovery configs.
    let late = Subscriber::start(broker.port(), "t1-late", "#");
    let want = [
        cfg.topic("status"),
        "homeassistant/binary_sensor/dev1/sarcasm/config".to_string(),
        "homeassistant/sensor/dev1/sarcasm_score/config".to_string(),
    ];
    assert!(
        late.wait_for(|l| want.iter().all(|w| l.iter().any(|(t, _)| t == w)), T),
        "retained messages missing: {:?}",
        late.lines()
    );
    assert_eq!(late.payloads(&cfg.topic("status")), vec!["online"]);
    assert!(late.payloads(&ev).is_empty(), "events must not be retained");
    let b: serde_json::Value = serde_json::from_str(&late.payloads(&want[1])[0]).unwrap();
    assert_eq!(b["state_topic"], ev.as_str());
    assert_eq!(b["availability_topic"], cfg.topic("status").as_str());
    let t = Instant::now();
    let fin = sink.shutdown(Duration::from_secs(5));
    println!("shutdown took {:?}: {fin:?}", t.elapsed());
}

#[test]
fn events_published_while_broker_is_down_arrive_after_restart() {
    init_log();
    let Some(mut broker) = Broker::start() else {
        return;
    };
    let sub = Subscriber::start(broker.port(), "t2-sub", "sarcasmd/#");
    let cfg = config(broker.port(), "dev2");
    let ev = cfg.topic("event");
    let sink = MqttSink::start(&cfg).unwrap();
    wait_stats(&sink, |s| s.connected);
    for id in 0..3 {
        sink.publish_event(&event(id));
    }
    assert!(sub.wait_for(|_| ids(&sub, &ev).len() == 3, T));

    broker.stop();
    let t_down = Instant::now();
    wait_stats(&sink, |s| !s.connected);
    println!("loss noticed {:?} after broker stop", t_down.elapsed());
    for id in 3..23 {
        sink.publish_event(&event(id));
    }
    assert_eq!(sink.stats().queued, 20);
    broker.start_again();
    let t_up = Instant::now();
    let s = wait_stats(&sink, |s| s.connected);
    println!(
        "reconnected {:?} after broker restart (down {:?})",
        t_up.elapsed(),
        t_down.elapsed()
    );
    assert_eq!(s.connects, 2);
    assert!(s.last_error.is_some());
    assert!(
        sub.wait_for(
            |_| ids(&sub, &ev).iter().collect::<BTreeSet<_>>().len() == 23,
            T
        ),
        "got {:?}",
        ids(&sub, &ev)
    );
    println!("all 23 delivered {:?} after restart", t_up.elapsed());
    let got = ids(&sub, &ev);
    assert_eq!(got, (0..23).collect::<Vec<_>>(), "order or duplicates");
    let s = wait_stats(&sink, |s| s.published == 23);
    assert_eq!(
        (s.queued, s.drops.get(DropReason::MqttOfflineQueueFull)),
        (0, 0)
    );
    // "online" again after the reconnect (retained copy restored from persistence, then fresh).
    assert_eq!(
        sub.payloads(&cfg.topic("status"))
            .last()
            .map(String::as_str),
        Some("online")
    );
    sink.shutdown(Duration::from_secs(5));
}

#[test]
fn events_in_flight_when_the_broker_dies_are_resent() {
    init_log();
    let Some(mut broker) = Broker::start() else {
        return;
    };
    let sub = Subscriber::start(broker.port(), "t6-sub", "sarcasmd/#");
    let cfg = MqttConfig {
        reconnect_min_ms: 100,
        offline_queue: 5000,
        ..config(broker.port(), "dev6")
    };
    let ev = cfg.topic("event");
    let sink = MqttSink::start(&cfg).unwrap();
    wait_stats(&sink, |s| s.connected);
    const N: u64 = 2000;
    for id in 0..N {
        sink.publish_event(&event(id));
    }
    // Stop while a good part is still in flight or queued.
    broker.stop();
    let at_stop = sink.stats();
    println!("at broker stop: {at_stop:?}");
    broker.start_again();
    let s = wait_stats(&sink, |s| s.queued == 0);
    println!("sink after restart: {s:?}");
    assert!(
        sub.wait_for(
            |_| ids(&sub, &ev).iter().collect::<BTreeSet<_>>().len() == N as usize,
            T
        ),
        "missing: {:?} of {N}; broker log:\n{}",
        {
            let got: BTreeSet<u64> = ids(&sub, &ev).into_iter().collect();
            (0..N).filter(|i| !got.contains(i)).collect::<Vec<_>>()
        },
        broker
            .log()
            .lines()
            .filter(|l| !l.contains("PUBLISH") && !l.contains("PUBACK"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let got = ids(&sub, &ev);
    println!(
        "delivered {} messages for {N} events ({} duplicates)",
        got.len(),
        got.len() - N as usize
    );
    let s = wait_stats(&sink, |s| s.queued == 0);
    assert!(
        s.published >= N && s.connects == 2 && s.drops.get(DropReason::MqttOfflineQueueFull) == 0,
        "{s:?}"
    );
    sink.shutdown(Duration::from_secs(5));
}

#[test]
fn full_offline_queue_drops_the_oldest() {
    init_log();
    let Some(mut broker) = Broker::start() else {
        return;
    };
    let sub = Subscriber::start(broker.port(), "t3-sub", "sarcasmd/#");
    let cfg = MqttConfig {
        offline_queue: 5,
        ..config(broker.port(), "dev3")
    };
    let ev = cfg.topic("event");
    let sink = MqttSink::start(&cfg).unwrap();
    wait_stats(&sink, |s| s.connected);
    broker.stop();
    wait_stats(&sink, |s| !s.connected);
    for id in 0..12 {
        sink.publish_event(&event(id));
    }
    let s = sink.stats();
    assert_eq!(
        (s.drops.get(DropReason::MqttOfflineQueueFull), s.queued),
        (7, 5),
        "{s:?}"
    );
    broker.start_again();
    assert!(
        sub.wait_for(|_| ids(&sub, &ev).len() >= 5, T),
        "got {:?}",
        sub.lines()
    );
    wait_stats(&sink, |s| s.published == 5);
    // Give a stray extra message a moment to show up before checking for exactly five.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(ids(&sub, &ev), vec![7, 8, 9, 10, 11]);
    let s = sink.shutdown(Duration::from_secs(5));
    assert_eq!(
        (
            s.drops.get(DropReason::MqttOfflineQueueFull),
            s.published,
            s.queued
        ),
        (7, 5, 0)
    );
}

#[test]
fn shutdown_publishes_retained_offline() {
    init_log();
    let Some(broker) = Broker::start() else {
        return;
    };
    let cfg = config(broker.port(), "dev4");
    let sink = MqttSink::start(&cfg).unwrap();
    wait_stats(&sink, |s| s.connected);
    for id in 0..100 {
        sink.publish_event(&event(id));
    }
    let t = Instant::now();
    let s = sink.shutdown(Duration::from_secs(10));
    println!(
        "graceful shutdown with 100 events took {:?}: {s:?}",
        t.elapsed()
    );
    assert_eq!(
        (s.published, s.queued, s.connected),
        (100, 0, false),
        "{s:?}"
    );
    let fresh = Subscriber::start(broker.port(), "t4-fresh", &cfg.topic("status"));
    assert!(fresh.wait_for(|l| !l.is_empty(), T));
    assert_eq!(fresh.payloads(&cfg.topic("status")), vec!["offline"]);
    assert!(broker.log().contains("sarcasmd-dev4"), "client id used");
}

#[test]
fn drop_without_shutdown_also_leaves_offline() {
    init_log();
    let Some(broker) = Broker::start() else {
        return;
    };
    let cfg = config(broker.port(), "dev7");
    let sink = MqttSink::start(&cfg).unwrap();
    wait_stats(&sink, |s| s.connected);
    sink.publish_event(&event(1));
    let t = Instant::now();
    drop(sink);
    println!("drop took {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(2));
    let fresh = Subscriber::start(broker.port(), "t7-fresh", &cfg.topic("status"));
    assert!(fresh.wait_for(|l| !l.is_empty(), T));
    assert_eq!(fresh.payloads(&cfg.topic("status")), vec!["offline"]);
}

#[test]
fn broker_down_for_the_whole_life_does_not_hang() {
    init_log();
    // Nothing listens here: every connect is refused.
    let cfg = config(free_port(), "dev5");
    let t = Instant::now();
    let sink = MqttSink::start(&cfg).unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(200),
        "start must not wait for the broker"
    );
    for id in 0..3 {
        sink.publish_event(&event(id));
    }
    sink.publish_stats(b"{}");
    std::thread::sleep(Duration::from_millis(50));
    let t = Instant::now();
    let s = sink.shutdown(Duration::from_millis(500));
    let took = t.elapsed();
    println!("shutdown(500 ms) with broker down took {took:?}: {s:?}");
    assert!(took < Duration::from_millis(1200), "took {took:?}");
    assert_eq!(
        (s.connects, s.queued, s.published, s.connected),
        (0, 3, 0, false)
    );
    assert!(s.last_error.is_some());

    // Dropping without shutdown is bounded too.
    let sink = MqttSink::start(&cfg).unwrap();
    sink.publish_event(&event(9));
    let t = Instant::now();
    drop(sink);
    println!("drop with broker down took {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_millis(1800));
}

#[test]
fn oversized_event_is_dropped_not_fatal() {
    init_log();
    let Some(broker) = Broker::start() else {
        return;
    };
    let sub = Subscriber::start(broker.port(), "t8-sub", "sarcasmd/#");
    let cfg = config(broker.port(), "dev8");
    let ev = cfg.topic("event");
    let sink = MqttSink::start(&cfg).unwrap();
    sink.publish_event(&vec![b'x'; sarcasmd::sinks::mqtt::MAX_PAYLOAD_BYTES + 1]);
    // A large but legal payload goes through rumqttc's packet limit.
    let mut big = event(1);
    big.extend(std::iter::repeat_n(b' ', 200 * 1024));
    sink.publish_event(&big);
    sink.publish_event(&event(2));
    assert!(
        sub.wait_for(|_| ids(&sub, &ev).len() == 2, T),
        "{:?}",
        sink.stats()
    );
    let s = wait_stats(&sink, |s| s.published == 2);
    assert_eq!((s.drops.get(DropReason::MqttTooLarge), s.connects), (1, 1));
    sink.shutdown(Duration::from_secs(5));
}

#[test]
fn events_the_broker_refuses_by_closing_are_not_published() {
    init_log();
    // mosquitto drops the connection of a client whose packet is over its
    // max_packet_size; MQTT 3.1.1 has no way to refuse a single publish.
    let Some(broker) = Broker::start_with("max_packet_size 1024") else {
        return;
    };
    let cfg = MqttConfig {
        reconnect_min_ms: 50,
        reconnect_max_ms: 200,
        ..config(broker.port(), "dev9")
    };
    let sub = Subscriber::start(broker.port(), "t9-sub", "sarcasmd/#");
    let ev = cfg.topic("event");
    let sink = MqttSink::start(&cfg).unwrap();
    let mut big = event(1);
    big.extend(std::iter::repeat_n(b' ', 2048));
    sink.publish_event(&big);
    sink.publish_event(&event(2));
    // Refused three times (written, connection closed, re-sent after reconnecting),
    // never counted as published, then dropped so the event behind it gets through.
    let s = wait_stats(&sink, |s| {
        s.drops.get(DropReason::MqttRefused) == 1 && s.published == 1
    });
    assert!(
        s.failed >= 3 && s.sent >= s.failed && s.reconnect_attempts >= 2 && s.queued == 0,
        "{s:?}"
    );
    assert!(
        sub.wait_for(|_| ids(&sub, &ev) == [2], T),
        "{:?}",
        ids(&sub, &ev)
    );
    assert!(
        broker.log().contains("oversize packet"),
        "the broker did not refuse it:\n{}",
        broker.log()
    );
    sink.shutdown(Duration::from_millis(300));
}

/// A "broker" that answers every CONNECT with a CONNACK and then closes the connection,
/// like a broker behind a proxy that drops it, or one kicking us for a duplicate client id
/// ([`FlappingBroker::start`]); or keeps it open and never reads from it again, like a
/// broker that stalled ([`FlappingBroker::stalled`]).
struct FlappingBroker {
    port: u16,
    accepted: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl FlappingBroker {
    fn start() -> Self {
        Self::serve(false)
    }

    fn stalled() -> Self {
        Self::serve(true)
    }

    fn serve(hold: bool) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (n, halt) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !halt.load(Ordering::Relaxed) {
                let Ok((mut conn, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                n.fetch_add(1, Ordering::Relaxed);
                let _ = conn.set_nonblocking(false);
                let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
                // CONNECT: fixed header, remaining length (varint), body.
                let mut b = [0u8; 1];
                if conn.read_exact(&mut b).is_err() || b[0] != 0x10 {
                    continue;
                }
                let (mut len, mut shift) = (0usize, 0);
                loop {
                    if conn.read_exact(&mut b).is_err() {
                        break;
                    }
                    len |= ((b[0] & 0x7f) as usize) << shift;
                    shift += 7;
                    if b[0] & 0x80 == 0 {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                if conn.read_exact(&mut body).is_err() {
                    continue;
                }
                // CONNACK, session not present, accepted; then close, or hold on
                // without reading another byte.
                let _ = conn.write_all(&[0x20, 0x02, 0x00, 0x00]);
                let _ = conn.flush();
                if hold {
                    held.push(conn);
                } else {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        });
        Self {
            port,
            accepted,
            stop,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::Relaxed)
    }
}

impl Drop for FlappingBroker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

#[test]
fn a_broker_that_drops_every_connection_is_backed_off() {
    init_log();
    let broker = FlappingBroker::start();
    let cfg = MqttConfig {
        reconnect_min_ms: 50,
        reconnect_max_ms: 400,
        ..config(broker.port, "dev10")
    };
    let sink = MqttSink::start(&cfg).unwrap();
    sink.publish_event(&event(1));
    let window = Duration::from_secs(3);
    std::thread::sleep(window);
    let conns = broker.accepted();
    let s = sink.stats();
    println!("{conns} connections in {window:?}: {s:?}");
    // Doubling from 50 ms to 400 ms allows about 10 connects in 3 s; resetting the
    // backoff on every ConnAck allowed 53 (measured). A slow machine only makes fewer.
    assert!((3..=15).contains(&conns), "{conns} connections: {s:?}");
    assert!((2..=15).contains(&s.reconnect_attempts), "{s:?}");
    assert_eq!(s.published, 0, "{s:?}");
    sink.shutdown(Duration::from_millis(300));
}

/// Issue 34, defect 10: a broker that sends CONNACK and then stops reading. The
/// client's own keep-alive timeouts were counted as the broker refusing the event, and
/// the event was dropped as `mqtt_refused` after three. A stall refuses nothing: the
/// event stays queued for the broker, however often the connection is given up on.
#[test]
fn a_broker_that_stops_reading_refuses_nothing() {
    init_log();
    let broker = FlappingBroker::stalled();
    let cfg = MqttConfig {
        keep_alive_s: 1,
        reconnect_min_ms: 50,
        reconnect_max_ms: 200,
        ..config(broker.port, "dev34")
    };
    let sink = MqttSink::start(&cfg).unwrap();
    sink.publish_event(&event(1));
    // Each connection: CONNACK, the event written, no answer to the ping, given up.
    let deadline = Instant::now() + Duration::from_secs(90);
    let s = loop {
        let s = sink.stats();
        if s.reconnect_attempts >= 2 * 3 && s.failed >= 2 * 3 {
            break s;
        }
        assert!(Instant::now() < deadline, "too few reconnects: {s:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(s.drops.get(DropReason::MqttRefused), 0, "{s:?}");
    assert_eq!((s.published, s.queued), (0, 1), "{s:?}");
    sink.shutdown(Duration::from_millis(300));
}

/// The MQTT sink over mutual TLS to a real mosquitto, with certificates made by openssl.
mod tls {

    use std::path::Path;
    use std::process::Command;
    use std::time::{Duration, Instant};

    use crate::common::mosquitto::Broker;
    use sarcasmd::sinks::mqtt::{MqttConfig, MqttSink, MqttStats, MqttTlsConfig};

    fn openssl(dir: &Path, args: &[&str]) {
        let st = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("openssl not found");
        assert!(
            st.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&st.stderr)
        );
    }

    /// CA, a server cert for IP 127.0.0.1 and a client cert, all signed by the CA.
    fn make_pki(dir: &Path) {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=test-ca",
            ],
        );
        for (name, ext) in [
            ("server", "subjectAltName=IP:127.0.0.1"),
            ("client", "extendedKeyUsage=clientAuth"),
        ] {
            openssl(
                dir,
                &[
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-keyout",
                    &format!("{name}.key"),
                    "-out",
                    &format!("{name}.csr"),
                    "-subj",
                    &format!("/CN={name}"),
                ],
            );
            std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
            openssl(
                dir,
                &[
                    "x509",
                    "-req",
                    "-in",
                    &format!("{name}.csr"),
                    "-CA",
                    "ca.pem",
                    "-CAkey",
                    "ca.key",
                    "-CAcreateserial",
                    "-out",
                    &format!("{name}.pem"),
                    "-days",
                    "2",
                    "-extfile",
                    &format!("{name}.ext"),
                ],
            );
        }
        // A second, unrelated CA for the negative case.
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-keyout",
                "other.key",
                "-out",
                "other-ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=other-ca",
            ],
        );
    }

    fn wait_stats(sink: &MqttSink, pred: impl Fn(&MqttStats) -> bool) -> MqttStats {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let s = sink.stats();
            if pred(&s) || Instant::now() >= deadline {
                return s;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn mutual_tls_publishes_and_a_wrong_ca_never_connects() {
        if Command::new("openssl").arg("version").output().is_err() {
            println!("SKIP: openssl not installed");
            return;
        }
        let pki = tempfile::tempdir().unwrap();
        let d = pki.path();
        make_pki(d);
        let conf = format!(
            "cafile {0}/ca.pem\ncertfile {0}/server.pem\nkeyfile {0}/server.key\nrequire_certificate true",
            d.display()
        );
        let Some(broker) = Broker::start_with(&conf) else {
            return;
        };
        let tls = MqttTlsConfig {
            ca_file: d.join("ca.pem"),
            client_cert: Some(d.join("client.pem")),
            client_key: Some(d.join("client.key")),
        };
        let cfg = MqttConfig {
            enabled: true,
            port: broker.port(),
            device_id: Some("tls1".into()),
            tls: Some(tls.clone()),
            ..MqttConfig::default()
        };
        let t = Instant::now();
        let sink = MqttSink::start(&cfg).unwrap();
        for id in 0..10u64 {
            sink.publish_event(format!(r#"{{"id":{id}}}"#).as_bytes());
        }
        let s = wait_stats(&sink, |s| s.published == 10);
        println!("TLS: 10 events acked {:?} after start", t.elapsed());
        assert_eq!(
            (s.published, s.connects, s.queued),
            (10, 1, 0),
            "{s:?}\n{}",
            broker.log()
        );
        sink.shutdown(Duration::from_secs(5));

        // Server certificate not signed by the configured CA: retries, never connects.
        let bad = MqttConfig {
            device_id: Some("tls2".into()),
            tls: Some(MqttTlsConfig {
                ca_file: d.join("other-ca.pem"),
                ..tls
            }),
            ..cfg
        };
        let sink = MqttSink::start(&bad).unwrap();
        let s = wait_stats(&sink, |s| s.last_error.is_some());
        std::thread::sleep(Duration::from_millis(300));
        assert!(!sink.stats().connected);
        println!("wrong CA: {:?}", s.last_error);
        assert!(s.last_error.unwrap().to_lowercase().contains("certificate"));
        let s = sink.shutdown(Duration::from_millis(300));
        assert_eq!(s.connects, 0);
    }
}

#[test]
fn username_and_password_are_required_and_used() {
    init_log();
    let pwdir = tempfile::tempdir().unwrap();
    let pwfile = pwdir.path().join("passwd");
    let made = std::process::Command::new("mosquitto_passwd")
        .args(["-b", "-c"])
        .arg(&pwfile)
        .args(["room7", "s3cret-pass"])
        .status();
    if !made.is_ok_and(|s| s.success()) {
        println!("SKIP: mosquitto_passwd not available (package mosquitto)");
        return;
    }
    let conf = format!("allow_anonymous false\npassword_file {}", pwfile.display());
    let Some(broker) = Broker::start_with(&conf) else {
        return;
    };
    let secret = pwdir.path().join("mqtt-password");
    std::fs::write(&secret, "s3cret-pass\n").unwrap();
    // The right credentials, the password from a file as systemd credentials deliver it.
    let good = MqttSink::start(&MqttConfig {
        username: Some("room7".into()),
        password_file: Some(secret),
        ..config(broker.port(), "auth-ok")
    })
    .unwrap();
    for i in 0..5 {
        good.publish_event(&event(i));
    }
    let s = wait_stats(&good, |s| s.published >= 5);
    assert!(
        s.connected && s.drops.get(DropReason::MqttOfflineQueueFull) == 0,
        "{s:?}"
    );
    good.shutdown(Duration::from_secs(2));

    // A wrong password never gets a session and never panics; the error is visible.
    let bad = MqttSink::start(&MqttConfig {
        username: Some("room7".into()),
        password: Some("wrong".into()),
        ..config(broker.port(), "auth-bad")
    })
    .unwrap();
    bad.publish_event(&event(0));
    let s = wait_stats(&bad, |s| s.last_error.is_some());
    assert!(!s.connected && s.published == 0, "{s:?}");
    let s = bad.shutdown(Duration::from_millis(500));
    assert_eq!(s.connects, 0, "{s:?}");
}
