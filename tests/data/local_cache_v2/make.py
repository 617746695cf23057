"""How this folder was made, with memjudge's main at 9c62b45 (2026-12-04), whose coverage cache keys
held the embedded judge's support-only options (`check`, `prompt`, `premises`, `few_shot`):
`memjudge.score_run` with `local:qwen2.5-coder-1.5b` (option check = true, as `memjudge demo` runs
it) and the per-fact coverage rubric over a 4-assertion corpus, the model's scores replaced by
fixed ones (no model is run). The run folder's journal.jsonl (cache key + record per answer) and
coverage.jsonl are kept here. tests/test_local_cache.py reads them as the answers a cache of that
main holds.

    python tests/data/local_cache_v2/make.py   # only meaningful at that commit
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
ASSERTIONS = {"a1": ("Works as a nurse.", "work"), "a2": ("Values honesty above all.", "values"),
              "a3": ("Lives in Leeds.", "location"), "a4": ("Dislikes cats.", "preferences")}
COVER = {("works as a nurse", "Works as a nurse."): 1.5}


class Fake:
    lock = threading.Lock()


def candidates(model, source, fact, texts, reuse=True):
    return [L.VerdictScore(COVER.get((fact, t), -2.0) / 2, -COVER.get((fact, t), -2.0) / 2, 300, 200) for t in texts]


L.LocalJudge.ensure_loaded = lambda self, context="main": Fake()
L.LocalJudge.load_all = lambda self: None
LC.score_candidates = candidates
cands = pd.DataFrame({"persona_id": "p1", "assertion_id": list(ASSERTIONS), "category": [c for _, c in ASSERTIONS.values()],
                      "confidence": 0.9, "text": [t for t, _ in ASSERTIONS.values()]})
srcs = pd.DataFrame({"persona_id": ["p1"], "source": [SOURCE]})
facts = pd.DataFrame({"persona_id": "p1", "fact_id": ["f1", "f2"], "text": ["works as a nurse", "has a grey cat"]})
cache = OUT / "cache-tmp"
judge = make_judge("local:qwen2.5-coder-1.5b", options={"check": True})
score_run(cands, srcs, judge, rubric="coverage-fact", facts=facts, out=OUT / "run-coverage", cache_dir=cache, progress=False)
(OUT / "run-coverage" / "journal.jsonl").rename(OUT / "coverage.journal.jsonl")
(OUT / "run-coverage" / "coverage.jsonl").rename(OUT / "coverage.coverage.jsonl")
shutil.rmtree(OUT / "run-coverage"), shutil.rmtree(cache)
