"""memjudge against a real OpenAI-compatible server: llama.cpp's own (llama-cpp-python[server]) on
the packaged Qwen2.5-Coder-1.5B GGUF, started as docs/servers.md tells users to (`memjudge
llama-server`: `python -m llama_cpp.server` after the embedded judge's llama.cpp self-test) by this
module on 127.0.0.1 at a free port and stopped by it (also on failure). A build whose weight
repacking crashes (issue 54; a stand-in here, tests/llama_faults) still serves.

What it shows, through `memjudge score --judge openai:MODEL --base-url ...`:
- `--response-format auto` ends up on `json_object` (the server refuses `json_schema` with an
  HTTP 500 validation error), for the support and the coverage rubric; >= 95% of the support
  verdicts are valid (coverage: see its test);
- a rerun gives the same verdicts from the cache (zero requests);
- the verdict's log-odds is read from the server's token log-probabilities: finite, and of
  the verdict's sign in most rows (on a few rows: this server spends ~0.2 s per generated token
  on log-probabilities, sorting the whole vocabulary in Python, which makes an answer 4-5 times
  slower; the support run asks without them, `logprobs = false`, as docs/servers.md advises);
- the served model (the GGUF path from GET /v1/models) is the rows' model_version, and the
  single slot is found (four requests in flight wait for it without timing out);
- once the server is down, one line and exit status 2.

Runtime: about 4 minutes on 2 idle cores (the corpus is 20 assertions of 2 simulated personas);
longer on a loaded one.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from memjudge import cli as memjudge_cli
from memjudge.judges import local as L
from memjudge.judges.local_weights import usable_cores

# A CPU server is slow per answer, and far slower on a loaded machine: more than the suite's
# 600 s per-test timeout (pyproject.toml) must be allowed here.
pytestmark = [pytest.mark.model, pytest.mark.timeout(3600)]

MODEL = "qwen-local"  # any name: the server echoes it; memjudge records the served one
PERSONAS = 2
PER_PERSONA = 10
FACTS_PER_PERSONA = 2
FACT_CALLS_PER_PERSONA = 5  # the per-fact coverage test: one call per fact
LOGPROB_ITEMS = 3  # the log-odds test: the first persona's first candidates


def _installed() -> bool:
    import importlib.util

    if any(importlib.util.find_spec(m) is None for m in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")):
        return False
    return all(importlib.util.find_spec(p) is not None for p in L.PACKAGED[L.DEFAULT_MODEL].packages)


if not _installed():
    pytest.skip("llama-cpp-python[server] and the packaged model (the [local] extra) are not installed",
                allow_module_level=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    def __init__(self, home: Path, log: Path, env: dict | None = None):
        """`home`: a memjudge cache folder holding the packaged model (served by default)."""
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        # as many threads as the test may use cores (conftest pins a model lane to one)
        threads = str(int(os.environ.get("MEMJUDGE_TEST_LLAMA_THREADS", min(2, usable_cores()))))
        # As docs/servers.md starts it (the packaged model, OMP_WAIT_POLICY=PASSIVE, the self-test: memjudge's)
        self.cmd = [
            sys.executable, "-m", "memjudge", "llama-server", "--chat_format", "chatml",
            "--host", "127.0.0.1", "--port", str(self.port),
            # the coverage prompt (a source, 10 assertions, 2 facts) and its answer fit in 4096
            "--n_ctx", "4096", "--n_threads", threads, "--n_threads_batch", threads, "--verbose", "False",
        ]
        self.env = {**os.environ, "MEMJUDGE_CACHE_DIR": str(home), **(env or {})}
        self.env.pop("OMP_WAIT_POLICY", None)  # memjudge llama-server sets it
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 600) -> None:
        with open(self.log, "wb") as log:
            # A process group of its own, so that stop() can end the watched server with its
            # watcher; not a session of its own: that would put it in an autogroup of its own,
            # where it competes with the nice-10 light tests at full weight (tests/README.md).
            self.proc = subprocess.Popen(self.cmd, stdout=log, stderr=subprocess.STDOUT, env=self.env,
                                         process_group=0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited ({self.proc.returncode}):\n{self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/models", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"llama_cpp.server not ready after {timeout_s:.0f} s:\n{self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # memjudge passes it on to the server
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict[str, Path]:
    from memjudge.simulation import simulate

    folder = tmp_path_factory.mktemp("llama-corpus")
    c = simulate("paper", seed=0, personas=PERSONAS)
    cands = c.candidates.groupby("persona_id", sort=False).head(PER_PERSONA)
    facts = c.facts.groupby("persona_id", sort=False).head(FACTS_PER_PERSONA)[["persona_id", "fact_id", "text"]]
    paths = {"candidates": folder / "candidates.jsonl", "sources": folder / "sources.jsonl", "facts": folder / "facts.jsonl"}
    cands.to_json(paths["candidates"], orient="records", lines=True)
    c.sources.to_json(paths["sources"], orient="records", lines=True)
    facts.to_json(paths["facts"], orient="records", lines=True)
    # A judges.toml: a single slot on a shared CI machine can take long per answer; the
    # timeout is per request once it holds the slot (waiting for it is not counted).
    judge = f'[[judge]]\nspec = "openai:{MODEL}"\ntimeout_s = 900\nmax_output_tokens = 400\n'
    paths["judges"] = folder / "judges.toml"
    paths["judges"].write_text(judge + "logprobs = false\n")
    paths["judges_logprobs"] = folder / "judges-logprobs.toml"
    paths["judges_logprobs"].write_text(judge)  # logprobs on: the default
    paths["candidates_logprobs"] = folder / "candidates-logprobs.jsonl"
    cands.head(LOGPROB_ITEMS).to_json(paths["candidates_logprobs"], orient="records", lines=True)
    return paths


@pytest.fixture(scope="module")
def server(tmp_path_factory, packaged_model):
    from conftest import model_cache_dir

    folder = tmp_path_factory.mktemp("llama-server")
    srv = LlamaServer(model_cache_dir(folder / "home", packaged_model), folder / "server.log")
    try:
        srv.start()
        yield srv
    finally:
        srv.stop()


def score(corpus, url, out: Path, cache: Path, *extra: str, logprobs: bool = False) -> int:
    candidates, judges = ("candidates_logprobs", "judges_logprobs") if logprobs else ("candidates", "judges")
    return memjudge_cli.main([
        "score", str(corpus[candidates]), "--sources", str(corpus["sources"]), "--judge", f"openai:{MODEL}",
        "--base-url", url, "--judges-file", str(corpus[judges]), "--concurrency", "4", "--no-progress",
        "--out", str(out), "--cache-dir", str(cache), *extra,
    ])


def rows(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


# First in the module: its three prompts are the support run's first three, so the server's single
# slot still holds their persona's source (about 1,150 tokens) when the support run starts.
def test_verdict_log_odds_from_llama_cpp_server_logprobs(server, corpus, tmp_path):
    # log-odds from the server's token log-probabilities: finite, of the verdict's sign
    assert score(corpus, server.url, tmp_path / "run", tmp_path / "cache", logprobs=True) == 0
    labels = rows(tmp_path / "run" / "labels.jsonl")
    assert len(labels) == LOGPROB_ITEMS
    settings = json.loads((tmp_path / "run" / "summary.json").read_text())["judge_settings"]
    assert settings["logprobs"] is True and settings["logprobs_returned"] is True
    valid = [r for r in labels if r["verdict"] is not None]
    scored = [r for r in valid if r["judge_score"] is not None]
    assert len(valid) >= LOGPROB_ITEMS - 1 and len(scored) >= 0.9 * len(valid), [r["error"] for r in labels]
    assert all(math.isfinite(r["judge_score"]) for r in scored)
    agree = sum((r["judge_score"] > 0) == (r["verdict"] == "supported") for r in scored)
    assert agree >= 0.8 * len(scored)


def test_support_rubric_on_llama_cpp_server(server, corpus, tmp_path):
    assert score(corpus, server.url, tmp_path / "run", tmp_path / "cache") == 0
    labels = rows(tmp_path / "run" / "labels.jsonl")
    n = PERSONAS * PER_PERSONA
    assert len(labels) == n
    valid = [r for r in labels if r["verdict"] is not None]
    assert len(valid) >= 0.95 * n, [r["error"] for r in labels if r["verdict"] is None]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    settings = summary["judge_settings"]
    assert settings["response_format"] == "json_object" and settings["server_slots"] == 1
    assert settings["served_model"].endswith(".gguf")
    assert {r["model_version"] for r in valid} == {settings["served_model"]}
    assert summary["retries"] == 0  # the refused json_schema request is not retried; no timeouts

    assert settings["logprobs"] is False and all(r["judge_score"] is None for r in labels)

    # a rerun into a new run directory: the same verdicts, from the cache (only a call left
    # without a valid answer, if any, is asked again)
    assert score(corpus, server.url, tmp_path / "again", tmp_path / "cache") == 0
    again = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert again["cached"] == len(valid) and again["requested"] == n - len(valid)
    second = rows(tmp_path / "again" / "labels.jsonl")
    assert [b["verdict"] for a, b in zip(labels, second) if a["verdict"]] == [r["verdict"] for r in valid]
    assert all(b["cached"] for a, b in zip(labels, second) if a["verdict"])


def test_coverage_rubric_on_llama_cpp_server(server, corpus, tmp_path):
    # The request path must work for coverage as for support (json_object, no request error,
    # no retry). The persona form asks for every fact at once; a fact the 1.5B model leaves out
    # is asked again in follow-ups and, still missing, is null with its own error (never
    # guessed): every error must be about the answer's content, none a failed request.
    extra = ("--rubric", "coverage", "--facts", str(corpus["facts"]))
    assert score(corpus, server.url, tmp_path / "run", tmp_path / "cache", *extra) == 0
    cov = rows(tmp_path / "run" / "coverage.jsonl")
    assert len(cov) == PERSONAS * FACTS_PER_PERSONA
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["judge_settings"]["response_format"] == "json_object" and summary["retries"] == 0
    assert all(r["error"].startswith(("invalid answer after", "no valid answer for this fact after")) for r in cov if r["error"]), \
        [r["error"] for r in cov]
    valid = [r for r in cov if r["error"] is None]
    assert all(isinstance(r["covered_by"], list) for r in valid)
    if valid:  # what was valid comes back from the cache, the same (only missing facts are asked again)
        assert score(corpus, server.url, tmp_path / "again", tmp_path / "cache", *extra) == 0
        again = {(r["persona_id"], r["fact_id"]): r["covered_by"] for r in rows(tmp_path / "again" / "coverage.jsonl")}
        assert all(again[(r["persona_id"], r["fact_id"])] == r["covered_by"] for r in valid)


def test_per_fact_coverage_rubric_on_llama_cpp_server(server, corpus, tmp_path):
    # Issue 35: one call per fact, with its 5 BM25-closest candidates: the 1.5B model answers
    # (nearly) every fact, and a rerun requests nothing.
    from memjudge.simulation import simulate

    c = simulate("paper", seed=0, personas=PERSONAS)
    facts = tmp_path / "facts.jsonl"
    c.facts.groupby("persona_id", sort=False).head(FACT_CALLS_PER_PERSONA)[["persona_id", "fact_id", "text"]].to_json(
        facts, orient="records", lines=True)
    extra = ("--rubric", "coverage-fact", "--facts", str(facts))
    assert score(corpus, server.url, tmp_path / "run", tmp_path / "cache", *extra) == 0
    cov = rows(tmp_path / "run" / "coverage.jsonl")
    assert len(cov) == PERSONAS * FACT_CALLS_PER_PERSONA
    valid = [r for r in cov if isinstance(r["covered_by"], list)]
    assert len(valid) >= 0.9 * len(cov), [r["error"] for r in cov if r["error"]]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["retries"] == 0 and summary["facts_unanswered"] == len(cov) - len(valid)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["rubric"]["form"] == "fact" and config["rubric"]["candidates"] == 5
    if len(valid) == len(cov):
        assert score(corpus, server.url, tmp_path / "again", tmp_path / "cache", *extra) == 0
        again = json.loads((tmp_path / "again" / "summary.json").read_text())
        assert again["requested"] == 0 and again["requests"] == 0
        assert [r["covered_by"] for r in rows(tmp_path / "again" / "coverage.jsonl")] == [r["covered_by"] for r in cov]


def test_server_down_is_one_clear_line(server, corpus, tmp_path, capsys):
    server.stop()
    assert score(corpus, server.url, tmp_path / "run", tmp_path / "cache") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach" in err[0] and server.url in err[0], err
    assert all(r["error"].startswith("not asked") for r in rows(tmp_path / "run" / "labels.jsonl"))


def test_a_build_whose_repacking_crashes_still_serves(packaged_model, tmp_path):
    # Issue 54: with the stand-in build (a decode of a model loaded with extra buffer types dies of
    # SIGILL), `memjudge llama-server` finds it in its self-test, loads without repacking, says so
    # once, and answers.
    from conftest import ROOT, model_cache_dir

    home = model_cache_dir(tmp_path / "home", packaged_model)
    import shutil

    shutil.rmtree(home / "selftest", ignore_errors=True)
    faults = {"PYTHONPATH": f"{ROOT / 'tests' / 'llama_faults'}:{ROOT / 'src'}", "MEMJUDGE_TEST_SIGILL": "repack"}
    srv = LlamaServer(home, tmp_path / "server.log", env=faults)
    try:
        srv.start()
        body = json.dumps({"model": MODEL, "max_tokens": 3, "messages": [{"role": "user", "content": "Say yes."}]})
        req = urllib.request.Request(f"{srv.url}/chat/completions", data=body.encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            answer = json.loads(r.read())
        assert answer["choices"][0]["message"]["content"] is not None
    finally:
        srv.stop()
    log = srv.log.read_text()
    assert log.count("crashed (SIGILL) in a test load") == 1 and "without repacking" in log, log[-3000:]
