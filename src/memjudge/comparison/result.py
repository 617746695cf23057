"""The result of a comparison (spec §8): `CompareResult` — Table 1 and the paired
comparisons as dictionaries, a DataFrame, the fixed-key JSON and the text table — and the files
`memjudge compare --out` writes.

Table 1: per policy, fold mean ± SD (ddof = 1) of each metric; the write-all row holds the
full-sample values and the change against write-all uses that row (as the paper does); each
policy's paired per-fold change against write-all; the paired targeted − global comparison
(`memjudge.comparison.protocol` states the protocol and the intervals).

Files written by ``memjudge compare --out RUN_DIR`` (all fractions, null never NaN):

``compare.json`` — exactly `CompareResult.to_json()` (keys in the issue / README). Every
figure with its interval has the one shape of `memjudge.formats.estimate.Estimate`,
``{"value", "lo", "hi"}`` (null where not computable), with any other keys beside it::

    {"judge", "floor", "gate", "repeats", "folds", "seed", "B", "strict_binary",
     "write_all": {"faithfulness", "retention", "coverage"},        # full sample
     "write_all_ci": {METRIC: {"value", "lo", "hi", "n"} | null},   # persona-cluster bootstrap 95%
     "policies": {POLICY: {METRIC: {"value", "lo": null, "hi": null, "sd"} | null,  # fold mean, SD
                           "delta_faithfulness", "delta_coverage"}},
     "paired": {METRIC: {"value", "lo", "hi", "same_sign", "nb_lo", "nb_hi"} | null},
                # targeted − global: mean [2.5%, 97.5%] of per-fold differences; Nadeau–Bengio 95%
     "paired_vs_write_all": {POLICY: {METRIC: {"value", "lo", "hi", "same_sign"} | null}},
     "folds_detail": [{"repeat", "fold", "policy", "threshold", METRIC...}],
     "gold": {...} (only with --gold; `memjudge.comparison.gold`), "notes": [str, ...]}

``compare_inputs.json`` — ``{"candidates": PATH, "labels": [PATH, ...], "coverage": PATH|null,
"judge": SPEC, "replicate": 0|"majority", "per_category_method": "greedy"|"exact"}``.

``per_category`` is fitted greedily by default or exactly with ``per_category="exact"``
(``--per-category-method exact``); see `memjudge.policies.PerCategory`.

``sweep.json`` and ``calibration.json``: see `memjudge.comparison.sweep`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import pandas as pd

from memjudge._util.text import MISSING, pct, pts, with_interval
from memjudge.comparison.prepare import Prepared, prepared_notes
from memjudge.comparison.protocol import (
    METRICS,
    POLICY_LABELS,
    POLICY_NAMES,
    change_summary,
    delta,
    fit_policies,
    full_sample,
    mean_sd,
    nan_if_none,
    num,
    paired_summary,
    sorted_sample,
    write_all_intervals,
)
from memjudge.comparison.sweep import calibration, sweep
from memjudge.errors import UsageError
from memjudge.formats import json_safe
from memjudge.policies.estimators import export_policy, make_policy
from memjudge.policies.kernel import lowest_support_category
from memjudge.stats.bootstrap import B_DEFAULT


class GoldSide(Protocol):
    """What a result needs of its judge-corrected side (`memjudge.comparison.gold.GoldComparison`,
    attached by `compare(..., gold=...)`; named here by its methods so result never imports gold)."""

    def to_json(self) -> dict: ...
    def table_columns(self) -> dict: ...
    def render(self, folds_total: int) -> str: ...
    def policies(self) -> dict: ...
    def paired(self) -> dict: ...
    def ordering(self) -> dict: ...


@dataclass
class CompareResult:
    judge: str | None
    replicate: object
    floor: float
    gate: list[str] | str        # list of categories, or "auto"
    repeats: int
    folds: int
    seed: int
    write_all: dict
    folds_detail: pd.DataFrame
    fold_gates: list
    test_train_ratio: float
    prepared: Prepared
    policy_names: tuple = POLICY_NAMES
    per_category_method: str = "greedy"
    B: int = B_DEFAULT
    # resamples of personas shared with a caller (robustness) so that intervals are paired
    weights: np.ndarray | None = field(default=None, repr=False, compare=False)
    _fitted: dict | None = field(default=None, init=False, repr=False, compare=False)
    gold: GoldSide | None = field(default=None, repr=False, compare=False)  # gold.GoldComparison (--gold)
    _write_all_ci: dict | None = field(default=None, init=False, repr=False, compare=False)

    # -- summaries -------------------------------------------------------------------------
    def _metric(self, policy: str, metric: str) -> np.ndarray:
        d = self.folds_detail
        return d.loc[d["policy"] == policy, metric].to_numpy(dtype=float)

    def policies(self) -> dict:
        out = {}
        has_cov = self.prepared.coverage_measured
        for name in self.policy_names:
            f = mean_sd(self._metric(name, "faithfulness"))
            r = mean_sd(self._metric(name, "retention"))
            c = mean_sd(self._metric(name, "coverage")) if has_cov else None
            out[name] = {
                "faithfulness": f, "retention": r, "coverage": c,
                "delta_faithfulness": delta(f["value"], self.write_all["faithfulness"]),
                "delta_coverage": delta(c["value"], self.write_all["coverage"]) if c else None,
            }
        return out

    def paired(self) -> dict:
        out: dict[str, dict | None] = {}
        for m in METRICS:
            if m == "coverage" and not self.prepared.coverage_measured:
                out[m] = None
                continue
            diff = self._metric("targeted", m) - self._metric("global", m)
            out[m] = paired_summary(diff, self.test_train_ratio)
        return out

    def paired_vs_write_all(self) -> dict:
        """Per policy and metric, the change against write-all on the same held-out fold:
        mean, 2.5/97.5 percentiles of the per-fold changes, folds with the sign of the mean."""
        wa = {m: self._metric("write_all", m) for m in METRICS}
        return {name: {m: (None if m == "coverage" and not self.prepared.coverage_measured
                           else change_summary(self._metric(name, m) - wa[m])) for m in METRICS}
                for name in self.policy_names}

    def write_all_ci(self) -> dict:
        """Write-all faithfulness (overall support rate) and coverage with persona-cluster
        bootstrap intervals (B resamples, the comparison's seed)."""
        if self._write_all_ci is None:
            from memjudge.stats.bootstrap import cluster_weights

            W = self.weights if self.weights is not None else cluster_weights(len(self.prepared.personas),
                                                                              B=self.B, seed=self.seed)
            self._write_all_ci = write_all_intervals(self.prepared, W)
        return self._write_all_ci

    def notes(self) -> list[str]:
        return prepared_notes(self.prepared)

    def to_json(self) -> dict:
        d = self.folds_detail
        detail = [
            {"repeat": int(r), "fold": int(k), "policy": p, "threshold": t,
             "faithfulness": num(f), "retention": num(ret), "coverage": num(c)}
            for r, k, p, t, f, ret, c in d.itertuples(index=False, name=None)
        ]
        return {
            "judge": self.judge,
            "floor": self.floor,
            "gate": self.gate,
            "repeats": self.repeats,
            "folds": self.folds,
            "seed": self.seed,
            "B": self.B,
            "strict_binary": self.prepared.strict_binary,
            "write_all": {k: num(v) for k, v in self.write_all.items()},
            "write_all_ci": json_safe(self.write_all_ci()),
            "policies": json_safe(self.policies()),
            "paired": json_safe(self.paired()),
            "paired_vs_write_all": json_safe(self.paired_vs_write_all()),
            "folds_detail": detail,
            **({"gold": self.gold.to_json()} if self.gold is not None else {}),
            "notes": self.notes(),
        }

    def table(self) -> pd.DataFrame:
        """Table 1 as a DataFrame (fractions): one row per policy (write-all with its bootstrap
        interval), the paired targeted − global row, and each policy's paired change against
        write-all ("<policy> - write_all": mean, lo, hi, same_sign) — in columns named by metric."""
        rows = []
        wa = self.write_all
        ci = self.write_all_ci()
        rows.append({"policy": "write_all", **{m: wa[m] for m in METRICS},
                     **{f"{m}_sd": np.nan for m in METRICS},
                     **{f"delta_{m}": 0.0 if wa[m] is not None else np.nan for m in METRICS},
                     **{f"{m}_{k}": nan_if_none(ci[m][k]) if ci.get(m) else np.nan
                        for m in ("faithfulness", "coverage") for k in ("lo", "hi")}})
        for name, s in self.policies().items():
            row = {"policy": name}
            for m in METRICS:
                ms = s[m] or {"value": None, "sd": None}
                row[m] = nan_if_none(ms["value"])
                row[f"{m}_sd"] = nan_if_none(ms["sd"])
                row[f"delta_{m}"] = nan_if_none(delta(ms["value"], wa[m]))
            rows.append(row)
        pr: dict[str, object] = {"policy": "targeted - global"}
        for m, s in self.paired().items():
            pr[m] = nan_if_none(s["value"]) if s else np.nan
            pr[f"{m}_lo"] = nan_if_none(s["lo"]) if s else np.nan
            pr[f"{m}_hi"] = nan_if_none(s["hi"]) if s else np.nan
            pr[f"{m}_nb_lo"] = nan_if_none(s["nb_lo"]) if s else np.nan
            pr[f"{m}_nb_hi"] = nan_if_none(s["nb_hi"]) if s else np.nan
            pr[f"{m}_same_sign"] = s["same_sign"] if s else np.nan
        rows.append(pr)
        if self.gold is not None:  # the PPI++ faithfulness column(s) of `compare --gold`
            extra = self.gold.table_columns()
            rows = [{**r, **{k: nan_if_none(v) for k, v in extra.get(r["policy"], {}).items()}} for r in rows]
        for name, changes in self.paired_vs_write_all().items():
            row = {"policy": f"{name} - write_all"}
            for m, s in changes.items():
                for k, col in (("value", m), ("lo", f"{m}_lo"), ("hi", f"{m}_hi"), ("same_sign", f"{m}_same_sign")):
                    row[col] = nan_if_none(s[k]) if s else np.nan
            rows.append(row)
        return pd.DataFrame(rows).set_index("policy")

    def render(self) -> str:
        text = render_table(self)
        if self.gold is not None:
            text += "\n" + self.gold.render(self.repeats * self.folds)
        return text

    # -- full-sample artefacts for the report -------------------------------------------------
    def full_gate(self) -> list[str]:
        p = self.prepared
        if self.gate == "auto":
            low = lowest_support_category(p.cat, p.valid, p.sup & p.valid)
            return [str(p.categories[int(low)])] if low is not None else []
        return list(self.gate)

    def fit_full(self) -> dict:
        """Each policy fitted on all personas: per-category threshold arrays (fitted once, shared
        by `sweep` and `export_policy`)."""
        if self._fitted is None:
            p = self.prepared
            gate_arg = "auto" if self.gate == "auto" else p.gate_codes(self.gate)
            self._fitted, _ = fit_policies(sorted_sample(p), None, gate_arg, self.floor, self.policy_names,
                                           self.per_category_method)
        return self._fitted

    def sweep(self) -> dict:
        return sweep(self.prepared, self.full_gate(), self.floor, fitted=self.fit_full(),
                     write_all=self.write_all)

    def calibration(self, B: int = 2000, seed: int = 0) -> dict:
        return calibration(self.prepared, B=B, seed=seed)

    def write_run(self, run_dir, *, candidates, labels, coverage=None, seed: int = 0) -> None:
        """Everything `memjudge report` reads about this comparison, into RUN_DIR: the fixed-key
        compare.json, the inputs' paths, the full-sample sweep and the calibration table."""
        from memjudge.formats import write_json

        run = Path(run_dir)
        write_json(run / "compare.json", self.to_json())
        write_json(run / "compare_inputs.json", {
            "candidates": str(Path(candidates).resolve()),
            "labels": [str(Path(p).resolve()) for p in labels],
            "coverage": str(Path(coverage).resolve()) if coverage else None,
            "judge": self.judge, "replicate": self.replicate, "per_category_method": self.per_category_method,
        })
        write_json(run / "sweep.json", self.sweep())
        write_json(run / "calibration.json", self.calibration(seed=seed))

    def export_policy(self, path, kind: str = "targeted") -> dict:
        """Fit `kind` on all personas (same floor, gate and per-category method) and write the
        gate's JSON: exactly the policy estimator's ``fit(...).to_dict(...)``, with the inputs
        and the full-sample figures as provenance."""
        if kind not in ("global", "targeted", "per_category"):
            raise UsageError(f"cannot export policy {kind!r}")
        p = self.prepared
        policy = make_policy(kind, gate=self.gate, floor=self.floor, method=self.per_category_method,
                             strict_binary=p.strict_binary).fit(self.fit_frame())
        thr = self.fit_full()[kind]
        return export_policy(policy, path, **p.inputs, judge=p.judge, replicate=p.replicate, n_candidates=p.n,
                             n_personas=len(p.personas), n_valid=int(p.valid.sum()), gate_requested=self.gate,
                             fit_set=json_safe(full_sample(p, thr)),
                             **({"per_category_method": self.per_category_method} if kind == "per_category" else {}))

    def fit_frame(self) -> pd.DataFrame:
        """The prepared sample as the policy estimators' frame (category, confidence, valid,
        supported)."""
        p = self.prepared
        return pd.DataFrame({"category": p.categories[p.cat], "confidence": p.conf, "valid": p.valid,
                             "supported": p.sup & p.valid})


def format_columns(header: list[str], rows: list[list[str]], left: int = 1, gap: int = 2) -> list[str]:
    """A plain-text table: each column as wide as its widest cell, the first `left` columns
    left-aligned and the others right-aligned, columns always separated by `gap` spaces (so
    two figures never run together); a rule under the header."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells):
        return (" " * gap).join(c.ljust(w) if i < left else c.rjust(w)
                                for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    head = line(header)
    return [head, "-" * len(head), *(line(r) for r in rows)]


def render_table(res: CompareResult) -> str:
    p = res.prepared
    gate = "auto (lowest-support category per fit fold)" if res.gate == "auto" else ", ".join(res.gate)
    lines = [
        f"Table 1 — held-out retention policies (judge {res.judge}, replicate {res.replicate}; "
        f"{p.n} candidates, {len(p.personas)} personas, {int(p.valid.sum())} valid verdicts)",
        f"{res.repeats} × {res.folds}-fold persona-grouped CV (seed {res.seed}), retention floor "
        f"{pct(res.floor)}%, gate: {gate}. Entries: fold mean ± SD, percent.",
        "",
    ]
    header = ["Policy", "Faithfulness", "Retention", "Est. coverage", "Δ faith (pts)", "Δ cov (pts)"]
    wa, ci = res.write_all, res.write_all_ci()

    def with_ci(m):
        c = ci.get(m) or {}
        return with_interval(pct, wa[m], c.get("lo"), c.get("hi"))

    rows = [[POLICY_LABELS["write_all"], with_ci("faithfulness"), pct(wa["retention"]), with_ci("coverage"), "", ""]]
    for name, s in res.policies().items():
        cells = []
        for m in METRICS:
            ms = s[m]
            if ms is None or ms["value"] is None:
                cells.append(MISSING)
            else:
                cells.append(f"{pct(ms['value'])} ± {pct(ms['sd'])}")
        label = POLICY_LABELS[name] + (f" ({', '.join(res.gate)})" if name == "targeted" and res.gate != "auto" else "")
        label += f" ({res.per_category_method})" if name == "per_category" else ""
        rows.append([label, *cells, pts(s["delta_faithfulness"]), pts(s["delta_coverage"])])

    def change(s):
        return MISSING if not s else with_interval(pts, s["value"], s["lo"], s["hi"])

    for name, changes in res.paired_vs_write_all().items():
        rows.append([POLICY_LABELS[name] + " − write-all", *(change(changes[m]) for m in METRICS), "", ""])
    pr = res.paired()
    rows.append(["Targeted − global", *(change(pr[m]) for m in METRICS), "", ""])
    lines += format_columns(header, rows)
    lines.append("")
    J = res.repeats * res.folds
    lines.append(f"  write-all: full-sample values with 95% persona-cluster bootstrap intervals (B = {res.B}); "
                 "'− write-all' rows: paired per-fold change against write-all on the same held-out personas, "
                 "mean [2.5%, 97.5%] in points")
    for m in METRICS:
        s = pr[m]
        if not s or s["value"] is None:
            continue
        lines.append(f"  {m:<13} paired mean {pts(s['value'])} pts; 2.5–97.5% of folds [{pts(s['lo'])}, "
                     f"{pts(s['hi'])}]; Nadeau–Bengio 95% [{pts(s['nb_lo'])}, {pts(s['nb_hi'])}]; "
                     f"same sign in {s['same_sign']}/{J} folds")
    if res.gate == "auto":
        from collections import Counter

        cnt = Counter(",".join(g) for g in res.fold_gates)
        lines.append("  auto gate chosen per fold: " + ", ".join(f"{k} ×{v}" for k, v in cnt.most_common()))
    for n in res.notes():
        lines.append(f"  note: {n}")
    return "\n".join(lines)


__all__ = ["CompareResult", "format_columns", "render_table"]
