//! `sarcasmd validate`: what `run` would refuse on this machine, without running.

use std::path::PathBuf;

use sarcasmd::daemon::preflight::PreflightError;
use sarcasmd::Config;

use super::exit::{self, Coded};

/// Check a config file; no side effects.
#[derive(clap::Args)]
pub(crate) struct Args {
    file: PathBuf,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.validate())
    }

    fn validate(self) -> anyhow::Result<i32> {
        let file = &self.file;
        let cfg = Config::load(file).map_err(Coded::bad_input)?;
        // What `run` would refuse on this machine: files, secrets, models.
        sarcasmd::daemon::preflight::check(&cfg).map_err(|e| match e {
            PreflightError::Models(_) => Coded::models(e),
            PreflightError::Config(_) => Coded::bad_input(e),
        })?;
        for w in cfg.board_warnings() {
            eprintln!("warning: {}: {w}", file.display());
        }
        println!("{}: ok", file.display());
        log::debug!("{cfg:#?}");
        Ok(0)
    }
}
