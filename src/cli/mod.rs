//! The binary's commands other than `run` and `replay` (which hold a daemon), one file
//! each. They live in the binary, not the library, because they report with `anyhow`
//! and print to the terminal; what they measure or draw is in the library.

pub(crate) mod bench;
pub(crate) mod models;
pub(crate) mod plot;
pub(crate) mod summary;
pub(crate) mod training;
