"""The daemon process and what is read from it: /proc sampling (RSS, HWM, fds, threads,
CPU), stopping a process, loopback ports, and the daemon's log and events file after
the run (WARN/ERROR lines, panics, the MQTT shutdown line, utterance events)."""
import json
import os
import re
import socket
import subprocess
import time

LOG_LEVEL_RE = re.compile(r"^\[\S+\s+(WARN|ERROR)\b")
PANIC_RE = re.compile(r"^thread '.*' .*panicked at ")
MQTT_SUMMARY_RE = re.compile(r"mqtt: (\d+) events published")  # the daemon's shutdown line

def proc_sample(pid, clk):
    """VmRSS/VmHWM (kB), threads, fds, CPU s of pid; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/status") as f:
            st = {}
            for line in f:
                k, _, v = line.partition(":")
                st[k] = v.strip()
        if "VmRSS" not in st:  # zombie: exited, not yet reaped
            return None
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
        fields = s[s.rindex(")") + 2:].split()  # fields from 3 (state) on
        utime, stime = int(fields[11]), int(fields[12])  # fields 14 and 15
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return {
            "rss_kb": int(st["VmRSS"].split()[0]),
            "hwm_kb": int(st["VmHWM"].split()[0]),
            "threads": int(st["Threads"]),
            "fds": fds,
            "cpu_s": (utime + stime) / clk,
        }
    except (FileNotFoundError, ProcessLookupError, ValueError, KeyError, IndexError):
        return None

def stop_process(proc, grace_s=5):
    """SIGTERM, then SIGKILL after `grace_s`; waits for the exit."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()



def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
    finally:
        s.close()


def wait_port(port, timeout_s, proc=None):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return True
        except OSError:
            time.sleep(0.1)
    return False


def mqtt_log_line(line):
    """The daemon's MQTT shutdown summary ("mqtt: N events published (acknowledged), F
    failed ..., R reconnect attempts, D dropped ..."; older builds: "N events published,
    A acknowledged, D dropped") -> numbers found, and the line itself."""
    m = MQTT_SUMMARY_RE.search(line)
    out = {"published": int(m.group(1))}
    acked = re.search(r"(\d+) acknowledged", line)
    if acked:
        out["acked"] = int(acked.group(1))
    elif "published (acknowledged)" in line:
        out["acked"] = out["published"]
    for key, pat in (("failed", r"(\d+) failed"), ("reconnect_attempts", r"(\d+) reconnect attempts"),
                     ("dropped", r"(\d+) dropped")):
        mm = re.search(pat, line)
        if mm:
            out[key] = int(mm.group(1))
    out["line"] = line[line.index("mqtt:"):].rstrip()[:300]
    return out



def read_events(ev_path):
    """events.jsonl -> (counts by type, the set of utterance ids)."""
    events = {"lines": 0, "utterance": 0, "other_types": {}, "bad_lines": 0}
    utt_ids = set()
    if os.path.exists(ev_path):
        with open(ev_path, errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue
                events["lines"] += 1
                try:
                    j = json.loads(line)
                    typ = j.get("type")
                except (ValueError, AttributeError):
                    events["bad_lines"] += 1
                    continue
                if typ == "utterance":
                    events["utterance"] += 1
                    if "id" in j:
                        utt_ids.add(j["id"])
                else:
                    events["other_types"][str(typ)] = events["other_types"].get(str(typ), 0) + 1
    return events, utt_ids


def scan_log(log_path):
    """The daemon's log -> (WARN/ERROR/panic counts with the first lines, the MQTT
    shutdown summary or None)."""
    log_counts = {"path": log_path, "lines": 0, "WARN": 0, "ERROR": 0, "first_warn_error": [],
                  "panics": 0, "first_panic": []}
    mqtt_log = None
    with open(log_path, errors="replace") as f:
        after_panic = 0
        for line in f:
            log_counts["lines"] += 1
            if after_panic:  # the panic message is on the line after "panicked at"
                log_counts["first_panic"].append(line.rstrip()[:300])
                after_panic = 0
            if PANIC_RE.match(line):
                log_counts["panics"] += 1
                if log_counts["panics"] == 1:
                    log_counts["first_panic"].append(line.rstrip()[:300])
                    after_panic = 1
            if MQTT_SUMMARY_RE.search(line):
                mqtt_log = mqtt_log_line(line)
            mm = LOG_LEVEL_RE.match(line)
            if mm:
                log_counts[mm.group(1)] += 1
                if len(log_counts["first_warn_error"]) < 5:
                    log_counts["first_warn_error"].append(line.rstrip()[:300])
    return log_counts, mqtt_log
