"""The fault soak's accounting of every event: the events file followed by path like
`tail -F` (across its removals), the per-stream summaries of the daemon's log, and the
file's events cut into streams and matched against them."""
import hashlib
import json
import os
import re
import threading
import time

STREAM_RE = re.compile(r"stream (\d+) ended: (\d+) utterances, (\d+) events, dropped: (.*)$", re.M)
MQTT_STOP_RE = re.compile(r"mqtt: (\d+) events published .*?(\d+) unsent at stop", re.M)


class Tailer(threading.Thread):
    """Follows the events file by path like `tail -F`: holds an fd, reads what is appended,
    and when the path names another file or none, reads the old one to its end before
    opening the new one. Keeps every distinct line in order of first sight."""

    def __init__(self, path):
        super().__init__(name="tailer", daemon=True)
        self.path = path
        self.lines = []
        self.seen = set()
        self.duplicates = 0
        self.files = 0
        self.stop_ev = threading.Event()
        self.lock = threading.Lock()

    def _take(self, f, buf):
        buf += f.read()
        *whole, rest = buf.split(b"\n")
        with self.lock:
            for line in whole:
                if not line.strip():
                    continue
                h = hashlib.sha1(line).digest()
                if h in self.seen:
                    self.duplicates += 1
                    continue
                self.seen.add(h)
                self.lines.append(line.decode("utf-8", errors="replace"))
        return rest

    def run(self):
        f, ino, buf = None, None, b""
        while True:
            stopping = self.stop_ev.is_set()
            if f is None:
                try:
                    f = open(self.path, "rb")
                    ino = os.fstat(f.fileno()).st_ino
                    self.files += 1
                    buf = b""
                except FileNotFoundError:
                    f = None
            if f is not None:
                buf = self._take(f, buf)
                try:
                    moved = os.stat(self.path).st_ino != ino
                except FileNotFoundError:
                    moved = True
                if moved:
                    buf = self._take(f, buf)  # what reached the old file before it went
                    f.close()
                    f = None
                    continue
            if stopping:
                return
            time.sleep(0.1)

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=10)


def parse_streams(text):
    """The daemon log's "stream N ended: U utterances, E events, dropped: ..." lines."""
    streams = []
    for m in STREAM_RE.finditer(text):
        dropped = {}
        if m.group(4).strip() != "none":
            for part in m.group(4).split(", "):
                k, _, v = part.rpartition(" ")
                dropped[k] = int(v)
        streams.append({"n": int(m.group(1)), "utterances": int(m.group(2)), "events": int(m.group(3)),
                        "dropped": dropped})
    return streams


def account(lines, streams):
    """Events file lines (distinct, in order) against the per-stream summaries."""
    evs = []
    for l in lines:
        try:
            j = json.loads(l)
        except ValueError:
            continue
        if j.get("type") == "utterance":
            evs.append(j)
    segments, cur, prev = [], [], None
    for e in evs:
        if prev is not None and e["id"] <= prev:
            segments.append(cur)
            cur = []
        cur.append(e)
        prev = e["id"]
    if cur:
        segments.append(cur)
    with_events = [s for s in streams if s["events"] > 0]
    produced = sum(s["utterances"] for s in streams)
    dropped = sum(s["dropped"].get("utterance_queue_full", 0) + s["dropped"].get("events_file_backlog_full", 0)
                  for s in streams)
    found = sum(len({e["id"] for e in seg}) for seg in segments)
    mismatched = []
    for k, (seg, st) in enumerate(zip(segments, with_events)):
        ids = [e["id"] for e in seg]
        expect = st["events"] - st["dropped"].get("events_file_backlog_full", 0)
        if len(ids) != expect or (ids and ids[-1] >= st["utterances"]):
            mismatched.append({"segment": k, "stream": st["n"], "found": len(ids), "expected": expect,
                               "utterances": st["utterances"]})
    return {
        "streams": len(streams), "streams_with_events": len(with_events), "segments_in_file": len(segments),
        "utterances_produced": produced, "events_in_file": found, "dropped_counted": dropped,
        "unaccounted": produced - found - dropped, "segments_not_matching": mismatched[:10],
    }, evs
