//! `sarcasmd report`: a meeting's HTML report from its events (and run summary).

use std::path::PathBuf;

use super::check_outputs::check_outputs;
use super::exit;

/// One self-contained HTML page of a recorded meeting from its events (JSON lines):
/// timeline coloured by p_sarcastic with each view's score on hover, the transcript
/// with flagged lines marked, gaps and drops, and the latency summary. Opens offline.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The event stream (`sarcasmd replay ... > events.jsonl`, or `output.events`).
    events: PathBuf,
    /// The HTML file to write.
    #[arg(short, long)]
    out: PathBuf,
    /// `replay --stats` summary of the same run: adds its drop counters by reason.
    #[arg(long)]
    stats: Option<PathBuf>,
}

impl Args {
    pub(crate) fn run(self) -> i32 {
        exit::status(self.report())
    }

    fn report(self) -> anyhow::Result<i32> {
        let (events, out, stats) = (&self.events, &self.out, self.stats.as_deref());
        check_outputs(
            &[("-o", Some(out))],
            &[("the events", Some(events)), ("--stats", stats)],
        )?;
        let meeting = sarcasmd::tools::report::Meeting::load(events, stats)?;
        sarcasmd::tools::report::write(&meeting, out)?;
        log::info!(
            "{}: {} utterances ({} flagged), {} gaps -> {}",
            events.display(),
            meeting.utterances.len(),
            meeting.flagged(),
            meeting.gaps.len(),
            out.display()
        );
        Ok(0)
    }
}
