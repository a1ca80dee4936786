//! A ggml Whisper file's header and layout, read and checked in Rust before whisper.cpp
//! sees the file: a malformed one makes whisper.cpp abort the whole process (a C++
//! exception through the FFI, "Rust cannot catch foreign exceptions"). With
//! `models.skip_checksums` a corrupt file of the right size reached whisper.cpp: bytes
//! 48-4144 overwritten with 0xff made the mel filter count -1, and the resize that
//! follows threw. [`check_ggml_file`] walks every section as whisper.cpp reads it (mel
//! filters, vocabulary, each tensor's header and data) and refuses any size whisper.cpp
//! would trust blindly, without reading the weights themselves.

use std::io::Read;
use std::path::Path;

use super::error::AsrError;
use std::io::Seek;

/// The fields of a ggml Whisper header we check before loading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GgmlHeader {
    pub n_vocab: i32,
    pub n_audio_ctx: i32,
    pub n_audio_state: i32,
    pub n_audio_head: i32,
    pub n_audio_layer: i32,
    pub n_text_ctx: i32,
    pub n_text_state: i32,
    pub n_text_head: i32,
    pub n_text_layer: i32,
    pub n_mels: i32,
    pub ftype: i32,
}

/// Bytes of the header: the magic and eleven hyper-parameters.
const HEADER_BYTES: u64 = 48;
/// Longest vocabulary entry accepted (Whisper's longest token is a few dozen bytes).
const MAX_TOKEN_BYTES: u32 = 1024;
/// Longest tensor name accepted (Whisper's are under 50 bytes).
const MAX_NAME_BYTES: i32 = 256;
/// Tensors in a Whisper file (large-v3 has about 1 300).
const MAX_TENSORS: usize = 4096;

/// (bytes per block, elements per block) of the ggml tensor types Whisper files use:
/// f32, f16 and the quantisations `whisper.cpp`'s quantize writes.
fn ggml_type(t: i32) -> Option<(u64, u64)> {
    Some(match t {
        0 => (4, 1),
        1 => (2, 1),
        2 => (18, 32),
        3 => (20, 32),
        6 => (22, 32),
        7 => (24, 32),
        8 => (34, 32),
        10 => (84, 256),
        11 => (110, 256),
        12 => (144, 256),
        13 => (176, 256),
        14 => (210, 256),
        _ => return None,
    })
}

pub fn read_ggml_header(path: &Path) -> Result<GgmlHeader, AsrError> {
    let bad = |reason: String| AsrError::BadModel {
        path: path.to_path_buf(),
        reason,
    };
    let mut f = crate::common::file_kind::regular_file(path)
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
        n_audio_head: w(4),
        n_audio_layer: w(5),
        n_text_ctx: w(6),
        n_text_state: w(7),
        n_text_head: w(8),
        n_text_layer: w(9),
        n_mels: w(10),
        ftype: w(11),
    };
    let sane = (51_000..=52_000).contains(&h.n_vocab)
        && h.n_audio_ctx == 1500
        && [384, 512, 768, 1024, 1280].contains(&h.n_audio_state)
        && h.n_text_state == h.n_audio_state
        && (1..=64).contains(&h.n_audio_head)
        && (1..=64).contains(&h.n_text_head)
        && h.n_text_ctx == 448
        && (1..=64).contains(&h.n_audio_layer)
        && (1..=64).contains(&h.n_text_layer)
        && (h.n_mels == 80 || h.n_mels == 128)
        && (0..=1024 * 1024).contains(&h.ftype);
    if !sane {
        return Err(bad(format!("implausible hyper-parameters {h:?}")));
    }
    Ok(h)
}

/// The header and then every section after it, as whisper.cpp reads them, without
/// reading the weights: mel filters (their count must be the header's), vocabulary
/// (no more entries than the header's, each short and inside the file), then tensors to
/// the end of the file (1-4 dimensions, a known type, a short name, data inside the
/// file). Seeks over data, so it costs milliseconds, not a pass over the file.
pub fn check_ggml_file(path: &Path) -> Result<GgmlHeader, AsrError> {
    let h = read_ggml_header(path)?;
    let bad = |reason: String| AsrError::BadModel {
        path: path.to_path_buf(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let len = file.metadata().map_err(|e| bad(e.to_string()))?.len();
    let mut r = std::io::BufReader::new(file);
    let mut pos = HEADER_BYTES;
    r.seek(std::io::SeekFrom::Start(pos))
        .map_err(|e| bad(e.to_string()))?;
    let word = |r: &mut std::io::BufReader<std::fs::File>, pos: &mut u64, what: &str| {
        let mut b = [0u8; 4];
        r.read_exact(&mut b)
            .map_err(|_| bad(format!("ends inside {what} (at byte {pos})")))?;
        *pos += 4;
        Ok::<i32, AsrError>(i32::from_le_bytes(b))
    };
    let skip = |r: &mut std::io::BufReader<std::fs::File>, pos: &mut u64, n: u64, what: &str| {
        if n > len.saturating_sub(*pos) {
            return Err(bad(format!(
                "{what} at byte {pos} needs {n} bytes, only {} are left",
                len - *pos
            )));
        }
        r.seek_relative(n as i64).map_err(|e| bad(e.to_string()))?;
        *pos += n;
        Ok(())
    };
    let n_mel = word(&mut r, &mut pos, "the mel filters")?;
    let n_fft = word(&mut r, &mut pos, "the mel filters")?;
    if n_mel != h.n_mels || !(1..=4096).contains(&n_fft) {
        return Err(bad(format!(
            "mel filters {n_mel} x {n_fft} (the header says {} mel bands)",
            h.n_mels
        )));
    }
    skip(
        &mut r,
        &mut pos,
        n_mel as u64 * n_fft as u64 * 4,
        "the mel filters",
    )?;
    let n_vocab = word(&mut r, &mut pos, "the vocabulary")?;
    if !(0..=h.n_vocab).contains(&n_vocab) {
        return Err(bad(format!(
            "{n_vocab} vocabulary entries (the header says {})",
            h.n_vocab
        )));
    }
    for i in 0..n_vocab {
        let n = word(&mut r, &mut pos, "the vocabulary")? as u32;
        if n > MAX_TOKEN_BYTES {
            return Err(bad(format!("vocabulary entry {i} is {n} bytes long")));
        }
        skip(&mut r, &mut pos, u64::from(n), "a vocabulary entry")?;
    }
    let mut tensors = 0usize;
    while pos < len {
        tensors += 1;
        if tensors > MAX_TENSORS {
            return Err(bad(format!("more than {MAX_TENSORS} tensors")));
        }
        let at = pos;
        let n_dims = word(&mut r, &mut pos, "a tensor header")?;
        let name_len = word(&mut r, &mut pos, "a tensor header")?;
        let ttype = word(&mut r, &mut pos, "a tensor header")?;
        if !(1..=4).contains(&n_dims) || !(1..=MAX_NAME_BYTES).contains(&name_len) {
            return Err(bad(format!(
                "tensor header at byte {at}: {n_dims} dimensions, a name of {name_len} bytes"
            )));
        }
        let (block_bytes, block) = ggml_type(ttype)
            .ok_or_else(|| bad(format!("tensor at byte {at} has unknown type {ttype}")))?;
        let mut elements = 1u64;
        for d in 0..n_dims {
            let ne = word(&mut r, &mut pos, "a tensor header")?;
            if ne < 1 || (d == 0 && ne as u64 % block != 0) {
                return Err(bad(format!(
                    "tensor at byte {at}: dimension {d} is {ne} (type {ttype} needs rows of \
                     whole blocks of {block})"
                )));
            }
            elements = elements.saturating_mul(ne as u64);
        }
        skip(&mut r, &mut pos, name_len as u64, "a tensor name")?;
        let data = elements.saturating_mul(block_bytes) / block;
        skip(&mut r, &mut pos, data, "a tensor's data")?;
    }
    if tensors == 0 {
        return Err(bad("no tensors after the vocabulary".into()));
    }
    Ok(h)
}
