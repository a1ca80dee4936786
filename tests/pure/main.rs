//! The integration tests that need nothing outside the repository and the Rust build: no
//! models, no outside program. One binary with a module per subject (as pueue keeps its
//! integration tests), so the suite links four test binaries instead of one per file:
//! `pure` (this), `models` (the real models, espeak-ng and the daemon binary), `alone`
//! (a calibrated CPU starvation that needs the machine to itself) and `peers`
//! (a real broker, browser, ffmpeg, systemd's tools, the packages or ../shared).
//! Run one subject with `cargo test --release --test pure module_graph`.

#[path = "../common/mod.rs"]
mod common;

mod fusion_rule;
mod fuzz_regressions;
mod http_listener;
mod module_graph;
mod report_bounds;
