//! What can go wrong with a correction or the corrections file, each saying what to do.

use std::path::PathBuf;

use thiserror::Error;

use crate::common::feedback::Refusal;

#[derive(Debug, Error)]
pub enum RoomError {
    #[error("event {id} is not held: the daemon keeps the last {kept} events of this stream ({held}); correct it with `sarcasmd feedback --events FILE --labels FILE`")]
    UnknownEvent { id: u64, kept: usize, held: String },
    #[error("event {id} was replaced by event {by} (the speaker went on): correct event {by}")]
    Revised { id: u64, by: u64 },
    #[error("event {id} is already corrected as {label} (correction {seq}): `sarcasmd feedback --forget {seq}` first to change it")]
    AlreadyCorrected {
        id: u64,
        label: &'static str,
        seq: u64,
    },
    #[error("event {id} has no text view score (no transcript, or the text view was shed), so there is nothing the room head could learn from it")]
    NoEmbedding { id: u64 },
    #[error("no event was flagged yet in this stream: name the event by its id")]
    NothingFlagged,
    #[error("no correction {0} in the store (`sarcasmd feedback --list` shows them)")]
    UnknownCorrection(u64),
    #[error("cannot {action} the corrections file {path}: {source}; nothing was recorded (check that the directory exists and is writable by the daemon's user)")]
    Store {
        action: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
}

impl RoomError {
    pub(super) fn store(
        action: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.to_path_buf();
        move |source| RoomError::Store {
            action,
            path,
            source,
        }
    }

    /// How an HTTP or MQTT caller is answered: 404 for what the daemon does not hold,
    /// 409 for a state that refuses it, 500 for the store (400, for what it sent, is
    /// refused before it reaches the room).
    pub fn status(&self) -> u16 {
        match self {
            RoomError::UnknownEvent { .. } | RoomError::UnknownCorrection(_) => 404,
            RoomError::Revised { .. }
            | RoomError::AlreadyCorrected { .. }
            | RoomError::NoEmbedding { .. }
            | RoomError::NothingFlagged => 409,
            RoomError::Store { .. } => 500,
        }
    }

    /// A short machine-readable reason (`reason` in the JSON answers, the refusal metric's label).
    pub fn reason(&self) -> &'static str {
        match self {
            RoomError::UnknownEvent { .. } => "unknown_event",
            RoomError::Revised { .. } => "revised",
            RoomError::AlreadyCorrected { .. } => "already_corrected",
            RoomError::NoEmbedding { .. } => "no_text_view",
            RoomError::NothingFlagged => "nothing_flagged",
            RoomError::UnknownCorrection(_) => "unknown_correction",
            RoomError::Store { .. } => "store",
        }
    }
}

/// What the feedback routes answer (`crate::common::feedback`).
impl From<RoomError> for Refusal {
    fn from(e: RoomError) -> Self {
        Refusal::new(e.status(), e.reason(), e.to_string())
    }
}
