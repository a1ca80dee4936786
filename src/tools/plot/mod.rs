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

/// A saved `bench --json` or `eval --json` run is at most a few MB (an eval of 10 000
/// items with every score is about 5 MB); a larger file is the wrong file, and `/dev/zero`
/// or a FIFO is refused by kind instead of being read without end.
pub const MAX_RUN_JSON_BYTES: u64 = 64 << 20;

pub(crate) fn read_json(path: &Path, what: &'static str) -> Result<serde_json::Value, PlotError> {
    let text = crate::common::file_kind::read_text(path, MAX_RUN_JSON_BYTES).map_err(|source| {
        PlotError::Read {
            path: path.to_path_buf(),
            source,
        }
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

/// How a legend entry shows its series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Mark {
    Line,
    Dashed,
    Box,
}

/// Legends go in a strip under their chart rather than on it: with several curves a
/// legend inside the plot always covers some of the data.
pub(crate) struct Legend(pub Vec<(String, RGBColor, Mark)>);

pub(crate) const LEGEND_ROW_PX: u32 = 17;

impl Legend {
    /// Pixels the strip needs.
    pub fn height_px(&self) -> u32 {
        self.0.len() as u32 * LEGEND_ROW_PX + 10
    }

    pub fn draw<DB: plotters::prelude::DrawingBackend>(
        &self,
        area: &plotters::prelude::DrawingArea<DB, plotters::coord::Shift>,
        left_px: i32,
    ) -> Result<(), PlotError>
    where
        DB::ErrorType: 'static,
    {
        use plotters::prelude::*;
        for (k, (label, colour, mark)) in self.0.iter().enumerate() {
            let y = 8 + k as i32 * LEGEND_ROW_PX as i32 + LEGEND_ROW_PX as i32 / 2;
            let x = left_px;
            match mark {
                Mark::Line => area
                    .draw(&PathElement::new(
                        vec![(x, y), (x + 24, y)],
                        colour.stroke_width(2),
                    ))
                    .map_err(draw_err)?,
                Mark::Dashed => {
                    for dx in [0, 10, 20] {
                        area.draw(&PathElement::new(
                            vec![(x + dx, y), (x + dx + 5, y)],
                            colour.stroke_width(2),
                        ))
                        .map_err(draw_err)?;
                    }
                }
                Mark::Box => area
                    .draw(&Rectangle::new(
                        [(x + 6, y - 5), (x + 18, y + 5)],
                        colour.filled(),
                    ))
                    .map_err(draw_err)?,
            }
            area.draw(&Text::new(
                label.clone(),
                (x + 32, y - 7),
                ("sans-serif", 12).into_font().color(&BLACK),
            ))
            .map_err(draw_err)?;
        }
        Ok(())
    }
}
