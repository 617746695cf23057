"""`anthropic:MODEL` — Anthropic's Messages API (Claude) through the anthropic package's
async client, or any gateway that speaks the Messages API, named by `base_url` (the host,
no `/v1`: the SDK adds `/v1/messages` itself).

One attempt per `generate` (max_retries=0; retry.py owns retrying). The request is the body
`messages.create` would send, posted as built (as openai.py does, see there why), whose
structured output follows `JudgeConfig.response_format`:

- `json_schema`: the rubric's schema as the API's JSON-schema output format
  (`output_config.format`, in the SDK's strict form);
- `tool`: a forced tool (`tool_choice` names it) whose `input_schema` is the rubric's
  schema: the answer is the tool call's input;
- `text`: no format, the schema in the prompt, the first JSON object of the answer taken;
- `auto` (default): `json_schema` first; when the endpoint refuses it (HTTP 400 naming the
  output format: older models, gateways) or twice in a row answers without a JSON object,
  the next mode, for this and every later call of the judge (`effective()` says which).

Prompt caching: Anthropic caches only what a request marks. The user message starts with
the persona's source (the rubrics render it first), shared by every call of that persona:
it is sent as its own text block marked `cache_control` when the system prompt and the
source together reach the model's minimum cacheable length (`min_cache_tokens`), so the
persona's later calls (the engine issues them together, `order_key`) read it from the cache.
Usage records the tokens written to the cache (`cache_write_tokens`) and read from it
(`cached_tokens`); `input_tokens` is the whole prompt, as for every provider. Cache writes
and reads have their own prices (`price_cache_write_per_mtok`, `price_cache_read_per_mtok`;
defaults from the input price, `CACHE_WRITE_FACTOR` and `CACHE_READ_FACTOR`).

A refusal (`stop_reason: refusal`), a `max_tokens` stop and an empty answer come back as a
`JudgeAnswer` with that finish reason (null verdicts, never labels). Anthropic gives no token
log-probabilities: `judge_score` is always null. HTTP and transport failures raise the SDK's
own exceptions: 429 (with `retry-after`), 5xx and 529 `overloaded_error` are transient, a
400 is not.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import re
from typing import TYPE_CHECKING, Any

from memjudge._util import lazy
from memjudge.errors import MemjudgeError, UsageError
from memjudge.judges.base import (
    Judge,
    JudgeAnswer,
    JudgeCall,
    JudgeConfig,
    LoopBoundClient,
    MalformedResponse,
    Usage,
    connection_refused,
    delay_from_headers,
    estimate_tokens,
    is_request_error,
    is_transient_status,
    normalise_base_url,
    schema_prompt,
    text_answer,
    unreachable,
)
from memjudge.judges.rubrics import AnswerError, parse_json_answer

if TYPE_CHECKING:
    import anthropic
    import httpx2
    from pydantic import BaseModel
else:  # imported by the first request: a fully cached run never loads the SDK
    anthropic = lazy.module("anthropic")
    httpx2 = lazy.module("httpx2")

KEY_VAR = "ANTHROPIC_API_KEY"
BASE_URL_VAR = "ANTHROPIC_BASE_URL"  # honoured by the anthropic SDK itself
DEFAULT_BASE_URL = "https://api.anthropic.com"  # the SDK's own default
# Provider options this judge understands (JudgeConfig.options): `effort` (output_config.effort
# of the models that take it), `prompt_cache` (false: mark nothing), `min_cache_tokens` (the
# model's minimum cacheable prompt length, when MIN_CACHE_TOKENS does not know the model).
OPTIONS = frozenset({"effort", "prompt_cache", "min_cache_tokens"})
CACHE_OPTIONS = frozenset({"prompt_cache", "min_cache_tokens"})  # how a request is billed, not what it answers
# The Messages API requires max_tokens; JudgeConfig.max_output_tokens None means "the
# provider's default", and Anthropic has none: this one.
DEFAULT_MAX_TOKENS = 1024
TOOL_NAME = "record_answer"
# What response_format="auto" tries, in order (see the module docstring).
MODES = ("json_schema", "tool", "text")
# Answers without any JSON object, in a row, after which `auto` stops trusting a mode.
IGNORED_FORMAT_STRIKES = 2
PREFLIGHT_TIMEOUT_S = 30.0

# Prices, USD per million tokens (input, output), from Anthropic's pricing page as known on
# PRICES_READ; a judges file's prices win. Matched on the model name's start (dated snapshots
# and aliases alike); unknown models have no default (cost unknown, as for other providers).
PRICES_READ = "2025-11-24"
PRICES: dict[str, tuple[float, float]] = {
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.80, 4.0),
    "claude-3-haiku": (0.25, 1.25),
}
# Cache writes (5-minute entries) and reads as multiples of the input price (same page, same date).
CACHE_WRITE_FACTOR = 1.25
CACHE_READ_FACTOR = 0.10
# The shortest prompt prefix Anthropic caches, in tokens, by model (same date); other models 1,024.
MIN_CACHE_TOKENS: dict[str, int] = {
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
DEFAULT_MIN_CACHE_TOKENS = 1024

_FINISH = {"end_turn": "stop", "stop_sequence": "stop", "tool_use": "stop", "max_tokens": "length",
           "model_context_window_exceeded": "length", "refusal": "safety"}
# A request error that names the structured-output request: the model or gateway does not take it.
_FORMAT_REFUSED = re.compile(r"output_config|output_format|json_schema|structured output|format", re.IGNORECASE)
_TOOL_REFUSED = re.compile(r"tool", re.IGNORECASE)


def _by_model(table: dict[str, Any], model: str) -> Any:
    """The entry of the longest key the model's name starts with (None: no entry)."""
    best = max((k for k in table if model.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None


def default_prices(model: str) -> dict[str, float]:
    """The judges-file price fields this model gets by default (see PRICES_READ)."""
    found = _by_model(PRICES, model)
    return {} if found is None else {"price_input_per_mtok": found[0], "price_output_per_mtok": found[1]}


def _snippet(text: str) -> str:
    text = " ".join(str(text).split())
    return repr(text[:120] + ("..." if len(text) > 120 else ""))


def _message_body(http_response) -> dict[str, Any]:
    """The JSON body of a Messages API response; MalformedResponse when it is not one."""
    try:
        body = http_response.json()
    except (ValueError, RecursionError):
        body = None
    if not isinstance(body, dict) or body.get("type") != "message" or not isinstance(body.get("content"), list):
        raise MalformedResponse(f"HTTP {http_response.status_code} with a body that is not an Anthropic message: "
                                f"{_snippet(http_response.text)}")
    return body


@functools.cache
def _strict_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The rubric's schema as the SDK sends it for `output_config.format` (its strict subset)."""
    from anthropic.lib._parse._transform import transform_schema

    return transform_schema(schema.model_json_schema())


class AnthropicJudge(Judge):
    prefix = "anthropic"
    network = True

    def __init__(self, config: JudgeConfig):
        self.check_config(config)
        prices = {k: v for k, v in default_prices(config.model).items() if getattr(config, k) is None}
        input_price = prices.get("price_input_per_mtok", config.price_input_per_mtok)
        if input_price is not None:
            # Cache writes and reads have their own prices: a judges file's, else Anthropic's multiples.
            if config.price_cache_write_per_mtok is None:
                prices["price_cache_write_per_mtok"] = round(input_price * CACHE_WRITE_FACTOR, 6)
            if config.price_cache_read_per_mtok is None:
                prices["price_cache_read_per_mtok"] = round(input_price * CACHE_READ_FACTOR, 6)
        if prices:
            judges_file = config.judges_file
            config = config.model_copy(update=prices)
            config._judges_file = judges_file
        super().__init__(config)
        # Resolved here, not by the SDK, so that identity() (the cache key) names the server
        # actually asked; None stands for Anthropic's own endpoint, however it is spelled.
        url = normalise_base_url(config.base_url or os.environ.get(BASE_URL_VAR))
        if url is not None and url.endswith("/v1"):
            raise UsageError(f"{config.spec}: base_url {url} ends in /v1: the anthropic SDK adds /v1/messages itself; "
                             "give the host (e.g. https://gateway.example.com)")
        self.base_url = None if url == DEFAULT_BASE_URL else url
        self._api_key = os.environ.get(KEY_VAR) or None
        if self._api_key is None:
            if self.base_url is None:
                self.missing_credentials = f"{config.spec}: set {KEY_VAR} to use Anthropic (or --base-url for a gateway)"
            self._api_key = "EMPTY"  # a gateway that needs no key; the SDK insists on one
        self._client = LoopBoundClient(
            lambda: anthropic.AsyncAnthropic(api_key=self._api_key, base_url=self.endpoint, max_retries=0,
                                             timeout=self.config.timeout_s),
            lambda c: c.close(),
        )
        self.mode = MODES[0] if config.response_format == "auto" else config.response_format
        self._strikes = 0
        self._adapted: list[str] = []
        self._marked = 0  # requests sent with a cache mark
        opt = config.options
        self.prompt_cache = bool(opt.get("prompt_cache", True))
        self.min_cache_tokens = int(opt.get("min_cache_tokens") or _by_model(MIN_CACHE_TOKENS, self.model) or DEFAULT_MIN_CACHE_TOKENS)

    def check_config(self, config: JudgeConfig) -> None:
        """Settings Anthropic does not take are a one-line UsageError, not silently dropped."""
        self.config = config  # check_options reads it
        self.check_options(OPTIONS)
        if config.response_format == "json_object":
            raise UsageError(f"{config.spec}: response_format json_object is OpenAI's; Anthropic takes "
                             "auto, json_schema, tool or text")
        if config.seed is not None:
            raise UsageError(f"{config.spec}: the Messages API has no sampling seed; remove seed")
        if config.thinking_budget is not None:
            raise UsageError(f"{config.spec}: thinking_budget is not supported for anthropic: judges "
                             "(extended thinking cannot be combined with a forced answer format)")
        if "effort" in config.options and config.options["effort"] not in ("low", "medium", "high", "xhigh", "max"):
            raise UsageError(f"{config.spec}: options.effort must be low, medium, high, xhigh or max")
        mct = config.options.get("min_cache_tokens")
        if mct is not None and (isinstance(mct, bool) or not isinstance(mct, int) or mct < 1):
            raise UsageError(f"{config.spec}: options.min_cache_tokens must be an integer >= 1")
        if not isinstance(config.options.get("prompt_cache", True), bool):
            raise UsageError(f"{config.spec}: options.prompt_cache must be true or false")

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def identity(self) -> dict[str, Any]:
        # The cache mark changes what is billed, never the answer: its options are not in the key.
        ident = super().identity()
        params = dict(ident["params"])
        params["options"] = {k: v for k, v in params["options"].items() if k not in CACHE_OPTIONS}
        return {**ident, "params": params, "base_url": self.base_url, "response_format": self.config.response_format}

    def effective(self) -> dict[str, Any]:
        return {
            "response_format": self.mode,
            "adapted": list(self._adapted),
            "logprobs": False,
            "prompt_cache": self.prompt_cache,
            "min_cache_tokens": self.min_cache_tokens,
            "cache_marked_requests": self._marked,
        }

    def client(self) -> anthropic.AsyncAnthropic:
        """The SDK's async client of the running event loop (Message Batches use it too)."""
        return self._client.get()

    # -- the request ------------------------------------------------------------------------

    def cache_split(self, call: JudgeCall) -> int:
        """Where the user message's cacheable prefix ends (the persona's source block), or 0:
        nothing is marked when caching is off, the prompt has no source block, or the system
        prompt and the source together are shorter than the model's minimum cacheable length."""
        if not self.prompt_cache:
            return 0
        user = call.prompt.user
        start = user.find("<<<SOURCE")
        end = user.find("SOURCE>>>", start) if start != -1 else -1
        if end == -1:
            return 0
        end += len("SOURCE>>>")
        if end >= len(user):
            return 0
        if estimate_tokens(call.prompt.system) + estimate_tokens(user[:end]) < self.min_cache_tokens:
            return 0
        return end

    def cache_prefix(self, call: JudgeCall) -> tuple[Any, int]:
        split = self.cache_split(call)
        if not split:
            return None, 0
        system, user = call.prompt.system, call.prompt.user[:split]
        return (system, user), estimate_tokens(system) + estimate_tokens(user)

    def request_body(self, call: JudgeCall, mode: str | None = None) -> dict[str, Any]:
        """The JSON body `generate` posts for this call (e.g. the params of a batch request)."""
        cfg = self.config
        mode = mode or self.mode
        prompt = call.prompt
        if mode == "text":
            prompt = schema_prompt(prompt, call.schema.model_json_schema())
        split = self.cache_split(call)
        if split:
            content: Any = [{"type": "text", "text": prompt.user[:split], "cache_control": {"type": "ephemeral"}},
                            {"type": "text", "text": prompt.user[split:]}]
        else:
            content = prompt.user
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": cfg.max_output_tokens if cfg.max_output_tokens is not None else DEFAULT_MAX_TOKENS,
            "system": prompt.system,
            "messages": [{"role": "user", "content": content}],
            "temperature": cfg.temperature,
        }
        output_config: dict[str, Any] = {}
        if "effort" in cfg.options:
            output_config["effort"] = cfg.options["effort"]
        if mode == "json_schema":
            output_config["format"] = {"type": "json_schema", "schema": _strict_schema(call.schema)}
        elif mode == "tool":
            body["tools"] = [{"name": TOOL_NAME, "description": "Record your answer: its input is the whole answer.",
                              "input_schema": call.schema.model_json_schema()}]
            body["tool_choice"] = {"type": "tool", "name": TOOL_NAME}
        if output_config:
            body["output_config"] = output_config
        return body

    def _adapt(self, exc: anthropic.APIStatusError, mode: str) -> bool:
        """After the endpoint refused a request as invalid: the next structured-output mode
        (auto only); False when there is nothing left to change (the error then stands)."""
        text = _error_text(exc)
        if self.config.response_format != "auto" or not is_request_error(exc.status_code, text):
            return False
        if (mode == "json_schema" and _FORMAT_REFUSED.search(text)) or (mode == "tool" and _TOOL_REFUSED.search(text)):
            if self.mode == mode:  # concurrent calls see the same refusal; step down once
                self._step_down(mode, f"{mode} refused (HTTP {exc.status_code})")
            return True
        return False

    def _step_down(self, mode: str, why: str) -> None:
        i = MODES.index(mode)
        if i + 1 < len(MODES):
            self.mode = MODES[i + 1]
            self._strikes = 0
            self._adapted.append(f"{why}: {self.mode}")

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        for _ in range(len(MODES) + 2):
            mode = self.mode  # read now: a refusal seen meanwhile is not repeated
            body = self.request_body(call, mode)
            try:
                response = await self.client().post("/v1/messages", body=body, cast_to=httpx2.Response)
            except anthropic.APIStatusError as exc:
                if self._adapt(exc, mode):
                    continue
                raise
            if isinstance(body["messages"][0]["content"], list):
                self._marked += 1
            message = _message_body(response)  # MalformedResponse (retried) when it is no message
            try:
                answer = self.answer_from_body(message, call, mode)
            except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:  # a body of odd values
                raise MalformedResponse(f"HTTP {response.status_code} with a body that is not an Anthropic message "
                                        f"({type(e).__name__}: {e}): {_snippet(response.text)}") from None
            request_id = response.headers.get("request-id")
            if request_id and answer.raw is not None:
                answer.raw["request_id"] = request_id
            if mode != "text" and self.config.response_format == "auto" and answer.finish_reason == "stop":
                if not _is_json(answer.text):
                    self._strikes += 1
                    if self._strikes >= IGNORED_FORMAT_STRIKES and self.mode == mode:
                        self._step_down(mode, f"{mode} ignored")
                        continue
                else:
                    self._strikes = 0
            return answer
        raise MemjudgeError(f"judge {self.spec}: the endpoint refused every answer format tried ({'; '.join(self._adapted)})")

    def answer_from_body(self, body: dict[str, Any], call: JudgeCall, mode: str | None = None) -> JudgeAnswer:
        """A Messages API response (its JSON) as a JudgeAnswer: online and batch alike."""
        mode = mode or self.mode
        u = body.get("usage") or {}
        written = int(u.get("cache_creation_input_tokens") or 0)
        read = int(u.get("cache_read_input_tokens") or 0)
        # Anthropic's input_tokens leaves out what was written to or read from the cache;
        # every provider's input_tokens here is the whole prompt.
        usage = Usage(input_tokens=int(u.get("input_tokens") or 0) + written + read,
                      output_tokens=int(u.get("output_tokens") or 0), cached_tokens=read, cache_write_tokens=written)
        version = body.get("model")
        stop = body.get("stop_reason")
        raw: dict[str, Any] = {"id": body.get("id"), "model": version, "stop_reason": stop, "response_format": mode}
        blocks = [b for b in body.get("content") or [] if isinstance(b, dict)]
        tool = next((b for b in blocks if b.get("type") == "tool_use" and b.get("name") == TOOL_NAME), None)
        if tool is not None:
            # The tool's input is the answer (a JSON object already): its text, for validation.
            text: str | None = json.dumps(tool.get("input"), ensure_ascii=False)
        else:
            texts = [b["text"] for b in blocks if b.get("type") == "text" and isinstance(b.get("text"), str)]
            text = "".join(texts) if texts else None
        finish = _FINISH.get(stop, "other") if stop is not None else "stop"
        if finish == "safety":
            raw["refusal"] = text
            return JudgeAnswer(text, "safety", usage, version, raw=raw)
        if finish == "stop" and not (text and text.strip()):
            finish = "empty"
        return text_answer(call, text, finish, usage, version, mode=mode, score=None, raw=raw)

    # -- errors ---------------------------------------------------------------------------

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, anthropic.APIStatusError):
            if is_request_error(exc.status_code, _error_text(exc)):
                return False  # a malformed request stays malformed
            return is_transient_status(exc.status_code)
        return isinstance(exc, (anthropic.APIConnectionError, httpx2.TransportError, asyncio.TimeoutError, MalformedResponse))

    def retry_after(self, exc: BaseException) -> float | None:
        if isinstance(exc, anthropic.APIStatusError):
            return delay_from_headers(exc.response.headers)
        return None

    async def prepare(self) -> None:
        self.client().messages  # the SDK imports its resources lazily

    async def preflight(self) -> None:
        """For a gateway of our own (`base_url`): stop at once, in one line, when nothing
        listens there, rather than retrying every request against a closed port."""
        if self.base_url is None:
            return
        refused = await connection_refused(self.base_url, min(PREFLIGHT_TIMEOUT_S, self.config.timeout_s))
        if refused is not None:
            raise unreachable(self.spec, self.base_url, refused)

    async def aclose(self) -> None:
        await self._client.aclose()


def _is_json(text: str | None) -> bool:
    try:
        parse_json_answer(text)
    except AnswerError:
        return False
    return True


def _error_text(exc: anthropic.APIStatusError) -> str:
    try:
        return exc.response.text
    except Exception:  # a closed response: the SDK's message has the gist
        return str(exc)
