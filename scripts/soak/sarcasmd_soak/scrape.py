"""HTTP checks on the daemon's loopback listener (httpx): one-shot GETs, the Prometheus
text of /metrics, the --outputs scraper (/metrics every interval, the captions every
30 s) and the fault soak's prober (/healthz and /metrics, failures at a reload apart)."""
import threading
import time

import httpx

CAPTION_FETCH_EVERY_S = 30.0    # wall seconds between /captions.vtt (and .srt) fetches

# No proxy from the environment, no connection kept: every request opens its own and
# closes it (Connection: close), so the daemon's http_connections gauge counts only
# what is under way.
_CLIENT = httpx.Client(trust_env=False, limits=httpx.Limits(max_keepalive_connections=0))
HttpError = httpx.HTTPError


def http_get(port, path, timeout=5.0):
    """GET on the daemon's loopback listener (Host: 127.0.0.1:port). Returns (status,
    content_type, body bytes); raises HttpError when no answer came."""
    r = _CLIENT.get(f"http://127.0.0.1:{port}{path}", headers={"Connection": "close"}, timeout=timeout)
    return r.status_code, r.headers.get("content-type", ""), r.content


def parse_metrics(text):
    """Prometheus / OpenMetrics text -> {"name{labels}": value}."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, val = line.rpartition(" ")
        if not key:
            continue
        try:
            out[key.strip()] = float(val)
        except ValueError:
            continue
    return out


def metric(values, name):
    """Sum of every series of one metric name (any labels); None when absent."""
    hits = [v for k, v in values.items() if k == name or k.startswith(name + "{")]
    return sum(hits) if hits else None


class Scraper(threading.Thread):
    """GET /metrics every interval_s, /captions.vtt and /captions.srt every
    CAPTION_FETCH_EVERY_S; keeps the last scrape and counts failures."""

    def __init__(self, port, interval_s, feeder):
        super().__init__(name="scraper", daemon=True)
        self.port, self.interval_s, self.feeder = port, interval_s, feeder
        self.lock = threading.Lock()
        self.paused = threading.Event()
        self.busy = threading.Lock()   # held while a periodic request is under way
        self.stop_ev = threading.Event()
        self.last = None           # {"t_wall": monotonic, "audio_s":, "values": {...}}
        self.st = {"metrics_ok": 0, "metrics_failed": 0, "metrics_failed_after_eof": 0,
                   "metrics_errors": [],
                   "vtt_ok": 0, "vtt_bad": 0, "srt_ok": 0, "srt_bad": 0,
                   "caption_failed_after_eof": 0, "caption_errors": [],
                   "vtt_last_bytes": None, "vtt_last_cues": None}
        self.gauges = {"sse_clients": None, "http_connections": None}

    def _err(self, key, msg):
        if len(self.st[key]) < 5:
            self.st[key].append(msg)

    def scrape(self):
        """One /metrics scrape (also used by the quiet phases). Returns values or None."""
        try:
            status, _, body = http_get(self.port, "/metrics")
        except HttpError as e:
            return None, f"{e.__class__.__name__}: {e}"
        if status != 200:
            return None, f"HTTP {status}"
        return parse_metrics(body.decode("utf-8", errors="replace")), None

    def _captions(self):
        for path, key in (("/captions.vtt", "vtt"), ("/captions.srt", "srt")):
            try:
                status, ctype, body = http_get(self.port, path, timeout=10.0)
            except HttpError as e:
                with self.lock:
                    if self.feeder.t_end is not None:
                        self.st["caption_failed_after_eof"] += 1
                    else:
                        self.st[key + "_bad"] += 1
                        self._err("caption_errors", f"{path}: {e.__class__.__name__}: {e}")
                continue
            text = body.decode("utf-8", errors="replace")
            if key == "vtt":
                ok = status == 200 and text.lstrip("\ufeff").startswith("WEBVTT")
            else:  # SRT: empty so far, or a cue number first
                first = text.lstrip("\ufeff").split("\n", 1)[0].strip()
                ok = status == 200 and (first == "" or first.isdigit())
            with self.lock:
                self.st[key + ("_ok" if ok else "_bad")] += 1
                if not ok:
                    self._err("caption_errors", f"{path}: HTTP {status} {ctype!r} {text[:40]!r}")
                if key == "vtt" and status == 200:
                    self.st["vtt_last_bytes"] = len(body)
                    self.st["vtt_last_cues"] = text.count("-->")

    def run(self):
        t_next = time.monotonic()
        t_cap = time.monotonic() + 5.0
        while not self.stop_ev.is_set():
            with self.busy:
                if not self.paused.is_set():
                    now = time.monotonic()
                    if now >= t_next:
                        t_next = now + self.interval_s
                        self._metrics()
                    if now >= t_cap:
                        t_cap = now + CAPTION_FETCH_EVERY_S
                        self._captions()
            if self.paused.is_set():
                self.stop_ev.wait(0.1)
            else:
                self.stop_ev.wait(max(0.0, min(t_next, t_cap) - time.monotonic()))

    def _metrics(self):
        vals, err = self.scrape()
        with self.lock:
            if vals is not None:
                self.st["metrics_ok"] += 1
                self.last = {"t_wall": time.monotonic(), "audio_s": round(self.feeder.fed_s, 2),
                             "values": vals}
                self.gauges = {"sse_clients": metric(vals, "sarcasmd_sse_clients"),
                               "http_connections": metric(vals, "sarcasmd_http_connections")}
            elif self.feeder.t_end is not None:
                self.st["metrics_failed_after_eof"] += 1
            else:
                self.st["metrics_failed"] += 1
                self._err("metrics_errors", err)

    def pause(self):
        self.paused.set()
        with self.busy:  # a request under way ends first; later iterations see `paused`
            pass

    def resume(self):
        self.paused.clear()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=15)



class Prober(threading.Thread):
    """/healthz and /metrics every interval, the caption files every 30 s. A failure
    within 20 s after a SIGHUP is counted apart: a reload restarts the listener."""

    def __init__(self, port, interval_s, faults):
        super().__init__(name="prober", daemon=True)
        self.port, self.interval_s, self.faults = port, interval_s, faults
        self.stop_ev = threading.Event()
        self.paused = threading.Event()
        self.st = {"healthz_ok": 0, "metrics_ok": 0, "captions_ok": 0, "failed_at_reload": 0,
                   "failed": 0, "failures": []}
        self.last = None

    def _get(self, path, key):
        try:
            status, _, body = http_get(self.port, path, timeout=10)
        except HttpError as e:
            status, body = f"{type(e).__name__}", b""
        if status == 200:
            self.st[key] += 1
            return body
        if time.monotonic() - self.faults.last_hup < 20:
            self.st["failed_at_reload"] += 1
        else:
            self.st["failed"] += 1
            if len(self.st["failures"]) < 10:
                self.st["failures"].append(f"{time.strftime('%H:%M:%S')} {path}: {status}")
        return None

    def run(self):
        next_cap = time.monotonic() + 30
        while not self.stop_ev.is_set():
            if not self.paused.is_set():
                self._get("/healthz", "healthz_ok")
                body = self._get("/metrics", "metrics_ok")
                if body is not None:
                    self.last = parse_metrics(body.decode("utf-8", errors="replace"))
                if time.monotonic() >= next_cap:
                    next_cap += 30
                    for path in ("/captions.vtt", "/captions.srt"):
                        self._get(path, "captions_ok")
            self.stop_ev.wait(self.interval_s)

    def scrape(self):
        try:
            status, _, body = http_get(self.port, "/metrics", timeout=10)
        except HttpError:
            return None
        return parse_metrics(body.decode("utf-8", errors="replace")) if status == 200 else None

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)


