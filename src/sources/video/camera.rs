//! V4L2 camera capture with nokhwa: MJPEG or YUYV frames, decoded to RGB, scaled down to
//! fit [`FRAME_WIDTH`] x [`FRAME_HEIGHT`], capped at [`MAX_FPS`] by dropping frames, and
//! stamped on the stream clock (seconds since an `Instant` shared with the audio).
//!
//! MJPEG is decoded with zune-jpeg (pure Rust), YUYV by the few lines below; nokhwa's
//! own `decoding` feature (mozjpeg, a C build) stays off.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TrySendError};
use nokhwa::utils::{
    ApiBackend, CameraFormat, CameraIndex, CameraInfo, FrameFormat, RequestedFormat,
    RequestedFormatType,
};
use nokhwa::Camera;
use thiserror::Error;
use zune_jpeg::zune_core::colorspace::ColorSpace;
use zune_jpeg::zune_core::options::DecoderOptions;
use zune_jpeg::JpegDecoder;

use super::error::VideoError;
use super::format::{FRAME_HEIGHT, FRAME_WIDTH, MAX_FPS};
use super::frame::VideoFrame;
use super::source::FrameSource;
use crate::common::drops::{DropCounters, DropCounts, DropReason, DropSource};

#[derive(Debug, Error)]
pub enum CameraError {
    #[error("cannot list cameras: {reason}")]
    Query { reason: String },
    #[error("no camera found (no V4L2 capture device under /dev/video*); plug one in, or turn the camera source off")]
    NoCamera,
    #[error(
        "no camera matches \"{wanted}\" ({available}); use a name or index from `sarcasmd devices`"
    )]
    NotFound { wanted: String, available: String },
    #[error("{camera}: cannot open: {reason} (unplugged? in use by another program? is the user in the `video` group?)")]
    Open { camera: String, reason: String },
    #[error(
        "{camera}: offers no {wanted} format (it offers: {offered}); sarcasmd reads MJPEG and YUYV"
    )]
    NoUsableFormat {
        camera: String,
        wanted: String,
        offered: String,
    },
    #[error("{camera}: refused {format}: {reason}")]
    Refused {
        camera: String,
        format: String,
        reason: String,
    },
    #[error("{camera}: cannot start streaming: {reason}")]
    Start { camera: String, reason: String },
}

/// Which pixel format to ask the camera for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PixelFormatPref {
    /// YUYV when the camera offers it at a resolution near the target, else MJPEG.
    #[default]
    Auto,
    Mjpeg,
    Yuyv,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CameraOptions {
    /// An index from `sarcasmd devices` (`/dev/videoN`), or a case-insensitive substring
    /// of a camera's name or description. `None`: the first camera.
    pub device: Option<String>,
    pub format: PixelFormatPref,
    /// Frames beyond this rate are dropped (at most [`MAX_FPS`]).
    pub max_fps: f32,
    /// No frame for this long counts as a lost camera.
    pub stall_timeout: Duration,
}

impl Default for CameraOptions {
    fn default() -> Self {
        Self {
            device: None,
            format: PixelFormatPref::Auto,
            max_fps: MAX_FPS,
            stall_timeout: Duration::from_secs(5),
        }
    }
}

/// Frames dropped by a camera source, across reconnections.
#[derive(Debug, Default)]
pub struct CameraCounters {
    /// Frames delivered.
    pub frames: AtomicU64,
    /// Frames lost: `camera_over_rate` (dropped to keep to `max_fps`),
    /// `camera_corrupt` (did not decode: corrupt MJPEG, short YUYV buffer; skipped),
    /// `camera_backlog` (decoded, but the reader had not taken the previous ones).
    pub drops: DropCounters,
}

impl DropSource for CameraCounters {
    fn drop_counts(&self) -> DropCounts {
        self.drops.snapshot()
    }
}

/// Every V4L2 camera, in nokhwa's order.
pub fn list_cameras() -> Result<Vec<CameraInfo>, CameraError> {
    nokhwa::query(ApiBackend::Video4Linux).map_err(|e| CameraError::Query {
        reason: e.to_string(),
    })
}

fn select_camera(cams: &[CameraInfo], wanted: Option<&str>) -> Result<CameraInfo, CameraError> {
    let Some(wanted) = wanted.map(str::trim) else {
        return cams.first().cloned().ok_or(CameraError::NoCamera);
    };
    let hit = if let Ok(i) = wanted.parse::<u32>() {
        cams.iter()
            .find(|c| matches!(c.index(), CameraIndex::Index(n) if *n == i))
    } else {
        let lower = wanted.to_lowercase();
        cams.iter().find(|c| {
            c.human_name().to_lowercase().contains(&lower)
                || c.description().to_lowercase().contains(&lower)
        })
    };
    hit.cloned().ok_or_else(|| CameraError::NotFound {
        wanted: wanted.to_string(),
        available: if cams.is_empty() {
            "there are none".into()
        } else {
            let list: Vec<String> = cams
                .iter()
                .map(|c| format!("{}: {}", c.index(), c.human_name()))
                .collect();
            format!("available: {}", list.join("; "))
        },
    })
}

/// The format to capture: the smallest resolution that still covers the target frame
/// (else the largest there is), at least 15 fps when possible, YUYV before MJPEG at the
/// same size under `Auto` (no JPEG decoding).
pub fn choose_format(formats: &[CameraFormat], pref: PixelFormatPref) -> Option<CameraFormat> {
    let allowed = |f: FrameFormat| match pref {
        PixelFormatPref::Auto => matches!(f, FrameFormat::MJPEG | FrameFormat::YUYV),
        PixelFormatPref::Mjpeg => f == FrameFormat::MJPEG,
        PixelFormatPref::Yuyv => f == FrameFormat::YUYV,
    };
    formats
        .iter()
        .filter(|f| allowed(f.format()) && f.width() > 0 && f.height() > 0)
        .min_by_key(|f| {
            let covers = f.width() >= FRAME_WIDTH && f.height() >= FRAME_HEIGHT;
            let area = f.width() as u64 * f.height() as u64;
            (
                !covers,
                if covers { area } else { u64::MAX - area },
                f.frame_rate() < MAX_FPS as u32,
                f.format() != FrameFormat::YUYV,
                f.frame_rate(),
            )
        })
        .copied()
}

/// Output size: the source scaled to fit `FRAME_WIDTH` x `FRAME_HEIGHT`, aspect kept,
/// never enlarged.
pub fn fit_size(w: u32, h: u32) -> (u32, u32) {
    let s = (FRAME_WIDTH as f64 / w as f64)
        .min(FRAME_HEIGHT as f64 / h as f64)
        .min(1.0);
    (
        ((w as f64 * s).round() as u32).clamp(1, FRAME_WIDTH),
        ((h as f64 * s).round() as u32).clamp(1, FRAME_HEIGHT),
    )
}

/// Box-filter downscale of packed RGB8 `src` (`sw` x `sh`) to `dw` x `dh` into `dst`.
pub fn downscale_rgb(src: &[u8], sw: u32, sh: u32, dw: u32, dh: u32, dst: &mut Vec<u8>) {
    dst.clear();
    dst.reserve(dw as usize * dh as usize * 3);
    let (sw, sh, dw, dh) = (sw as usize, sh as usize, dw as usize, dh as usize);
    for y in 0..dh {
        let y0 = y * sh / dh;
        let y1 = ((y + 1) * sh / dh).max(y0 + 1);
        for x in 0..dw {
            let x0 = x * sw / dw;
            let x1 = ((x + 1) * sw / dw).max(x0 + 1);
            let mut acc = [0u32; 3];
            for row in src[y0 * sw * 3..y1 * sw * 3].chunks_exact(sw * 3) {
                for px in row[x0 * 3..x1 * 3].chunks_exact(3) {
                    acc[0] += px[0] as u32;
                    acc[1] += px[1] as u32;
                    acc[2] += px[2] as u32;
                }
            }
            let n = ((y1 - y0) * (x1 - x0)) as u32;
            dst.extend(acc.iter().map(|a| ((a + n / 2) / n) as u8));
        }
    }
}

/// YUYV 4:2:2 (BT.601, limited range) to packed RGB8. `None` if `yuyv` is shorter
/// than `w` x `h` needs.
pub fn yuyv_to_rgb(yuyv: &[u8], w: u32, h: u32, rgb: &mut Vec<u8>) -> Option<()> {
    let (w, h) = (w as usize, h as usize);
    if w % 2 != 0 || yuyv.len() < w * h * 2 {
        return None;
    }
    rgb.clear();
    rgb.reserve(w * h * 3);
    for q in yuyv[..w * h * 2].chunks_exact(4) {
        let (u, v) = (q[1] as i32 - 128, q[3] as i32 - 128);
        for y in [q[0], q[2]] {
            let c = 298 * (y as i32 - 16);
            let px = [
                (c + 409 * v + 128) >> 8,
                (c - 100 * u - 208 * v + 128) >> 8,
                (c + 516 * u + 128) >> 8,
            ];
            rgb.extend(px.iter().map(|p| (*p).clamp(0, 255) as u8));
        }
    }
    Some(())
}

/// Keeps at most `max_fps` frames a second: a frame is kept when it is due (a little
/// early is fine, so 30 fps halves cleanly to 15), and a long pause does not turn into
/// a burst afterwards.
#[derive(Debug)]
pub struct FpsLimiter {
    interval: Duration,
    slack: Duration,
    next_due: Option<Duration>,
}

impl FpsLimiter {
    pub fn new(max_fps: f32) -> Self {
        let fps = if max_fps.is_finite() && max_fps > 0.0 {
            max_fps.min(MAX_FPS)
        } else {
            MAX_FPS
        };
        let interval = Duration::from_secs_f64(1.0 / fps as f64);
        Self {
            interval,
            slack: interval / 6,
            next_due: None,
        }
    }

    /// Keep the frame captured at `t` (stream time)?
    pub fn keep(&mut self, t: Duration) -> bool {
        if let Some(due) = self.next_due {
            if t + self.slack < due {
                return false;
            }
        }
        let by_schedule = self.next_due.map_or(t, |d| d) + self.interval;
        let by_now = (t + self.interval).saturating_sub(self.slack);
        self.next_due = Some(by_schedule.max(by_now));
        true
    }
}

/// Consecutive undecodable frames that count as a lost camera (about 2 s at 15 fps).
const MAX_CORRUPT_IN_A_ROW: u32 = 30;

/// Frames waiting for `next_frame`; when the reader is slower, newer frames are dropped
/// (and counted) rather than queued.
const FRAME_QUEUE: usize = 2;

/// A streaming camera. nokhwa's `Camera` cannot move between threads, so it lives on a
/// capture thread of its own, which decodes, scales and rate-limits, and hands frames
/// over through a small bounded queue.
pub struct CameraSource {
    what: String,
    rx: Receiver<Result<VideoFrame, VideoError>>,
    stop: Arc<AtomicBool>,
    stall_timeout: Duration,
}

impl CameraSource {
    /// Open the camera `opts` names and start streaming. Frames are stamped with seconds
    /// since `clock_origin` (share the audio stream's start `Instant`).
    pub fn open(
        opts: &CameraOptions,
        clock_origin: Instant,
        counters: Arc<CameraCounters>,
    ) -> Result<Self, CameraError> {
        let (init_tx, init_rx) = bounded::<Result<String, CameraError>>(1);
        let (tx, rx) = bounded(FRAME_QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let (t_opts, t_stop) = (opts.clone(), stop.clone());
        std::thread::Builder::new()
            .name("camera".into())
            .spawn(move || match open_camera(&t_opts) {
                Ok((camera, format, what)) => {
                    let _ = init_tx.send(Ok(what.clone()));
                    let capture = Capture {
                        what,
                        decoder: FrameDecoder::new(format.format()),
                        limiter: FpsLimiter::new(t_opts.max_fps),
                        clock_origin,
                        counters,
                        stop: t_stop,
                        tx,
                    };
                    capture.run(camera);
                }
                Err(e) => {
                    let _ = init_tx.send(Err(e));
                }
            })
            .map_err(|e| CameraError::Start {
                camera: "camera".into(),
                reason: format!("cannot spawn the capture thread: {e}"),
            })?;
        let what = init_rx.recv().map_err(|_| CameraError::Start {
            camera: "camera".into(),
            reason: "the capture thread ended while opening".into(),
        })??;
        Ok(Self {
            what,
            rx,
            stop,
            stall_timeout: opts.stall_timeout,
        })
    }
}

impl Drop for CameraSource {
    /// The capture thread sees the flag (or the closed queue) after its current frame
    /// and releases the camera. It is not joined: a hung driver must not hang us.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Find, open and configure the camera; the stream is running when this returns.
fn open_camera(opts: &CameraOptions) -> Result<(Camera, CameraFormat, String), CameraError> {
    let cams = list_cameras()?;
    let info = select_camera(&cams, opts.device.as_deref())?;
    let name = format!("camera {} ({})", info.index(), info.human_name());
    let open_err = |e: nokhwa::NokhwaError| CameraError::Open {
        camera: name.clone(),
        reason: e.to_string(),
    };
    let any = RequestedFormat::with_formats(
        RequestedFormatType::None,
        &[FrameFormat::YUYV, FrameFormat::MJPEG],
    );
    let mut camera = Camera::with_backend(info.index().clone(), any, ApiBackend::Video4Linux)
        .map_err(open_err)?;
    let formats = camera.compatible_camera_formats().map_err(open_err)?;
    let wanted = match opts.format {
        PixelFormatPref::Auto => "MJPEG or YUYV",
        PixelFormatPref::Mjpeg => "MJPEG",
        PixelFormatPref::Yuyv => "YUYV",
    };
    let format =
        choose_format(&formats, opts.format).ok_or_else(|| CameraError::NoUsableFormat {
            camera: name.clone(),
            wanted: wanted.into(),
            offered: summarize_formats(&formats),
        })?;
    let fmt_desc = format!(
        "{} {}x{} @ {} fps",
        format.format(),
        format.width(),
        format.height(),
        format.frame_rate()
    );
    let exact = [format.format()];
    camera
        .set_camera_requset(RequestedFormat::with_formats(
            RequestedFormatType::Exact(format),
            &exact,
        ))
        .map_err(|e| CameraError::Refused {
            camera: name.clone(),
            format: fmt_desc.clone(),
            reason: e.to_string(),
        })?;
    camera.open_stream().map_err(|e| CameraError::Start {
        camera: name.clone(),
        reason: e.to_string(),
    })?;
    let (ow, oh) = fit_size(format.width(), format.height());
    Ok((
        camera,
        format,
        format!("{name}, {fmt_desc} -> {ow}x{oh} RGB"),
    ))
}

/// The capture thread's loop.
struct Capture {
    what: String,
    decoder: FrameDecoder,
    limiter: FpsLimiter,
    clock_origin: Instant,
    counters: Arc<CameraCounters>,
    stop: Arc<AtomicBool>,
    tx: Sender<Result<VideoFrame, VideoError>>,
}

impl Capture {
    fn run(mut self, mut camera: Camera) {
        let mut corrupt_in_a_row = 0u32;
        while !self.stop.load(Ordering::Relaxed) {
            let buf = match camera.frame() {
                Ok(b) => b,
                Err(e) => {
                    let _ = self.tx.send(Err(VideoError::Lost {
                        what: self.what.clone(),
                        reason: e.to_string(),
                    }));
                    break;
                }
            };
            let t = self.clock_origin.elapsed();
            if !self.limiter.keep(t) {
                self.counters.drops.add(DropReason::CameraOverRate, 1);
                continue;
            }
            let res = buf.resolution();
            let frame =
                match self
                    .decoder
                    .decode(buf.buffer(), res.width(), res.height(), t.as_secs_f64())
                {
                    Ok(f) => f,
                    Err(reason) => {
                        self.counters.drops.add(DropReason::CameraCorrupt, 1);
                        corrupt_in_a_row += 1;
                        if corrupt_in_a_row >= MAX_CORRUPT_IN_A_ROW {
                            let _ = self.tx.send(Err(VideoError::Decode {
                                what: self.what.clone(),
                                seconds: t.as_secs_f64(),
                                reason: format!(
                                "{corrupt_in_a_row} frames in a row did not decode; last: {reason}"
                            ),
                            }));
                            break;
                        }
                        continue;
                    }
                };
            corrupt_in_a_row = 0;
            match self.tx.try_send(Ok(frame)) {
                Ok(()) => {
                    self.counters.frames.fetch_add(1, Ordering::Relaxed);
                }
                Err(TrySendError::Full(_)) => {
                    self.counters.drops.add(DropReason::CameraBacklog, 1);
                }
                Err(TrySendError::Disconnected(_)) => break,
            }
        }
        let _ = camera.stop_stream();
    }
}

/// Turns captured MJPEG or YUYV buffers into scaled RGB frames, reusing its buffers.
pub struct FrameDecoder {
    format: FrameFormat,
    rgb_full: Vec<u8>,
}

impl FrameDecoder {
    pub fn new(format: FrameFormat) -> Self {
        Self {
            format,
            rgb_full: Vec::new(),
        }
    }

    /// Decode one captured buffer (`w` x `h` as the camera reports it) into a frame
    /// that fits 426x240, stamped `t_s`; or say why it cannot be decoded.
    pub fn decode(&mut self, data: &[u8], w: u32, h: u32, t_s: f64) -> Result<VideoFrame, String> {
        let (w, h) = match self.format {
            FrameFormat::YUYV => {
                yuyv_to_rgb(data, w, h, &mut self.rgb_full)
                    .ok_or_else(|| format!("YUYV buffer of {} bytes for {w}x{h}", data.len()))?;
                (w, h)
            }
            FrameFormat::MJPEG => {
                let opts = DecoderOptions::default().jpeg_set_out_colorspace(ColorSpace::RGB);
                let mut dec = JpegDecoder::new_with_options(std::io::Cursor::new(data), opts);
                self.rgb_full = dec.decode().map_err(|e| format!("bad JPEG: {e}"))?;
                let info = dec.info().ok_or("no JPEG header")?;
                let (jw, jh) = (info.width as u32, info.height as u32);
                if jw == 0 || jh == 0 || self.rgb_full.len() < jw as usize * jh as usize * 3 {
                    return Err(format!(
                        "JPEG of {jw}x{jh} decoded to {} bytes",
                        self.rgb_full.len()
                    ));
                }
                (jw, jh)
            }
            other => return Err(format!("cannot decode {other} frames")),
        };
        let (ow, oh) = fit_size(w, h);
        let mut rgb = Vec::new();
        downscale_rgb(&self.rgb_full, w, h, ow, oh, &mut rgb);
        Ok(VideoFrame {
            t_s,
            width: ow,
            height: oh,
            rgb,
        })
    }
}

fn summarize_formats(formats: &[CameraFormat]) -> String {
    if formats.is_empty() {
        return "nothing".into();
    }
    let mut seen: Vec<String> = formats.iter().map(|f| f.format().to_string()).collect();
    seen.sort();
    seen.dedup();
    seen.join(", ")
}

impl FrameSource for CameraSource {
    fn describe(&self) -> String {
        self.what.clone()
    }

    fn is_live(&self) -> bool {
        true
    }

    fn next_frame(&mut self) -> Result<Option<VideoFrame>, VideoError> {
        match self.rx.recv_timeout(self.stall_timeout) {
            Ok(r) => r.map(Some),
            Err(RecvTimeoutError::Timeout) => Err(VideoError::Lost {
                what: self.what.clone(),
                reason: format!(
                    "stalled: no frame for {} ms",
                    self.stall_timeout.as_millis()
                ),
            }),
            Err(RecvTimeoutError::Disconnected) => Err(VideoError::Lost {
                what: self.what.clone(),
                reason: "the capture thread ended".into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nokhwa::utils::Resolution;

    fn f(w: u32, h: u32, fmt: FrameFormat, fps: u32) -> CameraFormat {
        CameraFormat::new(Resolution::new(w, h), fmt, fps)
    }

    #[test]
    fn the_smallest_covering_format_is_chosen() {
        let formats = [
            f(1920, 1080, FrameFormat::MJPEG, 30),
            f(640, 480, FrameFormat::MJPEG, 30),
            f(640, 480, FrameFormat::YUYV, 30),
            f(320, 240, FrameFormat::YUYV, 30),
            f(640, 480, FrameFormat::NV12, 30),
        ];
        let c = choose_format(&formats, PixelFormatPref::Auto).unwrap();
        assert_eq!((c.width(), c.format()), (640, FrameFormat::YUYV));
        let c = choose_format(&formats, PixelFormatPref::Mjpeg).unwrap();
        assert_eq!((c.width(), c.format()), (640, FrameFormat::MJPEG));
        // Only small ones: the largest.
        let small = [
            f(160, 120, FrameFormat::YUYV, 30),
            f(320, 240, FrameFormat::YUYV, 30),
        ];
        assert_eq!(
            choose_format(&small, PixelFormatPref::Auto)
                .unwrap()
                .width(),
            320
        );
        // 15 fps or more wins over a slow mode of the same size.
        let slow = [
            f(640, 480, FrameFormat::YUYV, 5),
            f(640, 480, FrameFormat::MJPEG, 30),
        ];
        assert_eq!(
            choose_format(&slow, PixelFormatPref::Auto)
                .unwrap()
                .format(),
            FrameFormat::MJPEG
        );
        assert!(choose_format(&formats[4..], PixelFormatPref::Auto).is_none());
    }

    #[test]
    fn frames_fit_426x240_and_keep_their_aspect() {
        assert_eq!(fit_size(1920, 1080), (426, 240));
        assert_eq!(fit_size(640, 480), (320, 240));
        assert_eq!(fit_size(320, 240), (320, 240));
        assert_eq!(fit_size(4000, 10), (426, 1));
    }

    #[test]
    fn box_downscale_averages() {
        // 4x2 -> 2x1: each output pixel averages a 2x2 block.
        let src: Vec<u8> = [
            [0, 0, 0],
            [10, 20, 30],
            [100, 100, 100],
            [200, 200, 200],
            [0, 0, 0],
            [10, 20, 30],
            [100, 100, 100],
            [200, 200, 200],
        ]
        .concat();
        let mut dst = Vec::new();
        downscale_rgb(&src, 4, 2, 2, 1, &mut dst);
        assert_eq!(dst, [5, 10, 15, 150, 150, 150]);
    }

    #[test]
    fn yuyv_gray_and_colours() {
        let mut rgb = Vec::new();
        // Y=235 (white), Y=16 (black), no chroma.
        yuyv_to_rgb(&[235, 128, 16, 128], 2, 1, &mut rgb).unwrap();
        assert_eq!(rgb, [255, 255, 255, 0, 0, 0]);
        // Pure red in BT.601: Y=81 U=90 V=240.
        yuyv_to_rgb(&[81, 90, 81, 240], 2, 1, &mut rgb).unwrap();
        assert!(rgb[0] > 250 && rgb[1] < 5 && rgb[2] < 5, "{rgb:?}");
        assert!(yuyv_to_rgb(&[0; 6], 2, 2, &mut rgb).is_none());
    }

    #[test]
    fn a_webcam_mjpeg_frame_decodes_and_scales() {
        // 640x480 4:2:2 MJPEG, solid (224, 16, 16): `ffmpeg -f lavfi -i color=c=0xE01010:
        // s=640x480 -frames:v 1 -pix_fmt yuvj422p -f mjpeg`.
        let jpeg = include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/camera/red-640x480.jpg"
        ));
        let mut dec = FrameDecoder::new(FrameFormat::MJPEG);
        let frame = dec.decode(jpeg, 640, 480, 1.5).unwrap();
        assert_eq!((frame.width, frame.height, frame.t_s), (320, 240, 1.5));
        assert_eq!(frame.rgb.len(), 320 * 240 * 3);
        for px in frame.rgb.chunks_exact(3) {
            assert!(px[0] > 200 && px[1] < 40 && px[2] < 40, "{px:?}");
        }
        let err = dec.decode(&jpeg[..100], 640, 480, 0.0).unwrap_err();
        assert!(err.contains("JPEG"), "{err}");
    }

    #[test]
    fn a_yuyv_frame_decodes_and_scales() {
        // 852x480 of mid gray (Y=126) -> 426x240.
        let yuyv: Vec<u8> = [126u8, 128].repeat(852 * 480);
        let mut dec = FrameDecoder::new(FrameFormat::YUYV);
        let frame = dec.decode(&yuyv, 852, 480, 0.0).unwrap();
        assert_eq!((frame.width, frame.height), (426, 240));
        assert!(frame.rgb.iter().all(|&v| (126..=130).contains(&v)));
        assert!(dec.decode(&yuyv[..1000], 852, 480, 0.0).is_err());
    }

    #[test]
    fn thirty_fps_becomes_fifteen_and_sixty_too() {
        for (src_fps, expect) in [(30.0, 15), (60.0, 15), (10.0, 10), (25.0, 13)] {
            let mut lim = FpsLimiter::new(15.0);
            let kept = (0..(src_fps as usize * 10))
                .filter(|i| lim.keep(Duration::from_secs_f64(*i as f64 / src_fps)))
                .count();
            let per_s = kept as f64 / 10.0;
            assert!(
                (per_s - expect as f64).abs() <= 1.5 && per_s <= 15.1,
                "{src_fps} fps -> {per_s}/s"
            );
        }
        // No burst after a pause.
        let mut lim = FpsLimiter::new(15.0);
        assert!(lim.keep(Duration::ZERO));
        assert!(lim.keep(Duration::from_secs(5)));
        assert!(!lim.keep(Duration::from_millis(5_033)));
    }

    #[test]
    fn with_no_camera_opening_fails_cleanly() {
        let cams = list_cameras().unwrap_or_default();
        if !cams.is_empty() {
            eprintln!("a camera is present; the no-camera path is not exercised");
            return;
        }
        let err = CameraSource::open(&CameraOptions::default(), Instant::now(), Arc::default())
            .err()
            .expect("no camera");
        assert!(matches!(err, CameraError::NoCamera), "{err}");
        let err = select_camera(&[], Some("Logitech"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("Logitech") && err.contains("none"), "{err}");
    }
}
