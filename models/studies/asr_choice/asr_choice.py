#!/usr/bin/env python3
"""Which Whisper model should a board run? The text view measured on the final
transcripts of Whisper tiny.en (q8_0) and base (q8_0) on the same speech clips (issue 22,
item 5): word error rate against the gold transcripts, the text view's macro-F1 / P / R /
ROC-AUC, and the CPU the whole pipeline spent per audio second, all through
`sarcasmd eval` (audio in, the shipped heads, no context). Latency comes from
`sarcasmd bench` on the bundled meeting sample (streaming and one-shot).

Clips: House M.D. (`speech.jsonl`, source `house`: a show absent from every training
set) and the MUStARD++ cmpt419 clips (`speech_cmpt419.jsonl`; their scenes are removed
from the text head's training data, models/studies/text_v2/TEXT_V2.md). Nothing here is trained:
the shipped text head scores both transcripts, so the difference is the transcript.

Writes models/studies/asr_choice/ASR_CHOICE.md and .json. Standard library only.
  python3 -m models.studies.asr_choice.asr_choice [--bin target/release/sarcasmd] [--manifests DIR]
"""
import argparse
import json
import os
import re
import resource
import subprocess
import sys
import time
import wave

from models.recipe.lib.data import read_jsonl  # the one JSON-lines loader of the recipe

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
MODELS = ["tiny.en-q8_0", "base-q8_0"]
CORPORA = [
    ("House M.D. clips", "speech.jsonl", "house"),
    ("MUStARD++ cmpt419 clips", "speech_cmpt419.jsonl", None),
]


def words(text):
    """Lower-case words without punctuation (apostrophes kept, curly ones folded)."""
    t = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    return re.findall(r"[a-z0-9']+", t)


def edit_distance(ref, hyp):
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def macro_f1(pairs):
    """Macro-F1 over both classes at threshold 0.5 of (label, p) pairs."""
    f1s = []
    for cls in (True, False):
        tp = sum(1 for y, p in pairs if (p >= 0.5) == cls and y == cls)
        fp = sum(1 for y, p in pairs if (p >= 0.5) == cls and y != cls)
        fn = sum(1 for y, p in pairs if (p >= 0.5) != cls and y == cls)
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(f1s) / 2


def paired_bootstrap(a, b, draws=2000, seed=13):
    """Macro-F1(b) - macro-F1(a) on the same items: 95 % interval and P(b better)."""
    import random
    rng = random.Random(seed)
    ids = sorted(set(a) & set(b))
    deltas = []
    for _ in range(draws):
        sample = [rng.choice(ids) for _ in ids]
        deltas.append(macro_f1([b[i] for i in sample]) - macro_f1([a[i] for i in sample]))
    deltas.sort()
    return {"delta": macro_f1([b[i] for i in ids]) - macro_f1([a[i] for i in ids]),
            "ci95": [deltas[int(0.025 * draws)], deltas[int(0.975 * draws) - 1]],
            "p_better": sum(d > 0 for d in deltas) / draws, "n": len(ids)}


def audio_seconds(path):
    with wave.open(path) as w:
        return w.getnframes() / w.getframerate()


def run_eval(binary, manifest, model, work):
    cfg = os.path.join(work, f"asr-{model}.toml")
    with open(cfg, "w") as f:
        f.write(f'[asr]\nmodel = "{model}"\nlanguage = "en"\n')
    out = os.path.join(work, f"eval-{os.path.basename(manifest)}-{model}.json")
    if os.path.exists(out):
        with open(out) as f:
            return json.load(f)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([binary, "eval", manifest, "--config", cfg, "--context-s", "0",
                    "--json", out + ".tmp"], check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(out + ".tmp") as f:
        r = json.load(f)
    r["_wall_s"] = wall
    r["_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    with open(out + ".tmp", "w") as f:
        json.dump(r, f)
    os.replace(out + ".tmp", out)
    return r


def run_bench(binary, model, work):
    cfg = os.path.join(work, f"asr-{model}.toml")
    out = os.path.join(work, f"bench-{model}.json")
    if not os.path.exists(out):
        subprocess.run([binary, "bench", os.path.join(REPO, "samples", "meeting.wav"),
                        "--config", cfg, "--runs", "3", "--json", out + ".tmp"],
                       check=True, stdout=subprocess.DEVNULL)
        os.replace(out + ".tmp", out)
    with open(out) as f:
        return json.load(f)


def row(report, views):
    for r in report["rows"]:
        if r["views"] == views and r.get("subset", "all") == "all" and r.get("context_s") is None:
            return r
    raise KeyError(views)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "release", "sarcasmd"))
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    ap.add_argument("--manifests", default=os.path.join(cache, "sarcasmd", "manifests"))
    ap.add_argument("--work", default=os.path.join(cache, "sarcasmd", "asr-choice"))
    ap.add_argument("--out", default=os.path.join(REPO, "models", "studies", "asr_choice", "ASR_CHOICE.md"))
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    results = {"models": MODELS, "corpora": {}, "bench": {}}
    for title, name, source in CORPORA:
        src = os.path.join(a.manifests, name)
        if not os.path.exists(src):
            sys.exit(f"{src} missing: run `python3 scripts/manifests.py` first")
        items = read_jsonl(src)
        if source:
            items = [i for i in items if i.get("source") == source]
        manifest = os.path.join(a.work, f"{name.rsplit('.', 1)[0]}-{source or 'all'}.jsonl")
        with open(manifest, "w") as f:
            for i in items:
                f.write(json.dumps(i) + "\n")
        gold = {i["id"]: i.get("text", "") for i in items}
        audio_s = sum(audio_seconds(i["audio"]) for i in items)
        per_model = {}
        scored = {}
        for m in MODELS:
            r = run_eval(a.bin, manifest, m, a.work)
            edits = ref_words = 0
            for it in r["items"]:
                if it.get("text_from") != "whisper" or not gold.get(it["id"]):
                    continue
                ref, hyp = words(gold[it["id"]]), words(it.get("text") or "")
                edits += edit_distance(ref, hyp)
                ref_words += len(ref)
            t = row(r, "T")
            scored[m] = {it["id"]: (bool(it["label"]), it["p"]["T"]) for it in r["items"]
                         if it.get("p", {}).get("T") is not None and it.get("label") is not None}
            per_model[m] = {
                "wer": edits / ref_words,
                "ref_words": ref_words,
                "text_view": {k: t["scores"][k] for k in
                              ("n", "n_sarcastic", "precision_macro", "recall_macro", "f1_macro")}
                | {"auc": t["auc"], "ece": t["ece"]},
                "baselines": t["baselines"],
                "items_silent": r["items_silent"],
                "eval_cpu_s_per_audio_s": r["_cpu_s"] / audio_s,
                "eval_wall_s": r["_wall_s"],
            }
        results["corpora"][title] = {"manifest": name, "source": source, "items": len(items),
                                     "audio_s": audio_s, "models": per_model,
                                     "bootstrap_base_minus_tiny": paired_bootstrap(
                                         scored[MODELS[0]], scored[MODELS[1]])}
        print(title, json.dumps(per_model, indent=1), flush=True)
    for m in MODELS:
        b = run_bench(a.bin, m, a.work)
        results["bench"][m] = b.get("summary", b)
    with open(os.path.splitext(a.out)[0] + ".json", "w") as f:
        json.dump(results, f, indent=1)
    write_md(results, a.out)


def choice(res):
    """What the board profiles run, from the figures above."""
    tiny, base = MODELS
    bt = {s["mode"]: s for s in res["bench"][tiny]}
    bb = {s["mode"]: s for s in res["bench"][base]}
    deltas = [c["bootstrap_base_minus_tiny"] for c in res["corpora"].values()]
    spans0 = all(d["ci95"][0] < 0 < d["ci95"][1] for d in deltas)
    cpu = [c["models"][base]["eval_cpu_s_per_audio_s"] / c["models"][tiny]["eval_cpu_s_per_audio_s"] - 1
           for c in res["corpora"].values()]
    wer = [(c["models"][tiny]["wer"], c["models"][base]["wer"]) for c in res["corpora"].values()]
    return ["## What the profiles run", "",
            f"- English rooms (`firmware-config/x86-dev.toml`, `rpi4.toml`): **{tiny}**. Base's text-view "
            f"macro-F1 differs by " + ", ".join(f"{100 * d['delta']:+.1f}" for d in deltas) +
            (" with every 95 % interval spanning 0" if spans0 else "") +
            "; WER " + ", ".join(f"{100 * t:.1f} vs {100 * b:.1f}" for t, b in wer) +
            " (tiny.en vs base); base costs " + ", ".join(f"{100 * c:+.0f} %" for c in cpu) +
            f" CPU in eval, {bb['streaming']['latency_p50_ms'] - bt['streaming']['latency_p50_ms']:+.0f} ms "
            f"streaming latency and {bb['streaming']['peak_rss_mb'] - bt['streaming']['peak_rss_mb']:+.0f} MB "
            "peak RSS on the sample.",
            f"- English + German rooms (`rpi5.toml`, `jetson-orin-nano.toml`, `language = \"auto\"`): "
            f"**{base}**, because tiny.en cannot transcribe German; the cost is the one above.",
            "- These clips are English TV speech: the German side of base is not measured here.", ""]


def pct(x):
    return f"{100 * x:.1f}"


def write_md(res, out):
    L = ["# Whisper tiny.en vs base for the text view (issue 22, item 5)", "",
         "Generated by `models/studies/asr_choice/asr_choice.py` (`sarcasmd eval`, audio in, shipped heads, "
         "no context; `sarcasmd bench` on `samples/meeting.wav`, 3 runs). Percent. WER = word "
         "edits / gold words over the clips Whisper transcribed (lower-case, punctuation removed). "
         "Macro-F1 at the text head's threshold 0.5; AUC = ROC-AUC; random / majority "
         "baselines beside. CPU = the whole `sarcasmd eval` run (VAD, Whisper, text, prosody; "
         "video off) per audio second, on this 2-core x86 machine, shared.", ""]
    for title, c in res["corpora"].items():
        L += [f"## {title} ({c['items']} clips, {c['audio_s'] / 60:.1f} min of audio)", "",
              "| Whisper | WER | text P | text R | text macro-F1 | text AUC | random / majority F1 | CPU-s per audio-s |",
              "|---|---|---|---|---|---|---|---|"]
        for m, r in c["models"].items():
            t, b = r["text_view"], r["baselines"]
            L.append(f"| {m} | {pct(r['wer'])} | {pct(t['precision_macro'])} | {pct(t['recall_macro'])} | "
                     f"**{pct(t['f1_macro'])}** | {pct(t['auc'])} | {pct(b['random_f1_macro'])} / "
                     f"{pct(b['majority_f1_macro'])} | {r['eval_cpu_s_per_audio_s']:.3f} |")
        bs = c["bootstrap_base_minus_tiny"]
        L += ["", f"Paired bootstrap over the {bs['n']} clips both scored (2000 resamples): text macro-F1 "
              f"base - tiny.en = {100 * bs['delta']:+.1f} [{100 * bs['ci95'][0]:+.1f}, {100 * bs['ci95'][1]:+.1f}], "
              f"P(base better) = {bs['p_better']:.2f}.", ""]
    L += ["## Latency (`sarcasmd bench samples/meeting.wav --runs 3`)", "",
          "End of speech -> event of the sample's last line (the bench counts one clip), medians "
          "over the runs; CPU and peak RSS of the whole daemon. The bench in docs/performance.md (a 3-minute "
          "meeting) gives the distribution.", "",
          "| Whisper | mode | p50 ms | p95 ms | CPU-s per audio-s | peak RSS MB |", "|---|---|---|---|---|---|"]
    for m, summary in res["bench"].items():
        for s in summary:
            L.append(f"| {m} | {s['mode']} | {s['latency_p50_ms']:.0f} | {s['latency_p95_ms']:.0f} | "
                     f"{s['cpu_s_per_audio_s']:.3f} | {s['peak_rss_mb']:.0f} |")
    L.append("")
    L += choice(res)
    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
