//! The properties each fuzz target checks, shared with `tests/pure/fuzz_regressions.rs`,
//! which replays the committed seeds and every crash input ever found (`fuzz/regressions/`)
//! in the normal test suite, so a fixed finding stays fixed without a fuzzer installed.
// Each target uses one of these functions.
#![allow(dead_code)]

use std::collections::HashSet;
use std::io::Cursor;
use std::path::Path;

use sarcasmd::config::Config;
use sarcasmd::sources::audio::{
    AudioSource, StreamResampler, WavSource, MAX_INPUT_RATE_HZ, MIN_INPUT_RATE_HZ, PIPELINE_RATE_HZ,
};
use sarcasmd::tools::manifest::Manifest;
use sarcasmd::views::prosody::FrameExtractor;
use sarcasmd::views::vad::Endpointer;

/// Any bytes as a WAV file, through the same open/decode/downmix/resample path as
/// `sarcasmd replay FILE`. Must never panic, allocate without bound or emit samples the
/// later stages cannot take (non-finite, or outside [-1, 1]).
pub fn wav(data: &[u8]) {
    let Ok(mut src) =
        WavSource::from_reader(Cursor::new(data), data.len() as u64, "fuzz.wav".into())
    else {
        return;
    };
    let info = src.info().clone();
    let mut out = Vec::new();
    let mut total = 0u64;
    loop {
        match src.read_chunk(&mut out) {
            Ok(more) => {
                for s in &out {
                    assert!(s.is_finite() && s.abs() <= 1.0, "sample {s} from {info:?}");
                }
                total += out.len() as u64;
                out.clear();
                if !more {
                    break;
                }
            }
            Err(_) => return,
        }
    }
    // A file read to its end yields exactly its duration at 16 kHz (rounded), never more.
    let expected =
        (info.frames as f64 * PIPELINE_RATE_HZ as f64 / info.sample_rate_hz as f64).round() as u64;
    assert!(
        total <= expected + 1,
        "{total} samples > {expected} for {info:?}"
    );
}

/// Rates real devices and files use; a fuzzed rate picks one of these most of the time,
/// since odd rates (e.g. 4001 Hz) make rubato build large FFTs and slow the search down.
const COMMON_HZ: [u32; 10] = [
    8_000, 11_025, 16_000, 22_050, 24_000, 32_000, 44_100, 48_000, 96_000, 192_000,
];

/// The streaming resampler at any accepted input rate and any chunking: streamed output
/// must equal one-shot output bit for bit, have the exact resampled length, and stay
/// finite. The first 4 bytes pick the rate and chunk size; the rest are i16 samples.
pub fn resample(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let sel = u16::from_le_bytes([data[0], data[1]]);
    let from_hz = if sel < 60_000 {
        COMMON_HZ[sel as usize % COMMON_HZ.len()]
    } else {
        MIN_INPUT_RATE_HZ
            + (sel as u32 - 60_000) * ((MAX_INPUT_RATE_HZ - MIN_INPUT_RATE_HZ) / 5_535)
    };
    let chunk = 1 + data[2] as usize * 7 + data[3] as usize;
    let input: Vec<f32> = data[4..]
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]) as f32 / 32768.0)
        .collect();

    let mut batch = Vec::new();
    let mut rs = StreamResampler::new(from_hz, PIPELINE_RATE_HZ).expect("accepted rate builds");
    rs.process(&input, &mut batch).unwrap();
    rs.finish(&mut batch).unwrap();

    let mut streamed = Vec::new();
    let mut rs = StreamResampler::new(from_hz, PIPELINE_RATE_HZ).unwrap();
    for c in input.chunks(chunk) {
        rs.process(c, &mut streamed).unwrap();
    }
    rs.finish(&mut streamed).unwrap();

    let expected = (input.len() as f64 * PIPELINE_RATE_HZ as f64 / from_hz as f64).round() as usize;
    assert_eq!(batch.len(), expected, "{from_hz} Hz, {} in", input.len());
    assert!(
        batch == streamed,
        "{from_hz} Hz, chunk {chunk}: streamed != batch"
    );
    assert!(batch.iter().all(|s| s.is_finite()));
}

/// Any text as a config file. Parsing must never panic; a config that validates must
/// build the model-free stages without error (validation is the only gate before them)
/// and survive a write/read round trip unchanged.
pub fn config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cfg = match Config::parse(text, Path::new("fuzz.toml")) {
        Ok(cfg) => cfg,
        Err(e) => {
            // Messages are built from user text: formatting them must not panic either.
            let _ = e.to_string();
            return;
        }
    };
    let _ = Endpointer::new(&cfg.segment);
    if let Err(e) = FrameExtractor::new(&cfg.prosody, 16_000) {
        panic!("validated config does not build the prosody stage: {e}");
    }
    let written = toml::to_string(&cfg).expect("a parsed config serialises");
    let again = Config::parse(&written, Path::new("fuzz.toml"))
        .unwrap_or_else(|e| panic!("written config does not load: {e}\n{written}"));
    assert_eq!(cfg, again, "round trip changed the config:\n{written}");
}

/// Any text as a dataset manifest. Parsing must never panic, and what it accepts must
/// hold the documented promises: unique ids, something to score per item, 0/1 labels.
pub fn manifest(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Manifest::parse(text, Path::new("/fuzz/set/m.jsonl")) {
        Ok(m) => {
            let mut ids = HashSet::new();
            for it in &m.items {
                assert!(ids.insert(it.id.as_str()), "duplicate id {:?}", it.id);
                assert!(!it.id.trim().is_empty());
                assert!(it.text.is_some() || it.audio.is_some() || it.video.is_some());
                for p in it.audio.iter().chain(it.video.iter()) {
                    assert!(p.is_absolute(), "unresolved path {p:?}");
                }
                assert!(it.line >= 1 && it.line <= text.lines().count());
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// Any bytes as the room's corrections file (`room.store`). Reading must never panic;
/// what it keeps is numbered within 1..=MAX_SEQ, once each, below the next number; and
/// what it keeps, written back, reads back the same with nothing skipped.
pub fn store(data: &[u8]) {
    use sarcasmd::views::room::store::{parse, Record, MAX_SEQ};
    let path = Path::new("fuzz.jsonl");
    let p = parse(data, path);
    let mut seen = HashSet::new();
    for c in &p.live {
        assert!((1..=MAX_SEQ).contains(&c.seq), "seq {}", c.seq);
        assert!(c.seq < p.next_seq, "seq {} >= next {}", c.seq, p.next_seq);
        assert!(seen.insert(c.seq), "seq {} twice", c.seq);
    }
    assert!(
        (1..=MAX_SEQ + 1).contains(&p.next_seq),
        "next {}",
        p.next_seq
    );
    let write = |live: &[sarcasmd::views::room::store::Correction]| {
        let mut out = String::new();
        for c in live {
            out.push_str(&serde_json::to_string(&Record::Correction(c.clone())).unwrap());
            out.push('\n');
        }
        out
    };
    let written = write(&p.live);
    let again = parse(written.as_bytes(), path);
    assert_eq!(again.skipped_lines, 0, "{written}");
    assert_eq!(write(&again.live), written);
}
