"""`memjudge cascade` through the CLI: sim judges of rising accuracy and price, gold from the
simulated corpus, every output checked against what the stages said and the schema; bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from memjudge import formats as io
from memjudge.judges import make_judge
from memjudge.judges.panel import load_panel
from memjudge.simulation import simulate
from schema_check import errors

STAGES = {  # name: (noise model, price per call)
    "sim:weak": ("sensitivity = 0.93\nspecificity = 0.86\nleniency = 0.15\nconfidence_auc = 0.9\nseed = 1", 0.0001),
    "sim:mid": ("sensitivity = 0.97\nspecificity = 0.95\nleniency = 0.06\nconfidence_auc = 0.92\nseed = 2", 0.001),
    "sim:strong": ("sensitivity = 0.999\nspecificity = 0.995\nleniency = 0.005\nconfidence_auc = 0.9\nseed = 3", 0.01),
}


def _judges_file(path: Path, corpus: Path, extra: str = "") -> Path:
    text = ""
    for spec, (noise, price) in STAGES.items():
        text += (f'[[judge]]\nspec = "{spec}"\nprice_per_call = {price}\n[judge.options]\ntruth = "{corpus}"\n{noise}\n'
                 "flip_rate = 0.0\nshared_difficulty = 0.5\n\n")
    path.write_text(text + extra)
    return path


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    base = tmp_path_factory.mktemp("cascade")
    corpus = base / "corpus"
    c = simulate(preset="paper", seed=4, personas=30, out=corpus)
    rng = np.random.default_rng(0)
    pick = rng.choice(len(c.labels), 300, replace=False)
    gold = base / "gold.jsonl"
    io.write_jsonl(gold, [{"assertion_id": a, "verdict": v} for a, v in zip(c.labels["assertion_id"].iloc[pick],
                                                                            c.labels["verdict"].iloc[pick])])
    return {"base": base, "corpus": corpus, "c": c, "gold": gold, "judges": _judges_file(base / "judges.toml", corpus)}


def _args(study, out, *more, stages=("sim:weak", "sim:mid", "sim:strong"), gold=True):
    corpus = study["corpus"]
    args = ["cascade", corpus / "candidates.jsonl", "--sources", corpus / "sources.jsonl", "--judges-file", study["judges"]]
    for s in stages:
        args += ["--stage", s]
    if gold:
        args += ["--gold", study["gold"]]
    return [*args, "--out", out, "--cache-dir", study["base"] / "cache", "--no-progress", *more]


def test_a_three_stage_cascade_end_to_end(cli, study, tmp_path):
    out = tmp_path / "run"
    r = cli(*_args(study, out, "--target", "0.95", "--delta", "0.1"))
    assert r.returncode == 0, r.stderr
    assert "people's labels" in r.stdout and "With probability at least 90%" in r.stdout
    info = json.loads((out / "cascade.json").read_text())
    assert not errors("cascade", info)
    c = study["c"]
    n = len(c.candidates)
    labels = io.read_labels(out / "labels.jsonl")
    assert len(labels) == n and list(labels["assertion_id"]) == list(c.candidates["assertion_id"])
    rows = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert all(not errors("labels", row) for row in rows) and all("decided_by" in row for row in rows)
    assert info["certified"] and info["calibration"]["agreement_bound"] >= 0.95
    assert info["calibration"]["n"] == 300 and info["calibration"]["select_items"] == 300
    # Each decided item: the stage's own verdict, its confidence at the threshold, the earlier ones' below.
    panel = load_panel(study["judges"])
    said = {s: make_judge(panel[s]).labels(c.candidates).set_index("assertion_id") for s in STAGES}
    thr = {s["judge"]: s["threshold"] for s in info["stages"]}
    order = list(STAGES)
    for aid, by, verdict in zip(labels["assertion_id"], labels["decided_by"], labels["verdict"]):
        if by is None:
            assert verdict is None
            continue
        assert verdict == said[by].loc[aid, "verdict"]
        k = order.index(by)
        assert abs(said[by].loc[aid, "judge_score"]) >= thr[by]
        for earlier in order[:k]:
            assert thr[earlier] is None or abs(said[earlier].loc[aid, "judge_score"]) < thr[earlier]
    # counts and costs add up
    st = info["stages"]
    assert st[0]["asked"] == n
    for a, b in zip(st, st[1:]):
        assert b["asked"] == a["asked"] - a["decided"]
    assert info["decided"] == sum(s["decided"] for s in st) == labels["decided_by"].notna().sum()
    assert info["abstained"] == n - info["decided"]
    for s in st:
        assert s["cost_usd"] == pytest.approx(s["calls"] * STAGES[s["judge"]][1])
    assert st[0]["calls"] == n  # the first stage answered every item once (gold and selection too)
    assert info["top_judge_cost_usd"] == pytest.approx(n * 0.01)
    assert info["cost_usd"] == pytest.approx(sum(s["cost_usd"] for s in st))
    assert info["cost_usd"] < 0.6 * info["top_judge_cost_usd"] and info["decided_share"] > 0.9
    # agreement with the truth on the trusted items meets the target here too
    truth = dict(zip(c.labels["assertion_id"], c.labels["verdict"]))
    kept = labels[labels["decided_by"].notna()]
    assert (kept["verdict"] == kept["assertion_id"].map(truth)).mean() >= 0.95
    # the queue is the abstained items, as annotate reads them
    from memjudge.annotate.items import load_items

    queue = out / "queue.jsonl"
    abstained = set(labels.loc[labels["decided_by"].isna(), "assertion_id"])
    if abstained:
        items = load_items(queue, study["corpus"] / "sources.jsonl")
        assert set(items["assertion_id"]) == abstained
    # a rerun asks nothing again: every stage's answers come from its journal or the cache
    again = cli(*_args(study, out, "--target", "0.95", "--json"))
    assert again.returncode == 0, again.stderr
    for summary in out.glob("*/*/summary.json"):
        assert json.loads(summary.read_text())["requested"] == 0, summary
    assert json.loads(again.stdout)["stages"] == info["stages"]


def test_one_stage_abstains_and_queues_for_annotate(cli, study, tmp_path):
    out = tmp_path / "one"
    r = cli(*_args(study, out, "--target", "0.97", stages=("sim:mid",)))
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "cascade.json").read_text())
    assert not errors("cascade", info)
    # one stage: the path is chosen on a third of the gold items, the rest certify it
    assert info["calibration"]["select_items"] == 0 and info["calibration"]["n_certify"] == 200
    assert info["certified"] and 0 < info["abstained"] < info["candidates"]
    from memjudge.annotate.items import load_items

    queue = load_items(out / "queue.jsonl", study["corpus"] / "sources.jsonl")  # what memjudge annotate opens
    labels = io.read_labels(out / "labels.jsonl")
    assert set(queue["assertion_id"]) == set(labels.loc[labels["decided_by"].isna(), "assertion_id"])
    assert len(queue) == info["abstained"] and labels.loc[labels["decided_by"].isna(), "verdict"].isna().all()
    # the report's cascade section
    r = cli("report", out, "--format", "md")
    assert r.returncode == 0, r.stderr
    text = (out / "report.md").read_text()
    section = text[text.index("## Cascade of judges"):]
    assert "| sim:mid | judge_score |" in section and f"{info['abstained']:,} abstained" in section
    assert info["guarantee"] in section


def test_gold_from_the_last_stage_says_so(cli, study, tmp_path):
    out = tmp_path / "last"
    r = cli(*_args(study, out, "--gold-sample", "250", "--target", "0.95", gold=False))
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "cascade.json").read_text())
    assert info["gold"] == {"kind": "last_stage", "file": None, "n": 250, "sample": 250}
    assert "not with people" in info["guarantee"] and "strongest judge" in r.stdout


def test_replicate_agreement_is_a_stage_confidence(cli, study, tmp_path):
    judges = _judges_file(tmp_path / "j.toml", study["corpus"],
                          f'[[judge]]\nspec = "sim:voter"\nreplicates = 5\nprice_per_call = 0.0002\n[judge.options]\n'
                          f'truth = "{study["corpus"]}"\nflip_rate = 0.2\nseed = 9\n')
    out = tmp_path / "votes"
    args = _args(study, out, "--target", "0.95", stages=("sim:voter", "sim:strong"))
    args[args.index("--judges-file") + 1] = judges
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "cascade.json").read_text())
    assert info["stages"][0]["confidence"] == "agreement of 5 replicates"
    assert info["stages"][0]["calls"] == 5 * len(study["c"].candidates)
    thr = info["stages"][0]["threshold"]
    assert thr is None or thr in {0.6, 0.8, 1.0}


def _one_line_exit_2(r, *needles):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr, r.stderr
    for needle in needles:
        assert needle in r.stderr, r.stderr


def test_bad_input_is_one_line_and_exit_2(cli, study, tmp_path):
    out = tmp_path / "bad"
    _one_line_exit_2(cli(*_args(study, out, stages=("sim:weak", "sim:papr"))), "stage 2 (sim:papr)", "did you mean 'paper'")
    _one_line_exit_2(cli(*_args(study, out, stages=("nope:x",))), "stage 1 (nope:x)")
    stray = tmp_path / "stray.jsonl"
    stray.write_text('{"assertion_id": "p001-a001", "verdict": "supported"}\n{"assertion_id": "zzz", "verdict": "supported"}\n')
    args = _args(study, out)
    args[args.index("--gold") + 1] = stray
    _one_line_exit_2(cli(*args), str(stray), "not among the candidates", "'zzz'")
    _one_line_exit_2(cli(*_args(study, out, "--target", "1.2")), "--target must be in (0.5, 1)")
    _one_line_exit_2(cli(*_args(study, out, "--target", "0.5")), "--target must be in (0.5, 1)")
    _one_line_exit_2(cli(*_args(study, out, "--delta", "0.5")), "--delta must be in (0, 0.5)")
    _one_line_exit_2(cli(*_args(study, out, "--delta", "0")), "--delta must be in (0, 0.5)")
    # a judge without prices when a cost is asked (the dry run's estimate)
    free = _judges_file(tmp_path / "free.toml", study["corpus"], f'[[judge]]\nspec = "sim:free"\n[judge.options]\ntruth = "{study["corpus"]}"\nsensitivity = 0.9\n')
    args = _args(study, out, "--dry-run", stages=("sim:free", "sim:strong"))
    args[args.index("--judges-file") + 1] = free
    _one_line_exit_2(cli(*args), "stage 1 (sim:free)", "no prices")
    # a judge asked for no log-odds and given no replicates has no confidence
    nolog = _judges_file(tmp_path / "nolog.toml", study["corpus"], '[[judge]]\nspec = "openai:gpt-4o-mini"\nlogprobs = false\n')
    args = _args(study, out, stages=("openai:gpt-4o-mini", "sim:strong"))
    args[args.index("--judges-file") + 1] = nolog
    _one_line_exit_2(cli(*args), "stage 1 (openai:gpt-4o-mini)", "no confidence", "replicates")
    # too few gold items for the target at delta: the smallest number that could
    small = tmp_path / "small.jsonl"
    small.write_text("".join(line + "\n" for line in study["gold"].read_text().splitlines()[:60]))
    args = _args(study, out, "--target", "0.98")
    args[args.index("--gold") + 1] = small
    _one_line_exit_2(cli(*args), "60 gold items cannot certify agreement 0.98 at delta 0.1", "at least 114 gold items")
    assert not (out / "labels.jsonl").exists()


def test_dry_run_prices_the_cascade_against_the_last_stage_and_calls_nothing(cli, study, tmp_path):
    out = tmp_path / "dry"
    r = cli(*_args(study, out, "--dry-run", "--json"))
    assert r.returncode == 0, r.stderr
    est = json.loads(r.stdout)
    n = len(study["c"].candidates)
    assert est["top_judge_cost_usd"] == pytest.approx(n * 0.01)
    assert est["calibration_items"] == 600
    assert est["calibration_cost_usd"] == pytest.approx(600 * (0.0001 + 0.001 + 0.01))
    assert est["at_least_usd"] == pytest.approx(600 * 0.0111 + (n - 600) * 0.0001)
    assert est["at_most_usd"] == pytest.approx(n * 0.0111)
    assert not (out / "labels.jsonl").exists() and not list(out.glob("*/*/labels.jsonl"))
    text = cli(*_args(study, out, "--dry-run"))
    assert "the last stage alone" in text.stdout


def test_a_kill_during_stage_2_resumes_without_asking_stage_1_again(cli, tmp_path, fake_server):
    """Stage 1 a sim judge, stage 2 an OpenAI-compatible judge (the fake provider, with
    log-probabilities): SIGKILL while stage 2 answers the items stage 1 did not trust, then the
    same command again asks stage 2 only what it had not answered, and stage 1 nothing."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import _PROVIDER_ENV, ROOT

    corpus = tmp_path / "corpus"
    simulate(preset="paper", seed=6, personas=10, out=corpus)
    fake_server.logprobs = True
    fake_server.verdict_rule = "hash"
    fake_server.latency_s = 0.05
    judges = tmp_path / "judges.toml"
    judges.write_text(f'[[judge]]\nspec = "sim:paper"\nprice_per_call = 0.0001\n[judge.options]\ntruth = "{corpus}"\n\n'
                      f'[[judge]]\nspec = "openai:gpt-4o-mini"\nbase_url = "{fake_server.openai_base_url}"\n'
                      "concurrency = 2\nprice_per_call = 0.01\n")
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = ["cascade", corpus / "candidates.jsonl", "--sources", corpus / "sources.jsonl", "--judges-file", judges,
            "--stage", "sim:paper", "--stage", "openai:gpt-4o-mini", "--gold-sample", "120", "--target", "0.9",
            "--out", out, "--cache-dir", cache, "--no-progress"]
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "memjudge", *map(str, args)], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    journal = out / "stages" / "2-openai_gpt-4o-mini" / "journal.jsonl"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 20:
            break
        if proc.poll() is not None:
            pytest.fail(f"finished before it could be killed: {proc.stderr.read()}")
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL and not (out / "cascade.json").exists()
    def keys(path):
        return {json.loads(line)["key"] for line in path.read_text().splitlines() if line.strip().endswith("}")}

    answered = keys(journal) | keys(out / "calibration" / "2-openai_gpt-4o-mini" / "journal.jsonl")
    assert (out / "stages" / "1-sim_paper" / "labels.jsonl").is_file()  # stage 1 had finished

    fake_server.reset()
    fake_server.latency_s = 0.0
    r = cli(*args, "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["certified"] and info["gold"]["kind"] == "last_stage"
    # stage 1 asked nothing again, in either of its runs
    for summary in (out / "calibration" / "1-sim_paper" / "summary.json", out / "stages" / "1-sim_paper" / "summary.json"):
        assert json.loads(summary.read_text())["requested"] == 0, summary
    # stage 2 was asked only what it had not answered before the kill
    assert fake_server.count() == info["stages"][1]["calls"] - len(answered)
    assert 0 < fake_server.count() < info["stages"][1]["asked"]  # killed in the middle of the stage's run
    assert len({q.user for q in fake_server.requests}) == fake_server.count()
    assert info["stages"][1]["confidence"] == "judge_score"


def test_nothing_certified_leaves_every_item_to_people_and_runs_no_stage(cli, study, tmp_path):
    # the middle judge as the last stage is about 97% right: 0.99 cannot be certified
    out = tmp_path / "none"
    r = cli(*_args(study, out, "--target", "0.99", stages=("sim:weak", "sim:mid")))
    assert r.returncode == 0, r.stderr
    info = json.loads((out / "cascade.json").read_text())
    assert not errors("cascade", info)
    assert not info["certified"] and info["decided"] == 0 and info["abstained"] == info["candidates"]
    assert info["guarantee"].startswith("Nothing is certified") and all(s["threshold"] is None for s in info["stages"])
    assert all(s["asked"] == 0 for s in info["stages"]) and not (out / "stages").exists()
    assert len(io.read_candidates(out / "queue.jsonl")) == info["candidates"]
    labels = io.read_labels(out / "labels.jsonl")
    assert labels["verdict"].isna().all() and labels["decided_by"].isna().all()


@pytest.mark.model
@pytest.mark.timeout(2400)  # the embedded judge on one CPU core: seconds per item on a loaded machine
def test_the_embedded_judge_then_a_served_judge_end_to_end(cli, tmp_path, fake_server, model_home):
    """Real judges, offline: the embedded judge (its log-odds) as stage 1, an OpenAI-compatible
    server (the fake provider, answering the corpus's truth, with log-probabilities) as stage 2."""
    import re

    corpus = tmp_path / "corpus"
    c = simulate(preset="paper", seed=8, personas=1, out=corpus)
    truth = {" ".join(t.split()): v for t, v in zip(c.candidates["text"], c.labels.set_index("assertion_id").loc[
        c.candidates["assertion_id"], "verdict"])}

    def answer(server, req):
        user = req.user or ""
        item = re.findall(r"<<<ASSERTION\n(.*?)\nASSERTION>>>", user, flags=re.S)[-1]
        source = re.findall(r"<<<SOURCE\n(.*?)\nSOURCE>>>", user, flags=re.S)[0]
        verdict = truth[" ".join(item.split())]
        evidence = " ".join(source.split()[:8]) if verdict == "supported" else ""
        return json.dumps({"verdict": verdict, "evidence": evidence, "rationale": "the truth"})

    fake_server.answer_fn = answer
    fake_server.logprobs = True
    judges = tmp_path / "judges.toml"
    judges.write_text('[[judge]]\nspec = "local:qwen2.5-coder-1.5b"\nprice_per_call = 0.0\n\n'
                      f'[[judge]]\nspec = "openai:gpt-4o-mini"\nbase_url = "{fake_server.openai_base_url}"\nprice_per_call = 0.01\n')
    out = tmp_path / "run"
    args = ["cascade", corpus / "candidates.jsonl", "--sources", corpus / "sources.jsonl", "--judges-file", judges,
            "--stage", "local:qwen2.5-coder-1.5b", "--stage", "openai:gpt-4o-mini", "--gold-sample", "20",
            "--target", "0.85", "--out", out, "--cache-dir", model_home, "--no-progress", "--json"]
    r = cli(*args, timeout=3000)
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    n = len(c.candidates)
    assert info["certified"] and info["stages"][0]["confidence"] == "judge_score"
    assert info["stages"][0]["calls"] == n and info["stages"][0]["asked"] == n
    labels = io.read_labels(out / "labels.jsonl")
    assert set(labels["decided_by"].dropna()) <= {"local:qwen2.5-coder-1.5b", "openai:gpt-4o-mini"}
    local = io.read_labels(out / "stages" / "1-local_qwen2.5-coder-1.5b" / "labels.jsonl")
    assert local["judge_score"].notna().all()  # the embedded judge's log-odds are its confidence
    asked_before = fake_server.count()
    again = cli(*args, timeout=3000)
    assert again.returncode == 0 and fake_server.count() == asked_before  # a rerun asks neither judge
    assert json.loads(again.stdout)["stages"] == info["stages"]
