//! The prosody stage's configuration (`[prosody]` section) and its validation.

use super::error::ProsodyError;

/// Configuration of the prosody stage (`[prosody]` section). Missing fields take defaults.
#[derive(Debug, Clone, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProsodyConfig {
    /// Spectral frame length in ms (default 25).
    pub frame_ms: f32,
    /// Hop between frames in ms (default 10).
    pub hop_ms: f32,
    /// Lowest F0 searched, Hz (default 60).
    pub f0_min_hz: f32,
    /// Highest F0 searched, Hz (default 500).
    pub f0_max_hz: f32,
    /// YIN absolute threshold on the cumulative-mean-normalised difference (default 0.1).
    pub yin_threshold: f32,
    /// Number of MFCCs, c0 included (default 13).
    pub n_mfcc: usize,
    /// Number of mel filters (default 26).
    pub n_mel_filters: usize,
}

impl Default for ProsodyConfig {
    fn default() -> Self {
        Self {
            frame_ms: 25.0,
            hop_ms: 10.0,
            f0_min_hz: 60.0,
            f0_max_hz: 500.0,
            yin_threshold: 0.1,
            n_mfcc: 13,
            n_mel_filters: 26,
        }
    }
}

fn check_range_f32(field: &'static str, v: f32, lo: f32, hi: f32) -> Result<(), ProsodyError> {
    if v.is_finite() && v >= lo && v <= hi {
        Ok(())
    } else {
        Err(ProsodyError::InvalidConfig {
            field,
            value: format!("{v}"),
            allowed: format!("{lo} ..= {hi}"),
        })
    }
}

impl ProsodyConfig {
    /// Checks every field; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), ProsodyError> {
        check_range_f32("frame_ms", self.frame_ms, 10.0, 100.0)?;
        check_range_f32("hop_ms", self.hop_ms, 1.0, self.frame_ms)?;
        check_range_f32("f0_min_hz", self.f0_min_hz, 40.0, 300.0)?;
        check_range_f32("f0_max_hz", self.f0_max_hz, 1.5 * self.f0_min_hz, 1000.0)?;
        check_range_f32("yin_threshold", self.yin_threshold, 0.01, 0.6)?;
        if !(4..=64).contains(&self.n_mel_filters) {
            return Err(ProsodyError::InvalidConfig {
                field: "n_mel_filters",
                value: self.n_mel_filters.to_string(),
                allowed: "4 ..= 64".into(),
            });
        }
        if self.n_mfcc < 1 || self.n_mfcc > self.n_mel_filters {
            return Err(ProsodyError::InvalidConfig {
                field: "n_mfcc",
                value: self.n_mfcc.to_string(),
                allowed: format!("1 ..= n_mel_filters ({})", self.n_mel_filters),
            });
        }
        Ok(())
    }
}
