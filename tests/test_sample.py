"""`memjudge sample`: uniform and stratified (Neyman) draws, inclusion probabilities, top-up,
reproducibility, bad input; and the weighted estimate it feeds being unbiased in simulation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import memjudge
from memjudge.cli import main


def _run(capsys, *args):
    code = main(list(map(str, args)))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def corpus(tmp_path):
    """800 candidates over 40 personas, 4 categories; a judge that rarely says unsupported; truth."""
    rng = np.random.default_rng(0)
    n = 800
    ids = [f"a{i:04d}" for i in range(n)]
    personas = [f"p{i % 40:02d}" for i in range(n)]
    cats = np.array(["values", "work", "hobbies", "family"])[rng.integers(0, 4, n)]
    truth = rng.random(n) < np.where(cats == "values", 0.7, 0.93)
    judge = np.where(truth, rng.random(n) < 0.98, rng.random(n) < 0.5)  # lenient: half the errors pass
    cand = pd.DataFrame({"persona_id": personas, "assertion_id": ids, "category": cats, "confidence": 0.9,
                         "text": [f"User fact {i}." for i in range(n)]})
    cp = tmp_path / "candidates.jsonl"
    cand.to_json(cp, orient="records", lines=True)
    lab = cand[["assertion_id", "persona_id", "category"]].assign(
        judge="sim:lenient", rubric="support", replicate=0, verdict=np.where(judge, "supported", "unsupported"))
    lp = tmp_path / "labels.jsonl"
    lab.to_json(lp, orient="records", lines=True)
    src = pd.DataFrame({"persona_id": sorted(set(personas)), "source": [f"Source of {p}." for p in sorted(set(personas))]})
    sp = tmp_path / "sources.jsonl"
    src.to_json(sp, orient="records", lines=True)
    return dict(cand=cp, labels=lp, sources=sp, truth=dict(zip(ids, truth)), frame=cand, lab=lab, dir=tmp_path)


def _read(path):
    return pd.read_json(path, lines=True, dtype={"assertion_id": str})


def test_uniform_sample_reproducible(corpus, capsys):
    d = corpus["dir"]
    code, out, err = _run(capsys, "sample", corpus["cand"], "--n", 100, "--seed", 5, "--out", d / "s1.jsonl")
    assert code == 0, err and "100 rows" in out
    _run(capsys, "sample", corpus["cand"], "--n", 100, "--seed", 5, "--out", d / "s2.jsonl")
    _run(capsys, "sample", corpus["cand"], "--n", 100, "--seed", 6, "--out", d / "s3.jsonl")
    s1, s2, s3 = _read(d / "s1.jsonl"), _read(d / "s2.jsonl"), _read(d / "s3.jsonl")
    assert s1.equals(s2) and not s1["assertion_id"].equals(s3["assertion_id"])
    assert len(s1) == 100 and s1["assertion_id"].is_unique
    assert np.allclose(s1["inclusion_prob"], 100 / 800)
    assert set(s1.columns) >= {"assertion_id", "persona_id", "category", "text", "inclusion_prob", "source_ref"}
    assert (s1["source_ref"] == "sources:" + s1["persona_id"]).all()
    c = corpus["frame"].set_index("assertion_id")
    assert (c.loc[s1["assertion_id"], "text"].to_numpy() == s1["text"].to_numpy()).all()


def test_stratified_neyman_oversamples_unsupported(corpus, capsys):
    d = corpus["dir"]
    code, out, err = _run(capsys, "sample", corpus["cand"], "--n", 120, "--labels", corpus["labels"],
                          "--strategy", "stratified", "--sources", corpus["sources"], "--out", d / "s.jsonl", "--json")
    assert code == 0, err
    info = json.loads(out)
    s = _read(d / "s.jsonl")
    assert len(s) == 120 and s["source"].str.startswith("Source of").all()
    lab = corpus["lab"]
    key = lab["category"] + "|" + lab["verdict"]
    sizes = key.value_counts()
    got = s["stratum"].value_counts()
    assert set(got.index) == set(sizes.index)            # every non-empty stratum is sampled
    assert (got >= np.minimum(2, sizes.loc[got.index])).all()
    # inclusion_prob = n_h / N_h, so Σ 1/π over the rows is the population size exactly
    assert np.allclose(s["inclusion_prob"], got.loc[s["stratum"]].to_numpy() / sizes.loc[s["stratum"]].to_numpy())
    assert (1 / s["inclusion_prob"]).sum() == pytest.approx(800)
    # Neyman: the rare unsupported verdicts are sampled at a much higher rate than supported ones
    frac = (got / sizes.loc[got.index])
    uns = frac[[k for k in frac.index if k.endswith("|unsupported")]].mean()
    sup = frac[[k for k in frac.index if k.endswith("|supported")]].mean()
    assert uns > 3 * sup
    assert info["strata"][s["stratum"].iloc[0]]["size"] == sizes.loc[s["stratum"].iloc[0]]


def test_proportional_without_labels(corpus):
    s = memjudge.sample(corpus["cand"], 80, strategy="stratified", seed=1)
    cats = corpus["frame"]["category"].value_counts()
    got = s["category"].value_counts()
    assert (abs(got - 80 * cats / 800) <= 1).all()
    assert s["strata_by"].iloc[0] == "category"


def test_top_up_keeps_rows_and_recomputes_probabilities(corpus, capsys):
    d = corpus["dir"]
    _run(capsys, "sample", corpus["cand"], "--n", 60, "--labels", corpus["labels"], "--strategy", "stratified",
         "--out", d / "s.jsonl")
    code, out, err = _run(capsys, "sample", corpus["cand"], "--n", 50, "--labels", corpus["labels"], "--strategy",
                          "stratified", "--top-up", d / "s.jsonl", "--seed", 9, "--out", d / "s2.jsonl")
    assert code == 0, err and "50 new" in out
    s, s2 = _read(d / "s.jsonl"), _read(d / "s2.jsonl")
    assert len(s2) == 110 and s2["assertion_id"].is_unique and set(s["assertion_id"]) <= set(s2["assertion_id"])
    assert (1 / s2["inclusion_prob"]).sum() == pytest.approx(800)
    sizes = (corpus["lab"]["category"] + "|" + corpus["lab"]["verdict"]).value_counts()
    got = s2["stratum"].value_counts()
    assert np.allclose(s2["inclusion_prob"], got.loc[s2["stratum"]].to_numpy() / sizes.loc[s2["stratum"]].to_numpy())


@pytest.mark.parametrize("args, message", [
    (["--n", "801"], "larger than the population: 800 candidates"),
    (["--n", "3", "--strategy", "stratified"], "smaller than the"),
    (["--n", "10", "--by", "category"], "--by needs --strategy stratified"),
    (["--n", "10", "--strategy", "stratified", "--by", "verdict"], "--by verdict needs --labels"),
    (["--n", "10", "--strategy", "stratified", "--by", "colour"], "unknown stratum field 'colour'"),
])
def test_bad_sample_arguments(corpus, capsys, args, message):
    code, out, err = _run(capsys, "sample", corpus["cand"], *args, "--out", corpus["dir"] / "x.jsonl")
    assert code == 2 and message in err and err.count("\n") == 1
    assert not (corpus["dir"] / "x.jsonl").exists()


def test_sample_of_other_candidates_is_an_error(corpus, capsys, tmp_path):
    d = corpus["dir"]
    other = pd.DataFrame({"assertion_id": ["zz1"], "inclusion_prob": [0.1], "stratum": ["all"], "strata_by": [""],
                          "verdict": ["supported"]})
    other.to_json(d / "other.jsonl", orient="records", lines=True)
    gold = pd.DataFrame({"assertion_id": ["a0001"], "verdict": ["supported"]})
    gold.to_csv(d / "g.csv", index=False)
    code, _, err = _run(capsys, "estimate", corpus["labels"], "--gold", d / "g.csv", "--sample", d / "other.jsonl")
    assert code == 2 and "'zz1' is not among the labelled items" in err and "other.jsonl:1" in err
    code, _, err = _run(capsys, "sample", corpus["cand"], "--n", 5, "--top-up", d / "other.jsonl", "--out", d / "y.jsonl")
    assert code == 2 and "not among the candidates" in err


def test_stratified_weighted_estimate_is_unbiased(corpus):
    """Over repeated stratified samples (unsupported verdicts over-sampled), the weighted PPI++ and
    gold-only estimates centre on the true support rate; ignoring the weights would not."""
    truth = corpus["truth"]
    true_rate = np.mean(list(truth.values()))
    lab = memjudge.read_labels(corpus["labels"])
    ppi, gold_only, unweighted = [], [], []
    for seed in range(60):
        s = memjudge.sample(corpus["cand"], 80, labels=lab, strategy="stratified", seed=seed)
        g = pd.DataFrame({"assertion_id": s["assertion_id"],
                          "verdict": ["supported" if truth[a] else "unsupported" for a in s["assertion_id"]]})
        r = memjudge.estimate(lab, g, sample=s, interval="clt").to_dict()["groups"][0]
        ppi.append(r["ppi"]["value"])
        gold_only.append(r["gold_only"]["value"])
        unweighted.append(memjudge.estimate(lab, g, interval="clt").to_dict()["groups"][0]["gold_only"]["value"])
    se = np.std(ppi) / np.sqrt(len(ppi))
    assert abs(np.mean(ppi) - true_rate) < 3 * se + 0.003
    assert abs(np.mean(gold_only) - true_rate) < 3 * np.std(gold_only) / np.sqrt(60) + 0.003
    assert np.mean(unweighted) < true_rate - 0.05   # over-sampled unsupported verdicts drag it down


def test_gold_file_made_from_the_sample_carries_its_weights(corpus):
    """Labelling the sample file itself (adding a verdict column) is enough: its inclusion_prob is used."""
    s = memjudge.sample(corpus["cand"], 80, labels=corpus["labels"], strategy="stratified", seed=2)
    g = s.assign(verdict=["supported" if corpus["truth"][a] else "unsupported" for a in s["assertion_id"]])
    p = corpus["dir"] / "labelled_sample.jsonl"
    g.to_json(p, orient="records", lines=True)
    a = memjudge.estimate(corpus["labels"], p, interval="clt").to_dict()
    b = memjudge.estimate(corpus["labels"], g[["assertion_id", "verdict"]], sample=s, interval="clt").to_dict()
    assert a["weighted"]
    for k in ("value", "lo", "hi"):   # pandas writes 10 significant digits of inclusion_prob
        assert a["groups"][0]["ppi"][k] == pytest.approx(b["groups"][0]["ppi"][k], abs=1e-8)
    assert a["groups"][0]["ppi_lambda"] == pytest.approx(b["groups"][0]["ppi_lambda"], abs=1e-8)


def test_stratum_without_gold_is_named(corpus, capsys):
    d = corpus["dir"]
    _run(capsys, "sample", corpus["cand"], "--n", 60, "--labels", corpus["labels"], "--strategy", "stratified",
         "--out", d / "s.jsonl")
    s = _read(d / "s.jsonl")
    keep = s[s["stratum"] != "values|unsupported"]   # the annotator skipped that stratum entirely
    keep.assign(verdict=["supported" if corpus["truth"][a] else "unsupported" for a in keep["assertion_id"]]) \
        [["assertion_id", "verdict"]].to_csv(d / "g.csv", index=False)
    code, out, err = _run(capsys, "estimate", corpus["labels"], "--gold", d / "g.csv", "--sample", d / "s.jsonl", "--json")
    assert code == 0, err
    assert "1 stratum/strata of the sample have no gold item (values|unsupported)" in err
