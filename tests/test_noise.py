"""Judge noise (re-score flip rates): hand-worked cases, a direct per-item reference,
the bootstrap against a naive resampling loop, and interval coverage in simulated studies."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from memjudge.stats.bootstrap import cluster_weights, percentile_interval
from memjudge.stats.noise import item_flip, noise

S, U, P = "supported", "unsupported", "partial"
JUDGE_KEYS = {"judge", "rubric", "items", "replicates", "excluded_null", "by_construction", "flip_rate", "any_flip_rate",
              "by_category"}


def _frame(rows, judge="J", rubric="support"):
    """rows: (item, persona, category, [verdict per replicate])."""
    out = []
    for item, persona, cat, verdicts in rows:
        for rep, v in enumerate(verdicts):
            out.append({"assertion_id": item, "persona_id": persona, "category": cat, "judge": judge,
                        "rubric": rubric, "replicate": rep, "verdict": v})
    return pd.DataFrame(out)


HAND = [
    ("i1", "p1", "values", [S, S, U]),     # 1 − (2·1 + 0)/(3·2) = 2/3, any = 1
    ("i2", "p1", "values", [S, U, None]),  # n = 2 valid: 1 − 0/2 = 1, any = 1; one null
    ("i3", "p2", "work", [S, S, S]),       # 0
    ("i4", "p2", "work", [U, None, None]),  # one valid replicate: not measurable; two nulls
    ("i5", "p3", "work", [P, U, S]),       # 1 − 0 = 1, any = 1
]


def test_hand_worked_flip_rates():
    res = noise(_frame(HAND), B=100)
    j = res.to_json()["judges"][0]
    assert j["items"] == 4 and j["replicates"] == 3 and j["excluded_null"] == 3
    assert j["flip_rate"]["value"] == pytest.approx((2 / 3 + 1 + 0 + 1) / 4, abs=1e-12)
    assert j["any_flip_rate"]["value"] == pytest.approx(3 / 4, abs=1e-12)
    assert j["by_category"]["values"] == {"items": 2, "flip_rate": j["by_category"]["values"]["flip_rate"]}
    assert j["by_category"]["values"]["flip_rate"]["value"] == pytest.approx((2 / 3 + 1) / 2)
    assert j["by_category"]["work"]["items"] == 2 and j["by_category"]["work"]["flip_rate"]["value"] == pytest.approx(0.5)
    assert set(j) == JUDGE_KEYS


def test_item_flip_counts():
    flip, anyf, n = item_flip(np.array([[2, 1, 0], [1, 1, 0], [3, 0, 0], [1, 0, 0], [1, 1, 1]]))
    assert flip[:3].tolist() == pytest.approx([2 / 3, 1.0, 0.0]) and np.isnan(flip[3]) and flip[4] == 1.0
    assert anyf[:3].tolist() == [1.0, 1.0, 0.0] and n.tolist() == [3, 2, 3, 1, 3]


def test_matches_direct_per_item_computation():
    rng = np.random.default_rng(7)
    rows = []
    for k in range(600):
        reps = rng.integers(1, 6)
        verdicts = list(rng.choice([S, U, P, None], size=reps, p=[0.6, 0.25, 0.1, 0.05]))
        rows.append((f"a{k}", f"p{k % 37}", f"c{k % 4}", verdicts))
    labels = _frame(rows)
    res = noise(labels, B=50)
    flips, anys, cats = [], [], []
    for _, _, cat, verdicts in rows:
        valid = [v for v in verdicts if v is not None]
        n = len(valid)
        if n < 2:
            continue
        pairs_differ = sum(a != b for i, a in enumerate(valid) for j, b in enumerate(valid) if i != j)
        flips.append(pairs_differ / (n * (n - 1)))
        anys.append(len(set(valid)) > 1)
        cats.append(cat)
    j = res.to_json()["judges"][0]
    assert j["items"] == len(flips)
    assert j["flip_rate"]["value"] == pytest.approx(np.mean(flips), abs=1e-12)
    assert j["any_flip_rate"]["value"] == pytest.approx(np.mean(anys), abs=1e-12)
    assert j["excluded_null"] == int(labels["verdict"].isna().sum())
    for c in set(cats):
        sel = [f for f, cc in zip(flips, cats) if cc == c]
        assert j["by_category"][c]["flip_rate"]["value"] == pytest.approx(np.mean(sel), abs=1e-12)
        assert j["by_category"][c]["items"] == len(sel)


def test_two_replicates_is_share_of_items_that_differ():
    rng = np.random.default_rng(1)
    first = rng.choice([S, U], size=500, p=[0.9, 0.1])
    second = np.where(rng.random(500) < 0.05, np.where(first == S, U, S), first)
    rows = [(f"a{k}", f"p{k // 5}", "c", [first[k], second[k]]) for k in range(500)]
    j = noise(_frame(rows), B=50).to_json()["judges"][0]
    assert j["flip_rate"]["value"] == pytest.approx(np.mean(first != second), abs=1e-12)
    assert j["any_flip_rate"]["value"] == j["flip_rate"]["value"]


def test_judges_and_rubrics_are_separate():
    a = _frame(HAND, judge="A")
    b = _frame([(i, p, c, [S, S]) for i, p, c, _ in HAND], judge="B", rubric="support@v2")
    res = noise(pd.concat([a, b], ignore_index=True), B=50)
    js = res.to_json()["judges"]
    assert [(j["judge"], j["rubric"]) for j in js] == [("A", "support"), ("B", "support@v2")]
    assert js[1]["flip_rate"]["value"] == 0.0 and js[1]["items"] == 5 and js[1]["excluded_null"] == 0


def test_no_replicates_and_single_persona_give_nulls():
    one = _frame([(f"a{k}", f"p{k}", "c", [S]) for k in range(5)])
    j = noise(one, B=50).to_json()["judges"][0]
    assert j["items"] == 0 and j["flip_rate"] == {"value": None, "lo": None, "hi": None}
    assert j["by_category"] == {}
    single = _frame([(f"a{k}", "only", "c", [S, U if k % 3 == 0 else S]) for k in range(9)])
    res = noise(single, B=50)
    j = res.to_json()["judges"][0]
    assert j["flip_rate"] == {"value": pytest.approx(3 / 9), "lo": None, "hi": None}
    assert any("fewer than two personas" in n for n in res.notes)
    assert "NaN" not in json.dumps(res.to_json())


def _study(rng, P=150, mean_items=10, mean_flip=0.05, concentration=40.0):
    """Two replicates; persona p flips each item with probability π_p ~ Beta (mean `mean_flip`),
    so items within a persona are correlated and the true flip rate is `mean_flip`."""
    n = 1 + rng.poisson(mean_items - 1, size=P)
    pi = rng.beta(mean_flip * concentration, (1 - mean_flip) * concentration, size=P)
    persona = np.repeat(np.arange(P), n)
    N = len(persona)
    first = np.where(rng.random(N) < 0.85, S, U)
    second = np.where(rng.random(N) < pi[persona], np.where(first == S, U, S), first)
    items = np.array([f"a{k}" for k in range(N)], dtype=object)
    pers = np.array([f"p{k:03d}" for k in persona], dtype=object)
    return pd.DataFrame({
        "assertion_id": np.concatenate([items, items]), "persona_id": np.concatenate([pers, pers]),
        "category": "c", "judge": "sim:noisy", "rubric": "support", "replicate": np.repeat([0, 1], N),
        "verdict": np.concatenate([first, second])})


def test_interval_coverage_in_simulated_studies():
    """≥ 93% of 200 studies cover the generative flip rate. B = 500 (not 2000) keeps this
    test around 4 s; the percentile interval's coverage barely depends on B at this size."""
    rng = np.random.default_rng(2026)
    truth, hits, wrong_hits = 0.05, 0, 0
    for s in range(200):
        j = noise(_study(rng, mean_flip=truth), seed=s, B=500).judges.iloc[0]
        hits += j["flip_rate_lo"] <= truth <= j["flip_rate_hi"]
        wrong_hits += j["flip_rate_lo"] <= 0.07 <= j["flip_rate_hi"]
    assert hits / 200 >= 0.93
    assert wrong_hits / 200 < 0.5  # the intervals are informative, not merely wide


def test_bootstrap_equals_naive_persona_resampling():
    rng = np.random.default_rng(4)
    labels = _study(rng, P=30)
    B, seed = 40, 3
    j = noise(labels, seed=seed, B=B).judges.iloc[0]
    personas = sorted(labels["persona_id"].unique())
    W = cluster_weights(len(personas), B, seed)
    wide = labels.pivot(index="assertion_id", columns="replicate", values="verdict")
    wide["persona"] = labels.drop_duplicates("assertion_id").set_index("assertion_id").loc[wide.index, "persona_id"]
    groups = {p: g for p, g in wide.groupby("persona")}
    reps = []
    for b in range(B):
        sample = pd.concat([groups[p] for p, w in zip(personas, W[b]) for _ in range(int(w))])
        reps.append(np.mean(sample[0] != sample[1]))
    lo, hi = percentile_interval(np.array(reps))
    assert j["flip_rate_lo"] == pytest.approx(lo, abs=1e-12) and j["flip_rate_hi"] == pytest.approx(hi, abs=1e-12)


# ---------------------------------------------------------------------------------------
# CLI


def test_cli_json_keys_and_out(cli, tmp_path):
    f = tmp_path / "labels.jsonl"
    _frame(HAND).to_json(f, orient="records", lines=True)
    run = tmp_path / "run"
    r = cli("noise", f, "--json", "--out", run, "--seed", "3")
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert set(js) == {"judges"} and set(js["judges"][0]) == JUDGE_KEYS
    for cat in js["judges"][0]["by_category"].values():
        assert set(cat) == {"items", "flip_rate"} and set(cat["flip_rate"]) == {"value", "lo", "hi"}
    assert json.loads((run / "noise.json").read_text()) == js
    assert js == noise(_frame(HAND), seed=3).to_json()


def test_cli_several_files_and_table(cli, tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.csv"
    _frame(HAND, judge="A").to_json(a, orient="records", lines=True)
    _frame(HAND, judge="B").to_csv(b, index=False)
    r = cli("noise", a, b)
    assert r.returncode == 0, r.stderr
    assert "flip rate" in r.stdout and "By category" in r.stdout
    assert "0.667" in r.stdout  # (2/3 + 1 + 0 + 1)/4


def test_cli_bad_input_exits_2_with_one_line(cli, tmp_path):
    f = tmp_path / "labels.jsonl"
    f.write_text('{"assertion_id": "a", "persona_id": "p", "category": "c", "judge": "J", "rubric": "s", "replicate": -1, "verdict": "supported"}\n')
    r = cli("noise", f, "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and f"{f}:1:" in r.stderr and "replicate" in r.stderr
    r = cli("noise", tmp_path / "missing.jsonl")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


def test_copied_replicates_are_zero_by_construction_not_measured():
    """Labels whose replicates after the first copy replicate 0 (replicate_of, a deterministic
    judge): the flip rate is 0 and flagged as by construction, in the JSON, the text and the
    notes; a judge with one measured later replicate is measured as usual."""
    copied = _frame(HAND, judge="local:x")
    copied["verdict"] = copied.groupby("assertion_id")["verdict"].transform("first")
    copied["replicate_of"] = pd.array([None if r == 0 else 0 for r in copied["replicate"]], dtype="Int64")
    measured = _frame(HAND, judge="sim:y").assign(replicate_of=pd.array([None] * len(_frame(HAND)), dtype="Int64"))
    partly = copied.assign(judge="local:z")
    partly.loc[partly.index[-1], "replicate_of"] = pd.NA  # one later row asked, not copied
    res = noise(pd.concat([copied, measured, partly], ignore_index=True), B=50)
    by = res.judges.set_index("judge")
    assert by.loc["local:x", "by_construction"] and by.loc["local:x", "flip_rate"] == 0.0
    assert not by.loc["sim:y", "by_construction"] and by.loc["sim:y", "flip_rate"] == pytest.approx(noise(_frame(HAND)).judges["flip_rate"][0])
    assert not by.loc["local:z", "by_construction"]
    js = {j["judge"]: j for j in res.to_json()["judges"]}
    assert js["local:x"]["by_construction"] is True and js["sim:y"]["by_construction"] is False
    assert [n for n in res.notes if "by construction" in n] == [
        "local:x (support): its replicates after the first are copies of replicate 0 (a deterministic judge, "
        "replicate_of): its flip rate is zero by construction, not measured"]
    text = res.to_text()
    assert any("local:x" in line and "0 by construction (not measured)" in line for line in text.splitlines())
    # labels without the column: nothing is by construction
    assert not noise(_frame(HAND)).judges["by_construction"].any()
