//! `sarcasmd prosody`: the audio view's per-frame features of a WAV file, as JSON lines.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use sarcasmd::sources::audio::{AudioSource, WavSource, PIPELINE_RATE_HZ};
use sarcasmd::views::prosody;

use super::exit::{self, Coded};

/// Print prosody frames of a WAV file as JSON lines (for checking F0 against Praat).
#[derive(clap::Args)]
pub(crate) struct Args {
    file: PathBuf,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.frames())
    }

    fn frames(self) -> anyhow::Result<i32> {
        let mut src = WavSource::open(&self.file).map_err(Coded::bad_input)?;
        let mut samples = Vec::new();
        while src.read_chunk(&mut samples).map_err(Coded::bad_input)? {}
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
}
