"""The comparison protocol (spec §8): against a literal loop implementation, the numpy fold
recipe, a hand-computed Nadeau–Bengio interval, real SynthPAI data, and the CLI contract."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memjudge.comparison import (
    compare,
    fold_assignment,
    nadeau_bengio,
    paired_summary,
    prepare,
)
from memjudge.errors import UsageError

S, U = "supported", "unsupported"
ROOT_SRC = str(__import__("pathlib").Path(__file__).resolve().parents[1] / "src")
KEYS = ["judge", "floor", "gate", "repeats", "folds", "seed", "B", "strict_binary", "write_all", "write_all_ci",
        "policies", "paired", "paired_vs_write_all", "folds_detail", "notes"]


def synthetic(n_personas=30, seed=0, judges=("sim:a",), conf_levels=None):
    rng = np.random.default_rng(seed)
    cats = ["values", "identity", "work", "hobbies"]
    cand, lab, cov = [], [], []
    k = 0
    for p in range(n_personas):
        ids = []
        for _ in range(rng.integers(3, 15)):
            c = str(rng.choice(cats, p=[0.3, 0.3, 0.2, 0.2]))
            conf = float(rng.choice(conf_levels)) if conf_levels else round(float(rng.beta(5, 2)), 2)
            ps = (0.55 + 0.4 * conf) if c == "values" else 0.95
            aid = f"a{k:04d}"
            k += 1
            cand.append({"persona_id": f"u{p}", "assertion_id": aid, "category": c, "confidence": conf, "text": "t"})
            for j in judges:
                v = S if rng.random() < ps else str(rng.choice([U, "partial"]))
                if rng.random() < 0.05:
                    v = None
                lab.append({"assertion_id": aid, "persona_id": f"u{p}", "category": c, "judge": j,
                            "rubric": "support", "replicate": 0, "verdict": v})
            ids.append(aid)
        for f in range(4):
            cb = None if rng.random() < 0.05 else [str(x) for x in rng.choice(ids, size=rng.integers(0, 3), replace=False)]
            cov.append({"persona_id": f"u{p}", "fact_id": f"f{f}", "covered_by": cb})
    return pd.DataFrame(cand), pd.DataFrame(lab), pd.DataFrame(cov)


# ---------------------------------------------------------------------------------------
# a literal, loop-by-loop implementation of spec §8 (the reference)


def reference(cand, lab, cov, gate, floor, R, K, seed):
    df = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    df["valid"] = df["verdict"].notna()
    df["sup"] = df["verdict"] == S
    personas = sorted(df["persona_id"].unique())
    judged = cov[cov["covered_by"].notna()]

    def metrics(d, keep, facts):
        kept = d[keep]
        v = kept["valid"].sum()
        faith = kept["sup"].sum() / v if v else np.nan
        kept_ids = set(kept["assertion_id"])
        c = np.mean([any(a in kept_ids for a in cb) for cb in facts["covered_by"]]) if len(facts) else np.nan
        return faith, keep.sum() / len(d), c

    def fit(d, gated):
        best_t, best_f = -np.inf, -np.inf
        for t in [-np.inf] + sorted(set(d.loc[gated, "confidence"])):
            keep = ~gated | (d["confidence"] >= t)
            kept = d[keep]
            v = kept["valid"].sum()
            if keep.sum() / len(d) >= floor and v and kept["sup"].sum() / v > best_f:
                best_t, best_f = t, kept["sup"].sum() / v
        return best_t

    rows = []
    for r in range(R):
        perm = np.random.default_rng(seed + r).permutation(len(personas))
        for k, fold in enumerate(np.array_split(perm, K)):
            held = {personas[i] for i in fold}
            te, tr = df[df["persona_id"].isin(held)], df[~df["persona_id"].isin(held)]
            facts = judged[judged["persona_id"].isin(held)]
            tg = fit(tr, pd.Series(True, index=tr.index))
            tt = fit(tr, tr["category"].isin(gate))
            rows.append((r, k, "global", tg, *metrics(te, te["confidence"] >= tg, facts)))
            rows.append((r, k, "targeted", tt, *metrics(te, ~te["category"].isin(gate) | (te["confidence"] >= tt), facts)))
    return rows


def test_protocol_matches_literal_loop_implementation():
    cand, lab, cov = synthetic(n_personas=25, seed=1)
    res = compare(cand, lab, cov, gate="values", floor=0.8, repeats=3, folds=5, seed=7)
    d = res.folds_detail
    ref = reference(cand, lab, cov, ["values"], 0.8, 3, 5, 7)
    got = d[d["policy"].isin(["global", "targeted"])]
    assert len(got) == len(ref)
    for (r, k, pol, t, f, re, c), row in zip(ref, got.itertuples(index=False)):
        assert (row.repeat, row.fold, row.policy) == (r, k, pol)
        assert (row.threshold if row.threshold is not None else -np.inf) == t
        assert row.faithfulness == pytest.approx(f, abs=1e-15, nan_ok=True)
        assert row.retention == pytest.approx(re, abs=1e-15)
        assert row.coverage == pytest.approx(c, abs=1e-15, nan_ok=True)


def test_fold_assignment_is_the_literal_numpy_recipe():
    got = fold_assignment(17, 3, 4, 5)
    assert len(got) == 12
    for r in range(3):
        perm = np.random.default_rng(5 + r).permutation(17)
        for k, f in enumerate(np.array_split(perm, 4)):
            rr, kk, g = got[r * 4 + k]
            assert (rr, kk) == (r, k) and np.array_equal(g, f)


def test_personas_are_sorted_as_strings_and_file_order_does_not_matter():
    cand, lab, cov = synthetic(n_personas=15, seed=2)
    a = compare(cand, lab, cov, repeats=2, folds=3).to_json()
    perm = np.random.default_rng(0).permutation(len(cand))
    b = compare(cand.iloc[perm], lab.iloc[::-1], cov.iloc[::-1], repeats=2, folds=3).to_json()
    assert a == b
    prep = prepare(cand, lab, cov)
    assert prep.personas.tolist() == sorted(cand["persona_id"].unique())  # "u10" < "u2"
    assert prep.personas.tolist()[:3] == ["u0", "u1", "u10"]


def test_nadeau_bengio_interval_by_hand():
    d = np.array([0.01, 0.03, -0.02, 0.04, 0.02, 0.00, 0.05, 0.01, 0.03, 0.02])
    J = len(d)
    ratio = 0.25
    mean = d.sum() / J
    var = ((d - mean) ** 2).sum() / (J - 1)
    half = stats.t.ppf(0.975, J - 1) * np.sqrt((1 / J + ratio) * var)
    lo, hi = nadeau_bengio(d, ratio)
    assert lo == pytest.approx(mean - half) and hi == pytest.approx(mean + half)
    # The correction widens the naive interval: 1/J + ratio > 1/J.
    naive = stats.t.ppf(0.975, J - 1) * np.sqrt(var / J)
    assert hi - lo > 2 * naive
    s = paired_summary(d, ratio)
    assert s["value"] == pytest.approx(mean)
    assert (s["lo"], s["hi"]) == pytest.approx(tuple(np.percentile(d, [2.5, 97.5])))
    assert s["same_sign"] == 8  # 0.00 and -0.02 differ in sign from the positive mean


def test_table1_numbers_follow_from_folds_detail():
    cand, lab, cov = synthetic(n_personas=30, seed=3)
    res = compare(cand, lab, cov, repeats=4, folds=5)
    j = res.to_json()
    d = res.folds_detail
    wa = j["write_all"]
    df = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id")
    v = df["verdict"].notna()
    assert wa["faithfulness"] == pytest.approx((df["verdict"] == S).sum() / v.sum())
    assert wa["retention"] == 1.0
    for name in ("global", "targeted", "per_category"):
        f = d.loc[d.policy == name, "faithfulness"].to_numpy(float)
        p = j["policies"][name]
        assert p["faithfulness"]["value"] == pytest.approx(f.mean())
        assert p["faithfulness"]["sd"] == pytest.approx(f.std(ddof=1))
        assert p["delta_faithfulness"] == pytest.approx(f.mean() - wa["faithfulness"])
        c = d.loc[d.policy == name, "coverage"].to_numpy(float)
        assert p["delta_coverage"] == pytest.approx(c.mean() - wa["coverage"])
    diff = (d.loc[d.policy == "targeted", "coverage"].to_numpy(float)
            - d.loc[d.policy == "global", "coverage"].to_numpy(float))
    assert j["paired"]["coverage"]["value"] == pytest.approx(diff.mean())
    nb = nadeau_bengio(diff, np.mean([6 / 24] * 20))
    assert (j["paired"]["coverage"]["nb_lo"], j["paired"]["coverage"]["nb_hi"]) == pytest.approx(nb)
    t = res.table()
    assert t.loc["targeted", "faithfulness"] == pytest.approx(j["policies"]["targeted"]["faithfulness"]["value"])
    assert "targeted - global" in t.index


def test_json_has_exactly_the_issue_keys_and_no_nan():
    cand, lab, _ = synthetic(n_personas=12, seed=4)
    j = compare(cand, lab, repeats=2, folds=3).to_json()
    assert list(j) == KEYS
    assert set(j["write_all"]) == {"faithfulness", "retention", "coverage"} and j["write_all"]["coverage"] is None
    for p in j["policies"].values():
        assert list(p) == ["faithfulness", "retention", "coverage", "delta_faithfulness", "delta_coverage"]
        assert set(p["faithfulness"]) == {"value", "lo", "hi", "sd"} and p["coverage"] is None and p["delta_coverage"] is None
    assert list(j["paired"]) == ["faithfulness", "retention", "coverage"] and j["paired"]["coverage"] is None
    assert list(j["paired"]["faithfulness"]) == ["value", "lo", "hi", "same_sign", "nb_lo", "nb_hi"]
    assert list(j["folds_detail"][0]) == ["repeat", "fold", "policy", "threshold", "faithfulness", "retention", "coverage"]
    assert list(j["write_all_ci"]) == ["faithfulness", "coverage"] and j["write_all_ci"]["coverage"] is None
    assert list(j["write_all_ci"]["faithfulness"]) == ["value", "lo", "hi", "n"]
    for p in j["paired_vs_write_all"].values():
        assert list(p) == ["faithfulness", "retention", "coverage"] and p["coverage"] is None
        assert list(p["faithfulness"]) == ["value", "lo", "hi", "same_sign"]
    assert j["notes"][-1] == "no coverage file: estimated coverage not computed" and j["B"] == 2000
    pc = [r for r in j["folds_detail"] if r["policy"] == "per_category"][0]
    assert set(pc["threshold"]) == set(cand["category"])
    json.dumps(j, allow_nan=False)


def test_coverage_excludes_unjudged_facts_and_ignores_unknown_ids():
    cand = pd.DataFrame({"persona_id": ["p1", "p1", "p2"], "assertion_id": ["a", "b", "c"],
                         "category": ["x", "x", "x"], "confidence": [0.2, 0.9, 0.5], "text": "t"})
    lab = pd.DataFrame({"assertion_id": ["a", "b", "c"], "judge": "j", "replicate": 0, "verdict": [U, S, S]})
    cov = pd.DataFrame({"persona_id": ["p1", "p1", "p1", "p2"], "fact_id": ["f1", "f2", "f3", "f1"],
                        "covered_by": [["a"], ["b", "zzz"], None, []]})
    prep = prepare(cand, lab, cov)
    assert prep.n_facts_unjudged == 1
    res = compare(cand, lab, cov, gate="x", floor=0.5, repeats=1, folds=2)
    assert res.write_all["coverage"] == pytest.approx(2 / 3)  # f1, f2 of p1 covered; f1 of p2 not; f3 unjudged


def test_judge_replicate_and_gate_selection():
    cand, lab, _ = synthetic(n_personas=10, seed=5, judges=("sim:a", "sim:b"))
    with pytest.raises(UsageError, match="several judges"):
        compare(cand, lab, repeats=1, folds=2)
    with pytest.raises(UsageError, match="not in labels"):
        compare(cand, lab, judge="sim:zzz", repeats=1, folds=2)
    with pytest.raises(UsageError, match="gate category"):
        compare(cand, lab, judge="sim:a", gate="nope", repeats=1, folds=2)
    with pytest.raises(UsageError, match="no replicate 3"):
        compare(cand, lab, judge="sim:a", replicate=3, repeats=1, folds=2)
    with pytest.raises(UsageError, match="exceeds"):
        compare(cand, lab, judge="sim:a", repeats=1, folds=11)
    assert compare(cand, lab, judge="sim:b", repeats=1, folds=2).judge == "sim:b"
    # majority over three replicates; a 1-1 tie (with one null) has no majority.
    one = lab[lab.judge == "sim:a"].head(3)
    reps = pd.concat([one.assign(replicate=r, verdict=v) for r, v in
                      enumerate([[S, U, S], [S, U, U], [U, None, S]])])
    prep = prepare(cand, reps, replicate="majority")
    got = dict(zip(prep.assertion_ids[:3], zip(prep.valid[:3], prep.sup[:3])))
    ids = one["assertion_id"].tolist()
    assert got[ids[0]] == (True, True) and got[ids[1]] == (True, False) and got[ids[2]] == (True, True)
    tie = pd.concat([one.head(1).assign(replicate=r, verdict=v) for r, v in enumerate([S, U])])
    p2 = prepare(cand, tie, replicate="majority")
    assert not p2.valid[0]


def test_gate_auto_is_chosen_inside_each_fit_fold():
    cand, lab, _ = synthetic(n_personas=30, seed=6)
    res = compare(cand, lab, gate="auto", repeats=2, folds=5)
    assert res.to_json()["gate"] == "auto"
    assert len(res.fold_gates) == 10 and all(len(g) == 1 for g in res.fold_gates)
    # Inside each fit fold the chosen category is that fold's lowest-support one.
    prep = res.prepared
    for (_r, _k, held), g in zip(fold_assignment(30, 2, 5, 0), res.fold_gates):
        fit = ~np.isin(prep.persona, held)
        rates = {c: prep.sup[fit & (prep.cat == i)].sum() / prep.valid[fit & (prep.cat == i)].sum()
                 for i, c in enumerate(prep.categories)}
        assert g[0] == min(rates, key=rates.get)


# ---------------------------------------------------------------------------------------
# real data: SynthPAI (persona = user, candidates = a model's ranked guesses, label = human check)


def synthpai(shared_data, model="gpt-4", label_col="eval_model_human"):
    d = pd.read_csv(shared_data / "synthpai" / "predictions_compact.csv")
    d = d[(d["model"] == model) & d[label_col].notna()]
    cand, lab = [], []
    for row in d.itertuples():
        guesses = json.loads(row.guesses)
        evals = json.loads(getattr(row, label_col))
        for rank, (g, e) in enumerate(zip(guesses, evals)):
            aid = f"{row.username}/{row.attribute}/{rank}"
            cert = row.human_certainty if np.isfinite(row.human_certainty) else 3
            cand.append({"persona_id": row.username, "assertion_id": aid, "category": row.attribute,
                         "confidence": round((3 - rank) / 3 * cert / 5, 4), "text": str(g)})
            lab.append({"assertion_id": aid, "judge": label_col, "replicate": 0,
                        "verdict": {1: S, 0: U}.get(e, "partial")})
    return pd.DataFrame(cand), pd.DataFrame(lab)


@pytest.mark.shared_data
def test_real_synthpai_matches_literal_implementation(shared_data):
    cand, lab = synthpai(shared_data)
    cov = pd.DataFrame({"persona_id": [], "fact_id": [], "covered_by": []})
    res = compare(cand, lab, gate="income_level", floor=0.8, repeats=1, folds=5, policies=("global", "targeted"))
    ref = reference(cand, lab, cov, ["income_level"], 0.8, 1, 5, 0)
    d = res.folds_detail[res.folds_detail.policy != "write_all"]
    assert len(cand) > 2000 and len(d) == len(ref)
    for (_r, _k, _pol, t, f, re, _), row in zip(ref, d.itertuples(index=False)):
        assert (row.threshold if row.threshold is not None else -np.inf) == t
        assert (row.faithfulness, row.retention) == pytest.approx((f, re), abs=1e-15)


# ---------------------------------------------------------------------------------------
# CLI


@pytest.fixture
def files(tmp_path):
    cand, lab, cov = synthetic(n_personas=20, seed=8)
    paths = {}
    for name, df in (("cand", cand), ("labels", lab), ("cov", cov)):
        p = tmp_path / f"{name}.jsonl"
        df.to_json(p, orient="records", lines=True)
        paths[name] = p
    return paths


def test_cli_compare_json_out_and_export(cli, files, tmp_path):
    run = tmp_path / "run"
    pol = tmp_path / "policy.json"
    r = cli("compare", files["cand"], "--labels", files["labels"], "--coverage", files["cov"], "--repeats", "2",
            "--folds", "4", "--json", "--out", run, "--export-policy", pol, "--policy", "per_category")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert list(j) == KEYS and j["repeats"] == 2 and len(j["folds_detail"]) == 2 * 4 * 4
    assert json.loads((run / "compare.json").read_text()) == j
    sweep = json.loads((run / "sweep.json").read_text())
    assert sweep["global"][0]["threshold"] is None and sweep["global"][0]["retention"] == 1.0
    assert set(sweep["fitted"]) == {"global", "targeted", "per_category"}
    assert sweep["fitted"]["global"]["retention"] >= 0.8
    calib = json.loads((run / "calibration.json").read_text())
    assert {c["category"] for c in calib["categories"]} == {"values", "identity", "work", "hobbies"}
    inputs = json.loads((run / "compare_inputs.json").read_text())
    assert inputs["coverage"].endswith("cov.jsonl")
    assert json.loads(pol.read_text())["kind"] == "per_category"
    human = cli("compare", files["cand"], "--labels", files["labels"], "--repeats", "1", "--folds", "2")
    assert human.returncode == 0 and "Targeted − global" in human.stdout and "±" in human.stdout


def test_sweep_and_calibration_by_hand():
    cand = pd.DataFrame({"persona_id": ["p1", "p1", "p2", "p2"], "assertion_id": list("abcd"),
                         "category": ["v", "v", "w", "w"], "confidence": [0.2, 0.8, 0.5, 0.5], "text": "t"})
    lab = pd.DataFrame({"assertion_id": list("abcd"), "judge": "j", "replicate": 0, "verdict": [U, S, S, None]})
    cov = pd.DataFrame({"persona_id": ["p1", "p2"], "fact_id": ["f", "g"], "covered_by": [["a"], ["c", "d"]]})
    res = compare(cand, lab, cov, gate="v", floor=0.5, repeats=1, folds=2)
    sw = res.sweep()
    g = [(r["threshold"], r["faithfulness"], r["retention"], r["coverage"]) for r in sw["global"]]
    assert g == [(None, 2 / 3, 1.0, 1.0), (0.2, 2 / 3, 1.0, 1.0), (0.5, 1.0, 0.75, 0.5), (0.8, 1.0, 0.25, 0.0)]
    assert sw["fitted"]["global"]["threshold"] == 0.5
    assert [r["threshold"] for r in sw["targeted"]] == [None, 0.2, 0.8]
    assert sw["targeted"][2]["retention"] == 0.75 and sw["targeted"][2]["coverage"] == 0.5
    cal = {c["category"]: c for c in res.calibration(B=50)["categories"]}
    assert cal["v"]["binning"] == "distinct" and [b["support_rate"] for b in cal["v"]["bins"]] == [0.0, 1.0]
    assert cal["w"]["bins"] == [{"conf_lo": 0.5, "conf_hi": 0.5, "n": 2, "valid": 1, "supported": 1,
                                 "support_rate": 1.0, "ci_lo": 1.0, "ci_hi": 1.0}]


def test_cli_bad_input_is_one_line_exit_2(cli, files, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"persona_id": "p", "assertion_id": "a", "category": "c", "confidence": 2, "text": "t"}\n')
    r = cli("compare", bad, "--labels", files["labels"])
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and f"{bad}:1:" in r.stderr
    r = cli("compare", files["cand"], "--labels", files["labels"], "--gate", "nope")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    r = cli("compare", files["cand"], "--labels", files["labels"], "--folds", "1")
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_engine_targeted_with_every_category_gated_equals_global():
    cand, lab, cov = synthetic(n_personas=20, seed=9)
    gate = ",".join(sorted(cand["category"].unique()))
    d = compare(cand, lab, cov, gate=gate, repeats=2, folds=4).folds_detail
    g, t = d[d.policy == "global"].reset_index(drop=True), d[d.policy == "targeted"].reset_index(drop=True)
    assert g.drop(columns="policy").equals(t.drop(columns="policy"))


def test_exact_per_category_in_the_protocol_matches_the_policy_class_and_beats_greedy():
    from memjudge.policies import PerCategory

    cand, lab, cov = synthetic(n_personas=20, seed=10, conf_levels=[0.2, 0.4, 0.5, 0.6, 0.8, 0.9])
    ex = compare(cand, lab, cov, repeats=1, folds=4, floor=0.7, per_category="exact")
    gr = compare(cand, lab, cov, repeats=1, folds=4, floor=0.7)
    frame = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    prep = ex.prepared
    for (r, k, held), (_, row) in zip(fold_assignment(20, 1, 4, 0),
                                      ex.folds_detail[ex.folds_detail.policy == "per_category"].iterrows()):
        fit = frame[~frame["persona_id"].isin(prep.personas[held])]
        pol = PerCategory(["values"], 0.7, method="exact").fit(fit)
        assert {c: (None if t == -np.inf else t) for c, t in pol.thresholds_.items()} == \
            {c: t for c, t in row["threshold"].items() if c in pol.thresholds_}
        g = gr.folds_detail
        gthr = g[(g.policy == "per_category") & (g.repeat == r) & (g.fold == k)]["threshold"].iloc[0]
        keep_g = fit["confidence"].to_numpy() >= fit["category"].map(
            {c: (-np.inf if t is None else t) for c, t in gthr.items()}).to_numpy()
        keep_e = pol.apply(fit)
        sup = (fit["verdict"] == S).to_numpy()
        valid = fit["verdict"].notna().to_numpy()
        assert (keep_e & sup).sum() / (keep_e & valid).sum() >= (keep_g & sup).sum() / (keep_g & valid).sum()
    with pytest.raises(UsageError):
        compare(cand, lab, repeats=1, folds=2, per_category="nope")


def test_unlabelled_candidates_and_unmatched_labels_are_counted():
    cand, lab, _ = synthetic(n_personas=8, seed=13)
    lab = pd.concat([lab.iloc[5:], pd.DataFrame([{"assertion_id": "zzz", "judge": "sim:a", "replicate": 0, "rubric": "support",
                                                  "verdict": S}])], ignore_index=True)
    res = compare(cand, lab, repeats=1, folds=2)
    assert res.prepared.n_unlabelled == 5 and res.prepared.n_labels_unmatched == 1
    assert int(res.prepared.valid.sum()) == lab["verdict"].notna().sum() - 1
    assert "5 candidates have no label" in res.render() and "1 labels name assertions" in res.render()


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["values", "auto", "values,work"]))
def test_row_order_never_matters_property(perm_seed, gate):
    cand, lab, cov = synthetic(n_personas=10, seed=14)
    base = compare(cand, lab, cov, gate=gate, repeats=2, folds=3, floor=0.7).to_json()
    rng = np.random.default_rng(perm_seed)
    shuffled = compare(cand.iloc[rng.permutation(len(cand))], lab.iloc[rng.permutation(len(lab))],
                       cov.iloc[rng.permutation(len(cov))], gate=gate, repeats=2, folds=3, floor=0.7).to_json()
    assert shuffled == base


# ---------------------------------------------------------------------------------------
# coverage that cannot be measured: null everywhere, said in a note, everything else computed


def _no_judged_fact(kind, cand, cov):
    if kind == "every covered_by null":
        return cov.assign(covered_by=[None] * len(cov))
    if kind == "empty frame":
        return cov.iloc[0:0]
    if kind == "empty frame without rows or types":
        return pd.DataFrame({"persona_id": [], "fact_id": [], "covered_by": []})
    return cov.assign(persona_id="other-" + cov["persona_id"])  # every fact's persona has no candidate


@pytest.mark.parametrize("kind, note", [
    ("every covered_by null", "reference facts without a coverage verdict excluded"),
    ("empty frame", "no judged reference fact"),
    ("empty frame without rows or types", "no judged reference fact"),
    ("personas without candidates", "reference facts of personas without candidates excluded"),
])
def test_coverage_without_a_judged_fact_is_null_everywhere_with_a_note(kind, note):
    cand, lab, cov = synthetic(n_personas=12, seed=4)
    res = compare(cand, lab, _no_judged_fact(kind, cand, cov), repeats=2, folds=3)
    j = res.to_json()
    json.dumps(j, allow_nan=False)
    assert j["write_all"]["coverage"] is None and j["write_all_ci"]["coverage"] is None
    for p in j["policies"].values():
        assert p["coverage"] is None and p["delta_coverage"] is None
    assert j["paired"]["coverage"] is None
    assert all(v["coverage"] is None for v in j["paired_vs_write_all"].values())
    assert all(r["coverage"] is None for r in j["folds_detail"])
    assert any(note in n for n in j["notes"]) and "no judged reference fact" in " ".join(j["notes"])
    assert note in res.render()
    # every other figure is the one computed without a coverage file
    base = compare(cand, lab, repeats=2, folds=3).to_json()
    for key in ("write_all", "policies", "paired", "paired_vs_write_all", "folds_detail"):
        assert j[key] == base[key], key
    sweep = res.sweep()
    assert all(r["coverage"] is None for r in sweep["global"] + sweep["targeted"])


def test_cli_compare_with_an_all_null_coverage_file(cli, files, tmp_path):
    cov = pd.read_json(files["cov"], lines=True).assign(covered_by=None)
    path = tmp_path / "null_cov.jsonl"
    cov.to_json(path, orient="records", lines=True)
    r = cli("compare", files["cand"], "--labels", files["labels"], "--coverage", path, "--repeats", "1",
            "--folds", "2", "--json")
    assert r.returncode == 0, r.stderr
    j = json.loads(r.stdout)
    assert j["write_all"]["coverage"] is None and j["write_all"]["faithfulness"] is not None
    assert f"{len(cov)} reference facts without a coverage verdict excluded" in r.stderr


# ---------------------------------------------------------------------------------------
# a third verdict ("partial", or any label but supported/unsupported)


def third_verdict_case():
    """Hand case: p1 a S, b partial, c U; p2 d S, e partial, f null.
    Default: valid a b c d e, supported a d → 2/5. Strict binary: valid a c d → 2/3."""
    cand = pd.DataFrame({"persona_id": ["p1", "p1", "p1", "p2", "p2", "p2"], "assertion_id": list("abcdef"),
                         "category": ["values", "values", "work", "work", "values", "work"],
                         "confidence": [0.9, 0.5, 0.7, 0.8, 0.3, 0.6], "text": "t"})
    lab = pd.DataFrame({"assertion_id": list("abcdef"), "persona_id": ["p1"] * 3 + ["p2"] * 3,
                        "judge": "j", "rubric": "support", "replicate": 0,
                        "verdict": [S, "partial", U, S, "partial", None]})
    return cand, lab


def test_a_third_verdict_is_valid_and_not_supported_unless_strict_binary():
    cand, lab = third_verdict_case()
    default = compare(cand, lab, gate="values", floor=0.5, repeats=1, folds=2)
    strict = compare(cand, lab, gate="values", floor=0.5, repeats=1, folds=2, strict_binary=True)
    assert default.write_all["faithfulness"] == pytest.approx(2 / 5)
    assert strict.write_all["faithfulness"] == pytest.approx(2 / 3)
    assert default.write_all["retention"] == strict.write_all["retention"] == 1.0  # retention counts every candidate
    assert int(default.prepared.valid.sum()) == 5 and int(strict.prepared.valid.sum()) == 3
    assert default.prepared.n_nonbinary == strict.prepared.n_nonbinary == 2
    assert default.to_json()["strict_binary"] is False and strict.to_json()["strict_binary"] is True
    assert "2 candidates have a verdict other than supported/unsupported: valid and not supported" in default.render()
    assert "excluded from faithfulness" in strict.render()
    # held-out folds and the calibration table follow the same reading
    d = strict.folds_detail
    p2_fold = d[(d.policy == "write_all") & (d.faithfulness == 1.0)]
    assert len(p2_fold) == 1  # persona p2 alone: d supported, e set aside, f null → 1/1
    cal = {c["category"]: c for c in strict.calibration(B=20)["categories"]}
    assert (cal["values"]["valid"], cal["values"]["supported"]) == (1, 1)
    cal = {c["category"]: c for c in default.calibration(B=20)["categories"]}
    assert (cal["values"]["valid"], cal["values"]["supported"]) == (3, 1)


def test_strict_binary_treats_a_third_verdict_like_null_in_a_majority():
    cand, lab = third_verdict_case()
    reps = pd.concat([lab.assign(replicate=r) for r in range(3)], ignore_index=True)
    a = reps["assertion_id"] == "a"
    reps.loc[a, "verdict"] = ["partial", "partial", S]
    default = prepare(cand, reps, replicate="majority")
    strict = prepare(cand, reps, replicate="majority", strict_binary=True)
    assert (default.valid[0], default.sup[0]) == (True, False)   # partial wins 2–1
    assert (strict.valid[0], strict.sup[0]) == (True, True)      # partial set aside: supported 1–0


def test_policy_classes_read_a_third_verdict_the_same_way():
    from memjudge.policies import GlobalThreshold, make_policy

    cand, lab = third_verdict_case()
    frame = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id")
    assert GlobalThreshold(1.0).fit(frame).fit_info_["faithfulness"] == pytest.approx(2 / 5)  # floor 1: keep all
    strict = make_policy("global", floor=1.0, strict_binary=True).fit(frame)
    assert strict.fit_info_["faithfulness"] == pytest.approx(2 / 3) and strict.fit_info_["strict_binary"] is True


def test_cli_strict_binary(cli, tmp_path):
    cand, lab = third_verdict_case()
    cp, lp = tmp_path / "c.jsonl", tmp_path / "l.jsonl"
    cand.to_json(cp, orient="records", lines=True)
    lab.merge(cand[["assertion_id", "category"]]).to_json(lp, orient="records", lines=True)
    args = ("compare", cp, "--labels", lp, "--gate", "values", "--floor", "0.5", "--repeats", "1", "--folds", "2",
            "--json")
    default, strict = cli(*args), cli(*args, "--strict-binary")
    assert default.returncode == 0 and strict.returncode == 0, strict.stderr
    d, s = json.loads(default.stdout), json.loads(strict.stdout)
    assert d["write_all"]["faithfulness"] == pytest.approx(2 / 5) and d["strict_binary"] is False
    assert s["write_all"]["faithfulness"] == pytest.approx(2 / 3) and s["strict_binary"] is True
    assert s["write_all_ci"]["faithfulness"]["n"] == 3 and d["write_all_ci"]["faithfulness"]["n"] == 5
    assert "excluded from faithfulness" in strict.stderr


# ---------------------------------------------------------------------------------------
# spec §7: write-all (overall support, coverage) with a persona-cluster interval;
# spec §8: each policy's paired per-fold change against write-all


def literal_cluster_rate(rows: pd.DataFrame, num: str, den: str, B: int, seed: int):
    """Reference: rebuild every resample's rows persona by persona (the draws of
    `cluster_weights`), then the rate and its 2.5/97.5 percentiles."""
    from memjudge.stats.bootstrap import cluster_weights

    personas = sorted(rows["persona_id"].unique())
    by = {p: rows[rows["persona_id"] == p] for p in personas}
    W = cluster_weights(len(personas), B=B, seed=seed)
    reps = []
    for w in W:
        sample = pd.concat([by[p] for p, k in zip(personas, w) for _ in range(int(k))])
        reps.append(sample[num].sum() / sample[den].sum())
    return np.percentile(reps, [2.5, 97.5])


def test_write_all_intervals_match_a_literal_resampling():
    cand, lab, cov = synthetic(n_personas=15, seed=17)
    res = compare(cand, lab, cov, repeats=1, folds=3, seed=5, B=150)
    ci = res.to_json()["write_all_ci"]
    df = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    df["valid"] = df["verdict"].notna()
    df["sup"] = df["verdict"] == S
    f = ci["faithfulness"]
    assert f["value"] == pytest.approx(df["sup"].sum() / df["valid"].sum()) == res.write_all["faithfulness"]
    assert f["n"] == df["valid"].sum()
    assert [f["lo"], f["hi"]] == pytest.approx(literal_cluster_rate(df, "sup", "valid", 150, 5))
    facts = cov[cov["covered_by"].notna()].copy()
    facts["judged"] = 1
    facts["covered"] = facts["covered_by"].map(lambda ids: any(i in set(cand["assertion_id"]) for i in ids))
    facts = pd.concat([facts, pd.DataFrame({"persona_id": sorted(set(cand["persona_id"]) - set(facts["persona_id"])),
                                            "judged": 0, "covered": False})])  # every persona is drawn
    c = ci["coverage"]
    assert c["value"] == pytest.approx(res.write_all["coverage"]) and c["n"] == facts["judged"].sum()
    assert [c["lo"], c["hi"]] == pytest.approx(literal_cluster_rate(facts, "covered", "judged", 150, 5))


def test_paired_change_against_write_all_matches_folds_detail():
    cand, lab, cov = synthetic(n_personas=30, seed=18)
    res = compare(cand, lab, cov, repeats=4, folds=5)
    j = res.to_json()
    wide = {m: res.folds_detail.pivot_table(index=["repeat", "fold"], columns="policy", values=m, dropna=False)
            for m in ("faithfulness", "retention", "coverage")}
    assert list(j["paired_vs_write_all"]) == ["global", "targeted", "per_category"]
    for name, metrics in j["paired_vs_write_all"].items():
        for m, got in metrics.items():
            d = (wide[m][name] - wide[m]["write_all"]).dropna().to_numpy()
            assert list(got) == ["value", "lo", "hi", "same_sign"]
            assert got["value"] == pytest.approx(d.mean())
            assert [got["lo"], got["hi"]] == pytest.approx(list(np.percentile(d, [2.5, 97.5])))
            assert got["same_sign"] == int((np.sign(d) == np.sign(d.mean())).sum())
    # The full-sample Δ is unchanged beside it; the paired mean differs only by the fold means of write-all.
    wa_fold_mean = wide["faithfulness"]["write_all"].mean()
    t = j["policies"]["targeted"]
    assert t["delta_faithfulness"] == pytest.approx(t["faithfulness"]["value"] - j["write_all"]["faithfulness"])
    assert j["paired_vs_write_all"]["targeted"]["faithfulness"]["value"] == pytest.approx(
        t["faithfulness"]["value"] - wa_fold_mean)


def test_paired_change_against_write_all_by_hand():
    """Two personas, two folds (each held out once). Fit on p2 (floor 1/2 of 3: keep 2): t = 0.7,
    so held-out p1 keeps b only: faithfulness 1/1 against write-all 1/2, retention 1/2. Fit on p1
    (keep 1 of 2): t = 0.8, so held-out p2 keeps e only: 1/1 against 2/3, retention 1/3."""
    cand = pd.DataFrame({"persona_id": ["p1", "p1", "p2", "p2", "p2"], "assertion_id": list("abcde"),
                         "category": ["v", "v", "v", "v", "w"], "confidence": [0.2, 0.8, 0.3, 0.7, 0.9], "text": "t"})
    lab = pd.DataFrame({"assertion_id": list("abcde"), "judge": "j", "replicate": 0, "verdict": [U, S, U, S, S]})
    res = compare(cand, lab, gate="v", floor=0.5, repeats=1, folds=2)
    got = res.paired_vs_write_all()["targeted"]
    assert got["faithfulness"]["value"] == pytest.approx((1 / 2 + 1 / 3) / 2)
    assert [got["faithfulness"]["lo"], got["faithfulness"]["hi"]] == pytest.approx(
        [1 / 3 + 0.025 * (1 / 2 - 1 / 3), 1 / 3 + 0.975 * (1 / 2 - 1 / 3)])  # linear percentiles of two values
    assert got["faithfulness"]["same_sign"] == 2
    assert got["retention"]["value"] == pytest.approx((-1 / 2 - 2 / 3) / 2) and got["retention"]["same_sign"] == 2
    assert got["coverage"] is None


def table_rows(text: str, header_start: str) -> tuple[list[str], list[str]]:
    """The header and the rows of the plain-text table whose header line starts with
    `header_start` (rows run from under the rule to the first blank or indented line)."""
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith(header_start))
    assert set(lines[i + 1]) == {"-"}
    rows = []
    for line in lines[i + 2:]:
        if not line.strip() or line.startswith(" "):
            break
        rows.append(line)
    return lines[i], rows


def test_cli_compare_text_columns_are_always_separated(cli, tmp_path):
    """#19 item 4: every row of `memjudge compare`'s text tables has its columns separated by at
    least two spaces (figures and intervals never run together), also with a long gate label and
    the gold table."""
    import re

    from memjudge.simulation import simulate

    c = simulate(preset="paper", seed=2, personas=30)
    paths = c.write(tmp_path / "corpus")
    gold = tmp_path / "gold.jsonl"
    c.labels[["assertion_id", "verdict"]].sample(frac=0.3, random_state=0).to_json(gold, orient="records", lines=True)
    r = cli("compare", paths["candidates"], "--labels", paths["labels"], "--coverage", paths["coverage"],
            "--gate", "values,preferences,health", "--repeats", "2", "--gold", gold)
    assert r.returncode == 0, r.stderr
    figure = r"(—|[+-]?\d+\.\d\d( ± \d+\.\d\d| \[[+-]?\d+\.\d\d, [+-]?\d+\.\d\d\])?)"
    header, rows = table_rows(r.stdout, "Policy ")
    assert re.split(r"\s{2,}", header) == ["Policy", "Faithfulness", "Retention", "Est. coverage", "Δ faith (pts)",
                                           "Δ cov (pts)"]
    assert [row.split("  ")[0] for row in rows] == [
        "Write-all (full sample)", "Global threshold", "Targeted (values, preferences, health)",
        "Per-category (greedy)", "Global threshold − write-all", "Targeted − write-all", "Per-category − write-all",
        "Targeted − global"]
    for row in rows:
        cells = re.split(r"\s{2,}", row.strip())
        assert len(cells) in (4, 6), row        # rows without a Δ column end after the third metric
        assert all(re.fullmatch(figure, cell) for cell in cells[1:]), row
    # the same holds for the judge-corrected (PPI++) table beside it
    header, rows = table_rows(r.stdout.split("Judge-corrected faithfulness")[1], "Policy ")
    assert re.split(r"\s{2,}", header) == ["Policy", "Judge only", "PPI++", "folds with PPI", "gold/fold"]
    for row in rows:
        cells = re.split(r"\s{2,}", row.strip())
        assert len(cells) in (4, 5) and re.fullmatch(figure, cells[1]), row


def test_format_columns_separates_cells_wider_than_their_header():
    from memjudge.comparison.result import format_columns

    lines = format_columns(["Policy", "A"], [["x", "-1.52 [-5.86, +3.40]"], ["a much longer label", "+13.16"]])
    assert lines == [f"{'Policy':<19}  {'A':>20}", "-" * 41, f"{'x':<19}  -1.52 [-5.86, +3.40]",
                     f"a much longer label  {'+13.16':>20}"]
