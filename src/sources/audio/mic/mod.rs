//! Microphone capture with cpal (ALSA on Linux): any rate, sample format and channel
//! count the device offers, converted to 16 kHz mono.
//!
//! The capture callback runs on cpal's real-time thread and only copies whole frames of
//! raw bytes into a pre-allocated lock-free ring (counting what does not fit); the
//! pipeline's source thread pops, converts, downmixes and resamples in `read_chunk`.
//! A device that stops calling back for `stall_timeout` is reported as lost, so
//! [`super::ReconnectingSource`] can reopen it.
//!
//! Files: this one the stream, its callback and the source; `devices.rs` which device and
//! format; `convert.rs` bytes to 16 kHz mono.

mod convert;
mod devices;
mod error;

pub use convert::*;
pub use devices::*;
pub use error::MicError;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cpal::traits::{DeviceTrait, HostTrait, StreamTrait};
use cpal::ErrorKind;
use ringbuf::traits::{Consumer, Observer, Producer, Split};
use ringbuf::{HeapCons, HeapProd, HeapRb};

use super::error::AudioError;
use super::live::Opener;
use super::rate::PIPELINE_RATE_HZ;
use super::source::AudioSource;
use crate::common::drops::{DropCounters, DropCounts, DropReason, DropSource};

/// Which device and how patient to be with it.
#[derive(Debug, Clone, PartialEq)]
pub struct MicOptions {
    /// An index from `sarcasmd devices`, or a case-insensitive substring of a device's
    /// id or description. `None`: the system's default input.
    pub device: Option<String>,
    /// No callback from the device for this long counts as a lost device.
    pub stall_timeout: Duration,
    /// Capacity of the ring between the capture callback and the reader.
    pub ring: Duration,
}

impl Default for MicOptions {
    fn default() -> Self {
        Self {
            device: None,
            stall_timeout: Duration::from_millis(2_000),
            ring: Duration::from_millis(1_000),
        }
    }
}

/// Counters that outlive a single stream (shared by every reopening of one microphone).
#[derive(Debug, Default)]
pub struct MicCounters {
    /// What the microphone lost: `mic_overrun_samples`, audio the capture callback could
    /// not store because the ring was full (the reader fell behind), in 16 kHz samples
    /// (the unit of the pipeline's other sample drops); and `mic_xruns`, overruns the
    /// driver itself reported (ALSA xruns: audio lost before cpal saw it).
    pub drops: DropCounters,
    /// Callbacks that had to drop something.
    pub overrun_events: AtomicU64,
}

impl DropSource for MicCounters {
    fn drop_counts(&self) -> DropCounts {
        self.drops.snapshot()
    }
}

/// What one stream's callbacks tell its reader.
#[derive(Debug, Default)]
struct StreamShared {
    /// Data callbacks so far: the reader watches it move to detect a stalled device.
    callbacks: AtomicU64,
    /// 0 = no error; otherwise a fatal error kind, see [`kind_code`].
    error: AtomicU8,
}

fn kind_code(k: ErrorKind) -> u8 {
    match k {
        ErrorKind::DeviceNotAvailable => 1,
        ErrorKind::StreamInvalidated => 2,
        ErrorKind::PermissionDenied => 3,
        ErrorKind::DeviceBusy => 4,
        ErrorKind::HostUnavailable => 5,
        ErrorKind::BackendError => 6,
        _ => 7,
    }
}

fn code_reason(code: u8) -> &'static str {
    match code {
        1 => "device lost (unplugged or switched off)",
        2 => "the stream was invalidated and must be rebuilt",
        3 => "permission denied (is the user in the `audio` group?)",
        4 => "device busy (another program has it?)",
        5 => "the audio host went away",
        6 => "the audio backend reported an error",
        _ => "the audio stream reported an error",
    }
}

/// The capture callback's whole job: copy the whole frames that fit into the ring,
/// count the rest. `carry` keeps the remainder of the 16 kHz conversion of dropped
/// frames (so the counter is exact over many callbacks).
///
/// Real-time path: no allocation, no lock, no logging, no system call. Only a ring copy
/// and relaxed atomic adds.
#[inline]
fn push_frames(
    prod: &mut HeapProd<u8>,
    bytes: &[u8],
    frame_bytes: usize,
    rate_hz: u64,
    shared: &StreamShared,
    counters: &MicCounters,
    carry: &mut u64,
) {
    shared.callbacks.fetch_add(1, Ordering::Relaxed);
    let fits = prod.vacant_len().min(bytes.len()) / frame_bytes * frame_bytes;
    let pushed = prod.push_slice(&bytes[..fits]);
    let dropped_frames = ((bytes.len() - pushed) / frame_bytes) as u64;
    if dropped_frames > 0 {
        *carry += dropped_frames * PIPELINE_RATE_HZ as u64;
        counters
            .drops
            .add(DropReason::MicOverrunSamples, *carry / rate_hz);
        *carry %= rate_hz;
        counters.overrun_events.fetch_add(1, Ordering::Relaxed);
    }
}

/// Notices a device that stopped calling back: the callback counter has not moved for
/// longer than the timeout.
#[derive(Debug)]
pub(crate) struct StallWatch {
    timeout: Duration,
    seen: u64,
    since: Instant,
}

impl StallWatch {
    pub fn new(timeout: Duration, now: Instant) -> Self {
        Self {
            timeout,
            seen: 0,
            since: now,
        }
    }

    /// `Some(how long)` once `callbacks` has not changed for longer than the timeout.
    pub fn check(&mut self, callbacks: u64, now: Instant) -> Option<Duration> {
        if callbacks != self.seen {
            self.seen = callbacks;
            self.since = now;
            return None;
        }
        let quiet = now.saturating_duration_since(self.since);
        (quiet > self.timeout).then_some(quiet)
    }
}

/// How long one `read_chunk` waits for the device before returning no samples.
const READ_WAIT: Duration = Duration::from_millis(100);
const READ_NAP: Duration = Duration::from_millis(5);

/// A running capture stream on one device. Dropping it stops the stream (cpal joins
/// its thread) and frees the ring.
pub struct MicSource {
    what: String,
    // Declared first: dropped first, so the callback is gone before the ring.
    stream: cpal::Stream,
    /// Capture starts with the first `read_chunk`, not at open: the daemon opens the
    /// source before loading its models, and audio captured meanwhile would only
    /// overflow the ring (and count as overruns).
    playing: bool,
    cons: HeapCons<u8>,
    shared: Arc<StreamShared>,
    conv: FrameConverter,
    buf: Vec<u8>,
    stall: StallWatch,
    rate_hz: u32,
    frames_in: u64,
}

impl MicSource {
    /// Open the device `opts` names and set up its stream; capture starts with the
    /// first `read_chunk`.
    pub fn open(opts: &MicOptions, counters: Arc<MicCounters>) -> Result<Self, MicError> {
        let host = cpal::default_host();
        let (device, name) = match opts.device.as_deref() {
            None => {
                let d = host.default_input_device().ok_or(MicError::NoDefault)?;
                let id = d
                    .id()
                    .map(|i| i.to_string())
                    .unwrap_or_else(|_| "default".into());
                (d, format!("{id} (system default input)"))
            }
            Some(w) => select_device(input_devices(&host)?, w)?,
        };
        let (cfg, offered) = choose_config(&device, &name)?;
        let format = cfg.sample_format();
        let channels = cfg.channels();
        let rate_hz = cfg.sample_rate();
        let config_desc = format!("{format} {channels} ch {rate_hz} Hz");
        let conv = FrameConverter::new(format, channels, rate_hz)
            .map_err(|source| MicError::Resample {
                device: name.clone(),
                source,
            })?
            .ok_or_else(|| MicError::NoUsableFormat {
                device: name.clone(),
                offered: offered.clone(),
            })?;
        let frame_bytes = format.sample_size() * channels as usize;
        let ring_frames = (rate_hz as u128 * opts.ring.as_millis() / 1000).max(1024) as usize;
        let (mut prod, cons) = HeapRb::<u8>::new(ring_frames * frame_bytes).split();
        let shared = Arc::new(StreamShared::default());

        let (cb_shared, cb_counters) = (shared.clone(), counters.clone());
        let mut carry = 0u64;
        let rate = rate_hz as u64;
        // Runs on cpal's real-time capture thread. It must not allocate, lock, log or
        // block: it copies whole frames into the pre-allocated ring and bumps atomics.
        let on_data = move |data: &cpal::Data, _: &cpal::InputCallbackInfo| {
            push_frames(
                &mut prod,
                data.bytes(),
                frame_bytes,
                rate,
                &cb_shared,
                &cb_counters,
                &mut carry,
            );
        };
        let (err_shared, err_counters) = (shared.clone(), counters);
        // Also on the capture thread: record the error kind in an atomic, nothing else.
        let on_error = move |e: cpal::Error| match e.kind() {
            ErrorKind::Xrun => {
                err_counters.drops.add(DropReason::MicXruns, 1);
            }
            ErrorKind::DeviceChanged | ErrorKind::RealtimeDenied => {}
            k => {
                let _ = err_shared.error.compare_exchange(
                    0,
                    kind_code(k),
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                );
            }
        };
        let stream = device
            .build_input_stream_raw(
                cfg.config(),
                format,
                on_data,
                on_error,
                Some(Duration::from_secs(2)),
            )
            .map_err(|e| match e.kind() {
                ErrorKind::DeviceNotAvailable => MicError::Unavailable {
                    device: name.clone(),
                    source: e.into(),
                },
                _ => MicError::Refused {
                    device: name.clone(),
                    config: config_desc.clone(),
                    source: e.into(),
                    offered: offered.clone(),
                },
            })?;
        // Pop about 50 ms per read (whole frames only).
        let buf = vec![0u8; (rate_hz as usize / 20).max(64) * frame_bytes];
        Ok(Self {
            what: format!("microphone {name}, {config_desc}"),
            stream,
            playing: false,
            cons,
            shared,
            conv,
            buf,
            stall: StallWatch::new(opts.stall_timeout, Instant::now()),
            rate_hz,
            frames_in: 0,
        })
    }

    fn error(&self, e: MicError) -> AudioError {
        AudioError::Read {
            what: self.what.clone(),
            seconds: self.frames_in as f64 / self.rate_hz as f64,
            reason: e.to_string(),
        }
    }
}

impl AudioSource for MicSource {
    fn describe(&self) -> String {
        self.what.clone()
    }

    fn is_live(&self) -> bool {
        true
    }

    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        if !self.playing {
            self.stream.play().map_err(|e| {
                self.error(MicError::Start {
                    device: self.what.clone(),
                    source: e.into(),
                })
            })?;
            self.playing = true;
            self.stall = StallWatch::new(self.stall.timeout, Instant::now());
        }
        let started = Instant::now();
        loop {
            let n = self.cons.pop_slice(&mut self.buf);
            let now = Instant::now();
            let callbacks = self.shared.callbacks.load(Ordering::Relaxed);
            if n > 0 {
                self.stall.check(callbacks, now);
                self.frames_in += (n / self.conv.frame_bytes()) as u64;
                let (conv, buf) = (&mut self.conv, &self.buf);
                return conv.push(&buf[..n], out).map(|_| true).map_err(|source| {
                    let device = self.what.clone();
                    self.error(MicError::Resample { device, source })
                });
            }
            let code = self.shared.error.load(Ordering::Relaxed);
            if code != 0 {
                return Err(self.error(MicError::Stream {
                    device: self.what.clone(),
                    reason: code_reason(code).into(),
                }));
            }
            if let Some(quiet) = self.stall.check(callbacks, now) {
                return Err(self.error(MicError::Stalled {
                    device: self.what.clone(),
                    waited_ms: quiet.as_millis() as u64,
                    limit_ms: self.stall.timeout.as_millis() as u64,
                }));
            }
            if now.duration_since(started) >= READ_WAIT {
                return Ok(true);
            }
            std::thread::sleep(READ_NAP);
        }
    }
}

/// Opens a [`MicSource`] for [`super::ReconnectingSource`]; every reopening shares one
/// set of [`MicCounters`].
pub struct MicOpener {
    opts: MicOptions,
    counters: Arc<MicCounters>,
}

impl MicOpener {
    pub fn new(opts: MicOptions) -> Self {
        Self {
            opts,
            counters: Arc::default(),
        }
    }

    /// Overrun and xrun counters of this microphone, across reconnections.
    pub fn counters(&self) -> Arc<MicCounters> {
        self.counters.clone()
    }
}

impl Opener for MicOpener {
    type Error = MicError;

    fn describe(&self) -> String {
        match &self.opts.device {
            Some(d) => format!("microphone \"{d}\""),
            None => "microphone (system default input)".into(),
        }
    }

    fn open(&mut self) -> Result<Box<dyn AudioSource>, MicError> {
        let src = MicSource::open(&self.opts, self.counters.clone())?;
        log::info!("opened {}", src.describe());
        Ok(Box::new(src))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cpal::{SampleFormat, SupportedStreamConfigRange};

    fn sine(rate: u32, secs: f32) -> Vec<f64> {
        (0..(rate as f32 * secs) as usize)
            .map(|i| (2.0 * std::f64::consts::PI * 440.0 * i as f64 / rate as f64).sin() * 0.5)
            .collect()
    }

    /// Encode a signal as `channels` identical channels of `format`, native-endian.
    fn encode(x: &[f64], format: SampleFormat, channels: usize) -> Vec<u8> {
        let mut b = Vec::new();
        for &v in x {
            for _ in 0..channels {
                match format {
                    SampleFormat::I8 => b.push((v * 127.0).round() as i8 as u8),
                    SampleFormat::U8 => b.push((v * 127.0 + 128.0).round() as u8),
                    SampleFormat::I16 => b.extend(((v * 32_767.0).round() as i16).to_ne_bytes()),
                    SampleFormat::U16 => {
                        b.extend(((v * 32_767.0 + 32_768.0).round() as u16).to_ne_bytes())
                    }
                    // Deliberately no sign extension in the top byte (as some drivers do).
                    SampleFormat::I24 => b.extend(
                        ((((v * 8_388_607.0).round() as i32) & 0x00ff_ffff) as u32).to_ne_bytes(),
                    ),
                    SampleFormat::U24 => {
                        b.extend((((v * 8_388_607.0 + 8_388_608.0).round()) as u32).to_ne_bytes())
                    }
                    SampleFormat::I32 => {
                        b.extend(((v * 2_147_483_647.0).round() as i32).to_ne_bytes())
                    }
                    SampleFormat::U32 => b.extend(
                        ((v * 2_147_483_647.0 + 2_147_483_648.0).round() as u32).to_ne_bytes(),
                    ),
                    SampleFormat::I64 => {
                        b.extend(((v * 9.223_372_036_854_775e18) as i64).to_ne_bytes())
                    }
                    SampleFormat::U64 => b.extend(
                        ((v * 9.223_372_036_854_775e18 + 9.223_372_036_854_776e18) as u64)
                            .to_ne_bytes(),
                    ),
                    SampleFormat::F32 => b.extend((v as f32).to_ne_bytes()),
                    SampleFormat::F64 => b.extend(v.to_ne_bytes()),
                    _ => unreachable!(),
                }
            }
        }
        b
    }

    #[test]
    fn every_pcm_format_decodes_to_the_same_signal() {
        let x = sine(8_000, 0.05);
        for format in [
            SampleFormat::I8,
            SampleFormat::U8,
            SampleFormat::I16,
            SampleFormat::U16,
            SampleFormat::I24,
            SampleFormat::U24,
            SampleFormat::I32,
            SampleFormat::U32,
            SampleFormat::I64,
            SampleFormat::U64,
            SampleFormat::F32,
            SampleFormat::F64,
        ] {
            let mut y = Vec::new();
            decode_samples(format, &encode(&x, format, 1), &mut y);
            assert_eq!(y.len(), x.len(), "{format}");
            let tol = if matches!(format, SampleFormat::I8 | SampleFormat::U8) {
                0.01
            } else {
                1e-4
            };
            for (a, b) in y.iter().zip(&x) {
                assert!((*a as f64 - b).abs() < tol, "{format}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn odd_device_formats_become_16k_mono() {
        // 3 channels of u16 at 44.1 kHz, 6 channels of i24 at 96 kHz, stereo f32 at
        // 22.05 kHz: 1 s each gives 1 s at 16 kHz, carrying the tone.
        for (format, channels, rate) in [
            (SampleFormat::U16, 3, 44_100),
            (SampleFormat::I24, 6, 96_000),
            (SampleFormat::F32, 2, 22_050),
            (SampleFormat::I16, 1, 16_000),
        ] {
            let x = sine(rate, 1.0);
            let bytes = encode(&x, format, channels);
            let mut conv = FrameConverter::new(format, channels as u16, rate)
                .unwrap()
                .unwrap();
            let mut y = Vec::new();
            // Feed in pieces that split frames and samples.
            for piece in bytes.chunks(1_001) {
                conv.push(piece, &mut y).unwrap();
            }
            conv.resampler.finish(&mut y).unwrap();
            assert_eq!(y.len(), 16_000, "{format} {channels} ch {rate} Hz");
            let r = sine(16_000, 1.0);
            let err = y[400..15_600]
                .iter()
                .zip(&r[400..15_600])
                .map(|(a, b)| (*a as f64 - b).abs())
                .fold(0.0, f64::max);
            assert!(
                err < 0.05,
                "{format} {channels} ch {rate} Hz: max error {err}"
            );
        }
    }

    #[test]
    fn a_refused_or_unusable_format_names_what_the_device_offers() {
        let r = |ch, lo, hi, f| {
            SupportedStreamConfigRange::new(ch, lo, hi, cpal::SupportedBufferSize::Unknown, f)
        };
        let offered = summarize_ranges(&[
            r(2, 44_100, 48_000, SampleFormat::I16),
            r(1, 44_100, 48_000, SampleFormat::I16),
            r(2, 2_822_400, 2_822_400, SampleFormat::DsdU32),
        ]);
        assert_eq!(offered, "i16 1-2 ch 44100-48000 Hz, dsdu32 2 ch 2822400 Hz");
        let e = MicError::Refused {
            device: "alsa:hw:CARD=Device,DEV=0 (USB Audio)".into(),
            config: "f32 2 ch 48000 Hz".into(),
            source: "The requested stream configuration is not supported by the device.".into(),
            offered,
        }
        .to_string();
        assert!(
            e.contains("refused f32 2 ch 48000 Hz") && e.contains("it offers: i16 1-2 ch"),
            "{e}"
        );
    }

    #[test]
    fn dsd_is_not_pcm() {
        assert!(FrameConverter::new(SampleFormat::DsdU8, 2, 48_000)
            .unwrap()
            .is_none());
        assert!(!is_convertible(SampleFormat::DsdU32));
    }

    #[test]
    fn the_callback_path_keeps_whole_frames_and_counts_overruns_in_16k_samples() {
        // Stereo i16 at 48 kHz: 4 bytes a frame; a ring of 10 frames.
        let (mut prod, mut cons) = HeapRb::<u8>::new(40).split();
        let shared = StreamShared::default();
        let counters = MicCounters::default();
        let mut carry = 0;
        let frame = [1u8, 2, 3, 4];
        let seven: Vec<u8> = frame.iter().cycle().take(28).copied().collect();
        push_frames(&mut prod, &seven, 4, 48_000, &shared, &counters, &mut carry);
        // 3 frames fit (12 of 40 bytes left), 4 dropped.
        push_frames(&mut prod, &seven, 4, 48_000, &shared, &counters, &mut carry);
        assert_eq!(cons.occupied_len(), 40);
        assert_eq!(shared.callbacks.load(Ordering::Relaxed), 2);
        assert_eq!(counters.overrun_events.load(Ordering::Relaxed), 1);
        // 4 frames at 48 kHz = 1.33 samples at 16 kHz: 1 now, the rest carried.
        assert_eq!(counters.drops.get(DropReason::MicOverrunSamples), 1);
        for _ in 0..2 {
            let mut b = [0u8; 40];
            cons.pop_slice(&mut b);
            push_frames(&mut prod, &seven, 4, 48_000, &shared, &counters, &mut carry);
            push_frames(&mut prod, &seven, 4, 48_000, &shared, &counters, &mut carry);
        }
        // 12 frames dropped in all = exactly 4 samples at 16 kHz.
        assert_eq!(counters.drops.get(DropReason::MicOverrunSamples), 4);
        let mut b = [0u8; 40];
        assert_eq!(cons.pop_slice(&mut b), 40);
        assert!(b.chunks(4).all(|f| f == frame), "frames stay aligned");
    }

    #[test]
    fn a_device_that_stops_calling_back_is_stalled_after_the_timeout() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut w = StallWatch::new(Duration::from_millis(2_000), t0);
        // Never called back at all: stalled from the start.
        assert_eq!(w.check(0, at(1_999)), None);
        assert!(w.check(0, at(2_001)).is_some());
        // Callbacks move: fine; then they stop.
        assert_eq!(w.check(5, at(2_100)), None);
        assert_eq!(w.check(9, at(3_000)), None);
        assert_eq!(w.check(9, at(4_900)), None);
        assert_eq!(w.check(9, at(5_100)), Some(Duration::from_millis(2_100)));
    }

    #[test]
    fn devices_are_chosen_by_index_id_or_description() {
        // Only the ids and names matter for selection; the devices come from the host.
        let host = cpal::default_host();
        let devices = input_devices(&host).unwrap();
        if devices.is_empty() {
            eprintln!("no ALSA input devices at all; selection test skipped");
            return;
        }
        let first_id = devices[0].id.clone();
        let (_, name) = select_device(input_devices(&host).unwrap(), "0").unwrap();
        assert!(name.starts_with(&first_id), "{name}");
        let bare = first_id.split_once(':').unwrap().1.to_string();
        let (_, name) = select_device(input_devices(&host).unwrap(), &bare).unwrap();
        assert!(name.starts_with(&first_id), "{name}");
        let err = select_device(input_devices(&host).unwrap(), "no-such-mic-xyz")
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("no-such-mic-xyz") && err.contains(&first_id),
            "{err}"
        );
        let err = select_device(input_devices(&host).unwrap(), "999")
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("sarcasmd devices"), "{err}");
    }
}
