"""The retention gate (spec §9): an exported policy reproduces the fitted decisions exactly,
with the standard library only."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from memjudge.comparison import compare
from memjudge.gate import Policy, PolicyFileError, load_policy
from memjudge.policies import GlobalThreshold, PerCategory, Targeted, export_policy
from test_crossval import ROOT_SRC, synthetic  # noqa: F401  (shared synthetic corpus)


@pytest.mark.parametrize("kind", ["global", "targeted", "per_category"])
def test_exported_policy_reproduces_fitted_decisions(tmp_path, kind):
    cand, lab, cov = synthetic(n_personas=40, seed=11, conf_levels=[0.1, 0.3, 0.5, 0.7, 0.9])
    res = compare(cand, lab, cov, floor=0.6, repeats=1, folds=2)
    path = tmp_path / f"{kind}.json"
    written = res.export_policy(path, kind)
    pol = load_policy(path)
    assert pol.kind == kind and written["format"] == "memjudge.retention-policy"
    prep = res.prepared
    thr = res.fit_full()[kind]
    fitted = prep.conf >= thr[prep.cat]
    admitted = np.array([pol.admit(c, x) for c, x in zip(cand["category"], cand["confidence"])])
    assert np.array_equal(admitted, fitted)
    # Coarse confidence levels put many candidates exactly at a threshold: `>=` keeps them.
    at = [c == t for c, t in zip(prep.conf, thr[prep.cat])]
    assert any(at) and fitted[np.array(at)].all()
    # The frame-level classes fit the same thresholds as the per-fold engine.
    frame = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    cls = {"global": GlobalThreshold(0.6), "targeted": Targeted(["values"], 0.6),
           "per_category": PerCategory(["values"], 0.6)}[kind].fit(frame)
    assert np.array_equal(cls.apply(frame), fitted)
    fo = written["fitted_on"]
    assert fo["n_candidates"] == len(cand) and fo["fit_set"]["retention"] >= 0.6 and fo["judge"] == "sim:a"


def test_frame_level_export_and_edge_cases(tmp_path):
    f = pd.DataFrame({"category": ["values", "values", "work"], "confidence": [0.2, 0.6, 0.1],
                      "verdict": ["unsupported", "supported", "supported"]})
    p = Targeted(["values"], floor=0.6).fit(f)
    d = export_policy(p, tmp_path / "p.json", note="hand case")
    assert d["thresholds"] == {"values": 0.6} and d["fitted_on"]["note"] == "hand case"
    g = load_policy(tmp_path / "p.json")
    assert g.admit("values", 0.6) and not g.admit("values", 0.5999999)
    assert g.admit("work", 0.0) and g.admit("never-seen", 0.0)  # ungated and unknown: admitted
    # Floor 0.6 of 3 keeps 2: dropping 0.1 (supported) leaves 1/2 < 2/3, so −∞ (null); floor 0.3: 0.6.
    assert Policy.from_dict(GlobalThreshold(floor=0.6).fit(f).to_dict()).default_threshold is None
    gl = Policy.from_dict(GlobalThreshold(floor=0.3).fit(f).to_dict())
    assert gl.default_threshold == 0.6 and gl.admit("anything", 0.6) and not gl.admit("anything", 0.5)
    with pytest.raises(ValueError):
        g.admit("values", float("nan"))
    with pytest.raises(TypeError):
        g.admit("values", "0.7")


def test_bad_policy_files(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{not json")
    with pytest.raises(PolicyFileError, match="x.json:1: not valid JSON"):
        load_policy(p)
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(PolicyFileError, match="not a memjudge retention policy"):
        load_policy(p)
    p.write_text(json.dumps({"format": "memjudge.retention-policy", "version": 99, "kind": "global"}))
    with pytest.raises(PolicyFileError, match="version"):
        load_policy(p)
    p.write_text(json.dumps({"format": "memjudge.retention-policy", "version": 1, "kind": "global",
                             "default_threshold": "high"}))
    with pytest.raises(PolicyFileError, match="threshold"):
        load_policy(p)
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(tmp_path / "missing.json")


def test_gate_imports_only_the_standard_library(tmp_path):
    code = ("import sys; import memjudge.gate; "
            "heavy = [m for m in ('numpy', 'pandas', 'scipy', 'memjudge.formats') if m in sys.modules]; "
            "print(heavy)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": ROOT_SRC, "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_cli_export_default_is_targeted(cli, tmp_path):
    cand, lab, _ = synthetic(n_personas=10, seed=12)
    cp, lp = tmp_path / "c.csv", tmp_path / "l.jsonl"
    cand.to_csv(cp, index=False)
    lab.to_json(lp, orient="records", lines=True)
    r = cli("compare", cp, "--labels", lp, "--repeats", "1", "--folds", "2", "--export-policy", tmp_path / "pol.json")
    assert r.returncode == 0, r.stderr
    pol = load_policy(tmp_path / "pol.json")
    assert pol.kind == "targeted" and pol.gate == ("values",) and set(pol.thresholds) == {"values"}


def _gate(kind="targeted"):
    return Policy.from_dict({"format": "memjudge.retention-policy", "version": 1, "kind": kind,
                             "thresholds": {"values": 0.3}, "default_threshold": None, "gate": ["values"]})


@pytest.mark.parametrize("confidence, admitted", [
    (np.float32(0.3), True), (np.float64(0.29), False), (np.int64(1), True), (np.int32(0), False),
    (np.float16(0.5), True), (np.uint8(1), True), (__import__("fractions").Fraction(3, 10), True), (1, True),
    (float("inf"), True),
])
def test_admit_accepts_any_real_number_including_numpy_scalars(confidence, admitted):
    g = _gate()
    assert g.admit("values", confidence) is admitted
    assert g.admit("work", confidence) is True  # ungated: admitted whatever the real value


@pytest.mark.parametrize("confidence, error", [
    ("abc", TypeError), ("0.7", TypeError), (None, TypeError), (True, TypeError), (np.bool_(True), TypeError),
    ([0.5], TypeError), (float("nan"), ValueError), (np.float32("nan"), ValueError),
])
@pytest.mark.parametrize("category", ["values", "work", "never-seen"])
def test_admit_rejects_non_numbers_and_nan_for_every_category(confidence, error, category):
    """Gated, ungated and unknown categories alike: a bad value is the caller's bug either way."""
    with pytest.raises(error):
        _gate().admit(category, confidence)


def test_write_all_policy_also_validates():
    g = Policy.from_dict({"format": "memjudge.retention-policy", "version": 1, "kind": "write_all"})
    assert g.admit("anything", np.float32(0.01))
    with pytest.raises(TypeError):
        g.admit("anything", None)


@pytest.mark.parametrize("gate", ["values", "auto"])
def test_export_is_the_policy_estimators_fit_to_dict(tmp_path, gate):
    """One fitting path: `compare --export-policy` writes exactly the policy estimator's
    ``fit(...).to_dict(...)`` on the comparison's sample, with the thresholds the comparison
    fitted on all personas (`fit_full`, shared with the sweep)."""
    from memjudge.policies import make_policy

    cand, lab, cov = synthetic(n_personas=30, seed=12, conf_levels=[0.2, 0.4, 0.6, 0.8])
    res = compare(cand, lab, cov, gate=gate, floor=0.7, repeats=1, folds=2)
    frame = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    for kind in ("global", "targeted", "per_category"):
        written = res.export_policy(tmp_path / f"{kind}.json", kind)
        fitted = make_policy(kind, gate=gate if gate == "auto" else [gate], floor=0.7).fit(frame).to_dict()
        for d in (written, fitted):
            d["fitted_on"] = {k: v for k, v in d["fitted_on"].items() if k in ("n", "faithfulness", "retention")}
        assert written == fitted
        thr = res.fit_full()[kind]
        cats = res.prepared.categories.tolist()
        got = {c: (-np.inf if t is None else t) for c, t in written["thresholds"].items()}
        default = -np.inf if written["default_threshold"] is None else written["default_threshold"]
        assert [got.get(c, default) for c in cats] == [float(t) for t in thr]
