//! The integration tests that need the real models (from the cache `scripts/setup.sh`
//! fills), espeak-ng speech and the daemon binary, but no outside peer. They share one
//! engine (`common::engine`), loaded once for the binary. See `tests/pure/main.rs` for how the
//! suite is grouped; run one subject with `cargo test --release --test models streaming`.

#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod count_registry;
mod cut_off_speech;
mod daemon;
mod drop_registry;
mod e2e_speech;
mod eval;
mod extras;
mod faults;
mod grafana_dashboard;
mod head_checks;
mod languages_and_clips;
mod live_sources;
mod plain_lines;
mod service;
mod streaming;
mod text_encoder;
mod validate;
