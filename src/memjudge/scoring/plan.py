"""From inputs to tasks: the candidates, sources and facts (files, or DataFrames checked by
the file readers' own rules), the judge (a spec, a JudgeConfig or a Judge, with the panel
file's settings and the CLI's overrides), and the plan of one run: each distinct judge call
once (its cache key), and the slots of the output rows that read its answer."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, cast

import pandas as pd

from memjudge import formats as io
from memjudge.errors import InputError, UsageError
from memjudge.judges import Judge, JudgeCall, JudgeConfig, Prompt, make_judge
from memjudge.judges.panel import judge_config
from memjudge.judges.rubrics import Rubric
from memjudge.scoring.answers import Task
from memjudge.scoring.cache import KeyMaker
from memjudge.scoring.jsonl import lenient

# ---------------------------------------------------------------------------------------
# inputs


def _frame_input(df: pd.DataFrame, reader, what: str, **kw) -> pd.DataFrame:
    """Validate a DataFrame given to the Python API with the file reader's own rules; errors
    name `<what DataFrame>` and the 1-based row."""
    label = f"<{what} DataFrame>"
    cols = [str(c) for c in df.columns]
    records = [lenient(dict(zip(cols, row))) for row in df.itertuples(index=False, name=None)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{what}.jsonl"
        io.write_jsonl(path, records)
        try:
            return reader(path, **kw)
        except InputError as e:
            raise InputError(label, e.message, e.line) from None


def read_input(obj, reader, what: str, **kw) -> tuple[pd.DataFrame, str]:
    """A path or a DataFrame read by `reader`, and how to name it in messages and config.json."""
    if isinstance(obj, pd.DataFrame):
        return _frame_input(obj, reader, what, **kw), f"<{what} DataFrame>"
    if obj is None:
        raise UsageError(f"no {what} given")
    return reader(obj, **kw), str(obj)


# ---------------------------------------------------------------------------------------
# the judge


def resolve_judge(judge: str | JudgeConfig | Judge, *, judges_file=None, **overrides) -> tuple[Judge, bool]:
    """A ready judge, and whether we made it (and so must close it): a Judge as it is, a spec or
    a JudgeConfig filled by `judge_config` (the panel file's entry, then the overrides)."""
    if isinstance(judge, Judge):
        if any(v is not None for v in overrides.values()):
            raise UsageError("judge settings cannot be overridden on a Judge instance; pass a spec or a JudgeConfig")
        return judge, False
    return make_judge(judge_config(judge, judges_file, **overrides)), True


def _path_part(name: str) -> str:
    """A name (judge spec, rubric name) as part of one file name: no separators, no way up."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.")[:100] or "_"


def default_out_dir(judge_spec: str, rubric_name: str) -> Path:
    return Path("runs") / f"{_path_part(judge_spec)}-{_path_part(rubric_name)}"


# ---------------------------------------------------------------------------------------
# the plan

# The extra columns of every item of candidates that have none: one read-only mapping rather
# than an empty dict per item (64 bytes each, a million of them).
_NO_EXTRAS: Mapping[str, Any] = MappingProxyType({})


@dataclass
class Plan:
    """Every distinct call of a run once (`tasks`, by cache key) and the output rows' slots:
    (key, item, replicate, extra columns) for support, (key, persona, replicate) for coverage."""

    tasks: dict[str, Task] = field(default_factory=dict)
    slots: list[tuple] = field(default_factory=list)
    source_of: dict[str, str] = field(default_factory=dict)
    coverage_ctx: dict[str, dict] = field(default_factory=dict)  # call key -> known assertion and fact ids
    persona_facts: dict[str, list[dict] | None] = field(default_factory=dict)  # persona -> reference facts (None: unknown)
    # A deterministic judge's support replicates r > 0 read replicate 0's call (one call per item):
    # their rows say so in `replicate_of`.
    derived_replicates: bool = False
    # call key -> the keys an earlier memjudge gave the same answer (Judge.former_call_identities)
    former_keys: dict[str, list[str]] = field(default_factory=dict)
    # --private (memjudge.privacy.Restorer): the judge saw stand-ins; its answers are mapped back
    # before the evidence check (source_of then holds the original sources) and every row.
    restore: Any = None

    @property
    def pending(self) -> list[Task]:
        return [t for t in self.tasks.values() if t.pending]


def plan_calls(judge: Judge, rub: Rubric, cands: pd.DataFrame, srcs: pd.DataFrame, fact_df: pd.DataFrame | None,
               replicates: int, extra_names: dict[str, str]) -> Plan:
    """The run's calls: one per (item, replicate) for support, per (persona, replicate) for
    coverage (per (reference fact, replicate) for a per-fact coverage rubric); equal prompts
    share one call (and one answer). A deterministic judge (Judge.deterministic) is asked once
    per support item: every replicate's slot reads replicate 0's call."""
    derived = rub.kind == "support" and replicates > 1 and judge.deterministic
    plan = Plan(source_of=dict(zip(srcs["persona_id"], srcs["source"])), derived_replicates=derived)
    keys = KeyMaker(judge.call_identity(rub.kind), rub.cache_identity())
    former = [KeyMaker(ident, rub.cache_identity()) for ident in judge.former_call_identities(rub.kind)]
    tasks, slots, source_of = plan.tasks, plan.slots, plan.source_of
    extras_cols = list(extra_names)
    rubric_id, schema = rub.id, rub.model

    def add(call_prompt: Prompt, key: str, item: dict, r: int, fields: dict | None = None, prefix: str = "") -> str:
        if key not in tasks:
            tasks[key] = Task(JudgeCall(key=key, rubric=rubric_id, prompt=call_prompt, schema=schema, replicate=r, item=item,
                                        fields=fields or {}))
            if former:
                plan.former_keys[key] = [k.keys(call_prompt, [r], prefix)[0] for k in former]
        return key

    if rub.kind == "support":
        asked = [0] if derived else list(range(replicates))
        renderers: dict = {}
        # The readers made the first four columns text (tolist: one conversion, not one per
        # value); extra columns yield what itertuples would.
        columns = [cands[c].tolist() for c in ("persona_id", "assertion_id", "category", "text")] + [cands[c] for c in extras_cols]
        for values in zip(*columns):
            pid, aid, cat, text = values[:4]
            extras = {extra_names[c]: v for c, v in zip(extras_cols, values[4:])} if extras_cols else _NO_EXTRAS
            render = renderers.get(pid)
            if render is None:   # one render of the template per persona; its items are spliced in
                render = renderers[pid] = rub.support_renderer(source=source_of[pid], persona_id=pid)
            prompt = render(text, cat, aid)
            item = {"assertion_id": aid, "persona_id": pid, "category": cat}
            fields = {"source": source_of[pid], "assertion": text, "category": cat}
            item_keys = keys.keys(prompt, asked, render.prefix)
            for r in range(replicates):
                a = 0 if derived else r
                slots.append((add(prompt, item_keys[a], item, a, fields, render.prefix), item, r, extras))
    else:
        # the readers made persona_id text
        by_persona = cast("dict[str, pd.DataFrame]", {pid: g for pid, g in cands.groupby("persona_id", sort=False)})
        facts_by = {pid: g for pid, g in fact_df.groupby("persona_id", sort=False)} if fact_df is not None else {}
        if rub.per_fact and fact_df is None:
            raise UsageError(f"rubric {rub.name!r} asks one call per reference fact: it needs --facts")
        for pid, g in by_persona.items():
            assertions = [{"id": a, "text": t, "category": c} for a, t, c in zip(g["assertion_id"], g["text"], g["category"])]
            if fact_df is not None:
                if pid not in facts_by:
                    continue  # no reference facts for this persona: nothing to cover
                fl = [{"id": i, "text": t} for i, t in zip(facts_by[pid]["fact_id"], facts_by[pid]["text"])]
            else:
                fl = None
            plan.persona_facts[pid] = fl
            # One call per persona, or one per fact with only its closest candidates.
            groups = [([f], closest_candidates(f["text"], assertions, rub.candidates or 1)) for f in fl or []] if rub.per_fact \
                else [(fl, assertions)]
            for facts, shown in groups:
                prompt = rub.render_coverage(source=source_of[pid], assertions=shown, facts=facts, persona_id=pid)
                # a per-fact group's facts are its one fact, [f]
                item = {"persona_id": pid, **({"fact_id": cast("list[dict]", facts)[0]["id"]} if rub.per_fact else {})}
                fields = {"source": source_of[pid], "persona_id": pid, "facts": facts or [], "assertions": shown}
                for r, key in enumerate(keys.keys(prompt, range(replicates))):
                    key = add(prompt, key, item, r, fields)
                    plan.coverage_ctx[key] = {"assertion_ids": {a["id"] for a in shown},
                                              "fact_ids": [f["id"] for f in facts] if facts else None}
                    slots.append((key, pid, r, facts))
    return plan


def closest_candidates(fact: str, assertions: list[dict], k: int) -> list[dict]:
    """The `k` of a persona's candidates most likely to state `fact`: highest Okapi BM25 of the
    fact's words against each candidate's text (the persona's candidates are the collection;
    the embedded judge's premise selection uses the same scorer), ties in file order, best
    first."""
    from memjudge.judges.local_premise import bm25_scores, tokens

    scores = bm25_scores(tokens(fact), [tokens(a["text"]) for a in assertions])
    ranked = sorted(range(len(assertions)), key=lambda i: (-scores[i], i))[:k]
    return [assertions[i] for i in ranked]


__all__ = ["Plan", "closest_candidates", "default_out_dir", "plan_calls", "read_input", "resolve_judge"]
