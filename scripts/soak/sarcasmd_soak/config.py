"""The daemon configs the soaks write (TOML, with tomli-w): the --outputs config (the
user's --config, if any, with the output sections set over it) and the fault soak's
service config."""
import os

import tomli_w

try:
    import tomllib  # Python 3.11+
except ImportError:  # pragma: no cover - older Pythons get tomli (pyproject.toml)
    import tomli as tomllib


def outputs_config(a, http_port, mqtt_port):
    """The config for --outputs: --config (if any) with the output sections set. Returns
    (text, notes, cfg): [http] on loopback without a token, [mqtt] against our broker,
    [captions] into the work dir, output.partials and asr.interim_every_ms."""
    notes = []
    base = {}
    if a.config:
        with open(a.config, "rb") as f:
            base = tomllib.load(f)
    http = dict(base.get("http") or {})
    for k in ("token", "token_file"):
        if http.pop(k, None) is not None:
            notes.append(f"http.{k} of --config dropped (the soak's clients send no token)")
    http.update(enabled=True, bind=f"127.0.0.1:{http_port}", metrics=True)
    mqtt = {k: v for k, v in (base.get("mqtt") or {}).items()
            if k not in ("host", "port", "device_id", "client_id", "username", "password",
                         "password_file", "tls")}
    mqtt.update(enabled=True, host="127.0.0.1", port=mqtt_port, device_id="soak")
    captions = dict(base.get("captions") or {})
    captions.update(vtt=os.path.join(a.work, "live.vtt"), srt=os.path.join(a.work, "live.srt"))
    output = dict(base.get("output") or {})
    output["partials"] = True
    cfg = dict(base)
    cfg.update(output=output, captions=captions, http=http, mqtt=mqtt)
    if a.interim_ms > 0:
        asr = dict(base.get("asr") or {})
        asr["interim_every_ms"] = a.interim_ms
        cfg["asr"] = asr
    head = ("# Written by scripts/soak/run --outputs" +
            (f" from {a.config}" if a.config else "") + "; regenerated every run.\n")
    return head + tomli_w.dumps(cfg), notes, cfg


def faults_config(work, ev_path, http_port, mqtt_port):
    """The fault soak's service config: live stdin, events with partials, captions, HTTP
    on loopback (default limits), MQTT against the soak's restartable broker."""
    cfg = {
        "source": {"kind": "stdin", "sample_rate_hz": 16000, "live": True},
        "output": {"events": ev_path, "partials": True},
        "asr": {"interim_every_ms": 1000},
        "captions": {"vtt": f"{work}/live.vtt", "srt": f"{work}/live.srt"},
        "http": {"enabled": True, "bind": f"127.0.0.1:{http_port}"},
        "mqtt": {"enabled": True, "host": "127.0.0.1", "port": mqtt_port, "device_id": "soakf",
                 "keep_alive_s": 5, "reconnect_min_ms": 200, "reconnect_max_ms": 5000,
                 "stats_interval_s": 30},
    }
    return "# scripts/soak/run-faults; regenerated every run\n" + tomli_w.dumps(cfg)
