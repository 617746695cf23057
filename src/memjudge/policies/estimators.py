"""The retention policies as scikit-learn-like estimators (spec §8): ``fit(frame)`` /
``apply(frame)`` / ``to_dict()``.

- ``WriteAll``: keep everything.
- ``GlobalThreshold``: keep if ``confidence >= t``.
- ``Targeted(gate=["values"] | "auto")``: keep if the category is not gated or
  ``confidence >= t``; ``"auto"`` gates the lowest-support category of the fit set.
- ``PerCategory``: one threshold per category.

``frame`` is a DataFrame with ``category``, ``confidence`` and ``verdict`` (a string, or
null for "no valid verdict"; only ``"supported"`` counts as supported) — or boolean ``valid``
and ``supported`` columns instead of ``verdict``. A third verdict (``"partial"``, or any label
but supported/unsupported) is a valid verdict that is not supported, so it lowers
faithfulness; with ``strict_binary=True`` it is no valid verdict (left out of faithfulness
like null, still counted in retention).

Every fit goes through the one kernel, `memjudge.policies.kernel.SortedSample.fit` (the rule
is stated there), which the comparison's cross-validation also uses; ``to_dict()`` is the
exported policy that `memjudge.gate` reads (`memjudge compare --export-policy` writes exactly
``fit(...).to_dict(...)``).
"""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pandas as pd

from memjudge.errors import UsageError
from memjudge.gate import FORMAT as POLICY_FORMAT
from memjudge.gate import SUPPORTED_VERSIONS
from memjudge.policies.kernel import NEG_INF, KernelFit, SortedSample, check_method

POLICY_VERSION = SUPPORTED_VERSIONS[-1]  # written files are the newest version the gate reads


def frame_arrays(frame: pd.DataFrame, strict_binary: bool = False):
    """(category, confidence, valid, supported) arrays from a frame with a verdict column
    (or boolean ``valid``/``supported`` columns). `strict_binary`: only supported/unsupported
    verdicts are valid."""
    for col in ("category", "confidence"):
        if col not in frame.columns:
            raise UsageError(f"policy frame needs a {col!r} column")
    cat = frame["category"].astype(str).to_numpy()
    conf = frame["confidence"].to_numpy(dtype=float)
    if np.isnan(conf).any():
        raise UsageError("every candidate needs a confidence to fit or apply a retention policy")
    if "verdict" in frame.columns:
        v = frame["verdict"]
        valid = (v.isin(("supported", "unsupported")) if strict_binary else v.notna()).to_numpy()
        sup = (v == "supported").to_numpy() & valid
    elif "supported" in frame.columns:
        valid = frame["valid"].to_numpy(dtype=bool) if "valid" in frame.columns else np.ones(len(frame), bool)
        sup = frame["supported"].to_numpy(dtype=bool) & valid
    else:
        valid = np.zeros(len(frame), bool)
        sup = valid
    return cat, conf, valid, sup


def fit_summary(keep, valid, sup) -> dict:
    n = len(keep)
    kv = (keep & valid).sum()
    return {
        "n": int(n),
        "faithfulness": float((keep & sup).sum() / kv) if kv else None,
        "retention": float(keep.sum() / n) if n else None,
    }


class RetentionPolicy:
    """The estimators' shared part: the floor, the kernel fit, the fit-set summary and the
    exported JSON."""

    kind = ""

    def __init__(self, floor: float = 0.8, *, strict_binary: bool = False):
        if not 0.0 <= floor <= 1.0:
            raise UsageError(f"floor must be in [0, 1], got {floor}")
        self.floor = float(floor)
        self.strict_binary = bool(strict_binary)
        self.fit_info_: dict = {}

    def fit(self, frame: pd.DataFrame) -> RetentionPolicy:
        raise NotImplementedError

    def _keep(self, cat: np.ndarray, conf: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _arrays(self, frame):
        return frame_arrays(frame, self.strict_binary)

    def _kernel(self, frame, gate_spec, per_category: bool = False, method: str = "greedy"):
        """(category names, `KernelFit`) of the one fitting kernel on the whole frame; gate_spec
        is a list of category names or "auto" (names absent from the frame gate nothing)."""
        cat, conf, valid, sup = self._arrays(frame)
        names, codes = np.unique(cat, return_inverse=True)
        gate = gate_spec if gate_spec == "auto" else np.flatnonzero(np.isin(names, list(gate_spec)))
        sample = SortedSample(codes, conf, valid, sup, len(names))
        return names, sample.fit(gate=gate, floor=self.floor, per_category=per_category, method=method)

    def _finish_fit(self, frame):
        cat, conf, valid, sup = self._arrays(frame)
        self.fit_info_ = {**fit_summary(self._keep(cat, conf), valid, sup), "strict_binary": self.strict_binary}
        return self

    def apply(self, frame: pd.DataFrame) -> np.ndarray:
        """Boolean mask: True = write this candidate to memory."""
        cat, conf, _, _ = frame_arrays(frame)
        return self._keep(cat, conf)

    def thresholds(self) -> dict[str, float]:
        return {}

    def default_threshold(self) -> float:
        return NEG_INF

    def gate(self) -> list[str] | None:
        return None

    def to_dict(self, **fitted_on) -> dict:
        """The exported policy (read by `memjudge.gate`); −∞ is written as null. `fitted_on`
        adds provenance to the fit-set summary."""
        def num(t):
            return None if t == NEG_INF else float(t)

        return {
            "format": POLICY_FORMAT,
            "version": POLICY_VERSION,
            "kind": self.kind,
            "thresholds": {c: num(t) for c, t in sorted(self.thresholds().items())},
            "default_threshold": num(self.default_threshold()),
            "gate": self.gate(),
            "floor": self.floor,
            "fitted_on": {**self.fit_info_, **fitted_on,
                          "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")},
        }


class WriteAll(RetentionPolicy):
    """Keep every candidate."""

    kind = "write_all"

    def fit(self, frame):
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        return np.ones(len(conf), dtype=bool)


class GlobalThreshold(RetentionPolicy):
    """Keep if confidence ≥ t, one t for all categories."""

    kind = "global"

    def fit(self, frame):
        _, k = self._kernel(frame, [])
        self.threshold_ = k.global_threshold
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        return conf >= self.threshold_

    def default_threshold(self):
        return self.threshold_


def _gate_names(names: np.ndarray, k: KernelFit, gate_spec) -> list[str]:
    """The gated categories: the kernel's choice for "auto", else the requested names (also
    those absent from the fit set, which the exported policy still gates)."""
    return [str(names[c]) for c in k.gate_codes] if gate_spec == "auto" else list(gate_spec)


class Targeted(RetentionPolicy):
    """Keep if the category is not gated or confidence ≥ t (one t for the gated categories)."""

    kind = "targeted"

    def __init__(self, gate=("values",), floor: float = 0.8, *, strict_binary: bool = False):
        super().__init__(floor, strict_binary=strict_binary)
        self.gate_spec = gate if gate == "auto" else list(gate)

    def fit(self, frame):
        names, k = self._kernel(frame, self.gate_spec)
        self.gate_ = _gate_names(names, k, self.gate_spec)
        self.threshold_ = k.targeted_threshold
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        return ~np.isin(cat, self.gate_) | (conf >= self.threshold_)

    def thresholds(self):
        return {c: self.threshold_ for c in self.gate_}

    def gate(self):
        return list(self.gate_)


class PerCategory(RetentionPolicy):
    """One threshold per category, fitted to maximise faithfulness subject to the floor.

    Candidate thresholds of a category: −∞, its distinct confidences, and the lowest confidence
    of the whole fit set above its maximum (so the category can be dropped whole). Every global
    or targeted threshold maps onto this grid with identical decisions on the fit set.

    ``method="greedy"`` (default; linear in the data) — coordinate ascent:

    1. Start from the better — by (faithfulness, retained) — of the fitted global and targeted
       solutions (``gate`` as for `Targeted`), mapped onto the grid (the lowest grid threshold
       making the same decisions).
    2. Visit the categories in sorted order; for each, take the best feasible threshold given
       the others (max faithfulness, ties → lowest threshold) and accept it when
       (faithfulness, retained) improves lexicographically. Repeat full passes until one
       changes nothing.

    Step 1 and the monotone acceptance rule make it never worse on the fit set than
    `GlobalThreshold` or `Targeted`; it ends where no single category's threshold can improve,
    which is not always the global optimum.

    ``method="exact"`` — the global optimum on the grid: from the greedy solution, Dinkelbach
    iterations on the ratio, each an exact multiple-choice knapsack (dynamic programming over
    the number removed, integer arithmetic); among optimal solutions, the one retaining most
    (then the lowest thresholds, resolved from the last category backwards). Its cost grows
    with (number of removable candidates) × (grid points), so it suits paper-scale data.

    A category unseen at fit time is admitted (threshold −∞). The exported ``gate`` is the one
    the starting targeted solution used.
    """

    kind = "per_category"

    def __init__(self, gate=("values",), floor: float = 0.8, method: str = "greedy", *, strict_binary: bool = False):
        super().__init__(floor, strict_binary=strict_binary)
        check_method(method)
        self.gate_spec = gate if gate == "auto" else list(gate)
        self.method = method

    def fit(self, frame):
        names, k = self._kernel(frame, self.gate_spec, per_category=True, method=self.method)
        self.gate_ = _gate_names(names, k, self.gate_spec)
        self.thresholds_ = {str(c): float(t) for c, t in zip(names, k.thresholds("per_category"))}
        return self._finish_fit(frame)

    def _keep(self, cat, conf):
        thr = pd.Series(cat).map(self.thresholds_).fillna(NEG_INF).to_numpy(dtype=float)
        return conf >= thr

    def thresholds(self):
        return dict(self.thresholds_)

    def gate(self):
        return list(self.gate_)


POLICIES = {"write_all": WriteAll, "global": GlobalThreshold, "targeted": Targeted, "per_category": PerCategory}


def make_policy(kind: str, *, gate=("values",), floor: float = 0.8, method: str = "greedy",
                strict_binary: bool = False) -> RetentionPolicy:
    if kind not in POLICIES:
        raise UsageError(f"unknown policy {kind!r} (expected one of {', '.join(POLICIES)})")
    if kind == "per_category":
        return PerCategory(gate=gate, floor=floor, method=method, strict_binary=strict_binary)
    if kind == "targeted":
        return POLICIES[kind](gate=gate, floor=floor, strict_binary=strict_binary)
    return POLICIES[kind](floor=floor, strict_binary=strict_binary)


def export_policy(policy: RetentionPolicy, path, **fitted_on) -> dict:
    """Write a fitted policy as the JSON that `memjudge.gate.load_policy` reads."""
    from memjudge.formats import write_json

    d = policy.to_dict(**fitted_on)
    write_json(path, d)
    return d


__all__ = ["POLICIES", "POLICY_FORMAT", "POLICY_VERSION", "GlobalThreshold", "PerCategory", "RetentionPolicy",
           "Targeted", "WriteAll", "export_policy", "fit_summary", "frame_arrays", "make_policy"]
