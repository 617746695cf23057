"""Issue 54: the embedded judge runs wherever it installs, and a native crash never ends a run
without a word. This machine's CPU may have no AMX, so llama.cpp's crash is played by a stand-in
(tests/llama_faults/sitecustomize.py): a real SIGILL on the decoding thread inside
llama-cpp-python's own `llama_decode`, when the model was loaded with extra buffer types (the AMX
crash) or at a chosen decode (a crash no self-test foresees). Everything else is the real model
and the real command line, run as a user runs it (`python -m memjudge`, a new interpreter).
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

pytestmark = [pytest.mark.model, pytest.mark.timeout(1800)]

FAULTS = ROOT / "tests" / "llama_faults"
JUDGE = "local:qwen2.5-coder-1.5b"
SIGILL_EXIT = 128 + signal.SIGILL


@pytest.fixture
def corpus(tmp_path) -> dict[str, Path]:
    """One persona's first 6 candidates: 20 llama.cpp decodes (15 for the first prompt, then 1 each)."""
    from memjudge.simulation import simulate

    c = simulate("paper", seed=0, personas=1)
    paths = {"candidates": tmp_path / "candidates.jsonl", "sources": tmp_path / "sources.jsonl"}
    c.candidates.head(6).to_json(paths["candidates"], orient="records", lines=True)
    c.sources.to_json(paths["sources"], orient="records", lines=True)
    return paths


def _env(home: Path, fault: str, **extra: str) -> dict[str, str]:
    return {"PYTHONPATH": f"{FAULTS}:{ROOT / 'src'}", "MEMJUDGE_CACHE_DIR": str(home), "MEMJUDGE_TEST_SIGILL": fault,
            "OMP_WAIT_POLICY": "PASSIVE", **extra}


def _score(corpus, out: Path, env: dict, *extra: str):
    return run_cli("score", corpus["candidates"], "--sources", corpus["sources"], "--judge", JUDGE, "--out", out,
                   "--cache-dir", out.parent / f"{out.name}-answers", "--no-progress", *extra, env=env, timeout=1500)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_a_build_that_crashes_with_repacking_falls_back_and_says_so_once(model_home, corpus, tmp_path):
    import shutil

    shutil.rmtree(model_home / "selftest", ignore_errors=True)  # the session's outcome is the real build's
    env = _env(model_home, "repack")
    r = _score(corpus, tmp_path / "run", env)
    assert r.returncode == 0, r.stderr
    said = [line for line in r.stderr.splitlines() if "with weight repacking" in line]
    assert len(said) == 1 and "crashed (SIGILL)" in said[0] and "without repacking" in said[0], r.stderr
    labels = _rows(tmp_path / "run" / "labels.jsonl")
    assert len(labels) == 6 and all(row["verdict"] in ("supported", "unsupported") for row in labels)
    llama = json.loads((tmp_path / "run" / "config.json").read_text())["judge"]["effective"]["llama_cpp"]
    assert llama["extra_buffer_types"] is False and llama["repack"] == "fallback"
    assert [(t["extra_buffer_types"], t["outcome"], t.get("signal")) for t in llama["self_test"]] == [
        (True, "signal", "SIGILL"), (False, "ok", None)]
    # remembered: the next process loads without repacking at once, and doctor reports it
    records = list((model_home / "selftest").glob("*.json"))
    assert len(records) == 1 and json.loads(records[0].read_text())["reason"] == "fallback"
    d = run_cli("doctor", "--json", env=env)
    assert d.returncode == 0, d.stderr
    report = json.loads(d.stdout)
    assert report["ok"] and report["self_test"]["fallback"] and report["self_test"]["cached"]
    assert any("crashed with weight repacking" in p["what"] for p in report["problems"])


def test_without_the_fallback_the_stand_in_crashes_and_the_run_ends_in_one_line(model_home, corpus, tmp_path):
    # The control: forced to repack, the stand-in build dies at the first decode, as the did.
    r = _score(corpus, tmp_path / "run", _env(model_home, "repack", MEMJUDGE_LLAMA_REPACK="on"))
    assert r.returncode == SIGILL_EXIT, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    line = lines[0]
    assert line.startswith("memjudge: score stopped: the embedded judge's model crashed in llama.cpp (SIGILL")
    assert "kept: no answers yet" in line and "memjudge doctor" in line
    stack = Path(line.rsplit("Python stack: ", 1)[1])
    assert "llama_cpp" in stack.read_text() and stack.parent == model_home / "crashes"


def test_a_crash_mid_run_says_what_was_kept_and_the_rerun_resumes(model_home, corpus, tmp_path):
    out = tmp_path / "run"
    r = _score(corpus, out, _env(model_home, "after:17", MEMJUDGE_LLAMA_REPACK="on"))
    assert r.returncode == SIGILL_EXIT, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    kept = _rows(out / "journal.jsonl")
    assert 0 < len(kept) < 6, r.stderr
    assert f"kept: {len(kept)} answers in {out / 'journal.jsonl'}" in line and "crashed in llama.cpp (SIGILL" in line
    # The same command without the crash asks only what the journal lacks.
    again = _score(corpus, out, _env(model_home, "", MEMJUDGE_LLAMA_REPACK="on"), "--json")
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["resumed"] == len(kept) and summary["requested"] == 6 - len(kept)


def test_the_demo_ends_in_one_line_too(model_home, tmp_path):
    out = tmp_path / "demo"
    r = run_cli("demo", "--personas", "2", "--out", out, "--no-progress",
                env=_env(model_home, "after:30", MEMJUDGE_LLAMA_REPACK="on"), timeout=1500)
    assert r.returncode == SIGILL_EXIT, r.stderr
    line = r.stderr.strip().splitlines()[-1]
    n = sum(len(_rows(j)) for j in out.rglob("journal.jsonl"))
    assert line.startswith("memjudge: demo stopped: the embedded judge's model crashed in llama.cpp (SIGILL"), line
    assert f"kept: {n} model answers in the journals under {out}" in line
    assert (out / "corpus" / "candidates.jsonl").is_file()  # what the demo wrote before the crash is there
