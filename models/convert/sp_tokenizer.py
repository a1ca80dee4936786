"""SentencePiece Unigram `.model` -> Hugging Face `tokenizer.json` (Unigram).

Reads the ModelProto with a minimal protobuf reader (no `sentencepiece` or
generated protobuf classes needed) and writes a tokenizer.json that the Rust
`tokenizers` crate (0.23) loads and that reproduces sentencepiece's
`encode(text)` ids (no BOS/EOS: the caller adds those).

How sentencepiece's behaviour is mapped (checked against sentencepiece 0.2
on English and German text, see check_usem3.py):

* normalizer: `Precompiled(charsmap)` (the nmt_nfkc table from the model),
  then the `remove_extra_whitespaces` rule done with regex replacements on
  ASCII space only (drop leading/trailing spaces, collapse runs), then
  `escape_whitespaces` (space -> U+2581) and `add_dummy_prefix` (Prepend
  U+2581, which tokenizers skips on an empty string, like sentencepiece).
* no pre-tokenizer: the Unigram Viterbi runs over the whole normalised
  string, as sentencepiece does (no piece of this vocabulary contains U+2581
  after its first character, so this also equals a Metaspace split).
* sentencepiece never matches CONTROL (<s>, </s>) or UNKNOWN pieces against
  text, while a tokenizers Unigram matches every vocabulary string. Those
  pieces are therefore renamed with a trailing ASCII space, which cannot
  survive the normaliser, so literal "<s>" in text is tokenised as
  sentencepiece does. Ids are unchanged (0 = unk, 1 = BOS, 2 = EOS).
"""

import base64
import json
import struct

# SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


class SpModelError(Exception):
    pass


def _varint(data, pos):
    result = shift = 0
    while True:
        b = data[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(data):
    """Yield (field_number, wire_type, value) for one protobuf message."""
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            val, pos = _varint(data, pos)
        elif wire == 1:
            val, pos = data[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(data, pos)
            val, pos = data[pos:pos + n], pos + n
        elif wire == 5:
            val, pos = data[pos:pos + 4], pos + 4
        else:
            raise SpModelError(f"unsupported protobuf wire type {wire}")
        yield field, wire, val


def parse_model(data):
    """Return dict with pieces [(str, float score, type)], normalizer and trainer settings."""
    pieces = []
    normalizer = {"name": "", "charsmap": b"", "add_dummy_prefix": True,
                  "remove_extra_whitespaces": True, "escape_whitespaces": True,
                  "has_rule_tsv": False}
    trainer = {"model_type": 1, "byte_fallback": False, "unk_id": 0, "bos_id": 1,
               "eos_id": 2, "treat_whitespace_as_suffix": False}
    has_denormalizer = False
    for field, wire, val in _fields(data):
        if field == 1 and wire == 2:  # repeated SentencePiece pieces
            piece, score, typ = "", 0.0, NORMAL
            for f, w, v in _fields(val):
                if f == 1:
                    piece = bytes(v).decode("utf-8")
                elif f == 2 and w == 5:
                    (score,) = struct.unpack("<f", v)
                elif f == 3:
                    typ = v
            pieces.append((piece, score, typ))
        elif field == 2 and wire == 2:  # TrainerSpec
            for f, w, v in _fields(val):
                if f == 3:
                    trainer["model_type"] = v
                elif f == 35:
                    trainer["byte_fallback"] = bool(v)
                elif f == 24:
                    trainer["treat_whitespace_as_suffix"] = bool(v)
                elif f == 40:
                    trainer["unk_id"] = v
                elif f == 41:
                    trainer["bos_id"] = v
                elif f == 42:
                    trainer["eos_id"] = v
        elif field == 3 and wire == 2:  # NormalizerSpec
            for f, w, v in _fields(val):
                if f == 1:
                    normalizer["name"] = bytes(v).decode("utf-8")
                elif f == 2:
                    normalizer["charsmap"] = bytes(v)
                elif f == 3:
                    normalizer["add_dummy_prefix"] = bool(v)
                elif f == 4:
                    normalizer["remove_extra_whitespaces"] = bool(v)
                elif f == 5:
                    normalizer["escape_whitespaces"] = bool(v)
                elif f == 6:
                    normalizer["has_rule_tsv"] = len(v) > 0
        elif field == 5 and wire == 2:  # denormalizer_spec
            has_denormalizer = any(f == 2 and len(v) for f, _, v in _fields(val))
    return {"pieces": pieces, "normalizer": normalizer, "trainer": trainer,
            "has_denormalizer": has_denormalizer}


def build_tokenizer_json(model_bytes):
    m = parse_model(model_bytes)
    nz, tr = m["normalizer"], m["trainer"]
    # what the mapping above relies on; anything else needs a different mapping
    expect = {
        "unigram model": tr["model_type"] == 1,
        "no byte fallback": not tr["byte_fallback"],
        "whitespace as prefix": not tr["treat_whitespace_as_suffix"],
        "add_dummy_prefix": nz["add_dummy_prefix"],
        "remove_extra_whitespaces": nz["remove_extra_whitespaces"],
        "escape_whitespaces": nz["escape_whitespaces"],
        "precompiled charsmap": len(nz["charsmap"]) > 0 and not nz["has_rule_tsv"],
        "no denormalizer": not m["has_denormalizer"],
        "unk is piece 0": tr["unk_id"] == 0 and m["pieces"][0][2] == UNKNOWN,
    }
    bad = [k for k, ok in expect.items() if not ok]
    if bad:
        raise SpModelError("sentencepiece model differs from what the converter supports: "
                           + ", ".join(bad))
    if any(typ == BYTE for _, _, typ in m["pieces"]):
        raise SpModelError("byte pieces are not supported")
    if any("\u2581" in p[1:] for p, _, _ in m["pieces"]):
        raise SpModelError("a piece contains U+2581 after its first character")

    vocab = []
    for piece, score, typ in m["pieces"]:
        if typ in (CONTROL, UNKNOWN):
            piece = piece + " "  # unmatchable after normalisation, see module doc
        vocab.append([piece, float(score)])

    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [],
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Precompiled",
                 "precompiled_charsmap": base64.b64encode(nz["charsmap"]).decode("ascii")},
                {"type": "Replace", "pattern": {"Regex": "^ +| +$"}, "content": ""},
                {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
                {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
                {"type": "Prepend", "prepend": "\u2581"},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": None,
        "decoder": {"type": "Metaspace", "replacement": "\u2581",
                    "prepend_scheme": "always", "split": True},
        "model": {"type": "Unigram", "unk_id": tr["unk_id"], "vocab": vocab,
                  "byte_fallback": False},
    }
    text = json.dumps(tok, ensure_ascii=False, separators=(",", ":"), sort_keys=False)
    return (text + "\n").encode("utf-8")
