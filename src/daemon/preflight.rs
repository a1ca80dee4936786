//! What a config names on this machine, checked without side effects: the files it
//! reads (source, video, secrets, CA, models, heads) exist, are regular files and hold
//! what they must; the files it writes (events, captions) can be written (a regular
//! file, a pipe or a character device such as `/dev/null`; never a directory). Run by
//! `sarcasmd validate` (the unit's `ExecStartPre`), at every start and before a reload
//! is accepted, so that `validate` refuses what `run` would refuse and a reload that
//! cannot start is rejected while the old stream keeps running.
//!
//! One rule covers every output: it may not be a file the daemon reads (the config file,
//! the source WAV, a video, a secret, a certificate, a model or a head) nor another
//! output ([`file_kind::same_file`]: through links and relative paths too). An events
//! file naming the input WAV passed once, and the start's torn-line repair cut 55 KB off
//! the recording.
//!
//! Models: each one the config loads is there with its pinned size, and a Whisper file
//! is laid out as whisper.cpp reads it (`crate::views::asr::check_ggml_file`: a corrupt file
//! otherwise aborts the process inside whisper.cpp). [`check`] (`validate`, reloads)
//! also verifies their SHA-256, as the start does, unless `models.skip_checksums`: for
//! the default models 0.1 CPU-s and 0.4 s of wall time on an x86 core with SHA
//! instructions (boards without them take longer), and it is what `run` would refuse. [`check_start`] leaves the hashing to the engine's load, which
//! follows it at once.
//!
//! Not checked here: whether `http.bind`'s port is free (the previous instance may still
//! hold it while systemd restarts us; the start reports it).

use std::path::Path;

use thiserror::Error;

use crate::common::file_kind;
use crate::common::models::ModelStore;
use crate::config::{Config, FieldError, Problems, SourceConfig};
use crate::views::fusion::Fusion;
use crate::views::vision::VisionSourceConfig;

/// Every problem found, each named by its config field.
#[derive(Debug, Error)]
pub enum PreflightError {
    /// Files the config names are missing, of the wrong kind, or unusable (model
    /// problems found as well are listed too).
    #[error("{}", .0.describe("", "problems"))]
    Config(Problems),
    /// Only models or heads are missing or of the wrong size (`scripts/fetch-models.sh`).
    #[error("{}", .0.describe("", "problems"))]
    Models(Problems),
}

/// Everything, for `validate` and reloads: an output in a missing directory is refused.
pub fn check(cfg: &Config) -> Result<(), PreflightError> {
    check_with(cfg, Outputs::Strict)
}

/// At start: an output in a missing directory is only warned about, as the events file
/// waits for it (a mount that comes up later; `RequiresMountsFor=` is the unit's way).
pub fn check_start(cfg: &Config) -> Result<(), PreflightError> {
    check_with(cfg, Outputs::WaitForMissingDirectory)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Outputs {
    Strict,
    WaitForMissingDirectory,
}

fn check_with(cfg: &Config, outputs: Outputs) -> Result<(), PreflightError> {
    let mut config = Problems::default();
    if let SourceConfig::Wav { path, .. } = &cfg.source {
        config.add(input_file("source.path", path));
    }
    if let VisionSourceConfig::File { path, .. } = &cfg.vision.source {
        config.add(input_file("vision.source.path", path));
    }
    if cfg.output.events != "-" {
        let events = Path::new(&cfg.output.events);
        config.add(output_file("output.events", events, outputs));
        // The start cuts a torn last line off it: never off a file that is not one.
        if let Err(e) = crate::sinks::file::looks_like_events(events) {
            if e.kind() != std::io::ErrorKind::NotFound {
                config.push("output.events", format!("{}: {e}", events.display()));
            }
        }
    }
    let kinds = cfg.outputs.kinds();
    for k in &kinds {
        for (field, p) in k.files().writes {
            config.add(output_file(field, p, outputs));
        }
    }
    if cfg.room.enabled {
        config.add(room_store(&cfg.room.store));
    }
    config.extend(outputs_not_inputs(cfg));
    for k in &kinds {
        k.preflight(&mut config);
    }
    let mut models_missing = Problems::default();
    models_missing.add(models(
        cfg,
        outputs == Outputs::Strict && !cfg.models.skip_checksums,
    ));
    if let Err(e) = Fusion::load(&cfg.fusion, cfg.text.enabled, cfg.vision.enabled()) {
        models_missing.push("fusion.heads_dir", e.to_string());
    }
    if !config.is_empty() {
        config.extend(models_missing);
        return Err(PreflightError::Config(config));
    }
    models_missing.into_result().map_err(PreflightError::Models)
}

/// Every file the config makes the daemon write, by field.
fn output_paths(cfg: &Config) -> Vec<(&'static str, &Path)> {
    let mut out = Vec::new();
    if cfg.output.events != "-" {
        out.push(("output.events", Path::new(cfg.output.events.as_str())));
    }
    for k in cfg.outputs.kinds() {
        out.extend(k.files().writes);
    }
    if cfg.room.enabled {
        out.push(("room.store", cfg.room.store.as_path()));
    }
    out
}

/// Every file the config makes the daemon read, named for an error message.
fn input_paths(cfg: &Config) -> Vec<(String, std::path::PathBuf)> {
    let mut inputs: Vec<(String, std::path::PathBuf)> = Vec::new();
    let mut add = |what: &str, p: &Path| inputs.push((what.to_string(), p.to_path_buf()));
    if let Some(p) = &cfg.loaded_from {
        add("the config file", p);
    }
    if let SourceConfig::Wav { path, .. } = &cfg.source {
        add("source.path", path);
    }
    if let VisionSourceConfig::File { path, .. } = &cfg.vision.source {
        add("vision.source.path", path);
    }
    for k in cfg.outputs.kinds() {
        for (what, p) in k.files().reads {
            add(what, p);
        }
    }
    let heads = cfg.fusion.heads_dir();
    for name in crate::views::heads::HEAD_NAMES {
        for ext in ["onnx", "json"] {
            let file = format!("{name}.{ext}");
            add(&format!("the head {file}"), &heads.join(&file));
        }
    }
    let dir = crate::common::models::model_dir(cfg.models.dir.as_deref());
    if let Ok(store) = ModelStore::new(dir, false) {
        for name in crate::pipeline::required_models(cfg, cfg.vision.enabled()) {
            if let Some(p) = store.path_of(&name) {
                add(&format!("the model {name}"), &p);
            }
        }
    }
    inputs
}

/// No output is an input or another output ([`file_kind::same_file`]).
fn outputs_not_inputs(cfg: &Config) -> Problems {
    let mut problems = Problems::default();
    let inputs = input_paths(cfg);
    let mut earlier: Vec<(String, &Path)> = inputs
        .iter()
        .map(|(w, p)| (w.clone(), p.as_path()))
        .collect();
    for (field, out) in output_paths(cfg) {
        let against = earlier.iter().map(|(w, p)| (w.as_str(), *p));
        if let Err(e) = file_kind::distinct_output(out, against) {
            problems.push(field, format!("{}: {e}", out.display()));
        }
        earlier.push((field.to_string(), out));
    }
    problems
}

fn input_file(field: &'static str, path: &Path) -> Result<(), FieldError> {
    file_kind::regular_file(path)
        .map(|_| ())
        .map_err(|e| FieldError::new(field, format!("{}: {e}", path.display())))
}

/// The corrections file: an existing one is a regular file we can write; a missing one
/// (and its missing directories) can be created: its nearest existing ancestor is a
/// directory this user may write to. Nothing is created here.
fn room_store(path: &Path) -> Result<(), FieldError> {
    let field = |why: String| FieldError::new("room.store", format!("{}: {why}", path.display()));
    if path.exists() {
        return file_kind::writable_output(path).map_err(|e| {
            field(format!(
                "{e} (the corrections file must be a regular file the daemon can write)"
            ))
        });
    }
    let mut dir = path.parent();
    while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        dir = d.parent();
    }
    let dir = dir
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !dir.is_dir() {
        return Err(field(format!("{} is not a directory", dir.display())));
    }
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| field("the path holds a NUL byte".into()))?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(field(format!(
            "cannot create it: {} is not writable by this user ({})",
            dir.display(),
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn output_file(field: &'static str, path: &Path, outputs: Outputs) -> Result<(), FieldError> {
    file_kind::writable_output(path).or_else(|e| {
        if outputs == Outputs::WaitForMissingDirectory && e.kind() == std::io::ErrorKind::NotFound {
            log::warn!("{field} {}: {e}; writing starts when it appears", path.display());
            return Ok(());
        }
        Err(FieldError::new(
            field,
            format!(
                "{}: {e} (events and captions go to a regular file; use \"-\" and a shell redirect for a pipe)",
                path.display()
            ),
        ))
    })
}

/// Every model file the config loads is in the store with its pinned size (and
/// checksum, with `verify`), and every Whisper file has a whisper.cpp layout.
fn models(cfg: &Config, verify: bool) -> Result<(), FieldError> {
    let dir = crate::common::models::model_dir(cfg.models.dir.as_deref());
    let field = |e: &dyn std::fmt::Display| FieldError::new("models.dir", e.to_string());
    let store = ModelStore::new(dir, verify).map_err(|e| field(&e))?;
    let whisper = [Some(cfg.asr.store_name()), cfg.asr.fallback_store_name()];
    for name in crate::pipeline::required_models(cfg, cfg.vision.enabled()) {
        let file = store.get(&name).map_err(|e| field(&e))?;
        if whisper.contains(&Some(name)) {
            crate::views::asr::check_ggml_file(&file.path).map_err(|e| field(&e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_room_store_may_be_missing_with_its_directories_but_not_a_directory() {
        let d = tempfile::tempdir().unwrap();
        assert!(room_store(&d.path().join("a/b/corrections.jsonl")).is_ok());
        let e = room_store(d.path()).unwrap_err();
        assert_eq!(e.field, "room.store");
        let file = d.path().join("plain");
        std::fs::write(&file, "").unwrap();
        let e = room_store(&file.join("below.jsonl")).unwrap_err();
        assert!(e.reason.contains("is not a directory"), "{}", e.reason);
    }
}
