"""`memjudge doctor` (issue 54): the llama.cpp build and the CPU's features, the packaged weights,
the self-test, each problem with its fix. The self-test's outcomes are tested with the real model
in tests/test_llama_crash.py (fallback) and here (a build that crashes however it loads)."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from conftest import ROOT, model_installed, run_cli

needs_llama = pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="llama-cpp-python not installed")


def _cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@needs_llama
def test_doctor_reports_the_build_the_cpu_and_the_weights(tmp_path):
    import llama_cpp

    r = run_cli("doctor", "--json", "--no-self-test", env={"MEMJUDGE_CACHE_DIR": str(tmp_path / "cache")})
    report = json.loads(r.stdout)
    build = report["llama_cpp"]
    assert build["version"] == llama_cpp.__version__
    info = llama_cpp.llama_print_system_info().decode()
    assert build["features"] and all(f"{f} = 1" in info for f in build["features"])
    assert "AVX2" in build["features"] or "avx2" not in _cpu_flags()
    assert set(report["cpu"]["flags"]) <= _cpu_flags()
    # the weights were never joined in this cache folder: installed (if the packages are), not verified
    weights = report["weights"]
    assert weights["file"] is None and weights["verified"] is False
    assert weights["installed"] is model_installed()
    assert report["self_test"] is None
    assert r.returncode == (0 if report["ok"] else 1) and report["ok"] is model_installed()

    text = run_cli("doctor", "--no-self-test", env={"MEMJUDGE_CACHE_DIR": str(tmp_path / "cache")})
    assert text.returncode == r.returncode
    assert f"llama.cpp: llama-cpp-python {llama_cpp.__version__} (" in text.stdout
    assert "AVX2" in text.stdout.splitlines()[2] or "avx2" not in _cpu_flags()
    assert text.stdout.splitlines()[-1].startswith("ok:" if report["ok"] else "not ok:")


@needs_llama
def test_doctor_says_when_the_build_leaves_cpu_features_unused_or_uses_missing_ones(monkeypatch):
    from memjudge import doctor as D

    used = set(D.llama_build().features)
    # a CPU with AVX-512 and AMX: a build without them leaves them unused (a note, with the rebuild)
    monkeypatch.setattr(D, "cpu_flags", lambda: frozenset({"avx", "avx2", "fma", "f16c", "avx512f", "amx_int8"}))
    report = D.doctor(self_test=False)
    unused = [f for f in ("AVX512", "AMX_INT8") if f not in used]
    assert report["llama_cpp"]["cpu_features_unused"] == unused
    if unused:
        note = next(p for p in report["problems"] if "does not use" in p["what"])
        assert note["severity"] == "note" and "--no-cache-dir" in note["fix"] and "install/llama-cpp.env" in note["fix"] and "CMAKE_ARGS=" in note["fix"]
    # a CPU without AVX2 under an AVX2 build: an error (the build was made for another machine)
    monkeypatch.setattr(D, "cpu_flags", lambda: frozenset({"sse3", "ssse3", "avx"}))
    report = D.doctor(self_test=False)
    if "AVX2" in used:
        assert "AVX2" in report["llama_cpp"]["features_cpu_lacks"] and not report["ok"]
        assert any(p["severity"] == "error" and "which this CPU lacks" in p["what"] for p in report["problems"])


@pytest.mark.model
@pytest.mark.timeout(900)
def test_doctor_gives_the_rebuild_when_the_model_crashes_however_it_loads(model_home):
    shutil.rmtree(model_home / "selftest", ignore_errors=True)
    env = {"PYTHONPATH": f"{ROOT / 'tests' / 'llama_faults'}:{ROOT / 'src'}", "MEMJUDGE_CACHE_DIR": str(model_home),
           "MEMJUDGE_TEST_SIGILL": "after:0", "OMP_WAIT_POLICY": "PASSIVE"}
    r = run_cli("doctor", "--json", env=env)
    assert r.returncode == 1, r.stderr
    report = json.loads(r.stdout)
    assert report["weights"]["verified"] and not report["ok"]
    t = report["self_test"]
    assert t["reason"] == "self-test failed" and [x.get("signal") for x in t["tests"]] == ["SIGILL", "SIGILL"]
    err = next(p for p in report["problems"] if p["severity"] == "error")
    assert "with and without weight repacking" in err["what"] and "-DGGML_NATIVE=OFF" in err["fix"]
    # and the judge refuses in one line before any work, with the same fix
    from memjudge.simulation import simulate

    c = simulate("paper", seed=0, personas=1)
    c.candidates.head(2).to_json(model_home.parent / "c.jsonl", orient="records", lines=True)
    c.sources.to_json(model_home.parent / "s.jsonl", orient="records", lines=True)
    s = run_cli("score", model_home.parent / "c.jsonl", "--sources", model_home.parent / "s.jsonl", "--judge",
                "local:qwen2.5-coder-1.5b", "--out", model_home.parent / "run", "--no-progress", env=env)
    assert s.returncode == 2 and len(s.stderr.strip().splitlines()) == 1, s.stderr
    assert "with and without weight repacking" in s.stderr and "--no-cache-dir" in s.stderr


def test_a_watched_command_still_answers_bad_input_in_one_line(tmp_path):
    # demo runs as a watched child (memjudge.cli.supervise): its own errors pass through unchanged
    r = run_cli("demo", "--personas", "1", "--out", tmp_path / "demo", fresh=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().splitlines() == ["memjudge: the demo needs at least 2 personas (cross-validation by "
                                             "persona), got 1"], r.stderr
