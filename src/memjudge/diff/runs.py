"""`diff_runs`: `diff_labels` over two run folders, each read as `memjudge report` reads one.

A run folder holds ``labels.jsonl`` (or ``labels.parquet``/``labels.csv``), and where present
``coverage.jsonl`` and ``compare.json``. A path to a labels file is accepted too (then only the
labels are compared). A missing or malformed file is an `InputError` naming it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from memjudge.diff.compare import diff_labels
from memjudge.diff.result import DiffResult
from memjudge.errors import InputError

__all__ = ["RunFiles", "diff_runs", "run_files"]

LABEL_NAMES = ("labels.jsonl", "labels.parquet", "labels.csv")


@dataclass(frozen=True)
class RunFiles:
    """The files of one run that `memjudge diff` reads (None where absent)."""

    labels: Path
    coverage: Path | None
    compare: Path | None


def run_files(path) -> RunFiles:
    p = Path(path)
    if p.is_file():
        return RunFiles(p, None, None)
    if not p.is_dir():
        raise InputError(p, "no such run folder or labels file")
    labels = next((p / n for n in LABEL_NAMES if (p / n).is_file()), None)
    if labels is None:
        raise InputError(p, "no labels.jsonl in this run folder (memjudge score --out RUN_DIR writes it)")
    cov, cmp = p / "coverage.jsonl", p / "compare.json"
    return RunFiles(labels, cov if cov.is_file() else None, cmp if cmp.is_file() else None)


def _read_json(path: Path | None) -> dict | None:
    if path is None:
        return None
    from memjudge.formats import decode_file

    try:
        data = json.loads(decode_file(path))
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON: {e.msg}", e.lineno) from None
    if not isinstance(data, dict):
        raise InputError(path, "expected a JSON object")
    return data


def diff_runs(base, new, *, judge: str | None = None, replicate: int | str = 0, by: str | None = None,
              mode: str = "auto", gold=None, B: int = 2000, seed: int = 0, level: float = 0.95) -> DiffResult:
    """Compare run folders BASE and NEW (see `memjudge.diff.compare.diff_labels`)."""
    from memjudge.formats import read_coverage, read_labels

    fb, fn = run_files(base), run_files(new)
    both_cov = fb.coverage is not None and fn.coverage is not None
    return diff_labels(
        read_labels(fb.labels), read_labels(fn.labels), judge=judge, replicate=replicate, by=by, mode=mode,
        gold=gold, gold_path=gold if isinstance(gold, (str, Path)) else None,
        base_coverage=read_coverage(fb.coverage) if both_cov else None,
        new_coverage=read_coverage(fn.coverage) if both_cov else None,
        base_compare=_read_json(fb.compare), new_compare=_read_json(fn.compare),
        B=B, seed=seed, level=level, base_run=str(base), new_run=str(new))
