"""`gemini:MODEL` — Google's Gemini API through google-genai's async client.

One attempt per `generate` (the SDK's retries are off; retry.py owns retrying). Safety blocks,
truncation and empty answers come back as a `JudgeAnswer` with that finish reason; HTTP and
transport failures raise the SDK's own exceptions (`google.genai.errors.APIError`, or httpx2
transport errors, which google-genai does not wrap).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx2
from google import genai
from google.genai import errors, types

from memjudge.errors import UsageError
from memjudge.judges.base import (
    Judge, JudgeAnswer, JudgeCall, JudgeConfig, LoopBoundClient, MalformedResponse, Usage, is_transient_status,
    normalise_base_url, parse_answer,
)
from memjudge.retry import delay_from_headers, parse_duration

KEY_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_VAR = "GOOGLE_GEMINI_BASE_URL"  # honoured by google-genai itself
DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"  # the SDK's own default
# Provider options this judge understands (JudgeConfig.options).
OPTIONS = frozenset({"thinking_level"})

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


def _name(value: Any) -> str | None:
    """An SDK enum (or an unknown string the SDK kept as is) as its wire name."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


class GeminiJudge(Judge):
    prefix = "gemini"
    network = True

    def __init__(self, config: JudgeConfig):
        super().__init__(config)
        self.check_options(OPTIONS)
        if config.thinking_budget is not None and "thinking_level" in config.options:
            raise UsageError(f"{config.spec}: set thinking_budget or options.thinking_level, not both")
        # Resolved here, not by the SDK, so that identity() (the cache key) names the server
        # actually asked; None stands for Google's own endpoint, as it always has in the key.
        url = normalise_base_url(config.base_url or os.environ.get(BASE_URL_VAR))
        self.base_url = None if url == DEFAULT_BASE_URL else url
        self._api_key = next((os.environ[v] for v in KEY_VARS if os.environ.get(v)), None)
        if self._api_key is None:
            if self.base_url is None:
                raise UsageError(f"{config.spec}: set GEMINI_API_KEY (or GOOGLE_API_KEY) to use Gemini")
            # A Gemini-compatible endpoint that needs no key; the SDK insists on one.
            self._api_key = "EMPTY"
        self._client = LoopBoundClient(self._new_client, lambda c: c.aio.aclose())

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

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "base_url": self.base_url}

    def _aio(self):
        return self._client.get().aio

    def request_config(self, call: JudgeCall) -> types.GenerateContentConfig:
        cfg = self.config
        thinking = None
        if cfg.thinking_budget is not None:
            thinking = types.ThinkingConfig(thinking_budget=cfg.thinking_budget)
        elif "thinking_level" in cfg.options:
            thinking = types.ThinkingConfig(thinking_level=cfg.options["thinking_level"])
        return types.GenerateContentConfig(
            system_instruction=call.prompt.system,
            temperature=cfg.temperature,
            seed=cfg.seed,
            max_output_tokens=cfg.max_output_tokens,
            thinking_config=thinking,
            response_mime_type="application/json",
            # A JSON schema (not Gemini's OpenAPI subset) keeps the rubric's schema intact.
            response_json_schema=call.schema.model_json_schema(),
        )

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        try:
            response = await self._aio().models.generate_content(
                model=self.model, contents=call.prompt.user, config=self.request_config(call),
            )
        except json.JSONDecodeError as e:  # the SDK decodes the body itself
            raise MalformedResponse(f"HTTP 200 with a body that is not a Gemini response (not JSON: {e.msg})") from None
        # A Gemini response has at least one of these, even when it is blocked or empty.
        if not {"candidates", "prompt_feedback", "usage_metadata"} & response.model_fields_set:
            raise MalformedResponse("HTTP 200 with a body that is not a Gemini response "
                                    "(no candidates, promptFeedback or usageMetadata)")
        return self.to_answer(response, call)

    @staticmethod
    def to_answer(response: types.GenerateContentResponse, call: JudgeCall) -> JudgeAnswer:
        meta = response.usage_metadata
        usage = Usage(
            input_tokens=(meta.prompt_token_count or 0) if meta else 0,
            output_tokens=(meta.candidates_token_count or 0) if meta else 0,
            cached_tokens=(meta.cached_content_token_count or 0) if meta else 0,
            thinking_tokens=(meta.thoughts_token_count or 0) if meta else 0,
        )
        raw: dict[str, Any] = {"response_id": response.response_id}
        feedback = response.prompt_feedback
        if feedback is not None and feedback.block_reason is not None:
            raw["block_reason"] = _name(feedback.block_reason)
        if not response.candidates:
            finish = "safety" if "block_reason" in raw else "empty"
            return JudgeAnswer(None, finish, usage, response.model_version, raw=raw)

        candidate = response.candidates[0]
        wire_finish = _name(candidate.finish_reason)
        raw["finish_reason"] = wire_finish
        if candidate.finish_message:
            raw["finish_message"] = candidate.finish_message
        parts = candidate.content.parts if candidate.content and candidate.content.parts else []
        # Thought summaries are not the answer.
        texts = [p.text for p in parts if p.text is not None and not p.thought]
        text = "".join(texts) if texts else None
        if wire_finish is None or wire_finish == "STOP":
            finish = "stop" if text and text.strip() else "empty"
        else:
            finish = _FINISH.get(wire_finish, "other")
        parsed = parse_answer(call, text) if finish == "stop" else None
        return JudgeAnswer(text, finish, usage, response.model_version, parsed=parsed, raw=raw)

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
        self._aio().models  # the SDK builds its API modules lazily

    async def aclose(self) -> None:
        await self._client.aclose()
