//! Errors as chains: a stage's error keeps its cause as `source()` (a typed error,
//! boxed when it comes from a dependency) instead of flattening it into a string, and
//! [`Chain`] prints a whole chain on one line with each piece of text once. Our
//! messages also name their cause inline (so a log line that prints one error with
//! `{}` still says why), which is why [`Chain`] skips a cause whose text is already
//! there. A leaf: it imports nothing of the crate.

use std::error::Error;
use std::fmt;

/// A cause from a dependency (cpal, tract, serde, rubato, SentencePiece...), or a
/// reason in words where there is no error value.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// An error and its causes on one line, `outer: cause: cause`, each text once.
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        let mut next: Option<&(dyn Error + 'static)> = Some(self.0);
        while let Some(e) = next {
            let text = e.to_string();
            if !text.is_empty() && !out.contains(&text) {
                if !out.is_empty() {
                    out.push_str(": ");
                }
                out.push_str(&text);
            }
            next = e.source();
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read x.toml: {source}")]
    struct Outer {
        #[source]
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("run failed")]
    struct Top {
        #[source]
        source: Outer,
    }

    #[test]
    fn a_cause_named_inline_is_printed_once() {
        let e = Top {
            source: Outer {
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            },
        };
        assert_eq!(
            Chain(&e).to_string(),
            "run failed: cannot read x.toml: no such file"
        );
    }

    #[test]
    fn words_become_a_cause_too() {
        let b: BoxError = "the device is busy".into();
        assert_eq!(b.to_string(), "the device is busy");
    }
}
