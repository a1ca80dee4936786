//! Raw signed 16-bit little-endian mono PCM from any reader (stdin, a pipe, a socket).

use std::io::{ErrorKind, Read};

use super::error::AudioError;
use super::rate::{validate_rate, PIPELINE_RATE_HZ};
use super::resample::StreamResampler;
use super::source::AudioSource;

/// Bytes asked for per read: 4096 bytes = 128 ms at 16 kHz. `read` returns what has
/// arrived, so live pipes are handled as they come.
const READ_BYTES: usize = 4096;

pub struct PcmReaderSource<R: Read + Send> {
    what: String,
    reader: R,
    sample_rate_hz: u32,
    resampler: StreamResampler,
    buf: Vec<u8>,
    /// An odd byte left over from the previous read (a sample split across reads).
    carry: Option<u8>,
    samples: Vec<f32>,
    bytes_total: u64,
    finished: bool,
    live: bool,
    /// When set, wait for data with poll(2) in short slices, so a stop request is seen
    /// even while the writer is silent (a blocking read would hold shutdown hostage).
    poll_fd: Option<i32>,
}

/// How long one read waits for data before handing control back to the pipeline.
const POLL_MS: i32 = 100;

impl<R: Read + Send> PcmReaderSource<R> {
    pub fn new(
        what: impl Into<String>,
        reader: R,
        sample_rate_hz: u32,
    ) -> Result<Self, AudioError> {
        let what = what.into();
        validate_rate(sample_rate_hz).map_err(|reason| AudioError::Rate {
            what: what.clone(),
            reason,
        })?;
        let resampler =
            StreamResampler::new(sample_rate_hz, PIPELINE_RATE_HZ).map_err(|source| {
                AudioError::Resample {
                    what: what.clone(),
                    source,
                }
            })?;
        Ok(Self {
            what,
            reader,
            sample_rate_hz,
            resampler,
            buf: vec![0; READ_BYTES],
            carry: None,
            samples: Vec::with_capacity(READ_BYTES / 2 + 1),
            bytes_total: 0,
            finished: false,
            live: false,
            poll_fd: None,
        })
    }

    /// Poll this file descriptor (the one `reader` reads from) before each read.
    pub fn poll_fd(mut self, fd: i32) -> Self {
        self.poll_fd = Some(fd);
        self
    }

    /// Mark the reader as fed by a live capture: the pipeline then drops (and counts)
    /// instead of blocking the writer when it falls behind.
    pub fn live(mut self, live: bool) -> Self {
        self.live = live;
        self
    }
}

impl<R: Read + Send> AudioSource for PcmReaderSource<R> {
    fn describe(&self) -> String {
        format!("{} (s16le mono, {} Hz)", self.what, self.sample_rate_hz)
    }

    fn is_live(&self) -> bool {
        self.live
    }

    fn read_chunk(&mut self, out: &mut Vec<f32>) -> Result<bool, AudioError> {
        if self.finished {
            return Ok(false);
        }
        if let Some(fd) = self.poll_fd {
            let mut pfd = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut pfd, 1, POLL_MS) };
            if ready == 0 {
                return Ok(true); // nothing yet; the caller checks for stop and comes back
            }
        }
        let n = loop {
            match self.reader.read(&mut self.buf) {
                Ok(n) => break n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    return Err(AudioError::Read {
                        what: self.what.clone(),
                        seconds: self.bytes_total as f64 / 2.0 / self.sample_rate_hz as f64,
                        reason: e.to_string(),
                    })
                }
            }
        };
        let map = |what: &str, source| AudioError::Resample {
            what: what.to_string(),
            source,
        };
        if n == 0 {
            if self.carry.is_some() {
                log::warn!(
                    "{}: stream ended on half a sample; last byte ignored",
                    self.what
                );
            }
            if self.bytes_total < 2 {
                self.finished = true;
                return Err(AudioError::Empty {
                    path: self.what.clone().into(),
                });
            }
            self.resampler.finish(out).map_err(|e| map(&self.what, e))?;
            self.finished = true;
            return Ok(true);
        }
        self.bytes_total += n as u64;
        self.samples.clear();
        let mut bytes = &self.buf[..n];
        if let Some(lo) = self.carry.take() {
            self.samples
                .push(i16::from_le_bytes([lo, bytes[0]]) as f32 / 32768.0);
            bytes = &bytes[1..];
        }
        let pairs = bytes.chunks_exact(2);
        self.carry = pairs.remainder().first().copied();
        self.samples
            .extend(pairs.map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32768.0));
        self.resampler
            .process(&self.samples, out)
            .map_err(|e| map(&self.what, e))?;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out bytes in awkward, odd-sized pieces.
    struct Dribble {
        data: Vec<u8>,
        pos: usize,
        step: usize,
    }
    impl Read for Dribble {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.step.min(buf.len()).min(self.data.len() - self.pos);
            buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            self.step = self.step % 5 + 1;
            Ok(n)
        }
    }

    #[test]
    fn odd_reads_reassemble_samples() {
        let vals: Vec<i16> = (0..1000).map(|i| (i * 37 % 2000 - 1000) as i16).collect();
        let data: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut src = PcmReaderSource::new(
            "test",
            Dribble {
                data,
                pos: 0,
                step: 1,
            },
            16_000,
        )
        .unwrap();
        let mut out = Vec::new();
        while src.read_chunk(&mut out).unwrap() {}
        let expect: Vec<f32> = vals.iter().map(|&v| v as f32 / 32768.0).collect();
        assert_eq!(out, expect);
    }

    #[test]
    fn empty_stream_is_an_error() {
        let mut src = PcmReaderSource::new("stdin", std::io::empty(), 16_000).unwrap();
        let mut out = Vec::new();
        assert!(matches!(
            src.read_chunk(&mut out),
            Err(AudioError::Empty { .. })
        ));
    }
}
