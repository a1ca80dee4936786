//! An interval a live source lost.

/// An interval of a live stream that was lost, on the stream clock (seconds of 16 kHz
/// audio delivered before it).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SourceGap {
    /// Stream time at which delivery stopped.
    pub start_s: f64,
    /// Wall-clock length of the outage.
    pub duration_s: f64,
    /// Why, for logs and events (e.g. "device disappeared: ...").
    pub reason: String,
}
