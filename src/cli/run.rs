//! `sarcasmd run`: the daemon as configured, reloading on SIGHUP, until SIGTERM/SIGINT.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::Context;

use sarcasmd::daemon::builder::Daemon;
use sarcasmd::daemon::DaemonError;

use super::exit;

/// Run the daemon as configured (source, models, outputs all from the file).
#[derive(clap::Args)]
pub(crate) struct Args {
    #[arg(long)]
    config: PathBuf,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        daemon_status(self.serve())
    }

    fn serve(self) -> anyhow::Result<i32> {
        let stop = super::signals::install_stop_handler()?;
        let reload = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGHUP, reload.clone())
            .context("installing SIGHUP handler")?;
        let r = Daemon::from_file(&self.config)?
            .stop_on(stop)
            .reload_on(reload)
            .run()?;
        super::summary::report_with_cpu(&r.stats, None, r.stream_cpu_s, r.model_load_ms)?;
        Ok(0)
    }
}

/// The exit status of a command that held a daemon: a daemon's error says its own (2
/// bad input, 3 models, 1 else), and a reader of the events on stdout that left
/// (`sarcasmd replay x.wav | head -1`) is not a failure.
pub(crate) fn daemon_status(r: anyhow::Result<i32>) -> i32 {
    match r {
        Err(e)
            if e.downcast_ref::<DaemonError>()
                .is_some_and(DaemonError::is_broken_pipe) =>
        {
            log::info!("event reader closed the pipe; stopping");
            0
        }
        r => exit::status_with(r, |e| {
            e.downcast_ref::<DaemonError>().map(DaemonError::exit_code)
        }),
    }
}
