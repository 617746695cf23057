"""The Gemini and OpenAI judges through their real async SDK clients, against the fake
server (tests/fake_server.py), with retries through retry.py: every fault kind, both providers."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Literal

import httpx2
import openai
import pytest
from google.genai import errors as genai_errors
from pydantic import BaseModel

from fake_server import UNSUPPORTED_MARKER, FakeServer, Fault, expected_verdict, synthesize
from memjudge.errors import UsageError
from memjudge.judges import JudgeCall, Prompt, make_judge
from memjudge.judges.base import MalformedResponse
from memjudge.scoring.retry import call_with_retry

KEY = "sk-test-SECRET-0123456789"
MODELS = {"gemini": "gemini-2.5-flash", "openai": "gpt-4o-mini"}
KEY_VARS = {"gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}
SOURCE = "I adopted a grey cat named Miso last spring.\nI work as a nurse on night shifts."
SYSTEM = "You check candidate memories. Answer with JSON."


class SupportAnswer(BaseModel):
    verdict: Literal["supported", "unsupported"]
    evidence: str
    rationale: str


def make_call(assertion: str = "The user has a cat.", replicate: int = 0) -> JudgeCall:
    user = f"<<<SOURCE\n{SOURCE}\nSOURCE>>>\nJudge this.\n<<<ASSERTION\n{assertion}\nASSERTION>>>"
    return JudgeCall(key=f"k-{assertion}-{replicate}", rubric="support@test", prompt=Prompt(SYSTEM, user),
                     schema=SupportAnswer, replicate=replicate,
                     item={"assertion_id": "a1", "persona_id": "p1", "category": "pets"})


@pytest.fixture(params=["gemini", "openai"])
def provider(request) -> str:
    return request.param


def base_url(provider: str, server: FakeServer) -> str:
    return server.url if provider == "gemini" else server.openai_base_url


@pytest.fixture
def make(provider, fake_server, monkeypatch):
    monkeypatch.setenv(KEY_VARS[provider], KEY)

    def _make(**cfg):
        cfg.setdefault("base_url", base_url(provider, fake_server))
        cfg.setdefault("retry_initial_s", 0.01)
        cfg.setdefault("retry_max_s", 2.0)
        cfg.setdefault("timeout_s", 5.0)
        return make_judge(f"{provider}:{MODELS[provider]}", **cfg)

    return _make


def ask(judge, call=None, retry=False, **kw):
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
# Answers and requests


def test_answer_text_usage_version_and_parse(provider, make, fake_server):
    answer = ask(make())
    assert answer.finish_reason == "stop"
    assert json.loads(answer.text) == answer.parsed
    assert answer.parsed["verdict"] == "supported"
    # The fake quotes the source verbatim for a supported verdict.
    assert answer.parsed["evidence"] and answer.parsed["evidence"] in " ".join(SOURCE.split())
    assert answer.usage.input_tokens > 0 and answer.usage.output_tokens > 0
    assert answer.model_version.startswith(MODELS[provider] + "-fake-001")
    if provider == "openai":
        assert "fp_fake0001" in answer.model_version
        assert answer.raw["system_fingerprint"] == "fp_fake0001"
    assert fake_server.count() == 1


def test_verdict_follows_the_prompt(provider, make):
    answer = ask(make(), make_call(f"The user owns a horse {UNSUPPORTED_MARKER}"))
    assert answer.parsed["verdict"] == "unsupported"
    assert answer.parsed["evidence"] == ""


def test_request_carries_generation_settings(provider, make, fake_server):
    extra = {"thinking_budget": 0} if provider == "gemini" else {"options": {"reasoning_effort": "low"}}
    ask(make(seed=1234, max_output_tokens=333, **extra))
    (req,) = fake_server.requests
    gen = req.generation
    assert gen["temperature"] == 0.0
    assert gen["seed"] == 1234
    assert gen["max_output_tokens"] == 333
    assert req.system == SYSTEM
    assert req.user == make_call().prompt.user
    assert req.model == MODELS[provider]
    schema = gen["schema"]
    assert schema["properties"]["verdict"]["enum"] == ["supported", "unsupported"]
    assert set(schema["required"]) == {"verdict", "evidence", "rationale"}
    if provider == "gemini":
        assert req.path == f"/v1beta/models/{MODELS[provider]}:generateContent"
        assert gen["response_mime_type"] == "application/json"
        assert gen["thinking_budget"] == 0
    else:
        assert req.path == "/v1/chat/completions"
        assert gen["response_format_type"] == "json_schema"
        assert req.json["response_format"]["json_schema"]["strict"] is True
        assert gen["reasoning_effort"] == "low"
        # A compatible server gets the long-established max_tokens name.
        assert "max_tokens" in req.json and "max_completion_tokens" not in req.json


def test_provider_defaults_are_left_alone(provider, make, fake_server):
    judge = make()
    # make_judge drops None overrides, so unset the limit on the config itself.
    ask(make_judge(judge.config.model_copy(update={"max_output_tokens": None})))
    (req,) = fake_server.requests
    assert req.generation["seed"] is None
    assert req.generation["max_output_tokens"] is None
    assert req.generation.get("thinking_config") is None


def test_gemini_thinking_level_option(monkeypatch, fake_server):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    ask(make_judge("gemini:gemini-3-pro", base_url=fake_server.url, options={"thinking_level": "low"}))
    tc = fake_server.requests[0].generation["thinking_config"]
    assert "low" in json.dumps(tc).lower()


@pytest.mark.parametrize("spec, cfg", [
    ("gemini:m", {"options": {"colour": "blue"}}),
    ("openai:m", {"options": {"thinking_level": "low"}}),
    ("openai:m", {"thinking_budget": 10}),
    ("gemini:m", {"thinking_budget": 10, "options": {"thinking_level": "low"}}),
])
def test_bad_provider_settings_are_usage_errors(spec, cfg, monkeypatch):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with pytest.raises(UsageError) as info:
        make_judge(spec, base_url="http://127.0.0.1:9", **cfg)
    assert "\n" not in str(info.value)


def test_api_key_is_sent_but_never_returned(provider, make, fake_server):
    answer = ask(make())
    headers = fake_server.requests[0].headers
    if provider == "gemini":
        assert headers["x-goog-api-key"] == KEY
    else:
        assert headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in repr(answer)
    assert KEY not in json.dumps(answer.raw)
    assert KEY not in json.dumps(make().identity())


def test_usage_counts_cached_and_thinking_tokens(provider, make, fake_server):
    fake_server.cached_tokens, fake_server.thinking_tokens = 5, 7
    answer = ask(make())
    u = answer.usage
    assert (u.cached_tokens, u.thinking_tokens) == (5, 7)
    # Output excludes thinking for both providers (OpenAI's completion_tokens includes it).
    assert u.output_tokens == len(answer.text) // 4 + 1


def test_concurrent_calls_share_one_client(provider, make, fake_server):
    judge = make()

    async def go():
        try:
            return await asyncio.gather(*(judge.generate(make_call(f"fact {i}")) for i in range(24)))
        finally:
            await judge.aclose()

    answers = asyncio.run(go())
    assert [a.finish_reason for a in answers] == ["stop"] * 24
    assert fake_server.count() == 24


def test_judge_survives_a_new_event_loop(provider, make, fake_server):
    judge = make()
    for _ in range(2):
        assert asyncio.run(judge.generate(make_call())).finish_reason == "stop"
    asyncio.run(judge.aclose())
    assert fake_server.count() == 2


# --------------------------------------------------------------------------------------------
# Keys and base URLs


def test_missing_key_for_the_real_service_is_a_usage_error(provider):
    judge = make_judge(f"{provider}:{MODELS[provider]}")  # a dry run needs no key
    with pytest.raises(UsageError) as info:
        judge.check_ready()  # a request does
    assert KEY_VARS[provider] in str(info.value)
    assert "\n" not in str(info.value)


def test_google_api_key_also_works(monkeypatch, fake_server):
    monkeypatch.setenv("GOOGLE_API_KEY", KEY)
    ask(make_judge("gemini:gemini-2.5-flash", base_url=fake_server.url))
    assert fake_server.requests[0].headers["x-goog-api-key"] == KEY


def test_compatible_server_without_key_gets_a_placeholder(provider, fake_server):
    answer = ask(make_judge(f"{provider}:{MODELS[provider]}", base_url=base_url(provider, fake_server)))
    assert answer.finish_reason == "stop"
    headers = fake_server.requests[0].headers
    assert headers.get("x-goog-api-key", headers.get("authorization")).endswith("EMPTY")


def test_openai_base_url_from_environment_is_used_and_named(monkeypatch, fake_server):
    monkeypatch.setenv("OPENAI_BASE_URL", fake_server.openai_base_url)
    judge = make_judge("openai:llama-3-8b")
    assert judge.identity()["base_url"] == fake_server.openai_base_url
    assert ask(judge).finish_reason == "stop"
    assert fake_server.count(route="openai.chat") == 1


def test_openai_request_body_is_what_is_sent(monkeypatch, fake_server):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    judge = make_judge("openai:gpt-4o-mini", base_url=fake_server.openai_base_url, seed=3)
    ask(judge)
    sent = {k: v for k, v in fake_server.requests[0].json.items() if k != "stream"}
    assert judge.request_body(make_call()) == sent
    json.dumps(sent)  # ready for a batch file


def test_real_openai_gets_max_completion_tokens(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    params = make_judge("openai:gpt-4o-mini", max_output_tokens=50).request_params(make_call())
    assert params["max_completion_tokens"] == 50 and "max_tokens" not in params


# --------------------------------------------------------------------------------------------
# Answers that are returned, not raised


@pytest.mark.parametrize("fault, finish", [
    (Fault.safety(), "safety"),
    (Fault.prompt_blocked(), "safety"),
    (Fault.truncated(), "length"),
    (Fault.empty(), "empty"),
])
def test_unusable_answers_come_back_with_their_finish_reason(provider, make, fake_server, fault, finish):
    fake_server.enqueue(fault)
    answer = ask(make(), retry=True)
    assert answer.finish_reason == finish
    assert answer.parsed is None
    assert fake_server.count() == 1  # not an error, so never retried
    if finish == "length":
        assert answer.text and not answer.text.rstrip().endswith("}")
    else:
        assert not answer.text


def test_malformed_answer_is_returned_unparsed_then_a_good_one(provider, make, fake_server):
    fake_server.enqueue(Fault.malformed_answer())
    judge = make()

    async def go():
        try:
            return [await judge.generate(make_call()) for _ in range(2)]
        finally:
            await judge.aclose()

    bad, good = asyncio.run(go())
    assert bad.finish_reason == "stop" and bad.parsed is None
    with pytest.raises(ValueError):
        json.loads(bad.text)
    assert good.parsed["verdict"] == "supported"
    assert fake_server.count() == 2


def test_openai_refusal_is_a_safety_answer(monkeypatch, fake_server):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    from fake_server import openai_chat

    def handler(server, req, fault):
        reply = openai_chat(server, req, fault)
        reply.body["choices"][0]["message"].update(content=None, refusal="I can't help with that.")
        return reply

    fake_server.add_route("POST", r"^/v1/chat/completions$", "openai.chat.refusing", "openai", handler)
    answer = ask(make_judge("openai:gpt-4o-mini", base_url=fake_server.openai_base_url))
    assert answer.finish_reason == "safety"
    assert answer.raw["refusal"] == "I can't help with that."


# --------------------------------------------------------------------------------------------
# Failures: retried ones recover, others raise at once, attempts are bounded


RETRYABLE = [
    pytest.param(Fault.rate_limit(), id="429"),
    pytest.param(Fault.http(408), id="408"),
    pytest.param(Fault.http(409), id="409"),
    pytest.param(Fault.server_error(), id="500"),
    pytest.param(Fault.unavailable(), id="503"),
    pytest.param(Fault.http(504), id="504"),
    pytest.param(Fault.drop(), id="dropped-connection"),
]


@pytest.mark.parametrize("fault", RETRYABLE)
def test_transient_failures_are_retried_and_recover(provider, make, fake_server, fault):
    fake_server.enqueue(fault, times=2)
    events = []
    answer = ask(make(), retry=True, on_retry=events.append)
    assert answer.finish_reason == "stop" and answer.parsed["verdict"] == "supported"
    assert fake_server.count() == 3
    assert [r.fault for r in fake_server.requests] == [fault.kind, fault.kind, "ok"]
    assert [e.attempt for e in events] == [1, 2]


def test_timeouts_are_retried(provider, make, fake_server):
    fake_server.enqueue(Fault.hang(3.0))
    events = []
    answer = ask(make(timeout_s=0.3), retry=True, on_retry=events.append)
    assert answer.finish_reason == "stop"
    assert fake_server.count() == 2
    err = events[0].error
    if provider == "gemini":
        assert isinstance(err, httpx2.TimeoutException)  # google-genai does not wrap it
    else:
        assert isinstance(err, openai.APITimeoutError)


def test_refused_connection_is_retryable(provider, monkeypatch):
    monkeypatch.setenv(KEY_VARS[provider], KEY)
    server = FakeServer().start()
    url = base_url(provider, server)
    server.stop()  # nothing listens on that port any more
    judge = make_judge(f"{provider}:{MODELS[provider]}", base_url=url, max_attempts=2, retry_initial_s=0.01)
    events = []
    with pytest.raises(Exception) as info:
        ask(judge, retry=True, on_retry=events.append)
    assert judge.is_retryable(info.value)
    assert len(events) == 1


@pytest.mark.parametrize("provider, where", [
    pytest.param("gemini", "body", id="gemini-RetryInfo"),
    pytest.param("gemini", "header", id="gemini-Retry-After"),
    pytest.param("openai", "header", id="openai-Retry-After"),
    pytest.param("openai", "header_ms", id="openai-retry-after-ms"),
], indirect=["provider"])
def test_server_requested_delay_is_honoured(provider, make, fake_server, where):
    fake_server.enqueue(Fault.rate_limit(0.4, where=where))
    events = []
    # A 1 s initial backoff would dwarf the asked 0.4 s: the server's delay must win.
    answer = ask(make(retry_initial_s=1.0), retry=True, on_retry=events.append)
    assert answer.finish_reason == "stop"
    first, second = fake_server.requests
    assert second.time - first.time >= 0.4 * 0.8
    assert second.time - first.time < 1.0
    assert events[0].server_delay_s == pytest.approx(0.4)


def test_gemini_retry_delay_in_body_is_read(monkeypatch, fake_server):
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    fake_server.enqueue(Fault.rate_limit(33, where="body"))
    judge = make_judge("gemini:gemini-2.5-flash", base_url=fake_server.url)
    with pytest.raises(genai_errors.ClientError) as info:
        ask(judge)
    assert info.value.code == 429
    assert judge.is_retryable(info.value)
    assert judge.retry_after(info.value) == 33.0


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_client_errors_raise_after_one_request(provider, make, fake_server, status):
    fake_server.enqueue(Fault.http(status), times=None)
    events = []
    with pytest.raises(Exception) as info:
        ask(make(), retry=True, on_retry=events.append)
    exc = info.value
    if provider == "gemini":
        assert isinstance(exc, genai_errors.ClientError) and exc.code == status
    else:
        assert isinstance(exc, openai.APIStatusError) and exc.status_code == status
    assert fake_server.count() == 1
    assert events == []


def test_permanent_outage_stops_after_max_attempts(provider, make, fake_server):
    fake_server.enqueue(Fault.unavailable(), times=None)
    with pytest.raises(Exception) as info:
        ask(make(max_attempts=3), retry=True)
    exc = info.value
    if provider == "gemini":
        assert isinstance(exc, genai_errors.ServerError) and exc.code == 503
    else:
        assert isinstance(exc, openai.InternalServerError) and exc.status_code == 503
    assert fake_server.count() == 3


@pytest.mark.parametrize("fault", [Fault.malformed_body(), Fault.foreign_body()], ids=["not-json", "not-the-provider"])
def test_a_200_body_that_is_not_a_provider_response_is_transient(provider, make, fake_server, fault):
    fake_server.enqueue(fault, times=None)
    with pytest.raises(MalformedResponse, match="HTTP 200 with a body that is not"):
        ask(make(max_attempts=3), retry=True)
    assert fake_server.count() == 3


# --------------------------------------------------------------------------------------------
# The fake server itself


def test_fake_verdict_rules():
    assert expected_verdict("likes tea") == "supported"
    assert expected_verdict(f"likes tea {UNSUPPORTED_MARKER.upper()}") == "unsupported"
    hashed = [expected_verdict(f"assertion {i}", "hash") for i in range(200)]
    assert 60 < hashed.count("supported") < 140
    assert hashed == [expected_verdict(f"  assertion {i} ", "hash") for i in range(200)]
    with pytest.raises(ValueError):
        expected_verdict("x", "coin")


def test_fake_answers_any_schema():
    schema = {
        "type": "object",
        "$defs": {"Fact": {"type": "object", "properties": {
            "fact_id": {"type": "string"}, "covered_by": {"type": "array", "items": {"type": "string"}}}}},
        "properties": {
            "facts": {"type": "array", "items": {"$ref": "#/$defs/Fact"}},
            "best": {"anyOf": [{"type": "null"}, {"$ref": "#/$defs/Fact"}]},
            "verdict": {"type": "STRING", "enum": ["supported", "unsupported"]},
            "score": {"type": "number"}, "ok": {"type": "boolean"},
        },
    }
    value = synthesize(schema, hints={"verdict": "unsupported"})
    assert value == {"facts": [], "best": {"fact_id": "", "covered_by": []}, "verdict": "unsupported",
                     "score": 0, "ok": False}


class CoveredFact(BaseModel):
    fact_id: str
    fact: str
    covered_by: list[str]


class CoverageAnswer(BaseModel):
    facts: list[CoveredFact]


@pytest.mark.parametrize("with_facts", [True, False])
def test_fake_coverage_answer(provider, make, with_facts):
    facts = "<<<FACTS\n[f1] Has a cat named Miso\n[f2] Works as a nurse\nFACTS>>>\n" if with_facts else ""
    user = (f"<<<SOURCE\n{SOURCE}\nSOURCE>>>\n{facts}<<<ASSERTIONS\n"
            "[a1] The user has a cat named Miso.\n[a2] The user likes jazz.\n"
            "[a3] The user works as a nurse on night shifts, and has a cat named Miso\n"
            "[a4] Says: I work as a nurse on night shifts.\nASSERTIONS>>>")
    call = JudgeCall("c", "coverage@test", Prompt(SYSTEM, user), CoverageAnswer, 0, {"persona_id": "p1"})
    answer = ask(make(), call)
    got = {f["fact_id"]: f["covered_by"] for f in answer.parsed["facts"]}
    if with_facts:
        assert got == {"f1": ["a1", "a3"], "f2": ["a3"]}
    else:
        assert got == {"F1": [], "F2": ["a4"]}


def test_fake_hash_rule_end_to_end(provider, make, fake_server):
    fake_server.verdict_rule = "hash"
    texts = [f"The user enjoys activity number {i}." for i in range(6)]
    judge = make()

    async def go():
        try:
            return [await judge.generate(make_call(t)) for t in texts]
        finally:
            await judge.aclose()

    assert [a.parsed["verdict"] for a in asyncio.run(go())] == [expected_verdict(t, "hash") for t in texts]


def test_fake_fault_filters_and_custom_routes(monkeypatch, fake_server):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("GEMINI_API_KEY", KEY)
    fake_server.enqueue(Fault.safety(), route="gemini", times=None)
    fake_server.enqueue(Fault.truncated(), contains="horse")
    o = make_judge("openai:gpt-4o-mini", base_url=fake_server.openai_base_url)
    g = make_judge("gemini:gemini-2.5-flash", base_url=fake_server.url)
    assert ask(o).finish_reason == "stop"
    assert ask(o, make_call("owns a horse")).finish_reason == "length"
    assert ask(o, make_call("owns a horse")).finish_reason == "stop"
    assert ask(g).finish_reason == "safety"

    # A new endpoint gets the fault machinery for free.
    from fake_server import Reply

    fake_server.add_route("GET", r"^/v1/files/(?P<file_id>[^/]+)$", "openai.files.get", "openai",
                          lambda server, req, fault: Reply(200, {"id": req.params["file_id"], "object": "file"}))
    fake_server.enqueue(Fault.rate_limit(1.5), route="openai.files")
    url = f"{fake_server.url}/v1/files/file-1"
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(url)
    assert info.value.code == 429 and info.value.headers["retry-after"] == "1.5"
    assert json.load(urllib.request.urlopen(url)) == {"id": "file-1", "object": "file"}
    assert fake_server.count(route="openai.files") == 2
    assert fake_server.counters["status:429"] == 1


def test_fake_serves_gemini_default_api_version(fake_server):
    from google import genai
    from google.genai import types

    client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=fake_server.url))
    response = client.models.generate_content(model="gemini-2.0-flash", contents="hello")
    client.close()
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert fake_server.requests[0].path == "/v1/models/gemini-2.0-flash:generateContent"


def test_fake_unknown_path_is_404(fake_server):
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{fake_server.url}/v2/nothing")
    assert info.value.code == 404


def test_fake_standalone_process_and_control_endpoints(tmp_path):
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("fake_server.py")), "--latency", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        post = lambda path, body: urllib.request.urlopen(urllib.request.Request(  # noqa: E731
            url + path, data=json.dumps(body).encode(), method="POST"))
        post("/_fake/faults", {"faults": [{"kind": "status", "status": 503, "times": 2}]})
        env = dict(os.environ, OPENAI_API_KEY=KEY)
        code = ("import openai,sys\n"
                "c=openai.OpenAI(base_url=sys.argv[1]+'/v1',max_retries=0)\n"
                "for _ in range(3):\n"
                "  try: c.chat.completions.create(model='m',messages=[{'role':'user','content':'hi'}])\n"
                "  except openai.InternalServerError: print('503')\n")
        out = subprocess.run([sys.executable, "-c", code, url], env=env, capture_output=True, text=True, timeout=60)
        assert out.stdout.split() == ["503", "503"], out.stderr
        stats = json.load(urllib.request.urlopen(url + "/_fake/stats"))
        assert stats["requests"] == 3 and stats["counters"]["status:503"] == 2
        post("/_fake/reset", {})
        assert json.load(urllib.request.urlopen(url + "/_fake/stats"))["requests"] == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0


# --------------------------------------------------------------------------------------------
# OpenAI-compatible servers (issue 20): response formats, fail fast, log-odds, slots


from memjudge import cli as memjudge_cli  # noqa: E402
from memjudge.judges.base import first_json_object, verdict_log_odds  # noqa: E402
from memjudge.judges.panel import judge_config  # noqa: E402

COMPAT_FACTS = [
    {"persona_id": "p0", "fact_id": "f1", "text": "hobby number 1"},
    {"persona_id": "p0", "fact_id": "f2", "text": "skydiving"},
    {"persona_id": "p1", "fact_id": "f3", "text": "hobby number 5"},
]


def compat_inputs(tmp_path, n: int = 8) -> tuple[Path, Path, Path]:
    from scripted_judge import candidates_frame, sources_frame

    cand, src, facts = tmp_path / "candidates.jsonl", tmp_path / "sources.jsonl", tmp_path / "facts.jsonl"
    candidates_frame(n, 4).to_json(cand, orient="records", lines=True)
    sources_frame(n, 4).to_json(src, orient="records", lines=True)
    facts.write_text("".join(json.dumps(x) + "\n" for x in COMPAT_FACTS))
    return cand, src, facts


def score_main(tmp_path, url, *args, rubric="support", out="run", spec="openai:qwen-local", n=8):
    cand, src, facts = compat_inputs(tmp_path, n)
    argv = ["score", str(cand), "--sources", str(src), "--judge", spec, "--base-url", url, "--no-progress",
            "--out", str(tmp_path / out), "--cache-dir", str(tmp_path / "cache"), "--rubric", rubric, *map(str, args)]
    if rubric == "coverage":
        argv += ["--facts", str(facts)]
    return memjudge_cli.main(argv)


def rows_of(run_dir: Path) -> list[dict]:
    name = "labels.jsonl" if (run_dir / "labels.jsonl").exists() else "coverage.jsonl"
    return [json.loads(x) for x in (run_dir / name).read_text().splitlines()]


@pytest.mark.parametrize("rubric", ["support", "coverage"])
def test_auto_falls_back_to_json_object_on_a_llama_cpp_python_server(fake_server, tmp_path, rubric):
    fake_server.compat = "llama-cpp-python"
    fake_server.models = ["/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"]
    assert score_main(tmp_path, fake_server.openai_base_url, rubric=rubric) == 0
    rows = rows_of(tmp_path / "run")
    if rubric == "support":
        assert all(r["verdict"] for r in rows) and {r["verdict"] for r in rows} == {"supported", "unsupported"}
        # no system_fingerprint and an echoed model name: the model list says what is served
        assert {r["model_version"] for r in rows} == {"/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"}
    else:
        assert len(rows) == 3 and all(r["error"] is None for r in rows)
    chats = [r for r in fake_server.requests if r.route == "openai.chat"]
    # one refused json_schema request (HTTP 500, a validation error: not retried), then json_object
    assert [r.status for r in chats].count(500) == 1
    assert chats[0].json["response_format"]["type"] == "json_schema"
    assert all(r.json["response_format"]["type"] == "json_object" and r.json["response_format"]["schema"] for r in chats[1:])
    assert "JSON schema" in chats[1].system
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert summary["retries"] == 0 and summary["errors"] == 0
    assert summary["judge_settings"]["response_format"] == "json_object"
    assert config["judge"]["effective"]["response_format"] == "json_object"
    assert config["judge"]["response_format"] == "auto"  # part of the cache key (judge identity)
    assert config["judge"]["effective"]["server_slots"] == 1


@pytest.mark.parametrize("rubric", ["support", "coverage"])
def test_a_refused_format_fails_fast_and_still_writes_null_rows(fake_server, tmp_path, rubric, capsys):
    fake_server.compat = "llama-cpp-python"
    code = score_main(tmp_path, fake_server.openai_base_url, "--response-format", "json_schema", "--concurrency", "1",
                      rubric=rubric, n=40)
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Input should be" in err[0]
    # a request-validation error is not transient: no retries; the run stops after 3 requests
    # (support: 40 calls) or when its 2 calls (coverage: 2 personas with facts) have failed
    if rubric == "support":
        assert "3 requests in a row failed" in err[0] and fake_server.count(route="openai.chat") == 3
    else:
        assert "every call failed" in err[0] and fake_server.count(route="openai.chat") == 2
    rows = rows_of(tmp_path / "run")
    assert rows and all(r["error"] for r in rows)
    if rubric == "support":
        assert len(rows) == 40 and all(r["verdict"] is None for r in rows)
        assert sum(r["error"].startswith("not asked") for r in rows) == 37
    else:
        assert all(r["covered_by"] is None for r in rows)


def test_every_call_failing_exits_non_zero_with_its_rows(fake_server, tmp_path, capsys):
    fake_server.enqueue(Fault.http(400), times=None)
    assert score_main(tmp_path, fake_server.openai_base_url, "--response-format", "json_object", n=2, rubric="coverage") == 2
    assert "every call failed" in capsys.readouterr().err
    rows = rows_of(tmp_path / "run")
    assert rows and all(r["error"] and "400" in r["error"] for r in rows)


def test_server_down_is_one_line_within_seconds(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert score_main(tmp_path, f"http://127.0.0.1:{port}/v1") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "cannot reach" in err[0] and "is the server running?" in err[0]
    assert all(r["error"].startswith("not asked") for r in rows_of(tmp_path / "run"))


@pytest.mark.parametrize("spec", ["openai:qwen-local", "gemini:gemini-2.5-flash"])
def test_nothing_listening_at_the_base_url_stops_the_run_at_once_naming_it(tmp_path, capsys, monkeypatch, spec):
    """Issue 19 item 6: a base URL with nothing listening (connection refused) is one line
    naming the URL, exit 2, before any request is sent: no retries against a closed port."""
    import socket

    from memjudge.judges.gemini import GeminiJudge
    from memjudge.judges.openai import OpenAIJudge

    attempts = []
    for cls in (OpenAIJudge, GeminiJudge):
        real = cls.generate

        async def counting(self, call, real=real):
            attempts.append(call.key)
            return await real(self, call)

        monkeypatch.setattr(cls, "generate", counting)
    with socket.socket() as s:  # a free port on 127.0.0.1 that nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}" + ("/v1" if spec.startswith("openai") else "")
    assert score_main(tmp_path, url, spec=spec) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"nothing answers at {url} — is the server running?" in err[0] and spec in err[0]
    assert attempts == []  # stopped before the first request, not after 8 retries of each
    rows = rows_of(tmp_path / "run")
    assert len(rows) == 8 and all(r["verdict"] is None and r["error"].startswith("not asked") for r in rows)


def test_auto_steps_down_to_text_when_the_format_is_ignored(fake_server, tmp_path):
    fake_server.compat = "ignore-format"
    assert score_main(tmp_path, fake_server.openai_base_url, "--concurrency", "1") == 0
    rows = rows_of(tmp_path / "run")
    assert all(r["verdict"] for r in rows)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["judge_settings"]["response_format"] == "text"
    chats = [r for r in fake_server.requests if r.route == "openai.chat"]
    assert "response_format" not in chats[-1].json
    # two answers in prose per mode (json_schema, json_object), then text mode with extraction:
    # the first call needed its two re-asks, every later call none
    assert summary["judge_settings"]["adapted"] == ["json_schema ignored: json_object", "json_object ignored: text"]
    assert summary["reasks"] == 2 and summary["errors"] == 0


def test_response_format_is_part_of_the_cache_key(fake_server, tmp_path):
    url = fake_server.openai_base_url
    assert score_main(tmp_path, url, "--response-format", "text", out="a") == 0
    n = fake_server.count(route="openai.chat")
    assert score_main(tmp_path, url, "--response-format", "text", out="b") == 0
    assert fake_server.count(route="openai.chat") == n  # same mode: all from the cache
    assert score_main(tmp_path, url, "--response-format", "json_object", out="c") == 0
    assert fake_server.count(route="openai.chat") == 2 * n
    sent = [r.json for r in fake_server.requests if r.route == "openai.chat"]
    assert "response_format" not in sent[0] and sent[-1]["response_format"]["type"] == "json_object"


def test_text_mode_takes_the_first_json_object(fake_server, tmp_path):
    fake_server.compat = "ignore-format"
    assert score_main(tmp_path, fake_server.openai_base_url, "--response-format", "text") == 0
    rows = rows_of(tmp_path / "run")
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert all(r["verdict"] for r in rows) and summary["reasks"] == 0


@pytest.mark.parametrize("provider_name", ["openai", "gemini"])
def test_log_odds_from_token_logprobs(fake_server, tmp_path, monkeypatch, provider_name):
    monkeypatch.setenv(KEY_VARS[provider_name], KEY)
    fake_server.logprobs = True
    fake_server.verdict_logprobs = (-0.2, -3.0)
    url = fake_server.openai_base_url if provider_name == "openai" else fake_server.url
    spec = f"{provider_name}:{MODELS[provider_name]}"
    assert score_main(tmp_path, url, spec=spec) == 0
    rows = rows_of(tmp_path / "run")
    for r in rows:  # log P(supported) - log P(unsupported), read at the verdict
        assert r["judge_score"] == pytest.approx(2.8 if r["verdict"] == "supported" else -2.8)
    assert {r["verdict"] for r in rows} == {"supported", "unsupported"}
    sent = [r for r in fake_server.requests if r.route in ("openai.chat", "gemini.generate")][0].json
    if provider_name == "openai":
        assert sent["logprobs"] is True and sent["top_logprobs"] == 20
    else:
        assert sent["generationConfig"]["responseLogprobs"] is True
    # --no-logprobs: not asked for, scores null (never guessed); a different cache key
    assert score_main(tmp_path, url, "--no-logprobs", spec=spec, out="off") == 0
    assert all(r["judge_score"] is None for r in rows_of(tmp_path / "off"))
    sent = [r for r in fake_server.requests if r.route in ("openai.chat", "gemini.generate")][-1].json
    assert "logprobs" not in sent and "responseLogprobs" not in sent.get("generationConfig", {})


def test_without_logprobs_in_the_answer_the_score_is_null(fake_server, tmp_path):
    assert score_main(tmp_path, fake_server.openai_base_url) == 0  # asked, but the fake sends none
    assert all(r["judge_score"] is None and r["verdict"] for r in rows_of(tmp_path / "run"))


def test_waiting_for_the_single_slot_is_not_a_timeout(fake_server, tmp_path):
    # One slot, 0.3 s per answer, a 1 s timeout and 6 requests at once: queued at the server
    # the last ones would time out; gated by memjudge (the slot count comes from the server)
    # each request is timed from when it is sent.
    fake_server.compat = "llama-cpp-python"
    fake_server.models = ["qwen"]
    fake_server.slot_latency_s = 0.3
    panel = tmp_path / "judges.toml"
    panel.write_text('[[judge]]\nspec = "openai:qwen"\ntimeout_s = 1.0\nmax_attempts = 1\nresponse_format = "json_object"\n')
    assert score_main(tmp_path, fake_server.openai_base_url, "--judges-file", panel, "--concurrency", "6", spec="openai:qwen", n=6) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["errors"] == 0 and summary["judge_settings"]["server_slots"] == 1


def test_verdict_log_odds_hand_computed():
    import math

    text = '{"verdict": "unsupported", "x": 1}'
    # the token covering the verdict starts with the quote: alternatives must agree with it
    tokens = [('{"verdict": ', 0.0, []), ('"un', math.log(0.6), [('"un', math.log(0.6)), ('"u', math.log(0.1)),
                                                                   ('"sup', math.log(0.2)), ('" sup', math.log(0.05)), ("un", -1.0)]),
              ('supported", "x": 1}', 0.0, [])]
    assert verdict_log_odds(text, tokens) == pytest.approx(math.log(0.2) - math.log(0.7))
    assert verdict_log_odds(text, tokens[:2]) is None  # tokens do not spell the text
    only_one = [tokens[0], ('"un', 0.0, [('"un', 0.0)]), tokens[2]]
    assert verdict_log_odds(text, only_one) is None  # "supported" absent: never guessed
    assert verdict_log_odds('{"facts": []}', [('{"facts": []}', 0.0, [])]) is None
    assert first_json_object('Sure.\n```json\n{"a": {"b": 1}}\n``` and {"c": 2}') == '{"a": {"b": 1}}'
    assert first_json_object("no {json here") is None


def test_response_format_and_logprobs_through_the_python_api(fake_server, tmp_path):
    from memjudge.judges import JudgeConfig
    from memjudge.scoring.engine import score_run

    cand, src, _ = compat_inputs(tmp_path, 4)
    fake_server.compat = "llama-cpp-python"
    r = score_run(cand, src,
                  judge_config("openai:qwen", base_url=fake_server.openai_base_url, response_format="json_object", logprobs=False),
                  out=tmp_path / "api", cache_dir=tmp_path / "cache", progress=False)
    assert r.summary.judge_settings["response_format"] == "json_object" and r.labels["verdict"].notna().all()
    sent = [q.json for q in fake_server.requests if q.route == "openai.chat"]
    assert all(b["response_format"]["type"] == "json_object" and "logprobs" not in b for b in sent)
    # the same through a JudgeConfig (a judges.toml entry has the same fields)
    config = JudgeConfig(spec="openai:qwen", base_url=fake_server.openai_base_url, response_format="text")
    r = score_run(cand, src, config, out=tmp_path / "cfg", cache_dir=tmp_path / "cache", progress=False)
    assert r.summary.judge_settings["response_format"] == "text"
    with pytest.raises(Exception, match="response_format"):
        JudgeConfig(spec="openai:qwen", response_format="yaml")
