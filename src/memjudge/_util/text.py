"""Numbers as memjudge prints them, in one convention for every table, report and CLI text.

Rates print as percent with two decimals (as the paper's Table 1), changes as signed
percentage points, coefficients (κ, α, AC1, AUC, λ) with three decimals, and an interval in
brackets after its value: ``12.34 [10.01, 14.56]``. A figure that cannot be computed prints as
`MISSING` (an em dash), everywhere.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

MISSING = "—"
# How an interval is labelled wherever one is shown (report and CLI text alike): the percentile
# interval of B persona-cluster bootstrap resamples, or of the per-fold differences of a paired
# cross-validated comparison (which resamples folds, not personas).
PERSONA_INTERVAL = "95% percentile interval (persona bootstrap)"
FOLD_INTERVAL = "95% percentile interval (per-fold differences)"


def num(x: Any) -> float | None:
    """A finite float, or None for None, NaN, ±inf, bools and anything not a real number."""
    if x is None or isinstance(x, bool) or not isinstance(x, numbers.Real):
        return None
    v = float(x)
    return v if math.isfinite(v) else None


def pct(x: Any, digits: int = 2) -> str:
    v = num(x)
    return MISSING if v is None else f"{100 * v:.{digits}f}"


def pts(x: Any, digits: int = 2) -> str:
    """A change in percentage points, always signed."""
    v = num(x)
    return MISSING if v is None else f"{100 * v:+.{digits}f}"


def coef(x: Any, digits: int = 3) -> str:
    v = num(x)
    return MISSING if v is None else f"{v:.{digits}f}"


def probability(x: Any) -> str:
    """A probability (e.g. P(gated category is the lowest)) as a fraction with three decimals."""
    return coef(x, 3)


def count(x: Any) -> str:
    v = num(x)
    return MISSING if v is None else f"{int(round(v)):,}"


def pvalue(x: Any) -> str:
    v = num(x)
    return MISSING if v is None else "< 0.001" if v < 0.001 else f"{v:.3f}"


def with_interval(fmt: Callable[[Any], str], value: Any, lo: Any = None, hi: Any = None) -> str:
    """`fmt(value)` followed by ``[fmt(lo), fmt(hi)]`` when both bounds are numbers."""
    if num(value) is None:
        return MISSING
    if num(lo) is None or num(hi) is None:
        return fmt(value)
    return f"{fmt(value)} [{fmt(lo)}, {fmt(hi)}]"


def estimate(est: Any, fmt: Callable[[Any], str] = pct) -> str:
    """An `Estimate` (or anything with value/lo/hi attributes) as ``value [lo, hi]``."""
    if est is None:
        return MISSING
    return with_interval(fmt, est.value, est.lo, est.hi)
