"""`openai:MODEL` — OpenAI's Chat Completions API, or any OpenAI-compatible server (vLLM,
Ollama, llama.cpp) named by `base_url`, through the openai package's async client.

One attempt per `generate` (max_retries=0; retry.py owns retrying). The answer is requested
with a strict JSON-schema response format (`chat.completions.parse`). Truncation, content
filtering, refusals and empty answers come back as a `JudgeAnswer` with that finish reason;
HTTP and transport failures raise the SDK's own exceptions (`APIStatusError`,
`APIConnectionError`, `APITimeoutError`).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx2
import openai
import pydantic
from openai.lib._parsing import type_to_response_format_param
from openai.types.chat import ChatCompletion

from memjudge.errors import UsageError
from memjudge.judges.base import (
    Judge, JudgeAnswer, JudgeCall, JudgeConfig, LoopBoundClient, MalformedResponse, Usage, is_transient_status,
    normalise_base_url, parse_answer,
)
from memjudge.retry import delay_from_headers

KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VAR = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's own default
# Provider options this judge understands (JudgeConfig.options).
OPTIONS = frozenset({"reasoning_effort"})

_FINISH = {"stop": "stop", "length": "length", "content_filter": "safety"}


def _snippet(text: str) -> str:
    text = " ".join(str(text).split())
    return repr(text[:120] + ("..." if len(text) > 120 else ""))


def _completion_body(http_response) -> dict[str, Any]:
    """The JSON body of a chat completion; MalformedResponse when it is not one."""
    try:
        body = http_response.json()
    except (ValueError, RecursionError):
        body = None
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, dict) and isinstance(c.get("message"), dict) for c in choices):
        raise MalformedResponse(f"HTTP {http_response.status_code} with a body that is not an OpenAI chat completion: "
                                f"{_snippet(http_response.text)}")
    return body


class OpenAIJudge(Judge):
    prefix = "openai"
    network = True

    def __init__(self, config: JudgeConfig):
        super().__init__(config)
        self.check_options(OPTIONS)
        if config.thinking_budget is not None:
            raise UsageError(f"{config.spec}: thinking_budget is a Gemini setting; "
                             "use options.reasoning_effort for OpenAI reasoning models")
        # Resolved here, not by the SDK, so that identity() (the cache key) names the server
        # actually asked. None stands for OpenAI itself, however it is spelled: the key of
        # the usual case stays what it has always been.
        url = normalise_base_url(config.base_url or os.environ.get(BASE_URL_VAR))
        self.base_url = None if url == DEFAULT_BASE_URL else url
        self._api_key = os.environ.get(KEY_VAR) or None
        if self._api_key is None:
            if self.base_url is None:
                raise UsageError(f"{config.spec}: set {KEY_VAR} to use OpenAI "
                                 "(or --base-url for an OpenAI-compatible server)")
            # Compatible servers (vLLM, Ollama, llama.cpp) accept any key; the SDK needs one.
            self._api_key = "EMPTY"
        self._client = LoopBoundClient(
            # Always named: left to the SDK, OPENAI_BASE_URL could override an explicit default.
            lambda: openai.AsyncOpenAI(api_key=self._api_key, base_url=self.endpoint, max_retries=0,
                                       timeout=self.config.timeout_s),
            lambda c: c.close(),
        )

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "base_url": self.base_url}

    def _aio(self) -> openai.AsyncOpenAI:
        return self._client.get()

    def request_params(self, call: JudgeCall) -> dict[str, Any]:
        cfg = self.config
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": call.prompt.system},
                {"role": "user", "content": call.prompt.user},
            ],
            "response_format": call.schema,
            "temperature": cfg.temperature,
        }
        if cfg.max_output_tokens is not None:
            # OpenAI itself wants max_completion_tokens (reasoning models reject max_tokens);
            # compatible servers have long accepted max_tokens, not all the newer name.
            name = "max_tokens" if self.base_url else "max_completion_tokens"
            params[name] = cfg.max_output_tokens
        if cfg.seed is not None:
            params["seed"] = cfg.seed
        if "reasoning_effort" in cfg.options:
            params["reasoning_effort"] = cfg.options["reasoning_effort"]
        return params

    def request_body(self, call: JudgeCall) -> dict[str, Any]:
        """The JSON body `generate` sends for this call (e.g. one line of a batch file)."""
        params = self.request_params(call)
        params["response_format"] = type_to_response_format_param(call.schema)
        return params

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        # The raw response keeps the answer text when the SDK's parse raises (truncation,
        # content filter, text that does not fit the schema).
        response = await self._aio().chat.completions.with_raw_response.parse(**self.request_params(call))
        body = _completion_body(response.http_response)
        try:
            completion: ChatCompletion = response.parse()
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            completion = exc.completion
        except pydantic.ValidationError:  # the answer text does not fit the schema
            # The SDK's own lenient construction, as its parse would have done.
            completion = ChatCompletion.construct(**body)
        try:
            answer = self.to_answer(completion, call)
        except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:  # a body of odd values
            raise MalformedResponse(f"HTTP {response.http_response.status_code} with a body that is not an OpenAI chat "
                                    f"completion ({type(e).__name__}: {e}): {_snippet(response.http_response.text)}") from None
        request_id = response.headers.get("x-request-id")
        if request_id:
            answer.raw["request_id"] = request_id
        return answer

    @staticmethod
    def to_answer(completion: ChatCompletion, call: JudgeCall) -> JudgeAnswer:
        u = completion.usage
        reasoning = 0
        cached = 0
        if u is not None:
            reasoning = (u.completion_tokens_details.reasoning_tokens or 0) if u.completion_tokens_details else 0
            cached = (u.prompt_tokens_details.cached_tokens or 0) if u.prompt_tokens_details else 0
        # output_tokens excludes reasoning tokens, as Gemini's candidatesTokenCount excludes
        # thoughts: both providers bill output + thinking.
        usage = Usage(
            input_tokens=u.prompt_tokens if u else 0,
            output_tokens=max(0, (u.completion_tokens if u else 0) - reasoning),
            cached_tokens=cached,
            thinking_tokens=reasoning,
        )
        version = completion.model
        if completion.system_fingerprint:
            version = f"{version} ({completion.system_fingerprint})"
        raw: dict[str, Any] = {"id": completion.id, "model": completion.model,
                               "system_fingerprint": completion.system_fingerprint}
        if not completion.choices:
            return JudgeAnswer(None, "empty", usage, version, raw=raw)
        choice = completion.choices[0]
        message = choice.message
        text = message.content
        raw["finish_reason"] = choice.finish_reason
        if message.refusal:
            raw["refusal"] = message.refusal
            return JudgeAnswer(text, "safety", usage, version, raw=raw)
        finish = _FINISH.get(choice.finish_reason, "other")
        if finish == "stop" and not (text and text.strip()):
            finish = "empty"
        parsed = None
        if finish == "stop":
            sdk_parsed = getattr(message, "parsed", None)
            parsed = sdk_parsed.model_dump() if sdk_parsed is not None else parse_answer(call, text)
        return JudgeAnswer(text, finish, usage, version, parsed=parsed, raw=raw)

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, openai.APIStatusError):
            return is_transient_status(exc.status_code)
        # APIConnectionError covers APITimeoutError; the bare httpx2 errors should not reach
        # us, but a dropped connection is transient whoever reports it.
        return isinstance(exc, (openai.APIConnectionError, httpx2.TransportError, asyncio.TimeoutError, MalformedResponse))

    def retry_after(self, exc: BaseException) -> float | None:
        if isinstance(exc, openai.APIStatusError):
            return delay_from_headers(exc.response.headers)
        return None

    async def prepare(self) -> None:
        self._aio().chat.completions.with_raw_response  # the SDK imports its resources lazily

    async def aclose(self) -> None:
        await self._client.aclose()
