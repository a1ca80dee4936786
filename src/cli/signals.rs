//! SIGTERM and SIGINT for the commands that hold a daemon (`run`, `replay`): the stop
//! flag, a second signal that exits at once, and a deadline for a stop that cannot finish.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

/// After SIGTERM or SIGINT the process ends within this time even when the graceful
/// path cannot finish (a stdout reader that stopped reading, a file open that blocks):
/// the unit's `TimeoutStopSec=5s` would otherwise end it with SIGKILL, and an
/// interactive user would wait forever.
const SHUTDOWN_DEADLINE: Duration = Duration::from_millis(4_500);

/// The stop flag set by SIGTERM/SIGINT. A second signal while stopping exits at once
/// (status 130); a stop that has not finished after [`SHUTDOWN_DEADLINE`] exits 1.
pub(crate) fn install_stop_handler() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        // Registered first, so it sees the flag as it was before this signal.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("installing signal handler")?;
        signal_hook::flag::register(sig, stop.clone()).context("installing signal handler")?;
    }
    let watched = stop.clone();
    std::thread::Builder::new()
        .name("stop-deadline".into())
        .spawn(move || {
            while !watched.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            std::thread::sleep(SHUTDOWN_DEADLINE);
            log::error!(
                "shutdown did not finish within {:.1} s of the signal (a stalled reader of the \
                 events on stdout, or a file that blocks); exiting now, events in flight are lost",
                SHUTDOWN_DEADLINE.as_secs_f64()
            );
            std::process::exit(1);
        })
        .context("starting the shutdown deadline thread")?;
    Ok(stop)
}
