//! The heads this binary serves: `models/heads/heads.lock.json`, compiled in as
//! `models/models.lock.json` is, pins each head's ONNX by name (SHA-256 and size).
//!
//! Why: a head's checksum used to live only in its own JSON beside it, so whoever could
//! write the heads directory could swap a head and its checksum together (a graph asking
//! for 6e9 elements passed as a good head). Only a rebuild changes what is pinned here.
//! `models/recipe/lib/heads.py`'s `write_head` pins every head it writes
//! (`models/recipe/lib/heads_lock.py`); `python3 -m models.recipe.pin_heads` pins the others (the extras
//! head). `sarcasmd eval --heads DIR` may measure heads that are not pinned (just
//! trained), with a warning; the daemon, `replay` and `validate` refuse them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

const HEADS_LOCK_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/models/heads/heads.lock.json"
));

/// Where the lock lives in the source tree (for messages).
pub const HEADS_LOCK_PATH: &str = "models/heads/heads.lock.json";

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct PinnedHead {
    pub onnx_sha256: String,
    pub onnx_bytes: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeadsLock {
    version: u32,
    heads: BTreeMap<String, PinnedHead>,
}

/// What the lock says: every pinned head by name, or why the embedded lock is unusable
/// (a build from a broken tree; every head is then refused with that reason).
fn lock() -> &'static Result<BTreeMap<String, PinnedHead>, String> {
    static LOCK: OnceLock<Result<BTreeMap<String, PinnedHead>, String>> = OnceLock::new();
    LOCK.get_or_init(|| {
        let l: HeadsLock = serde_json::from_str(HEADS_LOCK_JSON)
            .map_err(|e| format!("the embedded {HEADS_LOCK_PATH} is invalid: {e}"))?;
        if l.version != 1 {
            return Err(format!(
                "the embedded {HEADS_LOCK_PATH} has version {}, this build reads 1",
                l.version
            ));
        }
        Ok(l.heads)
    })
}

/// The pin of head `name`; `Err` when the embedded lock itself is unusable.
pub fn pinned(name: &str) -> Result<Option<&'static PinnedHead>, &'static str> {
    match lock() {
        Ok(m) => Ok(m.get(name)),
        Err(e) => Err(e.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lock_pins_every_head_in_models_heads_as_it_is() {
        let dir = std::path::Path::new(super::super::DEFAULT_HEADS_DIR);
        for name in super::super::HEAD_NAMES {
            let bytes = std::fs::read(dir.join(format!("{name}.onnx"))).unwrap();
            let pin = pinned(name)
                .unwrap()
                .unwrap_or_else(|| panic!("{name} not pinned"));
            assert_eq!(pin.onnx_bytes, bytes.len() as u64, "{name}");
            assert_eq!(
                pin.onnx_sha256,
                crate::common::models::sha256_bytes(&bytes),
                "{name}"
            );
        }
        assert_eq!(pinned("no_such_head"), Ok(None));
    }
}
