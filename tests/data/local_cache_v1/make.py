"""How this folder was made, with memjudge's main at 6459766 (2026-12-02), whose cache keys held the
embedded judge's thresholds: `memjudge.score_run` with `local:qwen2.5-coder-1.5b` (option check =
true, the packaged thresholds -1.00 and values -0.25; per-fact coverage at the packaged coverage
threshold 0.0) over a 4-assertion corpus, the model's scores replaced by fixed ones (no model is
run). The run folders' journal.jsonl (cache key + record per answer) and outputs are kept here.
tests/test_local_cache.py reads them as the answers a cache and a run folder of that main hold.

    python tests/data/local_cache_v1/make.py   # only meaningful at that commit
"""
import shutil
import threading
from pathlib import Path

import pandas as pd

from memjudge.judges import local as L
from memjudge.judges import local_coverage as LC
from memjudge.judges import make_judge
from memjudge.scoring.engine import score_run

OUT = Path(__file__).resolve().parent
SOURCE = ("I have been a nurse at the city hospital for six years; the night shifts are long. On weekends I play the "
          "cello in a small orchestra. Mochi, my grey cat, waits for me at home. I moved to Leeds two years ago.")
ASSERTIONS = {"a1": ("Works as a nurse.", "work", -0.5), "a2": ("Values honesty above all.", "values", -0.6),
              "a3": ("Lives in Leeds.", "location", 1.2), "a4": ("Dislikes cats.", "preferences", -3.0)}
CHECK = {"a1": 0.4, "a2": 0.7, "a3": 0.2, "a4": -1.0}
COVER = {("works as a nurse", "Works as a nurse."): 1.5}

class Fake:
    lock = threading.Lock()
    def score(self, prompt, source="", assertion="", reuse=True):
        lo = next(v for t, c, v in ASSERTIONS.values() if t == assertion)
        return L.VerdictScore(lo / 2, -lo / 2, 500, 400)

def check(model, source, assertion, reuse=True):
    k = next(k for k, (t, c, v) in ASSERTIONS.items() if t == assertion)
    return L.VerdictScore(CHECK[k] / 2, -CHECK[k] / 2, 60, 40)

def candidates(model, source, fact, texts, reuse=True):
    return [L.VerdictScore(COVER.get((fact, t), -2.0) / 2, -COVER.get((fact, t), -2.0) / 2, 300, 200) for t in texts]

L.LocalJudge.ensure_loaded = lambda self, context="main": Fake()
L.LocalJudge.load_all = lambda self: None
L.score_premise_check = check
LC.score_candidates = candidates
cands = pd.DataFrame({"persona_id": "p1", "assertion_id": list(ASSERTIONS), "category": [c for _, c, _ in ASSERTIONS.values()],
                      "confidence": 0.9, "text": [t for t, _, _ in ASSERTIONS.values()]})
srcs = pd.DataFrame({"persona_id": ["p1"], "source": [SOURCE]})
facts = pd.DataFrame({"persona_id": "p1", "fact_id": ["f1", "f2"], "text": ["works as a nurse", "has a grey cat"]})
cache = OUT / "cache-tmp"
judge = make_judge("local:qwen2.5-coder-1.5b", options={"check": True})
r1 = score_run(cands, srcs, judge, replicates=2, out=OUT / "run-support", cache_dir=cache, progress=False)
cov_judge = make_judge("local:qwen2.5-coder-1.5b", options={"check": True})
r2 = score_run(cands, srcs, cov_judge, rubric="coverage-fact", facts=facts, out=OUT / "run-coverage", cache_dir=cache, progress=False)
for run, name in (("run-support", "support"), ("run-coverage", "coverage")):
    (OUT / run / "journal.jsonl").rename(OUT / f"{name}.journal.jsonl")
(OUT / "run-support" / "labels.jsonl").rename(OUT / "support.labels.jsonl")
(OUT / "run-coverage" / "coverage.jsonl").rename(OUT / "coverage.coverage.jsonl")
shutil.rmtree(OUT / "run-support"), shutil.rmtree(OUT / "run-coverage"), shutil.rmtree(cache)
