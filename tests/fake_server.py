"""A local fake of the Gemini and OpenAI HTTP APIs, for tests and benchmarks.

The real SDK clients talk to it over 127.0.0.1 exactly as they would to the real services
(both SDKs use httpx2, which respx cannot intercept). It answers every request with a valid,
deterministic judge answer unless a scripted fault says otherwise, and records every request.

    with FakeServer(latency_s=0.1) as server:
        server.enqueue(Fault.rate_limit(0.2, where="body"))   # next request: 429 + RetryInfo
        server.enqueue(Fault.unavailable(), times=None)          # then 503 forever
        client = genai.Client(api_key="k", http_options=HttpOptions(base_url=server.url, ...))
        ...
        server.requests[-1].json, server.count(route="gemini.generate")

Default answers. The answer follows the JSON schema the request asked for (Gemini
`responseJsonSchema`/`responseSchema`, OpenAI `response_format.json_schema.schema`). A field
named `verdict` gets `expected_verdict(item)`, where `item` is the text between the rubric's
`<<<ASSERTION` and `ASSERTION>>>` markers (the whole user message when there are none):
rule "marker" (default) says "unsupported" iff the item contains UNSUPPORTED_MARKER; rule
"hash" gives a stable mix of both labels from sha256(item). A supported verdict's `evidence`
quotes the first words of the `<<<SOURCE` block verbatim. A coverage prompt (with an
`<<<ASSERTIONS` block) gets `facts` = `coverage_facts(user)`: each listed fact (or source
sentence) covered by the assertions whose text contains it. Set `server.answer_fn` to answer
anything else.

Routing. `ROUTES` is a table of (method, regex, name, provider, handler). Faults are applied
centrally before the handler runs (status errors are rendered in the route's provider's error
format), so an added endpoint (files, batches) gets every transport fault for free:
`server.add_route("POST", r"^/v1/files$", "openai.files.create", "openai", handler)`.

OpenAI-compatible servers (issue 20). `server.compat = "llama-cpp-python"` behaves like
llama-cpp-python's server: `response_format` type `json_schema` is refused with HTTP 500 and
a pydantic request-validation body (its real answer), `{"type": "json_object", "schema":
...}` is followed, answers carry no `system_fingerprint`, `GET /v1/models` lists one model
owned by "me", and requests are computed one at a time (one slot). `server.compat =
"ignore-format"` accepts every response format and answers in prose with the JSON inside a
code fence. `server.logprobs = True` adds token log-probabilities to answers that ask for
them (OpenAI `logprobs`/`top_logprobs`, Gemini `responseLogprobs`): tokens are words,
spaces and punctuation of the answer text; at the verdict's value the chosen word has
`verdict_logprobs[0]` and the other verdict word `verdict_logprobs[1]`. `server.models`
(a list of model ids) serves `GET /v1/models`. Without a schema in the request the answer
follows the JSON schema spelt out at the end of the system prompt, if any.

Standalone (e.g. for bench/ in a separate process, so the server does not compete with the
client for the GIL): `python tests/fake_server.py --port 0 --latency 0.1` prints the base URL
on its first stdout line. `GET /_fake/stats`, `POST /_fake/reset` and `POST /_fake/faults`
(`{"faults": [{"kind": "status", "status": 503, "times": 2}, ...]}`) control it remotely.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import signal
import socket
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

UNSUPPORTED_MARKER = "[unsupported]"
SYSTEM_FINGERPRINT = "fp_fake0001"

# ---------------------------------------------------------------------------------------------
# Faults


@dataclass(frozen=True)
class Fault:
    """What the server does to one request instead of (or before) answering normally.

    kind: "ok" (answer normally, after `latency_s`), "status" (HTTP error `status`, with an
    optional retry delay `delay_s` placed per `where`: "header" = Retry-After seconds,
    "header_ms" = retry-after-ms, "body" = Gemini RetryInfo.retryDelay), "drop" (close the
    socket without a response), "hang" (answer only after `latency_s`, for client timeouts),
    "malformed_body" (HTTP 200 whose body is not JSON), "malformed_answer" (a valid response
    whose answer text is not JSON), "safety" (Gemini finishReason SAFETY / OpenAI
    content_filter), "prompt_blocked" (Gemini promptFeedback.blockReason; OpenAI
    content_filter), "truncated" (Gemini MAX_TOKENS / OpenAI length, with half an answer),
    "empty" (finish STOP with no text), "trickle" (a normal answer whose body is sent one byte
    every `delay_s` seconds: each read is quick, the whole response is not), "foreign_body"
    (HTTP 200 with a JSON body that is not the provider's format).
    """

    kind: str
    status: int | None = None
    delay_s: float | None = None
    where: str = "header"
    latency_s: float = 0.0

    KINDS = (
        "ok", "status", "drop", "hang", "malformed_body", "malformed_answer", "safety",
        "prompt_blocked", "truncated", "empty", "trickle", "foreign_body",
    )

    def __post_init__(self):
        if self.kind not in self.KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}")
        if self.kind == "status" and not (self.status and 400 <= self.status <= 599):
            raise ValueError("a status fault needs an HTTP error status")
        if self.where not in ("header", "header_ms", "body"):
            raise ValueError(f"unknown delay placement {self.where!r}")

    @classmethod
    def http(cls, status: int, delay_s: float | None = None, where: str = "header") -> Fault:
        return cls("status", status=status, delay_s=delay_s, where=where)

    @classmethod
    def rate_limit(cls, delay_s: float | None = None, where: str = "header") -> Fault:
        return cls.http(429, delay_s, where)

    @classmethod
    def server_error(cls) -> Fault:
        return cls.http(500)

    @classmethod
    def unavailable(cls, delay_s: float | None = None, where: str = "header") -> Fault:
        return cls.http(503, delay_s, where)

    @classmethod
    def drop(cls) -> Fault:
        return cls("drop")

    @classmethod
    def hang(cls, seconds: float) -> Fault:
        return cls("hang", latency_s=seconds)

    @classmethod
    def latency(cls, seconds: float) -> Fault:
        return cls("ok", latency_s=seconds)

    @classmethod
    def malformed_body(cls) -> Fault:
        return cls("malformed_body")

    @classmethod
    def malformed_answer(cls) -> Fault:
        return cls("malformed_answer")

    @classmethod
    def safety(cls) -> Fault:
        return cls("safety")

    @classmethod
    def prompt_blocked(cls) -> Fault:
        return cls("prompt_blocked")

    @classmethod
    def truncated(cls) -> Fault:
        return cls("truncated")

    @classmethod
    def empty(cls) -> Fault:
        return cls("empty")

    @classmethod
    def trickle(cls, interval_s: float = 0.05) -> Fault:
        return cls("trickle", delay_s=interval_s)

    @classmethod
    def foreign_body(cls) -> Fault:
        return cls("foreign_body")

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


@dataclass
class _Script:
    fault: Fault
    remaining: int | None  # None: forever
    route: str | None  # route name prefix ("gemini", "openai.chat", ...)
    contains: str | None  # substring of the request's prompt (system + user) or body
    when: Callable[[RecordedRequest], bool] | None

    def matches(self, req: RecordedRequest) -> bool:
        if self.route is not None and not (req.route or "").startswith(self.route):
            return False
        if self.contains is not None and self.contains not in (req.prompt_text() or req.text()):
            return False
        return self.when is None or bool(self.when(req))


# ---------------------------------------------------------------------------------------------
# Requests and replies


@dataclass
class RecordedRequest:
    time: float  # time.monotonic() on arrival, before any latency
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: bytes
    json: Any
    route: str | None = None
    provider: str | None = None
    params: dict[str, str] = field(default_factory=dict)
    fault: str = "ok"  # the fault kind applied ("ok" when answered normally)
    status: int | None = None  # the status sent (None when the connection was dropped)

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    @property
    def model(self) -> str | None:
        if "model" in self.params:
            return self.params["model"]
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def system(self) -> str | None:
        wire = WIRES.get(self.provider or "")
        return wire.system(self.json) if wire and isinstance(self.json, dict) else None

    @property
    def user(self) -> str | None:
        wire = WIRES.get(self.provider or "")
        return wire.user(self.json) if wire and isinstance(self.json, dict) else None

    def prompt_text(self) -> str:
        return "\n".join(t for t in (self.system, self.user) if t)

    @property
    def generation(self) -> dict[str, Any]:
        """Generation parameters in one provider-neutral shape: temperature, seed,
        max_output_tokens, thinking_budget, schema (None when absent)."""
        wire = WIRES.get(self.provider or "")
        return wire.generation(self.json) if wire and isinstance(self.json, dict) else {}


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list → JSON; bytes/str sent as is
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    trickle_s: float | None = None  # send the body one byte at a time, this far apart


Handler = Callable[["FakeServer", RecordedRequest, Fault], Reply]


@dataclass(frozen=True)
class Route:
    method: str
    pattern: re.Pattern[str]
    name: str
    provider: str | None
    handler: Handler


# ---------------------------------------------------------------------------------------------
# Wire formats


def _first(d: dict, *names: str, default: Any = None) -> Any:
    # google-genai sends camelCase at the top level but snake_case inside some nested configs.
    for name in names:
        if isinstance(d, dict) and d.get(name) is not None:
            return d[name]
    return default


def _parts_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, dict):
        return ""
    return "".join(p.get("text", "") for p in content.get("parts") or [] if isinstance(p, dict))


def _estimate_tokens(text: str) -> int:
    return len(text) // 4 + 1


class GeminiWire:
    STATUS_NAMES = {
        400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
        408: "DEADLINE_EXCEEDED", 409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL",
        502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
    }

    @staticmethod
    def system(body: dict) -> str | None:
        si = _first(body, "systemInstruction", "system_instruction")
        return _parts_text(si) if si is not None else None

    @staticmethod
    def user(body: dict) -> str | None:
        contents = body.get("contents") or []
        users = [c for c in contents if isinstance(c, dict) and c.get("role", "user") == "user"]
        return _parts_text(users[-1]) if users else None

    @staticmethod
    def generation(body: dict) -> dict[str, Any]:
        gc = _first(body, "generationConfig", "generation_config", default={})
        tc = _first(gc, "thinkingConfig", "thinking_config", default=None)
        return {
            "temperature": gc.get("temperature"),
            "seed": gc.get("seed"),
            "max_output_tokens": _first(gc, "maxOutputTokens", "max_output_tokens"),
            "thinking_budget": _first(tc, "thinkingBudget", "thinking_budget") if tc else None,
            "thinking_config": tc,
            "response_mime_type": _first(gc, "responseMimeType", "response_mime_type"),
            "schema": _first(gc, "responseJsonSchema", "response_json_schema", "responseSchema", "response_schema"),
        }

    @classmethod
    def error(cls, status: int, message: str, delay_s: float | None, where: str) -> Reply:
        err: dict[str, Any] = {"code": status, "message": message, "status": cls.STATUS_NAMES.get(status, "UNKNOWN")}
        headers = {}
        if delay_s is not None and where == "body":
            err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{delay_s:g}s"}]
        elif delay_s is not None:
            headers = _delay_headers(delay_s, where)
        return Reply(status, {"error": err}, headers)


class OpenAIWire:
    ERROR_TYPES = {
        400: "invalid_request_error", 401: "invalid_api_key", 403: "permission_denied", 404: "model_not_found",
        408: "timeout", 409: "conflict", 429: "rate_limit_exceeded", 500: "server_error", 503: "server_error",
    }

    @staticmethod
    def _messages(body: dict, role: str) -> list[str]:
        out = []
        for m in body.get("messages") or []:
            if isinstance(m, dict) and m.get("role") in ((role, "developer") if role == "system" else (role,)):
                c = m.get("content")
                out.append(c if isinstance(c, str) else "".join(p.get("text", "") for p in c or [] if isinstance(p, dict)))
        return out

    @classmethod
    def system(cls, body: dict) -> str | None:
        found = cls._messages(body, "system")
        return "\n".join(found) if found else None

    @classmethod
    def user(cls, body: dict) -> str | None:
        found = cls._messages(body, "user")
        return found[-1] if found else None

    @staticmethod
    def generation(body: dict) -> dict[str, Any]:
        rf = body.get("response_format") or {}
        return {
            "temperature": body.get("temperature"),
            "seed": body.get("seed"),
            "max_output_tokens": _first(body, "max_completion_tokens", "max_tokens"),
            "thinking_budget": None,
            "reasoning_effort": body.get("reasoning_effort"),
            "response_format_type": rf.get("type"),
            "schema": ((rf.get("json_schema") or {}).get("schema") or rf.get("schema")) if isinstance(rf, dict) else None,
        }

    @classmethod
    def error(cls, status: int, message: str, delay_s: float | None, where: str) -> Reply:
        kind = cls.ERROR_TYPES.get(status, "api_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": kind}}
        return Reply(status, body, _delay_headers(delay_s, where) if delay_s is not None else {})


WIRES: dict[str, Any] = {"gemini": GeminiWire, "openai": OpenAIWire}


def _delay_headers(delay_s: float, where: str) -> dict[str, str]:
    if where == "header_ms":
        return {"retry-after-ms": f"{delay_s * 1000:g}"}
    return {"retry-after": f"{delay_s:g}"}


# ---------------------------------------------------------------------------------------------
# Default answers


def _block(text: str, name: str, last: bool = False) -> str | None:
    found = re.findall(rf"<<<{name}\n(.*?)\n{name}>>>", text or "", flags=re.S)
    if not found:
        return None
    return (found[-1] if last else found[0]).strip()


def expected_verdict(item: str, rule: str = "marker") -> str:
    """The verdict the fake judge gives an item (an assertion's text)."""
    if rule == "marker":
        return "unsupported" if UNSUPPORTED_MARKER in item.lower() else "supported"
    if rule == "hash":
        return "supported" if hashlib.sha256(item.strip().encode()).digest()[0] % 2 == 0 else "unsupported"
    raise ValueError(f"unknown verdict rule {rule!r}")


def _resolve(schema: Any, root: dict) -> dict:
    while isinstance(schema, dict) and "$ref" in schema:
        path = schema["$ref"].lstrip("#/").split("/")
        target: Any = root
        for part in path:
            target = target.get(part, {}) if isinstance(target, dict) else {}
        schema = target
    return schema if isinstance(schema, dict) else {}


def synthesize(schema: Any, root: dict | None = None, hints: dict[str, Any] | None = None, name: str | None = None) -> Any:
    """A minimal instance of a JSON schema (JSON Schema or Gemini's uppercase OpenAPI subset);
    `hints` give values for named properties when they fit the schema."""
    root = root if root is not None else (schema if isinstance(schema, dict) else {})
    hints = hints or {}
    schema = _resolve(schema, root)
    for key in ("anyOf", "any_of", "oneOf", "one_of"):
        if schema.get(key):
            branches = [_resolve(b, root) for b in schema[key]]
            non_null = [b for b in branches if str(b.get("type", "")).lower() != "null"]
            return synthesize((non_null or branches)[0], root, hints, name)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if str(k).lower() != "null"), "null")
    kind = str(kind).lower() if kind else ("object" if "properties" in schema else "string")
    if schema.get("enum"):
        hint = hints.get(name)
        return hint if hint in schema["enum"] else schema["enum"][0]
    if kind == "object":
        return {k: synthesize(v, root, hints, k) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        hint = hints.get(name)
        return hint if isinstance(hint, list) else []
    if kind == "string":
        hint = hints.get(name)
        return hint if isinstance(hint, str) else ""
    if kind in ("number", "integer"):
        return 0
    if kind == "boolean":
        return False
    return None


def _listed(block: str | None) -> list[tuple[str, str]]:
    """(id, text) of a list block's entries: one JSON object per line, as memjudge's rubrics
    render them, or `[id] text` lines."""
    out = []
    for line in (block or "").split("\n"):
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict) and "id" in obj:
                out.append((str(obj["id"]), str(obj.get("text", ""))))
        else:
            m = re.match(r"^\[(.+?)\] (.*)$", line)
            if m:
                out.append((m.group(1), m.group(2)))
    return out


def _norm(text: str) -> str:
    return " ".join(text.lower().split()).strip(" .")


def coverage_facts(user: str) -> list[dict[str, Any]]:
    """The coverage answer: each fact of the `<<<FACTS` block (else each sentence of the
    source, as F1, F2, ...) with the `<<<ASSERTIONS` whose text contains the fact's text."""
    facts = _listed(_block(user, "FACTS"))
    if not facts:
        sentences = [t for t in re.split(r"(?<=[.!?])\s+|\n+", _block(user, "SOURCE") or "") if t.strip()]
        facts = [(f"F{i}", t.strip()) for i, t in enumerate(sentences, 1)]
    assertions = _listed(_block(user, "ASSERTIONS"))
    return [{"fact_id": fid, "fact": text, "covered_by": [aid for aid, at in assertions if _norm(text) in _norm(at)]}
            for fid, text in facts]


def default_answer(server: FakeServer, req: RecordedRequest) -> str:
    user = req.user or ""
    item = _block(user, "ASSERTION", last=True) or user
    source = _block(user, "SOURCE") or ""
    verdict = expected_verdict(item, server.verdict_rule)
    evidence = " ".join(source.split()[:8]) if verdict == "supported" else ""
    hints: dict[str, Any] = {"verdict": verdict, "evidence": evidence,
                             "rationale": f"fake judge ({server.verdict_rule} rule)"}
    if "<<<ASSERTIONS" in user:
        hints["facts"] = coverage_facts(user)
    schema = req.generation.get("schema")
    if not isinstance(schema, dict):
        schema = _prompt_schema(req.system)
    if not isinstance(schema, dict):
        return json.dumps(hints)
    return json.dumps(synthesize(schema, hints=hints))


_PROMPT_SCHEMA = re.compile(r"JSON schema:\n(\{.*\})\s*$", re.DOTALL)


def _prompt_schema(system: str | None) -> Any:
    m = _PROMPT_SCHEMA.search(system or "")
    if m is None:
        return None
    try:
        return json.loads(m.group(1))
    except ValueError:
        return None


_TOKEN = re.compile(r"\w+|\s+|[^\w\s]")
_VERDICT_AT = re.compile(r'"verdict"\s*:\s*"')


def fake_logprobs(text: str, verdict_logprobs: tuple[float, float]) -> list[tuple[str, float, list[tuple[str, float]]]]:
    """Tokens of `text` with log-probabilities: certain everywhere except at the first
    verdict value, where the chosen word has verdict_logprobs[0], the other verdict word
    verdict_logprobs[1], and a space-led variant (which a reader must not count) -9."""
    out = []
    pos = 0
    at = _VERDICT_AT.search(text)
    verdict_pos = at.end() if at else -1
    for tok in _TOKEN.findall(text):
        if pos == verdict_pos and tok in ("supported", "unsupported"):
            other = "unsupported" if tok == "supported" else "supported"
            out.append((tok, verdict_logprobs[0], [(tok, verdict_logprobs[0]), (other, verdict_logprobs[1]), (" " + tok, -9.0)]))
        else:
            out.append((tok, 0.0, [(tok, 0.0)]))
        pos += len(tok)
    return out


# ---------------------------------------------------------------------------------------------
# Handlers


def _answer_text(server: FakeServer, req: RecordedRequest, fault: Fault) -> str | None:
    if fault.kind in ("safety", "prompt_blocked", "empty"):
        return None if fault.kind != "empty" else ""
    text = server.answer_fn(server, req)
    if fault.kind == "malformed_answer":
        return "Sure! Here is my verdict: " + text[: max(1, len(text) // 3)]
    if fault.kind == "truncated":
        return text[: len(text) // 2]
    return text


def gemini_generate(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    model = req.params["model"]
    prompt_tokens = _estimate_tokens(req.prompt_text())
    text = _answer_text(server, req, fault)
    thoughts = server.thinking_tokens
    usage: dict[str, Any] = {"promptTokenCount": prompt_tokens}
    if server.cached_tokens:
        usage["cachedContentTokenCount"] = min(server.cached_tokens, prompt_tokens)
    if thoughts:
        usage["thoughtsTokenCount"] = thoughts
    body: dict[str, Any] = {"modelVersion": model + server.model_suffix, "responseId": f"fake-{len(server.requests)}"}
    if fault.kind == "prompt_blocked":
        body["promptFeedback"] = {"blockReason": "SAFETY", "safetyRatings": [
            {"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH", "blocked": True}]}
        usage["totalTokenCount"] = prompt_tokens
        body["usageMetadata"] = usage
        return Reply(200, body)
    finish = {"safety": "SAFETY", "truncated": "MAX_TOKENS"}.get(fault.kind, "STOP")
    candidate: dict[str, Any] = {"finishReason": finish, "index": 0}
    if text:
        candidate["content"] = {"role": "model", "parts": [{"text": text}]}
        usage["candidatesTokenCount"] = _estimate_tokens(text)
        gc = _first(req.json, "generationConfig", "generation_config", default={}) if isinstance(req.json, dict) else {}
        if server.logprobs and _first(gc, "responseLogprobs", "response_logprobs"):
            k = int(_first(gc, "logprobs", default=0) or 0)
            toks = fake_logprobs(text, server.verdict_logprobs)
            candidate["logprobsResult"] = {
                "chosenCandidates": [{"token": t, "logProbability": lp} for t, lp, _ in toks],
                "topCandidates": [{"candidates": [{"token": a, "logProbability": alp} for a, alp in top[:k]]} for _, _, top in toks],
            }
    elif fault.kind == "empty":
        candidate["content"] = {"role": "model", "parts": []}
    if fault.kind == "safety":
        candidate["safetyRatings"] = [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "HIGH", "blocked": True}]
    usage["totalTokenCount"] = prompt_tokens + usage.get("candidatesTokenCount", 0) + thoughts
    body["candidates"] = [candidate]
    body["usageMetadata"] = usage
    return Reply(200, body)


LLAMA_CPP_PYTHON_500 = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", line 376, "
    "in create_chat_completion\n    POST /v1/chat/completions"
)


def openai_chat(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    body_in = req.json if isinstance(req.json, dict) else {}
    rf = body_in.get("response_format")
    if server.compat == "llama-cpp-python":
        if isinstance(rf, dict) and rf.get("type") not in ("text", "json_object"):
            return Reply(500, {"error": {"message": LLAMA_CPP_PYTHON_500, "type": "internal_server_error",
                                         "param": None, "code": None}})
        with server.slot:  # one request at a time, like llama-cpp-python's server
            if server.slot_latency_s:
                time.sleep(server.slot_latency_s)
            return _openai_chat(server, req, fault)
    return _openai_chat(server, req, fault)


def _openai_chat(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    body_in = req.json if isinstance(req.json, dict) else {}
    model = str(body_in.get("model", "unknown"))
    prompt_tokens = _estimate_tokens(req.prompt_text())
    text = _answer_text(server, req, fault)
    if server.compat == "ignore-format" and text and fault.kind == "ok":
        text = f"Here is my assessment.\n```json\n{text}\n```\nI hope this helps."
    finish = {"safety": "content_filter", "prompt_blocked": "content_filter", "truncated": "length"}.get(fault.kind, "stop")
    completion_tokens = _estimate_tokens(text) if text else 0
    logprobs = None
    if server.logprobs and body_in.get("logprobs") and text:
        k = int(body_in.get("top_logprobs") or 0)
        logprobs = {"content": [{"token": t, "logprob": lp, "bytes": None,
                                 "top_logprobs": [{"token": a, "logprob": alp, "bytes": None} for a, alp in top[:k]]}
                                for t, lp, top in fake_logprobs(text, server.verdict_logprobs)]}
    body = {
        "id": f"chatcmpl-fake{len(server.requests)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model + server.model_suffix,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text, "refusal": None},
            "finish_reason": finish,
            "logprobs": logprobs,
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens + server.thinking_tokens,
            "total_tokens": prompt_tokens + completion_tokens + server.thinking_tokens,
            "prompt_tokens_details": {"cached_tokens": min(server.cached_tokens, prompt_tokens)},
            "completion_tokens_details": {"reasoning_tokens": server.thinking_tokens},
        },
    }
    if server.compat == "llama-cpp-python":
        del body["system_fingerprint"]
    return Reply(200, body, {"x-request-id": f"req_fake{len(server.requests)}"})


def openai_models(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    if server.models is None:
        return OpenAIWire.error(404, "no model list", None, "header")
    owner = "me" if server.compat == "llama-cpp-python" else "fake"
    return Reply(200, {"object": "list", "data": [{"id": m, "object": "model", "owned_by": owner, "permissions": []}
                                                  for m in server.models]})


def _models(server: FakeServer) -> Reply:
    return openai_models(server, None, Fault("ok"))  # type: ignore[arg-type]


# GET endpoints a client asks to learn about the server (OpenAI model list, llama.cpp /props).
DISCOVERY: dict[str, Callable[[FakeServer], Reply]] = {
    "/v1/models": _models,
    "/props": lambda server: Reply(404, {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}}),
}


ROUTES: list[Route] = [
    Route("POST", re.compile(r"^/(?P<version>v1|v1beta|v1alpha)/models/(?P<model>[^/:]+):generateContent$"),
          "gemini.generate", "gemini", gemini_generate),
    Route("POST", re.compile(r"^/v1/chat/completions$"), "openai.chat", "openai", openai_chat),
    Route("GET", re.compile(r"^/v1/models$"), "openai.models", "openai", openai_models),
]


# ---------------------------------------------------------------------------------------------
# Batches: files and batch jobs of both providers, as the real SDKs call them
#
# OpenAI: POST /v1/files (multipart), GET /v1/files/{id}/content, POST /v1/batches,
# GET /v1/batches/{id}, POST /v1/batches/{id}/cancel, GET /v1/batches (newest first, `after`).
# Gemini (v1, v1beta): POST models/{m}:batchGenerateContent with inline requests,
# GET batches/{id}, POST batches/{id}:cancel, GET batches (pageSize/pageToken).
#
# A job walks through `BatchPlan.states`, one step per poll (the last state stays). When it
# reaches a terminal state its lines are answered by the normal handlers (openai_chat,
# gemini_generate), each as a request of route "openai.batch_line"/"gemini.batch_line", so
# scripted faults aimed at those routes shape single lines: a status fault puts the line in
# the error file (Gemini: an inline error), "drop" leaves it out, "malformed_body" writes a
# line that is not JSON (OpenAI), and answer faults (malformed_answer, safety, ...) shape
# the answer. Results come out of order (shuffled) unless the plan says otherwise.

BATCH_TERMINAL = ("completed", "failed", "expired", "cancelled")
_GEMINI_BATCH_STATES = {
    "validating": "BATCH_STATE_PENDING", "in_progress": "BATCH_STATE_RUNNING", "finalizing": "BATCH_STATE_RUNNING",
    "cancelling": "BATCH_STATE_RUNNING", "completed": "BATCH_STATE_SUCCEEDED", "failed": "BATCH_STATE_FAILED",
    "expired": "BATCH_STATE_EXPIRED", "cancelled": "BATCH_STATE_CANCELLED",
}


@dataclass
class BatchPlan:
    """How the fake runs one batch job. `states` are reported by successive polls (provider-
    neutral names: validating, in_progress, finalizing, completed, failed, expired,
    cancelled); `answered` is how many lines an expired or cancelled job answers before it
    stops (the rest expire, OpenAI: error lines with code batch_expired); `order` of the
    results: "shuffle", "reverse" or "keep"."""

    states: tuple[str, ...] = ("validating", "in_progress", "completed")
    answered: int = 0
    order: str = "shuffle"
    failure: str = "the input file could not be validated (fake)"


@dataclass
class FakeBatch:
    id: str
    provider: str
    created_at: float
    model: str
    lines: list[dict]  # OpenAI: the input file's lines; Gemini: the inline requests
    plan: BatchPlan
    label: str | None  # OpenAI metadata / Gemini displayName
    metadata: dict | None = None
    input_file_id: str | None = None
    step: int = 0
    status: str = "validating"
    cancel_requested: bool = False
    output: list | None = None  # set on reaching a terminal state
    errors: list | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    lines_as: str | None = None  # route prefix of its lines' requests when not the provider's (azure)


class BatchStore:
    """The fake's files and batch jobs; `plans` are consumed one per created job (FIFO),
    `default_plan` afterwards. While `hold` is set, jobs do not reach a terminal state."""

    def __init__(self):
        self.files: dict[str, dict] = {}
        self.jobs: dict[str, FakeBatch] = {}
        self.plans: list[BatchPlan] = []
        self.default_plan = BatchPlan()
        self.hold = False
        self.lines: list[RecordedRequest] = []  # every line run, as a request
        self.lock = threading.RLock()
        self._n = 0

    def next_id(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n:04d}"


def _batches(server: FakeServer) -> BatchStore:
    return server.batches


def _multipart(req: RecordedRequest) -> dict[str, tuple[str | None, bytes]]:
    import email.parser
    import email.policy

    ctype = req.headers.get("content-type", "")
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + req.body)
    out = {}
    for part in msg.iter_parts():
        out[part.get_param("name", header="content-disposition")] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return out


def openai_file_create(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    try:
        parts = _multipart(req)
        filename, data = parts["file"]
        purpose = parts["purpose"][1].decode()
    except (KeyError, ValueError, AttributeError) as exc:
        return OpenAIWire.error(400, f"bad multipart upload: {exc}", None, "header")
    store = _batches(server)
    with store.lock:
        fid = store.next_id("file-fake")
        store.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                            "filename": filename or "upload.jsonl", "purpose": purpose, "status": "processed", "data": data}
    return Reply(200, {k: v for k, v in store.files[fid].items() if k != "data"})


def openai_file_content(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    f = _batches(server).files.get(req.params["file_id"])
    if f is None:
        return OpenAIWire.error(404, f"no file {req.params['file_id']}", None, "header")
    return Reply(200, f["data"], {"content-type": "application/octet-stream"})


def _line_request(server: FakeServer, provider: str, body: dict, model: str) -> RecordedRequest:
    req = RecordedRequest(time.monotonic(), "POST", f"/batch-line/{provider}", {}, {}, json.dumps(body).encode(), body,
                          route=f"{provider}.batch_line", provider=provider, params={"model": model})
    return req


def _run_lines(server: FakeServer, job: FakeBatch, upto: int | None) -> None:
    """Answer the job's lines (the first `upto`, or all) through the normal handlers."""
    import random

    if job.provider == "anthropic":
        return _anthropic_run_lines(server, job, upto)

    out, errors = [], []
    for i, line in enumerate(job.lines):
        if job.provider == "openai":
            key, body = line.get("custom_id"), line.get("body") or {}
        else:  # inline {"request", "metadata": {"key"}} or a file's {"key", "request"}
            key, body = line.get("key") or (line.get("metadata") or {}).get("key"), line.get("request") or {}
        if upto is not None and i >= upto:
            if job.provider == "openai" and job.status == "expired":
                errors.append({"id": f"batch_req_{job.id}_{i}", "custom_id": key, "response": None,
                               "error": {"code": "batch_expired", "message": "This request could not be executed before the completion window expired."}})
            continue
        req = _line_request(server, job.lines_as or job.provider, body, str(body.get("model") or job.model).removeprefix("models/"))
        fault = server._next_fault(req) or Fault("ok")
        req.fault = fault.kind
        with server.batches.lock:
            server.batches.lines.append(req)
        if fault.kind == "drop":
            continue
        if job.provider == "openai":
            if fault.kind == "status":
                reply = OpenAIWire.error(fault.status, f"fake {fault.status} error", None, "header")
                errors.append({"id": f"batch_req_{job.id}_{i}", "custom_id": key,
                               "response": {"status_code": fault.status, "request_id": f"req_{i}", "body": reply.body}, "error": None})
            else:
                reply = openai_chat(server, req, fault if fault.kind != "malformed_body" else Fault("ok"))
                item = {"id": f"batch_req_{job.id}_{i}", "custom_id": key,
                        "response": {"status_code": 200, "request_id": reply.headers.get("x-request-id"), "body": reply.body}, "error": None}
                # malformed_body: the line cut in half (still naming its custom_id)
                out.append(item if fault.kind != "malformed_body" else json.dumps(item)[: len(json.dumps(item)) // 2])
        else:
            meta = line.get("metadata")
            if fault.kind == "status":
                item: dict[str, Any] = {"error": {"code": fault.status, "message": f"fake {fault.status} error"}}
            elif fault.kind == "malformed_body" and job.input_file_id is None:
                # inline responses are parsed by the SDK as a whole: a bad one is a bad answer
                item = {"response": gemini_generate(server, req, Fault("malformed_answer")).body}
            else:
                item = {"response": gemini_generate(server, req, fault if fault.kind != "malformed_body" else Fault("ok")).body}
            if job.input_file_id is not None:  # result file lines: {"key", "response" | "error"}
                item = {"key": key, **item}
                if fault.kind == "malformed_body":
                    item = json.dumps(item)[: len(json.dumps(item)) // 2]
            elif meta is not None:
                item["metadata"] = meta
            out.append(item)
    order = job.plan.order
    if order == "shuffle":
        random.Random(job.id).shuffle(out)
        random.Random(job.id + "e").shuffle(errors)
    elif order == "reverse":
        out.reverse()
        errors.reverse()
    job.output, job.errors = out, errors


def _file_of(server: FakeServer, lines: list) -> str | None:
    if not lines:
        return None
    store = _batches(server)
    # Raw non-ASCII, as the providers write it (JSON allows U+2028 and friends unescaped).
    data = "".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in lines).encode()
    fid = store.next_id("file-fake")
    store.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                        "filename": "batch_output.jsonl", "purpose": "batch_output", "status": "processed", "data": data}
    return fid


def _advance(server: FakeServer, job: FakeBatch) -> None:
    """One poll: the next planned state (or cancelled after a cancel), results on reaching a
    terminal state."""
    if job.status in BATCH_TERMINAL:
        return
    store = _batches(server)
    if job.cancel_requested:
        nxt = "cancelled"
    else:
        states = job.plan.states
        step = min(job.step + 1, len(states) - 1)
        nxt = states[step]
        if store.hold and nxt in BATCH_TERMINAL:
            return
        job.step = step
    job.status = nxt
    if nxt in BATCH_TERMINAL:
        if nxt == "failed":
            job.output, job.errors = [], []
        else:
            _run_lines(server, job, None if nxt == "completed" else job.plan.answered)
        if job.provider == "openai":
            job.output_file_id = _file_of(server, job.output)
            job.error_file_id = _file_of(server, job.errors)
        elif job.input_file_id is not None:
            job.output_file_id = "files/" + (_file_of(server, job.output) or _file_of(server, [""]))


def _create_job(server: FakeServer, provider: str, model: str, lines: list, label: str | None, **kw) -> FakeBatch:
    store = _batches(server)
    with store.lock:
        plan = store.plans.pop(0) if store.plans else store.default_plan
        job = FakeBatch(id=store.next_id("batch_fake" if provider == "openai" else "fakeb"), provider=provider,
                        created_at=time.time(), model=model, lines=lines, plan=plan, label=label, status=plan.states[0], **kw)
        store.jobs[job.id] = job
    return job


def _openai_batch_json(job: FakeBatch) -> dict:
    done = len(job.output or []) if job.output is not None else 0
    failed = len(job.errors or []) if job.errors is not None else 0
    body = {
        "id": job.id, "object": "batch", "endpoint": "/v1/chat/completions", "errors": None,
        "input_file_id": job.input_file_id, "completion_window": "24h", "status": job.status,
        "output_file_id": job.output_file_id, "error_file_id": job.error_file_id,
        "created_at": int(job.created_at), "expires_at": int(job.created_at) + 86400, "metadata": job.metadata,
        "request_counts": {"total": len(job.lines), "completed": done, "failed": failed},
    }
    if job.status == "failed":
        body["errors"] = {"object": "list", "data": [{"code": "invalid_file", "message": job.plan.failure, "line": None, "param": None}]}
    return body


def openai_batch_create(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    body = req.json
    f = _batches(server).files.get(body.get("input_file_id"))
    if f is None:
        return OpenAIWire.error(400, f"no file {body.get('input_file_id')}", None, "header")
    if body.get("endpoint") != "/v1/chat/completions" or body.get("completion_window") != "24h":
        return OpenAIWire.error(400, "unsupported endpoint or completion window", None, "header")
    try:
        lines = [json.loads(x) for x in f["data"].decode().split("\n") if x.strip()]  # "\n" only: JSON strings may hold U+2028
    except ValueError:
        return OpenAIWire.error(400, "the input file is not JSONL", None, "header")
    ids = [x.get("custom_id") for x in lines]
    if len(set(ids)) != len(ids):
        return OpenAIWire.error(400, "duplicate custom_id in the input file", None, "header")
    metadata = body.get("metadata")
    job = _create_job(server, "openai", str(lines[0]["body"].get("model")) if lines else "", lines,
                      (metadata or {}).get("memjudge_label"), metadata=metadata, input_file_id=f["id"])
    return Reply(200, _openai_batch_json(job))


def _job_or_404(server: FakeServer, req: RecordedRequest, provider: str) -> FakeBatch | Reply:
    job = _batches(server).jobs.get(req.params["batch_id"])
    if job is None or job.provider != provider:
        return WIRES[provider].error(404, f"no batch {req.params['batch_id']}", None, "header")
    return job


def openai_batch_get(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "openai")
    if isinstance(job, Reply):
        return job
    with _batches(server).lock:
        _advance(server, job)
    return Reply(200, _openai_batch_json(job))


def openai_batch_cancel(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "openai")
    if isinstance(job, Reply):
        return job
    with _batches(server).lock:
        if job.status not in BATCH_TERMINAL:
            job.cancel_requested, job.status = True, "cancelling"
    return Reply(200, _openai_batch_json(job))


def openai_batch_list(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    jobs = sorted((j for j in _batches(server).jobs.values() if j.provider == "openai"), key=lambda j: j.id, reverse=True)
    after = (req.query.get("after") or [None])[0]
    limit = int((req.query.get("limit") or ["20"])[0])
    if after is not None:
        ids = [j.id for j in jobs]
        jobs = jobs[ids.index(after) + 1:] if after in ids else []
    page = jobs[:limit]
    return Reply(200, {"object": "list", "data": [_openai_batch_json(j) for j in page],
                       "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None,
                       "has_more": len(jobs) > limit})


def _rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1e6):06d}Z"


def _gemini_batch_json(job: FakeBatch) -> dict:
    meta: dict[str, Any] = {
        "@type": "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch",
        "model": f"models/{job.model}", "displayName": job.label, "state": _GEMINI_BATCH_STATES[job.status],
        "createTime": _rfc3339(job.created_at), "updateTime": _rfc3339(time.time()),
        "batchStats": {"requestCount": str(len(job.lines))},
    }
    if job.output is not None and job.input_file_id is not None:
        meta["output"] = {"responsesFile": job.output_file_id}
    elif job.output is not None:
        meta["output"] = {"inlinedResponses": {"inlinedResponses": job.output}}
    body = {"name": f"batches/{job.id}", "metadata": meta}
    if job.status in BATCH_TERMINAL:
        body["done"] = True
    return body


def gemini_batch_create(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    batch = (req.json or {}).get("batch") or {}
    config = batch.get("inputConfig") or {}
    file_name = config.get("fileName")
    if file_name is not None:
        f = _batches(server).files.get(file_name)
        if f is None:
            return GeminiWire.error(400, f"no file {file_name}", None, "header")
        try:
            requests = [json.loads(x) for x in f["data"].decode().split("\n") if x.strip()]  # "\n" only: JSON strings may hold U+2028
        except ValueError:
            return GeminiWire.error(400, "the input file is not JSONL", None, "header")
    else:
        requests = (config.get("requests") or {}).get("requests")
    if not isinstance(requests, list):
        return GeminiWire.error(400, "batch.inputConfig needs requests.requests or fileName", None, "header")
    job = _create_job(server, "gemini", req.params["model"], requests, batch.get("displayName"), input_file_id=file_name)
    return Reply(200, _gemini_batch_json(job))


def gemini_batch_get(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "gemini")
    if isinstance(job, Reply):
        return job
    with _batches(server).lock:
        _advance(server, job)
    return Reply(200, _gemini_batch_json(job))


def gemini_batch_cancel(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "gemini")
    if isinstance(job, Reply):
        return job
    with _batches(server).lock:
        if job.status not in BATCH_TERMINAL:
            job.cancel_requested, job.status = True, "cancelling"
    return Reply(200, {})


def gemini_batch_list(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    jobs = sorted((j for j in _batches(server).jobs.values() if j.provider == "gemini"), key=lambda j: j.id, reverse=True)
    size = int((req.query.get("pageSize") or ["50"])[0])
    start = int((req.query.get("pageToken") or ["0"])[0])
    page = jobs[start:start + size]
    body: dict[str, Any] = {"operations": [_gemini_batch_json(j) for j in page]}
    if start + size < len(jobs):
        body["nextPageToken"] = str(start + size)
    return Reply(200, body)


def gemini_upload_start(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    """Resumable upload, step 1: the session URL comes back in x-goog-upload-url."""
    if req.headers.get("x-goog-upload-command") != "start":
        return GeminiWire.error(400, "expected X-Goog-Upload-Command: start", None, "header")
    store = _batches(server)
    with store.lock:
        sid = store.next_id("upl")
        meta = (req.json or {}).get("file") or {}
        store.files[f"session/{sid}"] = {"meta": meta, "data": b"", "mime": req.headers.get("x-goog-upload-header-content-type")}
    url = f"{server.url}/upload/{req.params['version']}/files/session/{sid}"
    return Reply(200, {}, {"x-goog-upload-url": url, "x-goog-upload-status": "active"})


def gemini_upload_chunk(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    """Resumable upload, step 2: chunks; the last one ("upload, finalize") makes the file."""
    store = _batches(server)
    with store.lock:
        session = store.files.get(f"session/{req.params['sid']}")
        if session is None:
            return GeminiWire.error(404, "no upload session", None, "header")
        session["data"] += req.body
        if "finalize" not in req.headers.get("x-goog-upload-command", ""):
            return Reply(200, {}, {"x-goog-upload-status": "active"})
        fid = "files/" + store.next_id("gfile")
        now = _rfc3339(time.time())
        file = {"name": fid, "displayName": session["meta"].get("displayName"), "mimeType": session["mime"] or "application/jsonl",
                "sizeBytes": str(len(session["data"])), "createTime": now, "updateTime": now, "state": "ACTIVE", "source": "UPLOADED"}
        store.files[fid] = {"id": fid, "purpose": "batch", "bytes": len(session["data"]), "data": session["data"], "file": file}
        del store.files[f"session/{req.params['sid']}"]
    return Reply(200, {"file": file}, {"x-goog-upload-status": "final"})


def gemini_file_download(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    f = _batches(server).files.get(req.params["file_id"]) or _batches(server).files.get("files/" + req.params["file_id"])
    if f is None:
        return GeminiWire.error(404, f"no file {req.params['file_id']}", None, "header")
    return Reply(200, f["data"], {"content-type": "application/octet-stream"})


# Uploads are multipart or raw bytes, and cancels may come without a body: not JSON, and fine.
for _h in (openai_file_create, openai_batch_cancel, gemini_batch_cancel, gemini_upload_chunk):
    _h.accepts_any_body = True  # type: ignore[attr-defined]

_V = r"^/(?P<version>v1|v1beta|v1alpha)"
ROUTES += [
    Route("POST", re.compile(r"^/v1/files$"), "openai.files.create", "openai", openai_file_create),
    Route("GET", re.compile(r"^/v1/files/(?P<file_id>[^/]+)/content$"), "openai.files.content", "openai", openai_file_content),
    Route("POST", re.compile(r"^/v1/batches$"), "openai.batches.create", "openai", openai_batch_create),
    Route("GET", re.compile(r"^/v1/batches$"), "openai.batches.list", "openai", openai_batch_list),
    Route("GET", re.compile(r"^/v1/batches/(?P<batch_id>[^/]+)$"), "openai.batches.get", "openai", openai_batch_get),
    Route("POST", re.compile(r"^/v1/batches/(?P<batch_id>[^/]+)/cancel$"), "openai.batches.cancel", "openai", openai_batch_cancel),
    Route("POST", re.compile(_V + r"/models/(?P<model>[^/:]+):batchGenerateContent$"), "gemini.batches.create", "gemini", gemini_batch_create),
    Route("POST", re.compile(r"^/upload/(?P<version>v1|v1beta|v1alpha)/files$"), "gemini.files.upload", "gemini", gemini_upload_start),
    Route("POST", re.compile(r"^/upload/(?P<version>v1|v1beta|v1alpha)/files/session/(?P<sid>\w+)$"), "gemini.files.upload_chunk", "gemini", gemini_upload_chunk),
    Route("GET", re.compile(_V + r"/files/(?P<file_id>[^/:]+):download$"), "gemini.files.download", "gemini", gemini_file_download),
    Route("GET", re.compile(_V + r"/batches$"), "gemini.batches.list", "gemini", gemini_batch_list),
    Route("GET", re.compile(_V + r"/batches/(?P<batch_id>[^/:]+)$"), "gemini.batches.get", "gemini", gemini_batch_get),
    Route("POST", re.compile(_V + r"/batches/(?P<batch_id>[^/:]+):cancel$"), "gemini.batches.cancel", "gemini", gemini_batch_cancel),
]


# ---------------------------------------------------------------------------------------------
# Anthropic: the Messages API and Message Batches (issue 53), as the anthropic SDK calls them
#
# POST /v1/messages; POST /v1/messages/batches, GET /v1/messages/batches (newest first,
# `after_id`), GET /v1/messages/batches/{id}, POST /v1/messages/batches/{id}/cancel,
# GET /v1/messages/batches/{id}/results (JSONL). The answer follows `output_config.format`'s
# schema, or a forced tool's `input_schema` (the answer is then the tool call's input). Faults:
# "safety" is a refusal (stop_reason "refusal"), "truncated" a max_tokens stop, status faults
# are Anthropic error bodies (429 rate_limit_error with retry-after, 529 overloaded_error).
# Prompt caching: the prefix up to the last block marked `cache_control` (tools, system,
# messages in that order) is cached when it is at least `anthropic_min_cache_tokens` long
# (estimated like every token count here): the first request writes it
# (cache_creation_input_tokens), later ones read it (cache_read_input_tokens).


class AnthropicWire:
    ERROR_TYPES = {
        400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error",
        408: "timeout_error", 413: "request_too_large", 429: "rate_limit_error", 500: "api_error", 503: "api_error",
        504: "timeout_error", 529: "overloaded_error",
    }

    @staticmethod
    def _text(content: Any) -> str:
        if isinstance(content, str):
            return content
        return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type", "text") == "text")

    @classmethod
    def system(cls, body: dict) -> str | None:
        system = body.get("system")
        return cls._text(system) if system is not None else None

    @classmethod
    def user(cls, body: dict) -> str | None:
        users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        return cls._text(users[-1].get("content")) if users else None

    @staticmethod
    def forced_tool(body: dict) -> dict | None:
        choice = body.get("tool_choice") or {}
        if choice.get("type") != "tool":
            return None
        return next((t for t in body.get("tools") or [] if isinstance(t, dict) and t.get("name") == choice.get("name")), None)

    @classmethod
    def generation(cls, body: dict) -> dict[str, Any]:
        fmt = (body.get("output_config") or {}).get("format") or {}
        tool = cls.forced_tool(body)
        schema = fmt.get("schema") if fmt.get("type") == "json_schema" else (tool or {}).get("input_schema")
        return {
            "temperature": body.get("temperature"),
            "seed": None,
            "max_output_tokens": body.get("max_tokens"),
            "thinking_budget": None,
            "effort": (body.get("output_config") or {}).get("effort"),
            "response_format_type": "json_schema" if fmt else ("tool" if tool else None),
            "schema": schema,
            "cache_marked": [b.get("text") for b in cls._blocks(body) if isinstance(b, dict) and b.get("cache_control")],
        }

    @staticmethod
    def _blocks(body: dict) -> list:
        out: list = list(body.get("tools") or [])
        system = body.get("system")
        out += system if isinstance(system, list) else ([{"type": "text", "text": system}] if system else [])
        for m in body.get("messages") or []:
            content = m.get("content") if isinstance(m, dict) else None
            out += content if isinstance(content, list) else [{"type": "text", "text": content or ""}]
        return out

    @classmethod
    def error(cls, status: int, message: str, delay_s: float | None, where: str) -> Reply:
        body = {"type": "error", "error": {"type": cls.ERROR_TYPES.get(status, "api_error"), "message": message},
                "request_id": "req_fake_error"}
        return Reply(status, body, {"request-id": "req_fake_error", **(_delay_headers(delay_s, where) if delay_s is not None else {})})


WIRES["anthropic"] = AnthropicWire


def _anthropic_cache_usage(server: FakeServer, body: dict) -> tuple[int, int, int]:
    """(cache write tokens, cache read tokens, tokens of the marked prefix) of a request."""
    blocks = AnthropicWire._blocks(body)
    last = max((i for i, b in enumerate(blocks) if isinstance(b, dict) and b.get("cache_control")), default=-1)
    if last < 0:
        return 0, 0, 0
    prefix = blocks[: last + 1]
    text = "".join(json.dumps(b, sort_keys=True) if "input_schema" in b else str(b.get("text", "")) for b in prefix)
    tokens = _estimate_tokens(text)
    if tokens < getattr(server, "anthropic_min_cache_tokens", 1024):
        return 0, 0, 0
    key = hashlib.sha256((str(body.get("model")) + "\x00" + json.dumps(prefix, sort_keys=True)).encode()).hexdigest()
    with server._lock:
        cache = server.__dict__.setdefault("anthropic_prompt_cache", set())
        hit = key in cache
        cache.add(key)
    return (0, tokens, tokens) if hit else (tokens, 0, tokens)


def anthropic_messages(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    body_in = req.json if isinstance(req.json, dict) else {}
    model = str(body_in.get("model", "unknown"))
    if not isinstance(body_in.get("max_tokens"), int) or not body_in.get("messages"):
        return AnthropicWire.error(400, "max_tokens: Field required" if "max_tokens" not in body_in else "messages: Field required",
                                   None, "header")
    if getattr(server, "anthropic_refuse_output_format", False) and "format" in (body_in.get("output_config") or {}):
        return AnthropicWire.error(400, "output_config.format: structured outputs are not supported for this model", None, "header")
    text = _answer_text(server, req, fault)
    written, read, prefix_tokens = _anthropic_cache_usage(server, body_in)
    prompt_tokens = _estimate_tokens(req.prompt_text())
    tool = AnthropicWire.forced_tool(body_in)
    stop = {"safety": "refusal", "prompt_blocked": "refusal", "truncated": "max_tokens"}.get(fault.kind, "end_turn")
    content: list[dict[str, Any]] = []
    if tool is not None and stop == "end_turn" and text:
        try:
            value = json.loads(text)
        except ValueError:
            value = {"answer": text}  # a tool input is always an object: prose becomes one that misses the schema
        content.append({"type": "tool_use", "id": f"toolu_fake{len(server.requests)}", "name": tool["name"],
                        "input": value if isinstance(value, dict) else {"answer": value}})
        stop = "tool_use"
    elif text:
        content.append({"type": "text", "text": text})
    out = {
        "id": f"msg_fake{len(server.requests)}", "type": "message", "role": "assistant", "model": model + server.model_suffix,
        "content": content, "stop_reason": stop, "stop_sequence": None,
        "usage": {"input_tokens": max(1, prompt_tokens - prefix_tokens), "output_tokens": _estimate_tokens(text) if text else 0,
                  "cache_creation_input_tokens": written, "cache_read_input_tokens": read},
    }
    return Reply(200, out, {"request-id": f"req_fake{len(server.requests)}"})


def _anthropic_batch_json(server: FakeServer, job: FakeBatch) -> dict:
    ended = job.status in BATCH_TERMINAL
    counts = {"processing": 0 if ended else len(job.lines), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    if ended:
        for item in job.output or []:
            kind = item.get("result", {}).get("type") if isinstance(item, dict) else "succeeded"
            counts[{"canceled": "canceled", "expired": "expired", "errored": "errored"}.get(kind, "succeeded")] += 1
    status = "ended" if ended else ("canceling" if job.status == "cancelling" else "in_progress")
    return {
        "id": job.id, "type": "message_batch", "processing_status": status, "request_counts": counts,
        "created_at": _rfc3339(job.created_at), "expires_at": _rfc3339(job.created_at + 86400),
        "ended_at": _rfc3339(time.time()) if ended else None, "archived_at": None,
        "cancel_initiated_at": _rfc3339(job.created_at) if job.cancel_requested else None,
        "results_url": f"{server.url}/v1/messages/batches/{job.id}/results" if ended else None,
    }


def _anthropic_run_lines(server: FakeServer, job: FakeBatch, upto: int | None) -> None:
    import random

    out: list = []
    for i, line in enumerate(job.lines):
        key, body = line.get("custom_id"), line.get("params") or {}
        if upto is not None and i >= upto:
            out.append({"custom_id": key, "result": {"type": "expired" if job.status == "expired" else "canceled"}})
            continue
        req = _line_request(server, "anthropic", body, str(body.get("model") or job.model))
        fault = server._next_fault(req) or Fault("ok")
        req.fault = fault.kind
        with server.batches.lock:
            server.batches.lines.append(req)
        if fault.kind == "drop":
            continue
        if fault.kind == "status":
            err = AnthropicWire.error(fault.status, f"fake {fault.status} error", None, "header").body
            out.append({"custom_id": key, "result": {"type": "errored", "error": err}})
            continue
        reply = anthropic_messages(server, req, fault if fault.kind != "malformed_body" else Fault("ok"))
        item: Any = {"custom_id": key, "result": {"type": "succeeded", "message": reply.body}}
        out.append(item if fault.kind != "malformed_body" else json.dumps(item)[: len(json.dumps(item)) // 2])
    if job.plan.order == "shuffle":
        random.Random(job.id).shuffle(out)
    elif job.plan.order == "reverse":
        out.reverse()
    job.output, job.errors = out, []


def anthropic_batch_create(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    requests = (req.json or {}).get("requests")
    if not isinstance(requests, list) or not requests:
        return AnthropicWire.error(400, "requests: Field required", None, "header")
    ids = [r.get("custom_id") for r in requests if isinstance(r, dict)]
    if len(ids) != len(requests) or len(set(ids)) != len(ids) or not all(isinstance(x, str) and re.fullmatch(r"[a-zA-Z0-9_-]{1,64}", x) for x in ids):
        return AnthropicWire.error(400, "requests: custom_id must be unique and match ^[a-zA-Z0-9_-]{1,64}$", None, "header")
    model = str((requests[0].get("params") or {}).get("model") or "")
    job = _create_job(server, "anthropic", model, requests, None)
    return Reply(200, _anthropic_batch_json(server, job))


def anthropic_batch_get(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "anthropic")
    if isinstance(job, Reply):
        return job
    with _batches(server).lock:
        _advance(server, job)
    return Reply(200, _anthropic_batch_json(server, job))


def anthropic_batch_cancel(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "anthropic")
    if isinstance(job, Reply):
        return job
    with _batches(server).lock:
        if job.status not in BATCH_TERMINAL:
            job.cancel_requested, job.status = True, "cancelling"
    return Reply(200, _anthropic_batch_json(server, job))


def anthropic_batch_list(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    jobs = sorted((j for j in _batches(server).jobs.values() if j.provider == "anthropic"), key=lambda j: j.id, reverse=True)
    after = (req.query.get("after_id") or [None])[0]
    limit = int((req.query.get("limit") or ["20"])[0])
    if after is not None:
        ids = [j.id for j in jobs]
        jobs = jobs[ids.index(after) + 1:] if after in ids else []
    page = jobs[:limit]
    return Reply(200, {"data": [_anthropic_batch_json(server, j) for j in page], "has_more": len(jobs) > limit,
                       "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None})


def anthropic_batch_results(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    job = _job_or_404(server, req, "anthropic")
    if isinstance(job, Reply):
        return job
    if job.status not in BATCH_TERMINAL:
        return AnthropicWire.error(400, "the batch has not ended", None, "header")
    data = "".join((x if isinstance(x, str) else json.dumps(x, ensure_ascii=False)) + "\n" for x in job.output or [])
    return Reply(200, data.encode(), {"content-type": "application/binary"})


anthropic_batch_cancel.accepts_any_body = True  # type: ignore[attr-defined]

ROUTES += [
    Route("POST", re.compile(r"^/v1/messages$"), "anthropic.messages", "anthropic", anthropic_messages),
    Route("POST", re.compile(r"^/v1/messages/batches$"), "anthropic.batches.create", "anthropic", anthropic_batch_create),
    Route("GET", re.compile(r"^/v1/messages/batches$"), "anthropic.batches.list", "anthropic", anthropic_batch_list),
    Route("GET", re.compile(r"^/v1/messages/batches/(?P<batch_id>[^/]+)$"), "anthropic.batches.get", "anthropic", anthropic_batch_get),
    Route("POST", re.compile(r"^/v1/messages/batches/(?P<batch_id>[^/]+)/cancel$"), "anthropic.batches.cancel", "anthropic",
          anthropic_batch_cancel),
    Route("GET", re.compile(r"^/v1/messages/batches/(?P<batch_id>[^/]+)/results$"), "anthropic.batches.results", "anthropic",
          anthropic_batch_results),
]


# ---------------------------------------------------------------------------------------------
# Azure OpenAI (issue 53): the deployments' chat completions path, the key in `api-key`


def azure_chat(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    if not req.query.get("api-version"):
        return OpenAIWire.error(404, "Resource not found (no api-version)", None, "header")
    if not req.headers.get("api-key") and not req.headers.get("authorization", "").startswith("Bearer "):
        return OpenAIWire.error(401, "Access denied due to invalid subscription key or wrong API endpoint.", None, "header")
    reply = openai_chat(server, req, fault)
    if isinstance(reply.body, dict) and reply.status == 200:
        reply.body["model"] = req.params["deployment"] + server.model_suffix  # Azure names the model behind the deployment
    return reply


WIRES["azure"] = OpenAIWire  # azure batch lines are recorded as "azure.batch_line" requests


def _azure_checked(handler: Handler) -> Handler:
    """An OpenAI files/batches handler behind Azure's checks (api-version, a key or token)."""
    def checked(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
        if not req.query.get("api-version"):
            return OpenAIWire.error(404, "Resource not found (no api-version)", None, "header")
        if not req.headers.get("api-key") and not req.headers.get("authorization", "").startswith("Bearer "):
            return OpenAIWire.error(401, "Access denied due to invalid subscription key or wrong API endpoint.", None, "header")
        return handler(server, req, fault)

    checked.accepts_any_body = getattr(handler, "accepts_any_body", False)  # type: ignore[attr-defined]
    return checked


def azure_batch_create(server: FakeServer, req: RecordedRequest, fault: Fault) -> Reply:
    """Azure's batches take endpoint "/chat/completions" (no /v1), and the lines name the deployment."""
    body = req.json if isinstance(req.json, dict) else {}
    if body.get("endpoint") != "/chat/completions":
        return OpenAIWire.error(400, "Azure batches take endpoint /chat/completions", None, "header")
    f = _batches(server).files.get(body.get("input_file_id"))
    if f is not None and any(json.loads(x).get("url") != "/chat/completions" for x in f["data"].decode().split("\n") if x.strip()):
        return OpenAIWire.error(400, "every line's url must be /chat/completions", None, "header")
    import dataclasses

    # the OpenAI handler checks OpenAI's endpoint name; the recorded request keeps what was sent
    reply = openai_batch_create(server, dataclasses.replace(req, json={**body, "endpoint": "/v1/chat/completions"}), fault)
    if reply.status == 200:
        _batches(server).jobs[reply.body["id"]].lines_as = "azure"
    return reply


ROUTES += [
    Route("POST", re.compile(r"^/openai/deployments/(?P<deployment>[^/]+)/chat/completions$"), "azure.chat", "openai", azure_chat),
    Route("POST", re.compile(r"^/openai/files$"), "azure.files.create", "openai", _azure_checked(openai_file_create)),
    Route("GET", re.compile(r"^/openai/files/(?P<file_id>[^/]+)/content$"), "azure.files.content", "openai",
          _azure_checked(openai_file_content)),
    Route("POST", re.compile(r"^/openai/batches$"), "azure.batches.create", "openai", _azure_checked(azure_batch_create)),
    Route("GET", re.compile(r"^/openai/batches$"), "azure.batches.list", "openai", _azure_checked(openai_batch_list)),
    Route("GET", re.compile(r"^/openai/batches/(?P<batch_id>[^/]+)$"), "azure.batches.get", "openai", _azure_checked(openai_batch_get)),
    Route("POST", re.compile(r"^/openai/batches/(?P<batch_id>[^/]+)/cancel$"), "azure.batches.cancel", "openai",
          _azure_checked(openai_batch_cancel)),
]


# ---------------------------------------------------------------------------------------------
# The server


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    # The default backlog of 5 drops SYNs under 64 concurrent connections (1 s client stalls).
    request_queue_size = 256
    fake: FakeServer


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self):
        super().setup()
        with self.server.fake._lock:
            self.server.fake._connections += 1
        # Status line, headers and body go out in one write; no Nagle delay on keep-alive.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def finish(self):
        try:
            super().finish()
        finally:
            with self.server.fake._lock:
                self.server.fake._connections -= 1

    def log_message(self, format, *args):  # noqa: A002 - the fake is quiet
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self):
        try:
            self.server.fake._dispatch(self)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _serve

    def send_reply(self, reply: Reply) -> None:
        if reply.drop:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            return
        body = reply.body
        if isinstance(body, (dict, list)):
            data, ctype = json.dumps(body).encode(), "application/json; charset=UTF-8"
        else:
            data = body.encode() if isinstance(body, str) else (body or b"")
            ctype = reply.headers.get("content-type", "application/json; charset=UTF-8")
        head = [f"HTTP/1.1 {reply.status} {self.responses.get(reply.status, ('Error',))[0]}",
                f"Content-Type: {ctype}", f"Content-Length: {len(data)}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items() if k.lower() != "content-type"]
        if self.close_connection:
            head.append("Connection: close")
        if reply.trickle_s:
            self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
            self.wfile.flush()
            for i in range(len(data)):
                if self.server.fake._stopping.wait(reply.trickle_s):
                    self.close_connection = True
                    break
                self.wfile.write(data[i:i + 1])  # a client that gave up makes this raise BrokenPipe
                self.wfile.flush()
            return
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + data)


class FakeServer:
    """The fake provider. Start with `start()` (or `with FakeServer() as s:`), stop with
    `stop()`. Thread-safe: requests are served concurrently, one thread per connection."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, latency_s: float = 0.0,
                 verdict_rule: str = "marker"):
        expected_verdict("", verdict_rule)  # validate the rule early
        self.host, self._port = host, port
        self.latency_s = latency_s
        self.verdict_rule = verdict_rule
        self.answer_fn: Callable[[FakeServer, RecordedRequest], str] = default_answer
        self.model_suffix = "-fake-001"
        self.cached_tokens = 0
        self.thinking_tokens = 0
        self.compat: str | None = None  # "llama-cpp-python" or "ignore-format" (module docstring)
        self.logprobs = False
        self.verdict_logprobs = (-0.1, -2.5)
        self.models: list[str] | None = None
        self.slot = threading.Lock()
        self.slot_latency_s = 0.0  # compute time inside the slot (compat "llama-cpp-python")
        self.routes: list[Route] = list(ROUTES)
        self.requests: list[RecordedRequest] = []
        self.received: list[bytes] = []  # each request as it arrived: request line, headers, body
        self.counters: Counter[str] = Counter()
        self.batches = BatchStore()  # files and batch jobs (see "Batches" above)
        self._script: list[_Script] = []
        self._lock = threading.Lock()
        self._connections = 0  # open client connections (a killed client's close ends its own)
        self._stopping = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> FakeServer:
        httpd = _HTTPServer((self.host, self._port), _RequestHandler)
        httpd.fake = self
        self._httpd = httpd
        self._stopping.clear()
        self._thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-provider", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # wakes handlers sleeping on latency or hang faults
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("the fake server is not running")
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        """Base URL for google-genai's HttpOptions(base_url=...)."""
        return f"http://{self.host}:{self.port}"

    gemini_base_url = url

    @property
    def openai_base_url(self) -> str:
        """Base URL for openai's AsyncOpenAI(base_url=...) (it must include /v1)."""
        return f"{self.url}/v1"

    # -- scripting -----------------------------------------------------------------------
    def enqueue(self, *faults: Fault, times: int | None = 1, route: str | None = None,
                contains: str | None = None, when: Callable[[RecordedRequest], bool] | None = None) -> None:
        """Script faults, consumed in order by matching requests. Each fault applies to `times`
        requests (None = every matching request until `reset()`). `route` is a route-name
        prefix ("gemini", "openai.chat"); `contains` a substring of the prompt."""
        if times is not None and times < 1:
            raise ValueError("times must be >= 1 or None")
        with self._lock:
            self._script.extend(_Script(f, times, route, contains, when) for f in faults)

    def reset(self) -> None:
        """Forget scripted faults, recorded requests and counters (files and batch jobs stay,
        as they would at a provider)."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.received.clear()
            self.counters.clear()

    def add_route(self, method: str, pattern: str, name: str, provider: str | None, handler: Handler) -> None:
        self.routes.insert(0, Route(method.upper(), re.compile(pattern), name, provider, handler))

    # -- inspection ----------------------------------------------------------------------
    def wait_idle(self, timeout: float = 30.0, quiet: float = 0.25) -> bool:
        """Wait until no client connection has been open for `quiet` seconds (a connection a
        killed client left in the accept queue is taken within the serve loop's 0.05 s poll): a
        request it had already sent is then recorded, so it cannot land after a later `reset()`."""
        deadline, idle_since = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            with self._lock:
                busy = self._connections > 0
            now = time.monotonic()
            idle_since = None if busy else (idle_since or now)
            if idle_since is not None and now - idle_since >= quiet:
                return True
            time.sleep(0.01)
        return False

    def count(self, route: str | None = None, fault: str | None = None) -> int:
        """Requests seen, optionally only those of a route-name prefix or a fault kind."""
        with self._lock:
            return sum(1 for r in self.requests
                       if (route is None or (r.route or "").startswith(route)) and (fault is None or r.fault == fault))

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {"requests": len(self.requests), "counters": dict(self.counters),
                    "scripted": [dict(s.fault.as_dict(), remaining=s.remaining) for s in self._script]}

    # -- serving -------------------------------------------------------------------------
    def _next_fault(self, req: RecordedRequest) -> Fault | None:
        with self._lock:
            for i, script in enumerate(self._script):
                if script.matches(req):
                    if script.remaining is not None:
                        script.remaining -= 1
                        if script.remaining == 0:
                            del self._script[i]
                    return script.fault
        return None

    def _dispatch(self, h: _RequestHandler) -> None:
        arrived = time.monotonic()
        split = urlsplit(h.path)
        body = h._read_body()
        with self._lock:  # every byte that arrived, discovery and unrouted requests too (tests/test_private.py)
            self.received.append(h.raw_requestline + str(h.headers).encode("latin-1", "replace") + body)
        if split.path.startswith("/_fake/"):
            h.send_reply(self._control(h.command, split.path, body))
            return
        if h.command == "GET" and split.path in DISCOVERY:
            # What a client asks once to learn about the server: served, never recorded, so
            # counts stay counts of judge calls.
            h.send_reply(DISCOVERY[split.path](self))
            return
        try:
            payload = json.loads(body) if body else None
        except ValueError:
            payload = None
        req = RecordedRequest(arrived, h.command, split.path, parse_qs(split.query),
                              {k.lower(): v for k, v in h.headers.items()}, body, payload)
        route = next((r for r in self.routes if r.method == h.command and r.pattern.match(split.path)), None)
        if route is None:
            req.status = 404
            self._record(req)
            h.send_reply(Reply(404, {"error": {"code": 404, "message": f"no route for {h.command} {split.path}",
                                               "status": "NOT_FOUND"}}))
            return
        req.route, req.provider = route.name, route.provider
        req.params = route.pattern.match(split.path).groupdict()
        fault = self._next_fault(req) or Fault("ok")
        req.fault = fault.kind
        self._record(req)
        wait = self.latency_s + fault.latency_s
        if wait > 0 and self._stopping.wait(wait):
            h.close_connection = True
            return
        reply = self._reply(route, req, fault)
        req.status = None if reply.drop else reply.status
        with self._lock:
            self.counters[f"status:{req.status or 'dropped'}"] += 1
        h.send_reply(reply)

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(req)
            self.counters["requests"] += 1
            self.counters[f"route:{req.route}"] += 1
            self.counters[f"fault:{req.fault}"] += 1

    def _reply(self, route: Route, req: RecordedRequest, fault: Fault) -> Reply:
        if fault.kind == "drop":
            return Reply(drop=True)
        if fault.kind == "status":
            wire = WIRES.get(route.provider or "", GeminiWire)
            return wire.error(fault.status, f"fake {fault.status} error", fault.delay_s, fault.where)
        if fault.kind == "malformed_body":
            return Reply(200, b'{"candidates": [{"content": {"parts": [{"text": "unterminated', {})
        if fault.kind == "foreign_body":  # e.g. a captive portal or a misrouted proxy
            return Reply(200, {"status": "ok", "message": "hello from a server that is not the provider"})
        if fault.kind == "trickle":
            reply = route.handler(self, req, Fault("ok"))
            reply.trickle_s = fault.delay_s or 0.05
            return reply
        if (req.json is None and req.method in ("POST", "PUT", "PATCH") and route.provider in WIRES
                and not getattr(route.handler, "accepts_any_body", False)):
            return WIRES[route.provider].error(400, "request body is not JSON", None, "header")
        return route.handler(self, req, fault)

    def _control(self, method: str, path: str, body: bytes) -> Reply:
        if path == "/_fake/stats" and method == "GET":
            return Reply(200, self.stats())
        if path == "/_fake/reset" and method == "POST":
            self.reset()
            return Reply(200, {"ok": True})
        if path == "/_fake/faults" and method == "POST":
            try:
                spec = json.loads(body)
                for f in spec["faults"]:
                    f = dict(f)
                    times = f.pop("times", 1)
                    route, contains = f.pop("route", None), f.pop("contains", None)
                    self.enqueue(Fault(**f), times=times, route=route, contains=contains)
            except (ValueError, KeyError, TypeError) as exc:
                return Reply(400, {"error": str(exc)})
            return Reply(200, self.stats())
        return Reply(404, {"error": f"no control endpoint {method} {path}"})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Fake Gemini/OpenAI server for memjudge tests and benchmarks")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every answer")
    parser.add_argument("--verdict-rule", choices=("marker", "hash"), default="marker")
    args = parser.parse_args(argv)
    server = FakeServer(args.host, args.port, args.latency, args.verdict_rule).start()
    print(server.url, flush=True)
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    done.wait()
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
