"""An in-process judge for engine tests that need no HTTP: it answers from a script,
records every call, and counts requests. End-to-end tests use the real providers through
tests/fake_server.py instead."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Callable

import pandas as pd

from memjudge.judges import Judge, JudgeAnswer, JudgeCall, JudgeConfig, Usage

UNSUPPORTED = "[unsupported]"


def block(text: str, name: str) -> str:
    m = re.search(rf"<<<{name}\n(.*?)\n{name}>>>", text, re.DOTALL)
    return m.group(1) if m else ""


def support_answer(call: JudgeCall) -> JudgeAnswer:
    item = block(call.prompt.user, "ASSERTION")
    source = block(call.prompt.user, "SOURCE")
    supported = UNSUPPORTED not in item
    evidence = " ".join(source.split()[:4]) if supported else ""
    text = json.dumps({"verdict": "supported" if supported else "unsupported", "evidence": evidence, "rationale": "scripted"})
    return JudgeAnswer(text=text, finish_reason="stop", usage=Usage(input_tokens=len(call.prompt.user) // 4, output_tokens=20), model_version="scripted-1")


class ScriptedJudge(Judge):
    """`script(call, n)` returns the answer for the n-th request (0-based) of that call's
    key, or raises; the default answers every support call validly."""

    prefix = "scripted"

    def __init__(self, config: JudgeConfig | str = "scripted:m1", script: Callable[[JudgeCall, int], JudgeAnswer] | None = None, delay_s: float = 0.0):
        super().__init__(JudgeConfig(spec=config) if isinstance(config, str) else config)
        self.script = script or (lambda call, n: support_answer(call))
        self.delay_s = delay_s
        self.calls: list[JudgeCall] = []
        self.per_key: dict[str, int] = {}

    @property
    def requests(self) -> int:
        return len(self.calls)

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        n = self.per_key.get(call.key, 0)
        self.per_key[call.key] = n + 1
        self.calls.append(call)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self.script(call, n)


def candidates_frame(n: int = 12, per_persona: int = 4, unsupported_every: int = 3) -> pd.DataFrame:
    rows = []
    for i in range(n):
        text = f"The user enjoys hobby number {i}" + (f" {UNSUPPORTED}" if i % unsupported_every == 0 else "")
        rows.append({"persona_id": f"p{i // per_persona}", "assertion_id": f"a{i:03d}", "category": ["values", "hobby", "job"][i % 3],
                     "confidence": round((i % 10) / 10, 1), "text": text, "batch": f"b{i % 2}"})
    return pd.DataFrame(rows)


def sources_frame(n: int = 12, per_persona: int = 4) -> pd.DataFrame:
    personas = sorted({f"p{i // per_persona}" for i in range(n)}, key=lambda p: int(p[1:]))
    return pd.DataFrame({"persona_id": personas, "source": [f"Posts of {p}: I enjoy many hobbies and I write about them often." for p in personas]})


class HashScoringJudge(Judge):
    """A deterministic stand-in for the embedded judge (no model): its log-odds score is a hash
    of the assertion id in [-3, 3], its verdict that score against `options.threshold`."""

    prefix = "local"
    category_thresholds: dict = {}

    @property
    def deterministic(self) -> bool:  # as the embedded judge at temperature 0
        return True

    @property
    def threshold(self) -> float:
        return float(self.config.options.get("threshold", 0.0))

    def load_all(self):
        return None

    def weights_path(self):
        return None

    @property
    def coverage_threshold(self) -> float:
        return float(self.config.options.get("coverage_threshold", 0.0))

    async def generate(self, call):
        if "fact_id" in call.item:  # a per-fact coverage call: a hash score per shown candidate
            fact = call.fields["facts"][0]
            scores = {a["id"]: 6 * int(hashlib.sha256(f"{fact['id']}|{a['id']}".encode()).hexdigest()[:8], 16) / 2**32 - 3
                      for a in call.fields["assertions"]}
            obj = {"facts": [{"fact_id": fact["id"], "fact": fact["text"],
                              "covered_by": [a for a, s in scores.items() if s >= self.coverage_threshold]}]}
            return JudgeAnswer(text=json.dumps(obj), finish_reason="stop", judge_score=max(scores.values()),
                               raw={"candidate_scores": scores})
        u = int(hashlib.sha256(call.item["assertion_id"].encode()).hexdigest()[:8], 16) / 2**32
        score = 6 * u - 3
        verdict = "supported" if score >= self.threshold else "unsupported"
        return JudgeAnswer(text=json.dumps({"verdict": verdict, "evidence": "", "rationale": "stand-in"}),
                           finish_reason="stop", judge_score=score)


def with_run_options(kw: dict) -> dict:
    """score_run keywords with RunOptions' fields (use_cache, batch, ...) gathered into `run=`:
    the tests' helpers take them flat."""
    import dataclasses

    from memjudge.scoring.engine import RunOptions

    names = {f.name for f in dataclasses.fields(RunOptions)}
    run = {k: kw.pop(k) for k in list(kw) if k in names}
    return {**kw, "run": RunOptions(**run)} if run else kw
