"""The rows of a run and the files of its folder.

Support: one label row per (assertion, replicate) (spec §6), with the candidates' extra
columns. Coverage: one row per (reference fact, replicate), or one `(unanswered)` row for a
persona whose judge-listed facts are unknown. Every file is replaced atomically (a reader or
a kill never sees half of one): labels/coverage JSONL (and Parquet), the journal when it
is compacted, config.json (with every secret redacted).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import operator
import sys
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pandas as pd

from memjudge import formats as io
from memjudge._util import files
from memjudge._util.secrets import redact
from memjudge.judges import Judge, JudgeCall
from memjudge.judges.rubrics import Rubric, evidence_found, normalise_ws
from memjudge.scoring.answers import LabelAnswer, Task
from memjudge.scoring.jsonl import json_line, lenient
from memjudge.scoring.plan import Plan
from memjudge.scoring.store import JOURNAL, journal_text

REPLICATE_OF = io.REPLICATE_OF

UNANSWERED_FACT = "(unanswered)"  # coverage row of a persona whose judge-listed facts are unknown
EXTRA_LABEL_COLUMNS = ["finish_reason", "model_version", "simulated"]
# judge_score: a per-fact call's log-odds that some shown candidate states the fact (the
# embedded judge's best candidate); candidate_scores: its log-odds per candidate shown.
EXTRA_COVERAGE_COLUMNS = ["cached", "judge_score", "candidate_scores"]


def label_row(item: dict, replicate: int, task: Task, judge: Judge, rubric: Rubric, found: bool | None, extras: dict) -> dict:
    """One row of labels.jsonl; `found` is `evidence_found` of the answer's quote in the source."""
    return _label_row(item, replicate, task, (judge.spec, rubric.id, bool(getattr(judge, "simulated", False))), found, extras)


def _label_row(item: dict, replicate: int, task: Task, run: tuple[str, str, bool], found: bool | None, extras: dict) -> dict:
    # `run`: (judge spec, rubric id, simulated), the same on every row of the run
    rec = task.record
    if type(rec) is LabelAnswer:
        row = {
            "assertion_id": item["assertion_id"], "persona_id": item["persona_id"], "category": item["category"],
            "judge": run[0], "rubric": run[1], "replicate": replicate,
            "verdict": rec.verdict, "judge_score": rec.judge_score, "evidence": rec.evidence,
            "evidence_found": found, "rationale": rec.rationale, "error": None,
            "cached": task.origin in ("journal", "cache"), "usage": rec.usage, "latency_s": rec.latency_s,
            "finish_reason": rec.finish_reason, "model_version": rec.model_version, "simulated": run[2],
        }
    elif rec is not None:
        a = rec["answer"]
        row = {
            "assertion_id": item["assertion_id"], "persona_id": item["persona_id"], "category": item["category"],
            "judge": run[0], "rubric": run[1], "replicate": replicate,
            "verdict": a.get("verdict"), "judge_score": rec.get("judge_score"), "evidence": a.get("evidence"),
            "evidence_found": found, "rationale": a.get("rationale"), "error": None,
            "cached": task.origin in ("journal", "cache"), "usage": rec.get("usage"), "latency_s": rec.get("latency_s"),
            "finish_reason": rec.get("finish_reason"), "model_version": rec.get("model_version"), "simulated": run[2],
        }
    else:
        row = {
            "assertion_id": item["assertion_id"], "persona_id": item["persona_id"], "category": item["category"],
            "judge": run[0], "rubric": run[1], "replicate": replicate,
            "verdict": None, "judge_score": None, "evidence": None, "evidence_found": None, "rationale": None,
            "error": task.error, "cached": False, "usage": task.usage, "latency_s": task.latency_s,
            "finish_reason": task.finish_reason, "model_version": task.model_version, "simulated": run[2],
        }
    if extras:
        row.update(extras)
    return row


def coverage_rows(persona: str, replicate: int, task: Task, judge: Judge, rubric: Rubric, facts: list[dict] | None) -> list[dict]:
    """The rows of one coverage call: one per reference fact it asks about (or per fact the judge
    listed). A fact its kept answer still lacks is null with its own error, never "not covered"."""
    # A coverage run's records stay dicts: only a support run's are lightened (LabelAnswer).
    rec = cast("dict | None", task.record)
    cached = task.origin in ("journal", "cache")
    scores = (rec or {}).get("candidate_scores")

    def row(fact_id, fact_text, covered_by, error, cached):
        answered = covered_by is not None
        return {"persona_id": persona, "fact_id": fact_id, "fact_text": fact_text, "covered_by": covered_by, "judge": judge.spec,
                "rubric": rubric.id, "replicate": replicate, "error": error, "cached": cached,
                # answered: `covered_by` came from the record, so there is one
                "judge_score": cast(dict, rec).get("judge_score") if answered and rubric.per_fact else None,
                "candidate_scores": scores if answered and rubric.per_fact else None}

    if rec is None:
        listed = facts if facts else [{"id": UNANSWERED_FACT, "text": None}]
        return [row(f["id"], f["text"], None, task.error, False) for f in listed]
    by_id = {f["fact_id"]: f for f in rec["answer"]["facts"]}
    if facts:
        missing = rec.get("unanswered") or {}
        return [row(f["id"], f["text"], by_id[f["id"]]["covered_by"], None, cached) if f["id"] in by_id
                else row(f["id"], f["text"], None, missing.get(f["id"], task.error) or "no valid answer for this fact", False)
                for f in facts]
    return [row(f["fact_id"], f.get("fact"), f["covered_by"], None, cached) for f in rec["answer"]["facts"]]


def _order_columns(df: pd.DataFrame, front: list[str]) -> pd.DataFrame:
    return df[[c for c in front if c in df.columns] + [c for c in df.columns if c not in front]]


class _EvidenceFound:
    """`evidence_found` of each call's quote, once per persona and quote (replicates, and a
    persona's answers, often quote the same words; a large plan's rows are made twice, for the
    frame and the file), with each persona's source whitespace-normalised once rather than once per row.
    Not memoised per call: two million calls would hold a dict of two million keys for it."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.sources: dict[str, str] = {}
        self.by_quote: dict[tuple[str, str], bool | None] = {}  # (persona, quote) -> found

    def __call__(self, rec: dict | LabelAnswer | None, persona: str) -> bool | None:
        """`evidence_found` of the quote of `rec` (a task's record) in `persona`'s source."""
        if rec is None:
            found = None
        else:
            evidence = rec.evidence if type(rec) is LabelAnswer else rec["answer"].get("evidence")
            quote = (persona, evidence) if type(evidence) is str else None
            if quote is not None and quote in self.by_quote:
                found = self.by_quote[quote]
            else:
                source = self.sources.get(persona)
                if source is None:
                    source = self.sources[persona] = normalise_ws(self.plan.source_of[persona])
                found = evidence_found(evidence, source, normalised=True)
                if quote is not None:
                    self.by_quote[quote] = found
        return found


_TEXT_TYPES = {str, type(None)}


# Rows a LabelRows of up to this many keeps from its first read (~1 KB each): the frame and then
# the file read them, and making them twice was ~8% of a small cached rerun.
_KEEP_ROWS = 32768


class LabelRows:
    """The label rows of a support plan, each made when it is read: iterating again makes them
    again, equal (a run of a million items never holds them all as dicts: the frame is built
    from them column by column, then the JSONL is written from them chunk by chunk). A plan of
    up to `_KEEP_ROWS` rows keeps them from the first read."""

    def __init__(self, plan: Plan, judge: Judge, rub: Rubric):
        self.plan = plan
        self.run = (judge.spec, rub.id, bool(getattr(judge, "simulated", False)))
        self.found = _EvidenceFound(plan)
        self._kept: list[dict] | None = None

    def __len__(self) -> int:
        return len(self.plan.slots)

    def __iter__(self) -> Iterator[dict]:
        if self._kept is not None:
            return iter(self._kept)
        if len(self.plan.slots) <= _KEEP_ROWS:
            self._kept = list(self._made())
            return iter(self._kept)
        return self._made()

    def _made(self) -> Iterator[dict]:
        tasks, run, found, derived = self.plan.tasks, self.run, self.found, self.plan.derived_replicates
        restore = self.plan.restore
        for key, item, r, extras in self.plan.slots:
            task = tasks[key]
            if restore is not None and task.record is not None:
                task = restored_task(task, restore, item["persona_id"])
            row = _label_row(item, r, task, run, found(task.record, item["persona_id"]), extras)
            if derived:  # the replicate the row's answer was asked as; null where it is the row's own
                call = task.call
                assert call is not None  # the tasks of derived replicates keep their calls (Lightener.keep_calls)
                asked = call.replicate
                row[REPLICATE_OF] = asked if asked != r else None
            yield row


def restored_task(task: Task, restore: Any, persona: str) -> Task:
    """`task` with its answer's evidence and rationale mapped back (--private): a copy, so the
    journal and the cache keep what the judge said."""
    rec = task.record
    if type(rec) is LabelAnswer:
        light = copy.copy(rec)
        light.evidence = restore.evidence(persona, rec.evidence)
        light.rationale = restore.text(persona, rec.rationale)
        return dataclasses.replace(task, record=light)
    return dataclasses.replace(task, record={**cast(dict, rec), "answer": restore.answer(persona, cast(dict, rec)["answer"])})


_CHUNK_ROWS = 8192  # rows turned into columns (or JSONL text) at a time


def rows_frame(rows: Iterable[dict], front: list[str]) -> pd.DataFrame:
    """`pd.DataFrame(list(rows))` with the `front` columns first (the others after them, as
    first seen) and text as objects (`text_as_objects`), built column by column: a column of
    text (str or None throughout: most of a label row) goes in as objects as it is, rather than
    through pandas' string inference and back; the others are inferred by pandas as before.
    `rows` is read once, or twice when they are not all of one shape (a list, or LabelRows)."""
    it = iter(rows)
    first = next(it, None)
    if first is None:
        return pd.DataFrame(columns=front)
    keys = first.keys()
    names: list[str] = [c for c in front if c in keys] + [c for c in keys if c not in front]
    columns: dict[str, list] = {c: [] for c in names}
    values: Sequence[Any]  # a chunk's column (a tuple), then a whole column (a list)
    take = operator.itemgetter(*names) if len(names) > 1 else (lambda row: (row[names[0]],))
    chunk = [take(first)]
    for row in it:
        if row.keys() != keys:  # rows of different shapes: pandas aligns them
            return io.text_as_objects(_order_columns(pd.DataFrame(list(rows)), front))
        chunk.append(take(row))
        if len(chunk) >= _CHUNK_ROWS:
            for col, values in zip(columns.values(), zip(*chunk)):
                col.extend(values)
            chunk.clear()
    for col, values in zip(columns.values(), zip(*chunk)):
        col.extend(values)
    del chunk
    # One column at a time, its list let go once it is made: the lists, the rows that pandas
    # infers from and the frame are never all held at once (two million rows: ~8 bytes per
    # cell each, and a tuple per row for the inferred columns).
    made: dict[str, pd.Series] = {}
    for c in names:
        values = columns.pop(c)
        if set(map(type, values)) <= _TEXT_TYPES:
            made[c] = pd.Series(values, dtype=object)
        else:
            # pandas infers each column of a frame made from rows on its own: the same dtype
            # as from all the rows at once
            made[c] = io.text_as_objects(pd.DataFrame(list(zip(values)), columns=[c]))[c]
        del values
    return pd.DataFrame(made)


def jsonl_chunks(rows: Iterable[dict]) -> Iterator[str]:
    """The JSONL text of `rows`, a chunk of lines at a time (for `write_lines`)."""
    lines: list[str] = []
    for row in rows:
        lines.append(json_line(row))
        if len(lines) >= _CHUNK_ROWS:
            yield "".join(lines)
            lines.clear()
    if lines:
        yield "".join(lines)


def make_rows(plan: Plan, judge: Judge, rub: Rubric) -> tuple[pd.DataFrame | None, pd.DataFrame | None, Iterable[dict]]:
    """(labels, coverage, the rows as dicts: LabelRows for support, made again when read (kept
    when few); a list for coverage): one of the frames is None, by the rubric's kind."""
    tasks = plan.tasks
    if rub.kind == "support":
        cols = io.LABEL_COLUMNS + EXTRA_LABEL_COLUMNS + ([REPLICATE_OF] if plan.derived_replicates else [])
        rows: Iterable[dict] = LabelRows(plan, judge, rub)
        labels = rows_frame(rows, cols)
        if plan.derived_replicates:
            # the tasks of derived replicates keep their calls (Lightener.keep_calls)
            asked = [cast(JudgeCall, tasks[key].call).replicate for key, _item, _r, _extras in plan.slots]
            labels[REPLICATE_OF] = pd.array([a if a != r else None for a, (_k, _i, r, _e) in zip(asked, plan.slots)], dtype="Int64")
        return labels, None, rows
    restore = plan.restore
    rows = [row for key, pid, r, facts in plan.slots
            for row in coverage_rows(pid, r, restored_task(tasks[key], restore, pid) if restore is not None and tasks[key].record is not None
                                     else tasks[key], judge, rub, facts)]
    return None, io.text_as_objects(pd.DataFrame(rows, columns=io.COVERAGE_COLUMNS + EXTRA_COVERAGE_COLUMNS)), rows


def to_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Parquet wants one type per column; an extra column mixing types (JSON allows it) is
    written as text rather than failing after the judging is done."""
    import io as _bytes_io

    buf = _bytes_io.BytesIO()
    try:
        frame.to_parquet(buf, index=False)
    except Exception:  # pyarrow's type errors come in several classes
        fixed = frame.copy()
        for col in fixed.columns:
            if fixed[col].dtype == object and col != "usage":
                kinds = {type(v) for v in fixed[col] if v is not None}
                if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
                    fixed[col] = [None if v is None else (v if isinstance(v, str) else json.dumps(lenient(v), ensure_ascii=False)) for v in fixed[col]]
        buf = _bytes_io.BytesIO()
        fixed.to_parquet(buf, index=False)
    io.write_atomic(path, buf.getvalue())  # pyarrow would follow a link planted at PATH.tmp


def file_digest(path: str) -> str | None:
    p = Path(path)
    if not p.is_file():
        return None
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_outputs(out_dir: Path, judge: Judge, rub: Rubric, labels, coverage, rows, kept, *, parquet, inputs, replicates,
                  judges_file, argv, cache_dir, use_cache, replicates_derived: bool = False, read_as=None,
                  privacy: dict | None = None) -> None:
    """The rows (JSONL, and Parquet if asked), the compacted journal (`kept`; None: the
    journal already holds exactly these answers) and config.json."""
    io.make_dir(out_dir)
    frame, name = (labels, "labels") if labels is not None else (coverage, "coverage")
    files.write_lines(out_dir / f"{name}.jsonl", jsonl_chunks(rows))
    if parquet:
        to_parquet(frame, out_dir / f"{name}.parquet")
    # The journal keeps the valid answers of this job (it is the run's own memory when the
    # cache is cleared or elsewhere); written atomically like the outputs. Its other answers
    # were copied into the cache when the run began (without a cache, `kept` holds them).
    if kept is not None:
        io.write_atomic(out_dir / JOURNAL, journal_text(kept))
    from memjudge import __version__

    config = {
        "memjudge_version": __version__,
        "command": argv,
        "judge": {**judge.label_identity(rub.kind), "endpoint": judge.endpoint, "simulated": bool(judge.simulated),
                  "config": judge.config.model_dump(mode="json"), "effective": judge.effective() or None},
        "rubric": rub.describe(),
        "replicates": replicates,
        # a deterministic judge: replicates after the first are copies of it (label column replicate_of)
        "replicates_derived": replicates_derived,
        "inputs": {k: ({"path": v, "sha256": file_digest(v), **(read_as or {}).get(k, {})} if v else None) for k, v in inputs.items()},
        "judges_file": str(judges_file) if judges_file else None,
        "cache_dir": str(cache_dir) if cache_dir else None,
        "use_cache": use_cache,
        "python": sys.version.split()[0],
        "privacy": privacy,
    }
    io.write_json(out_dir / "config.json", json.loads(redact(io.dumps(config))))


__all__ = ["EXTRA_COVERAGE_COLUMNS", "EXTRA_LABEL_COLUMNS", "UNANSWERED_FACT", "LabelRows", "coverage_rows", "file_digest", "jsonl_chunks",
           "label_row", "make_rows", "restored_task", "rows_frame", "to_parquet", "write_outputs"]
