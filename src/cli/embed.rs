//! `sarcasmd embed`: sentence embeddings by the daemon's text encoder, for training
//! text heads.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use sarcasmd::common::models::{self, ModelStore};
use sarcasmd::config::Config;
use sarcasmd::pipeline::EngineError;
use sarcasmd::tools::manifest::Manifest;
use sarcasmd::views::text::TextEncoder;

use super::check_outputs::check_outputs;
use super::exit::{self, Coded};
use super::parse::seconds_at_least_zero;

/// Sentence embeddings by the daemon's text encoder, for training text heads.
/// Input: a manifest (docs/manifest.md); an item without text embeds "".
#[derive(clap::Args)]
pub(crate) struct Args {
    #[arg(long = "in")]
    input: PathBuf,
    #[arg(long)]
    out: PathBuf,
    /// Prepend the item's context turns of the last N seconds, exactly as
    /// `sarcasmd eval` builds its context condition (0 = the text alone).
    #[arg(long, default_value_t = 0.0, value_parser = seconds_at_least_zero)]
    context_s: f32,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.embed())
    }

    fn embed(self) -> anyhow::Result<i32> {
        check_outputs(
            &[("--out", Some(&self.out))],
            &[("--in", Some(&self.input))],
        )?;
        let cfg = Config::default();
        let store = ModelStore::new(models::model_dir(cfg.models.dir.as_deref()), true)?;
        let (enc, _) = TextEncoder::from_store(&store, &cfg.text)
            .map_err(|e| Coded::models(EngineError::from(e)))?;
        let items = Manifest::load(&self.input).map_err(Coded::bad_input)?.items;
        let mut w = BufWriter::new(std::fs::File::create(&self.out)?);
        for (k, it) in items.iter().enumerate() {
            let text = it.text.as_deref().unwrap_or("");
            let e = if self.context_s > 0.0 {
                enc.embed(&sarcasmd::tools::eval::text_with_context(
                    it,
                    text,
                    self.context_s,
                ))?
            } else {
                enc.embed(text)?
            };
            serde_json::to_writer(&mut w, &serde_json::json!({"id": it.id, "embedding": e}))?;
            w.write_all(b"\n")?;
            if (k + 1) % 2000 == 0 {
                log::info!("embed: {}/{}", k + 1, items.len());
            }
        }
        w.flush()?;
        Ok(0)
    }
}
