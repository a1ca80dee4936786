//! A correction's label, as people send it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::error::RoomError;

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
    type Err = RoomError;
    fn from_str(s: &str) -> Result<Self, RoomError> {
        match s.trim() {
            "sarcastic" => Ok(Label::Sarcastic),
            "not_sarcastic" => Ok(Label::NotSarcastic),
            other => Err(RoomError::BadLabel(other.chars().take(40).collect())),
        }
    }
}
