//! The integration tests that talk to a real peer: mosquitto, headless Chromium, ffmpeg,
//! systemd's tools, dpkg on the built packages, the OpenMetrics parser, or the corpora
//! in ../shared (each skips with a message when its peer is absent, except where CI
//! requires it). Most also run the real models. See `tests/pure/main.rs` for how the suite is
//! grouped; run one subject with `cargo test --release --test peers outputs`.

#[path = "../common/mod.rs"]
mod common;

mod manifest_converters;
mod mqtt_sink;
mod outputs;
mod packages;
mod pictures;
mod room_feedback;
mod systemd_unit;
mod vision;
