//! A ggml Whisper file's header, read and checked in Rust before whisper.cpp sees the
//! file (a malformed one makes whisper.cpp abort the whole process).

use super::*;

/// The fields of a ggml Whisper header we check before loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgmlHeader {
    pub n_vocab: i32,
    pub n_audio_ctx: i32,
    pub n_audio_state: i32,
    pub n_audio_layer: i32,
    pub n_text_layer: i32,
    pub n_mels: i32,
    pub ftype: i32,
}

pub fn read_ggml_header(path: &Path) -> Result<GgmlHeader, AsrError> {
    let bad = |reason: String| AsrError::BadModel {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = crate::file_kind::regular_file(path)
        .and_then(|_| std::fs::File::open(path))
        .map_err(|e| bad(e.to_string()))?;
    let mut b = [0u8; 48];
    f.read_exact(&mut b)
        .map_err(|_| bad("shorter than a ggml header (48 bytes)".into()))?;
    let w = |i: usize| i32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
    if w(0) as u32 != 0x6767_6d6c {
        return Err(bad(format!(
            "magic is {:#010x}, expected 0x67676d6c",
            w(0) as u32
        )));
    }
    let h = GgmlHeader {
        n_vocab: w(1),
        n_audio_ctx: w(2),
        n_audio_state: w(3),
        n_audio_layer: w(5),
        n_text_layer: w(9),
        n_mels: w(10),
        ftype: w(11),
    };
    let sane = (51_000..=52_000).contains(&h.n_vocab)
        && h.n_audio_ctx == 1500
        && [384, 512, 768, 1024, 1280].contains(&h.n_audio_state)
        && (1..=64).contains(&h.n_audio_layer)
        && (1..=64).contains(&h.n_text_layer)
        && (h.n_mels == 80 || h.n_mels == 128);
    if !sane {
        return Err(bad(format!("implausible hyper-parameters {h:?}")));
    }
    Ok(h)
}
