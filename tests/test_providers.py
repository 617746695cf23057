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

import pytest
from fake_server import UNSUPPORTED_MARKER, Fault, FakeServer, expected_verdict, synthesize
from google.genai import errors as genai_errors
import httpx2
import openai
from pydantic import BaseModel

from memjudge.errors import UsageError
from memjudge.judges.base import MalformedResponse
from memjudge.judges import JudgeCall, Prompt, make_judge
from memjudge.retry import call_with_retry

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
    with pytest.raises(UsageError) as info:
        make_judge(f"{provider}:{MODELS[provider]}")
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
