//! The pipeline's units of time: stream samples per second, milliseconds since an
//! instant, and times rounded to the millisecond as events carry them.

use std::time::Instant;

use crate::sources::audio::PIPELINE_RATE_HZ;

/// Stream samples per second.
pub(super) const RATE: f64 = PIPELINE_RATE_HZ as f64;

pub(super) fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub(super) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}
