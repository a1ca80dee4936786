//! Build script: one link flag, for the integration test binaries (`tests/*/main.rs`)
//! only. They are linked without debug info, so each links faster and takes a fraction
//! of the disk; the library and the daemon binary they run keep the release profile's line
//! tables, as shipped. (`cargo test --release` builds everything with the release profile,
//! so no profile setting can tell the test binaries apart.)

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-arg-tests=-Wl,--strip-debug");
}
