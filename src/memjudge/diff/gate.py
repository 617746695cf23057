"""The CI gate over a `DiffResult` (spec §12): a pure function returning the decision.

- ``fail_if_worse=M``: fails when NEW is worse than BASE by more than M with 95% confidence,
  i.e. the interval's upper end of NEW − BASE lies below −M, for the overall support rate or any
  gated category.
- ``require_noninferior=M``: fails unless the interval's lower end lies above −M for the overall
  rate and every gated category (a non-inferiority test: an underpowered comparison fails, and
  the reason says how many personas, and items at the present items per persona, would do).
- Gated categories: ``categories`` (default: every category of ``by_category``); a figure
  without an interval cannot show non-inferiority (it fails that rule) nor show a drop.
- Several figures, one confidence: ``fail_if_worse`` fails when *any* gated figure shows a drop,
  so with k figures each one's upper end is taken at the Bonferroni level 1 − 0.05/k (from the
  same bootstrap resamples): a run no worse anywhere fails with chance at most 2.5% in all, not
  2.5% per figure. ``require_noninferior`` needs *every* figure to clear the margin (an
  intersection-union test), which holds its level with each figure's own 95% interval.

The first figure that fails decides (overall first, then categories in order); with none
failing, the reason names the figure closest to failing, with its interval.
"""

from __future__ import annotations

from dataclasses import replace

from memjudge._util.text import pts
from memjudge.diff.paired import more_needed, simultaneous_bounds
from memjudge.diff.result import DiffResult, Gate, Triple
from memjudge.diff.text import margin_points
from memjudge.errors import UsageError

__all__ = ["apply_gate"]


def _interval(t: Triple) -> str:
    d = t.difference
    return f"{pts(d.value)} points [{pts(d.lo)}, {pts(d.hi)}]"


def _figures(result: DiffResult, categories) -> list[tuple[str, Triple]]:
    figs = [("overall", result.overall)]
    if categories is not None:
        unknown = [c for c in categories if c not in result.by_category]
        if unknown:
            known = ", ".join(result.by_category) or "none: add --by category"
            raise UsageError(f"--gate-categories: unknown category {unknown[0]!r} (known: {known})")
        names = list(categories)
    else:
        names = list(result.by_category)
    return figs + [(f"category {c}", result.by_category[c]) for c in names]


def _family(result: DiffResult, figs: list[tuple[str, Triple]]) -> list[tuple[str, Triple]]:
    """The gated figures with their upper ends at the family-wise level (module doc)."""
    k = len(figs)
    if k == 1 or result.draws is None:
        return figs
    cats = list(result.by_category)
    cols = [0 if name == "overall" else 1 + cats.index(name.removeprefix("category ")) for name, _ in figs]
    lo, hi = simultaneous_bounds(result.draws[:, cols], result.level, k, result.personas_common)
    out = []
    for (name, t), a, b in zip(figs, lo, hi):
        d = t.difference
        if d.hi is not None and a == a and b == b:
            d = replace(d, lo=float(a), hi=float(b))
        out.append((name, replace(t, difference=d)))
    return out


def _worse(name: str, t: Triple, m: float) -> tuple[bool, float | None]:
    d = t.difference
    if d.hi is None:
        return False, None
    return d.hi < -m, d.hi + m   # slack: how far the upper end is above the failing line


def _noninferior(name: str, t: Triple, m: float) -> tuple[bool, float | None]:
    d = t.difference
    if d.lo is None:
        return True, None
    return not (d.lo > -m), d.lo + m


def apply_gate(result: DiffResult, *, fail_if_worse: float | None = None, require_noninferior: float | None = None,
               categories: list[str] | None = None) -> DiffResult:
    """The result with its `gate` decided (unchanged when no rule is asked for)."""
    rules = [(r, m) for r, m in (("fail_if_worse", fail_if_worse), ("require_noninferior", require_noninferior))
             if m is not None]
    if not rules:
        return result
    for r, m in rules:
        if not 0 <= m < 1:
            raise UsageError(f"--{r.replace('_', '-')} is a margin in [0, 1) (a share: 0.02 = 2 points), got {m}")
    figs = _figures(result, categories)
    level = int(round(100 * result.level))
    closest: tuple[float, str] | None = None
    family = _family(result, figs)
    for rule, m in rules:
        for name, t in (family if rule == "fail_if_worse" else figs):
            failed, slack = (_worse if rule == "fail_if_worse" else _noninferior)(name, t, m)
            if failed:
                gate = _failure(result, rule, m, name, t, level, len(figs))
                return replace(result, gate=gate)
            if slack is not None and (closest is None or slack < closest[0]):
                line = (f"upper end above {pts(-m)}" if rule == "fail_if_worse" else f"lower end above {pts(-m)}")
                if rule == "fail_if_worse" and family is not figs:
                    line += f" (Bonferroni interval at {_bonferroni(level, len(figs))}: {len(figs)} gated figures)"
                closest = (slack, f"{name}: NEW - BASE {_interval(t)}, {line}")
    rule_name = "+".join(r for r, _ in rules)
    margin = min(m for _, m in rules)
    why = f"passed: {closest[1]}" if closest else "passed: no figure has an interval"
    return replace(result, gate=Gate(rule=rule_name, margin=margin, failed=False, reason=why,
                                     figure=closest[1].split(":")[0] if closest else None))


def _bonferroni(level: int, k: int) -> str:
    return f"{100 - (100 - level) / k:.4g}%"


def _failure(result: DiffResult, rule: str, m: float, name: str, t: Triple, level: int, k: int) -> Gate:
    d = t.difference
    if rule == "fail_if_worse":
        over = f" over the {k} gated figures together (Bonferroni: this upper end at the {_bonferroni(level, k)} level)" \
            if k > 1 and result.draws is not None else ""
        reason = (f"failed: {name}: NEW is worse than BASE by more than {margin_points(m)} with {level}% confidence{over}: "
                  f"NEW - BASE {_interval(t)}, upper end below {pts(-m)}")
        return Gate(rule=rule, margin=m, failed=True, reason=reason, figure=name)
    if not d.estimate.has_interval:
        return Gate(rule=rule, margin=m, failed=True, figure=name,
                    reason=f"failed: {name}: no interval for NEW - BASE, so non-inferiority cannot be shown")
    units = result.personas_common
    need = more_needed(d.estimate, units, m)
    base = f"failed: {name}: non-inferiority within {margin_points(m)} not shown: NEW - BASE {_interval(t)}, lower end not above {pts(-m)}"
    if need is None:
        return Gate(rule=rule, margin=m, failed=True, figure=name,
                    reason=base + "; the estimate itself is at or below the margin, so more data would not help")
    per = (t.difference.n or 0) / units if result.mode == "items" and units else \
        ((t.base.n or 0) + (t.new.n or 0)) / (2 * units) if units else 0
    items = int(round(need * per)) if per else None
    more = f"about {need:,} common personas ({need - units:,} more)"
    if items:
        more += f", i.e. about {items:,} {'paired items' if result.mode == 'items' else 'items per run'}"
    return Gate(rule=rule, margin=m, failed=True, figure=name, personas_needed=need, items_needed=items,
                reason=f"{base}; underpowered: if the estimate held, it would need {more}")
