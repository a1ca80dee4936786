//! Video files through an `ffmpeg` subprocess, for replay, evaluation and tests.
//!
//! Why a subprocess and not a decoding crate: the bindings (`ffmpeg-next`) need the
//! libav* development headers and follow ffmpeg's major versions, while the Debian
//! `ffmpeg` binary decodes every codec the clips use, keeps a decoder crash out of the
//! daemon, and costs one process start (~30 ms) per file. ffmpeg resamples to a
//! constant frame rate and scales, so frames arrive exactly as the camera path
//! delivers them: packed RGB8, at most 426x240, at most 15 fps.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use super::error::VideoError;
use super::format::{FRAME_HEIGHT, FRAME_WIDTH, MAX_FPS};
use super::frame::VideoFrame;
use super::source::FrameSource;

/// How a file is turned into frames.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileVideoOptions {
    /// Frames per second delivered (ffmpeg drops or repeats to hit it); at most 15.
    pub fps: f32,
    /// Stream time of the file's first frame: where this video starts relative to the
    /// audio it goes with.
    pub offset_s: f64,
}

impl Default for FileVideoOptions {
    fn default() -> Self {
        Self {
            fps: MAX_FPS,
            offset_s: 0.0,
        }
    }
}

pub struct FileVideoSource {
    path: PathBuf,
    child: Child,
    stdout: ChildStdout,
    width: u32,
    height: u32,
    fps: f32,
    offset_s: f64,
    next_index: u64,
    ended: bool,
}

/// The largest size within 426x240 with the source's aspect ratio, in even pixels
/// (what ffmpeg's scaler and most decoders want).
pub fn fit_frame(width: u32, height: u32) -> (u32, u32) {
    let scale = (FRAME_WIDTH as f64 / width as f64)
        .min(FRAME_HEIGHT as f64 / height as f64)
        .min(1.0);
    let even = |v: f64| ((v / 2.0).round() as u32 * 2).max(2);
    (even(width as f64 * scale), even(height as f64 * scale))
}

fn probe_size(path: &Path) -> Result<(u32, u32), VideoError> {
    let what = path.display().to_string();
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=width,height", "-of", "csv=p=0:s=x"])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| VideoError::Open {
            what: what.clone(),
            reason: format!("cannot run ffprobe ({e}); install ffmpeg (`apt install ffmpeg`)"),
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next().unwrap_or("").trim();
    let parsed = first
        .split_once('x')
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)));
    match parsed {
        Some((w, h)) if out.status.success() && w > 0 && h > 0 => Ok((w, h)),
        _ => Err(VideoError::Open {
            what,
            reason: format!(
                "no video stream found ({})",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
    }
}

impl FileVideoSource {
    /// The checks `open` makes before it starts decoding: a regular file (a directory or
    /// device is named as such) whose video stream ffprobe can read. Returns its size.
    pub fn probe(path: &Path) -> Result<(u32, u32), VideoError> {
        if !path.is_file() {
            let reason = match std::fs::metadata(path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => "no such file",
                Err(_) => "cannot be read (permissions?)",
                Ok(m) if m.is_dir() => "is a directory, not a video file",
                Ok(_) => "is not a regular file (a device or a pipe?)",
            };
            return Err(VideoError::Open {
                what: path.display().to_string(),
                reason: reason.into(),
            });
        }
        probe_size(path)
    }

    pub fn open(path: &Path, opts: FileVideoOptions) -> Result<Self, VideoError> {
        let what = path.display().to_string();
        if !(opts.fps > 0.0 && opts.fps <= MAX_FPS) {
            return Err(VideoError::Open {
                what,
                reason: format!("fps {} is outside (0, {MAX_FPS}]", opts.fps),
            });
        }
        let (src_w, src_h) = Self::probe(path)?;
        let (width, height) = fit_frame(src_w, src_h);
        let mut child = Command::new("ffmpeg")
            .args(["-v", "error", "-nostdin", "-i"])
            .arg(path)
            .args(["-an", "-sn", "-vf"])
            .arg(format!("fps={},scale={width}:{height}", opts.fps))
            .args(["-pix_fmt", "rgb24", "-f", "rawvideo", "-"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            // ffmpeg at `-v error` writes a few lines at most; a pipe that nobody reads
            // until exit cannot fill up.
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| VideoError::Open {
                what: what.clone(),
                reason: format!("cannot run ffmpeg ({e}); install ffmpeg (`apt install ffmpeg`)"),
            })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        Ok(Self {
            path: path.to_path_buf(),
            child,
            stdout,
            width,
            height,
            fps: opts.fps,
            offset_s: opts.offset_s,
            next_index: 0,
            ended: false,
        })
    }

    pub fn frame_size(&self) -> (u32, u32) {
        (self.width, self.height)
    }

    fn decode_error(&mut self, reason: String) -> VideoError {
        VideoError::Decode {
            what: self.path.display().to_string(),
            seconds: self.next_index as f64 / self.fps as f64,
            reason,
        }
    }

    /// After the last byte: a failed ffmpeg is an error, not a short video.
    fn finish(&mut self) -> Result<(), VideoError> {
        self.ended = true;
        let status = self
            .child
            .wait()
            .map_err(|e| self.decode_error(e.to_string()))?;
        if status.success() {
            return Ok(());
        }
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let reason = format!("ffmpeg exited with {status}: {}", err.trim());
        Err(self.decode_error(reason))
    }
}

impl FrameSource for FileVideoSource {
    fn describe(&self) -> String {
        format!("video file {}", self.path.display())
    }

    fn next_frame(&mut self) -> Result<Option<VideoFrame>, VideoError> {
        if self.ended {
            return Ok(None);
        }
        let len = self.width as usize * self.height as usize * 3;
        let mut rgb = vec![0u8; len];
        let mut filled = 0;
        while filled < len {
            match self.stdout.read(&mut rgb[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.decode_error(e.to_string())),
            }
        }
        if filled == 0 {
            self.finish()?;
            return Ok(None);
        }
        if filled < len {
            self.finish()?;
            let reason = format!("last frame truncated ({filled} of {len} bytes)");
            return Err(self.decode_error(reason));
        }
        let t_s = self.offset_s + self.next_index as f64 / self.fps as f64;
        self.next_index += 1;
        Ok(Some(VideoFrame {
            t_s,
            width: self.width,
            height: self.height,
            rgb,
        }))
    }
}

impl Drop for FileVideoSource {
    fn drop(&mut self) {
        if !self.ended {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_fit_musag_format_with_aspect_kept() {
        assert_eq!(fit_frame(426, 240), (426, 240));
        assert_eq!(fit_frame(1920, 1080), (426, 240));
        assert_eq!(fit_frame(640, 480), (320, 240));
        assert_eq!(fit_frame(160, 120), (160, 120));
    }

    #[test]
    fn a_missing_file_is_an_open_error() {
        let e = FileVideoSource::open(Path::new("/nonexistent.mp4"), Default::default())
            .err()
            .unwrap();
        assert!(matches!(e, VideoError::Open { .. }), "{e}");
    }

    #[test]
    fn a_file_without_video_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("not-video.mp4");
        std::fs::write(&p, b"this is not a video").unwrap();
        let e = FileVideoSource::open(&p, Default::default()).err().unwrap();
        assert!(e.to_string().contains("no video stream"), "{e}");
    }

    /// A clip made by ffmpeg's own test source: count and timestamps are exact.
    #[test]
    fn decodes_a_generated_clip_at_the_requested_rate() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("clip.mp4");
        let ok = Command::new("ffmpeg")
            .args(["-v", "error", "-f", "lavfi", "-i"])
            .arg("testsrc=size=640x480:rate=30:duration=2")
            .args(["-pix_fmt", "yuv420p"])
            .arg(&p)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("skipped: ffmpeg cannot make a test clip (install ffmpeg)");
            return;
        }
        let mut src = FileVideoSource::open(
            &p,
            FileVideoOptions {
                fps: 10.0,
                offset_s: 5.0,
            },
        )
        .unwrap();
        assert_eq!(src.frame_size(), (320, 240));
        let mut n = 0;
        while let Some(f) = src.next_frame().unwrap() {
            assert_eq!(f.rgb.len(), 320 * 240 * 3);
            assert!((f.t_s - (5.0 + n as f64 / 10.0)).abs() < 1e-9);
            n += 1;
        }
        assert_eq!(n, 20);
        assert!(src.next_frame().unwrap().is_none());
    }
}
