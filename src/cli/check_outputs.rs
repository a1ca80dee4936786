//! What a command may write: never a file it reads, nor another of its outputs.

use std::path::Path;

/// The one rule for what a command writes: no output may be a file the command reads
/// (`report ev.jsonl -o ev.jsonl` overwrote the events with the page), nor another of
/// its outputs. Checked before anything is read or loaded.
pub(crate) fn check_outputs(
    outputs: &[(&str, Option<&Path>)],
    inputs: &[(&str, Option<&Path>)],
) -> anyhow::Result<()> {
    let mut seen: Vec<(&str, &Path)> = inputs
        .iter()
        .filter_map(|&(what, p)| p.map(|p| (what, p)))
        .collect();
    for &(what, out) in outputs {
        let Some(out) = out else { continue };
        sarcasmd::common::file_kind::distinct_output(out, seen.iter().copied())
            .map_err(|e| anyhow::anyhow!("{what} {}: {e}", out.display()))?;
        seen.push((what, out));
    }
    Ok(())
}
