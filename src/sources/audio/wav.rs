//! WAV file source: any common rate, channel count and sample format.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use hound::{SampleFormat, WavReader};

use super::downmix::downmix_into;
use super::error::AudioError;
use super::rate::{validate_rate, PIPELINE_RATE_HZ};
use super::resample::StreamResampler;
use super::source::AudioSource;

/// What the header says, checked against the file before any audio is decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct WavInfo {
    pub sample_rate_hz: u32,
    pub channels: u16,
    pub bits_per_sample: u16,
    pub float: bool,
    /// Frames (samples per channel).
    pub frames: u64,
}

impl WavInfo {
    pub fn duration_s(&self) -> f64 {
        self.frames as f64 / self.sample_rate_hz as f64
    }
}

/// Frames decoded per read; ~85 ms at 48 kHz keeps the ring fed without big bursts.
const READ_FRAMES: usize = 4096;

/// More channels than any microphone array we would downmix; a larger count in a header
/// is corruption, and honouring it would size the read buffer by it (65535 channels x
/// 4096 frames is 1 GiB).
pub const MAX_CHANNELS: u16 = 64;

pub struct WavSource<R: Read + Seek + Send = BufReader<File>> {
    path: PathBuf,
    info: WavInfo,
    reader: WavReader<HeaderFix<R>>,
    resampler: StreamResampler,
    frames_read: u64,
    interleaved: Vec<f32>,
    mono: Vec<f32>,
    finished: bool,
}

impl WavSource {
    /// Open and validate: format, rate, channel count, emptiness and truncation are all
    /// checked here, so a bad file fails before the pipeline starts.
    pub fn open(path: &Path) -> Result<Self, AudioError> {
        let p = path.to_path_buf();
        // By kind first: a FIFO would block the open (an eval item's audio hung), and a
        // device reports 0 bytes and would be called empty.
        let file = crate::common::file_kind::regular_file(path)
            .and_then(|_| File::open(path))
            .map_err(|source| AudioError::Open {
                path: p.clone(),
                source,
            })?;
        let file_len = file.metadata().map(|m| m.len()).unwrap_or(0);
        Self::from_reader(BufReader::new(file), file_len, p)
    }
}

impl<R: Read + Seek + Send> WavSource<R> {
    /// The same checks and decoding as [`WavSource::open`] over any seekable reader of
    /// `len_bytes` bytes (in-memory WAV data, the fuzz targets). `path` names it in errors.
    pub fn from_reader(mut reader: R, len_bytes: u64, path: PathBuf) -> Result<Self, AudioError> {
        if len_bytes == 0 {
            return Err(AudioError::NotWav {
                path,
                reason: "the file is empty (0 bytes)".into(),
            });
        }
        let found = find_data_chunk(&mut reader).map_err(|reason| AudioError::NotWav {
            path: path.clone(),
            reason,
        })?;
        reader
            .seek(SeekFrom::Start(0))
            .map_err(|source| AudioError::Open {
                path: path.clone(),
                source,
            })?;
        // A WAV written to a pipe (ffmpeg, arecord) cannot go back to fill in its sizes and
        // leaves a placeholder (0xFFFFFFFF, or about 2 GiB): read the audio that is there.
        let mut fix = HeaderFix::new(reader);
        let mut data_chunk = found.map(|c| (c.offset, c.size));
        if let Some(c) = found.filter(|c| c.size >= STREAMED_SIZE_MIN) {
            let present = len_bytes.saturating_sub(c.offset);
            if present < c.size {
                let align = u64::from(c.block_align.max(1));
                let size = (present / align * align).min(u64::from(u32::MAX));
                fix.patch(c.offset - 4, size as u32);
                fix.patch(4, (len_bytes - 8).min(u64::from(u32::MAX)) as u32);
                data_chunk = Some((c.offset, size));
                log::info!(
                    "{}: streamed WAV (size placeholder in the header): reading the {present} bytes present",
                    path.display()
                );
            }
        }
        let reader = WavReader::new(fix).map_err(|e| classify_hound(&path, e))?;
        let spec = reader.spec();
        let float = spec.sample_format == SampleFormat::Float;
        match (float, spec.bits_per_sample) {
            (false, 16 | 24 | 32) | (true, 32) => {}
            (f, b) => {
                return Err(AudioError::Unsupported {
                    path,
                    reason: format!("{}-bit {}", b, if f { "float" } else { "integer" }),
                })
            }
        }
        if spec.channels == 0 || spec.channels > MAX_CHANNELS {
            return Err(AudioError::Unsupported {
                path,
                reason: format!("{} channels (at most {MAX_CHANNELS})", spec.channels),
            });
        }
        validate_rate(spec.sample_rate).map_err(|reason| AudioError::Unsupported {
            path: path.clone(),
            reason,
        })?;
        let frames = reader.duration() as u64;
        let info = WavInfo {
            sample_rate_hz: spec.sample_rate,
            channels: spec.channels,
            bits_per_sample: spec.bits_per_sample,
            float,
            frames,
        };
        if frames == 0 {
            return Err(AudioError::Empty { path });
        }
        if let Some((offset, declared)) = data_chunk {
            let present = len_bytes.saturating_sub(offset);
            if present < declared {
                let bytes_per_frame = (spec.bits_per_sample as u64 / 8) * spec.channels as u64;
                return Err(AudioError::Truncated {
                    path,
                    reason: format!(
                        "header declares {declared} bytes of audio ({:.2} s) but only {present} bytes ({:.2} s) are present",
                        info.duration_s(),
                        (present / bytes_per_frame.max(1)) as f64 / spec.sample_rate as f64
                    ),
                });
            }
        }
        let resampler =
            StreamResampler::new(spec.sample_rate, PIPELINE_RATE_HZ).map_err(|source| {
                AudioError::Resample {
                    what: path.display().to_string(),
                    source,
                }
            })?;
        Ok(Self {
            path,
            info,
            reader,
            resampler,
            frames_read: 0,
            interleaved: Vec::with_capacity(READ_FRAMES * spec.channels as usize),
            mono: Vec::with_capacity(READ_FRAMES),
            finished: false,
        })
    }

    pub fn info(&self) -> &WavInfo {
        &self.info
    }

    fn read_err(&self, e: hound::Error) -> AudioError {
        let seconds = self.frames_read as f64 / self.info.sample_rate_hz as f64;
        match e {
            hound::Error::IoError(ref io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
                AudioError::Truncated {
                    path: self.path.clone(),
                    reason: format!("audio ends early, after {seconds:.2} s"),
                }
            }
            other => AudioError::Read {
                what: self.path.display().to_string(),
                seconds,
                reason: other.to_string(),
            },
        }
    }
}

impl<R: Read + Seek + Send> AudioSource for WavSource<R> {
    fn describe(&self) -> String {
        format!(
            "{} ({} Hz, {} ch, {}-bit {}, {:.2} s)",
            self.path.display(),
            self.info.sample_rate_hz,
            self.info.channels,
            self.info.bits_per_sample,
            if self.info.float { "float" } else { "int" },
            self.info.duration_s()
        )
    }

    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        if self.finished {
            return Ok(false);
        }
        let ch = self.info.channels as usize;
        self.interleaved.clear();
        let want = READ_FRAMES * ch;
        let res: Result<(), hound::Error> = if self.info.float {
            // Float files may hold NaN, infinities or values past full scale (found by
            // fuzzing); one NaN would spread through a whole resampler block. Silence
            // the non-finite ones and clip the rest, as an ADC would.
            self.reader.samples::<f32>().take(want).try_for_each(|s| {
                s.map(|v| {
                    let v = if v.is_finite() {
                        v.clamp(-1.0, 1.0)
                    } else {
                        0.0
                    };
                    self.interleaved.push(v)
                })
            })
        } else {
            let scale = 1.0 / (1u64 << (self.info.bits_per_sample - 1)) as f32;
            self.reader
                .samples::<i32>()
                .take(want)
                .try_for_each(|s| s.map(|v| self.interleaved.push(v as f32 * scale)))
        };
        if let Err(e) = res {
            return Err(self.read_err(e));
        }
        // A trailing partial frame only happens in a corrupt file; drop it.
        let whole = self.interleaved.len() / ch * ch;
        self.interleaved.truncate(whole);
        self.frames_read += (whole / ch) as u64;
        self.mono.clear();
        downmix_into(&self.interleaved, ch, &mut self.mono);
        let map = |source| AudioError::Resample {
            what: self.path.display().to_string(),
            source,
        };
        self.resampler.process(&self.mono, out).map_err(map)?;
        if whole < want {
            self.resampler
                .finish(out)
                .map_err(|source| AudioError::Resample {
                    what: self.path.display().to_string(),
                    source,
                })?;
            self.finished = true;
        }
        Ok(true)
    }
}

fn classify_hound(path: &Path, e: hound::Error) -> AudioError {
    let p = path.to_path_buf();
    match e {
        // A valid WAV whose sample size hound cannot decode (a plain 64-bit float file
        // as sox writes it, PCM sizes WAVEFORMATEX does not allow) is a format to
        // convert, not a broken file: name the formats that work and how to convert.
        hound::Error::FormatError(reason) if reason.starts_with("bits per sample is not") => {
            AudioError::Unsupported {
                path: p,
                reason: format!("sample size not decodable ({reason}; 64-bit float is not read)"),
            }
        }
        hound::Error::FormatError(reason) => AudioError::NotWav {
            path: p,
            reason: reason.to_string(),
        },
        hound::Error::Unsupported => AudioError::Unsupported {
            path: p,
            reason: "a format hound cannot decode (compressed or unusual WAV)".into(),
        },
        hound::Error::IoError(io) if io.kind() == std::io::ErrorKind::UnexpectedEof => {
            AudioError::NotWav {
                path: p,
                reason: "file ends inside the header".into(),
            }
        }
        other => AudioError::NotWav {
            path: p,
            reason: other.to_string(),
        },
    }
}

/// Walk the RIFF chunks to find where the `data` chunk starts and how long its header
/// says it is, so truncation is caught before decoding. `Ok(None)` when the layout is
/// unusual but may still be readable; hound then has the final word.
/// Data chunk sizes from this one up are placeholders of a WAV written to a pipe
/// (ffmpeg writes 0xFFFFFFFF; arecord about 2 GiB), not the length of the audio.
const STREAMED_SIZE_MIN: u64 = 0x7FFF_0000;

/// Where the data chunk starts, what its header declares, and the fmt chunk's block
/// alignment (bytes per frame; 0 when no fmt chunk came first).
#[derive(Debug, Clone, Copy)]
struct DataChunk {
    offset: u64,
    size: u64,
    block_align: u16,
}

fn find_data_chunk<R: Read + Seek>(f: &mut R) -> Result<Option<DataChunk>, String> {
    let mut head = [0u8; 12];
    if f.read_exact(&mut head).is_err() {
        return Err("shorter than a RIFF header (12 bytes)".into());
    }
    if &head[0..4] != b"RIFF" || &head[8..12] != b"WAVE" {
        return Err("no RIFF/WAVE signature (is this a WAV file?)".into());
    }
    let mut pos = 12u64;
    let mut block_align = 0u16;
    for _ in 0..64 {
        let mut ch = [0u8; 8];
        if f.read_exact(&mut ch).is_err() {
            return Ok(None);
        }
        let size = u32::from_le_bytes([ch[4], ch[5], ch[6], ch[7]]) as u64;
        if &ch[0..4] == b"data" {
            return Ok(Some(DataChunk {
                offset: pos + 8,
                size,
                block_align,
            }));
        }
        if &ch[0..4] == b"fmt " && size >= 16 {
            let mut fmt = [0u8; 16];
            if f.read_exact(&mut fmt).is_ok() {
                block_align = u16::from_le_bytes([fmt[12], fmt[13]]);
            }
        }
        pos += 8 + size + (size & 1);
        if f.seek(SeekFrom::Start(pos)).is_err() {
            return Ok(None);
        }
    }
    Ok(None)
}

/// A reader that shows some 32-bit little-endian header fields with other values (the
/// sizes of a streamed WAV), so hound reads what is present instead of refusing it.
pub struct HeaderFix<R> {
    inner: R,
    pos: u64,
    patches: Vec<(u64, [u8; 4])>,
}

impl<R> HeaderFix<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            pos: 0,
            patches: Vec::new(),
        }
    }

    fn patch(&mut self, offset: u64, value: u32) {
        self.patches.push((offset, value.to_le_bytes()));
    }
}

impl<R: Read> Read for HeaderFix<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        let (start, end) = (self.pos, self.pos + n as u64);
        for (at, bytes) in &self.patches {
            for (i, b) in bytes.iter().enumerate() {
                let p = at + i as u64;
                if p >= start && p < end {
                    buf[(p - start) as usize] = *b;
                }
            }
        }
        self.pos = end;
        Ok(n)
    }
}

impl<R: Seek> Seek for HeaderFix<R> {
    fn seek(&mut self, to: SeekFrom) -> std::io::Result<u64> {
        self.pos = self.inner.seek(to)?;
        Ok(self.pos)
    }
}
