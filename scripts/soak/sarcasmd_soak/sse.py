"""The SSE clients on the daemon's /events (httpx + httpx-sse): one connection that can
be left from outside, gracefully or with a TCP reset; the --outputs fleet (1-4 clients
coming and going, a quarter slow readers) and the fault soak's churn (100 clients
cycling), each counting what it received."""
import json
import random
import socket
import struct
import threading
import time

import httpx
import httpx_sse

from .common import SEED

OUT_SEED = SEED + 101           # the SSE clients' choices (kinds, lifetimes, counts)
SSE_CLIENTS = (1, 4)            # clients kept open at once (target redrawn now and then)
SSE_LIFE_S = (5.0, 60.0)        # wall seconds each client stays
SSE_SLOW_READ_S = (2.0, 6.0)    # a slow reader takes one event this often, with a 4 KiB SO_RCVBUF
SLOW_RCVBUF = 4096


class _CountComments:
    """The response as httpx-sse reads it (headers, iter_text), counting the comment
    lines (the daemon's keep-alives, ":keepalive") that the SSE decoder skips."""

    def __init__(self, response):
        self.response = response
        self.headers = response.headers
        self.comments = 0

    def iter_text(self):
        prev = "\n"
        for text in self.response.iter_text():
            self.comments += (prev + text).count("\n:")  # a line that starts with ':'
            prev = text[-1:] or prev
            yield text


class SseStream:
    """GET /events on 127.0.0.1:port with httpx (no proxy; connect timeout 5 s, no read
    timeout: the stream is left from outside with leave()). rcvbuf sets SO_RCVBUF before
    connecting (slow readers)."""

    def __init__(self, port, rcvbuf=None):
        opts = [(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)] if rcvbuf else None
        # verify=False: plain HTTP on loopback only, and a CA bundle loaded per client costs
        # ~27 ms of CPU, which the fault soak's 70,000 sessions an hour would add to the load.
        self.client = httpx.Client(transport=httpx.HTTPTransport(socket_options=opts, retries=0, verify=False),
                                   timeout=httpx.Timeout(5.0, read=None), trust_env=False)
        self.url = f"http://127.0.0.1:{port}/events"
        self.response = None
        self.sock = None
        self.counter = None
        self.left = threading.Event()
        self.abrupt = False

    def open(self):
        """Connects and sends the request; returns the HTTP status. Raises
        httpx.TransportError when it cannot connect."""
        req = self.client.build_request("GET", self.url, headers={"Accept": "text/event-stream",
                                                                  "Cache-Control": "no-cache"})
        self.response = self.client.send(req, stream=True)
        ns = self.response.extensions.get("network_stream")
        self.sock = ns.get_extra_info("socket") if ns is not None else None
        if self.abrupt and self.left.is_set():  # left while connecting
            self._linger0()
        return self.response.status_code

    def events(self):
        """The events as they come (httpx_sse.ServerSentEvent); ends when the server ends
        the stream; raises httpx.TransportError (RemoteProtocolError once left)."""
        self.counter = _CountComments(self.response)
        for ev in httpx_sse.EventSource(self.counter).iter_sse():
            # Once an event carried an id, httpx-sse dispatches the blank line after every
            # comment (the daemon's keep-alives) as an empty "message"; the SSE spec
            # dispatches nothing without data, and neither did the soak before.
            if ev.data == "" and ev.event == "message":
                continue
            yield ev

    @property
    def comments(self):
        return self.counter.comments if self.counter else 0

    def _linger0(self):
        if self.sock is not None:
            try:  # SO_LINGER 0: close() sends a TCP reset, unread data and all
                self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            except OSError:
                pass

    def leave(self, abrupt=False):
        """From any thread: end the read under way (shutdown of the read side wakes it);
        the close that follows sends a reset when abrupt."""
        if self.left.is_set():
            return
        self.abrupt = abrupt
        self.left.set()
        if abrupt:
            self._linger0()
        if self.sock is not None:
            try:
                self.sock.shutdown(socket.SHUT_RD)
            except OSError:
                pass

    def close(self):
        try:
            if self.response is not None:
                self.response.close()
        except httpx.HTTPError:
            pass
        finally:
            self.client.close()


def _watch(stream, why_leave, poll_s=0.1):
    """A thread that polls why_leave() and leaves the stream once it names a reason
    (returns (reason, abrupt)); stops when the stream was left otherwise."""
    out = {"reason": None}

    def run():
        while not stream.left.is_set():
            r = why_leave()
            if r:
                out["reason"] = r[0]
                stream.leave(abrupt=r[1])
                return
            time.sleep(poll_s)

    t = threading.Thread(target=run, daemon=True, name="sse-watch")
    t.start()
    return out, t


class SseClient(threading.Thread):
    """One /events connection: read for `life_s` of wall time, then leave (gracefully,
    or with a TCP reset when abrupt). A slow one has a 4 KiB receive buffer and takes
    one event every few seconds. Reports to the fleet when it ends."""

    def __init__(self, fleet, n, kind, life_s, abrupt, rng_seed):
        super().__init__(name=f"sse-{n}", daemon=True)
        self.fleet, self.kind, self.life_s, self.abrupt = fleet, kind, life_s, abrupt
        self.rng = random.Random(rng_seed)
        self.stop_ev = threading.Event()
        self.connected = False

    def run(self):
        f = self.fleet
        res = {"kind": self.kind, "events": {}, "bytes": 0, "comments": 0, "ids": set(),
               "states": {}, "status": None, "reason": None, "wall_s": 0.0}
        st = SseStream(f.port, SLOW_RCVBUF if self.kind == "slow" else None)
        t0 = time.monotonic()
        end = t0 + self.life_s
        watch = None
        try:
            try:
                status = st.open()
            except httpx.TransportError as e:
                res["reason"] = f"connect_failed: {e.__class__.__name__}"
                return
            self.connected = True
            res["status"] = status
            if status != 200:
                res["reason"] = f"http_{status}"
                return

            def why_leave():
                if self.stop_ev.is_set():
                    return "paused_or_stopped", False
                if time.monotonic() >= end:
                    return ("abrupt", True) if self.abrupt else ("graceful", False)
                return None

            watch, _ = _watch(st, why_leave)
            try:
                for ev in st.events():
                    if self.kind == "slow":
                        st.left.wait(self.rng.uniform(*SSE_SLOW_READ_S))
                    typ = ev.event or "message"
                    res["events"][typ] = res["events"].get(typ, 0) + 1
                    if typ in ("utterance", "status"):
                        try:
                            j = json.loads(ev.data)
                        except ValueError:
                            j = {}
                        if typ == "utterance" and isinstance(j, dict) and "id" in j:
                            res["ids"].add(j["id"])
                        elif typ == "status" and isinstance(j, dict):
                            s = str(j.get("state"))
                            res["states"][s] = res["states"].get(s, 0) + 1
                    if st.left.is_set():
                        break
                else:
                    res["reason"] = "server_closed"
            except (httpx.RemoteProtocolError, httpx.ReadError) as e:
                if not st.left.is_set():
                    res["reason"] = ("server_closed" if isinstance(e, httpx.RemoteProtocolError)
                                     else f"error: {e.__class__.__name__}")
            except (httpx.HTTPError, httpx_sse.SSEError) as e:
                if not st.left.is_set():
                    res["reason"] = f"error: {e.__class__.__name__}"
            if res["reason"] is None:
                st.leave()  # stops the watcher
                res["reason"] = watch["reason"] or "server_closed"
            res["comments"] = st.comments
            res["bytes"] = st.response.num_bytes_downloaded  # body bytes (chunked framing removed)
        finally:
            st.left.set()
            st.close()
            res["wall_s"] = time.monotonic() - t0
            f.finished(self, res)

    def stop(self):
        self.stop_ev.set()


class SseFleet(threading.Thread):
    """Keeps SSE_CLIENTS clients on /events, each leaving after a random life; seeded."""

    def __init__(self, port, feeder):
        super().__init__(name="sse-fleet", daemon=True)
        self.port, self.feeder = port, feeder
        self.rng = random.Random(OUT_SEED)
        self.lock = threading.Lock()
        self.live = set()
        self.paused = threading.Event()
        self.spawning = threading.Lock()
        self.stop_ev = threading.Event()
        self.n = 0
        self.st = {"started": 0, "connected": 0, "connect_failed": 0, "connect_failed_after_eof": 0,
                   "non_200": {}, "closed": {}, "by_kind": {}, "events": {}, "bytes": 0,
                   "keepalive_comments": 0, "status_states": {}, "wall_s_connected": 0.0,
                   "max_open": 0, "ended_by_server_or_error_before_eof": 0}
        self.ids = set()

    def open_count(self):
        with self.lock:
            return sum(1 for c in self.live if c.connected)

    def finished(self, c, res):
        with self.lock:
            self.live.discard(c)
            st = self.st
            r = res["reason"] or "unknown"
            if r.startswith("connect_failed"):
                if self.feeder.t_end is not None:
                    st["connect_failed_after_eof"] += 1
                else:
                    st["connect_failed"] += 1
                return
            if res["status"] == 200:
                st["connected"] += 1
            elif res["status"] is not None:
                st["non_200"][str(res["status"])] = st["non_200"].get(str(res["status"]), 0) + 1
            st["closed"][r] = st["closed"].get(r, 0) + 1
            if (r.startswith("error") or r == "server_closed") and self.feeder.t_end is None:
                st["ended_by_server_or_error_before_eof"] += 1
            st["by_kind"][res["kind"]] = st["by_kind"].get(res["kind"], 0) + 1
            for k, v in res["events"].items():
                st["events"][k] = st["events"].get(k, 0) + v
            for k, v in res["states"].items():
                st["status_states"][k] = st["status_states"].get(k, 0) + v
            st["bytes"] += res["bytes"]
            st["keepalive_comments"] += res["comments"]
            st["wall_s_connected"] += res["wall_s"]
            self.ids |= res["ids"]

    def run(self):
        rng = self.rng
        target = rng.randint(*SSE_CLIENTS)
        retarget = time.monotonic() + rng.uniform(5, 20)
        while not self.stop_ev.is_set():
            spawned = False
            with self.spawning:
                if not self.paused.is_set():
                    now = time.monotonic()
                    if now >= retarget:
                        target = rng.randint(*SSE_CLIENTS)
                        retarget = now + rng.uniform(5, 20)
                    with self.lock:
                        n_live = len(self.live)
                    if n_live < target:
                        kind = rng.choices(["normal", "abrupt", "slow"], weights=[2, 1, 1])[0]
                        abrupt = kind == "abrupt" or (kind == "slow" and rng.random() < 0.5)
                        c = SseClient(self, self.n, kind, rng.uniform(*SSE_LIFE_S), abrupt,
                                      rng.getrandbits(32))
                        self.n += 1
                        with self.lock:
                            self.live.add(c)
                            self.st["started"] += 1
                            self.st["max_open"] = max(self.st["max_open"], len(self.live))
                        c.start()
                        spawned = True
            self.stop_ev.wait(rng.uniform(0.2, 3.0) if spawned else 0.2)

    def _close_all(self, timeout_s=5.0):
        with self.lock:
            live = list(self.live)
        for c in live:
            c.stop()
        for c in live:
            c.join(timeout_s)

    def pause(self):
        self.paused.set()
        with self.spawning:  # a spawn under way registers first
            pass
        self._close_all()

    def resume(self):
        self.paused.clear()

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=5)
        self._close_all()

    def report(self):
        with self.lock:
            r = dict(self.st)
            r["closed_total"] = sum(self.st["closed"].values())
            r["still_open"] = len(self.live)
            r["utterance_ids_distinct"] = len(self.ids)
            r["wall_s_connected"] = round(r["wall_s_connected"], 1)
            return r, set(self.ids)


class SseChurn:
    """`clients` (100), each cycling: connect to /events, read 5-60 s (a quarter slowly:
    one event every 1-4 s with a 4 KiB receive buffer; a quarter leaving with a TCP
    reset), leave, come back after 0.5-5 s; one refused with 503 comes back after 1-5 s."""

    def __init__(self, port, seed, clients=100):
        self.port, self.seed = port, seed
        self.stop_ev = threading.Event()
        self.paused = threading.Event()
        self.lock = threading.Lock()
        self.open = 0
        self.st = {"sessions": 0, "served": 0, "refused_503": 0, "other_status": {}, "connect_errors": 0,
                   "ended_by_server": 0, "events": {}, "slow": 0, "abrupt": 0}
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True, name=f"sse-{i}")
                        for i in range(clients)]

    def start(self):
        for t in self.threads:
            t.start()

    def _count(self, k, n=1):
        with self.lock:
            self.st[k] += n

    def _client(self, i):
        rng = random.Random(self.seed + i)
        while not self.stop_ev.is_set():
            if self.paused.is_set():
                self.stop_ev.wait(0.2)
                continue
            kind = rng.choices(["normal", "slow", "abrupt"], weights=[2, 1, 1])[0]
            life = rng.uniform(5, 60)
            self._count("sessions")
            st = SseStream(self.port, SLOW_RCVBUF if kind == "slow" else None)
            try:
                status = st.open()
            except httpx.TransportError:
                self._count("connect_errors")
                st.close()
                self.stop_ev.wait(rng.uniform(0.5, 5))
                continue
            if kind == "slow":
                # As before: a slow reader waits before it reads anything, the status line
                # too, so a refused one holds its connection 1-4 s before it closes it.
                self.stop_ev.wait(rng.uniform(1, 4))
            t_end = time.monotonic() + life
            served = status == 200
            try:
                if served:
                    self._count("served")
                    with self.lock:
                        self.open += 1
                    why = lambda: ((("left", kind == "abrupt")  # noqa: E731
                                    if time.monotonic() >= t_end or self.stop_ev.is_set() or self.paused.is_set()
                                    else None))
                    _watch(st, why, poll_s=0.2)
                    try:
                        for ev in st.events():
                            if kind == "slow":
                                st.left.wait(rng.uniform(1, 4))
                            with self.lock:
                                self.st["events"][ev.event] = self.st["events"].get(ev.event, 0) + 1
                            if st.left.is_set():
                                break
                        else:
                            self._count("ended_by_server")
                    except (httpx.HTTPError, httpx_sse.SSEError):
                        if not st.left.is_set():
                            self._count("ended_by_server")
                elif status == 503:
                    self._count("refused_503")
                else:
                    with self.lock:
                        k = str(status)
                        self.st["other_status"][k] = self.st["other_status"].get(k, 0) + 1
            finally:
                if served:
                    with self.lock:
                        self.open -= 1
                if kind == "abrupt":
                    self._count("abrupt")
                    st.leave(abrupt=True)
                elif kind == "slow":
                    self._count("slow")
                st.left.set()
                st.close()
            self.stop_ev.wait(rng.uniform(1, 5) if status == 503 else rng.uniform(0.5, 5))

    def pause(self):
        self.paused.set()
        t0 = time.monotonic()
        while self.open > 0 and time.monotonic() - t0 < 70:
            time.sleep(0.2)

    def resume(self):
        self.paused.clear()

    def stop(self):
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=70)
