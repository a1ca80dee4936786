"""CTranslate2 Whisper `model.bin` -> whisper.cpp ggml file, plus q8_0 quantisation.

The ggml layout is the one whisper.cpp's own PyTorch converter
(models/convert-pt-to-ggml.py upstream) writes and whisper.cpp's loader
(`whisper_model_load` in src/whisper.cpp) reads:

    i32 magic 0x67676d6c
    i32 n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer,
        n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype
    i32 n_mel, i32 n_fft, f32[n_mel * n_fft]          mel filter bank
    i32 n_tokens, then per token: i32 len, raw bytes  (from the .tiktoken file)
    per tensor: i32 n_dims, i32 name_len, i32 type, i32 ne[n_dims] (innermost
        first), name, data

The q8_0 writer reproduces whisper.cpp's `quantize` example
(examples/quantize/quantize.cpp + examples/common-ggml.cpp
`ggml_common_quantize_0`) with ggml's reference `quantize_row_q8_0_ref`:
every 2-D tensor except the conv biases and positional embeddings becomes
GGML_TYPE_Q8_0 (8); everything else is copied; header ftype becomes
GGML_QNT_VERSION * GGML_QNT_VERSION_FACTOR + GGML_FTYPE_MOSTLY_Q8_0 = 2007.

Everything here is plain numpy + struct so the output bytes are a pure
function of the inputs (the lock file pins their SHA-256).
"""

import base64
import io
import struct

import numpy as np

GGML_MAGIC = 0x67676D6C
GGML_TYPE_F32 = 0
GGML_TYPE_F16 = 1
GGML_TYPE_Q8_0 = 8
GGML_FTYPE_MOSTLY_F16 = 1
GGML_FTYPE_MOSTLY_Q8_0 = 7
GGML_QNT_VERSION = 2
GGML_QNT_VERSION_FACTOR = 1000
QK8_0 = 32

# tensors whisper.cpp keeps in f32 even in an f16 file, and that its quantize
# tool never quantises (`to_skip` in examples/quantize/quantize.cpp)
F32_2D_TENSORS = (
    "encoder.conv1.bias",
    "encoder.conv2.bias",
    "encoder.positional_embedding",
    "decoder.positional_embedding",
)

_CT2_DTYPES = {
    0: np.dtype("<f4"),
    1: np.dtype("i1"),
    2: np.dtype("<i2"),
    3: np.dtype("<i4"),
    4: np.dtype("<f2"),
}


class ConversionError(Exception):
    pass


# ---------------------------------------------------------------- CT2 reader
def read_ct2(data):
    """Parse a CTranslate2 model.bin (bytes) -> (spec_name, {name: ndarray})."""
    buf = memoryview(data)
    pos = 0

    def take(fmt):
        nonlocal pos
        size = struct.calcsize("<" + fmt)
        vals = struct.unpack_from("<" + fmt, buf, pos)
        pos += size
        return vals

    def string():
        nonlocal pos
        (n,) = take("H")
        s = bytes(buf[pos:pos + n])
        pos += n
        return s.rstrip(b"\x00").decode("utf-8")

    (binary_version,) = take("I")
    if binary_version < 5:
        raise ConversionError(f"unsupported CTranslate2 binary version {binary_version}")
    spec = string()
    (_revision,) = take("I")
    (n_vars,) = take("I")
    variables = {}
    for _ in range(n_vars):
        name = string()
        (rank,) = take("B")
        dims = take("I" * rank) if rank else ()
        (dtype_id,) = take("B")
        (nbytes,) = take("I")
        if dtype_id not in _CT2_DTYPES:
            raise ConversionError(f"{name}: unsupported CT2 dtype {dtype_id}")
        arr = np.frombuffer(buf[pos:pos + nbytes], dtype=_CT2_DTYPES[dtype_id])
        pos += nbytes
        variables[name] = arr.reshape(dims) if rank else arr.reshape(())
    (n_alias,) = take("I")
    for _ in range(n_alias):
        alias = string()
        target = string()
        variables[alias] = variables[target]
    if pos != len(buf):
        raise ConversionError(f"trailing {len(buf) - pos} bytes after CT2 variables")
    return spec, variables


# ------------------------------------------------------- CT2 -> whisper names
def _n_layers(v, side):
    n = 0
    while f"{side}/layer_{n}/ffn/linear_0/weight" in v:
        n += 1
    return n


def ct2_to_whisper_tensors(v):
    """Map CT2 Whisper variables to whisper.cpp tensor names (f16/f32 arrays).

    Order follows the PyTorch state_dict the upstream converter walks.
    Returns (hparams dict, list of (name, ndarray)).
    """
    out = []

    def add(name, arr):
        out.append((name, np.asarray(arr)))

    def attn_qkv(prefix, ct2, d):
        w = v[f"{ct2}/linear_0/weight"]
        b = v[f"{ct2}/linear_0/bias"]
        if w.shape != (3 * d, d) or b.shape != (3 * d,):
            raise ConversionError(f"{ct2}/linear_0 has shape {w.shape}, expected {(3 * d, d)}")
        if np.any(b[d:2 * d] != 0):
            raise ConversionError(f"{ct2}: key bias is not zero; not a Whisper model?")
        add(f"{prefix}.query.weight", w[:d])
        add(f"{prefix}.query.bias", b[:d])
        add(f"{prefix}.key.weight", w[d:2 * d])
        add(f"{prefix}.value.weight", w[2 * d:])
        add(f"{prefix}.value.bias", b[2 * d:])
        add(f"{prefix}.out.weight", v[f"{ct2}/linear_1/weight"])
        add(f"{prefix}.out.bias", v[f"{ct2}/linear_1/bias"])

    def ln(prefix, ct2):
        add(f"{prefix}.weight", v[f"{ct2}/gamma"])
        add(f"{prefix}.bias", v[f"{ct2}/beta"])

    def mlp(prefix, ct2):
        add(f"{prefix}.mlp.0.weight", v[f"{ct2}/linear_0/weight"])
        add(f"{prefix}.mlp.0.bias", v[f"{ct2}/linear_0/bias"])
        add(f"{prefix}.mlp.2.weight", v[f"{ct2}/linear_1/weight"])
        add(f"{prefix}.mlp.2.bias", v[f"{ct2}/linear_1/bias"])

    n_enc = _n_layers(v, "encoder")
    n_dec = _n_layers(v, "decoder")
    enc_pe = v["encoder/position_encodings/encodings"]
    dec_pe = v["decoder/position_encodings/encodings"]
    emb = v["decoder/embeddings/weight"]
    conv1 = v["encoder/conv1/weight"]
    d = enc_pe.shape[1]
    hp = {
        "n_vocab": emb.shape[0],
        "n_audio_ctx": enc_pe.shape[0],
        "n_audio_state": d,
        "n_audio_head": int(v["encoder/num_heads"]),
        "n_audio_layer": n_enc,
        "n_text_ctx": dec_pe.shape[0],
        "n_text_state": emb.shape[1],
        "n_text_head": int(v["decoder/num_heads"]),
        "n_text_layer": n_dec,
        "n_mels": conv1.shape[1],
    }
    if "decoder/projection/weight" in v and v["decoder/projection/weight"] is not emb:
        if not np.array_equal(v["decoder/projection/weight"], emb):
            raise ConversionError("decoder projection is not tied to the token embedding")

    # encoder
    add("encoder.positional_embedding", enc_pe)
    add("encoder.conv1.weight", conv1)
    add("encoder.conv1.bias", v["encoder/conv1/bias"].reshape(-1, 1))
    add("encoder.conv2.weight", v["encoder/conv2/weight"])
    add("encoder.conv2.bias", v["encoder/conv2/bias"].reshape(-1, 1))
    for i in range(n_enc):
        p, c = f"encoder.blocks.{i}", f"encoder/layer_{i}"
        attn_qkv(f"{p}.attn", f"{c}/self_attention", d)
        ln(f"{p}.attn_ln", f"{c}/self_attention/layer_norm")
        mlp(p, f"{c}/ffn")
        ln(f"{p}.mlp_ln", f"{c}/ffn/layer_norm")
    ln("encoder.ln_post", "encoder/layer_norm")

    # decoder
    add("decoder.positional_embedding", dec_pe)
    add("decoder.token_embedding.weight", emb)
    for i in range(n_dec):
        p, c = f"decoder.blocks.{i}", f"decoder/layer_{i}"
        attn_qkv(f"{p}.attn", f"{c}/self_attention", d)
        ln(f"{p}.attn_ln", f"{c}/self_attention/layer_norm")
        # cross attention: linear_0 = query, linear_1 = stacked key+value, linear_2 = out
        q_w, q_b = v[f"{c}/attention/linear_0/weight"], v[f"{c}/attention/linear_0/bias"]
        kv_w, kv_b = v[f"{c}/attention/linear_1/weight"], v[f"{c}/attention/linear_1/bias"]
        if kv_w.shape != (2 * d, d):
            raise ConversionError(f"{c}/attention/linear_1 has shape {kv_w.shape}")
        if np.any(kv_b[:d] != 0):
            raise ConversionError(f"{c}: cross-attention key bias is not zero")
        add(f"{p}.cross_attn.query.weight", q_w)
        add(f"{p}.cross_attn.query.bias", q_b)
        add(f"{p}.cross_attn.key.weight", kv_w[:d])
        add(f"{p}.cross_attn.value.weight", kv_w[d:])
        add(f"{p}.cross_attn.value.bias", kv_b[d:])
        add(f"{p}.cross_attn.out.weight", v[f"{c}/attention/linear_2/weight"])
        add(f"{p}.cross_attn.out.bias", v[f"{c}/attention/linear_2/bias"])
        ln(f"{p}.cross_attn_ln", f"{c}/attention/layer_norm")
        mlp(p, f"{c}/ffn")
        ln(f"{p}.mlp_ln", f"{c}/ffn/layer_norm")
    ln("decoder.ln", "decoder/layer_norm")
    return hp, out


# ----------------------------------------------------------------- tiktoken
def read_tiktoken(text_bytes):
    """base64 token + rank per line -> list of token bytes in rank order."""
    tokens = []
    for lineno, line in enumerate(text_bytes.splitlines()):
        if not line.strip():
            continue
        tok, rank = line.split()
        if int(rank) != len(tokens):
            raise ConversionError(f"tiktoken line {lineno + 1}: rank {rank} out of order")
        tokens.append(base64.b64decode(tok))
    return tokens


# ------------------------------------------------------------------- q8_0
_Q8_0_BLOCK = np.dtype([("d", "<f2"), ("qs", "i1", (QK8_0,))])


def quantize_q8_0(x):
    """ggml `quantize_row_q8_0_ref`, vectorised: returns the raw block bytes.

    Per block of 32: amax = max|x|; d = amax / 127 (f32); id = 1/d (0 if d==0);
    q = roundf(x * id) (half away from zero); the scale is stored as f16(d).
    """
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1, QK8_0)
    amax = np.max(np.abs(x), axis=1)
    d = amax / np.float32(127.0)
    with np.errstate(divide="ignore"):
        inv = np.where(d != 0, np.float32(1.0) / d, np.float32(0.0)).astype(np.float32)
    x0 = (x * inv[:, None]).astype(np.float64)  # f32 product, widened exactly
    q = np.sign(x0) * np.floor(np.abs(x0) + 0.5)  # C roundf: half away from zero
    blocks = np.empty(x.shape[0], dtype=_Q8_0_BLOCK)
    blocks["d"] = d.astype(np.float16)
    blocks["qs"] = q.astype(np.int8)
    return blocks.tobytes()


# ------------------------------------------------------------------ writer
def _tensor_record(name, arr, ttype):
    dims = arr.shape
    nb = name.encode("utf-8")
    head = struct.pack("<iii", len(dims), len(nb), ttype)
    head += struct.pack("<" + "i" * len(dims), *reversed(dims))
    return head + nb


def write_ggml(fout, hp, mel_filters, tokens, tensors, quant=None):
    """Write a whisper.cpp ggml model.

    quant=None writes the f16 file (as the upstream converter with use_f16);
    quant="q8_0" writes what whisper.cpp's `quantize ... q8_0` would produce
    from that f16 file.
    """
    if quant not in (None, "q8_0"):
        raise ValueError(quant)
    ftype = GGML_FTYPE_MOSTLY_F16
    if quant == "q8_0":
        ftype = GGML_QNT_VERSION * GGML_QNT_VERSION_FACTOR + GGML_FTYPE_MOSTLY_Q8_0
    fout.write(struct.pack("<i", GGML_MAGIC))
    fout.write(struct.pack(
        "<11i", hp["n_vocab"], hp["n_audio_ctx"], hp["n_audio_state"], hp["n_audio_head"],
        hp["n_audio_layer"], hp["n_text_ctx"], hp["n_text_state"], hp["n_text_head"],
        hp["n_text_layer"], hp["n_mels"], ftype))
    mel = np.ascontiguousarray(mel_filters, dtype="<f4")
    fout.write(struct.pack("<ii", *mel.shape))
    fout.write(mel.tobytes())
    fout.write(struct.pack("<i", len(tokens)))
    for t in tokens:
        fout.write(struct.pack("<i", len(t)))
        fout.write(t)
    for name, arr in tensors:
        if arr.ndim < 2 or name in F32_2D_TENSORS:
            data, ttype = np.ascontiguousarray(arr, dtype="<f4"), GGML_TYPE_F32
        else:
            data, ttype = np.ascontiguousarray(arr, dtype="<f2"), GGML_TYPE_F16
        if quant == "q8_0" and arr.ndim == 2 and name not in F32_2D_TENSORS:
            if arr.shape[1] % QK8_0:
                raise ConversionError(f"{name}: row length {arr.shape[1]} not a multiple of 32")
            # the quantize tool reads the f16 data and widens it to f32 first
            payload, ttype = quantize_q8_0(data.astype(np.float32)), GGML_TYPE_Q8_0
        else:
            payload = data.tobytes()
        fout.write(_tensor_record(name, arr, ttype))
        fout.write(payload)


def convert(ct2_bytes, mel_filters, tiktoken_bytes, quant=None, expect_n_vocab=None):
    """Whole conversion in memory -> bytes of the ggml file."""
    spec, v = read_ct2(ct2_bytes)
    if spec != "WhisperSpec":
        raise ConversionError(f"CT2 spec is {spec!r}, expected 'WhisperSpec'")
    hp, tensors = ct2_to_whisper_tensors(v)
    if expect_n_vocab is not None and hp["n_vocab"] != expect_n_vocab:
        raise ConversionError(f"n_vocab {hp['n_vocab']} != expected {expect_n_vocab}")
    if mel_filters.shape[0] != hp["n_mels"]:
        raise ConversionError(f"mel filters have {mel_filters.shape[0]} rows, model wants {hp['n_mels']}")
    tokens = read_tiktoken(tiktoken_bytes)
    buf = io.BytesIO()
    write_ggml(buf, hp, mel_filters, tokens, tensors, quant=quant)
    return buf.getvalue()
