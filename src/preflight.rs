//! What a config names on this machine, checked without side effects: the files it
//! reads (source, video, secrets, CA, models, heads) exist, are regular files and hold
//! what they must; the files it writes (events, captions) can be written (a regular
//! file, a pipe or a character device such as `/dev/null`; never a directory). Run by
//! `sarcasmd validate` (the unit's `ExecStartPre`), at every start and before a reload
//! is accepted, so that `validate` refuses what `run` would refuse and a reload that
//! cannot start is rejected while the old stream keeps running.
//!
//! Not checked here: model checksums (slow on a Pi; `sarcasmd models` and the start do
//! it) and whether `http.bind`'s port is free (the previous instance may still hold it
//! while systemd restarts us; the start reports it).

use std::path::Path;

use thiserror::Error;

use crate::config::{Config, FieldError, Problems, SourceConfig};
use crate::file_kind;
use crate::fusion::Fusion;
use crate::models::ModelStore;
use crate::vision::VisionSourceConfig;

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
        config.add(output_file(
            "output.events",
            Path::new(&cfg.output.events),
            outputs,
        ));
    }
    for (field, path) in [
        ("captions.vtt", &cfg.captions.vtt),
        ("captions.srt", &cfg.captions.srt),
    ] {
        if let Some(p) = path {
            config.add(output_file(field, p, outputs));
        }
    }
    if cfg.http.enabled {
        if let Some(p) = &cfg.http.token_file {
            if let Err(e) = crate::sinks::http::read_token_file(p) {
                config.add(Err(field_error("http.token_file", e)));
            }
        }
    }
    if cfg.mqtt.enabled {
        if let (Some(_), Some(p)) = (&cfg.mqtt.username, &cfg.mqtt.password_file) {
            if let Err(e) = crate::sinks::mqtt::read_password_file(p) {
                config.add(Err(field_error("mqtt.password_file", e)));
            }
        }
        if let Some(tls) = &cfg.mqtt.tls {
            if let Err(e) = crate::sinks::mqtt::rustls_config(tls) {
                config.add(Err(field_error("mqtt.tls", e)));
            }
        }
    }
    let mut models_missing = Problems::default();
    models_missing.add(models(cfg));
    if let Err(e) = Fusion::load(&cfg.fusion, cfg.text.enabled, cfg.vision.enabled()) {
        models_missing.push("fusion.heads_dir", e.to_string());
    }
    if !config.is_empty() {
        config.extend(models_missing);
        return Err(PreflightError::Config(config));
    }
    models_missing.into_result().map_err(PreflightError::Models)
}

/// The error under `field`, without the field name the sink's own message starts with.
fn field_error(field: &'static str, e: impl std::fmt::Display) -> FieldError {
    let msg = e.to_string();
    let reason = msg
        .strip_prefix(field)
        .map(|r| r.trim_start_matches([':', ' ']))
        .unwrap_or(&msg);
    FieldError::new(field, reason.to_string())
}

fn input_file(field: &'static str, path: &Path) -> Result<(), FieldError> {
    file_kind::regular_file(path)
        .map(|_| ())
        .map_err(|e| FieldError::new(field, format!("{}: {e}", path.display())))
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

/// Every model file the config loads is in the store with its pinned size.
fn models(cfg: &Config) -> Result<(), FieldError> {
    let dir = crate::models::model_dir(cfg.models.dir.as_deref());
    let store =
        ModelStore::new(dir, false).map_err(|e| FieldError::new("models.dir", e.to_string()))?;
    for name in crate::pipeline::required_models(cfg, cfg.vision.enabled()) {
        store
            .get(&name)
            .map_err(|e| FieldError::new("models.dir", e.to_string()))?;
    }
    Ok(())
}
