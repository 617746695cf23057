"""The embedded judge's thresholds are applied to stored scores, not kept in the cache key: a
calibrated threshold re-reads every answer the model gave (zero model calls), and a cache or a
run folder written when the keys held the thresholds (tests/data/local_cache_v1, main 6459766)
keeps every hit. Through `memjudge.score_run`, with the model's scores replaced by fixed ones."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path

import pandas as pd
import pytest

from memjudge import RunOptions, score_run
from memjudge.judges import local as L
from memjudge.judges import local_coverage as LC
from memjudge.judges import make_judge
from memjudge.scoring.cache import AnswerCache

pytestmark = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")

V1 = Path(__file__).resolve().parent / "data" / "local_cache_v1"
SOURCE = ("I have been a nurse at the city hospital for six years; the night shifts are long. On weekends I play the "
          "cello in a small orchestra. Mochi, my grey cat, waits for me at home. I moved to Leeds two years ago.")
# (text, category, verdict log-odds, premise-check log-odds): what make.py's fixed scores were
ASSERTIONS = {"a1": ("Works as a nurse.", "work", -0.5, 0.4), "a2": ("Values honesty above all.", "values", -0.6, 0.7),
              "a3": ("Lives in Leeds.", "location", 1.2, 0.2), "a4": ("Dislikes cats.", "preferences", -3.0, -1.0)}
FACTS = pd.DataFrame({"persona_id": "p1", "fact_id": ["f1", "f2"], "text": ["works as a nurse", "has a grey cat"]})


def _corpus():
    cands = pd.DataFrame({"persona_id": "p1", "assertion_id": list(ASSERTIONS),
                          "category": [a[1] for a in ASSERTIONS.values()], "confidence": 0.9,
                          "text": [a[0] for a in ASSERTIONS.values()]})
    return cands, pd.DataFrame({"persona_id": ["p1"], "source": [SOURCE]})


def _journal(name: str) -> dict[str, dict]:
    lines = (V1 / f"{name}.journal.jsonl").read_text().splitlines()
    return {rec.pop("key"): rec for rec in map(json.loads, lines)}


class _Model:
    """The model's scores, as make.py fixed them; `calls` counts what was evaluated."""

    lock = threading.Lock()

    def __init__(self):
        self.calls = 0

    def score(self, prompt, source="", assertion="", reuse=True):
        self.calls += 1
        lo = next(a[2] for a in ASSERTIONS.values() if a[0] == assertion)
        return L.VerdictScore(lo / 2, -lo / 2, 500, 400)


@pytest.fixture
def model(monkeypatch):
    fake = _Model()

    def check(model, source, assertion, reuse=True):
        fake.calls += 1
        c = next(a[3] for a in ASSERTIONS.values() if a[0] == assertion)
        return L.VerdictScore(c / 2, -c / 2, 60, 40)

    def candidates(model, source, fact, texts, reuse=True):
        fake.calls += len(texts)
        return [L.VerdictScore(0.75, -0.75, 300, 200) if (fact, t) == ("works as a nurse", "Works as a nurse.")
                else L.VerdictScore(-1.0, 1.0, 300, 200) for t in texts]

    monkeypatch.setattr(L.LocalJudge, "ensure_loaded", lambda self, context="main": fake)
    monkeypatch.setattr(L.LocalJudge, "load_all", lambda self: None)
    monkeypatch.setattr(L, "score_premise_check", check)
    monkeypatch.setattr(LC, "score_candidates", candidates)
    return fake


def _judge(**options):
    return make_judge("local:qwen2.5-coder-1.5b", options={"check": True, **options})


def _support(tmp_path, cache, judge, out="run", **kw):
    cands, srcs = _corpus()
    return score_run(cands, srcs, judge, replicates=2, out=tmp_path / out, cache_dir=cache, progress=False, **kw)


def test_a_cache_written_when_keys_held_the_thresholds_keeps_every_hit(model, tmp_path):
    cache = tmp_path / "cache"
    with AnswerCache(cache) as c:
        c.set_many(_journal("support").items())
    res = _support(tmp_path, cache, _judge())
    assert model.calls == 0 and res.summary.requested == 0 and res.summary.cached == 4
    before = pd.read_json(V1 / "support.labels.jsonl", lines=True)
    cols = ["assertion_id", "replicate", "verdict", "judge_score", "rationale"]
    pd.testing.assert_frame_equal(res.labels[cols].reset_index(drop=True), before[cols], check_dtype=False)
    # The answers are now under their threshold-free keys too: a run at another threshold finds
    # them there, and the former keys are still there for an older memjudge.
    with AnswerCache(cache) as c:
        assert len(c) == 8 and all(k in c for k in _journal("support"))


def test_a_changed_threshold_rereads_the_stored_scores_without_a_model_call(model, tmp_path):
    cache = tmp_path / "cache"
    first = _support(tmp_path, cache, _judge(), out="packaged")
    assert model.calls == 8 and first.summary.requested == 4  # 4 verdicts, 4 premise checks
    by = first.labels[first.labels.replicate == 0].set_index("assertion_id")
    # packaged: -1.00, values -0.25; log-odds -0.1, 0.1, 1.4, -4.0 -> three supported
    assert list(by.verdict) == ["supported", "supported", "supported", "unsupported"]
    calibrated = _support(tmp_path, cache, _judge(threshold=0.5), out="calibrated")
    assert model.calls == 8 and calibrated.summary.requested == 0 and calibrated.summary.cached == 4
    lab = calibrated.labels
    by = lab[lab.replicate == 0].set_index("assertion_id")
    assert list(by.verdict) == ["unsupported", "unsupported", "supported", "unsupported"]
    assert list(by.judge_score) == list(first.labels[first.labels.replicate == 0].judge_score)
    assert by.loc["a3", "rationale"] == "log-odds 1.400 (verdict 1.200 + premise check 0.200) vs threshold 0.500"
    # Every replicate row reads the same answer; config.json still names the threshold used.
    assert (lab.groupby("assertion_id").verdict.nunique() == 1).all()
    config = json.loads((tmp_path / "calibrated" / "config.json").read_text())
    assert config["judge"]["threshold"] == 0.5
    # A category's own threshold re-reads as well (values at +0.2: a2's 0.1 falls below it).
    own = _support(tmp_path, cache, _judge(threshold=-1.0, category_thresholds={"values": 0.2}), out="own")
    assert model.calls == 8 and list(own.labels[own.labels.replicate == 0].verdict) == \
        ["supported", "unsupported", "supported", "unsupported"]


def test_a_run_folder_written_when_keys_held_the_thresholds_resumes_from_its_journal(model, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "journal.jsonl").write_text((V1 / "support.journal.jsonl").read_text())
    res = _support(tmp_path, None, _judge(), run=RunOptions(use_cache=False))
    assert model.calls == 0 and res.summary.requested == 0 and res.summary.resumed == 4
    assert list(res.labels[res.labels.replicate == 0].verdict) == ["supported", "supported", "supported", "unsupported"]
    # The journal was rewritten under today's keys (the former lines are kept: no cache here, so
    # it is their only copy); a run at another threshold resumes by those keys and re-reads.
    # (A former key holds the threshold it was written at: it is found at that threshold only.)
    lines = [json.loads(x) for x in (run / "journal.jsonl").read_text().splitlines()]
    assert len(lines) == 8 and {x["key"] for x in lines} >= set(_journal("support"))
    again = _support(tmp_path, None, _judge(threshold=0.5), run=RunOptions(use_cache=False))
    assert model.calls == 0 and again.summary.requested == 0 and again.summary.resumed == 4
    assert list(again.labels[again.labels.replicate == 0].verdict) == ["unsupported", "unsupported", "supported", "unsupported"]


def test_coverage_answers_reread_at_another_coverage_threshold(model, tmp_path):
    cache = tmp_path / "cache"
    with AnswerCache(cache) as c:
        c.set_many(_journal("coverage").items())
    cands, srcs = _corpus()

    def cover(**options):
        return score_run(cands, srcs, _judge(**options), rubric="coverage-fact", facts=FACTS, out=tmp_path / str(options),
                         cache_dir=cache, progress=False)

    # Cached at the packaged coverage threshold of the time (0.0); read now at today's packaged one.
    same = cover()
    assert model.calls == 0 and same.summary.requested == 0 and same.summary.cached == 2
    packaged = L.PACKAGED[L.DEFAULT_MODEL]
    assert 0.0 in packaged.former_coverage_thresholds and packaged.coverage_threshold != 0.0
    config = json.loads((tmp_path / "{}" / "config.json").read_text())
    assert config["judge"]["coverage"]["threshold"] == packaged.coverage_threshold
    before = pd.read_json(V1 / "coverage.coverage.jsonl", lines=True)
    assert [sorted(x) for x in same.coverage.covered_by] == [sorted(x) for x in before.covered_by] == [["a1"], []]
    high = cover(coverage_threshold=1.6)  # a1's 1.5 falls below it
    assert model.calls == 0 and [list(x) for x in high.coverage.covered_by] == [[], []]
    low = cover(coverage_threshold=-2.5)
    assert model.calls == 0 and low.summary.requested == 0
    assert [sorted(x) for x in low.coverage.covered_by] == [["a1", "a2", "a3", "a4"]] * 2
    assert list(low.coverage.judge_score) == list(same.coverage.judge_score) == [1.5, -2.0]


def test_a_rerun_from_the_cache_never_loads_the_model(model, tmp_path, monkeypatch):
    """The model loads at the first call that needs it: a rerun whose every answer is cached (as
    `memjudge demo`'s second run, which only verifies the weights first) never pays for the load."""
    loads: list[str] = []
    monkeypatch.setattr(L.LocalJudge, "ensure_loaded", lambda self, context="main": loads.append(context) or model)
    first = _support(tmp_path, tmp_path / "cache", _judge())
    assert first.summary.requested == len(ASSERTIONS) and set(loads) == {"main", "check"}
    loads.clear()
    again = _support(tmp_path, tmp_path / "cache", _judge(), out="again")
    assert again.summary.requested == 0 and again.summary.cached == len(ASSERTIONS) and loads == []
    assert again.labels["verdict"].tolist() == first.labels["verdict"].tolist()


V2 = Path(__file__).resolve().parent / "data" / "local_cache_v2"


def test_coverage_answers_are_shared_by_judges_that_differ_only_in_support_settings(model, tmp_path):
    """A coverage read never sees the support prompt's settings (check, prompt, premises,
    few_shot), so they are not in its key: the demo's coverage answers (check = true) serve a
    default judge. A cache written when the keys held them (tests/data/local_cache_v2, main
    9c62b45) keeps every hit, and its answers are then found under the new key by every judge."""
    cache = tmp_path / "cache"
    lines = [json.loads(x) for x in (V2 / "coverage.journal.jsonl").read_text().splitlines()]
    with AnswerCache(cache) as c:
        c.set_many((rec.pop("key"), rec) for rec in lines)
    cands, srcs = _corpus()

    def cover(name, **options):
        judge = make_judge("local:qwen2.5-coder-1.5b", options=options)
        return score_run(cands, srcs, judge, rubric="coverage-fact", facts=FACTS, out=tmp_path / name, cache_dir=cache,
                         progress=False)

    before = pd.read_json(V2 / "coverage.coverage.jsonl", lines=True)
    for name, options in (("demo", {"check": True}), ("default", {}), ("premise", {"prompt": "premise", "premises": 2}),
                          ("no-few-shot", {"few_shot": False})):
        res = cover(name, **options)
        assert model.calls == 0 and res.summary.requested == 0 and res.summary.cached == 2, name
        assert [sorted(x) for x in res.coverage.covered_by] == [sorted(x) for x in before.covered_by] == [["a1"], []]
        assert list(res.coverage.judge_score) == list(before.judge_score)
    # What a coverage read does see still keys it: without the source, the model is asked again.
    res = cover("no-source", coverage_source=False)
    assert res.summary.requested == 2 and model.calls == 2 * len(ASSERTIONS)
    # The support keys are untouched: a support run with and without the check are two runs.
    first = _support(tmp_path, cache, _judge(), out="checked")
    plain = _support(tmp_path, cache, make_judge("local:qwen2.5-coder-1.5b"), out="plain")
    assert first.summary.requested == 4 and plain.summary.requested == 4
