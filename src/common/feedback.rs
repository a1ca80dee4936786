//! Corrections from the room as the outputs that take them see it: the HTTP routes and
//! the MQTT topic hand a person's label to a [`Feedback`], and `/metrics` reads its
//! counts. The room head (`views::room`) implements it; the outputs (`sinks`) hold it as
//! `Arc<dyn Feedback>`. Defined here, below both, so the outputs and the views stand side
//! by side and neither imports the other.
//!
//! The words of the exchange live here too: a [`Label`], what a correction did
//! ([`Recorded`]), a correction as listed ([`Listed`]), a refusal with its HTTP status
//! and reason ([`Refusal`]), and the counts ([`RoomStats`]).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// A correction's label, as people send it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Sarcastic,
    NotSarcastic,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Sarcastic => "sarcastic",
            Label::NotSarcastic => "not_sarcastic",
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Label {
    type Err = Refusal;
    fn from_str(s: &str) -> Result<Self, Refusal> {
        match s.trim() {
            "sarcastic" => Ok(Label::Sarcastic),
            "not_sarcastic" => Ok(Label::NotSarcastic),
            other => Err(Refusal::new(
                400,
                "bad_label",
                format!(
                    "bad label {:?}: use \"sarcastic\" or \"not_sarcastic\"",
                    other.chars().take(40).collect::<String>()
                ),
            )),
        }
    }
}

/// A correction refused: how an HTTP or MQTT caller is answered (400 for what it sent,
/// 404 for what the daemon does not hold, 409 for a state that refuses it, 500 for the
/// store), a short machine-readable reason (the refusal metric's label) and what to do.
#[derive(Debug, Clone, PartialEq, Error)]
#[error("{message}")]
pub struct Refusal {
    status: u16,
    reason: &'static str,
    message: String,
}

impl Refusal {
    pub fn new(status: u16, reason: &'static str, message: String) -> Self {
        Self {
            status,
            reason,
            message,
        }
    }

    /// Room learning is off in this config (`[room]`).
    pub fn disabled() -> Self {
        Self::new(
            409,
            "disabled",
            "room learning is off: set `[room] enabled = true` to accept corrections".into(),
        )
    }

    pub fn status(&self) -> u16 {
        self.status
    }

    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// The JSON answer's body: `{"reason", "error"}` (MQTT adds `status_code`).
    pub fn answer(&self) -> serde_json::Value {
        serde_json::json!({ "reason": self.reason, "error": self.message })
    }
}

/// What a correction did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recorded {
    /// `recorded`, or `unchanged` when the event already had this label.
    pub status: &'static str,
    pub correction: u64,
    pub event: u64,
    pub label: Label,
    /// Corrections the room head holds now.
    pub corrections: usize,
}

impl Recorded {
    /// 201 for a new correction, 200 for the same label again (HTTP and MQTT answer alike).
    pub fn status_code(&self) -> u16 {
        if self.status == "recorded" {
            201
        } else {
            200
        }
    }
}

/// One correction as `GET /feedback` and `sarcasmd feedback --list` show it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Listed {
    pub correction: u64,
    pub event: u64,
    pub label: Label,
    pub source: String,
    pub at_unix_ms: u64,
    pub p_shipped: f32,
    /// Only with `room.keep_transcripts`.
    pub transcript: Option<String>,
}

/// The room's counts read at once (`/metrics`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RoomStats {
    pub corrections_held: u64,
    pub sarcastic: u64,
    pub not_sarcastic: u64,
    pub refused: BTreeMap<&'static str, u64>,
    pub refits: u64,
    pub muted: u64,
    pub dropped: u64,
    pub lines_skipped: u64,
}

/// Where corrections go: what the feedback routes and `/metrics` may do with the room.
pub trait Feedback: Send + Sync + fmt::Debug {
    /// A correction of event `id` (`None`: the newest flagged one) from `source`
    /// (`http`, `mqtt`); synced to the store before it returns.
    fn correct(&self, id: Option<u64>, label: Label, source: &str) -> Result<Recorded, Refusal>;
    /// Takes correction `seq` back.
    fn forget(&self, seq: u64) -> Result<Listed, Refusal>;
    /// The corrections held, oldest first.
    fn list(&self) -> Vec<Listed>;
    /// A correction refused before it reached the room (bad input, no token), counted.
    fn count_refused(&self, reason: &'static str);
    fn stats(&self) -> RoomStats;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_label_is_refused_as_bad_input_and_says_which_labels_there_are() {
        assert_eq!(" not_sarcastic ".parse::<Label>(), Ok(Label::NotSarcastic));
        let e = "maybe".parse::<Label>().unwrap_err();
        assert_eq!((e.status(), e.reason()), (400, "bad_label"));
        assert_eq!(
            e.to_string(),
            "bad label \"maybe\": use \"sarcastic\" or \"not_sarcastic\""
        );
        assert_eq!(
            e.answer(),
            serde_json::json!({"reason": "bad_label", "error": e.to_string()})
        );
        assert_eq!(Refusal::disabled().status(), 409);
    }
}
