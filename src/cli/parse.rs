//! Argument values clap checks before a command runs (a bad one exits 2 with usage).

/// `--context-s`: refused unless a finite number >= 0.
pub(crate) fn seconds_at_least_zero(s: &str) -> Result<f32, String> {
    match s.parse::<f32>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds >= 0")),
    }
}
