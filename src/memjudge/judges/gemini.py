"""`gemini:MODEL` — Google's Gemini API through google-genai's async client.

One attempt per `generate` (the SDK's retries are off; retry.py owns retrying). Safety blocks,
truncation and empty answers come back as a `JudgeAnswer` with that finish reason; HTTP and
transport failures raise the SDK's own exceptions (`google.genai.errors.APIError`, or httpx2
transport errors, which google-genai does not wrap).

Response formats (`JudgeConfig.response_format`): `json_schema` (and `auto`) send the rubric's
JSON schema (`response_json_schema`); `json_object` asks for JSON (`response_mime_type`) with
the schema in the prompt; `text` asks for nothing and takes the answer's first JSON object.
With `logprobs` (default on) the request asks for `response_logprobs`; `judge_score` is the
verdict's log-odds from `logprobs_result` (null when the model sends none). A model that
refuses log-probabilities (HTTP 400 naming them) is asked again without, and not asked for
them again (`effective()`).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import TYPE_CHECKING, Any

from memjudge._util import lazy
from memjudge.errors import UsageError
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
    is_transient_status,
    normalise_base_url,
    parse_duration,
    schema_prompt,
    text_answer,
    unreachable,
    verdict_log_odds,
)

if TYPE_CHECKING:
    import httpx2
    from google import genai
    from google.genai import errors, types
    from pydantic import BaseModel
else:  # imported by the first request: a fully cached run never loads the SDK
    httpx2 = lazy.module("httpx2")
    genai = lazy.module("google.genai")
    errors = lazy.module("google.genai.errors")
    types = lazy.module("google.genai.types")

KEY_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_VAR = "GOOGLE_GEMINI_BASE_URL"  # honoured by google-genai itself
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"  # the SDK's own default
# Provider options this judge understands (JudgeConfig.options).
OPTIONS = frozenset({"thinking_level"})
# Alternatives per token asked for with response_logprobs (the API's maximum is 20).
TOP_LOGPROBS = 20
PREFLIGHT_TIMEOUT_S = 30.0

_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "safety",
    "RECITATION": "safety",
    "BLOCKLIST": "safety",
    "PROHIBITED_CONTENT": "safety",
    "SPII": "safety",
    "IMAGE_SAFETY": "safety",
    "IMAGE_PROHIBITED_CONTENT": "safety",
}


def _wire_body(text) -> dict[str, Any]:
    """A generateContent response's JSON; MalformedResponse (retried) when the body is not one."""
    try:
        body = json.loads(text) if text else {}
    except (ValueError, RecursionError):
        raise MalformedResponse(f"HTTP 200 with a body that is not a Gemini response (not JSON): {str(text)[:120]!r}") from None
    # A Gemini response has at least one of these, even when it is blocked or empty.
    if not isinstance(body, dict) or not {"candidates", "promptFeedback", "usageMetadata"} & set(body):
        raise MalformedResponse("HTTP 200 with a body that is not a Gemini response "
                                "(no candidates, promptFeedback or usageMetadata)")
    return body


class GeminiJudge(Judge):
    prefix = "gemini"
    network = True

    def __init__(self, config: JudgeConfig):
        super().__init__(config)
        self.check_options(OPTIONS)
        if config.response_format == "tool":
            raise UsageError(f"{config.spec}: response_format tool is Anthropic's; Gemini takes auto, json_schema, json_object or text")
        if config.thinking_budget is not None and "thinking_level" in config.options:
            raise UsageError(f"{config.spec}: set thinking_budget or options.thinking_level, not both")
        # Resolved here, not by the SDK, so that identity() (the cache key) names the server
        # actually asked; None stands for Google's own endpoint, as it always has in the key.
        url = normalise_base_url(config.base_url or os.environ.get(BASE_URL_VAR))
        self.base_url = None if url == DEFAULT_BASE_URL else url
        self._api_key = next((os.environ[v] for v in KEY_VARS if os.environ.get(v)), None)
        if self._api_key is None:
            if self.base_url is None:
                self.missing_credentials = f"{config.spec}: set GEMINI_API_KEY (or GOOGLE_API_KEY) to use Gemini"
            # A Gemini-compatible endpoint that needs no key; the SDK insists on one.
            self._api_key = "EMPTY"
        self._client = LoopBoundClient(self._new_client, lambda c: c.aio.aclose())
        self.mode = "json_schema" if config.response_format == "auto" else config.response_format
        self._logprobs = config.logprobs
        self._logprobs_seen = False
        self._schemas: dict[type[BaseModel], dict[str, Any]] = {}

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "base_url": self.base_url,
                "response_format": self.config.response_format, "logprobs": self.config.logprobs}

    def effective(self) -> dict[str, Any]:
        return {"response_format": self.mode, "logprobs": self._logprobs, "logprobs_returned": self._logprobs_seen}

    def _schema(self, model: type[BaseModel]) -> dict[str, Any]:
        schema = self._schemas.get(model)
        if schema is None:
            schema = self._schemas[model] = model.model_json_schema()
        return schema

    def _new_client(self) -> genai.Client:
        return genai.Client(
            api_key=self._api_key,
            http_options=types.HttpOptions(
                base_url=self.endpoint,  # always named, so the environment cannot override it
                api_version="v1beta",
                timeout=int(self.config.timeout_s * 1000),
                retry_options=types.HttpRetryOptions(attempts=1),
            ),
        )

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def client(self):
        """The SDK's async client (`genai.Client(...).aio`) of the running event loop (batch jobs use it too)."""
        return self._client.get().aio

    def request_config(self, call: JudgeCall) -> types.GenerateContentConfig:
        cfg = self.config
        thinking = None
        if cfg.thinking_budget is not None:
            thinking = types.ThinkingConfig(thinking_budget=cfg.thinking_budget)
        elif "thinking_level" in cfg.options:
            thinking = types.ThinkingConfig(thinking_level=cfg.options["thinking_level"])
        schema = self._schema(call.schema)
        verdict = "verdict" in call.schema.model_fields  # only a verdict has log-odds
        system = call.prompt.system if self.mode == "json_schema" else schema_prompt(call.prompt, schema).system
        return types.GenerateContentConfig(
            system_instruction=system,
            temperature=cfg.temperature,
            seed=cfg.seed,
            max_output_tokens=cfg.max_output_tokens,
            thinking_config=thinking,
            response_mime_type="application/json" if self.mode != "text" else None,
            # A JSON schema (not Gemini's OpenAPI subset) keeps the rubric's schema intact.
            response_json_schema=schema if self.mode == "json_schema" else None,
            response_logprobs=True if self._logprobs and verdict else None,
            logprobs=TOP_LOGPROBS if self._logprobs and verdict else None,
        )

    def request_body(self, call: JudgeCall) -> dict[str, Any]:
        """The wire JSON of `request_config(call)` with the prompt: what `generate` posts."""
        cfg = self.config
        schema = self._schema(call.schema)
        verdict = "verdict" in call.schema.model_fields
        system = call.prompt.system if self.mode == "json_schema" else schema_prompt(call.prompt, schema).system
        gen: dict[str, Any] = {"temperature": cfg.temperature}
        if cfg.seed is not None:
            gen["seed"] = cfg.seed
        if cfg.max_output_tokens is not None:
            gen["maxOutputTokens"] = cfg.max_output_tokens
        if cfg.thinking_budget is not None:
            gen["thinkingConfig"] = {"thinkingBudget": cfg.thinking_budget}
        elif "thinking_level" in cfg.options:
            gen["thinkingConfig"] = {"thinkingLevel": str(cfg.options["thinking_level"]).upper()}
        if self.mode != "text":
            gen["responseMimeType"] = "application/json"
        if self.mode == "json_schema":
            gen["responseJsonSchema"] = schema
        if self._logprobs and verdict:
            gen["responseLogprobs"] = True
            gen["logprobs"] = TOP_LOGPROBS
        return {
            "contents": [{"role": "user", "parts": [{"text": call.prompt.user}]}],
            "systemInstruction": {"role": "user", "parts": [{"text": system}]},
            "generationConfig": gen,
        }

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        # The wire request through the SDK's own API client (its URL, key, timeout and
        # errors), without its typed request/response models: those conversions were most
        # of the CPU of a request (bench/throughput.py).
        model = self.model if self.model.startswith(("models/", "tunedModels/")) else f"models/{self.model}"
        while True:
            asked_logprobs = self._logprobs
            try:
                response = await self.client()._api_client.async_request(
                    "post", f"{model}:generateContent", self.request_body(call))
            except errors.ClientError as exc:
                # Log-probabilities are not offered for every model: ask again without.
                if asked_logprobs and exc.code == 400 and "logprob" in str(exc).lower():
                    self._logprobs = False
                    continue
                raise
            except json.JSONDecodeError as e:  # the SDK may decode the body itself
                raise MalformedResponse(f"HTTP 200 with a body that is not a Gemini response (not JSON: {e.msg})") from None
            return self.answer_from_wire(_wire_body(response.body), call)

    def to_answer(self, response: types.GenerateContentResponse, call: JudgeCall) -> JudgeAnswer:
        """An SDK response (batch results) as a JudgeAnswer."""
        return self.answer_from_wire(response.model_dump(mode="json", by_alias=True, exclude_none=True), call)

    def answer_from_wire(self, body: dict[str, Any], call: JudgeCall) -> JudgeAnswer:
        """A generateContent response body (camelCase wire JSON) as a JudgeAnswer."""
        meta = body.get("usageMetadata") or {}
        usage = Usage(
            input_tokens=int(meta.get("promptTokenCount") or 0),
            output_tokens=int(meta.get("candidatesTokenCount") or 0),
            cached_tokens=int(meta.get("cachedContentTokenCount") or 0),
            thinking_tokens=int(meta.get("thoughtsTokenCount") or 0),
        )
        version = body.get("modelVersion")
        raw: dict[str, Any] = {"response_id": body.get("responseId")}
        feedback = body.get("promptFeedback") or {}
        if feedback.get("blockReason") is not None:
            raw["block_reason"] = str(feedback["blockReason"])
        candidates = body.get("candidates") or []
        if not candidates:
            finish = "safety" if "block_reason" in raw else "empty"
            return JudgeAnswer(None, finish, usage, version, raw=raw)

        candidate = candidates[0]
        wire_finish = candidate.get("finishReason")
        raw["finish_reason"] = wire_finish
        if candidate.get("finishMessage"):
            raw["finish_message"] = candidate["finishMessage"]
        parts = (candidate.get("content") or {}).get("parts") or []
        # Thought summaries are not the answer.
        texts = [p["text"] for p in parts if isinstance(p, dict) and p.get("text") is not None and not p.get("thought")]
        text = "".join(texts) if texts else None
        if wire_finish is None or wire_finish == "STOP":
            finish = "stop" if text and text.strip() else "empty"
        else:
            finish = _FINISH.get(wire_finish, "other")
        score = None
        if candidate.get("logprobsResult") is not None:
            self._logprobs_seen = True
            if finish == "stop":
                score = verdict_log_odds(text, _gemini_tokens(candidate["logprobsResult"]))
        return text_answer(call, text, finish, usage, version, mode=self.mode, score=score, raw=raw)

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, errors.APIError):
            return is_transient_status(exc.code)
        # google-genai lets timeouts, refused and dropped connections through unwrapped.
        return isinstance(exc, (httpx2.TransportError, asyncio.TimeoutError, MalformedResponse))

    def retry_after(self, exc: BaseException) -> float | None:
        if not isinstance(exc, errors.APIError):
            return None
        body = exc.details if isinstance(exc.details, dict) else {}
        error = body.get("error", body) if isinstance(body.get("error", body), dict) else {}
        for detail in error.get("details") or []:
            if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
                delay = parse_duration(detail.get("retryDelay"))
                if delay is not None:
                    return delay
        response = getattr(exc, "response", None)
        return delay_from_headers(getattr(response, "headers", None))

    async def prepare(self) -> None:
        self.client().models  # the SDK builds its API modules lazily

    async def preflight(self) -> None:
        """For an endpoint of our own (`base_url`): stop at once, in one line, when nothing
        listens there, rather than retrying every request against a closed port."""
        if self.base_url is None:
            return
        refused = await connection_refused(self.base_url, min(PREFLIGHT_TIMEOUT_S, self.config.timeout_s))
        if refused is not None:
            raise unreachable(self.spec, self.base_url, refused)

    async def aclose(self) -> None:
        await self._client.aclose()


def _gemini_tokens(result: dict[str, Any]) -> list | None:
    """`logprobsResult` as (token, logprob, alternatives) per generated token."""
    chosen = result.get("chosenCandidates") or []
    top = result.get("topCandidates") or []
    if not chosen or len(top) not in (0, len(chosen)):
        return None
    out = []
    for i, c in enumerate(chosen):
        if not isinstance(c.get("token"), str):
            return None
        alts = [(a["token"], a["logProbability"]) for a in ((top[i].get("candidates") or []) if top else [])
                if isinstance(a.get("token"), str) and isinstance(a.get("logProbability"), (int, float))]
        out.append((c["token"], c.get("logProbability"), alts))
    return out
