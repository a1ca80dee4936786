//! `sarcasmd validate`: what `run` would refuse on this machine, without running.

use std::path::Path;

use sarcasmd::daemon::DaemonError;
use sarcasmd::Config;

pub(crate) fn validate(file: &Path) -> anyhow::Result<i32> {
    let cfg = Config::load(file).map_err(DaemonError::from)?;
    // What `run` would refuse on this machine: files, secrets, models.
    sarcasmd::daemon::preflight::check(&cfg).map_err(DaemonError::from)?;
    for w in cfg.board_warnings() {
        eprintln!("warning: {}: {w}", file.display());
    }
    println!("{}: ok", file.display());
    log::debug!("{cfg:#?}");
    Ok(0)
}
