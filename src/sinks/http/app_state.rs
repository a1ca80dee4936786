//! What every route handler is given: the hub, the metrics, the caption files, the
//! token and host rule, and the shutdown signal.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::watch;

use super::host_rule::HostRule;
use super::hub::Hub;
use crate::common::feedback::Feedback;
use crate::sinks::metrics::Metrics;

#[derive(Clone)]
pub(super) struct AppState {
    pub(super) hub: Arc<Hub>,
    pub(super) metrics: Option<Arc<Metrics>>,
    /// The live caption files, served as written (`[captions]`).
    pub(super) vtt: Option<Arc<PathBuf>>,
    pub(super) srt: Option<Arc<PathBuf>>,
    /// Bytes of a caption file served at most: its rotation size and one cue's slack.
    pub(super) caption_limit_bytes: u64,
    pub(super) token: Option<Arc<str>>,
    pub(super) hosts: Arc<HostRule>,
    pub(super) shutdown: watch::Receiver<bool>,
    /// Where corrections go (`[room]` enabled).
    pub(super) room: Option<Arc<dyn Feedback>>,
}
