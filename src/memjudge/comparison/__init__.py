"""Retention-policy comparison by persona-grouped repeated cross-validation (spec §8): Table 1,
the paired targeted − global comparison, and the full-sample artefacts of `memjudge report`.

The package, in the order its modules import each other (one way, no module imports a later
one):

- `prepare` — candidates joined to one judge's verdicts and the coverage map (`Prepared`);
- `protocol` — the repeated grouped cross-validation (folds from
  `memjudge.policies.RepeatedGroupKFold`, fits by the one kernel of `memjudge.policies`) and
  the summaries of its per-fold figures (fold mean ± SD, paired changes, Nadeau–Bengio);
- `sweep` — the full-sample threshold sweep and support rate by confidence bin;
- `result` — `CompareResult`: Table 1 as dicts, a DataFrame, the fixed-key JSON
  (``compare.json``), the text table and the exported policy;
- `gold` — judge-corrected held-out faithfulness by PPI++ (``compare --gold``);
- `run` — `compare()` / `compare_prepared()`, the entry points;
- `robustness` — the comparison under every judge and replicate (``memjudge robustness``).
"""

from __future__ import annotations

from memjudge.comparison.gold import GoldComparison, compare_with_gold, ordering_sentence
from memjudge.comparison.prepare import BINARY, Prepared, judges_in, prepare, prepared_notes, select_verdicts
from memjudge.comparison.protocol import (
    METRICS,
    NEG_INF,
    POLICY_LABELS,
    POLICY_NAMES,
    change_summary,
    fold_assignment,
    full_sample,
    nadeau_bengio,
    overall_support,
    paired_summary,
    run_protocol,
    write_all_intervals,
)
from memjudge.comparison.result import CompareResult, render_table
from memjudge.comparison.run import compare, compare_prepared

__all__ = [
    "BINARY", "METRICS", "NEG_INF", "POLICY_LABELS", "POLICY_NAMES", "CompareResult", "GoldComparison", "Prepared",
    "change_summary", "compare", "compare_prepared", "compare_with_gold", "fold_assignment", "full_sample",
    "judges_in", "nadeau_bengio", "ordering_sentence", "overall_support", "paired_summary", "prepare",
    "prepared_notes", "render_table", "run_protocol", "select_verdicts", "write_all_intervals",
]
