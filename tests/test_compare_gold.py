"""`compare --gold` / `robustness --gold`: held-out faithfulness by PPI++ beside the judge's.

Checked against a literal per-fold loop over ppi_py (the reference implementation), against the
construction truth of a simulated corpus (a strict judge misorders the policies; PPI++ with a
random gold sample recovers the truth's ordering, and is unbiased over gold draws), and through
the CLI (JSON keys, text, errors). Without --gold nothing changes (also the paper reproduction
test)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from memjudge.comparison import NEG_INF, compare, fold_assignment
from memjudge.errors import MemjudgeError

ppi_py = pytest.importorskip("ppi_py")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    from memjudge.simulation import simulate

    d = tmp_path_factory.mktemp("corpus")
    c = simulate(preset="paper", seed=1, personas=40)
    paths = c.write(d)
    return c, d, paths


def sim_labels(corpus, name):
    from memjudge.judges import make_judge

    c, d, _ = corpus
    return make_judge(f"sim:{name}", options={"truth": str(d), "seed": 0}).labels(c.candidates)


def gold_sample(corpus, frac=0.3, seed=0):
    c = corpus[0]
    return c.labels[["assertion_id", "verdict"]].sample(frac=frac, random_state=seed).reset_index(drop=True)


def reference_ppi(cand, lab, gold, res):
    """A literal loop: each folds_detail row's retained set rebuilt by hand, PPI++ by ppi_py."""
    df = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left")
    df = df.merge(gold[["assertion_id", "verdict"]].rename(columns={"verdict": "gold"}), on="assertion_id", how="left")
    personas = sorted(df["persona_id"].astype(str).unique())
    w, wu = design(df, gold)
    folds = {(r, k): {personas[i] for i in held}
             for r, k, held in fold_assignment(len(personas), res.repeats, res.folds, res.seed)}
    out = []
    for _i, row in enumerate(res.to_json()["folds_detail"]):
        gate = res.fold_gates[(row["repeat"]) * res.folds + row["fold"]]
        t = row["threshold"]
        keep = []
        for d in df.itertuples():
            if d.persona_id not in folds[(row["repeat"], row["fold"])]:
                keep.append(False)
                continue
            if row["policy"] == "global":
                thr = NEG_INF if t is None else t
            elif row["policy"] == "targeted":
                thr = (NEG_INF if t is None else t) if d.category in gate else NEG_INF
            elif row["policy"] == "per_category":
                thr = NEG_INF if t[d.category] is None else t[d.category]
            else:
                thr = NEG_INF
            keep.append(d.confidence >= thr)
        sub = df[np.array(keep)]
        answered = sub[sub["verdict"].notna()]
        judge_faith = (answered["verdict"] == "supported").mean() if len(answered) else np.nan
        # PPI++ over every retained item; a null judge verdict predicts "not supported"
        labd, unl = sub[sub["gold"].notna()], sub[sub["gold"].isna()]
        if len(labd) == 0:
            out.append((judge_faith, np.nan, 0))
            continue
        Y = (labd["gold"] == "supported").to_numpy(float)
        Yh = (labd["verdict"] == "supported").to_numpy(float)
        Yu = (unl["verdict"] == "supported").to_numpy(float)
        wl = None if w is None else w.reindex(labd["assertion_id"]).to_numpy()
        if w is None:
            est = ppi_py.ppi_mean_pointestimate(Y, Yh, Yu, lam=None) if len(unl) else np.average(Y)
        else:
            # a sample design, as estimate weighs it: post-stratified by category × verdict where
            # every cell holds gold, else by verdict, else the judge's mean over every retained item
            # plus the gold's weighted mean error (ppi_py with every item unlabelled) at the tuned λ
            est = None
            sv = (sub["verdict"] == "supported").to_numpy()
            yg = np.where(sub["gold"].notna(), sub["gold"] == "supported", False).astype(float)
            has = sub["gold"].notna().to_numpy()
            wall = w.reindex(sub["assertion_id"]).fillna(1.0).to_numpy()
            for keys in (sub["category"].to_numpy() + "|" + sv.astype(str), sv.astype(str)):
                cells = pd.Series(keys)
                if all(has[(cells == k).to_numpy()].any() for k in cells.unique()):
                    est = sum((cells == k).mean() * np.average(yg[(cells == k).to_numpy() & has],
                                                              weights=wall[(cells == k).to_numpy() & has])
                              for k in cells.unique())
                    break
            if est is None:
                lam = res.to_json()["gold"]["folds_detail"][_i]["lambda"]
                est = ppi_py.ppi_mean_pointestimate(Y, Yh, sv.astype(float), lam=lam, w=wl)
        out.append((judge_faith, float(np.squeeze(est)), len(labd)))
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_each_fold_equals_ppi_py_on_the_rebuilt_retained_set(corpus, weighted):
    c = corpus[0]
    lab = sim_labels(corpus, "paper")
    # a few null judge verdicts: PPI++ keeps them (predicted "not supported")
    lab.loc[lab.index[::37], "verdict"] = None
    if weighted:
        # a stratified `memjudge sample` (Neyman over category × verdict), labelled with the truth
        from memjudge.stats.sampling import sample

        gold = sample(c.candidates, 300, labels=lab, strategy="stratified", by="category,verdict", seed=0)
        assert gold["inclusion_prob"].nunique() > 1
        gold["verdict"] = c.labels.set_index("assertion_id")["verdict"].reindex(gold["assertion_id"]).to_numpy()
    else:
        gold = gold_sample(corpus)
    res = compare(c.candidates, lab, gold=gold, repeats=2, folds=4, gate="auto")
    got = res.to_json()["gold"]
    ref = reference_ppi(c.candidates, lab, gold, res)
    assert len(got["folds_detail"]) == len(ref) == 2 * 4 * 4
    for row, gd, (jf, est, n_gold) in zip(res.to_json()["folds_detail"], got["folds_detail"], ref):
        assert (gd["repeat"], gd["fold"], gd["policy"]) == (row["repeat"], row["fold"], row["policy"])
        assert row["faithfulness"] == pytest.approx(jf, abs=1e-12)   # same retained set as the judge's figure
        assert gd["n_gold"] == n_gold
        assert gd["ppi"] == pytest.approx(est, abs=1e-9)
        assert 0 <= gd["lambda"] <= 1
    assert got["weighted"] is weighted
    # fold means and the paired summary are those of the per-fold figures
    d = pd.DataFrame(got["folds_detail"])
    for name, s in got["policies"].items():
        v = d.loc[d["policy"] == name, "ppi"].astype(float)
        assert s["ppi"]["value"] == pytest.approx(v.mean(), abs=1e-12)
        assert s["ppi"]["sd"] == pytest.approx(v.std(ddof=1), abs=1e-12)
        assert s["judge"] == res.to_json()["policies"][name]["faithfulness"]
    diff = (d[d["policy"] == "targeted"]["ppi"].to_numpy(float) - d[d["policy"] == "global"]["ppi"].to_numpy(float))
    p = got["paired"]["ppi"]
    assert p["value"] == pytest.approx(diff.mean(), abs=1e-12)
    assert [p["lo"], p["hi"]] == pytest.approx(np.percentile(diff, [2.5, 97.5]).tolist(), abs=1e-12)
    assert p["same_sign"] == int((np.sign(diff) == np.sign(diff.mean())).sum())
    assert got["paired"]["judge"] == res.to_json()["paired"]["faithfulness"]
    # the full-sample (write-all) figure over every candidate with a valid verdict
    full = reference_full(c.candidates, lab, gold)
    assert got["write_all"]["ppi"] == pytest.approx(full, abs=1e-9)
    # ... which is `memjudge estimate`'s overall PPI++ value on the same labels and gold
    from memjudge.stats.estimate import estimate

    est = estimate(lab, gold, interval="clt").to_json()
    assert got["write_all"]["ppi"] == pytest.approx(est["groups"][0]["ppi"]["value"], abs=1e-12)
    assert got["n_null_judge"] == int(lab.set_index("assertion_id").loc[gold["assertion_id"], "verdict"].isna().sum())


def design(df, gold):
    """Design weights by hand: gold 1/inclusion_prob, the rest 1/(1 − π of their stratum)."""
    if "inclusion_prob" not in gold:
        return None, None
    w = 1.0 / gold.set_index("assertion_id")["inclusion_prob"]
    pih = gold.groupby("stratum")["inclusion_prob"].max()
    key = df["category"] + "|" + df["verdict"].fillna("none")
    return w, pd.Series(1.0 / (1.0 - key.map(pih).fillna(0.0).to_numpy()), index=df["assertion_id"].to_numpy())


def reference_full(cand, lab, gold):
    df = cand.merge(lab[["assertion_id", "verdict"]], on="assertion_id", how="left").merge(
        gold[["assertion_id", "verdict"]].rename(columns={"verdict": "gold"}), on="assertion_id", how="left")
    w, wu = design(df, gold)
    lb, un = df[df["gold"].notna()], df[df["gold"].isna()]
    return float(np.squeeze(ppi_py.ppi_mean_pointestimate(
        (lb["gold"] == "supported").to_numpy(float), (lb["verdict"] == "supported").to_numpy(float),
        (un["verdict"] == "supported").to_numpy(float), lam=None,
        w=None if w is None else w.reindex(lb["assertion_id"]).to_numpy(),
        w_unlabeled=None if wu is None else wu.reindex(un["assertion_id"]).to_numpy())))


def _truth_faithfulness(corpus, res):
    """Fold mean of the construction truth's support rate of each policy's retained set."""
    from memjudge.comparison.gold import fold_thresholds, retained_mask

    p = res.prepared
    truth = corpus[0].labels.set_index("assertion_id")["verdict"].reindex(p.assertion_ids).eq("supported").to_numpy()
    rows = [(pol, truth[retained_mask(p, thr, tp) & p.valid].mean()) for _, _, pol, thr, tp in fold_thresholds(res)]
    return pd.DataFrame(rows, columns=["policy", "truth"]).groupby("policy")["truth"].mean()


def test_a_strict_judge_misorders_the_policies_and_ppi_recovers_the_truth(corpus):
    c = corpus[0]
    lab = sim_labels(corpus, "strict")
    truth = judge = first = None
    ests = []
    for seed in range(12):
        res = compare(c.candidates, lab, gold=gold_sample(corpus, 0.3, seed), repeats=3)
        g = res.to_json()["gold"]
        if truth is None:
            truth = _truth_faithfulness(corpus, res)
            judge = {n: g["policies"][n]["judge"]["value"] for n in ("global", "targeted")}
            first = g
        ests.append({**{n: g["policies"][n]["ppi"]["value"] for n in ("global", "targeted")},
                     "diff": g["paired"]["ppi"]["value"]})
    ests = pd.DataFrame(ests)
    truth["diff"] = truth["targeted"] - truth["global"]
    judge["diff"] = judge["targeted"] - judge["global"]
    # the judge is far off (it rejects implied facts) and says targeted < global; the truth says >
    assert truth["diff"] > 0.01 and judge["diff"] < 0
    for n in ("global", "targeted", "diff"):
        if n != "diff":
            assert truth[n] - judge[n] > 0.05
        # unbiased over gold draws: the mean of 12 draws within 3 standard errors of the truth
        se = ests[n].std(ddof=1) / np.sqrt(len(ests))
        assert abs(ests[n].mean() - truth[n]) < 3 * se + 1e-3
        assert abs(ests[n].mean() - truth[n]) < 0.3 * abs(judge[n] - truth[n])
    assert first["ordering"] == {"judge": False, "ppi": True, "survives": False}


def test_folds_without_gold_are_null_and_counted(corpus):
    c, d, paths = corpus
    lab = sim_labels(corpus, "paper")
    # gold on the first two personas only: most held-out folds have none
    ids = c.candidates[c.candidates["persona_id"].isin(sorted(c.candidates["persona_id"].unique())[:2])]["assertion_id"]
    gold = c.labels[c.labels["assertion_id"].isin(ids)][["assertion_id", "verdict"]]
    res = compare(c.candidates, lab, gold=gold, repeats=2, folds=5)
    g = res.to_json()["gold"]
    detail = pd.DataFrame(g["folds_detail"])
    none = detail[detail["n_gold"] == 0]
    assert len(none) > 0 and none["ppi"].isna().all() and none["lambda"].isna().all()
    assert detail.loc[detail["n_gold"] > 0, "ppi"].notna().all()
    for name, s in g["policies"].items():
        sub = detail[detail["policy"] == name]
        assert s["folds_without_gold"] == int((sub["n_gold"] == 0).sum())
        assert s["n_folds"] == int(sub["ppi"].notna().sum())
    text = res.render()
    assert "folds whose retained set holds no gold item" in text
    # JSON: nulls, never NaN
    s = json.dumps(g, allow_nan=False)
    assert '"ppi": null' in s


def test_without_gold_nothing_changes(corpus):
    c = corpus[0]
    lab = sim_labels(corpus, "paper")
    a = compare(c.candidates, lab, repeats=2)
    b = compare(c.candidates, lab, repeats=2, gold=gold_sample(corpus))
    ja, jb = a.to_json(), b.to_json()
    assert "gold" not in ja and "gold" in jb
    assert {k: v for k, v in jb.items() if k != "gold"} == ja
    assert list(a.table().columns) == [c for c in b.table().columns if "ppi" not in c]
    assert "faithfulness_ppi" in b.table().columns
    assert b.table().loc["targeted", "faithfulness_ppi"] == pytest.approx(jb["gold"]["policies"]["targeted"]["ppi"]["value"])
    assert "Judge-corrected" not in a.render() and "Judge-corrected" in b.render()


def test_cli_compare_and_robustness_with_gold(corpus, cli, tmp_path):
    c, d, paths = corpus
    labels = tmp_path / "labels.jsonl"
    pd.concat([sim_labels(corpus, "strict"), sim_labels(corpus, "lenient")]).to_json(labels, orient="records", lines=True)
    gold = tmp_path / "gold.jsonl"
    gold_sample(corpus).to_json(gold, orient="records", lines=True)
    out = tmp_path / "run"
    r = cli("compare", paths["candidates"], "--labels", labels, "--judge", "sim:strict", "--gold", gold,
            "--repeats", "3", "--out", out)
    assert r.returncode == 0, r.stderr
    assert "Judge-corrected faithfulness (PPI++ with" in r.stdout
    assert "The ordering does not survive the correction" in r.stdout
    cj = json.loads((out / "compare.json").read_text())
    g = cj["gold"]
    assert {"path", "n_gold", "n_matched", "n_unmatched", "n_null_judge", "weighted", "judge_accuracy_on_gold",
            "write_all", "policies", "paired", "ordering", "folds_detail"} <= set(g)
    assert g["n_gold"] == g["n_matched"] == len(gold_sample(corpus)) and g["path"] == str(gold.resolve())
    assert set(g["paired"]["ppi"]) >= {"value", "lo", "hi", "same_sign", "nb_lo", "nb_hi", "n_folds"}
    r = cli("compare", paths["candidates"], "--labels", labels, "--judge", "sim:strict", "--gold", gold,
            "--repeats", "3", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["gold"] == g
    # robustness, each judge with its own PPI++ figures
    r = cli("robustness", paths["candidates"], "--labels", labels, "--gold", gold, "--repeats", "3", "--out", out)
    assert r.returncode == 0, r.stderr
    rob = json.loads((out / "robustness.json").read_text())
    units = {u["judge"]: u for u in rob["units"]}
    assert units["sim:strict"]["table"]["gold"]["ordering"] == g["ordering"]
    assert units["sim:strict"]["table"]["gold"]["policies"] == g["policies"]
    fp = rob["summary"]["faithfulness_ppi"]
    assert fp["judges_defined"] == 2 and fp["judges"] == 2  # PPI++ says targeted ≥ global under both
    assert fp["survives_judges"] == 1                       # the strict judge's ordering does not survive
    assert "Judge-corrected held-out faithfulness" in r.stdout
    r = cli("robustness", paths["candidates"], "--labels", labels, "--repeats", "2", "--json")
    assert "faithfulness_ppi" not in json.loads(r.stdout)["summary"]


def test_bad_gold_is_one_line_exit_2(corpus, cli, tmp_path):
    c, d, paths = corpus
    labels = tmp_path / "labels.jsonl"
    sim_labels(corpus, "paper").to_json(labels, orient="records", lines=True)
    nomatch = tmp_path / "gold.jsonl"
    nomatch.write_text('{"assertion_id": "zzz", "verdict": "supported"}\n')
    r = cli("compare", paths["candidates"], "--labels", labels, "--gold", nomatch, "--repeats", "2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert str(nomatch) in r.stderr and "none of its 1 gold assertion ids is among the" in r.stderr
    dup = tmp_path / "dup.jsonl"
    aid = c.candidates["assertion_id"].iloc[0]
    dup.write_text(f'{{"assertion_id": "{aid}", "verdict": "supported"}}\n{{"assertion_id": "{aid}", "verdict": "unsupported"}}\n')
    r = cli("compare", paths["candidates"], "--labels", labels, "--gold", dup, "--repeats", "2")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and str(dup) in r.stderr
    with pytest.raises(MemjudgeError, match="inclusion_prob"):
        compare(c.candidates, sim_labels(corpus, "paper"), repeats=2,
                gold=pd.DataFrame({"assertion_id": [aid], "verdict": ["supported"], "inclusion_prob": [0.0],
                                   "stratum": ["all"], "strata_by": [""]}))
