//! The binary's commands other than `run` and `replay` (which hold a daemon and its stop
//! handler, in `main.rs`), one file each. They live in the binary, not the library,
//! because they report with `anyhow` and print to the terminal; what they measure or
//! draw is in the library.

pub(crate) mod bench;
pub(crate) mod devices;
pub(crate) mod eval;
pub(crate) mod feedback;
pub(crate) mod models;
pub(crate) mod plot;
pub(crate) mod prosody;
pub(crate) mod report;
pub(crate) mod summary;
pub(crate) mod training;
pub(crate) mod validate;

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
