"""The scoring engine through its Python API and the CLI: caching and resume, replicates,
re-asks, null verdicts (never a coerced label), evidence checks, SIGKILL safety, coverage."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from conftest import _PROVIDER_ENV, ROOT
from fake_server import Fault
from memjudge import cli as memjudge_cli
from memjudge.errors import MemjudgeError, UsageError
from memjudge.judges import JudgeAnswer, JudgeConfig, Usage
from memjudge.judges.panel import judge_config
from memjudge.scoring.answers import MAX_REASKS
from memjudge.scoring.engine import score, score_run
from memjudge.scoring.ratelimit import RateLimiter
from scripted_judge import UNSUPPORTED, ScriptedJudge, candidates_frame, sources_frame, support_answer, with_run_options

N = 12
GOOD = '{"verdict": "supported", "evidence": "", "rationale": "ok"}'


def run(judge, tmp_path, n=N, **kw):
    kw.setdefault("out", tmp_path / "run")
    kw.setdefault("cache_dir", tmp_path / "cache")
    return score_run(candidates_frame(n), sources_frame(n), judge, progress=False, **with_run_options(kw))


def write_inputs(tmp_path: Path, n: int = N, per_persona: int = 4) -> tuple[Path, Path]:
    cand, src = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl"
    candidates_frame(n, per_persona).to_json(cand, orient="records", lines=True)
    sources_frame(n, per_persona).to_json(src, orient="records", lines=True)
    return cand, src


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# ---------------------------------------------------------------------------------------
# Python API with an in-process judge


def test_labels_columns_and_verdicts(tmp_path):
    j = ScriptedJudge()
    r = run(j, tmp_path)
    df = r.labels
    assert list(df.columns[:15]) == ["assertion_id", "persona_id", "category", "judge", "rubric", "replicate", "verdict", "judge_score",
                                     "evidence", "evidence_found", "rationale", "error", "cached", "usage", "latency_s"]
    assert {"finish_reason", "model_version", "batch"} <= set(df.columns)  # "batch" is the candidates' extra column
    expected = ["unsupported" if UNSUPPORTED in t else "supported" for t in candidates_frame(N)["text"]]
    assert df["verdict"].tolist() == expected
    assert not df["cached"].any() and df["error"].isna().all() and (df["finish_reason"] == "stop").all()
    assert df["usage"].iloc[0]["output_tokens"] == 20 and df["model_version"].iloc[0] == "scripted-1"
    s = r.summary
    assert (s.calls, s.requested, s.requests, s.cached, s.errors) == (N, N, N, 0, 0)
    assert s.verdicts == {"supported": expected.count("supported"), "unsupported": expected.count("unsupported")}
    assert s.tokens["output_tokens"] == 20 * N


def test_rerun_of_finished_job_makes_zero_requests(tmp_path):
    run(ScriptedJudge(), tmp_path)
    # from the run directory's journal...
    j = ScriptedJudge()
    r = run(j, tmp_path)
    assert j.requests == 0 and r.summary.resumed == N and r.labels["cached"].all()
    # ...or, in another run directory, from the cache
    j = ScriptedJudge()
    r = run(j, tmp_path, out=tmp_path / "other")
    assert j.requests == 0 and r.summary.cached == N


def test_replicates_have_distinct_keys_and_extend(tmp_path):
    j = ScriptedJudge()
    r = run(j, tmp_path, replicates=2)
    assert j.requests == 2 * N and len({c.key for c in j.calls}) == 2 * N
    assert sorted(r.labels.groupby("assertion_id")["replicate"].apply(tuple).unique()) == [(0, 1)]
    j = ScriptedJudge()
    r = run(j, tmp_path, replicates=3)
    assert j.requests == N and {c.replicate for c in j.calls} == {2}
    assert len(r.labels) == 3 * N and not r.labels.duplicated(["assertion_id", "replicate"]).any()


class DeterministicJudge(ScriptedJudge):
    """A judge whose answer is a function of the prompt alone (as the embedded one at temperature 0)."""

    @property
    def deterministic(self) -> bool:
        return True


def test_a_deterministic_judge_is_asked_once_and_its_replicates_say_they_are_copies(tmp_path):
    j = DeterministicJudge()
    r = run(j, tmp_path, replicates=3)
    assert j.requests == N and {c.replicate for c in j.calls} == {0}
    assert (r.summary.calls, r.summary.requested, r.summary.rows) == (N, N, 3 * N)
    df = r.labels
    assert len(df) == 3 * N and not df.duplicated(["assertion_id", "replicate"]).any()
    assert df.loc[df["replicate"] == 0, "replicate_of"].isna().all()
    assert (df.loc[df["replicate"] > 0, "replicate_of"] == 0).all()
    wide = df.pivot(index="assertion_id", columns="replicate", values="verdict")
    assert (wide[0] == wide[1]).all() and (wide[0] == wide[2]).all()
    # the files say so too, and read back as they were written
    from memjudge.formats import read_labels

    back = read_labels(tmp_path / "run" / "labels.jsonl")
    assert back["replicate_of"].tolist() == df["replicate_of"].tolist()
    assert json.loads((tmp_path / "run" / "config.json").read_text())["replicates_derived"] is True
    # the noise of its labels is zero by construction, and says it was not measured
    from memjudge.stats.noise import noise

    nz = noise(back)
    assert nz.judges["by_construction"].tolist() == [True] and nz.judges["flip_rate"].tolist() == [0.0]
    assert any("zero by construction, not measured" in n for n in nz.notes)
    # a rerun reuses the one answer per item
    j2 = DeterministicJudge()
    assert run(j2, tmp_path, replicates=3).summary.resumed == N and j2.requests == 0


def test_a_judge_that_may_vary_is_asked_every_replicate_and_has_no_replicate_of(tmp_path):
    r = run(ScriptedJudge(), tmp_path, replicates=2)
    assert "replicate_of" not in r.labels.columns
    assert json.loads((tmp_path / "run" / "config.json").read_text())["replicates_derived"] is False
    one = run(DeterministicJudge(), tmp_path, out=tmp_path / "one", cache_dir=tmp_path / "c1")  # one replicate: nothing to copy
    assert "replicate_of" not in one.labels.columns


def test_malformed_then_good_is_reasked(tmp_path):
    def script(call, n):
        return JudgeAnswer(text="Sure! The verdict is supported.", finish_reason="stop") if n == 0 else support_answer(call)

    j = ScriptedJudge(script=script)
    r = run(j, tmp_path)
    assert j.requests == 2 * N and r.summary.reasks == N
    assert r.labels["verdict"].notna().all() and r.labels["error"].isna().all()
    # the re-ask says what was wrong, after the item (the shared prefix stays intact)
    second = [c for c in j.calls if "could not be used" in c.prompt.user]
    assert len(second) == N and "not valid JSON" in second[0].prompt.user
    assert second[0].prompt.user.startswith(j.calls[0].prompt.user.split("<<<ASSERTION")[0])
    # the valid answer is cached under the original key
    j2 = ScriptedJudge()
    run(j2, tmp_path, out=tmp_path / "again")
    assert j2.requests == 0


def test_permanently_malformed_is_null_never_a_label(tmp_path):
    answers = ['{"verdict": "Supported", "evidence": "", "rationale": ""}', "supported", '{"verdict": "yes"}']
    j = ScriptedJudge(script=lambda call, n: JudgeAnswer(text=answers[n % 3], finish_reason="stop"))
    r = run(j, tmp_path)
    assert j.requests == (1 + MAX_REASKS) * N
    assert r.labels["verdict"].isna().all()
    assert r.labels["error"].str.startswith(f"invalid answer after {MAX_REASKS} re-asks").all()
    assert r.summary.errors == N and r.summary.verdicts == {"null": N}
    # nothing was cached or journaled: a rerun asks again
    j2 = ScriptedJudge()
    r2 = run(j2, tmp_path)
    assert j2.requests == N and r2.labels["verdict"].notna().all()


@pytest.mark.parametrize("reason,fragment", [("safety", "safety"), ("length", "truncated"), ("empty", "empty"), ("other", "did not finish")])
def test_unfinished_answers_are_null_without_reask(tmp_path, reason, fragment):
    # even when the text would parse, a truncated or blocked answer is not a label
    j = ScriptedJudge(script=lambda call, n: JudgeAnswer(text=GOOD if reason != "empty" else "", finish_reason=reason, usage=Usage(10, 5)))
    r = run(j, tmp_path)
    assert j.requests == N
    assert r.labels["verdict"].isna().all() and r.labels["error"].str.contains(fragment).all()
    assert (r.labels["finish_reason"] == reason).all() and r.labels["usage"].iloc[0]["input_tokens"] == 10


def test_provider_errors_are_null_rows_and_a_streak_aborts(tmp_path):
    calls = {"n": 0}

    def script(call, n):
        calls["n"] += 1
        if call.item["assertion_id"] == "a003":
            raise RuntimeError("bad request for this item only")
        return support_answer(call)

    r = run(ScriptedJudge(script=script), tmp_path)
    bad = r.labels.set_index("assertion_id").loc["a003"]
    assert pd.isna(bad["verdict"]) and "RuntimeError: bad request" in bad["error"]
    assert r.summary.errors == 1

    def always(call, n):
        raise PermissionError("401 invalid api key")

    with pytest.raises(MemjudgeError, match="requests in a row failed.*401 invalid api key"):
        run(ScriptedJudge(script=always), tmp_path, n=60, out=tmp_path / "dead")


def test_evidence_found(tmp_path):
    quotes = {"a000": "Posts of p0: I enjoy", "a001": "Posts   of\np0:", "a002": "I hate hobbies", "a004": ""}

    def script(call, n):
        q = quotes.get(call.item["assertion_id"], "")
        return JudgeAnswer(text=json.dumps({"verdict": "supported", "evidence": q, "rationale": ""}), finish_reason="stop")

    df = run(ScriptedJudge(script=script), tmp_path).labels.set_index("assertion_id")
    assert df.loc["a000", "evidence_found"] == True  # noqa: E712
    assert df.loc["a001", "evidence_found"] == True  # noqa: E712  (whitespace normalised)
    assert df.loc["a002", "evidence_found"] == False  # noqa: E712
    assert df.loc["a004", "evidence_found"] is None


def test_calls_are_ordered_by_persona(tmp_path):
    j = ScriptedJudge(JudgeConfig(spec="scripted:m1", concurrency=1))
    cands = candidates_frame(N).sample(frac=1.0, random_state=1)
    score_run(cands, sources_frame(N), j, out=tmp_path / "o", cache_dir=tmp_path / "c", progress=False, replicates=2)
    personas = [c.item["persona_id"] for c in j.calls]
    runs = [p for i, p in enumerate(personas) if i == 0 or personas[i - 1] != p]
    assert len(runs) == len(set(personas))  # each persona's calls are contiguous


def test_duplicate_prompts_are_asked_once(tmp_path):
    cands = candidates_frame(4)
    cands.loc[1, "text"] = cands.loc[2, "text"]
    cands.loc[1, ["persona_id", "category"]] = cands.loc[2, ["persona_id", "category"]].tolist()
    j = ScriptedJudge()
    r = score_run(cands, sources_frame(4), j, out=tmp_path / "o", cache_dir=tmp_path / "c", progress=False)
    assert j.requests == 3 and len(r.labels) == 4 and r.labels["verdict"].notna().all()


def test_dry_run_estimates_without_calling(tmp_path):
    j = ScriptedJudge(JudgeConfig(spec="scripted:m1", price_input_per_mtok=2.0, price_output_per_mtok=8.0))
    r = run(j, tmp_path, dry_run=True, replicates=2)
    s = r.summary
    assert j.requests == 0 and s.dry_run and s.calls == 2 * N and s.requested == 0
    assert s.estimated_input_tokens > 2 * N * 100
    assert s.estimated_cost_usd == pytest.approx((s.estimated_input_tokens * 2.0 + s.estimated_output_tokens * 8.0) / 1e6)
    assert not (tmp_path / "run").exists()
    run(ScriptedJudge(), tmp_path)  # answer replicate 0
    s = run(ScriptedJudge(), tmp_path, dry_run=True, replicates=2).summary
    assert s.resumed == N and s.calls == 2 * N


def test_cost_from_prices(tmp_path):
    j = ScriptedJudge(JudgeConfig(spec="scripted:m1", price_input_per_mtok=1.0, price_output_per_mtok=4.0))
    s = run(j, tmp_path).summary
    assert s.cost_usd == pytest.approx((s.tokens["input_tokens"] * 1.0 + s.tokens["output_tokens"] * 4.0) / 1e6)


def test_truncated_journal_line_is_tolerated(tmp_path):
    run(ScriptedJudge(), tmp_path)
    journal = tmp_path / "run" / "journal.jsonl"
    lines = journal.read_text().splitlines()
    journal.write_text("\n".join(lines[:-2]) + "\n" + lines[-2][: len(lines[-2]) // 2])  # a kill mid-write
    j = ScriptedJudge()
    r = run(j, tmp_path, use_cache=False)
    assert j.requests == 2 and len(r.labels) == N and r.labels["verdict"].notna().all()
    assert len(read_jsonl(journal)) == N  # compacted again


def test_dataframe_input_errors_name_the_row(tmp_path):
    cands = candidates_frame(4)
    cands.loc[2, "confidence"] = 1.5
    with pytest.raises(MemjudgeError, match=r"^<candidates DataFrame>:3: 'confidence' must be in \[0, 1\]"):
        score_run(cands, sources_frame(4), ScriptedJudge(), out=tmp_path / "o", progress=False)


def test_bad_arguments_exit_2_with_one_line(tmp_path, capsys):
    cand, src = write_inputs(tmp_path)
    base = ["score", str(cand), "--sources", str(src), "--dry-run"]
    cases = [
        (["--judge", "nosuch:model"], "unknown judge provider 'nosuch'"),
        (["--judge", "openai:"], "names no model"),
        (["--judge", "openai"], "PROVIDER:MODEL"),
        (["--judge", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--replicates", "0"], "at least 1"),
        (["--judge", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--concurrency", "0"], "at least 1"),
        (["--judge", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--rubric", "suport"], "unknown rubric 'suport'"),
        (["--judge", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--rpm", "0"], "rpm must be > 0"),
        (["--judge", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--facts", str(cand)], "coverage rubric"),
    ]
    # (a dry run calls nothing and needs no key: tests/test_cli.py checks that a real run asks for it)
    for extra, fragment in cases:
        code = memjudge_cli.main(base + extra)
        err = capsys.readouterr().err
        assert code == 2, (extra, err)
        assert len(err.splitlines()) == 1 and fragment in err and "Traceback" not in err, (extra, err)
    with pytest.raises(UsageError):
        score_run(str(cand), str(src), ScriptedJudge(), replicates=0)


def test_rate_limiter_spacing_and_token_budget():
    import asyncio

    now = [0.0]
    slept = []

    async def sleep(s):
        slept.append(s)
        now[0] += s

    async def go(lim, n, tokens):
        starts = []
        for _ in range(n):
            await lim.acquire(tokens)
            starts.append(now[0])
        return starts

    starts = asyncio.run(go(RateLimiter(rpm=120, clock=lambda: now[0], sleep=sleep), 5, 0))
    assert starts == pytest.approx([0.0, 0.5, 1.0, 1.5, 2.0])
    now[0] = 0.0
    # 600 tokens a minute, 200 per call: one every 20 s from the first on (no full bucket to burst)
    starts = asyncio.run(go(RateLimiter(tpm=600, clock=lambda: now[0], sleep=sleep), 5, 200))
    assert starts == pytest.approx([0.0, 20.0, 40.0, 60.0, 80.0])
    now[0] = 0.0
    # a request over the whole budget goes out, and the next one waits until it is paid back
    starts = asyncio.run(go(RateLimiter(tpm=600, clock=lambda: now[0], sleep=sleep), 2, 900))
    assert starts == pytest.approx([0.0, 90.0])


def test_judges_file_supplies_settings_and_flags_override(tmp_path, capsys):
    cand, src = write_inputs(tmp_path)
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "openai:gpt-4o-mini"\nbase_url = "http://127.0.0.1:9/v1"\nconcurrency = 3\n'
                     'price_input_per_mtok = 0.15\nprice_output_per_mtok = 0.6\n')
    code = memjudge_cli.main(["score", str(cand), "--sources", str(src), "--judge", "openai:gpt-4o-mini", "--judges-file", str(panel), "--dry-run", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["estimated_cost_usd"] == pytest.approx((out["estimated_input_tokens"] * 0.15 + out["estimated_output_tokens"] * 0.6) / 1e6)
    code = memjudge_cli.main(["score", str(cand), "--sources", str(src), "--judge", "openai:gpt-4o-mini", "--judges-file", str(panel), "--dry-run"])
    text = capsys.readouterr().out
    assert code == 0 and f"dry run: {N} calls" in text and "estimated cost: $" in text
    from memjudge.scoring.plan import resolve_judge

    judge, _ = resolve_judge("openai:gpt-4o-mini", judges_file=panel, concurrency=9)
    assert judge.config.concurrency == 9 and judge.config.price_input_per_mtok == 0.15


# ---------------------------------------------------------------------------------------
# End to end: the real providers against the fake server


def score_cli(cli, tmp_path, server, *extra, spec="openai:gpt-4o-mini", cand=None, src=None, out=None):
    if cand is None:
        cand, src = write_inputs(tmp_path)
    base = server.openai_base_url if spec.startswith("openai") else server.url
    return cli("score", cand, "--sources", src, "--judge", spec, "--base-url", base, "--out", out or tmp_path / "run",
               "--cache-dir", tmp_path / "cache", "--no-progress", *extra)


def test_cli_rerun_makes_zero_requests(cli, tmp_path, fake_server):
    r = score_cli(cli, tmp_path, fake_server, "--replicates", "2", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["requested"] == 2 * N and fake_server.count(route="openai") == 2 * N
    fake_server.reset()
    r = score_cli(cli, tmp_path, fake_server, "--replicates", "2", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["requested"] == 0 and fake_server.count() == 0
    r = score_cli(cli, tmp_path, fake_server, "--replicates", "2", "--json", out=tmp_path / "elsewhere")
    assert json.loads(r.stdout)["cached"] == 2 * N and fake_server.count() == 0
    labels = read_jsonl(tmp_path / "run" / "labels.jsonl")
    assert len(labels) == 2 * N and all(x["cached"] for x in labels)
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["judge"]["spec"] == "openai:gpt-4o-mini" and config["judge"]["base_url"] == fake_server.openai_base_url
    assert config["rubric"]["id"] == labels[0]["rubric"] and config["replicates"] == 2
    assert config["inputs"]["candidates"]["sha256"] and config["command"]["judge"] == "openai:gpt-4o-mini"


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "gemini:gemini-2.5-flash"])
def test_provider_faults_become_reasks_or_nulls(cli, tmp_path, fake_server, spec):
    cand, src = write_inputs(tmp_path, n=8)
    texts = candidates_frame(8)["text"].tolist()
    # each fault aimed at one item through its assertion text
    fake_server.enqueue(Fault.malformed_answer(), times=1, contains=texts[1] + "\n")
    fake_server.enqueue(Fault.malformed_answer(), times=None, contains=texts[2] + "\n")
    fake_server.enqueue(Fault.safety(), times=None, contains=texts[3] + "\n")
    fake_server.enqueue(Fault.truncated(), times=None, contains=texts[4] + "\n")
    fake_server.enqueue(Fault.empty(), times=None, contains=texts[5] + "\n")
    fake_server.enqueue(Fault.rate_limit(0.01), times=1, contains=texts[6] + "\n")
    # One response format throughout: under `auto` two non-JSON answers in a row (whichever
    # items they came from) switch formats, which re-asks do not count (tests/test_providers.py).
    fmt = ("--response-format", "json_schema")
    r = score_cli(cli, tmp_path, fake_server, "--json", *fmt, spec=spec, cand=cand, src=src)
    assert r.returncode == 0, r.stderr
    rows = {x["assertion_id"]: x for x in read_jsonl(tmp_path / "run" / "labels.jsonl")}
    assert rows["a001"]["verdict"] == "supported" and rows["a001"]["error"] is None
    assert rows["a002"]["verdict"] is None and "re-asks" in rows["a002"]["error"]
    assert rows["a003"]["verdict"] is None and "safety" in rows["a003"]["error"]
    assert rows["a004"]["verdict"] is None and "truncated" in rows["a004"]["error"]
    assert rows["a005"]["verdict"] is None and "empty" in rows["a005"]["error"]
    assert rows["a006"]["verdict"] == "unsupported" and rows["a006"]["error"] is None  # retried after the 429
    s = json.loads(r.stdout)
    assert s["errors"] == 4 and s["reasks"] == 1 + MAX_REASKS and s["retries"] == 1
    # a rerun asks again exactly the four without a valid answer
    fake_server.reset()
    r = score_cli(cli, tmp_path, fake_server, "--json", *fmt, spec=spec, cand=cand, src=src)
    assert json.loads(r.stdout)["requested"] == 4 and r.returncode == 0


def test_python_api_returns_the_cli_frame(cli, tmp_path, fake_server):
    cand, src = write_inputs(tmp_path)
    df = score(str(cand), str(src), judge_config("openai:gpt-4o-mini", base_url=fake_server.openai_base_url),
               out=tmp_path / "api", cache_dir=tmp_path / "c1", progress=False, replicates=2)
    from memjudge.formats import frame_records

    api_rows = frame_records(df)
    assert api_rows == read_jsonl(tmp_path / "api" / "labels.jsonl")
    r = score_cli(cli, tmp_path, fake_server, "--replicates", "2", cand=cand, src=src, out=tmp_path / "cli")
    assert r.returncode == 0, r.stderr
    cli_rows = read_jsonl(tmp_path / "cli" / "labels.jsonl")
    strip = lambda rows: [{k: v for k, v in x.items() if k != "latency_s"} for x in rows]  # noqa: E731
    assert strip(api_rows) == strip(cli_rows)
    assert "wrote" in r.stdout and "labels.jsonl" in r.stdout


def test_parquet_output(cli, tmp_path, fake_server):
    r = score_cli(cli, tmp_path, fake_server, "--parquet")
    assert r.returncode == 0, r.stderr
    pq = pd.read_parquet(tmp_path / "run" / "labels.parquet")
    assert pq["assertion_id"].tolist() == [x["assertion_id"] for x in read_jsonl(tmp_path / "run" / "labels.jsonl")]


def test_default_out_dir(cli, tmp_path, fake_server):
    cand, src = write_inputs(tmp_path)
    r = cli("score", cand, "--sources", src, "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url, "--no-progress", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "runs" / "openai_gpt-4o-mini-support" / "labels.jsonl").is_file()


def _popen_score(args, env_extra=None):
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "memjudge", "score", *map(str, args)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_sigkill_mid_run_then_resume(cli, tmp_path, fake_server):
    n = 80
    cand, src = write_inputs(tmp_path, n=n)
    fake_server.latency_s = 0.1
    out, cache = tmp_path / "run", tmp_path / "cache"
    args = [cand, "--sources", src, "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url,
            "--out", out, "--cache-dir", cache, "--concurrency", "4", "--no-progress"]
    proc = _popen_score(args)
    journal = out / "journal.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count("\n") >= 12:
            break
        if proc.poll() is not None:
            pytest.fail(f"finished before it could be killed: {proc.stderr.read()}")
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert not (out / "labels.jsonl").exists()
    answered = {json.loads(line)["key"] for line in journal.read_text().splitlines() if line.strip()}
    assert 12 <= len(answered) < n
    with open(journal, "a") as f:  # what a kill in the middle of a write leaves
        f.write('{"key": "0123", "answer": {"verd')
    first_prompts = {r.user for r in fake_server.requests}

    fake_server.reset()
    fake_server.latency_s = 0.0
    r = cli("score", *args, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["requested"] == n - len(answered)
    assert fake_server.count() == n - len(answered)  # only the missing items were asked
    second_prompts = [q.user for q in fake_server.requests]
    assert len(set(second_prompts)) == len(second_prompts)
    labels = read_jsonl(out / "labels.jsonl")
    assert len(labels) == n and len({x["assertion_id"] for x in labels}) == n
    assert all(x["verdict"] in ("supported", "unsupported") for x in labels)
    assert sum(x["cached"] for x in labels) == len(answered)
    assert len(first_prompts) >= len(answered)


# ---------------------------------------------------------------------------------------
# coverage


def coverage_answer_fn(mode="ok"):
    """Answer coverage prompts: each fact is covered by the assertions whose text contains it."""

    def block_lines(user, name):
        m = re.search(rf"<<<{name}\n(.*?)\n?{name}>>>", user, re.DOTALL)
        return [(e["id"], e["text"]) for e in map(json.loads, m.group(1).split("\n"))] if m else []

    def fn(server, req):
        user = req.user or ""
        assertions = block_lines(user, "ASSERTIONS")
        facts = block_lines(user, "FACTS") or [(f"F{i + 1}", t.split(" [")[0]) for i, (_, t) in enumerate(assertions[:2])]
        out = [{"fact_id": fid, "fact": text, "covered_by": [aid for aid, at in assertions if text in at]} for fid, text in facts]
        if mode == "unknown_id":
            out[0]["covered_by"].append("a999")
        return json.dumps({"facts": out})

    return fn


def test_coverage_end_to_end(cli, tmp_path, fake_server):
    cand, src = write_inputs(tmp_path, n=8)
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps(x) + "\n" for x in [
        {"persona_id": "p0", "fact_id": "f1", "text": "hobby number 1"},
        {"persona_id": "p0", "fact_id": "f2", "text": "skydiving"},
        {"persona_id": "p1", "fact_id": "f3", "text": "hobby number 5"},
    ]))
    fake_server.answer_fn = coverage_answer_fn()
    r = score_cli(cli, tmp_path, fake_server, "--rubric", "coverage", "--facts", facts, "--replicates", "2", "--json", cand=cand, src=src)
    assert r.returncode == 0, r.stderr
    rows = read_jsonl(tmp_path / "run" / "coverage.jsonl")
    assert len(rows) == 3 * 2 and fake_server.count() == 2 * 2
    got = {(x["fact_id"], x["replicate"]): x["covered_by"] for x in rows}
    assert got[("f1", 0)] == ["a001"] and got[("f2", 1)] == [] and got[("f3", 0)] == ["a005"]
    assert rows[0]["rubric"].startswith("coverage@") and rows[0]["fact_text"] == "hobby number 1"
    from memjudge.formats import read_coverage

    assert len(read_coverage(tmp_path / "run" / "coverage.jsonl")) == 6

    # without reference facts the judge lists them
    fake_server.reset()
    r = score_cli(cli, tmp_path, fake_server, "--rubric", "coverage", cand=cand, src=src, out=tmp_path / "enum")
    assert r.returncode == 0, r.stderr
    rows = read_jsonl(tmp_path / "enum" / "coverage.jsonl")
    assert {x["fact_id"] for x in rows} == {"F1", "F2"} and all(x["covered_by"] for x in rows)

    # an answer naming an assertion that does not exist is re-asked, then null for every fact
    fake_server.reset()
    fake_server.answer_fn = coverage_answer_fn("unknown_id")
    r = score_cli(cli, tmp_path, fake_server, "--rubric", "coverage", "--facts", facts, "--cache-dir", tmp_path / "fresh",
                  cand=cand, src=src, out=tmp_path / "bad")
    assert r.returncode == 0, r.stderr
    rows = read_jsonl(tmp_path / "bad" / "coverage.jsonl")
    assert fake_server.count() == 2 * (1 + MAX_REASKS)
    assert all(x["covered_by"] is None and "unknown assertion ids" in x["error"] for x in rows) and len(rows) == 3


def test_progress_bar_on_stderr(tmp_path, capsys):
    j = ScriptedJudge(JudgeConfig(spec="scripted:m1", price_input_per_mtok=1.0, price_output_per_mtok=1.0))
    score_run(candidates_frame(N), sources_frame(N), j, out=tmp_path / "o", cache_dir=tmp_path / "c", progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{N}/{N}" in captured.err and "tok" in captured.err and "$" in captured.err and "/s" in captured.err


def test_works_inside_a_running_event_loop(tmp_path):
    """Notebooks run an event loop already: the engine then uses its own thread."""
    import asyncio

    async def notebook_cell():
        return score(candidates_frame(N), sources_frame(N), ScriptedJudge(), out=tmp_path / "o", cache_dir=tmp_path / "c", progress=False)

    df = asyncio.run(notebook_cell())
    assert len(df) == N and df["verdict"].notna().all()


def test_rate_limits_apply_to_every_request_including_reasks(tmp_path, monkeypatch):
    seen = []

    async def acquire(self, tokens=0):
        seen.append(tokens)

    monkeypatch.setattr(RateLimiter, "acquire", acquire)

    def script(call, n):
        return JudgeAnswer(text="not json", finish_reason="stop") if n == 0 else support_answer(call)

    j = ScriptedJudge(JudgeConfig(spec="scripted:m1", rpm=600, tpm=1e6), script=script)
    run(j, tmp_path)
    assert len(seen) == j.requests == 2 * N and all(t > 100 for t in seen)
    seen.clear()
    run(ScriptedJudge(), tmp_path, out=tmp_path / "unlimited", use_cache=False)
    assert seen == []  # no limits configured: no limiter in the way


def test_dataframe_inputs_with_timestamps_and_missing_values(tmp_path):
    cands = candidates_frame(4)
    cands["seen_at"] = pd.to_datetime(["2024-01-01", None, "2024-03-01", "2024-04-01"])
    cands.loc[1, "confidence"] = float("nan")  # missing, allowed when scoring
    df = score(cands, sources_frame(4), ScriptedJudge(), out=tmp_path / "o", cache_dir=tmp_path / "c", progress=False)
    assert [None if pd.isna(v) else v for v in df["seen_at"]] == ["2024-01-01T00:00:00", None, "2024-03-01T00:00:00", "2024-04-01T00:00:00"]
    assert df["verdict"].notna().all()


def test_quiet_prints_only_the_result_and_verbose_logs_each_retry(cli, tmp_path, fake_server):
    fake_server.enqueue(Fault.unavailable(0.01), times=2)
    r = score_cli(cli, tmp_path, fake_server, "--verbose", out=tmp_path / "v")
    assert r.returncode == 0, r.stderr
    retries = [line for line in r.stderr.splitlines() if "retrying in" in line]
    assert len(retries) == 2 and all("503" in line for line in retries)
    r = score_cli(cli, tmp_path, fake_server, "--quiet", "--cache-dir", tmp_path / "other-cache", out=tmp_path / "q")
    assert r.returncode == 0 and r.stderr == ""
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"wrote {tmp_path / 'q' / 'labels.jsonl'}: {N} rows")
    # a rerun that needs no request says where every answer came from
    r = score_cli(cli, tmp_path, fake_server, out=tmp_path / "q")
    assert f"all {N} answers from the run journal" in r.stdout


def test_limit_scores_the_first_personas_and_the_full_run_reuses_them(cli, tmp_path, fake_server):
    cand, src = write_inputs(tmp_path, n=12, per_persona=4)  # 3 personas
    r = score_cli(cli, tmp_path, fake_server, "--limit", "2", "--json", cand=cand, src=src)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    first_two = list(dict.fromkeys(candidates_frame(12, 4)["persona_id"]))[:2]
    labels = read_jsonl(tmp_path / "run" / "labels.jsonl")
    assert s["rows"] == 8 and {x["persona_id"] for x in labels} == set(first_two)
    assert fake_server.count(route="openai") == 8
    fake_server.reset()
    r = score_cli(cli, tmp_path, fake_server, "--json", cand=cand, src=src)
    assert json.loads(r.stdout)["requested"] == 4 and fake_server.count() == 4
    assert score_cli(cli, tmp_path, fake_server, "--limit", "0", cand=cand, src=src).returncode == 2


# ---------------------------------------------------------------------------------------
# durability (issue 12)


def test_journal_answers_reach_the_cache_on_every_run_and_survive_a_rewrite(tmp_path, fake_server):
    """Item 1: a journal whose answers never reached the cache (a kill right after the last
    answer) is copied into the cache even when no work is pending, before a run with other
    settings rewrites that journal; without a cache the rewrite keeps the other answers."""
    def go(out, cache, temperature=None, **kw):
        judge = judge_config("openai:gpt-4o-mini", base_url=fake_server.openai_base_url, temperature=temperature)
        return score_run(candidates_frame(N), sources_frame(N), judge, out=tmp_path / out,
                         cache_dir=tmp_path / cache if cache else None, progress=False, **with_run_options(kw))

    go("run", "cache-1")
    fake_server.reset()
    r = go("run", "cache-2")  # nothing pending: every answer comes from the journal
    assert r.summary.resumed == N and fake_server.count() == 0
    go("run", "cache-2", temperature=0.5)  # other settings, same folder: the journal is rewritten
    assert fake_server.count() == N
    fake_server.reset()
    r = go("elsewhere", "cache-2")
    assert fake_server.count() == 0 and r.summary.cached == N

    # no cache at all: a rewrite keeps the journal's other answers
    go("nocache", None, use_cache=False)
    go("nocache", None, use_cache=False, temperature=0.7)
    fake_server.reset()
    r = go("nocache", None, use_cache=False)
    assert fake_server.count() == 0 and r.summary.resumed == N


def _window_loads(times: list[float], weights: list[float], window_s: float) -> list[tuple[float, float]]:
    """For each request (sorted by arrival), what the closed window [t, t + window_s] that
    starts at its arrival holds: (total weight, largest single weight)."""
    pairs = sorted(zip(times, weights))
    out = []
    for i, (t, _) in enumerate(pairs):
        inside = [w for u, w in pairs[i:] if u <= t + window_s]
        out.append((sum(inside), max(inside)))
    return out


def test_rate_limits_hold_at_the_server_with_retries_and_reasks(tmp_path, fake_server, monkeypatch):
    """Item 4: every request, retries after a 429 and re-asks included, goes through the
    limiter, and the token budget does not start full: counted at the fake server, no window
    holds more than the limit plus one request. Windows of 2 s stand in for minutes."""
    import memjudge.scoring.ratelimit
    from memjudge.judges.rubrics import load_rubric
    from memjudge.scoring.cost import estimate_tokens

    window = 2.0
    monkeypatch.setattr(memjudge.scoring.ratelimit, "WINDOW_S", window)
    n = 6
    texts = candidates_frame(n)["text"].tolist()

    def go(out, **limits):
        judge = JudgeConfig(spec="openai:gpt-4o-mini", base_url=fake_server.openai_base_url, retry_initial_s=0.01, **limits)
        return score_run(candidates_frame(n), sources_frame(n), judge, out=tmp_path / out, cache_dir=tmp_path / out / "cache", progress=False)

    # requests per window: 3 items rate-limited once (Retry-After 10 ms), 1 re-asked once
    for t in texts[:3]:
        fake_server.enqueue(Fault.rate_limit(0.01), times=1, contains=t + "\n")
    fake_server.enqueue(Fault.malformed_answer(), times=1, contains=texts[3] + "\n")
    # per 2-second window: one start every 0.5 s, ample next to the ~0.1 s between a start
    # and the server's clock (what makes "plus one request" hold at the server too)
    rpm = 4
    s = go("rpm", rpm=rpm).summary
    assert s.errors == 0 and s.retries == 3 and s.reasks == 1
    times = [r.time for r in fake_server.requests]
    assert len(times) == n + 3 + 1
    worst = max(count for count, _ in _window_loads(times, [1] * len(times), window))
    assert worst <= rpm + 1, worst

    # tokens per window, from the first request on (no full bucket at the start)
    fake_server.reset()
    expected_out = load_rubric("support").expected_output_tokens
    per_request = estimate_tokens(load_rubric("support").render_support(source="x", assertion="y").system) + expected_out
    tpm = 3 * per_request  # about three requests' worth per window
    s = go("tpm", tpm=tpm).summary
    assert s.errors == 0
    reqs = fake_server.requests
    tokens = [estimate_tokens(r.system + r.user) + expected_out for r in reqs]  # what the limiter charges
    for total, largest in _window_loads([r.time for r in reqs], tokens, window):
        assert total - largest <= tpm, (total, largest, tpm)


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "gemini:gemini-2.5-flash"])
def test_timeout_bounds_the_whole_request_and_a_trickle_is_retried(tmp_path, fake_server, spec):
    """Item 5: a body trickled one byte every 50 ms never trips a read timeout, but it is past
    `timeout_s` as a whole: a timeout, retried like one; and a row error when it persists."""
    n = 4
    texts = candidates_frame(n)["text"].tolist()
    fake_server.enqueue(Fault.trickle(0.05), times=1, contains=texts[0] + "\n")  # then a normal answer
    fake_server.enqueue(Fault.trickle(0.05), times=None, contains=texts[1] + "\n")
    base = fake_server.openai_base_url if spec.startswith("openai") else fake_server.url
    judge = JudgeConfig(spec=spec, base_url=base, timeout_s=1.0, max_attempts=2, retry_initial_s=0.01)
    r = score_run(candidates_frame(n), sources_frame(n), judge, out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    rows = r.labels.set_index("assertion_id")
    assert rows.loc["a000", "verdict"] == "unsupported" and rows.loc["a000", "error"] is None  # the retry answered
    assert rows.loc["a001", "verdict"] is None and "timeout_s = 1 s" in rows.loc["a001", "error"]
    assert r.summary.retries == 2 and fake_server.count(fault="trickle") == 3 and fake_server.count() == n + 2


def test_retry_after_beyond_retry_max_is_honoured_up_to_its_own_maximum(tmp_path, fake_server):
    """Item 6: a Retry-After longer than retry_max_s is waited in full, not cut to
    retry_max_s; one longer than retry_after_max_s is not retried early but reported."""
    n = 3
    texts = candidates_frame(n)["text"].tolist()
    fake_server.enqueue(Fault.rate_limit(0.6), times=1, contains=texts[0] + "\n")
    fake_server.enqueue(Fault.rate_limit(30), times=None, contains=texts[1] + "\n")
    judge = JudgeConfig(spec="openai:gpt-4o-mini", base_url=fake_server.openai_base_url, retry_initial_s=0.01,
                        retry_max_s=0.05, retry_after_max_s=5)
    r = score_run(candidates_frame(n), sources_frame(n), judge, out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    rows = r.labels.set_index("assertion_id")
    first, again = [q.time for q in fake_server.requests if texts[0] + "\n" in q.user]
    assert again - first >= 0.6  # the server's delay, not retry_max_s (asyncio never wakes early)
    assert rows.loc["a000", "error"] is None and rows.loc["a000", "verdict"] == "unsupported"
    assert sum(texts[1] + "\n" in q.user for q in fake_server.requests) == 1  # not hammered early
    assert rows.loc["a001", "verdict"] is None
    assert "asked to wait 30 s" in rows.loc["a001", "error"] and "retry_after_max_s = 5 s" in rows.loc["a001", "error"]


def test_rubric_name_cannot_steer_the_default_output_folder(tmp_path, fake_server, monkeypatch, capsys):
    """Item 8: a rubric's name becomes part of one folder name under runs/, never a path."""
    from memjudge.judges.rubrics import builtin_names  # noqa: F401  (the built-in support text is the base)

    cand, src = write_inputs(tmp_path, n=4)
    text = (ROOT / "rubrics" / "support.toml").read_text(encoding="utf-8").replace('name = "support"', 'name = "../../../escaped"')
    rubric = tmp_path / "evil.toml"
    rubric.write_text(text, encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    code = memjudge_cli.main(["score", str(cand), "--sources", str(src), "--judge", "openai:gpt-4o-mini", "--base-url",
                              fake_server.openai_base_url, "--rubric", str(rubric), "--cache-dir", str(tmp_path / "cache"), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    written = [p for p in tmp_path.rglob("labels.jsonl")]
    assert len(written) == 1 and written[0].parent.parent == work / "runs", written
    assert not (tmp_path / "escaped").exists() and not (work / "escaped").exists()


@pytest.mark.parametrize("planted", ["labels.jsonl.tmp", "journal.jsonl", "journal.jsonl.tmp", "config.json.tmp",
                                     "summary.json.tmp", "labels.parquet.tmp"])
def test_a_planted_symlink_in_the_run_folder_is_never_followed(tmp_path, fake_server, capsys, planted):
    """Item 8: a link someone planted at a file memjudge writes in a run folder makes the run
    stop with one line, before any request, and the file it points at is left alone."""
    cand, src = write_inputs(tmp_path, n=4)
    out = tmp_path / "run"
    out.mkdir()
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")
    (out / planted).symlink_to(victim)
    code = memjudge_cli.main(["score", str(cand), "--sources", str(src), "--judge", "openai:gpt-4o-mini", "--base-url",
                              fake_server.openai_base_url, "--out", str(out), "--cache-dir", str(tmp_path / "cache"),
                              "--no-progress", "--parquet"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and str(out / planted) in err and "symbolic link" in err, err
    assert victim.read_text() == "precious\n" and fake_server.count() == 0


def test_a_link_planted_during_a_run_is_not_followed_either(tmp_path, monkeypatch):
    """Item 8: the check is repeated where the file is opened (O_NOFOLLOW), for a link planted
    after the run began: here at labels.jsonl.tmp while the judge is answering."""
    out = tmp_path / "run"
    victim = tmp_path / "precious.txt"
    victim.write_text("precious\n")

    def script(call, n):
        if not (out / "labels.jsonl.tmp").is_symlink():
            (out / "labels.jsonl.tmp").symlink_to(victim)
        return support_answer(call)

    with pytest.raises(UsageError, match="symbolic link"):
        run(ScriptedJudge(script=script), tmp_path, n=4)
    assert victim.read_text() == "precious\n"
    j = ScriptedJudge()
    (out / "labels.jsonl.tmp").unlink()
    r = run(j, tmp_path, n=4)  # once removed, the answers were all kept: nothing asked again
    assert j.requests == 0 and r.summary.resumed == 4


@pytest.mark.parametrize("spec", ["openai:gpt-4o-mini", "gemini:gemini-2.5-flash"])
def test_a_200_whose_body_is_not_the_providers_format_is_retried_then_a_clear_error(tmp_path, fake_server, spec):
    """Item 9: HTTP 200 with a body that is not the provider's (JSON of something else, or
    no JSON at all) is a transient fault, retried a bounded number of times; a row that never
    gets a real response says what came back, not an internal AttributeError."""
    n = 4
    texts = candidates_frame(n)["text"].tolist()
    fake_server.enqueue(Fault.foreign_body(), times=1, contains=texts[0] + "\n")
    fake_server.enqueue(Fault.malformed_body(), times=1, contains=texts[1] + "\n")
    fake_server.enqueue(Fault.foreign_body(), times=None, contains=texts[2] + "\n")
    base = fake_server.openai_base_url if spec.startswith("openai") else fake_server.url
    judge = JudgeConfig(spec=spec, base_url=base, max_attempts=3, retry_initial_s=0.01)
    r = score_run(candidates_frame(n), sources_frame(n), judge, out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False)
    rows = r.labels.set_index("assertion_id")
    assert rows.loc["a000", "verdict"] == "unsupported" and rows.loc["a001", "verdict"] == "supported"
    error = rows.loc["a002", "error"]
    assert rows.loc["a002", "verdict"] is None and "MalformedResponse" in error and "HTTP 200" in error, error
    assert "AttributeError" not in error and "TypeError" not in error
    assert sum(texts[2] + "\n" in q.user for q in fake_server.requests) == 3  # bounded: max_attempts
    assert r.summary.retries == 1 + 1 + 2 and r.summary.errors == 1


def test_sigkill_at_random_moments_loses_no_answer(tmp_path, fake_server):
    """Done-when of issue 12: SIGKILL `memjudge score` at random moments — during start-up,
    mid-run, right after the last answer, while outputs are written — sometimes run other
    settings into the same folder (which rewrites its journal), then finish with the same
    command: the labels are those of a clean run, no answered item is asked again, the cache
    holds every answer, and a run into any other folder makes zero requests (counted at the
    fake server)."""
    import multiprocessing
    import random

    import kill_target
    from memjudge.scoring.cache import AnswerCache

    n = 12
    cand, src = write_inputs(tmp_path, n=n)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(kill_target.PRELOAD)
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    fake_server.latency_s = 0.05

    def start(out, cache, *extra):
        argv = ["score", str(cand), "--sources", str(src), "--judge", "openai:gpt-4o-mini", "--base-url", fake_server.openai_base_url,
                "--out", str(out), "--cache-dir", str(cache), "--concurrency", "4", "--no-progress", *extra]
        p = ctx.Process(target=kill_target.score, args=(argv, str(tmp_path / "children.log")))
        p.start()
        return p

    def finish(out, cache, *extra):
        p = start(out, cache, *extra)
        p.join(120)
        assert p.exitcode == 0, (seed, (tmp_path / "children.log").read_text()[-2000:])

    def journal_lines(out):
        try:
            return (out / "journal.jsonl").read_bytes().count(b"\n")
        except OSError:
            return 0

    def answered(out):
        keys = set()
        for line in (out / "journal.jsonl").read_bytes().split(b"\n") if (out / "journal.jsonl").exists() else []:
            try:
                keys.add(json.loads(line)["key"])
            except ValueError:
                pass  # the line a kill cut short
        return keys

    def comparable(out):
        rows = read_jsonl(out / "labels.jsonl")
        return [{k: v for k, v in r.items() if k not in ("cached", "latency_s")} for r in rows]

    finish(tmp_path / "clean", tmp_path / "clean-cache")
    clean, clean_keys = comparable(tmp_path / "clean"), answered(tmp_path / "clean")
    assert len(clean) == n == len(clean_keys) and all(r["verdict"] in ("supported", "unsupported") for r in clean)

    kills, after_last, rewrites, episodes = 0, 0, 0, 0
    while (kills < 24 or after_last < 4) and episodes < 40:
        episodes += 1
        out, cache = tmp_path / f"run{episodes}", tmp_path / f"cache{episodes}"
        for _ in range(rng.randint(1, 3)):
            before = journal_lines(out)
            p = start(out, cache)
            trigger = rng.choice(["time", "journal", "last"])
            deadline = time.monotonic() + 30
            if trigger == "time":
                time.sleep(rng.uniform(0.0, 0.6))
            else:
                target = n if trigger == "last" else rng.randint(0, n)
                while journal_lines(out) < target and p.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.002)
                if trigger == "journal":
                    time.sleep(rng.uniform(0.0, 0.03))
            try:
                os.kill(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # it had ended, and its parent (the forkserver) reaped it
            p.join(30)
            if p.exitcode == -signal.SIGKILL:
                kills += 1
                after_last += trigger == "last" and before < n <= journal_lines(out)
        known = answered(out)
        if rng.random() < 0.3:  # other settings into the same folder: its journal is rewritten
            finish(out, cache, "--temperature", "0.5")
            rewrites += 1
        # a request the last killed process had sent may still be in the server's hands
        assert fake_server.wait_idle(), (seed, episodes)
        fake_server.reset()
        finish(out, cache)  # the same command, to the end
        assert fake_server.count() <= n - len(known), (seed, episodes)  # nothing answered is paid for twice
        assert comparable(out) == clean, seed
        with AnswerCache(cache) as c:
            assert all(k in c for k in clean_keys), (seed, episodes)
        fake_server.reset()
        finish(tmp_path / f"elsewhere{episodes}", cache)
        assert fake_server.count() == 0, (seed, episodes)
        assert comparable(tmp_path / f"elsewhere{episodes}") == clean
    assert kills >= 20 and after_last >= 4, (seed, kills, after_last, episodes)
    print(f"kill loop: {kills} SIGKILLs ({after_last} right after the last answer), {rewrites} journal rewrites by other "
          f"settings, {episodes} episodes, seed {seed}")


# one judge settings object (issue 36)


def test_former_keywords_warn_and_score_as_the_new_form(tmp_path, fake_server):
    import inspect
    import warnings

    from memjudge.scoring.engine import RunOptions

    named = [p for p in inspect.signature(score_run).parameters.values() if p.kind is not p.VAR_KEYWORD]
    assert len(named) <= 12
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "openai:gpt-4o-mini"\nconcurrency = 3\ntemperature = 0.5\n')
    judge = judge_config("openai:gpt-4o-mini", panel, base_url=fake_server.openai_base_url, concurrency=2)
    assert (judge.concurrency, judge.temperature, judge.judges_file) == (2, 0.5, str(panel))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = score_run(candidates_frame(N), sources_frame(N), judge, out=tmp_path / "new", cache_dir=tmp_path / "c1",
                        progress=False, run=RunOptions(parquet=True))
    with pytest.warns(DeprecationWarning) as caught:
        old = score_run(candidates_frame(N), sources_frame(N), "openai:gpt-4o-mini", judges_file=panel,
                        base_url=fake_server.openai_base_url, concurrency=2, parquet=True, out=tmp_path / "old",
                        cache_dir=tmp_path / "c2", progress=False)
    messages = [str(w.message) for w in caught]
    assert any("run=RunOptions(parquet=...)" in m for m in messages)
    assert any("judge_config(spec, judges_file=..., base_url=..., concurrency=...)" in m for m in messages)
    assert old.labels.drop(columns=["latency_s"]).equals(new.labels.drop(columns=["latency_s"]))
    configs = [json.loads((tmp_path / d / "config.json").read_text()) for d in ("new", "old")]
    assert configs[0]["judge"]["config"] == configs[1]["judge"]["config"]
    assert configs[0]["judges_file"] == configs[1]["judges_file"] == str(panel)
    assert (tmp_path / "old" / "labels.parquet").is_file() and (tmp_path / "new" / "labels.parquet").is_file()
    with pytest.raises(TypeError, match="unexpected keyword argument 'concurency'"):
        score_run(candidates_frame(N), sources_frame(N), judge, concurency=2)
    with pytest.raises(UsageError, match="concurrency must be an integer >= 1"):
        judge_config("openai:gpt-4o-mini", concurrency=0)


def test_the_label_frame_is_pandas_reading_of_the_rows():
    """make_rows builds the labels frame column by column (text as it is, the rest inferred by
    pandas); the frame must be what `pd.DataFrame(rows)` with text as objects gives, dtype for
    dtype, for rows of every kind: null answers, scores and latencies missing or not, extra
    columns of numbers, mixed values, NaN, lists, and rows of different shapes."""
    import math

    from memjudge import formats as io
    from memjudge.scoring.outputs import EXTRA_LABEL_COLUMNS, rows_frame

    front = io.LABEL_COLUMNS + EXTRA_LABEL_COLUMNS

    def reference(rows):
        df = pd.DataFrame(rows)
        df = df[[c for c in front if c in df.columns] + [c for c in df.columns if c not in front]]
        return io.text_as_objects(df)

    def row(i, **kw):
        r = {"assertion_id": f"a{i}", "persona_id": "p", "category": "hobby", "judge": "openai:m", "rubric": "support@x",
             "replicate": i % 2, "verdict": ["supported", "unsupported", None][i % 3], "judge_score": None if i % 2 else 0.5 * i,
             "evidence": None if i % 3 == 2 else "quote", "evidence_found": [True, False, None][i % 3], "rationale": "r",
             "error": "boom" if i % 3 == 2 else None, "cached": i % 2 == 0, "usage": {"input_tokens": i}, "latency_s": None if i % 4 else 0.1,
             "finish_reason": "stop", "model_version": None, "simulated": False}
        r.update(kw)
        return r

    cases = [
        [row(i) for i in range(7)],
        [row(i, judge_score=None, latency_s=None, evidence_found=None) for i in range(3)],
        [row(i, batch=f"b{i}", n=i, x=1.5 if i % 2 else None, mixed=[1, "one", None][i % 3], tags=["a", i]) for i in range(6)],
        [row(i, t=["s", math.nan][i % 2], ints=[1, None][i % 2]) for i in range(4)],
        [row(0), {**row(1), "extra": 1}],  # different shapes
        [row(0, verdict=None, evidence=None, rationale=None, model_version=None)],
    ]
    for rows in cases:
        got, want = rows_frame(rows, front), reference(rows)
        pd.testing.assert_frame_equal(got, want, check_dtype=True)
        for c in got.columns:  # None stays None (not NaN) in text columns
            assert [v is None for v in got[c]] == [v is None for v in want[c]], c
    assert list(rows_frame([], front).columns) == front


def test_load_journal_reads_each_line_as_its_own_answer(tmp_path):
    """The journal is parsed as one JSON array when it can be; what it returns must be what a
    line-by-line read gives: later lines win, and damaged lines (a kill's cut, blank lines,
    lines that are no answer) are skipped but counted, also where two halves would join."""
    from memjudge.scoring.store import load_journal

    def line(key, **kw):
        return json.dumps({"key": key, "answer": {"verdict": "supported", "evidence": "a\u2028b"}, **kw}, ensure_ascii=False)

    good = [line("k1"), line("k2", text="x"), line("k1", text="later")]
    cases = {
        "clean": good,
        "cut": good + ['{"key": "k3", "answer": {"ver'],
        "cut then more": good[:1] + ['{"key": "k3", "answer": {"verdict": "supp'] + good[1:],
        "blank": good[:2] + [""] + good[2:],
        "not answers": good + ['{"key": 3, "answer": {}}', '{"key": "k4", "answer": "no"}', "[1, 2]", "7"],
        "halves": ['{"key": "k5", "answer": {"a": [1', '2]}}'] + good,
        "two in one": [good[0] + ", " + good[1]] + good[2:],
    }
    for name, lines in cases.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        want: dict = {}
        for x in lines:
            try:
                rec = json.loads(x)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and isinstance(rec.get("key"), str) and isinstance(rec.get("answer"), dict):
                want[rec.pop("key")] = rec
        assert load_journal(path) == (want, len(lines)), name
    assert load_journal(tmp_path / "absent.jsonl") == ({}, 0)


def test_collection_is_paused_only_inside_a_run_and_left_as_found(tmp_path):
    """score_run pauses automatic garbage collection while it builds rows (memjudge._util.gcpause)
    and resumes it around requests, with what it built meanwhile frozen (never walked by those
    collections); afterwards the collector is as the caller left it, on or off, nothing of the
    run frozen and a caller's own frozen objects still frozen, and after a failing run too."""
    import gc

    from memjudge._util import gcpause
    from scripted_judge import candidates_frame, sources_frame

    assert gc.isenabled()
    with gcpause.paused():
        assert not gc.isenabled()
        with gcpause.paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
        with gcpause.resumed():
            assert gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    with gcpause.resumed():  # nothing paused: nothing to resume
        assert gc.isenabled()
    gc.disable()
    try:
        with gcpause.paused(), gcpause.resumed():
            assert not gc.isenabled()  # the caller's own switch stands
    finally:
        gc.enable()
    gc.freeze()  # the caller's: left frozen
    try:
        frozen = gc.get_freeze_count()
        with gcpause.paused(), gcpause.resumed():
            assert gc.isenabled() and gc.get_freeze_count() == frozen
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()

    from scripted_judge import ScriptedJudge, support_answer

    seen = []

    def script(call, n):
        seen.append((gc.isenabled(), gc.get_freeze_count() > 0))  # requests run with collection on, the plan frozen
        return support_answer(call)

    score_run(candidates_frame(4), sources_frame(4), ScriptedJudge(script=script), out=tmp_path / "r", cache_dir=tmp_path / "c",
              progress=False)
    assert seen == [(True, True)] * 4 and gc.isenabled() and gc.get_freeze_count() == 0
    with pytest.raises(UsageError):
        score_run(candidates_frame(4), sources_frame(4), ScriptedJudge(script=script), limit=0, out=tmp_path / "r2",
                  cache_dir=tmp_path / "c", progress=False)
    assert gc.isenabled()


def test_journal_lines_are_the_merged_records_json():
    """A journal line is spliced from the record's own JSON (store.journal_line); it must be
    `json_line({"key": key, **record})` byte for byte, for awkward records too."""
    import math

    import numpy as np

    from memjudge.scoring.jsonl import json_line
    from memjudge.scoring.store import journal_line

    records = [
        {"answer": {"verdict": "supported", "evidence": "a \u2028 \"b\" é \U0001f600"}, "usage": {"input_tokens": 3}, "latency_s": 0.1},
        {"answer": {}, "judge_score": math.nan, "n": np.int64(3)},  # NaN and numpy: the lenient path
        {"answer": {"facts": [{"fact_id": "f", "covered_by": ["a", "b"]}]}, "unanswered": {"g": "left out"}},
        {"key": "not the key", "answer": {}},
        {},
    ]
    for key in ("0" * 64, 'we"ird\\key\n'):
        for rec in records:
            assert journal_line(key, rec) == json_line({"key": key, **rec})
