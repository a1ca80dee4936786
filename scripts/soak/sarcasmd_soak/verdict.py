"""The verdicts and the result files: the soak's summary (memory, fds, threads, drops,
budget, exit status; with --outputs the MQTT, SSE, /metrics and captions report and its
verdicts), its printed form, and the fault soak's result. The JSON keys are those of
the results under docs/results/."""
import datetime
import json
import os
import re
import subprocess
import time

from .accounting import MQTT_STOP_RE, account, parse_streams
from .captions import caption_files
from .common import BYTES_PER_S, REPO

METRIC_KEEP_RE = re.compile(r"dropped|lagged|refused|mqtt|http_connections|sse_clients|reloads")


def lsq_slope(xs, ys):
    n = len(xs)
    if n < 2:
        return None
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx


def first_at_or_after(rows, audio_s):
    for r in rows:
        if r["audio_s"] >= audio_s - 1e-9:
            return r
    return None


def mb(kb):
    return kb / 1024.0


def summarise(a, rows, feeder, meta, stats, events, log_counts, rc, t_proc0, t_exit, load, outputs=None):
    total_audio = feeder.fed_s
    s = {"params": {
        "duration_s": a.duration_s, "speed": a.speed, "interval_s": a.interval_s,
        "warmup_s": a.warmup_s, "clips": a.clips, "config": a.config, "bin": a.bin,
        "work": a.work, "curve_step_s": a.curve_step_s, "outputs": a.outputs,
        "interim_ms": a.interim_ms if a.outputs else None},
        "input": meta, "exit_code": rc}
    feed_wall = (feeder.t_end - feeder.t_start) if feeder.t_start and feeder.t_end else None
    e2e_wall = (t_exit - feeder.t_start) if feeder.t_start else None
    drain = (t_exit - feeder.t_end) if feeder.t_end else None
    last_cpu = rows[-1]["cpu_s"] if rows else None
    s["timing"] = {
        "audio_s": round(total_audio, 3),
        "wall_s_total": round(t_exit - t_proc0, 3),
        "wall_s_feeding": round(feed_wall, 3) if feed_wall else None,
        "wall_s_first_byte_to_exit": round(e2e_wall, 3) if e2e_wall else None,
        "drain_after_eof_s": round(drain, 3) if drain is not None else None,
        "speed_target": a.speed,
        "speed_feed": round(total_audio / feed_wall, 3) if feed_wall else None,
        "speed_end_to_end": round(total_audio / e2e_wall, 3) if e2e_wall else None,
        "writer_max_late_s": round(feeder.max_late_s, 3),
        "cpu_s": round(last_cpu, 2) if last_cpu is not None else None,
        "cpu_s_per_audio_s": round(last_cpu / total_audio, 4) if last_cpu and total_audio else None,
        "loadavg_start": load[0], "loadavg_end": load[1], "cpus": os.cpu_count(),
    }
    if stats:
        s["timing"]["daemon_stats"] = {k: stats.get(k) for k in
                                       ("audio_s", "wall_s", "cpu_s", "rtf_cpu", "rtf_wall",
                                        "peak_rss_mb", "model_load_ms")}

    # Samples taken while the models were still loading (before the first byte was fed)
    # are kept in the CSV but left out of the analysis.
    all_rows = rows
    if feeder.t_start is not None:
        t_fed = feeder.t_start - t_proc0
        rows = [r for r in rows if r["t"] >= t_fed] or rows
    s["samples"] = {"total": len(all_rows), "while_feeding_or_after": len(rows)}

    # "At end" means the last sample taken before stdin was closed: after EOF the daemon
    # drains its queues and then tears its threads down (RSS, fds, threads fall), which
    # says nothing about leaks. Drain samples still count for the maxima.
    t_eof = (feeder.t_end - t_proc0) if feeder.t_end is not None else float("inf")
    live_rows = [r for r in rows if r["t"] <= t_eof] or rows
    end_row = live_rows[-1] if live_rows else None
    drain_rows = [r for r in rows if r["t"] > t_eof]
    s["samples"]["drain_after_eof"] = len(drain_rows)

    # memory
    warm = first_at_or_after(rows, a.warmup_s)
    after = [r for r in rows if warm and r["t"] >= warm["t"]]
    after_live = [r for r in after if r["t"] <= t_eof] or after
    mem = {}
    if warm and after:
        w = warm["rss_kb"]
        mx = max(r["rss_kb"] for r in after)
        end = end_row["rss_kb"]
        slope = lsq_slope([r["audio_s"] / 3600.0 for r in after_live], [mb(r["rss_kb"]) for r in after_live])
        mem = {
            "warmup_sample_audio_s": round(warm["audio_s"], 2),
            "rss_mb_at_warmup": round(mb(w), 1),
            "rss_mb_end": round(mb(end), 1),
            "end_sample_audio_s": round(end_row["audio_s"], 2),
            "rss_mb_max_after_warmup": round(mb(mx), 1),
            "rss_mb_min_after_warmup": round(mb(min(r["rss_kb"] for r in after_live)), 1),
            "rss_mb_last_sample_before_exit": round(mb(rows[-1]["rss_kb"]), 1),
            "growth_pct_max": round(100.0 * (mx - w) / w, 2),
            "growth_pct_end": round(100.0 * (end - w) / w, 2),
            "slope_mb_per_audio_hour": round(slope, 2) if slope is not None else None,
            "slope_points": len(after_live),
            "hwm_mb_end": round(mb(rows[-1]["hwm_kb"]), 1),
        }
    # curve: first sample at or after every step of audio, plus the sample at EOF
    step = a.curve_step_s
    marks = [i * step for i in range(int(total_audio // step + 1e-9) + 1)]
    curve = []
    for m in marks:
        r = first_at_or_after(live_rows, m)
        if r:
            curve.append([round(m / 60.0, 2), round(mb(r["rss_kb"]), 1), round(r["audio_s"], 1)])
    if end_row and (not curve or curve[-1][2] < end_row["audio_s"]):
        curve.append([round(end_row["audio_s"] / 60.0, 2), round(mb(end_row["rss_kb"]), 1),
                      round(end_row["audio_s"], 1)])
    mem["curve_min_mb"] = curve  # [mark (audio min), RSS MB, audio s of the sample used]
    s["memory"] = mem

    if warm and after:
        s["fds"] = {"start": rows[0]["fds"], "at_warmup": warm["fds"],
                    "min_after_warmup": min(r["fds"] for r in after_live),
                    "max_after_warmup": max(r["fds"] for r in after),  # drain included
                    "max_overall": max(r["fds"] for r in rows), "end": end_row["fds"]}
        s["threads"] = {"min": min(r["threads"] for r in live_rows), "max": max(r["threads"] for r in rows),
                        "min_after_warmup": min(r["threads"] for r in after_live),
                        "max_after_warmup": max(r["threads"] for r in after)}

    # events and drops
    s["events"] = events
    drops = {}
    judged = {}
    other = {}
    if stats:
        for k, v in (stats.get("dropped") or {}).items():
            drops[k] = v
            if not k.startswith("partials_"):
                judged[k] = v
        for k, v in stats.items():
            if k == "dropped" or not isinstance(v, (int, float)) or isinstance(v, bool):
                continue
            if re.search(r"drop|violat|lag|skip|overrun|lost|error|stale|busy|full", k):
                other[k] = v
        for k in ("utterances", "events", "too_short", "empty_transcripts", "partials"):
            if k in stats:
                other.setdefault(k, stats[k])
    s["drops"] = {"dropped": drops, "judged": judged, "judged_total": sum(judged.values()),
                  "other_counters": other}
    s["log"] = log_counts

    # verdicts
    v = {}
    if mem.get("growth_pct_max") is not None:
        v["rss_growth_lt_5pct"] = mem["growth_pct_max"] < 5.0
    else:
        v["rss_growth_lt_5pct"] = False
    if outputs is None:
        v["fd_growth_zero"] = bool(s.get("fds")) and s["fds"]["max_after_warmup"] <= s["fds"]["at_warmup"]
    else:
        # The raw fd count includes the soak's own client connections, so the fd verdict
        # compares the two baselines taken with no client connected (see Conductor).
        v["fds_back_to_baseline"] = outputs["verdicts"]["fds_back_to_baseline"]
    v["no_drops"] = bool(stats) and s["drops"]["judged_total"] == 0
    # Events later than the config's budget.event_latency_ms (the daemon counts them; 0
    # without a budget): a run that kept up but flagged late did not pass.
    s["budget_violations"] = (stats or {}).get("budget_violations")
    v["within_budget"] = bool(stats) and s["budget_violations"] == 0
    v["daemon_exit_0"] = rc == 0
    if outputs is not None:
        v["mqtt_every_event"] = outputs["verdicts"]["mqtt_every_event"]
        v["http_served"] = outputs["verdicts"]["http_served"]
        s["outputs"] = outputs
    s["verdicts"] = v
    s["pass"] = all(v.values())
    return s


def print_outputs(o, s):
    p = print
    fmt = lambda x, spec="": "n/a" if x is None else format(x, spec)
    p(f"outputs        http 127.0.0.1:{o['http_port']}, mqtt 127.0.0.1:{o['mqtt_port']} (own mosquitto), "
      f"captions, output.partials, asr.interim_every_ms {o['interim_ms'] or 'as configured'}; config {o['config']}")
    p(f"HTTP start     /healthz {o['healthz']}, / {o['overlay']} (listener up after {fmt(o['listener_up_s'], '.1f')} s)")
    e = o["sse"]
    p(f"SSE            {e['started']} clients started, {e['connected']} connected (200), {e['closed_total']} closed "
      f"{json.dumps(e['closed'])}; by kind {json.dumps(e['by_kind'])}; max open {e['max_open']}; connect failures "
      f"{e['connect_failed']} (+{e['connect_failed_after_eof']} after EOF); non-200 {json.dumps(e['non_200'])}; "
      f"{e['wall_s_connected']} s connected in all")
    p(f"SSE events     {json.dumps(e['events'])}; {e['bytes']} bytes; keep-alives {e['keepalive_comments']}; "
      f"status states {json.dumps(e['status_states'])}; {e['utterance_ids_distinct']} distinct utterance ids "
      f"({o['sse_missing_ids']} of {o['events_utterance_ids']} written never reached any SSE client)")
    mq = o["mqtt"]
    dl = o.get("mqtt_daemon_log") or {}
    p(f"MQTT           {mq['messages_total']} messages received {json.dumps(mq['by_kind'])}; event ids "
      f"{mq['event_ids_distinct']} distinct ({mq['event_duplicates']} duplicates) vs {o['events_utterance_ids']} "
      f"utterance events; status {' > '.join(mq['status_sequence'])}; final_stats events "
      f"{fmt(mq['final_stats_events'])}; daemon log: published {dl.get('published', 'n/a')}, acked "
      f"{dl.get('acked', 'n/a')}, failed {dl.get('failed', 'n/a')}, dropped {dl.get('dropped', 'n/a')}")
    ml = o["metrics_last"]
    if ml:
        p(f"metrics        last scrape at {ml['audio_s']:.0f} s audio, {fmt(ml['s_before_exit'], '.1f')} s before "
          f"exit ({o['scrapes']['metrics_ok']} scrapes ok, {o['scrapes']['metrics_failed']} failed, "
          f"{o['scrapes']['metrics_failed_after_eof']} failed after EOF):")
        for k, val in ml["values"].items():
            p(f"                 {k} {val:g}")
    else:
        p("metrics        no successful /metrics scrape")
    c = o["captions"]
    sc = o["scrapes"]
    p(f"captions       live.vtt {c.get('live.vtt', 'missing')} B ({c.get('vtt_cues')} cues, "
      f"{c.get('vtt_utterance_notes')} utterance NOTEs, header ok {c.get('vtt_header_ok')}), live.srt "
      f"{c.get('live.srt', 'missing')} B ({c.get('srt_cues')} cues)"
      + (f", rotated {c.get('live.vtt.1')}/{c.get('live.srt.1')} B" if "live.vtt.1" in c or "live.srt.1" in c else "")
      + f"; fetched /captions.vtt ok {sc['vtt_ok']} bad {sc['vtt_bad']}, /captions.srt ok {sc['srt_ok']} "
      f"bad {sc['srt_bad']}")
    fb = o["fd_baselines"]
    for k in ("warmup", "end"):
        ph = fb.get(k)
        if ph:
            p(f"fd baseline    {k}: {ph.get('fds')} fds (samples {ph.get('fds_samples')}) at {ph['audio_s']:.0f} s "
              f"audio; quiet {ph['quiet']} (sse_clients {fmt(ph.get('sse_clients'), 'g')}, http_connections "
              f"{fmt(ph.get('http_connections'), 'g')}), before EOF {ph.get('before_eof')}, took {ph.get('wall_s')} s")
        else:
            p(f"fd baseline    {k}: not taken")


def print_summary(s):
    t, m = s["timing"], s["memory"]
    p = print
    pf = lambda b: "PASS" if b else "FAIL"
    fmt = lambda x, spec="": "n/a" if x is None else format(x, spec)
    inp = s["input"]
    p("")
    p("=== sarcasmd soak summary ===")
    p(f"input          {inp.get('clips')} clips ({inp.get('clip_audio_s')} s), {inp.get('clips_placed')} placed in "
      f"{inp.get('cycles')} cycle(s): {inp.get('speech_s')} s speech + {inp.get('pause_s')} s noise pauses"
      f"{' [cached]' if inp.get('cached') else ''}")
    p(f"audio fed      {t['audio_s']:.1f} s   wall {fmt(t['wall_s_first_byte_to_exit'], '.1f')} s "
      f"(feeding {fmt(t['wall_s_feeding'], '.1f')} s, drain after EOF {fmt(t['drain_after_eof_s'], '.2f')} s, "
      f"process total {t['wall_s_total']:.1f} s)")
    p(f"speed          target {t['speed_target']:g}x, fed {fmt(t['speed_feed'], '.2f')}x, end-to-end "
      f"{fmt(t['speed_end_to_end'], '.2f')}x (writer max {t['writer_max_late_s']:.3f} s behind schedule)")
    p(f"cpu            {fmt(t['cpu_s'], '.1f')} CPU-s = {fmt(t['cpu_s_per_audio_s'], '.3f')} CPU-s per audio-s; "
      f"loadavg start {t['loadavg_start']} end {t['loadavg_end']} on {t['cpus']} CPUs")
    ds = t.get("daemon_stats")
    if ds:
        p(f"daemon stats   audio {fmt(ds['audio_s'], '.1f')} s, wall {fmt(ds['wall_s'], '.1f')} s, rtf_cpu "
          f"{fmt(ds['rtf_cpu'], '.3f')}, peak RSS {fmt(ds['peak_rss_mb'], '.1f')} MB, model load "
          f"{fmt(ds['model_load_ms'], '.0f')} ms")
    if "rss_mb_at_warmup" in m:
        p(f"RSS            at warm-up ({m['warmup_sample_audio_s']:.0f} s audio) {m['rss_mb_at_warmup']:.1f} MB, "
          f"end (at EOF) {m['rss_mb_end']:.1f} MB, max after warm-up {m['rss_mb_max_after_warmup']:.1f} MB, "
          f"HWM {m['hwm_mb_end']:.1f} MB")
        p(f"RSS growth     max {m['growth_pct_max']:+.2f} %, end {m['growth_pct_end']:+.2f} %, slope "
          f"{fmt(m['slope_mb_per_audio_hour'], '+.2f')} MB per audio hour ({m['slope_points']} points)")
    p("RSS curve      [audio min:MB] " + " ".join(f"{c[0]:g}:{c[1]:.1f}" for c in m.get("curve_min_mb", [])))
    if s.get("fds"):
        f = s["fds"]
        p(f"fds            start {f['start']}, at warm-up {f['at_warmup']}, min {f['min_after_warmup']}, "
          f"max {f['max_after_warmup']} (after warm-up), end (at EOF) {f['end']}")
        th = s["threads"]
        p(f"threads        min {th['min']}, max {th['max']} (before EOF; after warm-up {th['min_after_warmup']}..{th['max_after_warmup']})")
    e = s["events"]
    p(f"events         {e['utterance']} utterance events ({e['lines']} lines, other types {e['other_types']}, "
      f"unparsable {e['bad_lines']})")
    d = s["drops"]
    p(f"drops          {json.dumps(d['dropped'])}; judged total {d['judged_total']}")
    p(f"other counters {json.dumps(d['other_counters'])}")
    lg = s["log"]
    p(f"log            {lg['lines']} lines, WARN {lg['WARN']}, ERROR {lg['ERROR']}, panics {lg.get('panics', 0)} "
      f"({lg['path']})")
    for line in lg["first_warn_error"] + lg.get("first_panic", []):
        p(f"                 {line}")
    o = s.get("outputs")
    if o:
        print_outputs(o, s)
    v = s["verdicts"]
    p(f"verdict        RSS growth < 5 % after warm-up: {pf(v['rss_growth_lt_5pct'])} "
      f"({fmt(m.get('growth_pct_max'), '+.2f')} %)")
    if "fd_growth_zero" in v:
        p(f"verdict        fd growth == 0 after warm-up:   {pf(v['fd_growth_zero'])}")
    else:
        fb = o["fd_baselines"]
        w, e = fb.get("warmup") or {}, fb.get("end") or {}
        p(f"verdict        fds back to baseline after SSE clients leave: {pf(v['fds_back_to_baseline'])} "
          f"(end {e.get('fds')} vs warm-up {w.get('fds')}, no client connected at either)")
    p(f"verdict        drops == 0:                      {pf(v['no_drops'])} "
      f"(at {fmt(t['speed_end_to_end'], '.2f')}x achieved, target {t['speed_target']:g}x)")
    if "within_budget" in v:
        p(f"verdict        events over budget == 0:         {pf(v['within_budget'])} "
          f"({s.get('budget_violations')} over budget.event_latency_ms)")
    p(f"verdict        daemon exit status 0:            {pf(v['daemon_exit_0'])} (got {s['exit_code']})")
    if o:
        mq = o["mqtt"]
        p(f"verdict        every final event reached MQTT:  {pf(v['mqtt_every_event'])} "
          f"({mq['event_ids_distinct']} distinct event ids received vs {o['events_utterance_ids']} utterance "
          f"events written; missing {mq['missing_ids']}, extra {mq['extra_ids']})")
        p(f"verdict        HTTP served (SSE, /metrics, captions, /healthz): {pf(v['http_served'])}"
          + (f" - {'; '.join(o['http_problems'])}" if o["http_problems"] else ""))
        p(f"SSE lag        {o['sse_lagged']} events lost by lagging SSE clients "
          f"(sarcasmd_dropped_events_total{{reason=\"sse_client_lagged\"}}, last scrape; reported, not judged)")
    p(f"overall        {'PASS' if s['pass'] else 'FAIL'}")


def outputs_report(a, out, fleet, scraper, conductor, utt_ids, mqtt_log, t_exit):
    """Everything --outputs adds to summary.json, with its three verdicts."""
    o = {"config": out["config"], "http_port": out["http_port"], "mqtt_port": out["mqtt_port"],
         "interim_ms": a.interim_ms, "config_notes": out["notes"], "healthz": out.get("healthz"),
         "overlay": out.get("overlay"), "listener_up_s": out.get("listener_up_s"),
         "events_utterance_ids": len(utt_ids)}
    if fleet:
        sse, sse_ids = fleet.report()
    else:
        sse, sse_ids = {"started": 0, "connected": 0, "closed": {}, "closed_total": 0, "by_kind": {},
                        "max_open": 0, "connect_failed": 0, "connect_failed_after_eof": 0, "non_200": {},
                        "wall_s_connected": 0, "events": {}, "bytes": 0, "keepalive_comments": 0,
                        "status_states": {}, "utterance_ids_distinct": 0,
                        "ended_by_server_or_error_before_eof": 0}, set()
    o["sse"] = sse
    o["sse_missing_ids"] = len(utt_ids - sse_ids)
    mq = out["sub"].report()
    mids = set(out["sub"].event_ids)
    mq["missing_ids"] = len(utt_ids - mids)
    mq["missing_ids_first"] = sorted(utt_ids - mids)[:10]
    mq["extra_ids"] = len(mids - utt_ids)
    o["mqtt"] = mq
    o["mqtt_daemon_log"] = mqtt_log
    last = scraper.last if scraper else None
    if last:
        vals = last["values"]
        keep = {k: v for k, v in vals.items() if METRIC_KEEP_RE.search(k.split("{", 1)[0])}
        for k, v in vals.items():
            if k.split("{", 1)[0] == "sarcasmd_events_total":
                keep[k] = v
        o["metrics_last"] = {"audio_s": last["audio_s"], "s_before_exit": round(t_exit - last["t_wall"], 2),
                             "values": dict(sorted(keep.items()))}
        lag = [v for k, v in vals.items() if "sse_client_lagged" in k]
        o["sse_lagged"] = int(sum(lag)) if lag else None
    else:
        o["metrics_last"] = None
        o["sse_lagged"] = None
    sc = dict(scraper.st) if scraper else {"metrics_ok": 0, "metrics_failed": 0, "metrics_failed_after_eof": 0,
                                           "metrics_errors": [], "vtt_ok": 0, "vtt_bad": 0, "srt_ok": 0,
                                           "srt_bad": 0, "caption_failed_after_eof": 0, "caption_errors": []}
    o["scrapes"] = sc
    o["captions"] = caption_files(a.work)
    o["fd_baselines"] = dict(conductor.phases) if conductor else {}

    w, e = o["fd_baselines"].get("warmup"), o["fd_baselines"].get("end")
    fds_ok = bool(w and e and w["quiet"] and e["quiet"] and e["before_eof"]
                  and w["fds"] is not None and e["fds"] is not None and e["fds"] <= w["fds"])
    problems = []
    if out.get("healthz") != 200:
        problems.append(f"/healthz {out.get('healthz')}")
    if out.get("overlay") != 200:
        problems.append(f"/ {out.get('overlay')}")
    if sse["connected"] == 0:
        problems.append("no SSE client connected")
    if sse["connect_failed"]:
        problems.append(f"{sse['connect_failed']} SSE connects failed before EOF")
    if sse["non_200"]:
        problems.append(f"SSE non-200 {sse['non_200']}")
    if sse["ended_by_server_or_error_before_eof"]:
        problems.append(f"{sse['ended_by_server_or_error_before_eof']} SSE streams ended by the server or an "
                        f"error before EOF")
    if sc["metrics_ok"] == 0 or sc["metrics_failed"]:
        problems.append(f"/metrics ok {sc['metrics_ok']} failed {sc['metrics_failed']} {sc['metrics_errors']}")
    if sc["vtt_ok"] == 0 or sc["vtt_bad"] or sc["srt_bad"]:
        problems.append(f"captions vtt ok {sc['vtt_ok']} bad {sc['vtt_bad']}, srt bad {sc['srt_bad']} "
                        f"{sc['caption_errors']}")
    if not o["captions"].get("vtt_header_ok"):
        problems.append("live.vtt missing or without a WEBVTT header")
    o["http_problems"] = problems
    o["verdicts"] = {
        "fds_back_to_baseline": fds_ok,
        "mqtt_every_event": mq["missing_ids"] == 0 and mq["event_ids_distinct"] >= len(utt_ids),
        "http_served": not problems,
    }
    return o


def faults_result(a, log_path, tailer, sub, state, t0, rc, rows, quiet, faults, churn, prober):
    """The fault soak's result (summary.json, --result): every event accounted for in the
    events file and on MQTT, RSS, fds, HTTP, panics, exit status, with its verdicts."""
    text = open(log_path, errors="replace").read()
    streams = parse_streams(text)
    file_acc, evs = account(tailer.lines, streams)
    unsent = sum(int(m.group(2)) for m in MQTT_STOP_RE.finditer(text))
    mqtt_dropped = sum(s["dropped"].get(k, 0) for s in streams
                       for k in ("mqtt_offline_queue_full", "mqtt_refused", "mqtt_too_large", "mqtt_unsent_at_stop"))
    payloads = {json.dumps(e, separators=(",", ":")) for e in evs}
    with sub.lock:
        received = {p for p in sub.events}
    # Payloads are the same serialisation as the file lines; compare by content.
    file_lines = {l for l in tailer.lines if '"type":"utterance"' in l}
    on_mqtt = len(file_lines & received)
    mqtt_acc = {"events_in_file": len(file_lines), "received_by_subscriber": on_mqtt,
                "messages_received": sub.messages, "dropped_counted": mqtt_dropped + unsent,
                "unsent_at_stop_logged": unsent,
                "unaccounted": len(file_lines) - on_mqtt - (mqtt_dropped + unsent)}
    del payloads
    drops_total = {}
    for s in streams:
        for k, v in s["dropped"].items():
            drops_total[k] = drops_total.get(k, 0) + v
    # RSS moves with each reload (models loaded again): compare the median of a window
    # right after warm-up with the median of the last one, and fit a slope.
    warm = [r for r in rows if r["t"] >= a.warmup_s] or rows
    span = warm[-1]["t"] - warm[0]["t"]
    win = min(600.0, max(span / 4, a.interval_s))

    def median_rss(rs):
        v = sorted(r["rss_kb"] for r in rs)
        return v[len(v) // 2] / 1024

    rss0 = median_rss([r for r in warm if r["t"] <= warm[0]["t"] + win])
    rss_end = median_rss([r for r in warm if r["t"] >= warm[-1]["t"] - win])
    rss_max = max(r["rss_kb"] for r in warm) / 1024
    slope = lsq_slope([r["t"] / 3600 for r in warm], [r["rss_kb"] / 1024 for r in warm])
    last_metrics = prober.last or {}
    refused = {k.split('reason="')[1].rstrip('"}'): v for k, v in last_metrics.items()
               if k.startswith("sarcasmd_http_refused_total")}
    throttled = None
    try:
        with open("/sys/fs/cgroup/cpu.stat") as f:
            throttled = {k: int(v) for k, v in (l.split() for l in f) if k.startswith("nr_throttled") or
                         k.startswith("throttled_usec")}
    except OSError:
        pass
    reloads = {"applied": text.count("is valid; restarting the stream"), "rejected": text.count("reload rejected"),
               "failed": text.count("reload failed")}
    panics = len(re.findall(r"panicked at", text))
    result = {
        "date": datetime.date.today().isoformat(),
        "commit": subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "audio_s": round(state["fed"] / BYTES_PER_S, 1),
        "wall_s": round(time.monotonic() - t0, 1),
        "speed": a.speed,
        "exit_status": rc,
        "faults": faults.st, "reloads": reloads,
        "events_file": file_acc | {"tailer_files": tailer.files, "lines_read_twice": tailer.duplicates},
        "mqtt": mqtt_acc,
        "drops_by_reason": drops_total,
        "sse": churn.st, "http_probes": prober.st, "http_refused_last_stream": refused,
        "rss_mb": {"window_s": round(win), "median_after_warmup": round(rss0, 1), "median_end": round(rss_end, 1),
                   "max": round(rss_max, 1), "start": round(rows[0]["rss_kb"] / 1024, 1),
                   "growth_pct": round(100 * (rss_end - rss0) / rss0, 2),
                   "slope_mb_per_h": round(slope, 2) if slope is not None else None},
        "fds": {"start": rows[0]["fds"], "quiet_warmup": quiet.get("warmup"), "quiet_end": quiet.get("end"),
                "end": rows[-1]["fds"], "min": min(r["fds"] for r in rows), "max": max(r["fds"] for r in rows)},
        "threads_max": max(r["threads"] for r in rows),
        "cpu_s": rows[-1]["cpu_s"],
        "cgroup_cpu_throttling": throttled,
        "panics": panics,
        "warn_error_lines": len(re.findall(r"^\[\S+\s+(?:WARN|ERROR)", text, re.M)),
        "fault_log": faults.log[:40],
        "work": a.work,
    }
    result["verdicts"] = {
        "events_file_all_accounted": file_acc["unaccounted"] == 0 and not file_acc["segments_not_matching"],
        "mqtt_all_accounted": mqtt_acc["unaccounted"] <= 0,
        "rss_flat": result["rss_mb"]["growth_pct"] < 5,
        "fds_flat": quiet.get("warmup") is not None and quiet.get("end") == quiet.get("warmup"),
        "http_always_answered": prober.st["failed"] == 0,
        "no_panic": panics == 0,
        "exit_0": rc == 0,
    }
    result["pass"] = all(result["verdicts"].values())
    return result
