"""Cross-judge agreement against reference libraries (scikit-learn, statsmodels, krippendorff,
irrCAC) on real data (SynthPAI, XSumFaith) and on hand-worked cases."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memjudge.errors import UsageError
from memjudge.stats.agreement import agreement, pair_coefficients
from memjudge.stats.bootstrap import cluster_weights, percentile_interval

TEST_DATA = Path(__file__).parent / "data" / "agreement_samples"
SYNTHPAI_SAMPLE = TEST_DATA / "synthpai_predictions_sample.csv.gz"
XSUM_SAMPLE = TEST_DATA / "xsumfaith_factuality_sample.csv"
SYNTHPAI_VERDICT = {1.0: "supported", 0.0: "unsupported", 0.5: "partial"}

AGREEMENT_KEYS = {"judges", "items", "pairs", "krippendorff_alpha", "fleiss_kappa", "gold"}
PAIR_KEYS = {"a", "b", "n", "percent_agreement", "cohen_kappa", "gwet_ac1", "positive_agreement",
             "negative_agreement", "confusion"}
PAIR_CI_KEYS = {"percent_agreement", "cohen_kappa", "gwet_ac1", "positive_agreement", "negative_agreement"}
NULL = {"value": None, "lo": None, "hi": None}
GOLD_KEYS = {"judge", "n", "accuracy", "cohen_kappa", "unsupported_precision", "unsupported_recall"}


# ---------------------------------------------------------------------------------------
# real data as labels frames (built here, independent of the importers)


def synthpai_labels(path) -> pd.DataFrame:
    """Guess-level verdicts: human-checked vs LLM-only, item = model|user|attribute|rank."""
    df = pd.read_csv(path, usecols=["model", "username", "attribute", "guesses", "eval_model_human", "eval_llm_only_vs_human"])
    df = df[df["eval_model_human"].notna()]
    rows = []
    for r in df.itertuples(index=False):
        guesses, human = json.loads(r.guesses), json.loads(r.eval_model_human)
        llm = json.loads(r.eval_llm_only_vs_human) if isinstance(r.eval_llm_only_vs_human, str) else None
        for i in range(min(3, len(guesses), len(human))):
            base = {"assertion_id": f"{r.model}|{r.username}|{r.attribute}|{i}", "persona_id": r.username,
                    "category": r.attribute, "rubric": "support", "replicate": 0}
            rows.append({**base, "judge": "synthpai:human-checked", "verdict": SYNTHPAI_VERDICT[float(human[i])]})
            if llm is not None and i < len(llm):
                rows.append({**base, "judge": "synthpai:llm-only", "verdict": SYNTHPAI_VERDICT[float(llm[i])]})
    return pd.DataFrame(rows)


def xsum_labels(path) -> pd.DataFrame:
    """Three annotator slots as judges; persona = BBC article, item = article|system."""
    df = pd.read_csv(path)
    verdict = df["is_factual"].map({"yes": "supported", "no": "unsupported"}).astype(object)
    return pd.DataFrame({
        "assertion_id": df["bbcid"].astype(str) + "|" + df["system"], "persona_id": df["bbcid"].astype(str),
        "category": df["system"], "judge": df["worker_id"], "rubric": "support", "replicate": 0,
        "verdict": verdict.where(df["is_factual"].notna(), None),
    })


def same(value, reference, tol=1e-9) -> bool:
    """Equal within tol, or both undefined (our NaN where the reference gives NaN)."""
    value, reference = float(value), float(reference)
    if np.isnan(reference):
        return np.isnan(value)
    return abs(value - reference) <= tol


def check_references(labels: pd.DataFrame, res) -> None:
    """Every point figure equals its reference implementation (AC1: irrCAC's 5 decimals)."""
    import krippendorff
    from irrCAC.raw import CAC
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    valid = labels[labels["verdict"].notna()]
    wide = valid.pivot(index="assertion_id", columns="judge", values="verdict")
    assert res.items == len(wide)
    assert len(res.pairs) == len(res.judges) * (len(res.judges) - 1) // 2
    for p in res.pairs.itertuples():
        sh = wide[[p.a, p.b]].dropna()
        a, b = sh[p.a].to_numpy(), sh[p.b].to_numpy()
        assert p.n == len(sh)
        assert same(p.percent_agreement, np.mean(a == b) if len(a) else np.nan, 1e-12)
        assert same(p.cohen_kappa, cohen_kappa_score(a, b) if len(a) else np.nan)
        if len(set(a) | set(b)) >= 2:
            ac1 = CAC(sh.reset_index(drop=True)).gwet()["est"]["coefficient_value"]
            assert same(p.gwet_ac1, ac1, 5e-6 + 1e-12)
        else:  # one label: irrCAC returns ~1 by a 1e-15 fudge, the coefficient is undefined
            assert np.isnan(p.gwet_ac1)
        pa, pb = a == "supported", b == "supported"
        A, B_, C, D = np.sum(pa & pb), np.sum(pa & ~pb), np.sum(~pa & pb), np.sum(~pa & ~pb)
        with np.errstate(invalid="ignore", divide="ignore"):
            assert same(p.positive_agreement, np.float64(2 * A) / (2 * A + B_ + C), 1e-12)
            assert same(p.negative_agreement, np.float64(2 * D) / (2 * D + B_ + C), 1e-12)
        ct = pd.crosstab(sh[p.a], sh[p.b])
        conf = res.confusion[(p.a, p.b)]
        assert conf.reindex(index=ct.index, columns=ct.columns).fillna(0).astype(int).equals(ct.astype(int).rename_axis(None).rename_axis(None, axis=1))
        assert conf.to_numpy().sum() == p.n
    cats = sorted(set(valid["verdict"]))
    codes = wide.reindex(columns=res.judges).apply(lambda c: c.map({k: i for i, k in enumerate(cats)})).to_numpy(dtype=float)
    overall = res.overall.set_index("measure")["value"]
    alpha = krippendorff.alpha(reliability_data=codes.T, level_of_measurement="nominal")
    assert same(overall["krippendorff_alpha"], alpha)
    complete = codes[~np.isnan(codes).any(axis=1)].astype(int)
    table, _ = aggregate_raters(complete, n_cat=len(cats))
    with np.errstate(invalid="ignore", divide="ignore"):
        assert same(overall["fleiss_kappa"], fleiss_kappa(table, method="fleiss") if len(complete) else np.nan)
    assert res.overall.set_index("measure").loc["fleiss_kappa", "units"] == len(complete)


def check_intervals(res) -> None:
    for p in res.pairs.itertuples():
        for m in ("percent_agreement", "cohen_kappa", "gwet_ac1", "positive_agreement", "negative_agreement"):
            lo, hi, v = getattr(p, f"{m}_lo"), getattr(p, f"{m}_hi"), getattr(p, m)
            assert lo <= v <= hi and lo < hi, (m, lo, v, hi)
    for o in res.overall.itertuples():
        assert o.lo <= o.value <= o.hi and o.lo < o.hi


# ---------------------------------------------------------------------------------------
# real data


def test_synthpai_sample_matches_references():
    labels = synthpai_labels(SYNTHPAI_SAMPLE)
    res = agreement(labels, B=200)
    assert res.judges == ["synthpai:human-checked", "synthpai:llm-only"]
    assert set(res.labels) == {"supported", "unsupported", "partial"}
    check_references(labels, res)
    check_intervals(res)


def test_xsumfaith_sample_matches_references():
    labels = xsum_labels(XSUM_SAMPLE)
    res = agreement(labels, B=200)
    assert res.judges == ["wid_0", "wid_1", "wid_2"]
    check_references(labels, res)
    check_intervals(res)


@pytest.mark.shared_data
def test_synthpai_full_matches_references(shared_data):
    labels = synthpai_labels(shared_data / "synthpai" / "predictions_compact.csv")
    res = agreement(labels)
    pair = res.pairs.iloc[0]
    assert 17_000 < pair["n"] < 19_000
    assert len(res.confusion[(pair["a"], pair["b"])]) == 3
    assert res.personas > 250
    check_references(labels, res)
    check_intervals(res)


@pytest.mark.shared_data
def test_xsumfaith_full_matches_references(shared_data):
    labels = xsum_labels(shared_data / "xsumfaith" / "factuality_annotations_xsum_summaries.csv")
    assert labels["verdict"].isna().sum() > 0  # real missing annotations
    res = agreement(labels)
    check_references(labels, res)
    check_intervals(res)
    # Fleiss needs all three; α uses every pairable unit.
    units = res.overall.set_index("measure")["units"]
    assert units["fleiss_kappa"] < units["krippendorff_alpha"]


# ---------------------------------------------------------------------------------------
# hand-worked cases


def _frame(rows, rubric="support"):
    """rows: (item, persona, judge, verdict[, replicate])."""
    out = []
    for r in rows:
        item, persona, judge, verdict = r[:4]
        rep = r[4] if len(r) > 4 else 0
        out.append({"assertion_id": item, "persona_id": persona, "category": "c", "judge": judge,
                    "rubric": rubric, "replicate": rep, "verdict": verdict})
    return pd.DataFrame(out)


S, U, P = "supported", "unsupported", "partial"
# A: s s s u u ; B: s s u u s
HAND = [("i1", "p1", "A", S), ("i1", "p1", "B", S), ("i2", "p1", "A", S), ("i2", "p1", "B", S),
        ("i3", "p2", "A", S), ("i3", "p2", "B", U), ("i4", "p2", "A", U), ("i4", "p2", "B", U),
        ("i5", "p3", "A", U), ("i5", "p3", "B", S)]


def test_hand_worked_two_judges():
    res = agreement(_frame(HAND), B=100)
    p = res.pairs.iloc[0]
    assert p["n"] == 5
    # po = 3/5; marginals A = B = (3/5 s, 2/5 u): pe = 9/25 + 4/25 = 13/25; κ = (15/25 − 13/25)/(12/25) = 1/6
    assert p["cohen_kappa"] == pytest.approx(1 / 6, abs=1e-12)
    # π_s = 3/5, π_u = 2/5, q = 2: pe = 2·(3/5)(2/5) = 12/25; AC1 = (15/25 − 12/25)/(13/25) = 3/13
    assert p["gwet_ac1"] == pytest.approx(3 / 13, abs=1e-12)
    # a = 2 (both s), b = c = 1, d = 1: PA = 4/6, NA = 2/4
    assert p["positive_agreement"] == pytest.approx(2 / 3, abs=1e-12)
    assert p["negative_agreement"] == pytest.approx(1 / 2, abs=1e-12)
    # coincidences: o_ss = 4, o_uu = 2, o_su = o_us = 2; n = 10, n_s = 6, n_u = 4:
    # α = 1 − 9·(10 − 6)/(100 − 36 − 16) = 1 − 36/48 = 1/4
    overall = res.overall.set_index("measure")["value"]
    assert overall["krippendorff_alpha"] == pytest.approx(1 / 4, abs=1e-12)
    # Fleiss, two raters: P̄ = 3/5, p = (6/10, 4/10), Pe = 13/25 → 1/6 (equals Cohen's with equal marginals)
    assert overall["fleiss_kappa"] == pytest.approx(1 / 6, abs=1e-12)
    conf = res.confusion[("A", "B")]
    assert conf.loc[S, S] == 2 and conf.loc[S, U] == 1 and conf.loc[U, S] == 1 and conf.loc[U, U] == 1


def test_missing_verdicts_are_excluded_and_alpha_uses_pairable_units():
    import krippendorff

    rows = HAND + [("i6", "p3", "A", U), ("i6", "p3", "B", None), ("i7", "p3", "A", S),
                   ("i8", "p1", "C", S), ("i1", "p1", "C", S), ("i3", "p2", "C", U), ("i5", "p3", "C", None)]
    labels = _frame(rows)
    res = agreement(labels, B=100)
    ab = res.pairs.set_index(["a", "b"]).loc[("A", "B")]
    assert ab["n"] == 5 and ab["cohen_kappa"] == pytest.approx(1 / 6, abs=1e-12)  # nulls and singletons drop out
    ac = res.pairs.set_index(["a", "b"]).loc[("A", "C")]
    assert ac["n"] == 2 and ac["percent_agreement"] == 0.5
    # items with any valid verdict: i1..i8
    assert res.items == 8
    # Fleiss only on items all three labelled: i1, i3
    assert res.overall.set_index("measure").loc["fleiss_kappa", "units"] == 2
    data = np.full((3, 8), np.nan)
    code = {S: 0, U: 1}
    for item, _, judge, v, *_rest in rows:
        if v is not None:
            data["ABC".index(judge), int(item[1:]) - 1] = code[v]
    alpha = krippendorff.alpha(reliability_data=data, level_of_measurement="nominal")
    assert res.overall.set_index("measure").loc["krippendorff_alpha", "value"] == pytest.approx(alpha, abs=1e-12)


def test_majority_vote_and_ties():
    rows = [
        ("i1", "p1", "A", S, 0), ("i1", "p1", "A", S, 1), ("i1", "p1", "A", U, 2),   # majority s
        ("i2", "p1", "A", S, 0), ("i2", "p1", "A", U, 1),                             # tie → unlabelled
        ("i3", "p2", "A", U, 0), ("i3", "p2", "A", None, 1), ("i3", "p2", "A", S, 2),  # tie after null → unlabelled
        ("i4", "p2", "A", U, 0), ("i4", "p2", "A", None, 1),                           # one valid → u
        ("i1", "p1", "B", S), ("i2", "p1", "B", S), ("i3", "p2", "B", S), ("i4", "p2", "B", S),
    ]
    labels = _frame(rows)
    res = agreement(labels, replicate="majority", B=50)
    assert res.ties == 2
    p = res.pairs.iloc[0]
    assert p["n"] == 2  # i1 (s, s) and i4 (u, s)
    assert res.confusion[("A", "B")].loc[S, S] == 1 and res.confusion[("A", "B")].loc[U, S] == 1
    # replicate 0 instead: all four items, A = s s u u, B = s s s s
    r0 = agreement(labels, replicate=0, B=50)
    assert r0.pairs.iloc[0]["n"] == 4 and r0.pairs.iloc[0]["percent_agreement"] == 0.5
    r1 = agreement(labels, replicate=1, B=50)  # B has no replicate 1: no shared items
    assert r1.pairs.iloc[0]["n"] == 0 and r1.to_json()["pairs"][0]["cohen_kappa"]["value"] is None


def test_one_label_only_is_undefined_not_nan():
    rows = [(f"i{k}", f"p{k % 3}", j, S) for k in range(9) for j in "AB"]
    res = agreement(_frame(rows), B=50)
    js = res.to_json()
    pair = js["pairs"][0]
    assert pair["percent_agreement"]["value"] == 1.0
    assert pair["cohen_kappa"]["value"] is None and pair["gwet_ac1"]["value"] is None
    assert pair["cohen_kappa"] == NULL
    assert pair["negative_agreement"]["value"] is None and pair["positive_agreement"]["value"] == 1.0
    assert js["krippendorff_alpha"]["value"] is None and js["fleiss_kappa"]["value"] is None
    assert "NaN" not in json.dumps(js)


def test_single_persona_has_point_estimates_but_no_interval():
    rows = [(i, "only", j, v) for (i, _, j, v) in HAND]
    res = agreement(_frame(rows), B=50)
    js = res.to_json()
    assert js["pairs"][0]["cohen_kappa"]["value"] == pytest.approx(1 / 6)
    assert all((js["pairs"][0][m]["lo"], js["pairs"][0][m]["hi"]) == (None, None) for m in PAIR_CI_KEYS)
    assert any("fewer than two personas" in n for n in res.notes)


def test_gold_against_sklearn():
    from sklearn.metrics import accuracy_score, cohen_kappa_score, precision_score, recall_score

    rng = np.random.default_rng(3)
    n = 400
    truth = rng.choice([S, U], size=n, p=[0.8, 0.2])
    judged = np.where(rng.random(n) < 0.85, truth, rng.choice([S, U, P], size=n))
    items = [f"a{k}" for k in range(n)]
    labels = pd.DataFrame({"assertion_id": items, "persona_id": [f"p{k // 8}" for k in range(n)], "category": "c",
                           "judge": "J", "rubric": "support", "replicate": 0, "verdict": judged})
    gold = pd.DataFrame({"assertion_id": items[:300] + ["not-labelled"], "verdict": list(truth[:300]) + [S]})
    res = agreement(labels, gold=gold, B=200)
    g = res.to_json()["gold"][0]
    t, j = truth[:300], judged[:300]
    assert g["judge"] == "J" and g["n"] == 300
    assert g["accuracy"]["value"] == pytest.approx(accuracy_score(t, j), abs=1e-12)
    assert g["cohen_kappa"]["value"] == pytest.approx(cohen_kappa_score(j, t), abs=1e-9)
    assert g["unsupported_precision"]["value"] == pytest.approx(precision_score(t, j, labels=[U], average="micro"),
                                                                abs=1e-12)
    assert g["unsupported_recall"]["value"] == pytest.approx(recall_score(t, j, labels=[U], average="micro"), abs=1e-12)
    row = res.gold.iloc[0]
    assert row["accuracy_lo"] < row["accuracy"] < row["accuracy_hi"]
    assert res.to_json()["pairs"] == []  # one judge: nothing to pair, gold still scored


def test_bootstrap_equals_naive_persona_resampling():
    """The vectorised interval is exactly the one obtained by rebuilding each resample."""
    from sklearn.metrics import cohen_kappa_score

    labels = xsum_labels(XSUM_SAMPLE)
    B, seed = 60, 11
    res = agreement(labels, B=B, seed=seed)
    personas = sorted(labels["persona_id"].unique())
    W = cluster_weights(len(personas), B, seed)
    wide = labels[labels["verdict"].notna()].pivot(index="assertion_id", columns="judge", values="verdict")
    wide["persona"] = [i.split("|")[0] for i in wide.index]
    groups = {p: g for p, g in wide.groupby("persona")}
    kappas = []
    for b in range(B):
        parts = [groups[p] for p, w in zip(personas, W[b]) for _ in range(int(w)) if p in groups]
        sample = pd.concat(parts)[["wid_0", "wid_1"]].dropna()
        kappas.append(cohen_kappa_score(sample["wid_0"], sample["wid_1"]))
    lo, hi = percentile_interval(np.array(kappas))
    p = res.pairs.set_index(["a", "b"]).loc[("wid_0", "wid_1")]
    assert p["cohen_kappa_lo"] == pytest.approx(lo, abs=1e-9) and p["cohen_kappa_hi"] == pytest.approx(hi, abs=1e-9)


def test_seed_reproducible_and_rubrics_become_raters():
    labels = xsum_labels(XSUM_SAMPLE)
    res = agreement(labels, B=100, seed=5)
    assert res.to_json() == agreement(labels, B=100, seed=5).to_json()
    other = agreement(labels, B=100, seed=6)
    assert other.pairs["cohen_kappa"].tolist() == res.pairs["cohen_kappa"].tolist()
    assert other.pairs["cohen_kappa_lo"].tolist() != res.pairs["cohen_kappa_lo"].tolist()
    # Two rubric versions of one judge are two raters, so they can be compared.
    both = pd.concat([_frame(HAND), _frame(HAND, rubric="support@v2")], ignore_index=True)
    two = agreement(both, B=20)
    assert two.judges == ["A [support@v2]", "A [support]", "B [support@v2]", "B [support]"]
    same = two.pairs.set_index(["a", "b"]).loc[("A [support@v2]", "A [support]")]
    assert same["cohen_kappa"] == 1.0


def test_pair_coefficients_vectorised_over_resamples():
    conf = np.array([[[2, 1], [1, 1]], [[5, 0], [0, 5]], [[3, 0], [0, 0]]], dtype=float)
    out = pair_coefficients(conf, positive=0)
    assert out["cohen_kappa"][0] == pytest.approx(1 / 6) and out["cohen_kappa"][1] == 1.0
    assert np.isnan(out["cohen_kappa"][2]) and np.isnan(out["gwet_ac1"][2])


def test_needs_two_judges_or_gold():
    with pytest.raises(UsageError, match="at least two judges"):
        agreement(_frame([("i1", "p1", "A", S)]))
    with pytest.raises(UsageError, match="replicate"):
        agreement(_frame(HAND), replicate=-1)


# ---------------------------------------------------------------------------------------
# CLI


def _write_labels(path: Path, labels: pd.DataFrame) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for rec in labels.to_dict(orient="records"):
            f.write(json.dumps(rec) + "\n")
    return path


def test_cli_json_has_exactly_the_issue_keys_and_out_writes_file(cli, tmp_path):
    labels = xsum_labels(XSUM_SAMPLE)
    # Two files, concatenated by the command.
    f1 = _write_labels(tmp_path / "a.jsonl", labels[labels["judge"] != "wid_2"])
    f2 = _write_labels(tmp_path / "b.jsonl", labels[labels["judge"] == "wid_2"])
    gold = tmp_path / "gold.csv"
    labels[labels["judge"] == "wid_0"].dropna(subset=["verdict"])[["assertion_id", "verdict"]].to_csv(gold, index=False)
    run = tmp_path / "run"
    r = cli("agreement", f1, f2, "--gold", gold, "--json", "--out", run, "--bootstrap", "300")
    assert r.returncode == 0, r.stderr
    js = json.loads(r.stdout)
    assert set(js) == AGREEMENT_KEYS
    assert js["judges"] == ["wid_0", "wid_1", "wid_2"] and len(js["pairs"]) == 3
    for p in js["pairs"]:
        assert set(p) == PAIR_KEYS and all(set(p[m]) == {"value", "lo", "hi"} for m in PAIR_CI_KEYS)
        assert all(0 <= p[m]["value"] <= 1 for m in ("percent_agreement", "positive_agreement", "negative_agreement"))
    assert [set(g) for g in js["gold"]] == [GOLD_KEYS] * 3
    assert js["gold"][0]["accuracy"]["value"] == 1.0
    assert json.loads((run / "agreement.json").read_text()) == js
    direct = agreement(labels, gold=pd.read_csv(gold), B=300).to_json()
    assert direct == js


def test_cli_table_and_majority(cli, tmp_path):
    f = _write_labels(tmp_path / "l.jsonl", _frame(HAND))
    r = cli("agreement", f, "--replicate", "majority")
    assert r.returncode == 0, r.stderr
    assert "Cohen κ" in r.stdout and "Krippendorff α" in r.stdout and "majority" in r.stdout
    assert "0.167" in r.stdout  # κ = 1/6


@pytest.mark.parametrize("content, expect", [
    ('{"assertion_id": "a"}\n', "missing required column"),
    ('not json\n', ":1: not valid JSON"),
])
def test_cli_bad_input_exits_2_with_one_line(cli, tmp_path, content, expect):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    r = cli("agreement", f, "--json")
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1 and expect in r.stderr and "Traceback" not in r.stderr


def test_cli_one_judge_without_gold_is_a_usage_error(cli, tmp_path):
    f = _write_labels(tmp_path / "l.jsonl", _frame([("i1", "p1", "A", S)]))
    r = cli("agreement", f)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "at least two judges" in r.stderr
    r = cli("agreement", f, "--replicate", "first")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------
# property: random designs with missing verdicts


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@pytest.mark.filterwarnings("ignore")
@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 4), st.integers(2, 4), st.floats(0.0, 0.4))
def test_random_designs_match_references(seed, n_raters, n_labels, p_missing):
    rng = np.random.default_rng(seed)
    n_items = int(rng.integers(8, 60))
    names = np.array([S, U, P, "other"][:n_labels], dtype=object)
    truth = rng.integers(0, n_labels, size=n_items)
    rows = []
    for r in range(n_raters):
        v = np.where(rng.random(n_items) < 0.7, truth, rng.integers(0, n_labels, size=n_items))
        miss = rng.random(n_items) < p_missing
        for k in range(n_items):
            rows.append((f"i{k}", f"p{k % 7}", f"R{r}", None if miss[k] else names[v[k]]))
    labels = _frame(rows)
    valid = labels["verdict"].dropna()
    if valid.nunique() < 2:
        return  # the krippendorff package refuses a one-value domain; covered by test_one_label_only
    res = agreement(labels, B=20)
    check_references(labels, res)


# ---------------------------------------------------------------------------------------
# a rare third label: every resample uses the full sample's label set (AC1's q)


def rare_label_labels(n_personas=50, per=4, seed=2):
    """200 items, judges A and B agreeing ~90% on supported/unsupported, and one `partial` from A."""
    rng = np.random.default_rng(seed)
    rows = []
    for p in range(n_personas):
        for i in range(per):
            item = f"p{p:02d}-{i}"
            a = S if rng.random() < 0.85 else U
            b = a if rng.random() < 0.9 else (U if a == S else S)
            c = a if rng.random() < 0.8 else (U if a == S else S)
            if (p, i) == (7, 1):
                a = P
            rows += [(item, f"p{p:02d}", "A", a), (item, f"p{p:02d}", "B", b), (item, f"p{p:02d}", "C", c)]
    return _frame(rows)


def literal_resamples(labels, B, seed):
    """Reference: each resample's (item × judge) table rebuilt persona by persona."""
    personas = sorted(labels["persona_id"].unique())
    W = cluster_weights(len(personas), B, seed)
    wide = labels.pivot(index="assertion_id", columns="judge", values="verdict")
    wide["persona"] = labels.drop_duplicates("assertion_id").set_index("assertion_id").loc[wide.index, "persona_id"]
    groups = {p: g.drop(columns="persona") for p, g in wide.groupby("persona")}
    for w in W:
        yield pd.concat([groups[p] for p, k in zip(personas, w) for _ in range(int(k))]).reset_index(drop=True)


def test_ac1_interval_keeps_the_full_sample_q_in_every_resample():
    from irrCAC.raw import CAC

    labels = rare_label_labels()
    B, seed = 200, 0
    res = agreement(labels, B=B, seed=seed)
    cats = [P, S, U]
    missing, ref = 0, []
    for sample in literal_resamples(labels, B, seed):
        ab = sample[["A", "B"]]
        missing += P not in set(ab.stack())
        ref.append(CAC(ab, categories=cats, digits=12).gwet()["est"]["coefficient_value"])
    assert missing > B / 4  # the case the issue describes: many resamples lack the one `partial`
    lo, hi = percentile_interval(np.array(ref))
    row = res.pairs.set_index(["a", "b"]).loc[("A", "B")]
    assert row["gwet_ac1"] == pytest.approx(CAC(labels.pivot(index="assertion_id", columns="judge", values="verdict")[["A", "B"]]
                                                .reset_index(drop=True), categories=cats, digits=12)
                                            .gwet()["est"]["coefficient_value"], abs=1e-9)
    assert (row["gwet_ac1_lo"], row["gwet_ac1_hi"]) == pytest.approx((lo, hi), abs=1e-9)
    # the pair without the rare label keeps q = 2, as irrCAC on its own data
    bc = res.pairs.set_index(["a", "b"]).loc[("B", "C")]
    wide = labels.pivot(index="assertion_id", columns="judge", values="verdict")[["B", "C"]].reset_index(drop=True)
    assert bc["gwet_ac1"] == pytest.approx(CAC(wide, digits=12).gwet()["est"]["coefficient_value"], abs=1e-9)


def test_other_coefficients_have_no_label_count_so_resamples_match_a_fixed_label_set():
    """κ, α, Fleiss' κ and positive/negative agreement on rebuilt resamples, each reference told
    the full label set, equal the vectorised intervals."""
    import krippendorff
    from sklearn.metrics import cohen_kappa_score
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    labels = rare_label_labels()
    B, seed = 60, 4
    res = agreement(labels, B=B, seed=seed)
    cats = [P, S, U]
    code = {c: i for i, c in enumerate(cats)}
    kappa, pos, neg, alpha, fleiss = [], [], [], [], []
    for sample in literal_resamples(labels, B, seed):
        a, b = sample["A"], sample["B"]
        kappa.append(cohen_kappa_score(a, b, labels=cats))
        pa, pb = a == S, b == S
        pos.append(2 * (pa & pb).sum() / (2 * (pa & pb).sum() + (pa & ~pb).sum() + (~pa & pb).sum()))
        neg.append(2 * (~pa & ~pb).sum() / (2 * (~pa & ~pb).sum() + (pa & ~pb).sum() + (~pa & pb).sum()))
        codes = sample[["A", "B", "C"]].apply(lambda col: col.map(code)).to_numpy(dtype=float)
        alpha.append(krippendorff.alpha(reliability_data=codes.T, level_of_measurement="nominal",
                                        value_domain=list(range(len(cats)))))
        fleiss.append(fleiss_kappa(aggregate_raters(codes.astype(int), n_cat=len(cats))[0], method="fleiss"))
    row = res.pairs.set_index(["a", "b"]).loc[("A", "B")]
    for name, ref in (("cohen_kappa", kappa), ("positive_agreement", pos), ("negative_agreement", neg)):
        assert (row[f"{name}_lo"], row[f"{name}_hi"]) == pytest.approx(tuple(percentile_interval(np.array(ref))), abs=1e-9)
    overall = res.overall.set_index("measure")
    for name, ref in (("krippendorff_alpha", alpha), ("fleiss_kappa", fleiss)):
        assert (overall.loc[name, "lo"], overall.loc[name, "hi"]) == pytest.approx(
            tuple(percentile_interval(np.array(ref))), abs=1e-9)


def test_declared_label_set_fixes_q_for_every_pair():
    from irrCAC.raw import CAC

    labels = _frame(HAND)
    declared = [S, U, P, "not_enough_info"]
    res = agreement(labels, B=50, label_set=declared)
    wide = labels.pivot(index="assertion_id", columns="judge", values="verdict").reset_index(drop=True)
    ref = CAC(wide, categories=declared, digits=12).gwet()["est"]["coefficient_value"]
    assert res.pairs.loc[0, "gwet_ac1"] == pytest.approx(ref, abs=1e-9)
    assert res.pairs.loc[0, "gwet_ac1"] != pytest.approx(agreement(labels, B=50).pairs.loc[0, "gwet_ac1"])
    assert res.pairs.loc[0, "cohen_kappa"] == agreement(labels, B=50).pairs.loc[0, "cohen_kappa"]
    with pytest.raises(UsageError, match="not in the declared label set"):
        agreement(labels, B=10, label_set=[S, P])
    with pytest.raises(UsageError, match="at least two distinct labels"):
        agreement(labels, B=10, label_set=[S])


def test_cli_label_set(cli, tmp_path):
    f = tmp_path / "l.jsonl"
    _frame(HAND).to_json(f, orient="records", lines=True)
    r = cli("agreement", f, "--label-set", "supported,unsupported,partial", "--json", "--bootstrap", "50")
    assert r.returncode == 0, r.stderr
    direct = agreement(_frame(HAND), B=50, label_set=[S, U, P]).to_json()
    assert json.loads(r.stdout)["pairs"][0]["gwet_ac1"] == pytest.approx(direct["pairs"][0]["gwet_ac1"])
    bad = cli("agreement", f, "--label-set", "supported")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1


def test_gold_without_a_verdict_is_excluded_and_counted():
    """None, NaN and blank gold verdicts (a frame built in Python, pandas 3's string dtype or not)
    are not labels: left out of every gold figure, counted, and said in a note."""
    labels = _frame(HAND)
    gold = pd.DataFrame({"assertion_id": ["i1", "i2", "i3", "i4", "i5", "i6"],
                         "verdict": [S, None, np.nan, U, "  ", S]})
    complete = gold.iloc[[0, 3]]
    for frame in (gold, gold.astype({"verdict": "str"}), gold.astype({"verdict": object})):
        res = agreement(labels, gold=frame, B=30)
        assert res.gold_missing == 3 and "3 gold rows without a verdict excluded" in res.notes
        assert res.labels == [S, U]
        ref = agreement(labels, gold=complete, B=30)
        assert res.to_json()["gold"] == ref.to_json()["gold"]
        assert res.gold.loc[0, "n"] == 2  # i1 and i4 (i6 has no judge verdict)
