//! `sarcasmd prosody`: the audio view's per-frame features of a WAV file, as JSON lines.

use std::io::{BufWriter, Write};
use std::path::Path;

use sarcasmd::daemon::DaemonError;
use sarcasmd::sources::audio::{AudioSource, WavSource, PIPELINE_RATE_HZ};
use sarcasmd::views::prosody;

pub(crate) fn prosody(file: &Path) -> anyhow::Result<i32> {
    let mut src = WavSource::open(file).map_err(DaemonError::from)?;
    let mut samples = Vec::new();
    while src.read_chunk(&mut samples).map_err(DaemonError::from)? {}
    let cfg = prosody::ProsodyConfig::default();
    let frames = prosody::extract_frames(&samples, PIPELINE_RATE_HZ, 0.0, &cfg)?;
    let mut out = BufWriter::new(std::io::stdout().lock());
    for f in frames {
        serde_json::to_writer(&mut out, &f)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(0)
}
