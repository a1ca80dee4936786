//! The configurations a row can be about: which views each needs, the served system,
//! and the key of a configuration's context condition.

/// Views a configuration needs, in table order. T+V is absent: the fusion head was
/// trained with text and video masked out, never audio, so it cannot serve T+V.
pub(super) const CONFIGS: [(&str, bool, bool, bool); 6] = [
    ("T", true, false, false),
    ("A", false, true, false),
    ("V", false, false, true),
    ("T+A", true, true, false),
    ("A+V", false, true, true),
    ("T+A+V", true, true, true),
];

pub(super) const SERVED: &str = "served";

pub(super) fn ctx_key(config: &str) -> String {
    format!("{config}|ctx")
}
