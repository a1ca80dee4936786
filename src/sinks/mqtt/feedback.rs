//! Corrections over MQTT: the daemon subscribes to `<prefix>/<device>/feedback` and
//! answers each message on `<prefix>/<device>/feedback/result` (QoS 0, not retained).
//!
//! A message is `{"label": "not_sarcastic"}` (the newest flagged event: what the Home
//! Assistant buttons send), `{"id": 17, "label": "sarcastic"}`, or a bare label. Who may
//! publish to the topic is the broker's ACL: MQTT has no token of ours.

use rumqttc::QoS;
use serde::Deserialize;

use super::state::{Kind, Shared};
use crate::common::feedback::{Label, Refusal};

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<u64>,
    label: String,
}

fn parse(payload: &[u8]) -> Result<(Option<u64>, Label), (u16, &'static str, String)> {
    let text = std::str::from_utf8(payload)
        .map_err(|_| (400, "bad_body", "the payload is not UTF-8".to_string()))?
        .trim();
    let (id, label) = if text.starts_with('{') {
        let m: Message = serde_json::from_str(text).map_err(|e| {
            (
                400,
                "bad_body",
                format!("expected {{\"id\": N, \"label\": \"sarcastic\"|\"not_sarcastic\"}}: {e}"),
            )
        })?;
        (m.id, m.label)
    } else {
        (None, text.trim_matches('"').to_string())
    };
    let label = label
        .parse::<Label>()
        .map_err(|e: Refusal| (e.status(), e.reason(), e.to_string()))?;
    Ok((id, label))
}

/// Handles one message on the feedback topic (on the client thread: the store's sync
/// takes milliseconds, and events wait in the sink's own queue meanwhile).
pub(super) fn on_feedback(sh: &Shared, payload: &[u8]) {
    let refused = |e: Refusal| {
        let mut v = e.answer();
        v["status_code"] = e.status().into();
        v
    };
    let answer = match (&sh.room, parse(payload)) {
        (None, _) => refused(Refusal::disabled()),
        (Some(room), Err((code, reason, error))) => {
            room.count_refused(reason);
            serde_json::json!({ "status_code": code, "reason": reason, "error": error })
        }
        (Some(room), Ok((id, label))) => match room.correct(id, label, "mqtt") {
            Ok(r) => {
                let mut v = serde_json::to_value(&r).expect("serialises");
                v["status_code"] = r.status_code().into();
                v
            }
            Err(e) => refused(e),
        },
    };
    if answer["status_code"].as_u64().is_some_and(|c| c >= 400) {
        log::warn!("mqtt: feedback refused: {}", answer["error"]);
    }
    let mut st = sh.lock();
    if st.connected && !st.stop {
        let topic = format!("{}/result", sh.topics.feedback);
        sh.hand_control(
            &mut st,
            &topic,
            QoS::AtMostOnce,
            false,
            answer.to_string().into_bytes(),
            Kind::Stats,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_parse_with_or_without_an_id_and_bad_ones_say_why() {
        assert_eq!(
            parse(br#"{"label":"not_sarcastic"}"#).unwrap(),
            (None, Label::NotSarcastic)
        );
        assert_eq!(
            parse(br#"{"id":4,"label":"sarcastic"}"#).unwrap(),
            (Some(4), Label::Sarcastic)
        );
        assert_eq!(parse(b"sarcastic").unwrap(), (None, Label::Sarcastic));
        assert_eq!(
            parse(br#""not_sarcastic""#).unwrap(),
            (None, Label::NotSarcastic)
        );
        assert_eq!(parse(br#"{"label":"maybe"}"#).unwrap_err().1, "bad_label");
        assert_eq!(parse(br#"{"id":"x"}"#).unwrap_err().1, "bad_body");
        assert_eq!(parse(&[0xff, 0xfe]).unwrap_err().0, 400);
    }
}
