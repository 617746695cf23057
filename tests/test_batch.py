"""Batch scoring (`score --batch`) through the real SDKs against the fake server's files and
batches endpoints: every item labelled once, the online path's labels for the same answers,
splits over size limits, partial failures, expiry, re-asks and unreadable lines, the online
fallback, SIGKILL and resume without a second submission, `batch status|cancel`, costs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import _PROVIDER_ENV, ROOT
from fake_server import BatchPlan, Fault
from memjudge import cli as memjudge_cli
from memjudge.judges.panel import judge_config
from memjudge.scoring.answers import MAX_REASKS
from memjudge.scoring.batch import STATE_FILE
from memjudge.scoring.engine import RunOptions, score_run
from scripted_judge import UNSUPPORTED, candidates_frame, sources_frame, with_run_options

N = 12
SPECS = {"openai": "openai:gpt-4o-mini", "gemini": "gemini:gemini-2.5-flash", "anthropic": "anthropic:claude-haiku-4-5",
         "azure": "azure:gpt-4o-mini-batch"}
ONLINE_ROUTES = {"openai": "openai.chat", "gemini": "gemini.generate", "anthropic": "anthropic.messages", "azure": "azure.chat"}


@pytest.fixture(autouse=True)
def _fast_polls(monkeypatch):
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_S", "0.002")
    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_MAX_S", "0.02")


@pytest.fixture(params=["openai", "gemini", "anthropic", "azure"])
def provider(request, monkeypatch):
    if request.param == "azure":  # an Azure resource needs its key (a compatible server would not)
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-test-key")
    return request.param


def base_url(server, provider):
    return server.openai_base_url if provider == "openai" else server.url  # anthropic: the host, as gemini


def texts(n=N):
    return candidates_frame(n)["text"].tolist()


def run(server, provider, tmp_path, n=N, out="run", cache="cache", batch=True, **kw):
    return score_run(candidates_frame(n), sources_frame(n), judge_config(SPECS[provider], base_url=base_url(server, provider)),
                     out=tmp_path / out, cache_dir=tmp_path / cache, progress=False,
                     **with_run_options({"batch": batch, **kw}))


def creates(server, provider):
    return server.count(route=f"{provider}.batches.create")


def write_inputs(tmp_path: Path, n: int = N) -> tuple[Path, Path]:
    cand, src = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl"
    candidates_frame(n).to_json(cand, orient="records", lines=True)
    sources_frame(n).to_json(src, orient="records", lines=True)
    return cand, src


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def comparable(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["latency_s", "cached"]).reset_index(drop=True)


# ---------------------------------------------------------------------------------------
# the whole path


def test_every_item_once_and_identical_to_online(fake_server, provider, tmp_path):
    r = run(fake_server, provider, tmp_path, replicates=2)
    assert creates(fake_server, provider) == 1 and fake_server.count(route=ONLINE_ROUTES[provider]) == 0
    lines = fake_server.batches.lines
    assert len(lines) == 2 * N  # every call asked exactly once, in one job
    df = r.labels
    assert len(df) == 2 * N and not df.duplicated(["assertion_id", "replicate"]).any()
    assert df["verdict"].tolist() == [("unsupported" if UNSUPPORTED in t else "supported") for t in texts() for _ in range(2)]
    assert df["error"].isna().all() and df["latency_s"].isna().all() and (df["finish_reason"] == "stop").all()
    s = r.summary
    assert (s.requested, s.requests, s.errors, s.batch["jobs_submitted"]) == (2 * N, 2 * N, 0, 1)
    assert s.tokens["input_tokens"] > 0

    # the online path, same answers: the same labels frame
    online = run(fake_server, provider, tmp_path, out="online", cache="cache-online", batch=False, replicates=2)
    pd.testing.assert_frame_equal(comparable(online.labels), comparable(df))
    assert online.summary.tokens == s.tokens

    # batch answers sit in the same cache under the same keys: an online rerun asks nothing
    fake_server.reset()
    again = run(fake_server, provider, tmp_path, out="elsewhere", batch=False, replicates=2)
    assert again.summary.cached == 2 * N and fake_server.count() == 0
    # and a batch rerun of the finished run submits nothing
    again = run(fake_server, provider, tmp_path, replicates=2)
    assert again.summary.resumed == 2 * N and fake_server.count() == 0


def test_custom_ids_are_cache_keys_and_results_come_out_of_order(fake_server, tmp_path):
    run(fake_server, "openai", tmp_path)
    store = fake_server.batches
    upload = next(f for f in store.files.values() if f["purpose"] == "batch")
    sent = [json.loads(x) for x in upload["data"].decode().splitlines()]
    assert all(x["method"] == "POST" and x["url"] == "/v1/chat/completions" for x in sent)
    journal = [x["key"] for x in read_jsonl(tmp_path / "run" / "journal.jsonl")]
    assert sorted(x["custom_id"] for x in sent) == sorted(journal)
    out = next(f for f in store.files.values() if f["purpose"] == "batch_output")
    returned = [json.loads(x)["custom_id"] for x in out["data"].decode().splitlines()]
    assert sorted(returned) == sorted(journal) and returned != [x["custom_id"] for x in sent]
    state = json.loads((tmp_path / "run" / STATE_FILE).read_text())
    (job,) = state["jobs"]
    assert job["state"] == "done" and job["job_id"].startswith("batch_") and job["status"] == "completed"
    assert sorted(job["keys"]) == sorted(journal) and job["submitted_at"] and job["provider"] == "openai"


def test_coverage_through_batch_equals_online(fake_server, provider, tmp_path):
    facts = pd.DataFrame([{"persona_id": "p0", "fact_id": "f1", "text": "hobby number 1"},
                          {"persona_id": "p1", "fact_id": "f2", "text": "hobby number 5"}])
    kw = dict(rubric="coverage", facts=facts)
    b = run(fake_server, provider, tmp_path, **kw)
    o = run(fake_server, provider, tmp_path, out="online", cache="c2", batch=False, **kw)
    pd.testing.assert_frame_equal(b.coverage.drop(columns="cached"), o.coverage.drop(columns="cached"))
    assert b.coverage["covered_by"].tolist() == [["a001"], ["a005"]]


# ---------------------------------------------------------------------------------------
# limits


def test_jobs_are_split_over_injected_limits(fake_server, provider, tmp_path):
    r = run(fake_server, provider, tmp_path, batch_options={"max_requests": 5})
    jobs = r.summary.batch["jobs"]
    assert [j["requests"] for j in jobs] == [5, 5, 2] and creates(fake_server, provider) == 3
    assert r.labels["verdict"].notna().all() and len(fake_server.batches.lines) == N

    # by size: a few requests per job, each job within the byte limit
    fake_server.batches.lines.clear()
    one = len(json.dumps({"x": texts()[0]})) * 20  # about two or three requests
    r = run(fake_server, provider, tmp_path, out="bysize", cache="c2", batch_options={"max_bytes": 3000})
    jobs = r.summary.batch["jobs"]
    assert len(jobs) > 3 and sum(j["requests"] for j in jobs) == N and one > 0
    assert r.labels["verdict"].notna().all() and len(fake_server.batches.lines) == N
    if provider == "openai":
        uploads = [f for f in fake_server.batches.files.values() if f["purpose"] == "batch"][3:]
        assert len(uploads) == len(jobs) and all(f["bytes"] <= 3000 for f in uploads)


def test_a_request_over_the_size_limit_is_null_not_sent(fake_server, tmp_path):
    r = run(fake_server, "openai", tmp_path, batch_options={"max_bytes": 500})
    assert r.labels["verdict"].isna().all() and r.labels["error"].str.contains("over the batch limit").all()
    assert creates(fake_server, "openai") == 0


# ---------------------------------------------------------------------------------------
# failures


def test_partial_failures_are_resubmitted(fake_server, provider, tmp_path):
    t = texts()
    route = f"{provider}.batch_line"
    fake_server.enqueue(Fault.server_error(), route=route, contains=t[1] + "\n")  # error file / inline error
    fake_server.enqueue(Fault.rate_limit(), route=route, contains=t[2] + "\n")
    fake_server.enqueue(Fault.drop(), route=route, contains=t[3] + "\n")  # no line at all
    fake_server.enqueue(Fault.http(400), route=route, contains=t[4] + "\n", times=None)  # a client error: not cured by resubmitting
    r = run(fake_server, provider, tmp_path)
    rows = r.labels.set_index("assertion_id")
    assert rows.loc[["a001", "a002", "a003"], "verdict"].notna().all()
    assert pd.isna(rows.loc["a004", "verdict"]) and "400" in rows.loc["a004", "error"]
    assert r.summary.batch["resubmitted"] == 3 and creates(fake_server, provider) == 2
    assert [j["requests"] for j in r.summary.batch["jobs"]] == [N, 3]
    assert len(fake_server.batches.lines) == N + 3 and r.summary.errors == 1


def test_resubmission_is_bounded(fake_server, provider, tmp_path):
    fake_server.enqueue(Fault.unavailable(), route=f"{provider}.batch_line", contains=texts()[5] + "\n", times=None)
    r = run(fake_server, provider, tmp_path, batch_options={"max_resubmits": 2})
    row = r.labels.set_index("assertion_id").loc["a005"]
    assert pd.isna(row["verdict"]) and "503" in row["error"] and "after 3 batch jobs" in row["error"]
    assert creates(fake_server, provider) == 3 and r.labels["verdict"].notna().sum() == N - 1
    # a null is asked again by a rerun (as online), once the fault is gone
    fake_server.reset()
    r = run(fake_server, provider, tmp_path)
    assert r.labels["verdict"].notna().all() and creates(fake_server, provider) == 1 and len(r.summary.batch["jobs"]) == 1


def test_failed_lines_go_online_with_fallback(fake_server, provider, tmp_path):
    fake_server.enqueue(Fault.server_error(), route=f"{provider}.batch_line", contains=texts()[7] + "\n", times=None)
    r = run(fake_server, provider, tmp_path, batch_fallback="online")
    assert r.labels["verdict"].notna().all() and r.summary.batch["online"] == 1
    online_route = ONLINE_ROUTES[provider]
    assert fake_server.count(route=online_route) == 1 and creates(fake_server, provider) == 1
    row = r.labels.set_index("assertion_id").loc["a007"]
    assert row["latency_s"] is not None and texts()[7] in fake_server.requests[-1].user


@pytest.mark.parametrize("final", ["expired", "failed"])
def test_expired_or_failed_job_is_resubmitted(fake_server, provider, tmp_path, final):
    fake_server.batches.plans.append(BatchPlan(states=("validating", "in_progress", final), answered=5))
    r = run(fake_server, provider, tmp_path)
    assert r.labels["verdict"].notna().all() and creates(fake_server, provider) == 2
    second = N - 5 if final == "expired" else N
    assert [j["requests"] for j in r.summary.batch["jobs"]] == [N, second]
    assert r.summary.batch["jobs"][0]["without_answer"] == second


def test_unreadable_output_line_is_null_with_error(fake_server, tmp_path):
    fake_server.enqueue(Fault.malformed_body(), route="openai.batch_line", contains=texts()[2] + "\n")
    r = run(fake_server, "openai", tmp_path)
    row = r.labels.set_index("assertion_id").loc["a002"]
    assert pd.isna(row["verdict"]) and "unreadable batch output line" in row["error"]
    assert r.labels["verdict"].notna().sum() == N - 1 and creates(fake_server, "openai") == 1
    # never cached: the next run asks for it again
    r = run(fake_server, "openai", tmp_path)
    assert r.labels["verdict"].notna().all() and r.summary.requested == 1


def test_invalid_answers_are_reasked_then_null(fake_server, provider, tmp_path):
    t = texts()
    route = f"{provider}.batch_line"
    fake_server.enqueue(Fault.malformed_answer(), route=route, contains=t[1] + "\n")  # once: the re-ask cures it
    fake_server.enqueue(Fault.malformed_answer(), route=route, contains=t[2] + "\n", times=None)
    fake_server.enqueue(Fault.safety(), route=route, contains=t[3] + "\n", times=None)  # final: no re-ask
    fake_server.enqueue(Fault.truncated(), route=route, contains=t[4] + "\n", times=None)
    r = run(fake_server, provider, tmp_path)
    rows = r.labels.set_index("assertion_id")
    assert rows.loc["a001", "verdict"] == "supported" and pd.isna(rows.loc["a001", "error"])
    assert rows.loc["a002", "verdict"] is None and rows.loc["a002", "error"].startswith(f"invalid answer after {MAX_REASKS} re-asks")
    assert rows.loc["a003", "verdict"] is None and "safety" in rows.loc["a003", "error"]
    assert rows.loc["a004", "verdict"] is None and "truncated" in rows.loc["a004", "error"]
    assert creates(fake_server, provider) == 1 + MAX_REASKS
    reasked = [q for q in fake_server.batches.lines if "could not be used" in (q.user or "")]
    assert len(reasked) == 1 + MAX_REASKS and r.summary.reasks == 1 + MAX_REASKS
    assert rows.loc["a001", "usage"]["output_tokens"] > 0


def test_cancelled_job_is_not_resubmitted_in_the_same_run(fake_server, tmp_path):
    fake_server.batches.plans.append(BatchPlan(states=("validating", "in_progress", "cancelled"), answered=4))
    r = run(fake_server, "openai", tmp_path)
    assert r.labels["verdict"].notna().sum() == 4 and creates(fake_server, "openai") == 1
    assert r.labels["error"].dropna().str.contains("cancelled").all()
    r = run(fake_server, "openai", tmp_path)  # a rerun asks the rest again
    assert r.labels["verdict"].notna().all() and creates(fake_server, "openai") == 2


# ---------------------------------------------------------------------------------------
# CLI: kill and resume, status and cancel, costs


def _popen(args):
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env["AZURE_OPENAI_API_KEY"] = "azure-test-key"  # what an azure: judge needs; the others ignore it
    return subprocess.Popen([sys.executable, "-m", "memjudge", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait(cond, proc, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not cond():
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"finished before {what}: {proc.stderr.read()}")
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)


def _state(out: Path) -> dict:
    try:
        return json.loads((out / STATE_FILE).read_text())
    except (OSError, ValueError):
        return {"jobs": []}


def _score_args(tmp_path, server, provider, cand, src, *extra):
    return ["score", cand, "--sources", src, "--judge", SPECS[provider], "--base-url", base_url(server, provider),
            "--out", tmp_path / "run", "--cache-dir", tmp_path / "cache", "--no-progress", "--batch", *extra]


def _kill(proc):
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def main(capsys, *args):
    """The CLI in this process (as `memjudge ARGS`): (exit code, stdout, stderr)."""
    code = memjudge_cli.main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err


def _check_complete(out: Path, n=N):
    labels = read_jsonl(out / "labels.jsonl")
    assert len(labels) == n and len({x["assertion_id"] for x in labels}) == n
    assert all(x["verdict"] in ("supported", "unsupported") for x in labels)


def test_sigkill_after_submission_then_resume_polls_the_same_job(capsys, fake_server, provider, tmp_path):
    cand, src = write_inputs(tmp_path)
    fake_server.batches.hold = True  # jobs stay in progress
    proc = _popen(_score_args(tmp_path, fake_server, provider, cand, src))
    out = tmp_path / "run"
    _wait(lambda: any(j["state"] == "submitted" for j in _state(out)["jobs"]), proc, "the job was recorded")
    _wait(lambda: fake_server.count(route=f"{provider}.batches.get") >= 2, proc, "a poll")
    _kill(proc)
    assert not (out / "labels.jsonl").exists() and creates(fake_server, provider) == 1

    fake_server.batches.hold = False
    code, out_text, err = main(capsys, *_score_args(tmp_path, fake_server, provider, cand, src, "--json"))
    assert code == 0, err
    assert creates(fake_server, provider) == 1  # polled, not submitted again
    s = json.loads(out_text)
    assert s["batch"]["jobs_submitted"] == 0 and s["requested"] == N and s["errors"] == 0
    _check_complete(out)
    assert len(fake_server.batches.lines) == N


def test_sigkill_during_create_then_resume_finds_the_job_by_label(capsys, fake_server, provider, tmp_path):
    cand, src = write_inputs(tmp_path)
    route = f"{provider}.batches.create"
    fake_server.enqueue(Fault.latency(1.0), route=route)  # the create is in flight when we kill
    proc = _popen(_score_args(tmp_path, fake_server, provider, cand, src))
    out = tmp_path / "run"
    _wait(lambda: fake_server.count(route=route) == 1, proc, "the create request")
    _kill(proc)
    (intent,) = _state(out)["jobs"]
    assert intent["state"] == "intent" and intent["job_id"] is None  # killed before it knew the id
    _wait(lambda: len(fake_server.batches.jobs) == 1, None, "the provider to create the job")

    code, out_text, err = main(capsys, *_score_args(tmp_path, fake_server, provider, cand, src, "--json"))
    assert code == 0, err
    assert creates(fake_server, provider) == 1 and fake_server.count(route=f"{provider}.batches.list") >= 1
    s = json.loads(out_text)
    assert s["batch"]["jobs_found"] == 1 and s["batch"]["jobs_submitted"] == 0
    (job,) = _state(out)["jobs"]
    assert job["job_id"] == (f"batches/{next(iter(fake_server.batches.jobs))}" if provider == "gemini" else next(iter(fake_server.batches.jobs)))
    _check_complete(out)
    assert len(fake_server.batches.lines) == N


def test_batch_status_and_cancel(capsys, fake_server, provider, tmp_path):
    cand, src = write_inputs(tmp_path)
    fake_server.batches.hold = True
    proc = _popen(_score_args(tmp_path, fake_server, provider, cand, src))
    out = tmp_path / "run"
    _wait(lambda: any(j["state"] == "submitted" for j in _state(out)["jobs"]), proc, "the job was recorded")
    _kill(proc)
    url = base_url(fake_server, provider)

    code, text, err = main(capsys, "batch", "status", out, "--json")  # the base URL is in batches.json
    assert code == 0, err
    (row,) = json.loads(text)
    assert row["state"] == "submitted" and row["requests"] == N and row["status"] in ("in_progress", "JOB_STATE_RUNNING")
    code, text, err = main(capsys, "batch", "status", out, "--base-url", url)
    assert code == 0 and row["job_id"] in text and f"{N} requests" in text

    code, text, err = main(capsys, "batch", "cancel", out, "--json")
    assert code == 0, err
    assert json.loads(text)[0]["status"] in ("cancelling", "JOB_STATE_CANCELLED", "canceling")
    assert fake_server.count(route=f"{provider}.batches.cancel") == 1
    code, text, err = main(capsys, "batch", "status", out, "--json")
    assert json.loads(text)[0]["status"] in ("cancelled", "JOB_STATE_CANCELLED", "ended")

    # the rerun reads the cancelled job (no answers) and asks its items in a new job
    fake_server.batches.hold = False
    code, text, err = main(capsys, *_score_args(tmp_path, fake_server, provider, cand, src, "--json"))
    assert code == 0, err
    assert creates(fake_server, provider) == 2
    _check_complete(out)

    code, text, err = main(capsys, "batch", "status", tmp_path / "nowhere")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "no batch jobs" in err


def test_costs_at_batch_prices(capsys, fake_server, tmp_path):
    cand, src = write_inputs(tmp_path)
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "openai:gpt-4o-mini"\nprice_input_per_mtok = 0.15\nprice_output_per_mtok = 0.6\nbatch_discount = 0.4\n')

    def score(out, *extra):
        code, text, err = main(capsys, "score", cand, "--sources", src, "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url,
                               "--judges-file", panel, "--cache-dir", tmp_path / out, "--no-progress", "--out", tmp_path / out, *extra)
        assert code == 0, err
        return json.loads(text) if "--json" in extra else text

    online = score("a", "--dry-run", "--json")
    batch = score("a", "--dry-run", "--batch", "--json")
    assert batch["estimated_cost_usd"] == pytest.approx(0.4 * online["estimated_cost_usd"]) and batch["estimated_cost_usd"] > 0
    assert "batch prices: x0.4" in score("a", "--dry-run", "--batch")
    assert fake_server.count() == 0

    b = score("b", "--batch", "--json")
    o = score("o", "--json")
    assert b["tokens"] == o["tokens"] and b["batch"]["discount"] == 0.4
    assert b["cost_usd"] == pytest.approx(0.4 * o["cost_usd"]) and b["cost_usd"] > 0
    tok = b["tokens"]
    assert b["cost_usd"] == pytest.approx(0.4 * (tok["input_tokens"] * 0.15 + tok["output_tokens"] * 0.6) / 1e6)
    assert "costs at x0.4" in score("b", "--batch")


def test_batch_needs_a_batch_provider(cli, tmp_path):
    cand, src = write_inputs(tmp_path)
    r = cli("score", cand, "--sources", src, "--judge", "sim:x", "--out", tmp_path / "run", "--batch")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--batch needs a judge with a batch API (openai:, gemini:, anthropic:, azure:), not sim:x" in r.stderr


def test_batch_calls_are_retried_and_a_lost_create_is_found_not_repeated(fake_server, provider, tmp_path):
    from memjudge.judges import JudgeConfig

    # The create is made at the provider but its answer comes too late (client timeout):
    # the retry looks for the job by its label before creating again.
    fake_server.enqueue(Fault.hang(0.25), route=f"{provider}.batches.create")
    fake_server.enqueue(Fault.unavailable(), route=f"{provider}.batches.get", times=2)
    fake_server.enqueue(Fault.rate_limit(0.01), route=f"{provider}.batches.list")
    if provider == "openai":
        fake_server.enqueue(Fault.server_error(), route="openai.files.create")
        fake_server.enqueue(Fault.drop(), route="openai.files.content")
    judge = JudgeConfig(spec=SPECS[provider], base_url=base_url(fake_server, provider), timeout_s=0.1, retry_initial_s=0.3, retry_max_s=1.0)
    r = score_run(candidates_frame(N), sources_frame(N), judge, out=tmp_path / "run", cache_dir=tmp_path / "cache",
                  progress=False, run=RunOptions(batch=True))
    assert r.labels["verdict"].notna().all() and len(fake_server.batches.jobs) == 1
    assert creates(fake_server, provider) == 1 and r.summary.batch["jobs_found"] == 1
    assert r.summary.retries >= 4 + (2 if provider == "openai" else 0)
    assert len(fake_server.batches.lines) == N


def test_one_batch_process_per_run_directory(fake_server, tmp_path):
    from memjudge.errors import UsageError
    from memjudge.scoring.batch import RunLock

    held = RunLock(tmp_path / "run")
    try:
        with pytest.raises(UsageError, match="another memjudge process"):
            run(fake_server, "openai", tmp_path)
    finally:
        held.release()
    assert creates(fake_server, "openai") == 0
    assert run(fake_server, "openai", tmp_path).labels["verdict"].notna().all()


@pytest.mark.parametrize("how", ["file", "auto"])
def test_gemini_file_input_and_result_file(fake_server, tmp_path, monkeypatch, how):
    import memjudge.judges.gemini_batch

    if how == "auto":  # a job over the inline limit goes as an uploaded JSONL file
        monkeypatch.setattr(memjudge.judges.gemini_batch, "INLINE_BYTES", 3000)
    t = texts()
    fake_server.enqueue(Fault.malformed_body(), route="gemini.batch_line", contains=t[2] + "\n")  # a line cut in half
    fake_server.enqueue(Fault.server_error(), route="gemini.batch_line", contains=t[3] + "\n")  # resubmitted
    r = run(fake_server, "gemini", tmp_path, batch_options={"gemini_input": "file"} if how == "file" else {})
    state = json.loads((tmp_path / "run" / STATE_FILE).read_text())
    assert state["jobs"][0]["input"] == "file" and state["jobs"][0]["input_file_id"].startswith("files/")
    assert fake_server.count(route="gemini.files.upload") >= 1 and fake_server.count(route="gemini.files.download") >= 1
    sent = [json.loads(x) for f in fake_server.batches.files.values() if "file" in f for x in f["data"].decode().splitlines()]
    journal = {x["key"] for x in read_jsonl(tmp_path / "run" / "journal.jsonl")}
    assert {x["key"] for x in sent[:N]} >= journal and all("generationConfig" in x["request"] for x in sent)
    rows = r.labels.set_index("assertion_id")
    assert pd.isna(rows.loc["a002", "verdict"]) and "unreadable batch output line" in rows.loc["a002", "error"]
    assert r.summary.batch["resubmitted"] == 1 and creates(fake_server, "gemini") == 2
    online = run(fake_server, "gemini", tmp_path, out="online", cache="c2", batch=False)
    keep = r.labels["assertion_id"] != "a002"
    pd.testing.assert_frame_equal(comparable(online.labels[keep]), comparable(r.labels[keep]))
