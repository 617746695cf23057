"""Retention policies (spec §8): which candidate assertions a memory system writes.

- `memjudge.policies.kernel` — the one fitting kernel on arrays (`SortedSample.fit`, the rule
  and its cumulative-sum computation), used by the estimators and by the comparison's
  cross-validation protocol alike;
- `memjudge.policies.estimators` — ``WriteAll``, ``GlobalThreshold``, ``Targeted``,
  ``PerCategory``: scikit-learn-like ``fit(frame)`` / ``apply(frame)`` / ``to_dict()`` (the
  exported policy that `memjudge.gate` reads);
- `memjudge.policies.splitter` — ``RepeatedGroupKFold``, the persona-grouped repeated K-fold
  splits of spec §8.

Imports run one way: splitter and kernel depend on nothing here, estimators on the kernel.
"""

from __future__ import annotations

from memjudge.policies.estimators import (
    POLICIES,
    POLICY_FORMAT,
    POLICY_VERSION,
    GlobalThreshold,
    PerCategory,
    RetentionPolicy,
    Targeted,
    WriteAll,
    export_policy,
    fit_summary,
    frame_arrays,
    make_policy,
)
from memjudge.policies.kernel import (
    FITTED_KINDS,
    NEG_INF,
    PER_CATEGORY_METHODS,
    KernelFit,
    Options,
    SortedSample,
    category_options,
    choose,
    fit_per_category_sorted,
    fit_threshold,
    lowest_support_category,
    sorted_options,
    support_by_category,
)
from memjudge.policies.splitter import RepeatedGroupKFold, fold_assignment

__all__ = [
    "FITTED_KINDS", "NEG_INF", "PER_CATEGORY_METHODS", "POLICIES", "POLICY_FORMAT", "POLICY_VERSION",
    "GlobalThreshold", "KernelFit", "Options", "PerCategory", "RepeatedGroupKFold", "RetentionPolicy",
    "SortedSample", "Targeted", "WriteAll", "category_options", "choose", "export_policy",
    "fit_per_category_sorted", "fit_summary", "fit_threshold", "fold_assignment", "frame_arrays",
    "lowest_support_category", "make_policy", "sorted_options", "support_by_category",
]
