//! Pictures of what `sarcasmd bench` and `sarcasmd eval` measure, as SVG files drawn with
//! plotters' SVG backend. Only the command line calls this: nothing here runs in the
//! daemon's pipeline.
//!
//! Each picture reads the same JSON its command writes with `--json` (an in-memory
//! report is serialised first), so `bench --plot` and `plot bench A.json B.json` draw
//! from one code path and a saved run can be drawn again later.

pub mod bench;
pub mod eval;

use std::path::{Path, PathBuf};

use plotters::style::RGBColor;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum PlotError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not {what} JSON: {source}")]
    Json {
        path: PathBuf,
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("the in-memory {what} report does not have the expected shape: {source}")]
    Report {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("nothing to draw: {0}")]
    NoData(String),
    #[error("drawing the picture failed: {0}")]
    Draw(String),
}

/// plotters' drawing errors are generic over the backend; the message is all we keep.
pub(crate) fn draw_err<E: std::fmt::Display>(e: E) -> PlotError {
    PlotError::Draw(e.to_string())
}

/// Colours of the series, in order: distinguishable in print and for the common
/// red-green colour blindness (Okabe-Ito palette).
pub(crate) const SERIES_RGB: [RGBColor; 7] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(120, 120, 120), // grey
];

pub(crate) fn series_colour(i: usize) -> RGBColor {
    SERIES_RGB[i % SERIES_RGB.len()]
}

pub(crate) fn read_json(path: &Path, what: &'static str) -> Result<serde_json::Value, PlotError> {
    let text = std::fs::read_to_string(path).map_err(|source| PlotError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| PlotError::Json {
        path: path.to_path_buf(),
        what,
        source,
    })
}

pub fn write_svg(path: &Path, svg: &str) -> Result<(), PlotError> {
    std::fs::write(path, svg).map_err(|source| PlotError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// A file's name without its folder and extension: the label of its series.
pub fn file_label(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}
