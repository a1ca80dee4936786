//! How a command ends: its exit status and, on an error, the error with its causes on
//! one line. The statuses are the README's: 0 success, 2 bad input (an audio file, a
//! config, a manifest), 3 models missing or corrupt, 1 anything else. Each command says
//! which of its errors are bad input or models where it meets them ([`Coded`]); any
//! other error exits 1.

use std::error::Error;
use std::fmt;

use sarcasmd::common::error::{BoxError, Chain};
pub(crate) use sarcasmd::daemon::{EXIT_BAD_INPUT as BAD_INPUT, EXIT_MODELS as MODELS};

/// An error that ends its command with `code`; it prints as the error it holds.
#[derive(Debug)]
pub(crate) struct Coded {
    code: i32,
    error: BoxError,
}

impl Coded {
    /// The input is at fault (exit 2): a config, an audio file, a manifest.
    pub(crate) fn bad_input(e: impl Into<BoxError>) -> Self {
        Self {
            code: BAD_INPUT,
            error: e.into(),
        }
    }

    /// Models or heads are missing or corrupt (exit 3).
    pub(crate) fn models(e: impl Into<BoxError>) -> Self {
        Self {
            code: MODELS,
            error: e.into(),
        }
    }
}

impl fmt::Display for Coded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl Error for Coded {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.error.source()
    }
}

/// The exit status of a command that returned `r`: the status it chose, or its error's
/// ([`Coded`], else 1) after printing the error.
pub(crate) fn status(r: anyhow::Result<i32>) -> i32 {
    status_with(r, |_| None)
}

/// [`status`] where `code` may give an error's status first (`run` and `replay`: the
/// daemon's own errors say theirs).
pub(crate) fn status_with(
    r: anyhow::Result<i32>,
    code: impl Fn(&anyhow::Error) -> Option<i32>,
) -> i32 {
    match r {
        Ok(status) => status,
        Err(e) => {
            eprintln!("error: {}", Chain(e.as_ref()));
            code(&e)
                .or_else(|| e.downcast_ref::<Coded>().map(|c| c.code))
                .unwrap_or(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read config file /x.toml: {source}")]
    struct Embeds {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("--video needs a video file")]
    struct Wraps(#[source] std::io::Error);

    #[test]
    fn each_cause_is_printed_once() {
        let os = || std::io::Error::from(std::io::ErrorKind::NotFound);
        let e = anyhow::Error::new(Embeds { source: os() });
        let line = Chain(e.as_ref()).to_string();
        assert_eq!(line.matches(&os().to_string()).count(), 1, "{line}");
        assert!(
            line.starts_with("cannot read config file /x.toml: "),
            "{line}"
        );
        let e = anyhow::Error::new(Wraps(os()));
        assert_eq!(
            Chain(e.as_ref()).to_string(),
            format!("--video needs a video file: {}", os())
        );
        let e = anyhow::Error::new(os()).context("opening the stats file");
        assert_eq!(
            Chain(e.as_ref()).to_string(),
            format!("opening the stats file: {}", os())
        );
    }

    #[test]
    fn a_coded_error_prints_as_its_own_and_exits_with_its_code() {
        let e = anyhow::Error::new(Coded::bad_input(Wraps(std::io::Error::from(
            std::io::ErrorKind::NotFound,
        ))));
        assert!(Chain(e.as_ref())
            .to_string()
            .starts_with("--video needs a video file: "));
        assert_eq!(status(Err(e)), BAD_INPUT);
        let e = anyhow::Error::new(Coded::models("no model")).context("eval");
        assert_eq!(status(Err(e)), MODELS);
        assert_eq!(status(Err(anyhow::anyhow!("other"))), 1);
        assert_eq!(status(Ok(3)), 3);
    }
}
