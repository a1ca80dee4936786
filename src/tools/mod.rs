//! The offline tools: what runs the pipeline on recordings to measure it, never inside
//! the daemon. [`bench`] (latency, CPU and memory against a one-shot baseline), [`eval`]
//! (MuSAG's per-view precision, recall and macro-F1 over dataset manifests), [`plot`]
//! (their pictures), [`report`] (a meeting's report from its events) and [`manifest`]
//! (the dataset manifest format they and the training code share).

pub mod bench;
pub mod eval;
pub mod manifest;
pub mod plot;
pub mod report;
