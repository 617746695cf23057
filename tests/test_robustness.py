"""Robustness across judges: category rates with cluster intervals, Kendall's τ-b, P(gated is
lowest), Table 1 per judge and replicate, the summary, and the CLI."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from scipy.stats import kendalltau

from memjudge.comparison import compare
from memjudge.comparison.robustness import p_lowest, robustness
from memjudge.stats.bootstrap import cluster_weights, ratio_interval
from test_crossval import S, U, synthetic, synthpai


def flipped(lab, judge, rate, seed, replicate=0):
    rng = np.random.default_rng(seed)
    out = lab.copy()
    out["judge"], out["replicate"] = judge, replicate
    flip = (rng.random(len(out)) < rate) & out["verdict"].notna()
    out.loc[flip, "verdict"] = out.loc[flip, "verdict"].map(lambda v: U if v == S else S)
    return out


@pytest.fixture(scope="module")
def corpus():
    cand, lab, cov = synthetic(n_personas=30, seed=21)
    b0 = flipped(lab, "sim:b", 0.05, 1)
    b1 = flipped(lab, "sim:b", 0.05, 2, replicate=1)
    return cand, pd.concat([lab, b0, b1], ignore_index=True), cov


def test_units_rates_intervals_and_tables(corpus):
    cand, lab, cov = corpus
    res = robustness(cand, lab, cov, repeats=2, folds=3, B=300)
    assert [(u.judge, u.replicate) for u in res.units] == [("sim:a", 0), ("sim:b", 0), ("sim:b", 1)]
    W = cluster_weights(30, B=300, seed=0)
    for u in res.units:
        prep = u.prepared
        for i, row in u.categories.iterrows():
            m = prep.cat == i
            num = np.bincount(prep.persona[m], weights=(prep.sup & prep.valid)[m], minlength=30)
            den = np.bincount(prep.persona[m], weights=prep.valid[m], minlength=30)
            assert row["support_rate"] == pytest.approx(num.sum() / den.sum())
            lo, hi = ratio_interval(num, den, W)
            assert (row["lo"], row["hi"]) == pytest.approx((lo, hi))
        # Table 1 refit under this unit equals a direct comparison under its labels.
        direct = compare(cand, lab, cov, judge=u.judge, replicate=u.replicate, repeats=2, folds=3, B=300)
        assert u.result.to_json() == direct.to_json()
    j = res.to_json()
    assert list(j) == ["gate", "floor", "repeats", "folds", "seed", "B", "strict_binary", "units", "kendall", "summary"]
    json.dumps(j, allow_nan=False)


def test_kendall_tau_b_matches_scipy_and_summary_counts(corpus):
    cand, lab, cov = corpus
    res = robustness(cand, lab, cov, repeats=2, folds=3, B=200, replicates=False)
    assert len(res.units) == 2 and len(res.kendall) == 1
    a, b = (dict(zip(u.categories["category"], u.categories["support_rate"])) for u in res.units)
    cats = sorted(a)
    ref = kendalltau([a[c] for c in cats], [b[c] for c in cats], variant="b")
    assert res.kendall.loc[0, "tau"] == pytest.approx(ref.statistic)
    s = res.summary()
    expect_f = sum(u.result.policies()["targeted"]["faithfulness"]["value"]
                   >= u.result.policies()["global"]["faithfulness"]["value"] for u in res.units)
    assert s["judges"] == 2 and s["faithfulness"]["judges"] == expect_f
    assert s["coverage"]["judges_with_coverage"] == 2


def test_p_gated_lowest_by_hand():
    reps = np.array([[0.5, 0.9, 0.8], [0.95, 0.9, 0.8], [np.nan, 0.7, 0.9], [0.6, 0.6, 0.9]])
    # lowest: 0, 2, 1, 0 (tie → first) → category 0 is lowest in 2 of 4.
    assert p_lowest(reps, [0]) == 0.5
    assert p_lowest(reps, [0, 2]) == 0.75


def test_a_judge_that_reverses_the_ordering_is_counted():
    """Judge b finds 'values' well supported and 'work' poorly: the gated category is no longer
    the lowest and the summary says so."""
    cand, lab, _ = synthetic(n_personas=30, seed=22)
    rev = lab.copy()
    rev["judge"] = "sim:rev"
    cat = cand.set_index("assertion_id")["category"]
    c = rev["assertion_id"].map(cat)
    rng = np.random.default_rng(0)
    rev.loc[c == "values", "verdict"] = S
    rev.loc[c == "work", "verdict"] = np.where(rng.random((c == "work").sum()) < 0.5, S, U)
    res = robustness(cand, pd.concat([lab, rev]), repeats=1, folds=3, B=200)
    by = {u.judge: u for u in res.units}
    assert by["sim:a"].lowest == "values" and by["sim:rev"].lowest == "work"
    assert by["sim:rev"].p_gated_lowest == 0.0
    assert res.summary()["lowest_is_gated"] == {"judges": 1, "units": 1}


@pytest.mark.shared_data
def test_real_synthpai_two_judges(shared_data):
    """Human-checked vs LLM-only verdicts on the same guesses (SynthPAI)."""
    cand, lab_h = synthpai(shared_data, label_col="eval_model_human")
    _, lab_l = synthpai(shared_data, label_col="eval_llm_only_vs_human")
    both = set(lab_h["assertion_id"]) & set(lab_l["assertion_id"])
    assert len(both) > 500
    cand = cand[cand["assertion_id"].isin(both)]
    labs = pd.concat([lab_h[lab_h.assertion_id.isin(both)], lab_l[lab_l.assertion_id.isin(both)]])
    res = robustness(cand, labs, gate="auto", repeats=2, folds=5, B=200)
    assert {u.judge for u in res.units} == {"eval_model_human", "eval_llm_only_vs_human"}
    tau = res.kendall.loc[0, "tau"]
    assert -1 <= tau <= 1
    for u in res.units:
        assert 0 <= u.p_gated_lowest <= 1 and u.lowest in set(cand["category"])


def test_cli_robustness(cli, corpus, tmp_path):
    cand, lab, cov = corpus
    cp, l1, l2, cvp = (tmp_path / n for n in ("c.jsonl", "a.jsonl", "b.jsonl", "cov.jsonl"))
    cand.to_json(cp, orient="records", lines=True)
    lab[lab.judge == "sim:a"].to_json(l1, orient="records", lines=True)
    lab[lab.judge == "sim:b"].to_json(l2, orient="records", lines=True)
    cov.to_json(cvp, orient="records", lines=True)
    r = cli("robustness", cp, "--labels", l1, l2, "--coverage", cvp, "--repeats", "1", "--folds", "3",
            "--json", "--out", tmp_path / "run")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j == json.loads((tmp_path / "run" / "robustness.json").read_text())
    assert j["summary"]["units"] == 3 and j["summary"]["judges"] == 2
    assert list(j["units"][0]["table"]) == ["write_all", "write_all_ci", "policies", "paired", "paired_vs_write_all"]
    h = cli("robustness", cp, "--labels", l1, l2, "--repeats", "1", "--folds", "3")
    assert h.returncode == 0 and "Kendall" in h.stdout and "Targeted ≥ global" in h.stdout
    bad = cli("robustness", cp, "--labels", tmp_path / "missing.jsonl")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_rubric_versions_are_one_rubric(corpus):
    """Gold/imported labels say 'support', `memjudge score` says 'support@<hash>': both are
    the support rubric, so no judge may be silently dropped when they are mixed."""
    cand, lab, cov = corpus
    scored = lab[lab["judge"] == "sim:b"].copy()
    scored["rubric"] = "support@0123abcd"
    mixed = pd.concat([lab[lab["judge"] == "sim:a"], scored], ignore_index=True)
    res = robustness(cand, mixed, cov, repeats=1, folds=3, B=100)
    assert sorted({u.judge for u in res.units}) == ["sim:a", "sim:b"]
    one = compare(cand, mixed, cov, judge="sim:b", repeats=1, folds=3)
    assert one.to_json()["judge"] == "sim:b"


@pytest.mark.parametrize("kind", ["every covered_by null", "empty frame", "personas without candidates"])
def test_coverage_without_a_judged_fact_leaves_coverage_null_and_the_rest_computed(corpus, kind):
    from test_crossval import _no_judged_fact

    cand, lab, cov = corpus
    res = robustness(cand, lab, _no_judged_fact(kind, cand, cov), repeats=1, folds=3, B=100)
    base = robustness(cand, lab, None, repeats=1, folds=3, B=100).to_json()
    j = res.to_json()
    json.dumps(j, allow_nan=False)
    assert j["summary"]["coverage"]["units_with_coverage"] == 0
    for u, b in zip(j["units"], base["units"]):
        assert u["table"]["write_all"]["coverage"] is None and u["table"]["paired"]["coverage"] is None
        assert u["categories"] == b["categories"] and u["overall"] == b["overall"]
        assert u["table"]["policies"] == b["table"]["policies"]
        assert any("estimated coverage not computed" in n for n in u["notes"])


def test_overall_support_rate_with_interval_per_unit(corpus):
    from test_crossval import literal_cluster_rate

    cand, lab, cov = corpus
    res = robustness(cand, lab, cov, repeats=1, folds=3, B=120, seed=3)
    j = res.to_json()
    for u, ju in zip(res.units, j["units"]):
        assert list(ju)[list(ju).index("categories") + 1] == "overall"
        o = ju["overall"]
        assert list(o) == ["value", "lo", "hi", "n"]
        cats = u.categories
        assert o["value"] == pytest.approx(cats["supported"].sum() / cats["valid"].sum())
        assert o["n"] == cats["valid"].sum() == ju["n_valid"]
        mine = lab[(lab.judge == u.judge) & (lab.replicate == u.replicate)][["assertion_id", "verdict"]]
        df = cand.merge(mine, on="assertion_id", how="left")
        df["valid"], df["sup"] = df["verdict"].notna(), df["verdict"] == S
        assert [o["lo"], o["hi"]] == pytest.approx(literal_cluster_rate(df, "sup", "valid", 120, 3))
        # compare's write-all faithfulness under this unit is the same figure on the same resamples
        assert ju["table"]["write_all_ci"]["faithfulness"] == o
        assert set(ju["table"]["paired_vs_write_all"]) == {"global", "targeted", "per_category"}
    assert "overall [95% CI]" in res.render()


def test_strict_binary_in_robustness(cli, tmp_path):
    from test_crossval import third_verdict_case

    cand, lab = third_verdict_case()
    default = robustness(cand, lab, folds=2, repeats=1, B=50, floor=0.5).to_json()
    strict = robustness(cand, lab, folds=2, repeats=1, B=50, floor=0.5, strict_binary=True).to_json()
    assert default["strict_binary"] is False and strict["strict_binary"] is True
    dv = {c["category"]: c for c in default["units"][0]["categories"]}
    sv = {c["category"]: c for c in strict["units"][0]["categories"]}
    assert (dv["values"]["valid"], dv["values"]["supported"]) == (3, 1)
    assert (sv["values"]["valid"], sv["values"]["supported"]) == (1, 1)
    assert default["units"][0]["overall"]["value"] == pytest.approx(2 / 5)
    assert strict["units"][0]["overall"]["value"] == pytest.approx(2 / 3)
    assert strict["units"][0]["overall"]["n"] == 3
    cp, lp = tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    cand.to_json(cp, orient="records", lines=True)
    lab.merge(cand[["assertion_id", "category"]]).to_json(lp, orient="records", lines=True)
    r = cli("robustness", cp, "--labels", lp, "--floor", "0.5", "--folds", "2", "--repeats", "1", "--json",
            "--strict-binary")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    values = next(c for c in j["units"][0]["categories"] if c["category"] == "values")
    assert j["strict_binary"] is True and (values["valid"], values["supported"]) == (1, 1)
    assert j["units"][0]["overall"]["value"] == pytest.approx(2 / 3)
    assert "excluded from faithfulness" in r.stderr


def test_cli_robustness_text_uses_the_reports_interval_convention(cli, corpus, tmp_path):
    """#19 item 3: the text shows the percentile intervals (labelled), never Nadeau–Bengio;
    P(gated lowest) as a fraction with three decimals; the judge counts say they take each
    judge's first replicate, and each unit's own yes/no is in the table."""
    cand, lab, cov = corpus
    cp, lp, cvp = tmp_path / "c.jsonl", tmp_path / "l.jsonl", tmp_path / "cov.jsonl"
    cand.to_json(cp, orient="records", lines=True)
    lab.to_json(lp, orient="records", lines=True)
    cov.to_json(cvp, orient="records", lines=True)
    h = cli("robustness", cp, "--labels", lp, "--coverage", cvp, "--repeats", "2", "--folds", "3")
    assert h.returncode == 0, h.stderr
    j = json.loads(cli("robustness", cp, "--labels", lp, "--coverage", cvp, "--repeats", "2", "--folds", "3",
                       "--json").stdout)
    text = h.stdout
    assert "Nadeau" not in text.split("compare.json also holds")[0]
    assert "95% percentile interval (persona bootstrap, B = 2000)" in text
    assert "95% percentile interval (2.5–97.5% of the per-fold differences)" in text
    lines = text.splitlines()
    support = lines[lines.index("Support rate by category and overall (%)") + 1:]
    held = lines[next(i for i, x in enumerate(lines) if x.startswith("Held-out Table 1 per unit")) + 1:]
    for u, srow, hrow in zip(j["units"], support[2:5], held[2:5]):
        cells = re.split(r"\s{2,}", srow)
        assert cells[:2] == [u["judge"], str(u["replicate"])]
        assert cells[-1] == f"{u['p_gated_lowest']:.3f}"          # a fraction, three decimals
        o = u["overall"]
        assert cells[-3] == f"{100 * o['value']:.1f} [{100 * o['lo']:.1f}, {100 * o['hi']:.1f}]"
        hc = re.split(r"\s{2,}", hrow)
        pf = u["table"]["paired"]["faithfulness"]
        assert hc[4] == f"{100 * pf['value']:+.2f} [{100 * pf['lo']:+.2f}, {100 * pf['hi']:+.2f}]"
        pol = u["table"]["policies"]
        holds = pol["targeted"]["faithfulness"]["value"] >= pol["global"]["faithfulness"]["value"]
        assert hc[-1] == ("yes" if holds else "no")
    s = j["summary"]
    assert (f"Targeted ≥ global on faithfulness: {s['faithfulness']['judges']}/{s['judges']} judges "
            f"(each judge's first replicate), {s['faithfulness']['units']}/{s['units']} units.") in text
    # the judge count is the first replicate's yes/no of each judge
    first = {}
    for u in j["units"]:
        pol = u["table"]["policies"]
        first.setdefault(u["judge"], pol["targeted"]["faithfulness"]["value"] >= pol["global"]["faithfulness"]["value"])
    assert s["faithfulness"]["judges"] == sum(first.values())
