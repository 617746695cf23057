"""The paper's Table 1 reproduced end to end: simulate (preset paper) -> compare with gold
labels under the exact protocol of spec §8, for several seeds; and the robustness study
under three simulated judges of different noise."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memjudge.comparison import compare
from memjudge.comparison.robustness import robustness
from memjudge.judges import make_judge
from memjudge.simulation import simulate

# Table 1 of "When to Remember, When to Abstain" (held-out fold means; write-all full sample).
PAPER = {
    "write_all": {"faithfulness": 0.9224},
    "targeted": {"faithfulness": 0.9603, "delta_coverage": -0.0201, "retention": 0.803},
    "global": {"faithfulness": 0.9383, "delta_coverage": -0.1497, "retention": 0.818},
}
TOL = {"faithfulness": 0.01, "retention": 0.015, "delta_coverage": {"targeted": 0.015, "global": 0.03}}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_table1_within_tolerance(seed, tmp_path):
    corpus = simulate(preset="paper", seed=seed)
    res = compare(corpus.candidates, corpus.labels, corpus.coverage, gate="values", floor=0.8,
                  repeats=20, folds=5, seed=0).to_json()
    assert abs(res["write_all"]["faithfulness"] - PAPER["write_all"]["faithfulness"]) <= TOL["faithfulness"]
    for policy in ("targeted", "global"):
        got, want = res["policies"][policy], PAPER[policy]
        assert abs(got["faithfulness"]["value"] - want["faithfulness"]) <= TOL["faithfulness"], (policy, got)
        assert abs(got["retention"]["value"] - want["retention"]) <= TOL["retention"], (policy, got)
        assert abs(got["delta_coverage"] - want["delta_coverage"]) <= TOL["delta_coverage"][policy], (policy, got)
    # Targeted beats global on coverage in every one of the 100 folds, and on faithfulness on average.
    assert res["paired"]["coverage"]["same_sign"] == 100 and res["paired"]["coverage"]["value"] > 0
    assert res["paired"]["faithfulness"]["value"] > 0
    detail = pd.DataFrame(res["folds_detail"])
    assert len(detail[detail["policy"] == "targeted"]) == 100


def test_category_rates_and_confidence_curve():
    t = simulate(preset="paper", seed=1).truth
    v = t["category"] == "values"
    assert abs(t.loc[v, "supported"].mean() - 0.779) < 0.0015
    assert abs(t.loc[~v, "supported"].mean() - 0.962) < 0.0015
    assert abs(v.mean() - 0.215) < 0.0015
    bins = np.floor(t.loc[v, "confidence"] * 10 + 1e-9) / 10
    curve = t[v].groupby(bins)["supported"].agg(["mean", "size"])
    curve = curve[curve["size"] >= 20]["mean"]
    assert abs(curve.iloc[0] - 0.59) < 0.08 and abs(curve.iloc[-1] - 0.90) < 0.06


def test_robustness_under_three_simulated_judges(tmp_path):
    corpus = simulate(preset="paper", seed=0, out=tmp_path / "corpus")
    labels, coverage = [], []
    for name in ("paper", "strict", "noisy"):
        judge = make_judge(f"sim:{name}", options={"truth": str(tmp_path / "corpus")})
        labels.append(judge.labels(corpus.candidates, replicates=2))
        coverage.append(judge.coverage_labels(corpus.facts, corpus.candidates))
    res = robustness(corpus.candidates, pd.concat(labels), pd.concat(coverage), B=200)
    summary = res.summary()
    assert summary["judges"] == 3 and summary["units"] == 6
    # Values stays the lowest-support category and targeted keeps more coverage under every judge.
    assert summary["lowest_is_gated"] == {"judges": 3, "units": 6}
    assert summary["coverage"]["units"] == 6
    # The paper-like judge (4.71% flips) keeps the faithfulness ordering too.
    by_judge = {u.judge: u for u in res.units}
    assert by_judge["sim:paper"].ge("faithfulness")
    for u in res.units:
        assert u.result.to_json()["paired"]["coverage"]["same_sign"] == 100


def test_cli_simulate_then_compare(cli, tmp_path):
    """The issue's acceptance path: `memjudge simulate --preset paper` then `memjudge compare`."""
    import json

    out = tmp_path / "sim"
    r = cli("simulate", "--preset", "paper", "--seed", "1", "--out", out)
    assert r.returncode == 0, r.stderr
    r = cli("compare", out / "candidates.jsonl", "--labels", out / "labels.jsonl", "--coverage", out / "coverage.jsonl", "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    for policy in ("targeted", "global"):
        got, want = res["policies"][policy], PAPER[policy]
        assert abs(got["faithfulness"]["value"] - want["faithfulness"]) <= TOL["faithfulness"]
        assert abs(got["retention"]["value"] - want["retention"]) <= TOL["retention"]
        assert abs(got["delta_coverage"] - want["delta_coverage"]) <= TOL["delta_coverage"][policy]
    assert res["paired"]["coverage"]["same_sign"] == 100
