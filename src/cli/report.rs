//! `sarcasmd report`: a meeting's HTML report from its events (and run summary).

use std::path::Path;

pub(crate) fn report(events: &Path, out: &Path, stats: Option<&Path>) -> anyhow::Result<i32> {
    super::check_outputs(
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
