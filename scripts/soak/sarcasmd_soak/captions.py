"""The caption files the daemon writes (live.vtt, live.srt and their rotations): sizes,
cue counts, the WEBVTT header and the utterance NOTEs."""
import os
import re


def caption_files(work):
    out = {}
    for name in ("live.vtt", "live.srt", "live.vtt.1", "live.srt.1"):
        p = os.path.join(work, name)
        if os.path.exists(p):
            out[name] = os.path.getsize(p)
    vtt = os.path.join(work, "live.vtt")
    if os.path.exists(vtt):
        with open(vtt, errors="replace") as f:
            text = f.read()
        out["vtt_header_ok"] = text.lstrip("\ufeff").startswith("WEBVTT")
        out["vtt_cues"] = text.count("-->")
        out["vtt_utterance_notes"] = len(re.findall(r"^NOTE utterance ", text, re.M))
    srt = os.path.join(work, "live.srt")
    if os.path.exists(srt):
        with open(srt, errors="replace") as f:
            out["srt_cues"] = f.read().count("-->")
    return out
