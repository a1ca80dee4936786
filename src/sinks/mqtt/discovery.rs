//! Home Assistant MQTT discovery messages.

use super::config::MqttConfig;
use super::status::{STATUS_OFFLINE, STATUS_ONLINE};

/// Home Assistant MQTT discovery configs: (topic, payload). Retained, re-sent after every
/// ConnAck so a broker that lost its retained store is repopulated. `feedback`: the room
/// takes corrections, so two buttons send them for the newest flagged event.
pub fn discovery_messages(cfg: &MqttConfig, feedback: bool) -> Vec<(String, serde_json::Value)> {
    use serde_json::json;
    let dev = cfg.device_id();
    let status = cfg.topic("status");
    let event = cfg.topic("event");
    let device = json!({
        "identifiers": [format!("sarcasmd_{dev}")],
        "name": format!("sarcasmd {dev}"),
        "manufacturer": "sarcasmd",
        "model": "sarcasmd edge daemon",
        "sw_version": env!("CARGO_PKG_VERSION"),
    });
    let binary = json!({
        "name": "Sarcasm detected",
        "unique_id": format!("{dev}_sarcasm"),
        "state_topic": event,
        "value_template": "{{ 'ON' if value_json.sarcastic else 'OFF' }}",
        "payload_on": "ON",
        "payload_off": "OFF",
        // Events are instantaneous; fall back to OFF unless another sarcastic one follows.
        "off_delay": 5,
        "availability_topic": status,
        "payload_available": STATUS_ONLINE,
        "payload_not_available": STATUS_OFFLINE,
        "device": device,
    });
    let score = json!({
        "name": "Sarcasm score",
        "unique_id": format!("{dev}_sarcasm_score"),
        "state_topic": event,
        "value_template": "{{ value_json.p_sarcastic }}",
        "state_class": "measurement",
        "availability_topic": status,
        "payload_available": STATUS_ONLINE,
        "payload_not_available": STATUS_OFFLINE,
        "device": device,
    });
    let p = &cfg.discovery_prefix;
    let mut out = vec![
        (format!("{p}/binary_sensor/{dev}/sarcasm/config"), binary),
        (format!("{p}/sensor/{dev}/sarcasm_score/config"), score),
    ];
    if feedback {
        let feedback_topic = cfg.topic("feedback");
        for (key, name, label) in [
            ("not_sarcastic", "Last flag: not sarcastic", "not_sarcastic"),
            ("sarcastic", "Last flag: sarcastic", "sarcastic"),
        ] {
            let button = json!({
                "name": name,
                "unique_id": format!("{dev}_feedback_{key}"),
                "command_topic": feedback_topic,
                "payload_press": json!({ "label": label }).to_string(),
                "availability_topic": status,
                "payload_available": STATUS_ONLINE,
                "payload_not_available": STATUS_OFFLINE,
                "device": device,
            });
            out.push((format!("{p}/button/{dev}/feedback_{key}/config"), button));
        }
    }
    out
}
