"""`memjudge estimate`: judge-only, gold-only and PPI++ support rates through the CLI and the API,
against ppi_py (iid data, weights, real SynthPAI data), a loop bootstrap, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import memjudge
from memjudge.cli import main
from memjudge.stats.bootstrap import cluster_weights, percentile_interval
from memjudge.stats.ppi import ppi_mean_point, three_estimates

ppi_py = pytest.importorskip("ppi_py")

TEST_DATA = Path(__file__).parent / "data"
GROUP_KEYS = {"group", "n_items", "n_gold", "judge_accuracy_on_gold", "judge_only", "gold_only", "ppi",
              "effective_gold_n"}


def _labels(ids, personas, cats, verdicts, judge="sim:j"):
    return pd.DataFrame({"assertion_id": ids, "persona_id": personas, "category": cats, "judge": judge,
                         "rubric": "support", "replicate": 0, "verdict": verdicts})


def _write_jsonl(path, rows):
    path = Path(path)
    with path.open("w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    return path


def _world(seed, n_items=1500, n_gold=200, acc=0.9, p=0.8, per_persona=1, cats=("a", "b")):
    """Items with a true support value, a judge verdict of accuracy `acc`, and gold on a random subset."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n_items) < p
    judge = np.where(rng.random(n_items) < acc, truth, ~truth)
    ids = [f"x{i:05d}" for i in range(n_items)]
    personas = [f"p{i // per_persona:05d}" for i in range(n_items)]
    cat = [cats[i % len(cats)] for i in range(n_items)]
    lab = _labels(ids, personas, cat, np.where(judge, "supported", "unsupported"))
    g = np.sort(rng.choice(n_items, n_gold, replace=False))
    gold = pd.DataFrame({"assertion_id": [ids[i] for i in g],
                         "verdict": np.where(truth[g], "supported", "unsupported")})
    return lab, gold, truth, judge, g


def _run(capsys, *args):
    code = main(list(map(str, args)))
    out, err = capsys.readouterr()
    return code, out, err


# ---------------------------------------------------------------------------------------
# equality with ppi_py


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_clt_estimate_equals_ppi_py_on_iid_data(tmp_path, capsys, seed):
    lab, gold, truth, judge, g = _world(seed, acc=0.75 + 0.07 * seed)
    lp = tmp_path / "labels.jsonl"
    lab.to_json(lp, orient="records", lines=True)
    gp = tmp_path / "gold.csv"
    gold.to_csv(gp, index=False)
    code, out, err = _run(capsys, "estimate", lp, "--gold", gp, "--interval", "clt", "--json", "--out", tmp_path / "run")
    assert code == 0, err
    res = json.loads(out)
    assert json.loads((tmp_path / "run" / "estimate.json").read_text()) == res
    assert {"judge", "n_items", "n_gold", "interval", "groups"} <= set(res)
    assert res["judge"] == "sim:j" and res["n_items"] == 1500 and res["n_gold"] == 200 and res["interval"] == "clt"
    grp = res["groups"][0]
    assert set(grp) >= GROUP_KEYS and grp["group"] == "all"
    Y, Yh = truth[g].astype(float), judge[g].astype(float)
    unl = np.setdiff1d(np.arange(len(truth)), g)
    Yu = judge[unl].astype(float)
    point = ppi_py.ppi_mean_pointestimate(Y, Yh, Yu, lam=None)
    lo, hi = ppi_py.ppi_mean_ci(Y, Yh, Yu, alpha=0.05, lam=None)
    assert grp["ppi"]["value"] == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert grp["ppi"]["lo"] == pytest.approx(float(np.ravel(lo)[0]), abs=1e-9)
    assert grp["ppi"]["hi"] == pytest.approx(float(np.ravel(hi)[0]), abs=1e-9)
    _, lam = ppi_mean_point(Y, Yh, Yu)
    assert grp["ppi_lambda"] == pytest.approx(lam, abs=1e-12)
    # gold only = PPI with λ = 0 = the classical mean and its CLT interval
    glo, ghi = ppi_py.ppi_mean_ci(Y, Yh, Yu, alpha=0.05, lam=0)
    assert grp["gold_only"]["value"] == pytest.approx(Y.mean(), abs=1e-12)
    assert grp["gold_only"]["lo"] == pytest.approx(float(np.ravel(glo)[0]), abs=1e-9)
    assert grp["gold_only"]["hi"] == pytest.approx(float(np.ravel(ghi)[0]), abs=1e-9)
    assert grp["judge_only"]["value"] == pytest.approx(judge.mean(), abs=1e-12)
    assert grp["judge_accuracy_on_gold"] == pytest.approx((Y == Yh).mean())
    # effective gold n = n_gold · var(gold only) / var(PPI++), here from the CLT variances
    eff = 200 * ((ghi - glo) / (hi - lo)) ** 2
    assert grp["effective_gold_n"] == pytest.approx(float(np.ravel(eff)[0]), rel=1e-9)


def _post_stratified(y, cells, gold, w):
    """The weighted estimate post-stratified by ``cells`` and its variance, item by item
    (stats/active.py): θ = Σ_k N_k/N · Ȳ_k (Ȳ_k the gold's weighted mean in cell k), V = Σ z²/N²
    with z = Ȳ_k − θ on every item plus w̃(Y − Ȳ_k) on gold, w̃ = w·N_k/Σ_k w."""
    N = len(y)
    means = {k: np.sum(w[(cells == k) & gold] * y[(cells == k) & gold]) / np.sum(w[(cells == k) & gold])
             for k in np.unique(cells)}
    theta = sum((cells == k).sum() / N * m for k, m in means.items())
    z = np.zeros(N)
    for k, m in means.items():
        a = cells == k
        g = a & gold
        z[a] += m - theta
        z[g] += a.sum() / np.sum(w[g]) * w[g] * (y[g] - m)
    return theta, np.sum(z * z) / N**2


def test_weighted_estimate_is_ipw_ppi(tmp_path):
    """A stratified sample: the weighted estimate post-stratified by category × verdict (here the
    stratified mean), equal to ppi_py's point estimate with every item as the unlabelled set at
    λ = 1; the CLT interval is the linearised variance computed item by item; gold only is the
    weighted mean of the gold labels."""
    lab, _, truth, judge, _ = _world(7, n_items=2000, acc=0.85, cats=("a", "b", "c"))
    lp = tmp_path / "labels.jsonl"
    lab.to_json(lp, orient="records", lines=True)
    sp = tmp_path / "sample.jsonl"
    rows = memjudge.sample(_candidates(lab, tmp_path), 240, labels=lp, strategy="stratified", seed=4)
    rows.to_json(sp, orient="records", lines=True)
    tmap = dict(zip(lab["assertion_id"], truth))
    gold = pd.DataFrame({"assertion_id": rows["assertion_id"],
                         "verdict": ["supported" if tmap[a] else "unsupported" for a in rows["assertion_id"]]})
    res = memjudge.estimate(lp, gold, sample=sp, interval="clt")
    assert res.weighted and res.to_dict()["estimator"] == "ipw"
    grp = res.to_dict()["groups"][0]
    ids = lab["assertion_id"].to_numpy()
    in_s = np.isin(ids, rows["assertion_id"])
    pi = rows.set_index("assertion_id")["inclusion_prob"]
    w = np.ones(len(ids))
    w[in_s] = 1.0 / pi.loc[ids[in_s]].to_numpy()
    Y, Yh = truth.astype(float), judge.astype(float)
    assert grp["ppi_lambda"] == 1.0
    point = ppi_py.ppi_mean_pointestimate(Y[in_s], Yh[in_s], Yh, lam=1.0, w=w[in_s])
    assert grp["ppi"]["value"] == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    cells = pd.Series(lab["category"]).astype("category").cat.codes.to_numpy() * 2 + judge.astype(int)
    theta, var = _post_stratified(Y, cells, in_s, w)
    assert grp["ppi"]["value"] == pytest.approx(theta, abs=1e-9)
    assert grp["ppi"]["hi"] - grp["ppi"]["lo"] == pytest.approx(2 * 1.959963984540054 * np.sqrt(var), rel=1e-9)
    assert grp["gold_only"]["value"] == pytest.approx(np.sum(w[in_s] * Y[in_s]) / np.sum(w[in_s]), abs=1e-9)
    # strata by verdict: PPI is the stratified mean of the gold
    key = lab["category"] + "|" + lab["verdict"]
    by_h = pd.DataFrame({"h": key, "y": Y, "s": in_s})
    strat = sum(len(g) / len(by_h) * g.loc[g["s"], "y"].mean() for _, g in by_h.groupby("h"))
    assert grp["ppi"]["value"] == pytest.approx(strat, abs=1e-9)


def _hand_stratified(lab_verdicts, categories, y_by_id, sample_rows):
    """Σ_h N_h/N · (mean gold in h): the stratified estimate by hand (strata category × verdict)."""
    key = pd.Series(categories, index=lab_verdicts.index) + "|" + lab_verdicts.fillna("none")
    s = sample_rows.set_index("assertion_id")
    total = 0.0
    for _, members in key.groupby(key):
        gold_h = [y_by_id[a] for a in members.index if a in s.index and a in y_by_id]
        total += len(members) / len(key) * np.mean(gold_h)
    return total


def _check_settled(groups, n_items):
    for g in groups:
        for k in ("judge_only", "gold_only", "ppi"):
            e = g[k]
            if e["value"] is None:
                continue
            assert 0.0 <= e["value"] <= 1.0, (g["group"], k, e)
            assert e["lo"] <= e["value"] <= e["hi"], (g["group"], k, e)
        if g["effective_gold_n"] is not None:
            assert g["effective_gold_n"] <= g["n_items"] <= n_items


def test_stratum_sampled_whole_is_counted_once(tmp_path):
    """Issue 50's defect, as a user met it: 3 personas of the paper corpus, sim:paper, a stratified
    sample of 40 where every `unsupported` stratum is sampled whole (inclusion_prob 1). The estimate
    is the stratified mean by hand (it was 13/141 too high), inside [0, 1] and its own interval,
    with an effective n no larger than the items."""
    from memjudge.cli import main as cli

    assert cli(["simulate", "--preset", "paper", "--personas", "3", "--seed", "1", "--out", str(tmp_path / "c3")]) == 0
    (tmp_path / "paper.toml").write_text(f'[[judge]]\nspec = "sim:paper"\n[judge.options]\ntruth = "{tmp_path / "c3"}"\n')
    assert cli(["score", str(tmp_path / "c3" / "candidates.jsonl"), "--sources", str(tmp_path / "c3" / "sources.jsonl"),
                "--judge", "sim:paper", "--judges-file", str(tmp_path / "paper.toml"), "--out", str(tmp_path / "run"),
                "--no-progress", "--quiet"]) == 0
    assert cli(["sample", str(tmp_path / "c3" / "candidates.jsonl"), "--n", "40", "--labels", str(tmp_path / "run" / "labels.jsonl"),
                "--strategy", "stratified", "--seed", "3", "--out", str(tmp_path / "s.jsonl")]) == 0
    rows = pd.read_json(tmp_path / "s.jsonl", lines=True, dtype={"assertion_id": str})
    assert (rows["inclusion_prob"] == 1.0).sum() == 13  # the unsupported strata, whole
    truth = pd.read_json(tmp_path / "c3" / "labels.jsonl", lines=True, dtype={"assertion_id": str})
    y_by_id = dict(zip(truth["assertion_id"], (truth["verdict"] == "supported").astype(float)))
    rows.assign(verdict=truth.set_index("assertion_id").loc[rows["assertion_id"], "verdict"].to_numpy(),
                annotator="sim")[["assertion_id", "verdict", "annotator"]].to_json(tmp_path / "g.jsonl", orient="records", lines=True)
    lab = memjudge.read_labels(tmp_path / "run" / "labels.jsonl").set_index("assertion_id")
    hand = _hand_stratified(lab["verdict"], lab["category"].to_numpy(), y_by_id, rows)
    assert hand == pytest.approx(0.929, abs=5e-4)
    for interval in ("bootstrap", "clt"):
        res = memjudge.estimate(tmp_path / "run" / "labels.jsonl", tmp_path / "g.jsonl", sample=tmp_path / "s.jsonl",
                                interval=interval, by="category")
        groups = res.to_dict()["groups"]
        assert groups[0]["ppi"]["value"] == pytest.approx(hand, abs=1e-12)
        assert groups[0]["gold_only"]["value"] == pytest.approx(hand, abs=1e-12)
        _check_settled(groups, 141)
        truth_rate = float(np.mean(list(y_by_id.values())))
        assert groups[0]["ppi"]["lo"] <= truth_rate <= groups[0]["ppi"]["hi"]


def test_synthpai_strata_at_probability_one(tmp_path, capsys):
    """Real data (SynthPAI, shipped sample): the LLM-only verdicts as the judge, the human-checked ones
    as gold; a stratified sample whose small strata are taken whole. The estimate is the stratified
    mean by hand, every figure inside [0, 1] and its interval."""
    code, _, err = _run(capsys, "import", "synthpai", TEST_DATA / "synthpai_sample", "--out", tmp_path / "sp")
    assert code == 0, err
    lab = memjudge.read_labels(tmp_path / "sp" / "labels.jsonl")
    llm = lab[lab["judge"] == "synthpai:llm-only"]
    human = lab[lab["judge"] == "synthpai:human-checked"].set_index("assertion_id")["verdict"]
    cand = pd.read_json(tmp_path / "sp" / "candidates.jsonl", lines=True, dtype={"assertion_id": str})
    cand = cand[cand["assertion_id"].isin(llm["assertion_id"])]  # the items the LLM judge labelled
    cand.to_json(tmp_path / "cand.jsonl", orient="records", lines=True)
    code, _, err = _run(capsys, "sample", tmp_path / "cand.jsonl", "--n", "60", "--labels",
                        tmp_path / "sp" / "labels.jsonl", "--judge", "synthpai:llm-only", "--strategy", "stratified",
                        "--seed", "2", "--out", tmp_path / "s.jsonl")
    assert code == 0, err
    rows = pd.read_json(tmp_path / "s.jsonl", lines=True, dtype={"assertion_id": str})
    assert (rows["inclusion_prob"] == 1.0).any() and (rows["inclusion_prob"] < 1.0).any()
    gold = rows[["assertion_id"]].assign(verdict=human.loc[rows["assertion_id"]].to_numpy())
    gold.to_csv(tmp_path / "gold.csv", index=False)
    y_by_id = dict(zip(human.index, (human == "supported").astype(float)))
    v = llm.set_index("assertion_id")
    hand = _hand_stratified(v["verdict"], v["category"].to_numpy(), y_by_id, rows)
    for interval in ("bootstrap", "clt"):
        code, out, err = _run(capsys, "estimate", tmp_path / "sp" / "labels.jsonl", "--gold", tmp_path / "gold.csv",
                              "--judge", "synthpai:llm-only", "--sample", tmp_path / "s.jsonl", "--by", "category",
                              "--interval", interval, "--json")
        assert code == 0, err
        groups = json.loads(out)["groups"]
        assert groups[0]["ppi"]["value"] == pytest.approx(hand, abs=1e-12)
        _check_settled(groups, len(v))


def _candidates(lab, tmp_path):
    c = lab[["assertion_id", "persona_id", "category"]].assign(text="User is someone.")
    p = tmp_path / "candidates.jsonl"
    c.to_json(p, orient="records", lines=True)
    return p


def test_real_synthpai_llm_judge_against_human_gold(tmp_path, capsys):
    """Real data: SynthPAI's human-checked verdicts as gold on a random subset, the LLM-only verdicts
    as the judge ('partial' counts as not supported on both sides)."""
    code, _, err = _run(capsys, "import", "synthpai", TEST_DATA / "synthpai_sample", "--out", tmp_path / "sp")
    assert code == 0, err
    lab = memjudge.read_labels(tmp_path / "sp" / "labels.jsonl")
    llm = lab[lab["judge"] == "synthpai:llm-only"]
    human = lab[lab["judge"] == "synthpai:human-checked"].set_index("assertion_id")["verdict"]
    rng = np.random.default_rng(0)
    ids = np.sort(llm["assertion_id"].to_numpy())
    gold_ids = np.sort(rng.choice(ids, 300, replace=False))
    pd.DataFrame({"assertion_id": gold_ids, "verdict": human.loc[gold_ids].to_numpy()}).to_csv(tmp_path / "gold.csv", index=False)
    code, out, err = _run(capsys, "estimate", tmp_path / "sp" / "labels.jsonl", "--gold", tmp_path / "gold.csv",
                          "--judge", "synthpai:llm-only", "--interval", "clt", "--json")
    assert code == 0, err
    grp = json.loads(out)["groups"][0]
    jv = llm.set_index("assertion_id")["verdict"]
    Y = (human.loc[gold_ids] == "supported").to_numpy(float)
    Yh = (jv.loc[gold_ids] == "supported").to_numpy(float)
    Yu = (jv.loc[np.setdiff1d(ids, gold_ids)] == "supported").to_numpy(float)
    point = ppi_py.ppi_mean_pointestimate(Y, Yh, Yu, lam=None)
    lo, hi = ppi_py.ppi_mean_ci(Y, Yh, Yu, alpha=0.05, lam=None)
    assert grp["n_items"] == len(ids) and grp["n_gold"] == 300
    assert grp["ppi"]["value"] == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert grp["ppi"]["lo"] == pytest.approx(float(np.ravel(lo)[0]), abs=1e-9)
    assert grp["ppi"]["hi"] == pytest.approx(float(np.ravel(hi)[0]), abs=1e-9)
    # The LLM judge agrees well with the humans here: PPI++ is narrower than gold only.
    assert grp["ppi"]["hi"] - grp["ppi"]["lo"] < grp["gold_only"]["hi"] - grp["gold_only"]["lo"]
    assert grp["effective_gold_n"] > 300


def test_bootstrap_equals_a_loop_over_resampled_personas():
    """The vectorised persona bootstrap (per-persona sums, λ re-tuned per resample) equals
    resampling the personas' items explicitly and calling the item-level estimator."""
    lab, gold, truth, judge, g = _world(3, n_items=240, n_gold=60, per_persona=4)
    B, seed = 150, 11
    res = memjudge.estimate(lab, gold, B=B, seed=seed)
    grp = res.to_dict()["groups"][0]
    personas = np.array(sorted(lab["persona_id"].unique()))
    pcode = np.searchsorted(personas, lab["persona_id"].to_numpy())
    W = cluster_weights(len(personas), B, seed)
    is_gold = np.zeros(len(truth), bool)
    is_gold[g] = True
    reps = []
    for b in range(B):
        idx = np.concatenate([np.repeat(np.flatnonzero(pcode == p), int(W[b, p])) for p in range(len(personas))])
        gi, ui = idx[is_gold[idx]], idx[~is_gold[idx]]
        reps.append(ppi_mean_point(truth[gi].astype(float), judge[gi].astype(float), judge[ui].astype(float))[0])
    lo, hi = percentile_interval(np.array(reps))
    args = (pcode, truth.astype(float), judge.astype(float), is_gold, np.ones(len(truth), bool), judge)
    raw = three_estimates(*args, n_personas=len(personas), W=W, pad=False)
    assert raw["ppi_lo"] == pytest.approx(lo, abs=1e-9)
    assert raw["ppi_hi"] == pytest.approx(hi, abs=1e-9)
    # The default adds the small-count floor: the percentile interval, widened where needed to the
    # CLT interval with two pseudo gold items of each disagreement (Y=1, Ŷ=0 and Y=0, Ŷ=1).
    Y, Yh = truth[is_gold].astype(float), judge[is_gold].astype(float)
    plo, phi = ppi_py.ppi_mean_ci(np.r_[Y, 1, 1, 0, 0.0], np.r_[Yh, 0, 0, 1, 1.0], judge[~is_gold].astype(float),
                                  alpha=0.05, lam=grp["ppi_lambda"])
    half = (float(np.ravel(phi)[0]) - float(np.ravel(plo)[0])) / 2
    assert grp["ppi"]["lo"] == pytest.approx(min(lo, grp["ppi"]["value"] - half), abs=1e-9)
    assert grp["ppi"]["hi"] == pytest.approx(max(hi, grp["ppi"]["value"] + half), abs=1e-9)
    # The estimate itself does not depend on the interval method.
    clt = memjudge.estimate(lab, gold, interval="clt").to_dict()["groups"][0]
    assert clt["ppi"]["value"] == pytest.approx(grp["ppi"]["value"], abs=1e-12)


# ---------------------------------------------------------------------------------------
# API shape, groups, planning


def test_api_result_frame_and_categories():
    lab, gold, *_ = _world(5, cats=("values", "work", "hobbies"))
    res = memjudge.estimate(lab, gold, by="category")
    d = res.to_dict()
    assert [g["group"] for g in d["groups"]] == ["all", "hobbies", "values", "work"]
    assert sum(g["n_gold"] for g in d["groups"][1:]) == d["n_gold"] == 200
    f = res.frame
    assert list(f["group"]) == ["all", "hobbies", "values", "work"]
    assert {"judge_only", "gold_only_lo", "ppi", "ppi_hi", "lambda", "effective_gold_n"} <= set(f.columns)
    for g in d["groups"]:
        for k in ("judge_only", "gold_only", "ppi"):
            assert g[k]["lo"] <= g[k]["value"] <= g[k]["hi"]


def test_category_without_gold_is_null_with_a_note(tmp_path, capsys):
    lab, gold, *_ = _world(6, cats=("values", "work"))
    gold = gold[gold["assertion_id"].isin(lab.loc[lab["category"] == "work", "assertion_id"])]
    lp, gp = tmp_path / "l.jsonl", tmp_path / "g.jsonl"
    lab.to_json(lp, orient="records", lines=True)
    gold.to_json(gp, orient="records", lines=True)
    code, out, err = _run(capsys, "estimate", lp, "--gold", gp, "--by", "category", "--json")
    assert code == 0
    vals = [g for g in json.loads(out)["groups"] if g["group"] == "values"][0]
    assert vals["n_gold"] == 0 and vals["gold_only"] == {"value": None, "lo": None, "hi": None}
    assert vals["ppi"]["value"] is None and vals["ppi_lambda"] is None and vals["effective_gold_n"] is None
    assert vals["judge_only"]["value"] is not None
    assert "group 'values' has no gold item" in err
    code, out, _ = _run(capsys, "estimate", lp, "--gold", gp, "--by", "category")
    assert "group 'values' has no gold item" in out


def test_plan_predicts_the_half_width_it_promises(capsys, tmp_path):
    lab, gold, truth, judge, g = _world(8, n_items=6000, n_gold=150, acc=0.9)
    res = memjudge.estimate(lab, gold, interval="clt", half_width=0.02)
    plan = res.plan
    assert plan["reachable"] and plan["n_more"] > 0
    n_need = plan["n_gold_needed"]
    # Draw that many gold items from the same world: the realised half-widths average the target.
    rng = np.random.default_rng(1)
    hws = []
    for _ in range(20):
        gi = np.sort(rng.choice(len(truth), n_need, replace=False))
        gd = pd.DataFrame({"assertion_id": lab["assertion_id"].to_numpy()[gi],
                           "verdict": np.where(truth[gi], "supported", "unsupported")})
        r = memjudge.estimate(lab, gd, interval="clt").to_dict()["groups"][0]["ppi"]
        hws.append((r["hi"] - r["lo"]) / 2)
    assert np.mean(hws) == pytest.approx(0.02, rel=0.1)
    tighter = memjudge.estimate(lab, gold, interval="clt", half_width=0.015).plan
    assert tighter["n_gold_needed"] > n_need
    lp, gp = tmp_path / "l.jsonl", tmp_path / "g.csv"
    lab.to_json(lp, orient="records", lines=True)
    gold.to_csv(gp, index=False)
    code, out, _ = _run(capsys, "estimate", lp, "--gold", gp, "--plan", "--half-width", "0.02", "--json")
    assert code == 0 and json.loads(out)["plan"]["n_more"] > 0
    code, out, _ = _run(capsys, "estimate", lp, "--gold", gp, "--plan", "--half-width", "0.0001")
    assert code == 0 and "not reachable" in out


# ---------------------------------------------------------------------------------------
# gold files: annotators, relabelling, skips, mismatches


def test_gold_rules_annotators_latest_skip_and_unmatched(tmp_path, capsys):
    ids = [f"a{i}" for i in range(8)]
    lab = _labels(ids, [f"p{i}" for i in range(8)], "c", ["supported"] * 6 + [None, "unsupported"])
    lp = tmp_path / "l.jsonl"
    lab.to_json(lp, orient="records", lines=True)
    rows = [
        {"assertion_id": "a0", "verdict": "supported", "annotator": "ann", "labelled_at": "2026-01-01T10:00:00Z"},
        {"assertion_id": "a0", "verdict": "unsupported", "annotator": "ann", "labelled_at": "2026-01-02T10:00:00Z"},  # latest
        {"assertion_id": "a1", "verdict": "supported", "annotator": "x"},
        {"assertion_id": "a1", "verdict": "unsupported", "annotator": "y"},                                      # tie
        {"assertion_id": "a2", "verdict": "supported", "annotator": "x"},
        {"assertion_id": "a2", "verdict": "supported", "annotator": "y"},
        {"assertion_id": "a2", "verdict": "unsupported", "annotator": "z"},                                      # 2:1
        {"assertion_id": "a3", "verdict": "skip", "annotator": "x"},                                             # no verdict
        {"assertion_id": "a6", "verdict": "supported", "annotator": "x"},                                        # judge null
        {"assertion_id": "a7", "verdict": "unsupported", "annotator": "x"},
        {"assertion_id": "zz", "verdict": "supported", "annotator": "x"},                                        # unmatched
    ]
    gp = _write_jsonl(tmp_path / "g.jsonl", rows)
    code, out, err = _run(capsys, "estimate", lp, "--gold", gp, "--interval", "clt", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["gold"] == {"rows": 11, "items": 5, "matched": 4, "unmatched": 1, "null_judge_verdict": 1,
                           "non_verdicts": 1, "ties": 1, "annotators": 4}
    grp = res["groups"][0]
    # gold: a0 → 0, a2 → 1, a6 → 1, a7 → 0; the judge said 1, 1, null, 0
    assert grp["gold_only"]["value"] == pytest.approx(0.5)
    assert grp["judge_accuracy_on_gold"] == pytest.approx(2 / 3)
    # PPI with Ŷ = 0 for the null verdict, equal to ppi_py with that predictor
    Y, Yh = np.array([0.0, 1, 1, 0]), np.array([1.0, 1, 0, 0])
    Yu = np.array([1.0, 1, 1, 1])  # a1, a3, a4, a5
    ref = ppi_py.ppi_mean_pointestimate(Y, Yh, Yu, lam=None)
    assert grp["ppi"]["value"] == pytest.approx(float(np.ravel(ref)[0]), abs=1e-9)
    for phrase in ("match no labelled item", "no valid judge verdict", "non-verdicts", "tied annotators"):
        assert phrase in err


@pytest.mark.parametrize("rows, message", [
    ([{"assertion_id": "a0", "verdict": "supported", "annotator": "x"},
      {"assertion_id": "a0", "verdict": "unsupported", "annotator": "x"}], "conflicting gold verdicts for 'a0'"),
    ([{"assertion_id": "q1", "verdict": "supported"}], "none of its 1 gold assertion ids"),
    ([{"assertion_id": "a1", "verdict": "skip"}], "no gold verdict"),
    ([{"assertion_id": "a1", "verdict": "supported", "labelled_at": "yesterday-ish"}], "'labelled_at' is not a date"),
])
def test_bad_gold_is_one_line_exit_2(tmp_path, capsys, rows, message):
    lab = _labels(["a0", "a1", "a2"], ["p0", "p1", "p2"], "c", ["supported"] * 3)
    lp = tmp_path / "l.jsonl"
    lab.to_json(lp, orient="records", lines=True)
    gp = _write_jsonl(tmp_path / "g.jsonl", rows)
    code, out, err = _run(capsys, "estimate", lp, "--gold", gp)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and message in err and str(gp) in err


def test_bad_arguments(tmp_path, capsys):
    lab, gold, *_ = _world(1, n_items=50, n_gold=10)
    lp, gp = tmp_path / "l.jsonl", tmp_path / "g.csv"
    lab.to_json(lp, orient="records", lines=True)
    gold.to_csv(gp, index=False)
    for args, msg in ((["--plan"], "--plan needs --half-width"), (["--half-width", "0.1"], "goes with --plan"),
                      (["--plan", "--half-width", "2"], "half-width must be in (0, 1)"),
                      (["--judge", "sim:other"], "not in labels")):
        code, _, err = _run(capsys, "estimate", lp, "--gold", gp, *args)
        assert code == 2 and msg in err and err.count("\n") == 1


def test_majority_of_replicates_and_bad_inclusion_prob(tmp_path, capsys):
    ids = [f"a{i}" for i in range(6)]
    rows = []
    for i, aid in enumerate(ids):
        # replicates 0, 1, 2: the majority is 'supported' for a0..a3, 'unsupported' for a4, a5
        for r, v in enumerate(["supported", "supported", "unsupported"] if i < 4 else ["supported", "unsupported", "unsupported"]):
            rows.append({"assertion_id": aid, "persona_id": f"p{i}", "category": "c", "judge": "sim:j",
                         "rubric": "support", "replicate": r, "verdict": v})
    lp = _write_jsonl(tmp_path / "l.jsonl", rows)
    gp = _write_jsonl(tmp_path / "g.jsonl", [{"assertion_id": "a0", "verdict": "supported"},
                                              {"assertion_id": "a4", "verdict": "supported"}])
    code, out, err = _run(capsys, "estimate", lp, "--gold", gp, "--replicate", "majority", "--json")
    assert code == 0, err
    grp = json.loads(out)["groups"][0]
    assert grp["judge_only"]["value"] == pytest.approx(4 / 6)
    assert grp["judge_accuracy_on_gold"] == pytest.approx(0.5)
    code, out, err = _run(capsys, "estimate", lp, "--gold", gp, "--replicate", "2", "--json")
    assert json.loads(out)["groups"][0]["judge_only"]["value"] == pytest.approx(0.0)
    bad = _write_jsonl(tmp_path / "s.jsonl", [{"assertion_id": "a0", "verdict": "supported", "inclusion_prob": 0,
                                               "stratum": "all", "strata_by": ""}])
    code, out, err = _run(capsys, "estimate", lp, "--gold", bad)
    assert code == 2 and "'inclusion_prob' must be a number in (0, 1]" in err and "s.jsonl:1" in err


def test_plan_under_the_bootstrap_starts_from_the_interval_shown():
    lab, gold, *_ = _world(9, n_items=3000, n_gold=150, per_persona=5)
    grp = memjudge.estimate(lab, gold).to_dict()["groups"][0]["ppi"]
    shown = (grp["hi"] - grp["lo"]) / 2
    assert memjudge.estimate(lab, gold, half_width=shown * 1.02).plan["n_more"] == 0
    assert memjudge.estimate(lab, gold, half_width=shown * 0.9).plan["n_more"] > 0
