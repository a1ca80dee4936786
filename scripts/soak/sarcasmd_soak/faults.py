"""The fault soak's schedule, from the start of feeding: SIGHUP reloads, the events
directory removed and recreated, the broker restarted and stalled."""
import os
import shutil
import signal
import threading
import time


class Faults(threading.Thread):
    """The schedule of faults, from the start of feeding."""

    def __init__(self, a, proc, events_dir, broker, t0):
        super().__init__(name="faults", daemon=True)
        self.a, self.proc, self.events_dir, self.broker, self.t0 = a, proc, events_dir, broker, t0
        self.stop_ev = threading.Event()
        self.last_hup = 0.0
        self.st = {"sighup": 0, "events_dir_removed": 0, "broker_restarts": 0, "broker_stalls": 0}
        self.log = []

    def _note(self, what):
        self.log.append(f"{time.monotonic() - self.t0:7.1f} s {what}")

    def run(self):
        a = self.a
        plan = []  # (at_s, kind)
        t = a.hup_every_s
        while t < a.duration_s / a.speed:
            plan.append((t, "hup"))
            t += a.hup_every_s
        k = a.schedule_scale
        for start, every, kind in ((120, 300, "rm"), (240, 600, "restart"), (540, 600, "stall")):
            t, every = start * k, every * k
            while t < a.duration_s / a.speed - 60:
                plan.append((t, kind))
                t += every
        plan.sort()
        for at, kind in plan:
            while not self.stop_ev.is_set() and time.monotonic() - self.t0 < at:
                self.stop_ev.wait(0.2)
            if self.stop_ev.is_set() or self.proc.poll() is not None:
                return
            if kind == "hup":
                self.last_hup = time.monotonic()
                os.kill(self.proc.pid, signal.SIGHUP)
                self.st["sighup"] += 1
            elif kind == "rm":
                self._note("events directory removed")
                shutil.rmtree(self.events_dir, ignore_errors=True)
                self.st["events_dir_removed"] += 1
                threading.Timer(15, lambda: (os.makedirs(self.events_dir, exist_ok=True),
                                             self._note("events directory back"))).start()
            elif kind == "restart":
                self._note("broker restart")
                threading.Thread(target=self.broker.restart, args=(10, self.stop_ev), daemon=True).start()
                self.st["broker_restarts"] += 1
            elif kind == "stall":
                self._note("broker stall")
                threading.Thread(target=self.broker.stall, args=(25, self.stop_ev), daemon=True).start()
                self.st["broker_stalls"] += 1

    def stop(self):
        self.stop_ev.set()
        self.join(timeout=30)
