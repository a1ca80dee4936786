//! A head is checked before anything runs it (issue 34, defects 4, 5 and 13, and the
//! heads lock): its metadata must agree with its graph, its sizes must be sizes a head
//! can have, and the daemon serves only heads pinned in the binary
//! (`models/heads/heads.lock.json`). `validate` refuses what the start would; `eval`
//! measures a head that is not pinned yet, with a warning, and refuses the rest alike.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use prost::Message;
use sarcasmd::views::fusion::DEFAULT_HEADS_DIR;
use tract_onnx::prelude::Framework;

use crate::common::bin;

/// A copy of the shipped heads in a temp dir.
fn heads_copy(dir: &Path) -> PathBuf {
    let out = dir.join("heads");
    std::fs::create_dir(&out).unwrap();
    for e in std::fs::read_dir(DEFAULT_HEADS_DIR).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if name.ends_with(".onnx") || name.ends_with("_head.json") {
            std::fs::copy(&p, out.join(&name)).unwrap();
        }
    }
    out
}

/// `name.json` with `field` set to `value` (raw JSON text).
fn set_meta(heads: &Path, name: &str, field: &str, value: &str) {
    let p = heads.join(format!("{name}.json"));
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    v[field] = serde_json::from_str(value).unwrap();
    std::fs::write(&p, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn validate_heads(dir: &Path, heads: &Path) -> Output {
    let cfg = dir.join("heads.toml");
    std::fs::write(
        &cfg,
        format!("[fusion]\nheads_dir = \"{}\"\n", heads.display()),
    )
    .unwrap();
    Command::new(bin())
        .arg("validate")
        .arg(&cfg)
        .output()
        .unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Defect 4: `input_dim` 7 for a graph that takes 512 passed validate, and the run died
/// at its first utterance.
#[test]
fn a_head_whose_metadata_disagrees_with_its_graph_is_refused_by_validate() {
    let d = tempfile::tempdir().unwrap();
    let heads = heads_copy(d.path());
    set_meta(&heads, "text_head", "input_dim", "7");
    let out = validate_heads(d.path(), &heads);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("fusion.heads_dir"), "{err}");
    assert!(
        err.contains("input_dim 7") && err.contains("[1, 512]"),
        "{err}"
    );
}

/// Defect 5: `input_dim = 18446744073709551615` panicked validate and replay (exit 101).
#[test]
fn an_absurd_input_dim_is_refused_not_panicked_on() {
    let d = tempfile::tempdir().unwrap();
    let heads = heads_copy(d.path());
    set_meta(&heads, "audio_head", "input_dim", "18446744073709551615");
    let out = validate_heads(d.path(), &heads);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains("input_dim 18446744073709551615 is not a head's size"));
    let wav = Path::new(env!("CARGO_MANIFEST_DIR")).join("samples/meeting.wav");
    let out = Command::new(bin())
        .arg("replay")
        .arg(&wav)
        .arg("--config")
        .arg(d.path().join("heads.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
}

/// The fusion head with its first initializer declared as `dims`, written with its
/// JSON's checksum updated (what someone with write access to the heads dir can do).
fn swap_fusion_head(heads: &Path, dims: Vec<i64>) {
    let p = heads.join("fusion_head.onnx");
    let bytes = std::fs::read(&p).unwrap();
    let mut proto = tract_onnx::onnx()
        .proto_model_for_read(&mut bytes.as_slice())
        .unwrap();
    proto.graph.as_mut().unwrap().initializer[0].dims = dims;
    let out = proto.encode_to_vec();
    std::fs::write(&p, &out).unwrap();
    let sha = sarcasmd::common::models::sha256_bytes(&out);
    set_meta(heads, "fusion_head", "onnx_sha256", &format!("\"{sha}\""));
}

/// Defect 13 and the heads lock: a graph declaring a 6e9-element tensor, its checksum
/// updated beside it, took validate 100 s and 6.7 GB. The binary does not serve a head
/// it has not pinned; `eval` (which measures unpinned heads) refuses the graph's sizes
/// before tract builds it.
#[test]
fn a_swapped_head_is_not_served_and_an_absurd_graph_is_refused_before_tract() {
    let d = tempfile::tempdir().unwrap();
    let heads = heads_copy(d.path());
    swap_fusion_head(&heads, vec![6_000_000_000]);
    let t0 = Instant::now();
    let out = validate_heads(d.path(), &heads);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not the one pinned in models/heads/heads.lock.json"),
        "{}",
        stderr(&out)
    );
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
    // eval: unpinned is a warning there, the sizes are not.
    let manifest = d.path().join("m.jsonl");
    std::fs::write(&manifest, r#"{"id":"t","text":"Oh great.","label":1}"#).unwrap();
    let t0 = Instant::now();
    let out = Command::new(bin())
        .arg("eval")
        .arg(&manifest)
        .arg("--heads")
        .arg(&heads)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("measuring it anyway"), "{err}");
    assert!(err.contains("6000000000 elements"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(60), "{:?}", t0.elapsed());
}

/// A head retrained into a work dir (not pinned yet) is measured by eval, with a
/// warning naming it; the daemon would not serve it.
#[test]
fn an_unpinned_but_sound_head_is_measured_by_eval_and_refused_by_validate() {
    let d = tempfile::tempdir().unwrap();
    let heads = heads_copy(d.path());
    // Same graph, other bytes: a producer name the pin does not know.
    let p = heads.join("fusion_head.onnx");
    let bytes = std::fs::read(&p).unwrap();
    let mut proto = tract_onnx::onnx()
        .proto_model_for_read(&mut bytes.as_slice())
        .unwrap();
    proto.producer_name = "retrained".into();
    let out = proto.encode_to_vec();
    std::fs::write(&p, &out).unwrap();
    let sha = sarcasmd::common::models::sha256_bytes(&out);
    set_meta(&heads, "fusion_head", "onnx_sha256", &format!("\"{sha}\""));
    let out = validate_heads(d.path(), &heads);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("models.recipe.pin_heads"),
        "{}",
        stderr(&out)
    );
    let manifest = d.path().join("m.jsonl");
    std::fs::write(&manifest, r#"{"id":"t","text":"Oh great.","label":1}"#).unwrap();
    let out = Command::new(bin())
        .arg("eval")
        .arg(&manifest)
        .arg("--heads")
        .arg(&heads)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("measuring it anyway"),
        "{}",
        stderr(&out)
    );
}
