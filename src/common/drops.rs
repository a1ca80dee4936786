//! The drop registry: every place sarcasmd loses data on purpose, named once.
//!
//! Why it exists: the run summary, `/metrics` and the MQTT stats payload each listed the
//! drop counters by hand, and the three lists drifted (`frames_queue_full` in the summary,
//! `frame_queue_full` in `/metrics`; MQTT stats showed three of them; an MQTT drop was in
//! none). Now a drop is a [`DropReason`]: the code that drops counts it there, with
//! [`DropCounters::add`], and every output walks [`DropReason::ALL`] over one
//! [`DropCounts`] snapshot taken from a run's [`DropRegistry`]. A reason added here shows
//! up in all three outputs under the same name, or the test in `tests/models/drop_registry.rs`
//! fails.
//!
//! Names: where the outputs disagreed, the name `/metrics` already used won, so the
//! Prometheus series (and the Grafana dashboard built on them) survive. A name is a
//! label value of the `/metrics` family given by [`DropReason::family`], or, for
//! [`MetricFamily::Own`], the metric's own name.
//!
//! Not here: work skipped on purpose to keep up, where nothing a client waits for is
//! lost: streaming steps (`stream_steps`), the load-shedding ladder (`load_shed`), and
//! camera frames skipped to stay within `vision.analyse_fps` (`vision_frames`). Those
//! have their own sections in each output.
//!
//! Owners: the pipeline counts in its [`DropRegistry`]; components that outlive a stream
//! or keep their own state (microphone, camera, SSE hub, MQTT sink) count in their own
//! [`DropCounters`] or [`DropCounts`] and are attached to the run's registry as a
//! [`DropSource`], so a read sums them all. `add` is one relaxed atomic add: safe in the
//! microphone's real-time callback (no allocation, lock or log).
//!
//! A leaf module: it imports nothing of the crate, and nothing here can fail, so it has
//! no error type.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::ser::SerializeMap;
use serde::{Serialize, Serializer};

/// Where in the data flow a drop happens (for the docs and the help text).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// A capture device (microphone, camera), before the daemon reads it.
    Device,
    /// Between the audio source and the segmenter.
    Source,
    /// Between the segmenter and the analyser.
    Segmenter,
    /// The interim (partial transcript) decoder.
    Interim,
    /// Between the frame source and the vision analyser.
    Vision,
    /// An output: events file, SSE clients, MQTT.
    Sink,
}

impl Stage {
    pub fn name(self) -> &'static str {
        match self {
            Stage::Device => "device",
            Stage::Source => "source",
            Stage::Segmenter => "segmenter",
            Stage::Interim => "interim",
            Stage::Vision => "vision",
            Stage::Sink => "sink",
        }
    }
}

/// The `/metrics` family a reason is exported in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricFamily {
    /// `sarcasmd_dropped_events_total{reason="<name>"}`: events, requests, frames.
    DroppedEvents,
    /// `sarcasmd_device_dropped_total{what="<name>"}`: lost at a capture device.
    DeviceDropped,
    /// A counter of its own, `sarcasmd_<name>_total` (the audio ring, counted in samples
    /// since before this registry; kept so its series survives).
    Own,
}

impl MetricFamily {
    /// Metric name without the `sarcasmd_` prefix and `_total` suffix; `None` for
    /// [`MetricFamily::Own`], whose metric is named after the reason.
    pub fn metric(self) -> Option<&'static str> {
        match self {
            MetricFamily::DroppedEvents => Some("dropped_events"),
            MetricFamily::DeviceDropped => Some("device_dropped"),
            MetricFamily::Own => None,
        }
    }

    /// The label carrying the reason's name.
    pub fn label(self) -> Option<&'static str> {
        match self {
            MetricFamily::DroppedEvents => Some("reason"),
            MetricFamily::DeviceDropped => Some("what"),
            MetricFamily::Own => None,
        }
    }

    pub fn help(self) -> &'static str {
        match self {
            MetricFamily::DroppedEvents => {
                "Events or requests dropped by a full bounded queue, by reason"
            }
            MetricFamily::DeviceDropped => {
                "Lost at the device, by what: microphone samples the capture callback could not store (ring full), ALSA xruns, camera frames over 15 fps, undecodable, or not taken in time"
            }
            MetricFamily::Own => "",
        }
    }
}

macro_rules! reasons {
    ($($variant:ident = $name:literal, $stage:ident, $fam:ident, $help:literal;)*) => {
        /// Every way sarcasmd drops data on purpose. The name is the one every output uses.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum DropReason {
            $($variant,)*
        }

        impl DropReason {
            /// Every reason, in the order outputs list them.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];

            /// The name in the run summary (`dropped.<name>`), the MQTT stats payload
            /// (`dropped.<name>`) and `/metrics` (see [`DropReason::family`]).
            pub fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $name,)*
                }
            }

            pub fn stage(self) -> Stage {
                match self {
                    $(DropReason::$variant => Stage::$stage,)*
                }
            }

            pub fn family(self) -> MetricFamily {
                match self {
                    $(DropReason::$variant => MetricFamily::$fam,)*
                }
            }

            /// What was lost and when, with the unit.
            pub fn help(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $help,)*
                }
            }
        }
    };
}

reasons! {
    DroppedSamples = "dropped_samples", Source, Own,
        "Audio samples dropped because the ring between source and segmenter was full (live sources)";
    UtteranceQueueFull = "utterance_queue_full", Segmenter, DroppedEvents,
        "Finished utterances dropped because the analysis queue (buffers.utterance_queue) was full (live sources)";
    GapEventQueueFull = "gap_event_queue_full", Source, DroppedEvents,
        "Gap events not delivered because the event queue stayed full for 200 ms (the gap is still counted)";
    PartialAsrBusy = "partial_asr_busy", Interim, DroppedEvents,
        "Interim decode requests skipped while the interim decoder was busy";
    PartialStale = "partial_stale", Interim, DroppedEvents,
        "Interim transcripts dropped because their utterance's final event was already out";
    PartialEventQueueFull = "partial_event_queue_full", Interim, DroppedEvents,
        "Interim transcripts dropped because the event queue was full";
    FrameQueueFull = "frame_queue_full", Vision, DroppedEvents,
        "Camera frames dropped (the oldest) because the vision analyser's queue was full";
    EventsFileBacklogFull = "events_file_backlog_full", Sink, DroppedEvents,
        "Event lines dropped because the events file's backlog was full (writes failing)";
    SseClientLagged = "sse_client_lagged", Sink, DroppedEvents,
        "Messages an SSE client lost by falling more than http.client_buffer behind";
    MqttOfflineQueueFull = "mqtt_offline_queue_full", Sink, DroppedEvents,
        "MQTT events dropped because mqtt.offline_queue events were already held";
    MqttRefused = "mqtt_refused", Sink, DroppedEvents,
        "MQTT events dropped after the broker closed the connection on them repeatedly";
    MqttTooLarge = "mqtt_too_large", Sink, DroppedEvents,
        "MQTT event payloads over 256 KiB, dropped without being queued";
    MqttUnsentAtStop = "mqtt_unsent_at_stop", Sink, DroppedEvents,
        "MQTT events still unacknowledged when the sink stopped (the daemon's end, or [mqtt] changed by a reload) with the broker down or slow";
    MicOverrunSamples = "mic_overrun_samples", Device, DeviceDropped,
        "Microphone samples (16 kHz) the capture callback could not store: its ring was full";
    MicXruns = "mic_xruns", Device, DeviceDropped,
        "Overruns the audio driver reported (ALSA xruns: audio lost before capture saw it)";
    CameraOverRate = "camera_over_rate", Device, DeviceDropped,
        "Camera frames dropped to keep to the camera's frame rate limit (15 fps)";
    CameraCorrupt = "camera_corrupt", Device, DeviceDropped,
        "Camera frames that did not decode (corrupt MJPEG, short YUYV buffer)";
    CameraBacklog = "camera_backlog", Device, DeviceDropped,
        "Decoded camera frames dropped because the reader had not taken the previous ones";
}

const N: usize = DropReason::ALL.len();

impl DropReason {
    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Counts by reason at one moment (or owned under a lock, as the MQTT sink does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DropCounts([u64; N]);

impl Default for DropCounts {
    fn default() -> Self {
        Self([0; N])
    }
}

impl DropCounts {
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()]
    }

    pub fn add(&mut self, reason: DropReason, n: u64) {
        let c = &mut self.0[reason.index()];
        *c = c.saturating_add(n);
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &DropCounts) {
        for &r in DropReason::ALL {
            self.add(r, other.get(r));
        }
    }

    /// Every reason with its count, in [`DropReason::ALL`] order.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(move |&r| (r, self.get(r)))
    }

    /// Every reason by name, zeros included (the run summary's `dropped`).
    pub fn by_name(&self) -> std::collections::BTreeMap<String, u64> {
        self.iter()
            .map(|(r, n)| (r.name().to_string(), n))
            .collect()
    }
}

/// A JSON object of every reason by name, zeros included.
impl Serialize for DropCounts {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(N))?;
        for (r, n) in self.iter() {
            m.serialize_entry(r.name(), &n)?;
        }
        m.end()
    }
}

/// Live counters by reason, shared between the thread that drops and whoever reads.
#[derive(Debug)]
pub struct DropCounters([AtomicU64; N]);

impl Default for DropCounters {
    fn default() -> Self {
        Self(std::array::from_fn(|_| AtomicU64::new(0)))
    }
}

impl DropCounters {
    /// Count `n` lost to `reason` (samples, frames, events or requests, as its help says).
    pub fn add(&self, reason: DropReason, n: u64) {
        self.0[reason.index()].fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason.index()].load(Ordering::Relaxed)
    }

    pub fn snapshot(&self) -> DropCounts {
        let mut c = DropCounts::default();
        for &r in DropReason::ALL {
            c.add(r, self.get(r));
        }
        c
    }
}

/// Anything that counts drops of its own and can say how many so far.
pub trait DropSource: Send + Sync {
    fn drop_counts(&self) -> DropCounts;
}

impl DropSource for DropCounters {
    fn drop_counts(&self) -> DropCounts {
        self.snapshot()
    }
}

/// A source's counts from the moment it was attached: for a component that outlives a
/// stream (the MQTT sink kept across a reload), so that each stream's summary counts
/// only its own drops.
pub struct DropDelta {
    source: Arc<dyn DropSource>,
    base: DropCounts,
}

impl DropDelta {
    pub fn new(source: Arc<dyn DropSource>) -> Self {
        let base = source.drop_counts();
        Self { source, base }
    }
}

impl DropSource for DropDelta {
    fn drop_counts(&self) -> DropCounts {
        let now = self.source.drop_counts();
        let mut d = DropCounts::default();
        for &r in DropReason::ALL {
            d.add(r, now.get(r).saturating_sub(self.base.get(r)));
        }
        d
    }
}

/// One run's drops: its own counters plus every attached source, read as one.
#[derive(Default)]
pub struct DropRegistry {
    own: DropCounters,
    attached: Mutex<Vec<Arc<dyn DropSource>>>,
}

impl fmt::Debug for DropRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DropRegistry")
            .field("counts", &self.snapshot())
            .finish()
    }
}

impl DropRegistry {
    /// Count `n` lost to `reason` in the pipeline itself.
    pub fn add(&self, reason: DropReason, n: u64) {
        self.own.add(reason, n);
    }

    /// Add a component's own counts to every later [`DropRegistry::snapshot`].
    pub fn attach(&self, source: Arc<dyn DropSource>) {
        self.lock().push(source);
    }

    /// One reason, summed over the pipeline and every attached source.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.snapshot().get(reason)
    }

    /// Every reason, summed over the pipeline and every attached source.
    pub fn snapshot(&self) -> DropCounts {
        let mut all = self.own.snapshot();
        for s in self.lock().iter() {
            all.merge(&s.drop_counts());
        }
        all
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<dyn DropSource>>> {
        // A list of handles stays valid whatever a panicking thread was doing with it.
        self.attached.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_labelled_where_their_family_says() {
        let mut names: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), N);
        for &r in DropReason::ALL {
            assert!(!r.help().is_empty(), "{r} has no help");
            assert!(
                r.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{r}: not a Prometheus-friendly name"
            );
            assert_eq!(r.family().label().is_some(), r.family().metric().is_some());
        }
    }

    #[test]
    fn a_delta_counts_from_where_its_source_stood_when_attached() {
        let kept = Arc::new(DropCounters::default());
        kept.add(DropReason::MqttRefused, 4);
        let reg = DropRegistry::default();
        reg.attach(Arc::new(DropDelta::new(kept.clone())));
        assert_eq!(reg.get(DropReason::MqttRefused), 0);
        kept.add(DropReason::MqttRefused, 1);
        assert_eq!(reg.get(DropReason::MqttRefused), 1);
    }

    #[test]
    fn a_registry_sums_its_own_counts_and_every_attached_source() {
        let reg = DropRegistry::default();
        reg.add(DropReason::UtteranceQueueFull, 2);
        let mic = Arc::new(DropCounters::default());
        mic.add(DropReason::MicXruns, 3);
        reg.attach(mic.clone());
        let other = Arc::new(DropCounters::default());
        other.add(DropReason::UtteranceQueueFull, 5);
        reg.attach(other);
        mic.add(DropReason::MicXruns, 1);
        let s = reg.snapshot();
        assert_eq!(s.get(DropReason::UtteranceQueueFull), 7);
        assert_eq!(s.get(DropReason::MicXruns), 4);
        assert_eq!(s.get(DropReason::FrameQueueFull), 0);
        assert_eq!(s.by_name().len(), N);
        let json = serde_json::to_value(s).unwrap();
        assert_eq!(json["mic_xruns"], 4);
        assert_eq!(json.as_object().unwrap().len(), N);
    }
}
