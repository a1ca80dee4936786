"""Shared code of the text-candidate studies (text_candidates, mpnet_probe), not the recipe.

Text view candidates after v2: a transformer encoder beside USE-m3, and plain-dialogue
negatives (issue 22; exploratory).

The shipped text head (TEXT_V2.md) is a logistic regression over the daemon's USE-m3
embedding. EXPLORE_TEXT.md measured USE-m3 + all-MiniLM-L6-v2 (mean pool) concatenated
as the strongest frozen option on MUStARD++ alone (+3.2 F1 over five folds). This script
asks the question again under text_head_v2's protocols and compositions, so the answer
is comparable with the shipped head: the same training sets (speech-clip scenes dropped,
test texts and scenes dropped, SarcNet share, text noise), the same selection protocol
(MUStARD++ leave-one-show-out on gold text and on espeak+Whisper transcripts), and the
same never-selected protocols (MUStARD SI, the speech clips' Whisper transcripts).

Encoders compared, each with a standardised logistic regression (text_head_v2.fit):
  usem3          the shipped 512-d embedding (from the daemon, `sarcasmd embed`)
  minilm         all-MiniLM-L6-v2 mean pool, L2-normalised (384-d; explore_text.MiniLM)
  usem3+minilm   both concatenated (896-d)
Plain-dialogue negatives: the unannotated context turns of MUStARD++ (mostly plain talk)
added as weak negatives at a share of MUStARD++'s weight, the held-out show's turns
removed in every protocol (context_pool, ShowApartProtocols): does ordinary dialogue
teach the head that plain sentences ("Good morning everyone...") are not sarcastic?
Recipe and C chosen per encoder by the selection protocol only (seed 13); the chosen
recipe then runs over seeds 13-15; a paired bootstrap against the shipped head's recipe
(usem3, v2 composition, C 0.001) run on the same folds and seeds.

protocol_material, run_encoders, final_rows and selection_md serve mpnet_probe.py too.

The study's run and report: models/studies/text_candidates/text_candidates.py
  models/studies/text_candidates/text_candidates.sh   (writes TEXT_CANDIDATES.md and .json there)
"""
import json
import os

import numpy as np

from models.recipe.lib import data, selection
from models.recipe.lib import text_v2 as v2

SHIPPED = ("MUStARD++ + SarcNet text (EN) (share 0.5) + text-noise copies", {"extras": {"sarcnet": 0.5}, "noise": 0.5}, 0.001)
RECIPES = [("MUStARD++", {}),
           ("MUStARD++ + text-noise copies", {"noise": 0.5}),
           ("MUStARD++ + SarcNet text (EN) (share 0.5)", {"extras": {"sarcnet": 0.5}}),
           (SHIPPED[0], SHIPPED[1]),
           ("MUStARD++ + all five extras (share 0.4 each)", {"extras": {e: 0.4 for e in v2.EXTRAS}})]
CONTEXT_RECIPES = [(f"{SHIPPED[0]} + plain-dialogue negatives (share {sh:g})",
                    {**SHIPPED[1], "extras": {**SHIPPED[1]["extras"], "context": sh}}) for sh in (0.25, 0.5, 1.0)]
KEYS = ["loso_gold", "loso_tts", "si", "house_whisper", "cmpt419_whisper", "house_gold", "cmpt419_gold"]


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 mean pool (L2-normalised), one text -> vector cache on disk."""

    def __init__(self, model_dir, cache):
        from models.studies.textlib import explore as xt
        self.xt, self.m = xt, xt.MiniLM(model_dir, 128)
        self.path = os.path.join(cache, "minilm-mean.jsonl")
        self.vec = {}
        if os.path.exists(self.path):
            for r in data.read_jsonl(self.path):
                self.vec[r["id"]] = r["embedding"]

    def __call__(self, texts):
        new = sorted({t for t in texts if v2.sha(t) not in self.vec})
        if new:
            v2.log(f"MiniLM: {len(new)} new texts")
            seqs = self.m.ids(new)
            order = np.argsort([len(s) for s in seqs])
            with open(self.path, "a", encoding="utf-8") as f:
                for i in range(0, len(new), 32):
                    b = order[i:i + 32]
                    ids, mask = self.xt.pad_batch([seqs[j] for j in b])
                    h = np.asarray(self.xt._encode_jit(self.m.params, ids, mask))
                    for r, j in enumerate(b):
                        e = h[r, :len(seqs[j])].mean(0)
                        e = e / max(float(np.linalg.norm(e)), 1e-12)
                        self.vec[v2.sha(new[j])] = [round(float(x), 6) for x in e]
                        f.write(json.dumps({"id": v2.sha(new[j]), "embedding": self.vec[v2.sha(new[j])]}) + "\n")
        return np.array([self.vec[v2.sha(t)] for t in texts], dtype=np.float32)


def context_pool(mpp, held_scenes):
    """The dialogue turns before each MUStARD++ utterance, as negatives ("plain
    dialogue"): unannotated, mostly not sarcastic, so weak labels. One row per distinct
    text; a turn equal to any annotated utterance is left out (it has a real label), and
    so are the turns of the speech clips' scenes. Each row keeps its show and scene, so
    every protocol can drop the test show's turns (Protocols._fit below)."""
    labelled = {data.norm_text(r["text"]) for r in mpp}
    seen, rows = set(), []
    for r in mpp:
        if r.get("group") in held_scenes:
            continue
        for i, c in enumerate(r.get("context") or []):
            t = (c.get("text", "") if isinstance(c, dict) else str(c)).strip()  # a turn is {speaker, text} or a bare string
            n = data.norm_text(t)
            if t and n not in labelled and n not in seen:
                seen.add(n)
                rows.append({"id": f"{r['id']}:ctx{i}", "text": t, "label": 0, "source": "context",
                             "group": r["group"], "show": r["show"]})
    return rows


class ShowApartProtocols(v2.Protocols):
    """text_head_v2's protocols; the plain-dialogue pool is cut to the shows a fit may
    see: LOSO drops the held-out show, SI drops FRIENDS (its test show)."""

    def __init__(self, C_, *args):
        self.context_all = context_pool(C_.mpp, C_.held_scenes)
        C_.pools["context"] = self.context_all
        super().__init__(C_, *args)

    def _fit(self, recipe, C, seed, base, test_norms, test_groups, key):
        test_show = key.split("-", 1)[1] if key.startswith("loso-") else ("FRIENDS" if key == "si" else None)
        self.C.pools["context"] = [r for r in self.context_all if r["show"] != test_show]
        return super()._fit(recipe, C, seed, base, test_norms, test_groups, key)


class Concat:
    def __init__(self, *parts):
        self.parts = parts

    def __call__(self, texts):
        return np.concatenate([p(texts) for p in self.parts], axis=1)


def protocol_material(manifests, bin_, usem3):
    """What every encoder's protocols share, encoder-free: the espeak+Whisper transcripts of
    MUStARD++ and MUStARD, the speech clips' Whisper features (House, cmpt419) and the
    meeting sample's Whisper lines. -> (tts, wh_house, wh_cmpt, meeting_whisper)."""
    C0 = v2.Corpora(manifests, usem3)
    mustard = data.read_jsonl(os.path.join(manifests, "mustard.jsonl"))
    tts = v2.tts_transcripts(bin_, [r["text"] for r in C0.mpp + mustard], v2.CACHE, 0)
    cc = os.path.join(os.path.dirname(v2.CACHE), "cross-corpus")
    os.makedirs(cc, exist_ok=True)
    wh_house = v2.speech_features(bin_, C0.house, os.path.join(cc, "features-house.jsonl"))
    wh_cmpt = v2.speech_features(bin_, C0.cmpt, os.path.join(cc, "features-cmpt419.jsonl"))
    return tts, wh_house, wh_cmpt, v2.meeting_whisper(bin_, v2.CACHE)


def select_and_run(P, recipes, enc_name):
    """Each recipe over text_head_v2's C grid on the selection protocol only (MUStARD++
    leave-one-show-out, seed 13); the best (recipe, C) then runs over every seed on every
    protocol. -> the selection rows, the chosen row last."""
    rs = [v2.evaluate(P, name, rec, v2.SEEDS[:1], ("loso",), v2.C_GRID) for name, rec in recipes]
    best = selection.best(rs, lambda r: r["selection"])[0]
    v2.log(f"{enc_name}: chosen {best['name']} C={best['C']}")
    rs.append(v2.evaluate(P, best["name"] + " (chosen)", best["recipe"], v2.SEEDS, ("loso", "si", "speech"), [best["C"]]))
    return rs


def run_encoders(manifests, encoders, material, usem3_recipes=()):
    """Every encoder under ShowApartProtocols. usem3 (which must come first): the shipped
    head's recipe over every seed (the reference of the bootstraps), then its own
    select_and_run among `usem3_recipes` if any; every other encoder: select_and_run among
    RECIPES + CONTEXT_RECIPES. -> ({encoder: rows, final row last}, {encoder: protocols})."""
    tts, wh_house, wh_cmpt, m_wh = material
    results, P_by = {}, {}
    for enc_name, emb in encoders.items():
        C_ = v2.Corpora(manifests, emb)
        P = ShowApartProtocols(C_, tts, {}, wh_house, wh_cmpt, (emb(v2.MEETING_GOLD), emb(m_wh)))
        P_by[enc_name] = P
        v2.log(f"{enc_name}: protocol material ready")
        if enc_name == "usem3":
            rs = [v2.evaluate(P, "shipped head's recipe", SHIPPED[1], v2.SEEDS, ("loso", "si", "speech"), [SHIPPED[2]])]
            if usem3_recipes:
                rs += select_and_run(P, usem3_recipes, enc_name)
        else:
            rs = select_and_run(P, RECIPES + CONTEXT_RECIPES, enc_name)
        results[enc_name] = rs
    return results, P_by


def selection_rows(results):
    return {e: [{"name": r["name"], "C": r["C"], "selection": r["selection"], "selection_by_C": r["selection_by_C"]}
                for r in rs] for e, rs in results.items()}


def final_rows(P_by, finals, shipped, keys=KEYS):
    """The report's final rows: per (encoder, run) of `finals` its summary over seeds, a
    paired bootstrap per seed against `shipped` (the shipped recipe's run, on usem3's
    protocols) and its meeting-sample scores."""
    P = P_by["usem3"]
    rows = []
    for enc_name, final in finals:
        s = v2.summarise(P_by[enc_name], final)
        is_shipped = final is shipped
        boots = {} if is_shipped else {k: [v2.boot(P.y(k), r[k], sr[k], seed=sd) for sd, r, sr in zip(final["seeds"], final["runs"], shipped["runs"])] for k in keys}
        rows.append({"encoder": enc_name, "shipped": is_shipped, "name": final["name"], "C": final["C"], "seeds": final["seeds"],
                     "summary": s, "boot_vs_shipped": boots,
                     "meeting_whisper": [r["meeting_whisper"].tolist() for r in final["runs"]],
                     "meeting_gold": [r["meeting_gold"].tolist() for r in final["runs"]]})
    return rows


LABEL = {"loso_gold": "MUStARD++ LOSO, gold", "loso_tts": "MUStARD++ LOSO, espeak+Whisper", "si": "MUStARD SI (FRIENDS), gold",
         "house_whisper": "House clips, Whisper", "cmpt419_whisper": "cmpt419 clips, Whisper", "house_gold": "House clips, gold",
         "cmpt419_gold": "cmpt419 clips, gold"}


def selection_md(sel_by_encoder):
    """The report's selection table (selection_rows), heading first."""
    L = ["## Selection (seed 13; mean of the two LOSO macro-F1s at the best C)", "", "| encoder | recipe | C | selection score |", "|---|---|---|---|"]
    for enc, sel in sel_by_encoder.items():
        for r in sel:
            L.append(f"| {enc} | {r['name']} | {r['C']:g} | {v2.pct(r['selection'])} |")
    return L


def write_md(path, out):
    ms = lambda v: v2.mean_sd(v)  # noqa: E731
    ship = next(f for f in out["rows"] if f["shipped"])
    summ = []
    for f in out["rows"]:
        if f["shipped"]:
            continue
        d = {k: 100 * (np.mean(f["summary"][k]["f1_macro"]) - np.mean(ship["summary"][k]["f1_macro"])) for k in KEYS}
        summ.append(f"- {f['encoder']}, {f['name']} (C={f['C']:g}): macro-F1 minus the shipped head's, seed means: "
                    + ", ".join(f"{LABEL[k]} {d[k]:+.1f}" for k in KEYS) + ".")
    L = ["# Text view candidates after v2: MiniLM beside USE-m3, and plain-dialogue negatives (issue 22; exploratory)", "",
         "Generated by `models/studies/text_candidates/text_candidates.sh` (`models/studies/text_candidates/text_candidates.py`; its docstring has the design). "
         "Nothing here is served unless REPORT.md says so. Percent; macro-F1 at 0.5, P and R macro averages, AUC = ROC-AUC; "
         f"mean ± sd over seeds {v2.SEEDS} (only the extras sample and the text noise are random). "
         f"Run time {out['seconds'] / 60:.0f} min on 2 shared cores.", "",
         "## Summary", ""] + summ + ["",
         "Cost of serving MiniLM beside USE-m3 (not measured here, from MODELS.md and the model files): all-MiniLM-L6-v2 holds "
         "22.7 M parameters, 91 MB in fp32 (the daemon's peak RSS is about 250 MB today against a 300 MB budget), ~23 ms per "
         "32 tokens in tract fp32 on this CPU; the int8 file ran at ~61 ms.", "",
         "## Final rows (each encoder's recipe and C chosen on MUStARD++ leave-one-show-out only)", "",
         "| protocol | encoder | recipe, C | P | R | macro-F1 | AUC | Δ F1 vs shipped [95 % CI] per seed |", "|---|---|---|---|---|---|---|---|"]
    for k in KEYS:
        for f in out["rows"]:
            enc, s = f["encoder"], f["summary"][k]
            d = "; ".join(f"{100 * b['delta']:+.1f} [{100 * b['ci95'][0]:+.1f}, {100 * b['ci95'][1]:+.1f}]" for b in f["boot_vs_shipped"][k]) if not f["shipped"] else "(shipped)"
            L.append(f"| {LABEL[k]} | {enc} | {f['name']}, C={f['C']:g} | {ms(s['precision_macro'])} | {ms(s['recall_macro'])} | "
                     f"**{ms(s['f1_macro'])}** | {ms(s['auc'])} | {d} |")
        b = out["baselines"][k]
        L.append(f"| | random / majority | | | | {v2.pct(b['random']['f1_macro'])} / {v2.pct(b['majority']['f1_macro'])} | | |")
    L += [""] + selection_md(out["selection"])
    L += ["", "## Meeting sample (smoke test, never a selection criterion)", "",
          "Whisper lines: " + " / ".join(f"'{t}'" for t in out["meeting_whisper"]) + " (plain, sarcastic, plain, sarcastic, plain).", "",
          "| encoder | seed | Whisper-text scores | gold-text scores | pass (Whisper) |", "|---|---|---|---|---|"]
    for f in out["rows"]:
        enc = f["encoder"] + (" (shipped)" if f["shipped"] else "")
        for sd, pw, pg in zip(f["seeds"], f["meeting_whisper"], f["meeting_gold"]):
            L.append(f"| {enc} | {sd} | {', '.join(f'{x:.3f}' for x in pw)} | {', '.join(f'{x:.3f}' for x in pg)} | "
                     f"{'yes' if v2.smoke_pass(pw) else 'no'} |")
    with open(path, "w") as fh:
        fh.write("\n".join(L) + "\n")
