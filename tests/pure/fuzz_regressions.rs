//! Every fuzz seed and every input a fuzzer ever crashed on (`fuzz/regressions/<target>/`)
//! through the same checks the fuzz targets run, in the normal suite: a fixed finding
//! stays fixed even where cargo-fuzz is not installed. Needs nothing outside the repo.

#[path = "../../fuzz/checks.rs"]
mod checks;

use std::path::Path;

fn replay(target: &str, check: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut n = 0;
    for dir in ["seeds", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target)) else {
            continue;
        };
        let mut files: Vec<_> = entries.map(|e| e.unwrap().path()).collect();
        files.sort();
        for f in files.into_iter().filter(|f| f.is_file()) {
            let data = std::fs::read(&f).unwrap();
            if std::panic::catch_unwind(|| check(&data)).is_err() {
                panic!("fuzz check `{target}` fails on {}", f.display());
            }
            n += 1;
        }
    }
    assert!(n > 0, "no seeds for fuzz target {target}");
}

#[test]
fn wav_inputs() {
    replay("wav", checks::wav);
}

#[test]
fn resample_inputs() {
    replay("resample", checks::resample);
}

#[test]
fn config_inputs() {
    replay("config", checks::config);
}

#[test]
fn manifest_inputs() {
    replay("manifest", checks::manifest);
}

#[test]
fn store_inputs() {
    replay("store", checks::store);
}
