//! What every stage's config check returns: a field-level failure, before anyone knows
//! which file the field came from (`config` adds the file and line).
//!
//! A leaf module: it imports nothing of the crate, so a stage can check its own section
//! without importing `config`, and `config` (which aggregates the stages' sections) is
//! imported by nothing below it.

/// A field-level validation failure: which key (`asr.threads`) and why, in words that say
/// what to write instead.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub reason: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }
}
