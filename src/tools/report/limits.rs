//! The input bounds of a report: file sizes, event counts, stream times, ids listed.

/// An events file of a long day is a few MB (about 2 KB per event); a larger file is
/// more than one meeting: cut the part wanted (`tail -n`, `sed -n`).
pub const MAX_EVENTS_BYTES: u64 = 64 << 20;
/// Event lines at most (of any type, partials included).
pub const MAX_EVENTS: usize = 200_000;
/// A `replay --stats` summary is a few KB.
pub const MAX_STATS_BYTES: u64 = 1 << 20;
/// Stream seconds an event may carry: about three years of one stream.
pub const MAX_STREAM_S: f64 = 1e8;
/// Missing utterance ids listed by number (on the timeline and in the transcript); the
/// rest are counted.
pub const MAX_MISSING_LISTED: usize = 1000;
