"""`memjudge demo`: the whole study offline. The pipeline is tested quickly with a stand-in for
the embedded judge; the real run (marked `model`) uses the packaged model on 2 personas."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from schema_check import check_folder
from scripted_judge import HashScoringJudge

EXPECTED_FILES = {
    "labels.jsonl", "coverage.jsonl", "local_judge.json", "noise.json", "agreement.json", "compare.json",
    "sweep.json", "calibration.json", "robustness.json", "config.json", "report.md", "report.html", "demo.json",
    "estimate.json", "fig_ppi_forest.png",
}


def test_demo_pipeline_writes_every_part_and_the_report(tmp_path, monkeypatch):
    from memjudge import demo as demo_mod
    from memjudge.judges import _PROVIDERS

    monkeypatch.setitem(_PROVIDERS, "local", HashScoringJudge)
    lines = []
    res = demo_mod.demo(tmp_path / "demo", 5, cache_dir=tmp_path / "cache", progress=False, echo=lines.append)
    files = {p.name for p in (tmp_path / "demo").iterdir()}
    assert EXPECTED_FILES <= files
    assert res.report == tmp_path / "demo" / "report.md" and res.report.read_text().startswith("# memjudge report")
    labels = pd.read_json(tmp_path / "demo" / "labels.jsonl", lines=True)
    assert set(labels["judge"]) == {demo_mod.LOCAL_JUDGE, "sim:paper", "sim:strict", "sim:noisy"}
    assert len(labels) == 4 * demo_mod.REPLICATES * res.candidates
    local = labels[labels["judge"] == demo_mod.LOCAL_JUDGE]
    assert local["judge_score"].notna().all() and local["verdict"].notna().all()
    quality = json.loads((tmp_path / "demo" / "local_judge.json").read_text())
    assert quality["n"] == res.candidates and 0 <= quality["auc"] <= 1
    # The report shows the embedded judge's AUC against the simulated gold (local_judge.json's value).
    md = res.report.read_text()
    assert any("AUC" in line and f"{quality['auc']:.3f}" in line for line in md.splitlines())
    # The demo's judge reads the premise check (its sources are first-person notes), and says so.
    assert quality["calibration"]["options"] == demo_mod.LOCAL_OPTIONS == {"check": True}
    assert quality["calibration"]["personas"] == demo_mod.calibration_personas(5) == 3
    assert "(rubric prompt with the premise check) separates supported from unsupported" in md
    noise = json.loads((tmp_path / "demo" / "noise.json").read_text())
    flip = {j["judge"]: j for j in noise["judges"]}
    assert demo_mod.LOCAL_JUDGE in flip
    _check_derived_replicates(tmp_path / "demo", res, demo_mod, labels, flip)
    assert any("[6/6]" in line for line in lines)
    # The report says what it rests on, and warns about a judge that is poor against gold.
    md = res.report.read_text()
    done = md[md.index("## What was done"):md.index("## Findings")]
    assert f"{res.personas} personas" in done and "simulated gold" in done and "sim:strict" in done
    assert f"Judge quality: {demo_mod.LOCAL_JUDGE} agrees with the simulated gold labels on" in done
    assert "Table 1 and the findings on retention policies rest on its labels" in done
    assert "Judge quality: sim:paper" not in done  # a good judge gets no caveat
    assert "| gold |" not in md  # gold is marked simulated wherever it appears
    # the judge-level count of the robustness finding says which replicate it reads
    assert "first replicate of each" in md[md.index("## Findings"):]
    _check_simulated_gold(tmp_path / "demo", res, demo_mod)
    _check_coverage(tmp_path / "demo", res, demo_mod, md)
    _check_schemas(tmp_path / "demo")


def _check_schemas(out):
    """Every JSON file of the run follows its committed schema, the demo's own three included."""
    covered, failures = check_folder(out, {"config.json": "demo_config"})
    assert not failures, "\n".join(failures)
    assert {"demo", "demo_config", "local_judge", "coverage_judge", "config", "labels", "noise", "compare",
            "estimate"} <= set(covered)


def _check_coverage(out, res, demo_mod, md):
    """The embedded judge's coverage of a subset of personas, against the construction map."""
    q = json.loads((out / "coverage_judge.json").read_text())
    truth = pd.read_json(out / "corpus" / "facts.jsonl", lines=True, dtype={"persona_id": str})
    chosen = sorted(truth["persona_id"].unique())[:demo_mod.coverage_personas_of(res.personas)]
    assert q["personas"] == chosen and q["personas_total"] == res.personas
    assert q["facts_judged"] == int(truth["persona_id"].isin(chosen).sum()) == q["n_facts"] + q["facts_unanswered"]
    assert q["rubric"].startswith("coverage-fact@") and -1 <= q["pairs"]["cohen_kappa"] <= 1
    rows = pd.read_json(out / "coverage_local" / "coverage.jsonl", lines=True)
    assert rows["candidate_scores"].map(len).eq(5).all()  # the 5 closest candidates of each fact were read
    # Table 1 rests on the construction map (only a subset was judged), and the report says so.
    assert q["table1_coverage"] == "construction map"
    assert (pd.read_json(out / "coverage.jsonl", lines=True)["judge"] == "gold").all()
    done = md[md.index("## What was done"):md.index("## Findings")]
    assert "Estimated coverage (Table 1) rests on the corpus's construction map" in done
    assert f"labelled the coverage of {len(chosen)} of {res.personas} personas" in done
    assert f"| All pairs (fact × candidate) | {q['pairs']['n']:,} |" in md


def test_demo_coverage_of_every_persona_is_table_1s(tmp_path, monkeypatch):
    """With every persona judged, the judge's coverage labels are Table 1's map."""
    from memjudge import demo as demo_mod
    from memjudge.judges import _PROVIDERS, make_judge
    from memjudge.simulation import simulate

    monkeypatch.setitem(_PROVIDERS, "local", HashScoringJudge)
    corpus = simulate(preset="paper", seed=3, personas=2)
    lines = []
    cov, info = demo_mod._coverage_local(make_judge(demo_mod.LOCAL_JUDGE), corpus, tmp_path, None, tmp_path / "cache", False,
                                         lines.append)
    assert info["table1_coverage"] == "judge" and info["personas"] == ["p001", "p002"]
    assert len(cov) == len(corpus.facts) and (cov["judge"] == demo_mod.LOCAL_JUDGE).all()
    assert cov["covered_by"].notna().all() and info["n_facts"] == len(corpus.facts)
    assert "coverage:" in lines[0] and f"judged {len(corpus.facts)} facts of 2 personas" in lines[0]


def _check_derived_replicates(out, res, demo_mod, labels, flip):
    """The embedded judge (deterministic) is asked once per candidate: its replicate 1 copies
    replicate 0 and says so, and its flip rate is reported as zero by construction, not measured;
    the simulated judges' replicates are measured."""
    local = labels[labels["judge"] == demo_mod.LOCAL_JUDGE]
    first, second = local[local["replicate"] == 0], local[local["replicate"] == 1]
    assert len(first) == len(second) == res.candidates
    assert first["replicate_of"].isna().all() and (second["replicate_of"] == 0).all()
    pivot = local.pivot(index="assertion_id", columns="replicate", values="judge_score")
    assert (pivot[0] == pivot[1]).all()
    assert labels.loc[labels["judge"] != demo_mod.LOCAL_JUDGE, "replicate_of"].isna().all()
    run = json.loads((out / "local" / "summary.json").read_text())
    assert run["calls"] == res.candidates and run["rows"] == 2 * res.candidates
    assert json.loads((out / "local" / "config.json").read_text())["replicates_derived"] is True
    assert json.loads((out / "config.json").read_text())["replicates_derived"] is True
    assert flip[demo_mod.LOCAL_JUDGE]["by_construction"] is True and flip[demo_mod.LOCAL_JUDGE]["flip_rate"]["value"] == 0
    assert all(flip[f"sim:{j}"]["by_construction"] is False for j in demo_mod.SIM_JUDGES)
    md = (out / "report.md").read_text()
    assert "flip rate zero by construction, not measured" in md and "0 by construction (not measured)" in md


def _check_simulated_gold(out, res, demo_mod):
    """The 100-item simulated gold sample, the PPI++ estimate and compare --gold, in the report."""
    gold = pd.read_json(out / "corpus" / "gold_sample.jsonl", lines=True, dtype={"assertion_id": str})
    truth = pd.read_json(out / "corpus" / "labels.jsonl", lines=True, dtype={"assertion_id": str})
    n_gold = min(demo_mod.GOLD_SAMPLE, res.candidates)
    assert len(gold) == gold["assertion_id"].nunique() == n_gold
    # the hand labels are the corpus's construction truth on the sampled rows
    assert (gold["verdict"].to_numpy() == truth.set_index("assertion_id").loc[gold["assertion_id"], "verdict"].to_numpy()).all()
    est = json.loads((out / "estimate.json").read_text())
    assert est["judge"] == demo_mod.LOCAL_JUDGE and est["n_gold"] == n_gold and est["n_items"] == res.candidates
    groups = {g["group"]: g for g in est["groups"]}
    assert "all" in groups and set(groups) - {"all"} == set(truth["category"])
    top = groups["all"]
    for k in ("judge_only", "gold_only", "ppi"):
        assert top[k]["lo"] <= top[k]["value"] <= top[k]["hi"]
    cmp_ = json.loads((out / "compare.json").read_text())
    g = cmp_["gold"]
    assert g["n_matched"] == n_gold and g["path"] == str((out / "corpus" / "gold_sample.jsonl").resolve())
    # compare's full-sample PPI++ is estimate's overall PPI++ (same judge, replicate 0, gold)
    assert g["write_all"]["ppi"] == pytest.approx(top["ppi"]["value"], abs=1e-12)
    assert g["write_all"]["judge"] == pytest.approx(top["judge_only"]["value"], abs=1e-12)
    assert set(g["policies"]) == {"global", "targeted", "per_category"}
    rob = json.loads((out / "robustness.json").read_text())
    assert all("gold" in u["table"] for u in rob["units"]) and "faithfulness_ppi" in rob["summary"]
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["gold_sample"]["simulated"] is True and cfg["gold_sample"]["n"] == n_gold
    md = (out / "report.md").read_text()
    sec = md[md.index("## Judge-corrected estimates"):]
    assert "Simulated gold" in sec.split("\n## ")[0]
    assert f"corrected with {n_gold} simulated gold labels: {100 * top['ppi']['value']:.2f} [" in md
    assert "Faithfulness, PPI++ (%)" in md and "](fig_ppi_forest.png)" in md


def test_demo_sizes_its_calibration_sample_and_coverage_subset_to_the_corpus():
    """The calibration sample has as many other personas as the corpus, at most 3; coverage is
    judged on a fifth of the personas, rounded up, at most 2 (the default demo: 3 and 2)."""
    from memjudge import demo as demo_mod

    assert [demo_mod.calibration_personas(n) for n in (2, 3, 4, 10, 50)] == [2, 3, 3, 3, 3]
    assert [demo_mod.coverage_personas_of(n) for n in (2, 5, 6, 10, 11, 50)] == [1, 1, 2, 2, 2, 2]
    assert demo_mod.coverage_personas_of(demo_mod.DEFAULT_PERSONAS) == demo_mod.COVERAGE_PERSONAS == 2


def test_demo_rejects_too_few_personas(cli, tmp_path):
    r = cli("demo", "--personas", "1", "--out", tmp_path / "d")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "at least 2 personas" in r.stderr


@pytest.mark.model
@pytest.mark.timeout(3600)  # the session's demo run (conftest.model_demo) may start here; see the CLI limit there
def test_demo_end_to_end_with_the_real_model(model_demo, cli):
    out, r = model_demo.out, model_demo.result
    assert r.returncode == 0, r.stderr
    # Absolute paths of both documents, the last lines printed.
    assert r.stdout.strip().splitlines()[-2:] == [f"report: {(out / 'report.md').resolve()}", f"        {(out / 'report.html').resolve()}"]
    assert EXPECTED_FILES <= {p.name for p in out.iterdir()}
    labels = pd.read_json(out / "labels.jsonl", lines=True)
    local = labels[labels["judge"] == "local:qwen2.5-coder-1.5b"]
    assert len(local) > 0 and local["judge_score"].notna().all() and local["verdict"].notna().all()
    n = local["assertion_id"].nunique()
    # The model was asked (an empty cache), once per candidate: temperature 0 is deterministic,
    # so replicate 1 copies replicate 0 and says so, and the flip rate is zero by construction.
    assert f"      {n} assertions judged, 0 from the cache, 0 without a verdict;" in r.stdout
    pivot = local.pivot(index="assertion_id", columns="replicate", values="verdict")
    assert (pivot[0] == pivot[1]).all()
    assert (local.loc[local["replicate"] == 1, "replicate_of"] == 0).all()
    assert local.loc[local["replicate"] == 0, "replicate_of"].isna().all()
    flip = {j["judge"]: j for j in json.loads((out / "noise.json").read_text())["judges"]}
    assert flip["local:qwen2.5-coder-1.5b"]["by_construction"] is True
    assert "flip rate zero by construction, not measured" in (out / "report.md").read_text()
    quality = json.loads((out / "local_judge.json").read_text())
    assert quality["n"] == n
    # The smaller demo's calibration sample is no larger than its corpus; a fifth of it is judged for coverage.
    assert quality["calibration"]["personas"] == 2 and "a simulated-gold sample of 2 other personas" in r.stdout
    coverage = json.loads((out / "coverage_judge.json").read_text())
    assert coverage["personas"] == ["p001"] and coverage["table1_coverage"] == "construction map"
    _check_schemas(out)
    # A rerun asks the model nothing and says so.
    again = cli(*model_demo.argv, env={"MEMJUDGE_CACHE_DIR": str(model_demo.cache)}, timeout=3000)
    assert again.returncode == 0, again.stderr
    assert f"all {n} answers from the cache" in again.stdout
    est = json.loads((out / "estimate.json").read_text())
    assert est["judge"] == "local:qwen2.5-coder-1.5b" and est["groups"][0]["ppi"]["value"] is not None
    assert "## Judge-corrected estimates" in (out / "report.md").read_text()
