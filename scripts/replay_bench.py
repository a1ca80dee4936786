#!/usr/bin/env python3
"""Replay the shared speech clips through `sarcasmd replay` and report per-stage time,
real-time factor and peak RSS as medians over repeated runs.

The clips (House utterances, 16 kHz, and MUStARD++ samples, 48 kHz) are joined into one
stream with 1 s of silence between them (sox resamples the 48 kHz ones), so one daemon
process sees a long speech-dense meeting, as in a room. Standard library only.

  python3 scripts/replay_bench.py [--bin target/release/sarcasmd] [--repeat 3] [--data ../shared/data]
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, round((len(v) - 1) * q))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/sarcasmd")
    ap.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model", default=None)
    ap.add_argument("--json", default=None, help="write the full result here")
    a = ap.parse_args()
    clips = sorted(glob.glob(os.path.join(a.data, "speech", "house_mustardpp_ext", "audio_16k", "utterance", "*.wav")))
    clips += sorted(glob.glob(os.path.join(a.data, "speech", "mustardpp_samples", "*.wav")))
    if not clips:
        sys.exit(f"no clips under {a.data}/speech")
    tmp = tempfile.mkdtemp(prefix="sarcasmd-bench-")
    parts = []
    for i, c in enumerate(clips):
        p = os.path.join(tmp, f"{i:04d}.wav")
        subprocess.run(["sox", c, "-r", "16000", "-c", "1", "-b", "16", p, "pad", "0", "1.0"], check=True)
        parts.append(p)
    stream = os.path.join(tmp, "meeting.wav")
    subprocess.run(["sox", *parts, stream], check=True)

    runs = []
    for r in range(a.repeat):
        ev_path = os.path.join(tmp, f"events{r}.jsonl")
        st_path = os.path.join(tmp, f"stats{r}.json")
        cmd = [a.bin, "replay", stream, "--events", ev_path, "--stats", st_path]
        if a.model:
            cmd += ["--model", a.model]
        if os.path.exists(ev_path):
            os.remove(ev_path)
        subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
        st = json.load(open(st_path))
        evs = [json.loads(l) for l in open(ev_path)]
        stages = {k: [e["latency_ms"][k] for e in evs] for k in ("asr", "text", "audio", "fusion", "queue", "total")}
        utt_s = [e["end_s"] - e["start_s"] for e in evs]
        runs.append({
            "audio_s": st["audio_s"], "wall_s": st["wall_s"], "cpu_s": st["cpu_s"],
            "rtf_cpu": st["rtf_cpu"], "rtf_wall": st["rtf_wall"], "peak_rss_mb": st["peak_rss_mb"],
            "model_load_ms": st["model_load_ms"], "utterances": len(evs),
            "dropped": st["dropped"], "vad_chunk_median_ms": st["stages"]["vad_chunk"]["median_ms"],
            "utt_median_s": statistics.median(utt_s),
            "stage_median_ms": {k: statistics.median(v) for k, v in stages.items()},
            "stage_p95_ms": {k: pct(v, 0.95) for k, v in stages.items()},
            "asr_ms_per_audio_s": sum(stages["asr"]) / max(sum(utt_s), 1e-9),
        })
        print(f"run {r + 1}: {json.dumps(runs[-1])}", file=sys.stderr)

    med = lambda k: statistics.median(x[k] for x in runs)
    print(f"clips: {len(clips)} joined into {runs[0]['audio_s']:.1f} s; utterances per run: {[x['utterances'] for x in runs]}; "
          f"median utterance {runs[0]['utt_median_s']:.2f} s")
    print(f"medians over {len(runs)} runs:")
    print(f"  wall {med('wall_s'):.1f} s, CPU {med('cpu_s'):.1f} s -> {med('rtf_cpu'):.3f} CPU-s per audio-s "
          f"(wall RTF {med('rtf_wall'):.3f}); peak RSS {med('peak_rss_mb'):.0f} MB; model load {med('model_load_ms'):.0f} ms")
    print(f"  VAD per 32 ms chunk: {med('vad_chunk_median_ms'):.3f} ms; ASR {med('asr_ms_per_audio_s'):.0f} ms per second of utterance")
    print("  per-utterance stage times (ms): stage | median | p95")
    for k in ("asr", "text", "audio", "fusion"):
        print(f"    {k:<7} | {statistics.median(x['stage_median_ms'][k] for x in runs):8.2f} | "
              f"{statistics.median(x['stage_p95_ms'][k] for x in runs):8.2f}")
    print(f"  drops: {[x['dropped'] for x in runs]}")
    if a.json:
        json.dump(runs, open(a.json, "w"), indent=2)


if __name__ == "__main__":
    main()
