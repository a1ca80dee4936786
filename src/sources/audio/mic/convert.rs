//! Device bytes (any sample format, channels, rate) to the pipeline's 16 kHz mono.

use cpal::SampleFormat;

use super::devices::is_convertible;
use crate::sources::audio::downmix::downmix_into;
use crate::sources::audio::rate::PIPELINE_RATE_HZ;
use crate::sources::audio::resample::{ResampleError, StreamResampler};

/// Raw device bytes (native-endian samples of `format`, interleaved) to 16 kHz mono.
pub struct FrameConverter {
    pub(super) format: SampleFormat,
    pub(super) channels: usize,
    /// Bytes of a frame split across calls.
    pub(super) partial: Vec<u8>,
    pub(super) interleaved: Vec<f32>,
    pub(super) mono: Vec<f32>,
    pub(super) resampler: StreamResampler,
}

impl FrameConverter {
    /// `None` for a format that is not PCM (see [`is_convertible`]).
    pub fn new(
        format: SampleFormat,
        channels: u16,
        rate_hz: u32,
    ) -> Result<Option<Self>, ResampleError> {
        if !is_convertible(format) || channels == 0 {
            return Ok(None);
        }
        Ok(Some(Self {
            format,
            channels: channels as usize,
            partial: Vec::with_capacity(format.sample_size() * channels as usize),
            interleaved: Vec::new(),
            mono: Vec::new(),
            resampler: StreamResampler::new(rate_hz, PIPELINE_RATE_HZ)?,
        }))
    }

    pub(super) fn frame_bytes(&self) -> usize {
        self.format.sample_size() * self.channels
    }

    /// Convert `bytes` and append the 16 kHz mono output that is ready to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<f32>) -> Result<(), ResampleError> {
        let fb = self.frame_bytes();
        self.interleaved.clear();
        if !self.partial.is_empty() {
            let need = fb - self.partial.len();
            let take = need.min(bytes.len());
            self.partial.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
            if self.partial.len() < fb {
                return Ok(());
            }
            decode_samples(self.format, &self.partial, &mut self.interleaved);
            self.partial.clear();
        }
        let whole = bytes.len() / fb * fb;
        decode_samples(self.format, &bytes[..whole], &mut self.interleaved);
        self.partial.extend_from_slice(&bytes[whole..]);
        self.mono.clear();
        downmix_into(&self.interleaved, self.channels, &mut self.mono);
        self.resampler.process(&self.mono, out)
    }
}

/// Decode native-endian samples to f32 in [-1, 1], appending to `out`. Formats that
/// are not PCM (DSD) append nothing; see [`is_convertible`].
pub fn decode_samples(format: SampleFormat, bytes: &[u8], out: &mut Vec<f32>) {
    macro_rules! ints {
        ($t:ty, $n:expr, $f:expr) => {
            out.extend(
                bytes
                    .chunks_exact($n)
                    .map(|b| $f(<$t>::from_ne_bytes(b.try_into().expect("chunk size")))),
            )
        };
    }
    match format {
        SampleFormat::I8 => out.extend(bytes.iter().map(|&b| b as i8 as f32 / 128.0)),
        SampleFormat::U8 => out.extend(bytes.iter().map(|&b| (b as f32 - 128.0) / 128.0)),
        SampleFormat::I16 => ints!(i16, 2, |v: i16| v as f32 / 32_768.0),
        SampleFormat::U16 => ints!(u16, 2, |v: u16| (v as f32 - 32_768.0) / 32_768.0),
        // 24-bit in a 32-bit container: the low 24 bits carry the sample (the top byte
        // is not always a sign extension, so extend it here).
        SampleFormat::I24 => ints!(i32, 4, |v: i32| ((v << 8) >> 8) as f32 / 8_388_608.0),
        SampleFormat::U24 => ints!(u32, 4, |v: u32| ((v & 0x00ff_ffff) as f32 - 8_388_608.0)
            / 8_388_608.0),
        SampleFormat::I32 => ints!(i32, 4, |v: i32| (v as f64 / 2_147_483_648.0) as f32),
        SampleFormat::U32 => ints!(
            u32,
            4,
            |v: u32| ((v as f64 - 2_147_483_648.0) / 2_147_483_648.0) as f32
        ),
        SampleFormat::I64 => ints!(i64, 8, |v: i64| (v as f64 / 9.223_372_036_854_776e18)
            as f32),
        SampleFormat::U64 => ints!(u64, 8, |v: u64| ((v as f64 - 9.223_372_036_854_776e18)
            / 9.223_372_036_854_776e18)
            as f32),
        SampleFormat::F32 => ints!(f32, 4, |v: f32| if v.is_finite() {
            v.clamp(-1.0, 1.0)
        } else {
            0.0
        }),
        SampleFormat::F64 => ints!(f64, 8, |v: f64| if v.is_finite() {
            v.clamp(-1.0, 1.0) as f32
        } else {
            0.0
        }),
        _ => {}
    }
}
