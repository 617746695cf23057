"""Simulated judges: valid rubric answers, determinism, a noise model that does what it
declares (flip rate, per-replicate rates against gold), coverage answers, and the whole
path through `memjudge score`."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from memjudge import formats as io
from memjudge.errors import UsageError
from memjudge.judges import JudgeCall, make_judge
from memjudge.judges.panel import load_panel
from memjudge.judges.rubrics import load_rubric
from memjudge.judges.sim import flip_probability, flip_scale
from memjudge.simulation import simulate
from memjudge.stats.noise import noise


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "corpus"
    c = simulate(preset="paper", seed=5, personas=100, out=out)
    return c, out


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "small"
    return simulate(preset="paper", seed=7, personas=6, out=out), out


def _support_call(rub, corpus, aid, replicate=0):
    c = corpus.candidates.set_index("assertion_id").loc[aid]
    src = corpus.sources.set_index("persona_id").loc[c["persona_id"], "source"]
    prompt = rub.render_support(source=src, assertion=c["text"], category=c["category"], persona_id=c["persona_id"], assertion_id=aid)
    return JudgeCall(key=f"{aid}/{replicate}", rubric=rub.id, prompt=prompt, schema=rub.model, replicate=replicate,
                     item={"assertion_id": aid, "persona_id": c["persona_id"], "category": c["category"]})


def test_support_answers_are_valid_deterministic_and_marked(small):
    c, out = small
    judge = make_judge("sim:paper", options={"truth": str(out)})
    assert judge.simulated is True
    rub = load_rubric("support")
    src = dict(zip(c.sources["persona_id"], c.sources["source"]))
    for aid in c.candidates["assertion_id"][:40]:
        call = _support_call(rub, c, aid, replicate=1)
        ans = asyncio.run(judge.generate(call))
        obj = rub.validate(ans.text)
        assert ans.finish_reason == "stop" and "simulated" in obj["rationale"]
        assert obj["evidence"] == "" or obj["evidence"] in src[call.item["persona_id"]]
        assert asyncio.run(judge.generate(call)).text == ans.text
    # Another seed is another judge.
    other = make_judge("sim:paper", options={"truth": str(out), "seed": 1})
    a = judge.labels(c.candidates, replicates=3)["verdict"]
    b = other.labels(c.candidates, replicates=3)["verdict"]
    assert not a.equals(b)


def test_perfect_judge_reproduces_gold(small):
    c, out = small
    judge = make_judge("sim:perfect", options={"truth": str(out / "truth.jsonl")})
    lab = judge.labels(c.candidates, replicates=2)
    gold = dict(zip(c.labels["assertion_id"], c.labels["verdict"]))
    assert (lab["verdict"] == lab["assertion_id"].map(gold)).all()
    cov = judge.coverage_labels(c.facts, c.candidates)
    assert [sorted(x) for x in cov["covered_by"]] == [sorted(x) for x in c.coverage["covered_by"]]


@pytest.mark.parametrize("name,flip", [("paper", 0.0471), ("noisy", 0.12)])
def test_declared_flip_rate_is_what_noise_measures(corpus, name, flip):
    c, out = corpus
    judge = make_judge(f"sim:{name}", options={"truth": str(out)})
    lab = judge.labels(c.candidates, replicates=4)
    res = noise(lab, B=200).judges.iloc[0]
    # 4,715 items x 6 replicate pairs: the estimate is within a few standard errors.
    assert abs(res["flip_rate"] - flip) < 0.012
    assert res["flip_rate_lo"] <= flip <= res["flip_rate_hi"]


def test_declared_rates_hold_against_gold(corpus, tmp_path):
    c, out = corpus
    panel = tmp_path / "judges.toml"
    panel.write_text(f"""
[[judge]]
spec = "sim:custom"
[judge.options]
truth = "{out}"
sensitivity = {{ default = 0.95, values = 0.85 }}
specificity = 0.7
leniency = 0.5
flip_rate = 0.0
""")
    judge = make_judge(load_panel(panel)["sim:custom"])
    lab = judge.labels(c.candidates).set_index("assertion_id")
    t = c.truth.set_index("assertion_id")
    said = lab.loc[t.index, "verdict"] == "supported"

    def rate(mask):
        return said[mask].mean(), mask.sum()

    for mask, want in (
        ((t["kind"] == "supported") & (t["category"] != "values"), 0.95),
        ((t["kind"] == "supported") & (t["category"] == "values"), 0.85),
        (t["kind"] == "over_inference", 0.5),
        (t["kind"].isin(["fabrication", "contradiction", "wrong_person"]), 0.3),
    ):
        got, n = rate(mask)
        assert abs(got - want) < 4 * np.sqrt(want * (1 - want) / n) + 1e-9, (want, got, n)


def test_leniency_and_strictness_move_support(corpus):
    c, out = corpus
    t = c.truth.set_index("assertion_id")
    rates = {}
    for name in ("lenient", "strict"):
        lab = make_judge(f"sim:{name}", options={"truth": str(out)}).labels(c.candidates).set_index("assertion_id")
        said = lab.loc[t.index, "verdict"] == "supported"
        rates[name] = (said[t["kind"] == "over_inference"].mean(), said[t["stated"] == "implied"].mean())
    assert rates["lenient"][0] > rates["strict"][0] + 0.3
    assert rates["lenient"][1] > rates["strict"][1] + 0.15


def test_flip_scale_solves_the_declared_mean():
    assert flip_probability(0.0471) == pytest.approx(0.02413, abs=1e-5)
    h = [1.0] * 80 + [3.0] * 20
    c = flip_scale(0.0471, h)
    e = np.minimum(c * np.array(h), 0.5)
    assert np.mean(2 * e * (1 - e)) == pytest.approx(0.0471, abs=1e-9)
    assert flip_scale(0.0, h) == 0.0


def test_coverage_answers_follow_the_prompt(small):
    c, out = small
    judge = make_judge("sim:paper", options={"truth": str(out)})
    rub = load_rubric("coverage")
    pid = c.sources["persona_id"].iloc[0]
    mine = c.candidates[c.candidates["persona_id"] == pid]
    shown = mine.iloc[: len(mine) // 2]  # a subset of the persona's assertions
    facts = c.facts[c.facts["persona_id"] == pid]
    prompt = rub.render_coverage(
        source=c.sources["source"].iloc[0],
        assertions=[{"id": a, "text": t, "category": k} for a, t, k in zip(shown["assertion_id"], shown["text"], shown["category"])],
        facts=[{"id": f, "text": t} for f, t in zip(facts["fact_id"], facts["text"])], persona_id=pid)
    call = JudgeCall(key="k", rubric=rub.id, prompt=prompt, schema=rub.model, replicate=0, item={"persona_id": pid})
    obj = rub.validate(asyncio.run(judge.generate(call)).text)
    assert [f["fact_id"] for f in obj["facts"]] == list(facts["fact_id"])
    listed = {a for f in obj["facts"] for a in f["covered_by"]}
    assert listed and listed <= set(shown["assertion_id"])


def test_bad_options_are_usage_errors(small):
    _, out = small
    with pytest.raises(UsageError, match="needs options.truth"):
        make_judge("sim:paper")
    with pytest.raises(UsageError, match=r"unknown option\(s\) sensitivty"):
        make_judge("sim:paper", options={"truth": str(out), "sensitivty": 0.9})
    with pytest.raises(UsageError, match="must be a probability"):
        make_judge("sim:paper", options={"truth": str(out), "specificity": {"values": 1.5}})
    with pytest.raises(UsageError, match="unknown profile"):
        make_judge("sim:x", options={"truth": str(out), "profile": "nope"})


def test_a_misspelt_profile_is_an_error_not_the_paper_profile(cli, small, tmp_path):
    c, out = small
    panel = tmp_path / "judges.toml"
    panel.write_text(f'[[judge]]\nspec = "sim:papr"\n[judge.options]\ntruth = "{out}"\n')
    r = cli("score", out / "candidates.jsonl", "--sources", out / "sources.jsonl", "--judge", "sim:papr",
            "--judges-file", panel, "--out", tmp_path / "run", "--no-progress")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "unknown simulated profile 'papr'" in r.stderr and "did you mean 'paper'" in r.stderr and "strict" in r.stderr
    assert not (tmp_path / "run" / "labels.jsonl").exists()
    # a custom name with a declared noise model is a judge of its own
    judge = make_judge("sim:judge_a", options={"truth": str(out), "sensitivity": 0.9})
    assert judge.profile == "paper" and judge.noise["sensitivity"]["default"] == 0.9


def test_score_end_to_end_with_a_panel(cli, small, tmp_path):
    c, out = small
    panel = tmp_path / "judges.toml"
    panel.write_text(f'[[judge]]\nspec = "sim:paper"\n[judge.options]\ntruth = "{out}"\n')
    run = tmp_path / "run"
    args = ["score", out / "candidates.jsonl", "--sources", out / "sources.jsonl", "--judge", "sim:paper",
            "--judges-file", panel, "--replicates", "2", "--out", run, "--no-progress", "--json"]
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["simulated"] is True and summary["errors"] == 0
    config = json.loads((run / "config.json").read_text())
    assert config["judge"]["simulated"] is True
    lab = io.read_labels(run / "labels.jsonl")
    assert len(lab) == 2 * len(c.candidates)
    assert lab["rationale"].str.contains("simulated").all()
    # The engine's answers are the fast path's answers.
    fast = make_judge("sim:paper", options={"truth": str(out)}).labels(c.candidates, replicates=2)
    merged = fast.merge(lab, on=["assertion_id", "replicate"])
    assert (merged["verdict_x"] == merged["verdict_y"]).all()
    assert np.allclose(merged["judge_score_x"].astype(float), merged["judge_score_y"].astype(float))
    again = cli(*args)
    assert json.loads(again.stdout)["requested"] == 0
    # Coverage through the engine, with the corpus's reference facts.
    cov_run = tmp_path / "cov"
    r = cli("score", out / "candidates.jsonl", "--sources", out / "sources.jsonl", "--facts", out / "facts.jsonl",
            "--rubric", "coverage", "--judge", "sim:paper", "--judges-file", panel, "--out", cov_run, "--no-progress", "--json")
    assert r.returncode == 0, r.stderr
    cov = io.read_coverage(cov_run / "coverage.jsonl")
    assert len(cov) == len(c.facts)
    gold = dict(zip(c.coverage["fact_id"], c.coverage["covered_by"]))
    agree = np.mean([set(a) == set(gold[f]) for f, a in zip(cov["fact_id"], cov["covered_by"])])
    assert agree > 0.85


def test_identity_follows_the_truth_file(tmp_path):
    a = simulate(personas=2, seed=0, out=tmp_path / "c")
    before = make_judge("sim:paper", options={"truth": str(tmp_path / "c")}).identity()
    simulate(personas=2, seed=1, out=tmp_path / "c")
    after = make_judge("sim:paper", options={"truth": str(tmp_path / "c" / "truth.jsonl")}).identity()
    assert before["truth_sha256"] != after["truth_sha256"]
    assert len(a.candidates) > 0


def test_fast_path_rows_match_the_engine_format(small, tmp_path):
    c, out = small
    judge = make_judge("sim:paper", options={"truth": str(out)})
    lab = judge.labels(c.candidates, replicates=1)
    assert lab["rubric"].iloc[0] == load_rubric("support").id
    path = tmp_path / "labels.jsonl"
    io.write_jsonl(path, io.frame_records(lab))
    back = io.read_labels(path)
    assert list(back["verdict"]) == list(lab["verdict"]) and back["simulated"].all()
    cov = judge.coverage_labels(c.facts, c.candidates)
    assert cov["rubric"].iloc[0] == load_rubric("coverage").id
    io.write_jsonl(tmp_path / "coverage.jsonl", io.frame_records(cov))
    assert len(io.read_coverage(tmp_path / "coverage.jsonl")) == len(c.facts)


# ---------------------------------------------------------------------------------------
# declared confidence (judge_score), shared item difficulty, price per call


def _right_and_scores(judge, c, replicates=1):
    lab = judge.labels(c.candidates, replicates=replicates)
    truth = dict(zip(c.truth["assertion_id"], c.truth["kind"] == "supported"))
    right = (lab["verdict"] == "supported") == lab["assertion_id"].map(truth)
    return lab, right.to_numpy(), lab["judge_score"].astype(float).to_numpy()


@pytest.mark.parametrize("auc", [0.5, 0.7, 0.85, 0.95])
def test_judge_score_tells_right_from_wrong_at_the_declared_auc(corpus, auc):
    from sklearn.metrics import roc_auc_score

    c, out = corpus
    judge = make_judge("sim:noisy", options={"truth": str(out), "confidence_auc": auc})
    lab, right, score = _right_and_scores(judge, c, replicates=2)
    # The sign is the verdict's, as other judges' log-odds: > 0 says supported.
    assert ((score > 0) == (lab["verdict"] == "supported")).all() and (score != 0).all()
    n_wrong, n_right = int((~right).sum()), int(right.sum())
    assert n_wrong > 500
    # Hanley-McNeil standard error of an AUC; 4 of them (replicates share their modal verdict).
    q1, q2 = auc / (2 - auc), 2 * auc**2 / (1 + auc)
    se = np.sqrt((auc * (1 - auc) + (n_right - 1) * (q1 - auc**2) + (n_wrong - 1) * (q2 - auc**2)) / (n_right * n_wrong))
    got = roc_auc_score(right, np.abs(score))
    assert abs(got - auc) < 4 * se + 0.005, (auc, got, se)


def test_the_confidence_model_keeps_the_verdicts_and_is_in_the_identity(small):
    _, out = small
    c = small[0]
    a = make_judge("sim:paper", options={"truth": str(out)})
    b = make_judge("sim:paper", options={"truth": str(out), "confidence_auc": 0.6})
    la, lb = a.labels(c.candidates), b.labels(c.candidates)
    assert list(la["verdict"]) == list(lb["verdict"])
    assert not np.allclose(la["judge_score"].astype(float), lb["judge_score"].astype(float))
    assert a.identity() != b.identity() and a.identity()["confidence"]["confidence_auc"] == 0.85


def test_shared_difficulty_makes_judges_err_on_the_same_items_and_keeps_their_rates(corpus):
    c, out = corpus

    def errors(seed, s):
        judge = make_judge("sim:noisy", options={"truth": str(out), "seed": seed, "shared_difficulty": s, "flip_rate": 0.0})
        return _right_and_scores(judge, c)[1] == 0

    t = c.truth.set_index("assertion_id")
    for s in (0.0, 0.8):
        e1, e2 = errors(1, s), errors(2, s)
        r = np.corrcoef(e1, e2)[0, 1]
        if s == 0:
            assert abs(r) < 0.05
        else:
            assert r > 0.3
        # Marginal error rates are still the declared ones (noisy: sens 0.90, spec 0.75, leniency 0.40).
        lab = make_judge("sim:noisy", options={"truth": str(out), "seed": 1, "shared_difficulty": s, "flip_rate": 0.0}
                         ).labels(c.candidates).set_index("assertion_id")
        said = lab.loc[t.index, "verdict"] == "supported"
        for mask, want in (((t["kind"] == "supported"), 0.90), (t["kind"] == "over_inference", 0.40)):
            got, n = said[mask].mean(), mask.sum()
            assert abs(got - want) < 4 * np.sqrt(want * (1 - want) / n), (s, want, got)
    # One judge at s = 0 draws what earlier versions drew (no option: the default).
    plain = make_judge("sim:noisy", options={"truth": str(out), "seed": 1, "flip_rate": 0.0})
    assert (_right_and_scores(plain, c)[1] == ~errors(1, 0.0)).all()


def test_bad_confidence_options_are_usage_errors(small):
    _, out = small
    with pytest.raises(UsageError, match="confidence_auc must be in"):
        make_judge("sim:paper", options={"truth": str(out), "confidence_auc": 0.4})
    with pytest.raises(UsageError, match="confidence_auc must be in"):
        make_judge("sim:paper", options={"truth": str(out), "confidence_auc": 1.0})
    with pytest.raises(UsageError, match="shared_difficulty must be"):
        make_judge("sim:paper", options={"truth": str(out), "shared_difficulty": 2})


def test_price_per_call_costs_a_run_and_a_dry_run(cli, small, tmp_path):
    c, out = small
    panel = tmp_path / "judges.toml"
    panel.write_text(f'[[judge]]\nspec = "sim:paper"\nprice_per_call = 0.002\n[judge.options]\ntruth = "{out}"\n')
    args = ["score", out / "candidates.jsonl", "--sources", out / "sources.jsonl", "--judge", "sim:paper",
            "--judges-file", panel, "--out", tmp_path / "run", "--no-progress", "--json"]
    dry = json.loads(cli(*args, "--dry-run").stdout)
    assert dry["estimated_cost_usd"] == pytest.approx(0.002 * len(c.candidates))
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["requests"] == len(c.candidates) and summary["cost_usd"] == pytest.approx(0.002 * len(c.candidates))
    # beside token prices, the two add up
    from memjudge.judges import JudgeConfig
    from memjudge.scoring.cost import job_cost_usd, price_usd

    both = JudgeConfig(spec="sim:paper", price_input_per_mtok=1.0, price_output_per_mtok=2.0, price_per_call=0.01)
    assert price_usd(both, {"input_tokens": 1_000_000, "output_tokens": 500_000}, requests=3) == pytest.approx(1 + 1 + 0.03)
    half = job_cost_usd(both, {"input_tokens": 0, "output_tokens": 0}, {"input_tokens": 0, "output_tokens": 0},
                        requests=4, batch_requests=2)
    assert half == pytest.approx(2 * 0.01 + 2 * 0.01 * both.batch_discount)
    assert price_usd(JudgeConfig(spec="sim:paper"), {"input_tokens": 5}, requests=3) is None
