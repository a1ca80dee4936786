use super::*;
use serde_json::Value;
use std::path::PathBuf;

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
fn credentials_longer_than_an_mqtt_string_are_refused() {
    let long = "u".repeat(70_000);
    let c = MqttConfig {
        enabled: true,
        username: Some(long.clone()),
        ..cfg()
    };
    let e = c.validate().unwrap_err();
    assert_eq!(e.field, "mqtt.username");
    assert!(e.reason.contains("65535"), "{}", e.reason);
    let c = MqttConfig {
        username: Some("u".into()),
        password: Some(long),
        ..cfg()
    };
    assert_eq!(c.validate().unwrap_err().field, "mqtt.password");
    let c = MqttConfig {
        username: Some("u".repeat(MAX_STRING_BYTES)),
        ..cfg()
    };
    assert_eq!(c.validate(), Ok(()));
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

/// Bad values of the broker, the topics and the identities, each with the field named.
fn broker_and_topic_cases() -> Vec<(MqttConfig, &'static str)> {
    vec![
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
    ]
}

/// Bad values of the queue, the login, TLS and the reconnect pacing.
fn queue_login_tls_cases() -> Vec<(MqttConfig, &'static str)> {
    vec![
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
    ]
}

#[test]
fn validation_names_the_field() {
    let cases = broker_and_topic_cases()
        .into_iter()
        .chain(queue_login_tls_cases());
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
    assert_eq!(apply_disconnect(&mut st, Close::ByBroker), 1);
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
    assert_eq!(apply_disconnect(&mut st, Close::ByBroker), 0);
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
        apply_disconnect(&mut st, Close::ByBroker);
    }
    assert_eq!(st.stats.drops.get(DropReason::MqttRefused), 1);
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
        apply_disconnect(&mut st, Close::ByBroker);
        st.waiting.clear();
    }
    assert_eq!(st.stats.drops.get(DropReason::MqttRefused), 0);
}

#[test]
fn a_stalled_broker_refuses_nothing_however_often_we_give_up_on_it() {
    let mut st = State::default();
    held_event(&mut st, b"e");
    for _ in 0..(3 * MAX_CLOSES_UNACKED) {
        apply_written(&mut st, 1);
        assert_eq!(apply_disconnect(&mut st, Close::Stalled), 1);
        for p in std::mem::take(&mut st.waiting) {
            held_event(&mut st, &p);
        }
    }
    assert_eq!(st.stats.drops.get(DropReason::MqttRefused), 0);
    assert_eq!(st.events_in_flight, 1, "the event is still held");
    use rumqttc::{ConnectionError as E, StateError};
    assert_eq!(
        Close::of(&E::MqttState(StateError::AwaitPingResp)),
        Close::Stalled
    );
    assert_eq!(Close::of(&E::NetworkTimeout), Close::Stalled);
    assert_eq!(
        Close::of(&E::MqttState(StateError::ConnectionAborted)),
        Close::ByBroker
    );
    let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
    assert_eq!(Close::of(&E::Io(reset)), Close::ByBroker);
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
    let with_room = discovery_messages(&c, true);
    assert_eq!(with_room.len(), 4);
    let (t, b) = &with_room[2];
    assert_eq!(t, "ha/button/pi-kitchen/feedback_not_sarcastic/config");
    assert_eq!(b["command_topic"], "sarcasmd/pi-kitchen/feedback");
    assert_eq!(b["payload_press"], r#"{"label":"not_sarcastic"}"#);
    assert_eq!(with_room[3].1["payload_press"], r#"{"label":"sarcastic"}"#);
    let msgs = discovery_messages(&c, false);
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
