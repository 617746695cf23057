"""The Anthropic judge (`anthropic:`, the Messages API) and the Azure OpenAI judge (`azure:`)
through their real SDK clients against the fake server (tests/fake_server.py): requests as
the SDKs send them, the fault table every provider is tested with, structured output and its
step-down, prompt caching (the marked source, usage and cost of cache writes and reads), bad
settings as one-line errors (issue 53)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fake_server import UNSUPPORTED_MARKER, Fault, default_answer
from memjudge import cli as memjudge_cli
from memjudge.errors import UsageError
from memjudge.judges import JudgeCall, make_judge
from memjudge.judges.panel import judge_config
from memjudge.scoring.answers import MAX_REASKS
from memjudge.scoring.engine import score_run
from memjudge.scoring.retry import call_with_retry
from scripted_judge import candidates_frame, sources_frame
from test_providers import KEY, RETRYABLE, SOURCE, SYSTEM, make_call

MODEL = "claude-haiku-4-5"


@pytest.fixture
def anthropic_judge(fake_server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)

    def make(**cfg):
        cfg.setdefault("base_url", fake_server.url)
        cfg.setdefault("retry_initial_s", 0.01)
        cfg.setdefault("retry_max_s", 2.0)
        cfg.setdefault("timeout_s", 5.0)
        return make_judge(f"anthropic:{MODEL}", **cfg)

    return make


def ask(judge, call: JudgeCall | None = None, retry: bool = False, **kw):
    call = call or make_call()

    async def go():
        try:
            if retry:
                return await call_with_retry(judge, lambda: judge.generate(call), **kw)
            return await judge.generate(call)
        finally:
            await judge.aclose()

    return asyncio.run(go())


# --------------------------------------------------------------------------------------------
# requests and answers


def test_request_is_the_messages_api_with_a_json_schema_output_format(anthropic_judge, fake_server):
    answer = ask(anthropic_judge(max_output_tokens=333, temperature=0.0, options={"effort": "low"}))
    (req,) = fake_server.requests
    assert req.path == "/v1/messages" and req.route == "anthropic.messages"
    # the SDK's own headers: a version, and the key (never in the answer or the identity)
    assert req.headers["anthropic-version"] and KEY in (req.headers.get("x-api-key") or req.headers.get("authorization", ""))
    assert req.json["model"] == MODEL and req.json["max_tokens"] == 333 and req.json["temperature"] == 0.0
    assert req.system == SYSTEM and req.user == make_call().prompt.user
    fmt = req.json["output_config"]["format"]
    assert fmt["type"] == "json_schema" and req.json["output_config"]["effort"] == "low"
    assert fmt["schema"]["properties"]["verdict"]["enum"] == ["supported", "unsupported"]
    assert fmt["schema"]["additionalProperties"] is False  # the SDK's strict form
    assert "tools" not in req.json
    assert answer.finish_reason == "stop" and answer.parsed["verdict"] == "supported"
    assert answer.model_version == MODEL + "-fake-001" and answer.judge_score is None
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0
    assert answer.raw["request_id"].startswith("req_fake")
    assert KEY not in repr(answer) and KEY not in json.dumps(anthropic_judge().identity())


def test_the_request_body_is_what_is_sent(anthropic_judge, fake_server):
    judge = anthropic_judge()
    ask(judge)
    assert judge.request_body(make_call()) == fake_server.requests[0].json


def test_forced_tool_answers_are_the_tool_input(anthropic_judge, fake_server):
    answer = ask(anthropic_judge(response_format="tool"), make_call(f"The user owns a horse {UNSUPPORTED_MARKER}"))
    (req,) = fake_server.requests
    assert req.json["tool_choice"] == {"type": "tool", "name": "record_answer"}
    assert req.json["tools"][0]["input_schema"]["properties"]["verdict"]["enum"] == ["supported", "unsupported"]
    assert "output_config" not in req.json
    assert answer.finish_reason == "stop" and answer.parsed["verdict"] == "unsupported"
    assert answer.raw["stop_reason"] == "tool_use"


def test_auto_steps_down_to_a_forced_tool_when_the_output_format_is_refused(anthropic_judge, fake_server):
    fake_server.anthropic_refuse_output_format = True
    judge = anthropic_judge()

    async def go():
        try:
            return [await judge.generate(make_call(f"fact {i}")) for i in range(3)]
        finally:
            await judge.aclose()

    answers = asyncio.run(go())
    assert all(a.parsed and a.parsed["verdict"] == "supported" for a in answers)
    statuses = [r.status for r in fake_server.requests]
    assert statuses == [400, 200, 200, 200]  # refused once, then the tool for this and every later call
    assert all("tools" in r.json for r in fake_server.requests[1:])
    assert judge.effective()["response_format"] == "tool" and "json_schema refused (HTTP 400): tool" in judge.effective()["adapted"]


@pytest.mark.parametrize("fault, finish", [(Fault.safety(), "safety"), (Fault.truncated(), "length"), (Fault.empty(), "empty")],
                         ids=["refusal", "max_tokens", "empty"])
def test_unusable_answers_come_back_with_their_finish_reason(anthropic_judge, fake_server, fault, finish):
    fake_server.enqueue(fault)
    answer = ask(anthropic_judge(), retry=True)
    assert answer.finish_reason == finish and answer.parsed is None
    assert fake_server.count() == 1  # an answer, not an error: never retried
    assert answer.raw["stop_reason"] == {"safety": "refusal", "length": "max_tokens", "empty": "end_turn"}[finish]


def test_a_malformed_answer_is_returned_unparsed(anthropic_judge, fake_server):
    fake_server.enqueue(Fault.malformed_answer())
    answer = ask(anthropic_judge())
    assert answer.finish_reason == "stop" and answer.parsed is None and not answer.text.startswith("{")


# --------------------------------------------------------------------------------------------
# failures: the one retry policy, the SDK's retries off


@pytest.mark.parametrize("fault", [*RETRYABLE, pytest.param(Fault.http(529), id="529-overloaded")])
def test_transient_failures_are_retried_and_recover(anthropic_judge, fake_server, fault):
    fake_server.enqueue(fault, times=2)
    events = []
    answer = ask(anthropic_judge(), retry=True, on_retry=events.append)
    assert answer.finish_reason == "stop" and answer.parsed["verdict"] == "supported"
    assert [r.fault for r in fake_server.requests] == [fault.kind, fault.kind, "ok"]
    assert [e.attempt for e in events] == [1, 2]
    if fault.kind == "status":
        body = json.loads(fake_server.requests[0].body or b"{}")
        assert body["model"] == MODEL


def test_overloaded_is_an_anthropic_error_body(anthropic_judge, fake_server):
    import anthropic

    fake_server.enqueue(Fault.http(529))
    with pytest.raises(anthropic.APIStatusError) as info:
        ask(anthropic_judge())
    assert info.value.status_code == 529 and "overloaded_error" in info.value.response.text


def test_retry_after_is_honoured(anthropic_judge, fake_server):
    fake_server.enqueue(Fault.rate_limit(0.4))
    events = []
    answer = ask(anthropic_judge(retry_initial_s=1.0), retry=True, on_retry=events.append)
    assert answer.finish_reason == "stop"
    first, second = fake_server.requests
    assert 0.4 * 0.8 <= second.time - first.time < 1.0
    assert events[0].server_delay_s == pytest.approx(0.4)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_raise_after_one_request(anthropic_judge, fake_server, status):
    import anthropic

    fake_server.enqueue(Fault.http(status), times=None)
    with pytest.raises(anthropic.APIStatusError) as info:
        ask(anthropic_judge(), retry=True)
    assert info.value.status_code == status and fake_server.count() == 1


@pytest.mark.parametrize("fault", [Fault.malformed_body(), Fault.foreign_body()], ids=["not-json", "not-a-message"])
def test_a_200_body_that_is_not_a_message_is_transient(anthropic_judge, fake_server, fault):
    from memjudge.judges.base import MalformedResponse

    fake_server.enqueue(fault, times=None)
    with pytest.raises(MalformedResponse, match="not an Anthropic message"):
        ask(anthropic_judge(max_attempts=3), retry=True)
    assert fake_server.count() == 3


def test_the_sdk_does_not_retry_on_its_own(anthropic_judge, fake_server):
    import anthropic

    fake_server.enqueue(Fault.unavailable(), times=None)
    with pytest.raises(anthropic.APIStatusError):
        ask(anthropic_judge())  # no retry policy around it: exactly one request
    assert fake_server.count() == 1


# --------------------------------------------------------------------------------------------
# the fault table through the engine: every (item, replicate) once, a rerun asks what failed


def _inputs(tmp_path: Path, n: int) -> tuple[Path, Path]:
    cand, src = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl"
    candidates_frame(n).to_json(cand, orient="records", lines=True)
    sources_frame(n).to_json(src, orient="records", lines=True)
    return cand, src


def _main(capsys, *args) -> tuple[int, str, str]:
    code = memjudge_cli.main([str(a) for a in args])
    got = capsys.readouterr()
    return code, got.out, got.err


SCHEMA_MISS = '{"verdict": "maybe", "evidence": "", "rationale": "not one of the labels"}'


def _fault_table(server, texts: list[str]) -> None:
    server.enqueue(Fault.malformed_answer(), times=1, contains=texts[1] + "\n")  # malformed once: the re-ask cures it
    server.enqueue(Fault.malformed_answer(), times=None, contains=texts[2] + "\n")
    server.enqueue(Fault.safety(), times=None, contains=texts[3] + "\n")  # refusal
    server.enqueue(Fault.truncated(), times=None, contains=texts[4] + "\n")  # max_tokens
    server.enqueue(Fault.rate_limit(0.01), times=1, contains=texts[5] + "\n")
    server.enqueue(Fault.server_error(), times=1, contains=texts[6] + "\n")
    server.enqueue(Fault.http(529), times=1, contains=texts[7] + "\n")
    server.enqueue(Fault.drop(), times=1, contains=texts[8] + "\n")

    def answer(srv, req):  # item 9 misses the answer's schema, whatever is asked
        return SCHEMA_MISS if texts[9] + "\n" in (req.user or "") else default_answer(srv, req)

    server.answer_fn = answer


@pytest.mark.parametrize("spec, fmt", [
    ("anthropic:claude-haiku-4-5", "json_schema"),
    ("anthropic:claude-haiku-4-5", "tool"),
    ("azure:judge-deployment", "json_schema"),
])
def test_the_fault_table_through_the_engine(capsys, tmp_path, fake_server, monkeypatch, spec, fmt):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    n, reps = 10, 2
    cand, src = _inputs(tmp_path, n)
    texts = candidates_frame(n)["text"].tolist()
    _fault_table(fake_server, texts)
    args = ["score", cand, "--sources", src, "--judge", spec, "--base-url", fake_server.url, "--out", tmp_path / "run",
            "--cache-dir", tmp_path / "cache", "--no-progress", "--replicates", reps, "--response-format", fmt, "--json"]
    code, out, err = _main(capsys, *args)
    assert code == 0, err
    s = json.loads(out)
    rows = [json.loads(x) for x in (tmp_path / "run" / "labels.jsonl").read_text().splitlines()]
    assert sorted((r["assertion_id"], r["replicate"]) for r in rows) == [(f"a{i:03d}", r) for i in range(n) for r in range(reps)]
    by = {}
    for r in rows:
        by.setdefault(r["assertion_id"], []).append(r)
    for i in (0, 1, 5, 6, 7, 8):
        assert all(r["verdict"] in ("supported", "unsupported") and r["error"] is None for r in by[f"a{i:03d}"]), i
    for i, words in ((2, "re-asks"), (3, "safety"), (4, "truncated"), (9, "re-asks")):
        assert all(r["verdict"] is None and words in r["error"] for r in by[f"a{i:03d}"]), (i, by[f"a{i:03d}"])
    # requests: each (item, replicate) once, plus one per re-ask and per retry, nothing else
    assert s["retries"] == 4 and s["reasks"] == 1 + 2 * reps * MAX_REASKS and s["errors"] == 4 * reps
    route = "anthropic.messages" if spec.startswith("anthropic") else "azure.chat"
    assert fake_server.count(route=route) == n * reps + s["reasks"] + s["retries"] == s["requests"] + s["retries"]
    if spec.startswith("azure"):
        req = fake_server.requests[0]
        assert req.path == "/openai/deployments/judge-deployment/chat/completions"
        assert req.query["api-version"] == ["2024-10-21"] and req.headers["api-key"] == KEY and "authorization" not in req.headers
    # a rerun asks again exactly the calls without a valid answer
    fake_server.reset()
    fake_server.answer_fn = default_answer
    code, out, err = _main(capsys, *args)
    assert code == 0, err
    assert json.loads(out)["requested"] == 4 * reps and fake_server.count(route=route) == 4 * reps


# --------------------------------------------------------------------------------------------
# prompt caching


LONG = " ".join(f"On day {i} I walked the dog, read a chapter, and cooked lentil soup for my sister." for i in range(70))


def _personas(tmp_path: Path, source: str, personas: int = 3, per: int = 4) -> tuple[Path, Path]:
    cand, src = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl"
    with open(cand, "w") as f:
        for p in range(personas):
            for a in range(per):
                f.write(json.dumps({"persona_id": f"p{p}", "assertion_id": f"p{p}a{a}", "category": "habits",
                                    "text": f"The user cooked lentil soup on day {a + 10 * p}."}) + "\n")
    with open(src, "w") as f:
        for p in range(personas):
            f.write(json.dumps({"persona_id": f"p{p}", "source": f"[persona {p}] {source}"}) + "\n")
    return cand, src


def test_prompt_caching_marks_the_source_and_prices_writes_and_reads(capsys, tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cand, src = _personas(tmp_path, LONG)
    spec = "anthropic:claude-sonnet-4-5"  # $3 / $15 per million (default prices); cache write 3.75, read 0.30
    args = ["score", cand, "--sources", src, "--judge", spec, "--base-url", fake_server.url, "--no-progress",
            "--cache-dir", tmp_path / "cache", "--concurrency", "1"]
    code, out, err = _main(capsys, *args, "--out", tmp_path / "dry", "--dry-run", "--json")
    assert code == 0, err
    dry = json.loads(out)
    est = dry["estimated_cache_tokens"]
    assert est["cache_write_tokens"] > 0 and est["cached_tokens"] == 3 * est["cache_write_tokens"]  # 3 personas x (1 write, 3 reads)
    assert dry["estimated_cache_saving_usd"] == pytest.approx((est["cached_tokens"] * (3 - 0.3) - est["cache_write_tokens"] * (3.75 - 3)) / 1e6)
    code, text, err = _main(capsys, *args, "--out", tmp_path / "dry", "--dry-run")
    assert "prompt cache: ~" in text and "saves $" in text

    code, out, err = _main(capsys, *args, "--out", tmp_path / "run", "--json")
    assert code == 0, err
    s = json.loads(out)
    reqs = [r for r in fake_server.requests if r.route == "anthropic.messages"]
    assert len(reqs) == 12
    for r in reqs:  # the persona's source block is its own text block, marked
        first, rest = r.json["messages"][0]["content"]
        assert first["cache_control"] == {"type": "ephemeral"} and first["text"].rstrip().endswith("SOURCE>>>")
        assert "[persona" in first["text"] and "<<<ASSERTION" in rest["text"] and "cache_control" not in rest
    rows = [json.loads(x) for x in (tmp_path / "run" / "labels.jsonl").read_text().splitlines()]
    writes = [r["usage"]["cache_write_tokens"] for r in rows]
    reads = [r["usage"]["cached_tokens"] for r in rows]
    # per persona (the engine asks a persona's calls together): the first writes, the other three read
    assert [w > 0 for w in writes] == [True, False, False, False] * 3
    assert [x > 0 for x in reads] == [False, True, True, True] * 3
    assert all(reads[4 * p + k] == writes[4 * p] for p in range(3) for k in (1, 2, 3))
    tok = s["tokens"]
    assert tok["cache_write_tokens"] == sum(writes) and tok["cached_tokens"] == sum(reads)
    plain = tok["input_tokens"] - tok["cache_write_tokens"] - tok["cached_tokens"]
    assert plain > 0
    expected = (plain * 3 + tok["cache_write_tokens"] * 3.75 + tok["cached_tokens"] * 0.3 + tok["output_tokens"] * 15) / 1e6
    assert s["cost_usd"] == pytest.approx(expected)
    assert s["cache_saving_usd"] == pytest.approx((tok["cached_tokens"] * 2.7 - tok["cache_write_tokens"] * 0.75) / 1e6)
    assert s["cache_saving_usd"] > 0
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["judge"]["config"]["price_cache_read_per_mtok"] == 0.3
    code, text, err = _main(capsys, *args, "--out", tmp_path / "again-elsewhere", "--temperature", "0.5")
    assert "prompt cache:" in text and "saved $" in text


def test_a_source_under_the_minimum_is_not_marked_and_prices_come_from_the_judges_file(capsys, tmp_path, fake_server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    cand, src = _personas(tmp_path, "I like tea.", personas=2, per=2)
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "anthropic:my-gateway-model"\nprice_input_per_mtok = 2.0\nprice_output_per_mtok = 8.0\n'
                     'price_cache_read_per_mtok = 0.5\n')
    code, out, err = _main(capsys, "score", cand, "--sources", src, "--judge", "anthropic:my-gateway-model", "--judges-file", panel,
                           "--base-url", fake_server.url, "--no-progress", "--out", tmp_path / "run", "--cache-dir", tmp_path / "c", "--json")
    assert code == 0, err
    s = json.loads(out)
    assert all(isinstance(r.json["messages"][0]["content"], str) for r in fake_server.requests)
    assert s["tokens"]["cache_write_tokens"] == s["tokens"]["cached_tokens"] == 0
    assert s["cost_usd"] == pytest.approx((s["tokens"]["input_tokens"] * 2 + s["tokens"]["output_tokens"] * 8) / 1e6)
    assert s["cache_saving_usd"] == 0.0
    config = json.loads((tmp_path / "run" / "config.json").read_text())["judge"]["config"]
    assert config["price_cache_read_per_mtok"] == 0.5 and config["price_cache_write_per_mtok"] == 2.5  # the file's, then the default


def test_prompt_caching_can_be_turned_off(anthropic_judge, fake_server):
    call = make_call()
    long_call = JudgeCall(call.key, call.rubric, type(call.prompt)(SYSTEM, call.prompt.user.replace(SOURCE, LONG)), call.schema,
                          0, call.item)
    sonnet = make_judge("anthropic:claude-sonnet-4-5", base_url=fake_server.url)  # caches from 1,024 tokens
    assert sonnet.min_cache_tokens == 1024 and sonnet.cache_split(long_call) > 0
    # Haiku 4.5 caches only from 4,096 tokens: this source (~1,400) is not marked
    assert anthropic_judge().min_cache_tokens == 4096 and anthropic_judge().cache_split(long_call) == 0
    assert anthropic_judge(options={"min_cache_tokens": 1000}).cache_split(long_call) > 0
    judge = make_judge("anthropic:claude-sonnet-4-5", base_url=fake_server.url, options={"prompt_cache": False})
    assert judge.cache_split(long_call) == 0 and judge.cache_prefix(long_call) == (None, 0)
    # the mark changes the price, not the answer: the same cache key with or without it
    assert judge.identity() == sonnet.identity() != make_judge("anthropic:claude-sonnet-4-5", base_url=fake_server.url,
                                                                options={"effort": "low"}).identity()


# --------------------------------------------------------------------------------------------
# bad settings: one line, exit 2


@pytest.mark.parametrize("cfg, words", [
    ({"options": {"temperature_jitter": 1}}, "unknown option(s) temperature_jitter"),
    ({"seed": 3}, "no sampling seed"),
    ({"thinking_budget": 2048}, "thinking_budget"),
    ({"response_format": "json_object"}, "json_object is OpenAI's"),
    ({"options": {"effort": "extreme"}}, "options.effort"),
    ({"base_url": "http://127.0.0.1:9/v1"}, "ends in /v1"),
])
def test_bad_anthropic_settings_are_one_line_usage_errors(cfg, words):
    cfg.setdefault("base_url", "http://127.0.0.1:9")
    with pytest.raises(UsageError) as info:
        make_judge("anthropic:claude-haiku-4-5", **cfg)
    assert words in str(info.value) and "\n" not in str(info.value)


def test_an_unknown_anthropic_option_in_the_judges_file_exits_2_naming_it(cli, tmp_path):
    cand, src = _inputs(tmp_path, 2)
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "anthropic:claude-haiku-4-5"\n[judge.options]\ncache_ttl = "1h"\n')
    r = cli("score", cand, "--sources", src, "--judge", "anthropic:claude-haiku-4-5", "--judges-file", panel,
            "--out", tmp_path / "run", "--dry-run")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert str(panel) in r.stderr and "unknown option(s) cache_ttl" in r.stderr


def test_an_azure_judge_without_an_endpoint_exits_2(cli, tmp_path):
    cand, src = _inputs(tmp_path, 2)
    r = cli("score", cand, "--sources", src, "--judge", "azure:gpt-4o-judge", "--out", tmp_path / "run", "--dry-run")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "azure:gpt-4o-judge" in r.stderr and "endpoint" in r.stderr and "--base-url" in r.stderr


@pytest.mark.parametrize("spec", ["sim:paper", "local:qwen2.5-coder-1.5b"])
def test_batch_with_a_judge_without_a_batch_api_exits_2(cli, tmp_path, spec):
    cand, src = _inputs(tmp_path, 2)
    r = cli("score", cand, "--sources", src, "--judge", spec, "--out", tmp_path / "run", "--batch")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"--batch needs a judge with a batch API (openai:, gemini:, anthropic:, azure:), not {spec}" in r.stderr


def test_missing_keys_are_usage_errors_and_a_dry_run_needs_none(tmp_path):
    for spec, var in (("anthropic:claude-haiku-4-5", "ANTHROPIC_API_KEY"), ("azure:d", "AZURE_OPENAI_API_KEY")):
        judge = make_judge(spec, base_url="https://example.openai.azure.com" if spec.startswith("azure") else None)
        with pytest.raises(UsageError, match=var):
            judge.check_ready()
    r = score_run(candidates_frame(2), sources_frame(2), judge_config("anthropic:claude-haiku-4-5"), out=tmp_path / "dry",
                  progress=False, dry_run=True)
    assert r.summary.estimated_cost_usd is not None and r.summary.estimated_cost_usd > 0  # default prices


# --------------------------------------------------------------------------------------------
# azure: the OpenAI judge with the Azure client


def test_azure_request_shape_key_header_and_api_version(fake_server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    judge = make_judge("azure:judge-deployment", base_url=fake_server.url + "/", options={"api_version": "2025-04-01-preview"},
                       max_output_tokens=77)
    answer = ask(judge)
    (req,) = fake_server.requests
    assert req.route == "azure.chat" and req.path == "/openai/deployments/judge-deployment/chat/completions"
    assert req.query["api-version"] == ["2025-04-01-preview"]
    assert req.headers["api-key"] == KEY and "authorization" not in req.headers
    assert req.json["response_format"]["type"] == "json_schema" and req.json["max_completion_tokens"] == 77
    assert answer.parsed["verdict"] == "supported" and answer.model_version.startswith("judge-deployment-fake-001")
    ident = judge.identity()
    assert ident["spec"] == "azure:judge-deployment" and ident["base_url"] == fake_server.url and KEY not in json.dumps(ident)
    assert judge.effective()["api_version"] == "2025-04-01-preview"


def test_azure_entra_token_goes_as_a_bearer_token(fake_server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_AD_TOKEN", "entra-token-123")
    ask(make_judge("azure:d", base_url=fake_server.url))
    (req,) = fake_server.requests
    assert req.headers["authorization"] == "Bearer entra-token-123" and "api-key" not in req.headers


def test_azure_log_odds_as_openai(fake_server, monkeypatch):
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    fake_server.logprobs = True
    fake_server.verdict_logprobs = (-0.2, -3.0)
    answer = ask(make_judge("azure:d", base_url=fake_server.url))
    assert answer.judge_score == pytest.approx(2.8)


def test_azure_batch_goes_through_the_resource_with_the_deployment_as_model(fake_server, monkeypatch, tmp_path):
    from memjudge.scoring.engine import RunOptions

    monkeypatch.setenv("MEMJUDGE_BATCH_POLL_S", "0.002")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", KEY)
    r = score_run(candidates_frame(6), sources_frame(6), judge_config("azure:gpt-4o-mini-batch", base_url=fake_server.url),
                  out=tmp_path / "run", cache_dir=tmp_path / "cache", progress=False, run=RunOptions(batch=True))
    assert r.labels["verdict"].notna().all() and r.summary.batch["jobs_submitted"] == 1
    routes = {q.route for q in fake_server.requests}
    assert {"azure.files.create", "azure.batches.create", "azure.batches.get", "azure.files.content"} <= routes
    assert all(q.headers.get("api-key") == KEY and q.query.get("api-version") == ["2024-10-21"]
               for q in fake_server.requests if (q.route or "").startswith("azure."))
    create = next(q for q in fake_server.requests if q.route == "azure.batches.create")
    assert create.json["endpoint"] == "/chat/completions"  # Azure's name, no /v1
    upload = next(f for f in fake_server.batches.files.values() if f["purpose"] == "batch")
    lines = [json.loads(x) for x in upload["data"].decode().splitlines()]
    assert {x["url"] for x in lines} == {"/chat/completions"} and {x["body"]["model"] for x in lines} == {"gpt-4o-mini-batch"}
    state = json.loads((tmp_path / "run" / "batches.json").read_text())
    assert state["jobs"][0]["provider"] == "azure" and state["judge"]["spec"] == "azure:gpt-4o-mini-batch"
