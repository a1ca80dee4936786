//! The report's error type.

use std::path::PathBuf;

use thiserror::Error;

use super::limits::{MAX_EVENTS, MAX_STREAM_S};

#[derive(Debug, Error)]
pub enum ReportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a JSON event: {source}")]
    NotJson {
        path: PathBuf,
        line: usize,
        source: serde_json::Error,
    },
    #[error(
        "{path}:{line}: a `{kind}` event without the fields docs/events.md gives it: {source}"
    )]
    BadEvent {
        path: PathBuf,
        line: usize,
        kind: &'static str,
        source: serde_json::Error,
    },
    #[error("{path}:{line}: `{field}` is {value}: not a stream time (finite seconds within 0..={MAX_STREAM_S:e}, end not before start); is this a sarcasmd events file?")]
    BadTime {
        path: PathBuf,
        line: usize,
        field: &'static str,
        value: f64,
    },
    #[error("{path}: more than {MAX_EVENTS} event lines: a report is one meeting; cut the part wanted (e.g. `tail -n 20000`)")]
    TooManyEvents { path: PathBuf },
    #[error("{path} is not a `replay --stats` summary: {source}")]
    Stats {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}
