//! The extras head (MUStARD++ emotions, sarcasm type, valence, arousal) through the real
//! pipeline: present and well-formed on spoken English, null with an older heads dir
//! that has no extras head, refused when trained on other text features.

use std::path::Path;

use crate::common::*;
use sarcasmd::config::Config;
use sarcasmd::pipeline::{self, Engine, EngineError, RunOptions};
use sarcasmd::sinks::event::VecSink;
use sarcasmd::sources::audio::PcmReaderSource;
use sarcasmd::views::fusion::{HeadError, DEFAULT_HEADS_DIR, TEXT_FEATURE_VERSION};

fn source(samples: &[f32]) -> Box<PcmReaderSource<std::io::Cursor<Vec<u8>>>> {
    Box::new(PcmReaderSource::new("mem", std::io::Cursor::new(to_s16le(samples)), RATE).unwrap())
}

fn sentence() -> Vec<f32> {
    compose(
        0.5,
        &[(
            "Oh great, another meeting that could have been an email.",
            "en-gb",
        )],
        1.5,
    )
    .samples
}

/// Class lists as the shipped metadata states them, in output order.
fn classes() -> serde_json::Value {
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(Path::new(DEFAULT_HEADS_DIR).join("extras_head.json")).unwrap(),
    )
    .unwrap();
    meta["outputs"].clone()
}

#[test]
fn extras_are_present_and_well_formed_on_speech() {
    let (events, _) = run(source(&sentence()));
    assert_eq!(events.len(), 1, "{events:#?}");
    let ev = &events[0];
    assert!(ev.views.text.is_some(), "{ev:#?}");
    assert!(ev.models["extras_head"].starts_with("extras_head@"));
    let json = serde_json::to_value(ev).unwrap();
    let x = &json["extras"];
    eprintln!("transcript {:?}\nextras {x}", ev.transcript);
    let outputs = classes();
    for (i, task) in ["emotion_implicit", "emotion_explicit", "sarcasm_type"]
        .iter()
        .enumerate()
    {
        assert_eq!(outputs[i]["name"], *task);
        let label = x[task]["label"].as_str().unwrap();
        let list = outputs[i]["classes"].as_array().unwrap();
        assert!(
            list.iter().any(|c| c == label),
            "{task}: {label} not in {list:?}"
        );
        let p = x[task]["p"].as_f64().unwrap();
        assert!(
            p >= 1.0 / list.len() as f64 - 1e-6 && p <= 1.0,
            "{task}: p {p}"
        );
    }
    for task in ["valence", "arousal"] {
        let v = x[task].as_f64().unwrap();
        assert!((1.0..=9.0).contains(&v), "{task}: {v}");
    }
    assert_eq!(x.as_object().unwrap().len(), 5, "{x}");
}

/// Copy the heads dir without the extras head: the daemon behaves as before the head
/// existed (event field null, no `models` entry).
fn heads_without_extras() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(DEFAULT_HEADS_DIR).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        if !name.starts_with("extras_head") && (name.ends_with(".onnx") || name.ends_with(".json"))
        {
            std::fs::copy(&p, dir.path().join(&name)).unwrap();
        }
    }
    dir
}

#[test]
fn older_heads_dir_without_extras_keeps_working() {
    let dir = heads_without_extras();
    let mut cfg = Config::default();
    cfg.fusion.heads_dir = Some(dir.path().to_path_buf());
    let engine = Engine::load(&cfg).expect("engine without extras head");
    assert!(!engine.models.contains_key("extras_head"));
    let mut sink = VecSink::default();
    pipeline::run_stream(
        &engine,
        &cfg,
        source(&sentence()),
        &mut sink,
        &RunOptions::default(),
    )
    .unwrap();
    assert_eq!(sink.0.len(), 1);
    assert!(sink.0[0].views.text.is_some());
    assert_eq!(sink.0[0].extras, None);
    assert!(serde_json::to_value(&sink.0[0]).unwrap()["extras"].is_null());
}

#[test]
fn extras_head_for_other_text_features_is_refused() {
    let dir = heads_without_extras();
    let src = Path::new(DEFAULT_HEADS_DIR);
    std::fs::copy(
        src.join("extras_head.onnx"),
        dir.path().join("extras_head.onnx"),
    )
    .unwrap();
    let meta = std::fs::read_to_string(src.join("extras_head.json"))
        .unwrap()
        .replace(
            &format!("\"feature_version\": \"{TEXT_FEATURE_VERSION}\""),
            "\"feature_version\": \"usem3-512-v0\"",
        );
    std::fs::write(dir.path().join("extras_head.json"), meta).unwrap();
    let mut cfg = Config::default();
    cfg.fusion.heads_dir = Some(dir.path().to_path_buf());
    match Engine::load(&cfg) {
        Err(EngineError::Head(HeadError::FeatureVersion {
            found, expected, ..
        })) => {
            assert_eq!(found, "usem3-512-v0");
            assert_eq!(expected, TEXT_FEATURE_VERSION);
        }
        Err(e) => panic!("wrong error: {e}"),
        Ok(_) => panic!("extras head for other features was loaded"),
    }
    // Without the text view there is no embedding: the head is not loaded at all.
    cfg.text.enabled = false;
    let engine = Engine::load(&cfg).expect("text view off: extras head not loaded");
    assert!(!engine.models.contains_key("extras_head"));
}
