#!/usr/bin/env python3
"""Do two sarcasmd binaries produce the same output? For refactors that must not change
behaviour (issue 27): build the commit before and after, then

    python3 scripts/same_output.py OLD_BIN NEW_BIN [--manifests DIR] [--limit N]

Runs both binaries, one after the other, on the same inputs with the default config:
- `replay samples/meeting.wav` (a WAV file), the same audio as raw PCM on stdin
  (`replay - --rate 16000`), and, when ../shared/data is there, the first clip of the
  MUStARD++ clips with its video (`replay --video`);
- `sarcasmd eval --json` over the speech manifests (`speech.jsonl`, House M.D.;
  `speech_cmpt419.jsonl`, the MUStARD++ clips with video), from
  `scripts/manifests.py`'s output dir.
And with every output on (issue 50: the outputs and the room head changed shape): the
sample as PCM on stdin with `[room]` (a correction made first with `sarcasmd
feedback`, so the room head mutes a line), `[captions]`, `[http]` and, when mosquitto is
installed, `[mqtt]` to a broker of its own: the events file, both caption files, every
MQTT message (topic and payload; `final_stats` by its keys, its values are run times) and
the `/metrics` rows (every series by name and labels; the values of the counts that do not
depend on time), scraped once every event is out and before the input ends.

Events are compared line by line as bytes after removing the fields that hold wall-clock
time (`latency_ms`, `ready_ms`); eval reports item by item (transcript, every view's
score, utterance count) and row by row (every figure), after removing run times. Prints
one line per input and exits 1 if anything differs. Standard library only; needs sox.
"""

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "samples" / "meeting.wav"
WALL_CLOCK_EVENT_FIELDS = ("latency_ms", "ready_ms")


def strip_event(line):
    e = json.loads(line)
    for k in WALL_CLOCK_EVENT_FIELDS:
        e.pop(k, None)
    return json.dumps(e, sort_keys=True)


def replay(binary, args, stdin=None):
    p = subprocess.run([binary, "replay", *args], input=stdin, capture_output=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"{binary} replay {' '.join(args)}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    return [strip_event(l) for l in p.stdout.decode().splitlines() if l.strip()]


def eval_items(binary, manifest, limit, tmp):
    out = Path(tmp) / "eval.json"
    args = [binary, "eval", str(manifest), "--json", str(out)]
    if limit:
        args += ["--limit", str(limit)]
    p = subprocess.run(args, capture_output=True, timeout=7200)
    if p.returncode != 0:
        sys.exit(f"{binary} eval {manifest}: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
    r = json.loads(out.read_text())
    items = {it["id"]: json.dumps({k: it.get(k) for k in ("text", "p", "utterances", "silent")}, sort_keys=True)
             for it in r["items"]}
    rows = [json.dumps(row, sort_keys=True) for row in r["rows"]]
    return items, rows


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(what, cond, timeout=300):
    t0 = time.time()
    while not cond():
        if time.time() - t0 > timeout:
            sys.exit(f"not {what} within {timeout} s")
        time.sleep(0.05)


# /metrics rows whose values do not depend on time or on the machine: the counts of what
# was scored and corrected (the rest are compared by name and labels only).
STABLE_METRICS = re.compile(r"^sarcasmd_(events_total|sarcasm_flags_total|room_[a-z_]+|sink_errors_total|"
                            r"utterances_total|dropped_[a-z_]+)")


def metric_rows(text):
    rows = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        rows.append(f"{key} {value}" if STABLE_METRICS.match(key) else key)
    return sorted(rows)


def mqtt_messages(lines):
    out = []
    for line in lines:
        topic, _, payload = line.partition(" ")
        try:
            v = json.loads(payload)
        except json.JSONDecodeError:
            out.append(f"{topic} {payload}")
            continue
        if isinstance(v, dict):
            for k in WALL_CLOCK_EVENT_FIELDS:
                v.pop(k, None)
            if v.get("type") in ("final_stats", "stats"):
                v = {"type": v["type"], "keys": sorted(v)}
        out.append(f"{topic} {json.dumps(v, sort_keys=True)}")
    return out


def all_outputs(binary, pcm, tmp):
    """The sample as PCM on stdin with every output on; what each output got."""
    d = Path(tempfile.mkdtemp(dir=tmp))
    # Two seconds of silence after the speech: the last line ends by the hangover, so the
    # second run has every event out while its input is still open.
    pcm = pcm + bytes(2 * 16000 * 2)
    broker = sub = None
    mqtt = ""
    if shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").exists():
        mport = free_port()
        (d / "mosquitto.conf").write_text(f"listener {mport} 127.0.0.1\nallow_anonymous true\n")
        broker = subprocess.Popen([shutil.which("mosquitto") or "/usr/sbin/mosquitto", "-c", str(d / "mosquitto.conf")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        mqtt = (f'[mqtt]\nenabled = true\nhost = "127.0.0.1"\nport = {mport}\ndevice_id = "same"\n'
                f'ha_discovery = true\nstats_interval_s = 0\n')
    hport = free_port()
    events = d / "events.jsonl"
    cfg = d / "all.toml"
    cfg.write_text(f'[output]\nevents = "{events}"\n[captions]\nvtt = "{d}/live.vtt"\nsrt = "{d}/live.srt"\n'
                   f'[http]\nenabled = true\nbind = "127.0.0.1:{hport}"\n'
                   f'[room]\nenabled = true\nstore = "{d}/corrections.jsonl"\nkeep_transcripts = true\n{mqtt}')
    try:
        # A first run, and a correction of its first flagged line: the second run's room
        # head mutes that line again.
        p = subprocess.run([binary, "replay", "-", "--rate", "16000", "--config", str(cfg)], input=pcm,
                           capture_output=True, timeout=900)
        if p.returncode != 0:
            sys.exit(f"{binary} replay (outputs, first run): exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
        first = [json.loads(l) for l in events.read_text().splitlines() if l.strip()]
        flagged = [e["id"] for e in first if e.get("type") == "utterance" and e.get("sarcastic")]
        if flagged:
            (d / "labels.txt").write_text(f"{flagged[0]} not_sarcastic\n")
            p = subprocess.run([binary, "feedback", "--config", str(cfg), "--events", str(events),
                                "--labels", str(d / "labels.txt")], capture_output=True, timeout=600)
            if p.returncode != 0:
                sys.exit(f"{binary} feedback: exit {p.returncode}\n{p.stderr.decode()[-2000:]}")
        n = sum(1 for e in first if e.get("type") == "utterance")
        events.unlink()
        for f in ("live.vtt", "live.srt"):
            (d / f).unlink(missing_ok=True)
        if broker:
            sub = subprocess.Popen(["mosquitto_sub", "-h", "127.0.0.1", "-p", str(mport), "-v", "-t", "sarcasmd/#"],
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(0.5)
        run = subprocess.Popen([binary, "replay", "-", "--rate", "16000", "--config", str(cfg)],
                               stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        run.stdin.write(pcm)
        run.stdin.flush()
        # Every event out (and then the idle input): scrape before the input ends.
        def utterances():
            return sum(1 for l in (events.read_text().splitlines() if events.exists() else [])
                       if '"type":"utterance"' in l)
        wait_for(f"{n} events in {events}", lambda: utterances() >= n)
        time.sleep(1.0)
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{hport}/metrics", timeout=30).read().decode()
        run.stdin.close()
        err = run.stderr.read().decode()
        if run.wait(timeout=120) != 0:
            sys.exit(f"{binary} replay (outputs): exit {run.returncode}\n{err[-2000:]}")
        got = {
            "events": [strip_event(l) for l in events.read_text().splitlines() if l.strip()],
            "captions.vtt": (d / "live.vtt").read_text().splitlines(),
            "captions.srt": (d / "live.srt").read_text().splitlines(),
            "/metrics rows": metric_rows(metrics),
        }
        if sub:
            time.sleep(2.0)
            sub.terminate()
            got["mqtt messages"] = mqtt_messages(sub.communicate(timeout=30)[0].splitlines())
        return got
    finally:
        for p in (sub, broker):
            if p and p.poll() is None:
                p.terminate()
                p.wait(timeout=30)


def compare(name, old, new, noun="events"):
    if old == new:
        print(f"same     {name}: {len(old)} {noun}")
        return True
    if isinstance(old, dict):
        diff = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        print(f"DIFFERS  {name}: {len(diff)} of {len(old)} items, e.g. {diff[0]}:\n  old {old.get(diff[0])}\n  new {new.get(diff[0])}")
    else:
        i = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
        print(f"DIFFERS  {name}: {len(old)} vs {len(new)} events; first difference at event {i}:\n"
              f"  old {old[i] if i < len(old) else None}\n  new {new[i] if i < len(new) else None}")
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("old_bin")
    ap.add_argument("new_bin")
    default_manifests = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sarcasmd" / "manifests"
    ap.add_argument("--manifests", type=Path, default=default_manifests)
    ap.add_argument("--limit", type=int, default=0, help="items per manifest (0: all)")
    a = ap.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        raw = subprocess.run(["sox", str(SAMPLE), "-t", "raw", "-r", "16000", "-c", "1", "-b", "16",
                              "-e", "signed-integer", "-"], capture_output=True, check=True).stdout
        ok &= compare("replay samples/meeting.wav", replay(a.old_bin, [str(SAMPLE)]), replay(a.new_bin, [str(SAMPLE)]))
        ok &= compare("replay - --rate 16000 (the sample as PCM)",
                      replay(a.old_bin, ["-", "--rate", "16000"], raw), replay(a.new_bin, ["-", "--rate", "16000"], raw))
        old_all, new_all = all_outputs(a.old_bin, raw, tmp), all_outputs(a.new_bin, raw, tmp)
        if "mqtt messages" not in old_all:
            print("SKIP     all outputs: mqtt messages: mosquitto not installed (scripts/install-system-deps.sh --test)")
        for k in old_all:
            ok &= compare(f"all outputs: {k}", old_all[k], new_all.get(k, []), "lines")
        cmpt = a.manifests / "speech_cmpt419.jsonl"
        if cmpt.exists():
            first = json.loads(cmpt.read_text().splitlines()[0])
            if first.get("video"):
                args = [first["audio"], "--video", first["video"]]
                ok &= compare(f"replay --video ({first['id']})", replay(a.old_bin, args), replay(a.new_bin, args))
        for m in ("speech.jsonl", "speech_cmpt419.jsonl"):
            path = a.manifests / m
            if not path.exists():
                print(f"SKIP     eval {m}: {path} not found (python3 scripts/manifests.py --out {a.manifests})")
                continue
            oi, orows = eval_items(a.old_bin, path, a.limit, tmp)
            ni, nrows = eval_items(a.new_bin, path, a.limit, tmp)
            ok &= compare(f"eval {m}: items", oi, ni, "items")
            ok &= compare(f"eval {m}: rows", orows, nrows, "rows")
    print("all same" if ok else "outputs differ")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
