"""`compare()`: the comparison end to end — prepare the inputs (`memjudge.comparison.prepare`),
run the cross-validation protocol (`memjudge.comparison.protocol`), wrap the per-fold figures in
a `CompareResult` (`memjudge.comparison.result`) and, with gold labels, add the judge-corrected
faithfulness (`memjudge.comparison.gold`).
"""

from __future__ import annotations

from typing import cast

import numpy as np
import pandas as pd

from memjudge.comparison.gold import compare_with_gold
from memjudge.comparison.prepare import Prepared, load_labels, prepare, select_verdicts
from memjudge.comparison.protocol import POLICY_NAMES, full_sample, resolve_gate, run_protocol
from memjudge.comparison.result import CompareResult
from memjudge.errors import UsageError
from memjudge.policies.kernel import check_method
from memjudge.stats.bootstrap import B_DEFAULT


def compare(candidates, labels, coverage=None, *, judge=None, replicate=0, gate="values",
            floor: float = 0.8, repeats: int = 20, folds: int = 5, seed: int = 0,
            policies=POLICY_NAMES, per_category: str = "greedy", strict_binary: bool = False,
            B: int = B_DEFAULT, gold=None) -> CompareResult:
    """Write-all vs global vs targeted (vs per-category) by the exact protocol of spec §8.

    candidates, labels, coverage: DataFrames or paths. `gate`: "values", "a,b", a list, or
    "auto". `per_category`: "greedy" or "exact" (see `memjudge.policies.PerCategory`).
    `gold` (path or DataFrame of hand labels): each held-out faithfulness is also estimated by
    PPI++ (`memjudge.comparison.gold`); thresholds and judge-only figures are unchanged.
    `strict_binary`: a verdict other than supported/unsupported is no valid verdict (default:
    valid, not supported). `B`: bootstrap resamples for the write-all interval (seed `seed`).
    Returns a `CompareResult` (``.to_json()``, ``.table()``, ``.render()``)."""
    prep = labels if isinstance(labels, Prepared) else prepare(candidates, labels, coverage, judge=judge,
                                                               replicate=replicate, strict_binary=strict_binary)
    res = compare_prepared(prep, gate=gate, floor=floor, repeats=repeats, folds=folds, seed=seed,
                           policies=policies, per_category=per_category, B=B)
    if gold is not None:
        # the judge's raw verdicts weight a sample stratified by verdict (as `memjudge estimate`)
        verdicts = None if isinstance(labels, Prepared) else select_verdicts(
            cast(pd.DataFrame, labels if isinstance(labels, pd.Series) else load_labels(labels)), prep.judge, prep.replicate)[0]
        res.gold = compare_with_gold(res, gold, verdicts=verdicts)
    return res


def compare_prepared(prep: Prepared, *, gate="values", floor=0.8, repeats=20, folds=5, seed=0,
                     policies=POLICY_NAMES, per_category: str = "greedy", B: int = B_DEFAULT,
                     weights: np.ndarray | None = None) -> CompareResult:
    check_method(per_category)
    policies = tuple(p for p in POLICY_NAMES if p in policies)
    if "global" not in policies or "targeted" not in policies:
        raise UsageError("the comparison needs both the global and the targeted policy")
    if B < 1:
        raise UsageError(f"B (bootstrap resamples) must be at least 1, got {B}")
    g = resolve_gate(gate, prep.categories)
    detail, gates, ratio = run_protocol(prep, gate=g, floor=float(floor), repeats=repeats, folds=folds,
                                        seed=seed, policies=policies, per_category=per_category)
    return CompareResult(
        judge=prep.judge, replicate=prep.replicate, floor=float(floor), gate=g, repeats=repeats,
        folds=folds, seed=seed, write_all=full_sample(prep), folds_detail=detail, fold_gates=gates,
        test_train_ratio=ratio, prepared=prep, policy_names=policies, per_category_method=per_category,
        B=B, weights=weights,
    )


__all__ = ["compare", "compare_prepared"]
