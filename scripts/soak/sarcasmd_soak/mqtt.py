"""MQTT: the soaks' own mosquitto broker (a process on a loopback port; the fault soak's
is persistent, restartable and stallable) and the subscribers, with paho-mqtt: one
counting every message per topic for --outputs, one with a persistent session that
keeps every event payload for the fault soak."""
import json
import os
import signal
import subprocess
import threading
import time

import paho.mqtt.client as paho

from .daemon import free_port, stop_process, wait_port


class Broker:
    """mosquitto on a loopback port (a free one unless given), anonymous. Plain (--outputs):
    no persistence. persistent=True (fault soak): the broker keeps queued messages across
    a restart for the subscriber's session; it can be restarted and stalled."""

    def __init__(self, work, port=None, persistent=False):
        self.port = port or free_port()
        self.work = work
        self.conf = os.path.join(work, "mosquitto.conf")
        self.log_path = os.path.join(work, "mosquitto.log")
        with open(self.conf, "w") as f:
            if persistent:
                f.write(f"# scripts/soak/run-faults\nlistener {self.port} 127.0.0.1\nallow_anonymous true\n"
                        f"persistence true\npersistence_location {work}/\nautosave_interval 5\nlog_dest stderr\n"
                        "log_type error\nlog_type warning\nlog_type notice\n")
            else:
                f.write(f"# scripts/soak/run --outputs\nlistener {self.port} 127.0.0.1\n"
                        "allow_anonymous true\npersistence false\nlog_dest stderr\n"
                        "log_type error\nlog_type warning\nlog_type notice\nlog_type information\n")
        self.logf = open(self.log_path, "ab" if persistent else "wb")
        self.proc = None
        self.restarts = 0
        self.stalls = 0
        try:
            self.start()
        except RuntimeError:
            self.stop()
            raise

    def start(self):
        self.proc = subprocess.Popen(["mosquitto", "-c", self.conf], stdin=subprocess.DEVNULL,
                                     stdout=self.logf, stderr=subprocess.STDOUT)
        if not wait_port(self.port, 10.0, self.proc):
            raise RuntimeError(f"mosquitto did not listen on 127.0.0.1:{self.port}; see {self.log_path}")

    def _halt(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a stalled broker cannot handle SIGTERM
            stop_process(self.proc)

    def stop(self):
        self._halt()
        if not self.logf.closed:
            self.logf.close()

    def restart(self, down_s, stop_ev):
        self._halt()
        stop_ev.wait(down_s)
        self.start()
        self.restarts += 1

    def stall(self, for_s, stop_ev):
        os.kill(self.proc.pid, signal.SIGSTOP)
        try:
            stop_ev.wait(for_s)
        finally:
            os.kill(self.proc.pid, signal.SIGCONT)
        self.stalls += 1


def _client(client_id, clean_session):
    return paho.Client(paho.CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean_session,
                       protocol=paho.MQTTv311)


class MqttSub:
    """--outputs: subscribed to '#' at QoS 1 (clean session, re-subscribed on every
    connect), counting messages per topic; event ids, status payloads in order and the
    stats messages by type are kept."""

    PROBE = "soak/probe"

    def __init__(self, port, work):
        self.port = port
        self.err_path = os.path.join(work, "mqtt_sub.log")
        self.errf = open(self.err_path, "w")
        self.lock = threading.Lock()
        self.topics = {}
        self.event_ids = {}       # id -> copies received
        self.event_bad = 0
        self.status = []          # status payloads in order
        self.stats_types = {}     # type of each stats message -> count
        self.final_stats = None
        self.probes = 0
        self.lines = 0
        self.subscribed = threading.Event()
        self.exit_code = None     # 0: disconnected by us; else paho's last disconnect reason
        self.c = _client(f"soak-sub-{os.getpid()}", True)
        self.c.on_connect = self._on_connect
        self.c.on_subscribe = self._on_subscribe
        self.c.on_message = self._on_message
        self.c.on_disconnect = self._on_disconnect

    def _note(self, msg):
        self.errf.write(f"{time.strftime('%H:%M:%S')} {msg}\n")
        self.errf.flush()

    def _on_connect(self, client, userdata, flags, reason_code, properties):
        self._note(f"connected: {reason_code}")
        client.subscribe("#", qos=1)

    def _on_subscribe(self, client, userdata, mid, reason_codes, properties):
        self.subscribed.set()

    def _on_disconnect(self, client, userdata, flags, reason_code, properties):
        self._note(f"disconnected: {reason_code}")
        self.exit_code = reason_code.value if reason_code.is_failure else 0

    def _on_message(self, client, userdata, msg):
        topic = msg.topic
        payload = msg.payload.decode("utf-8", errors="replace")
        with self.lock:
            self.lines += 1
            if topic == self.PROBE:
                self.probes += 1
                return
            self.topics[topic] = self.topics.get(topic, 0) + 1
            leaf = topic.rsplit("/", 1)[-1]
            if leaf == "event":
                try:
                    i = json.loads(payload)["id"]
                    self.event_ids[i] = self.event_ids.get(i, 0) + 1
                except (ValueError, KeyError, TypeError):
                    self.event_bad += 1
            elif leaf == "status":
                self.status.append(payload.strip())
            elif leaf == "stats":
                try:
                    j = json.loads(payload)
                    t = str(j.get("type"))
                    if t == "final_stats":
                        self.final_stats = j
                except (ValueError, AttributeError):
                    t = "unparsable"
                self.stats_types[t] = self.stats_types.get(t, 0) + 1

    def start(self):
        self.c.connect("127.0.0.1", self.port, keepalive=60)
        self.c.loop_start()

    def wait_subscribed(self, timeout_s=10.0):
        """Publish probes (QoS 1) until one comes back: the subscription is then in place."""
        deadline = time.monotonic() + timeout_s
        if not self.subscribed.wait(timeout_s):
            return False
        while time.monotonic() < deadline:
            self.c.publish(self.PROBE, "probe", qos=1)
            t = time.monotonic() + 1.0
            while time.monotonic() < t:
                if self.probes:
                    return True
                time.sleep(0.05)
        return False

    def stop(self, wait_for_offline_s=5.0):
        """After the daemon has exited: wait for its `offline` status, then stop."""
        deadline = time.monotonic() + wait_for_offline_s
        while time.monotonic() < deadline:
            with self.lock:
                if self.status and self.status[-1] == "offline":
                    break
            time.sleep(0.1)
        time.sleep(0.5)
        self.c.disconnect()
        self.c.loop_stop()
        if self.exit_code is None:
            self.exit_code = 0
        if not self.errf.closed:
            self.errf.close()

    def report(self):
        with self.lock:
            kinds = {}
            for t, n in self.topics.items():
                if t.startswith("homeassistant/") or t.endswith("/config"):
                    k = "discovery"
                else:
                    k = t.rsplit("/", 1)[-1]
                kinds[k] = kinds.get(k, 0) + n
            return {
                "messages_total": sum(self.topics.values()),
                "by_kind": kinds,
                "topics": dict(self.topics),
                "event_messages": sum(self.event_ids.values()) + self.event_bad,
                "event_ids_distinct": len(self.event_ids),
                "event_duplicates": sum(n - 1 for n in self.event_ids.values()),
                "event_unparsable": self.event_bad,
                "status_sequence": self.status[:20],
                "stats_by_type": dict(self.stats_types),
                "final_stats_events": (self.final_stats or {}).get("events"),
                "subscriber_exit": self.exit_code,
                "subscriber_stderr": self.err_path,
            }


class SessionSub:
    """Fault soak: a persistent session (client id soak-faults-sub, clean_session false,
    QoS 1) on the event topic, reconnecting 0.5 s after the broker goes away (restart)
    so the broker hands over what it queued meanwhile. Keeps every payload received."""

    TOPIC = "sarcasmd/soakf/event"

    def __init__(self, port, work):
        self.port = port
        self.err = open(os.path.join(work, "mqtt_sub.log"), "a")
        self.lock = threading.Lock()
        self.events = set()
        self.messages = 0
        self.c = _client("soak-faults-sub", False)
        self.c.reconnect_delay_set(min_delay=0.5, max_delay=0.5)
        self.c.on_connect = lambda c, u, f, rc, p: (self._note(f"connected: {rc}"), c.subscribe(self.TOPIC, qos=1))
        self.c.on_disconnect = lambda c, u, f, rc, p: self._note(f"disconnected: {rc}")
        self.c.on_message = self._on_message

    def _note(self, msg):
        self.err.write(f"{time.strftime('%H:%M:%S')} {msg}\n")
        self.err.flush()

    def _on_message(self, client, userdata, msg):
        with self.lock:
            self.messages += 1
            self.events.add(msg.payload.decode("utf-8", errors="replace"))

    def start(self):
        self.c.connect_async("127.0.0.1", self.port, keepalive=60)
        self.c.loop_start()

    def stop(self):
        self.c.disconnect()
        self.c.loop_stop()
        self.err.close()
