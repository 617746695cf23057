"""`openai:MODEL` — OpenAI's Chat Completions API, or any OpenAI-compatible server (vLLM,
Ollama, llama.cpp, LM Studio) named by `base_url`, through the openai package's async client.

One attempt per `generate` (max_retries=0; retry.py owns retrying). The request is the body
`chat.completions.create` would send (posted as built, see _request_options), whose response
format follows `JudgeConfig.response_format`:

- `json_schema`: the rubric's schema as a strict JSON-schema response format;
- `json_object`: `{"type": "json_object", "schema": ...}` (what llama-cpp-python's server
  enforces; others take the JSON mode and ignore the schema) with the schema in the prompt;
- `text`: no response format, the schema in the prompt, and the first JSON object of the
  answer taken as the answer;
- `auto` (default): `json_schema` first; when the endpoint refuses it (a request-validation
  error naming the response format, whatever its HTTP status) or twice in a row answers
  with no JSON object at all, the next mode, for this and every later call of the judge.

Other request parameters a server refuses as invalid (`logprobs`, `seed`, the name of the
token limit) are dropped or renamed the same way, once; what the judge ended up sending is
`effective()` (recorded in config.json and the run summary). Validation of the answer is
memjudge's own (rubrics.py): the SDK's `parse()` is not used.

With `logprobs` (default on), `judge_score` is the verdict's log-odds read from the answer's
token log-probabilities (`base.verdict_log_odds`); null when the server sends none.

Truncation, content filtering, refusals and empty answers come back as a `JudgeAnswer` with
that finish reason; HTTP and transport failures raise the SDK's own exceptions. A request
the server rejects as malformed is never retried (`is_retryable`), even as an HTTP 500.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import re
from typing import TYPE_CHECKING, Any, cast

from memjudge._util import lazy
from memjudge.errors import MemjudgeError, UsageError
from memjudge.judges.base import (
    RESPONSE_FORMATS,
    Judge,
    JudgeAnswer,
    JudgeCall,
    JudgeConfig,
    LoopBoundClient,
    MalformedResponse,
    Usage,
    connection_refused,
    delay_from_headers,
    is_request_error,
    is_transient_status,
    normalise_base_url,
    schema_prompt,
    text_answer,
    unreachable,
    verdict_log_odds,
)
from memjudge.judges.rubrics import AnswerError, parse_json_answer

if TYPE_CHECKING:
    import httpx2
    import openai
else:  # imported by the first request: a fully cached run never loads the SDK
    httpx2 = lazy.module("httpx2")
    openai = lazy.module("openai")

KEY_VAR = "OPENAI_API_KEY"
BASE_URL_VAR = "OPENAI_BASE_URL"
DEFAULT_BASE_URL = "https://api.openai.com/v1"  # the SDK's own default
# Provider options this judge understands (JudgeConfig.options).
OPTIONS = frozenset({"reasoning_effort"})
# Alternatives per token (OpenAI's maximum; vLLM's default cap, llama.cpp has none).
TOP_LOGPROBS = 20
# Answers without any JSON object, in a row, after which `auto` stops trusting a mode.
IGNORED_FORMAT_STRIKES = 2
PREFLIGHT_TIMEOUT_S = 30.0

_FINISH = {"stop": "stop", "length": "length", "content_filter": "safety"}
# The request body goes out as built: `chat.completions.create()` would first walk it
# against the SDK's TypedDicts (the rubric's JSON schema included), the largest CPU cost of
# a request (bench/throughput.py). Same endpoint, auth, errors and timeout.
@functools.cache
def _request_options() -> Any:
    from openai._base_client import make_request_options

    return make_request_options(security={"bearer_auth": True})


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
        self.check_options(self.options)
        if config.thinking_budget is not None:
            raise UsageError(f"{config.spec}: thinking_budget is a Gemini setting; "
                             "use options.reasoning_effort for OpenAI reasoning models")
        if config.response_format == "tool":
            raise UsageError(f"{config.spec}: response_format tool is Anthropic's; OpenAI takes "
                             "auto, json_schema, json_object or text")
        self.connect(config)
        self._client = LoopBoundClient(self.new_client, lambda c: c.close())
        # What the endpoint accepts, learnt as the run goes (see the module docstring).
        self.mode = RESPONSE_FORMATS[0] if config.response_format == "auto" else config.response_format
        self._object_schema = True  # send "schema" inside a json_object response format
        self._logprobs = config.logprobs
        self._logprobs_seen = False
        self._drop: set[str] = set()
        # OpenAI itself wants max_completion_tokens (reasoning models reject max_tokens);
        # compatible servers have long accepted max_tokens, not all the newer name.
        self._max_name = "max_tokens" if self.base_url and not self.hosted else "max_completion_tokens"
        self._strikes = 0
        self._adapted: list[str] = []
        self.served_model: str | None = None
        self.slots: int | None = config.server_slots
        self._gate: asyncio.Semaphore | None = None
        self._formats: dict[type, dict[str, Any]] = {}

    options: frozenset[str] = OPTIONS  # the provider options this judge understands
    hosted = False  # True: OpenAI's models wherever base_url points (Azure), not a compatible server
    batch_endpoint = "/v1/chat/completions"  # a batch line's url and the batch's endpoint (openai_batch.py)

    def connect(self, config: JudgeConfig) -> None:
        """Where requests go and with which key (`base_url`, `_api_key`, `missing_credentials`)."""
        # Resolved here, not by the SDK, so that identity() (the cache key) names the server
        # actually asked. None stands for OpenAI itself, however it is spelled: the key of
        # the usual case stays what it has always been.
        url = normalise_base_url(config.base_url or os.environ.get(BASE_URL_VAR))
        self.base_url = None if url == DEFAULT_BASE_URL else url
        self._api_key = os.environ.get(KEY_VAR) or None
        if self._api_key is None:
            if self.base_url is None:
                self.missing_credentials = (f"{config.spec}: set {KEY_VAR} to use OpenAI "
                                            "(or --base-url for an OpenAI-compatible server)")
            # Compatible servers (vLLM, Ollama, llama.cpp) accept any key; the SDK needs one.
            self._api_key = "EMPTY"

    def new_client(self) -> openai.AsyncOpenAI:
        # Always named: left to the SDK, OPENAI_BASE_URL could override an explicit default.
        return openai.AsyncOpenAI(api_key=self._api_key, base_url=self.endpoint, max_retries=0, timeout=self.config.timeout_s)

    @property
    def endpoint(self) -> str:
        return self.base_url or DEFAULT_BASE_URL

    def identity(self) -> dict[str, Any]:
        return {**super().identity(), "base_url": self.base_url,
                "response_format": self.config.response_format, "logprobs": self.config.logprobs}

    def effective(self) -> dict[str, Any]:
        return {
            "response_format": self.mode,
            "json_object_schema": self._object_schema if self.mode == "json_object" else None,
            "logprobs": self._logprobs,
            "logprobs_returned": self._logprobs_seen,
            "dropped_params": sorted(self._drop),
            "max_tokens_param": self._max_name,
            "adapted": list(self._adapted),
            "served_model": self.served_model,
            "server_slots": self.slots,
        }

    def client(self) -> openai.AsyncOpenAI:
        """The SDK's async client of the running event loop (batch files and jobs use it too)."""
        return self._client.get()

    # -- the request ------------------------------------------------------------------------

    def _schema_format(self, schema: type) -> dict[str, Any]:
        fmt = self._formats.get(schema)
        if fmt is None:
            from openai.lib._parsing import type_to_response_format_param

            # The SDK's strict conversion (additionalProperties false, every key required). Its
            # annotation covers every argument it takes; given a model class it returns the
            # json_schema dict, never `omit`.
            fmt = self._formats[schema] = cast(dict[str, Any], type_to_response_format_param(schema))
        return fmt

    def request_params(self, call: JudgeCall, mode: str | None = None) -> dict[str, Any]:
        cfg = self.config
        mode = mode or self.mode
        prompt = call.prompt
        fmt = self._schema_format(call.schema)
        if mode != "json_schema":
            prompt = schema_prompt(prompt, fmt["json_schema"]["schema"])
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ],
            "temperature": cfg.temperature,
        }
        if mode == "json_schema":
            params["response_format"] = fmt
        elif mode == "json_object":
            params["response_format"] = ({"type": "json_object", "schema": fmt["json_schema"]["schema"]}
                                         if self._object_schema else {"type": "json_object"})
        if cfg.max_output_tokens is not None:
            params[self._max_name] = cfg.max_output_tokens
        if cfg.seed is not None and "seed" not in self._drop:
            params["seed"] = cfg.seed
        if "reasoning_effort" in cfg.options:
            params["reasoning_effort"] = cfg.options["reasoning_effort"]
        if self._logprobs and "verdict" in call.schema.model_fields:
            # Only a verdict has log-odds; servers pay for log-probabilities (llama.cpp:
            # a sort of the vocabulary per token), so answers without one do not ask.
            params["logprobs"] = True
            params["top_logprobs"] = TOP_LOGPROBS
        return params

    def request_body(self, call: JudgeCall) -> dict[str, Any]:
        """The JSON body `generate` sends for this call (e.g. one line of a batch file)."""
        return self.request_params(call)

    def _adapt(self, exc: openai.APIStatusError, params: dict[str, Any], mode: str) -> bool:
        """Change what we send after the server rejected a request as invalid; False when
        there is nothing left to change (the error then stands)."""
        text = _error_text(exc)
        if not is_request_error(exc.status_code, text):
            return False
        low = text.lower()
        if "logprobs" in params and "logprob" in low:
            self._logprobs = False
            self._adapted.append("logprobs off")
            return True
        if "seed" in params and re.search(r"\bseed\b", low):
            self._drop.add("seed")
            self._adapted.append("seed dropped")
            return True
        for name, other in (("max_completion_tokens", "max_tokens"), ("max_tokens", "max_completion_tokens")):
            if name in params and name in low and f"{other}" not in self._adapted:
                self._max_name = other
                self._adapted.append(other)
                return True
        if "response_format" in params and re.search(r"response_format|json_schema|json_object|schema", low):
            if self.config.response_format == "auto":
                if self.mode == mode:  # concurrent calls see the same refusal; step down once
                    self._step_down(mode, f"{mode} refused (HTTP {exc.status_code})")
                return True
            if mode == "json_object" and self._object_schema:
                self._object_schema = False
                self._adapted.append("json_object without schema")
                return True
        return False

    def _step_down(self, mode: str, why: str) -> None:
        i = RESPONSE_FORMATS.index(mode)
        if i + 1 < len(RESPONSE_FORMATS):
            self.mode = RESPONSE_FORMATS[i + 1]
            self._strikes = 0
            self._adapted.append(f"{why}: {self.mode}")

    async def preflight(self) -> None:
        """For a compatible server: can it be reached, which model does it serve (recorded in
        `model_version` when its answers do not say), how many requests does it compute at
        once (llama.cpp: its slots; time spent waiting for one is then not request time)."""
        # A gate per run: an asyncio.Semaphore belongs to the event loop that used it.
        self._gate = asyncio.Semaphore(self.slots) if self.slots is not None else None
        if self.base_url is None:
            return
        client = self.client().with_options(timeout=PREFLIGHT_TIMEOUT_S)
        try:
            response = await client.models.with_raw_response.list()
            body = response.http_response.json()
        except openai.APITimeoutError:
            # A busy server (llama-cpp-python answers even its model list only between
            # completions): no model list, no slot count; the answers still work.
            return
        except openai.APIConnectionError as exc:
            raise unreachable(self.spec, self.base_url, exc.__cause__ or exc) from None
        except (openai.APIStatusError, ValueError):
            return  # no model list (some servers): the answers still work
        data = [m for m in (body.get("data") or []) if isinstance(m, dict)] if isinstance(body, dict) else []
        ids = [str(m.get("id")) for m in data if m.get("id")]
        if self.model in ids:
            self.served_model = self.model
        elif len(ids) == 1:
            self.served_model = ids[0]
        if self.slots is None:
            self.slots = await self._probe_slots(data)
            if self.slots is not None:
                self._gate = asyncio.Semaphore(self.slots)

    async def _probe_slots(self, models: list[dict]) -> int | None:
        # llama.cpp's C++ server says how many slots it has; llama-cpp-python's Python server
        # (its model list says owned_by "me") computes one request at a time.
        root = re.sub(r"/v1/?$", "", self.base_url or "")
        try:
            async with httpx2.AsyncClient(timeout=PREFLIGHT_TIMEOUT_S) as http:
                r = await http.get(f"{root}/props")
            if r.status_code == 200:
                slots = r.json().get("total_slots")
                if isinstance(slots, int) and slots >= 1:
                    return slots
        except (httpx2.HTTPError, ValueError, AttributeError):
            pass
        if models and all(m.get("owned_by") == "me" for m in models):
            return 1
        return None

    def slot(self):
        # The engine holds it around each attempt and starts the request's deadline inside it.
        return self._gate if self._gate is not None else contextlib.nullcontext()

    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        for _ in range(len(RESPONSE_FORMATS) + 4):
            try:
                # Read the mode now (a slot is ours): a refusal seen meanwhile is not repeated.
                mode = self.mode
                params = self.request_params(call, mode)
                response = await self.client().post("/chat/completions", body=params, cast_to=httpx2.Response,
                                                  options=_request_options())
            except openai.APIStatusError as exc:
                if self._adapt(exc, params, mode):
                    continue
                raise
            body = _completion_body(response)  # MalformedResponse (retried) when it is no chat completion
            try:
                answer = self.to_answer(body, call, mode)
            except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:  # a body of odd values
                raise MalformedResponse(f"HTTP {response.status_code} with a body that is not an OpenAI chat "
                                        f"completion ({type(e).__name__}: {e}): {_snippet(response.text)}") from None
            request_id = response.headers.get("x-request-id")
            if request_id and answer.raw is not None:  # to_answer always sets raw
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
        raise MemjudgeError(f"judge {self.spec}: the server refused every request format tried ({'; '.join(self._adapted)})")

    def to_answer(self, completion: Any, call: JudgeCall, mode: str | None = None) -> JudgeAnswer:
        """A chat completion (its JSON body, or the SDK's ChatCompletion) as a JudgeAnswer."""
        body: dict[str, Any] = completion if isinstance(completion, dict) else completion.model_dump()
        mode = mode or self.mode
        u = body.get("usage") or {}
        reasoning = int(((u.get("completion_tokens_details") or {}).get("reasoning_tokens")) or 0)
        cached = int(((u.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
        # output_tokens excludes reasoning tokens, as Gemini's candidatesTokenCount excludes
        # thoughts: both providers bill output + thinking.
        usage = Usage(
            input_tokens=int(u.get("prompt_tokens") or 0),
            output_tokens=max(0, int(u.get("completion_tokens") or 0) - reasoning),
            cached_tokens=cached,
            thinking_tokens=reasoning,
        )
        model, fingerprint = body.get("model"), body.get("system_fingerprint")
        version: str | None
        if fingerprint:
            version = f"{model} ({fingerprint})"
        else:
            # Compatible servers echo whatever model name was asked for: the model list says
            # what is actually served.
            version = self.served_model or model
        raw: dict[str, Any] = {"id": body.get("id"), "model": model, "system_fingerprint": fingerprint, "response_format": mode}
        choices = body.get("choices") or []
        if not choices:
            return JudgeAnswer(None, "empty", usage, version, raw=raw)
        choice = choices[0]
        message = choice.get("message") or {}
        text = message.get("content")
        raw["finish_reason"] = choice.get("finish_reason")
        if message.get("refusal"):
            raw["refusal"] = message["refusal"]
            return JudgeAnswer(text, "safety", usage, version, raw=raw)
        finish = _FINISH.get(choice.get("finish_reason"), "other")
        if finish == "stop" and not (text and text.strip()):
            finish = "empty"
        score = verdict_log_odds(text, _openai_tokens(choice.get("logprobs"))) if finish == "stop" else None
        if choice.get("logprobs"):
            self._logprobs_seen = True
        return text_answer(call, text, finish, usage, version, mode=mode, score=score, raw=raw)

    # -- errors ---------------------------------------------------------------------------

    def is_retryable(self, exc: BaseException) -> bool:
        if isinstance(exc, openai.APIStatusError):
            if is_request_error(exc.status_code, _error_text(exc)):
                return False  # a malformed request stays malformed (llama-cpp-python: HTTP 500)
            return is_transient_status(exc.status_code)
        # APIConnectionError covers APITimeoutError; the bare httpx2 errors should not reach
        # us, but a dropped connection is transient whoever reports it.
        return isinstance(exc, (openai.APIConnectionError, httpx2.TransportError, asyncio.TimeoutError, MalformedResponse))

    def retry_after(self, exc: BaseException) -> float | None:
        if isinstance(exc, openai.APIStatusError):
            return delay_from_headers(exc.response.headers)
        return None

    async def prepare(self) -> None:
        self.client().chat.completions.with_raw_response  # the SDK imports its resources lazily

    async def aclose(self) -> None:
        await self._client.aclose()


def _is_json(text: str | None) -> bool:
    """The answer is one JSON value (a code fence around it allowed): the format was kept."""
    try:
        parse_json_answer(text)
    except AnswerError:
        return False
    return True


def _error_text(exc: openai.APIStatusError) -> str:
    try:
        return exc.response.text
    except Exception:  # a streamed or closed response: the SDK's message has the gist
        return str(exc)


def _openai_tokens(logprobs: Any) -> list | None:
    """OpenAI/vLLM/llama.cpp `choices[0].logprobs.content` as (token, logprob, alternatives)."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not content:
        return None
    out = []
    for t in content:
        if not isinstance(t, dict) or not isinstance(t.get("token"), str):
            return None
        top = [(a["token"], a["logprob"]) for a in t.get("top_logprobs") or []
               if isinstance(a, dict) and isinstance(a.get("token"), str) and isinstance(a.get("logprob"), (int, float))]
        out.append((t["token"], t.get("logprob"), top))
    return out



# ---------------------------------------------------------------------------------------
# azure:DEPLOYMENT — the same judge through the openai SDK's Azure client

AZURE_KEY_VAR = "AZURE_OPENAI_API_KEY"
AZURE_TOKEN_VAR = "AZURE_OPENAI_AD_TOKEN"  # a Microsoft Entra ID token, read by the SDK itself
AZURE_ENDPOINT_VAR = "AZURE_OPENAI_ENDPOINT"
# The newest generally available data-plane API version checked against the SDK (providers.md);
# a judges file's options.api_version wins.
AZURE_API_VERSION = "2024-10-21"


class AzureOpenAIJudge(OpenAIJudge):
    """`azure:DEPLOYMENT`: an Azure OpenAI resource (`base_url` is its endpoint,
    `https://RESOURCE.openai.azure.com`), through `openai.AsyncAzureOpenAI`. Requests go to
    `/openai/deployments/DEPLOYMENT/chat/completions?api-version=...` with the key in the
    `api-key` header (or an Entra ID token from AZURE_OPENAI_AD_TOKEN); everything else
    (response formats, log-odds, batch through a Global Batch deployment) is the OpenAI judge's."""

    prefix = "azure"
    options = OPTIONS | {"api_version"}
    hosted = True
    batch_endpoint = "/chat/completions"  # Azure's Global Batch: the deployment is each line's model

    def connect(self, config: JudgeConfig) -> None:
        url = normalise_base_url(config.base_url or os.environ.get(AZURE_ENDPOINT_VAR))
        if url is None:
            raise UsageError(f"{config.spec}: an azure: judge needs its resource's endpoint: --base-url "
                             f"https://RESOURCE.openai.azure.com (or {AZURE_ENDPOINT_VAR})")
        self.base_url = url
        self.api_version = str(config.options.get("api_version") or AZURE_API_VERSION)
        self._api_key = os.environ.get(AZURE_KEY_VAR) or None
        self._token = None if self._api_key else (os.environ.get(AZURE_TOKEN_VAR) or None)
        if self._api_key is None and self._token is None:
            self.missing_credentials = f"{config.spec}: set {AZURE_KEY_VAR} (or {AZURE_TOKEN_VAR}) to use Azure OpenAI"

    def new_client(self) -> openai.AsyncAzureOpenAI:
        return openai.AsyncAzureOpenAI(azure_endpoint=self.endpoint, api_key=self._api_key, azure_ad_token=self._token,
                                       api_version=self.api_version, max_retries=0, timeout=self.config.timeout_s)

    @property
    def endpoint(self) -> str:
        return cast(str, self.base_url)

    def effective(self) -> dict[str, Any]:
        return {**super().effective(), "api_version": self.api_version}

    async def preflight(self) -> None:
        """Stop at once, in one line, when nothing listens at the endpoint (Azure has no
        model list to learn from: the deployment is the model)."""
        self._gate = asyncio.Semaphore(self.slots) if self.slots is not None else None
        refused = await connection_refused(self.endpoint, min(PREFLIGHT_TIMEOUT_S, self.config.timeout_s))
        if refused is not None:
            raise unreachable(self.spec, self.endpoint, refused)
