//! The binary's commands, one file each: an `Args` struct clap fills, and its `run()`,
//! which maps the command's own errors to its exit status ([`exit`]). They live in the
//! binary, not the library, because they report with `anyhow` and print to the
//! terminal; what they run, measure or draw is in the library.
//!
//! Besides the commands: `exit` (statuses and error lines), `signals` (SIGTERM/SIGINT
//! for `run` and `replay`), `summary` (the run summary both log and `--stats` writes),
//! `check_outputs` (no command writes a file it reads) and `parse` (argument values).

pub(crate) mod bench;
pub(crate) mod check_outputs;
pub(crate) mod devices;
pub(crate) mod embed;
pub(crate) mod eval;
pub(crate) mod exit;
pub(crate) mod features;
pub(crate) mod feedback;
pub(crate) mod models;
pub(crate) mod parse;
pub(crate) mod plot;
pub(crate) mod prosody;
pub(crate) mod replay;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod signals;
pub(crate) mod summary;
pub(crate) mod validate;
