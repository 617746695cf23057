"""Comparing two runs: `memjudge diff` (spec §12).

Did NEW get better than BASE? `diff_labels` (two labels frames) or `diff_runs` (two run
folders) return a `DiffResult` — support rates of both runs and NEW − BASE with persona-paired
bootstrap intervals, overall and per category; McNemar's test and the changed items when the
candidates are the same; PPI++ with gold; coverage and Table 1 side by side — and `apply_gate`
decides a CI gate on it.

Layout: `paired` (the statistics), `compare` (the comparison of two labels frames), `runs`
(run folders), `gate` (the CI gate), `result` (the shape of diff.json), `text` (terminal and
Markdown views).
"""

from __future__ import annotations

from memjudge.diff.compare import diff_labels
from memjudge.diff.gate import apply_gate
from memjudge.diff.result import DiffResult
from memjudge.diff.runs import diff_runs

__all__ = ["DiffResult", "apply_gate", "diff_labels", "diff_runs"]
