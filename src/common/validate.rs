//! What every stage's config check returns: field-level failures, before anyone knows
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

    /// The error `e` under `field`, without the field name a module's own message
    /// starts with (`http.token_file: ...`).
    pub fn under(field: &'static str, e: impl std::fmt::Display) -> Self {
        let msg = e.to_string();
        let reason = msg
            .strip_prefix(field)
            .map(|r| r.trim_start_matches([':', ' ']))
            .unwrap_or(&msg);
        Self::new(field, reason.to_string())
    }
}

/// Every problem found in a config, in file order, so that a file with three mistakes is
/// fixed in one round instead of three.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Problems(Vec<FieldError>);

impl Problems {
    pub fn push(&mut self, field: impl Into<String>, reason: impl Into<String>) {
        self.0.push(FieldError::new(field, reason));
    }

    /// Adds the problem of a check that stops at its first one (e.g. a parser).
    pub fn add(&mut self, result: Result<(), FieldError>) {
        if let Err(e) = result {
            self.0.push(e);
        }
    }

    pub fn extend(&mut self, other: Problems) {
        self.0.extend(other.0);
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &FieldError> {
        self.0.iter()
    }

    pub fn first(&self) -> Option<&FieldError> {
        self.0.first()
    }

    pub fn into_result(self) -> Result<(), Problems> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl Problems {
    /// `noun` for one problem ("invalid value for" gives "invalid value for `f`: why"),
    /// and a count with one line per problem when there are several.
    pub fn describe(&self, one: &str, many: &str) -> String {
        match self.0.as_slice() {
            [] => format!("no {many}"),
            [e] if one.is_empty() => format!("`{}`: {}", e.field, e.reason),
            [e] => format!("{one} `{}`: {}", e.field, e.reason),
            all => {
                let mut s = format!("{} {many}:", all.len());
                for e in all {
                    s.push_str(&format!("\n  `{}`: {}", e.field, e.reason));
                }
                s
            }
        }
    }
}

impl std::fmt::Display for Problems {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe("invalid value for", "invalid values"))
    }
}

/// A config section that checks itself. `check` reports every problem it finds;
/// `validate` is for callers that only need to know whether the section is usable (and
/// which problem came first).
pub trait Validate {
    fn check(&self, problems: &mut Problems);

    fn validate(&self) -> Result<(), FieldError> {
        let mut problems = Problems::default();
        self.check(&mut problems);
        match problems.0.into_iter().next() {
            Some(first) => Err(first),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Range(i32);
    impl Validate for Range {
        fn check(&self, p: &mut Problems) {
            if self.0 < 0 {
                p.push("x.low", "must be at least 0");
            }
            if self.0 % 2 != 0 {
                p.push("x.odd", "must be even");
            }
        }
    }

    #[test]
    fn every_problem_is_kept_and_validate_gives_the_first() {
        let mut p = Problems::default();
        Range(-3).check(&mut p);
        assert_eq!(p.len(), 2);
        assert_eq!(Range(-3).validate().unwrap_err().field, "x.low");
        assert_eq!(Range(4).validate(), Ok(()));
        let text = p.to_string();
        assert!(text.starts_with("2 invalid values:"), "{text}");
        assert!(
            text.contains("`x.low`") && text.contains("`x.odd`"),
            "{text}"
        );
        let mut one = Problems::default();
        Range(3).check(&mut one);
        assert_eq!(one.to_string(), "invalid value for `x.odd`: must be even");
    }
}
