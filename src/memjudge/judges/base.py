"""The judge interface: what every provider implements and what the engine relies on.

A provider turns one rendered prompt into one `JudgeAnswer`. It never retries and never
caches: `retry.py` and `cache.py` own those. It tells the retry policy which of its errors
are transient (`is_retryable`) and what delay the server asked for (`retry_after`).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import math
import re
import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from memjudge._util import jsontext


class JudgeConfig(BaseModel):
    """Every setting of one judge: the one object that the CLI's flags, a judges file's
    `[[judge]]` table and the Python API fill alike (`judge_config` reads a judges file and
    applies overrides; `score_run` takes it as its `judge`). The generation parameters
    (`generation_params`), the base URL and, for served models, `response_format` and
    `logprobs` are part of the answer cache's key; the rest is how the judge is called."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    spec: str
    """`provider:model` (`openai:gpt-4o-mini`, `anthropic:claude-haiku-4-5`, `azure:DEPLOYMENT`,
    `gemini:gemini-2.5-flash`, `local:qwen2.5-coder-1.5b`, `sim:paper`)."""
    base_url: str | None = None
    """An OpenAI-compatible server's URL (`http://127.0.0.1:8000/v1`), a Messages API gateway's host
    (anthropic:), an Azure OpenAI resource's endpoint (azure:); None: the provider's own."""
    temperature: float = 0.0
    """Sampling temperature (0: the judge's most likely answer)."""
    max_output_tokens: int | None = 1024
    """Cap on the answer's tokens; an answer cut short is asked again, never guessed."""
    seed: int | None = None
    """The provider's sampling seed, where it takes one."""
    thinking_budget: int | None = None
    """Thinking tokens of a reasoning model (Gemini), None: the provider's default."""
    timeout_s: float = 120.0
    """Per attempt, connecting, waiting and reading together (network judges)."""
    concurrency: int = Field(default=16, ge=1)
    """Calls in flight at once."""
    rpm: float | None = Field(default=None, gt=0)
    """Requests per minute the run stays under (None: no limit of ours)."""
    tpm: float | None = Field(default=None, gt=0)
    """Tokens per minute the run stays under (None: no limit of ours)."""
    price_input_per_mtok: float | None = None
    """USD per million input tokens, for the cost figures (None: cost unknown)."""
    price_output_per_mtok: float | None = None
    """USD per million output tokens."""
    price_cache_write_per_mtok: float | None = None
    """USD per million input tokens written to the provider's prompt cache (None: the judge's
    default: anthropic: 1.25 x the input price; others bill no cache writes)."""
    price_cache_read_per_mtok: float | None = None
    """USD per million input tokens read from the provider's prompt cache (None: the judge's
    default: anthropic: 0.1 x the input price; others: the input price)."""
    price_per_call: float | None = Field(default=None, ge=0)
    """USD per request, beside or instead of the token prices (a flat-rate service, a simulated judge)."""
    replicates: int | None = Field(default=None, ge=2)
    """A cascade stage's confidence: agreement among this many replicates (for a judge without
    `judge_score`); None: the judge's own log-odds."""
    batch_discount: float = 0.5
    """The provider's batch price as a fraction of its online price."""
    max_attempts: int = Field(default=8, ge=1)
    """Attempts per call on transient errors (not a generation parameter: not in the cache key)."""
    retry_initial_s: float = Field(default=1.0, ge=0)
    """The first backoff delay."""
    retry_max_s: float = Field(default=60.0, ge=0)
    """Cap of our own backoff; a server's asked-for delay is honoured beyond it."""
    retry_after_max_s: float = Field(default=600.0, ge=0)
    """A server asking for a longer wait than this (Retry-After, RetryInfo) is not retried: the row
    says so and a rerun asks again."""
    options: dict[str, Any] = Field(default_factory=dict)
    """Provider-specific settings (a local judge's threshold, a sim judge's noise model, ...)."""
    response_format: Literal["auto", "json_schema", "json_object", "tool", "text"] = "auto"
    """How a hosted or served judge (openai:, azure:, gemini:, anthropic:) is asked for JSON: "auto"
    tries a strict JSON schema, then a JSON object with the schema in the prompt (anthropic: a
    forced tool whose input schema is the answer's, "tool"), then plain text."""
    logprobs: bool = True
    """Ask for token log-probabilities and record the verdict's log-odds as `judge_score`."""
    server_slots: int | None = Field(default=None, ge=1)
    """Requests a server computes at once (its slots); None: ask the server (llama.cpp) or no
    limit. Time spent waiting for a slot is not part of `timeout_s`."""
    private: bool = False
    """Pseudonymise sources, candidates and facts before they are sent to this judge (spec §16;
    a judge that sends nothing, `local:` and `sim:`, is unaffected): the `[private]` extra."""
    private_entities: list[str] | None = None
    """The entity types replaced (None: memjudge.privacy.DEFAULT_ENTITIES); an unknown one is an error."""
    private_style: Literal["placeholder", "surrogate"] | None = None
    """Typed placeholders (`<PERSON_1>`) or realistic surrogates; None: the default (docs/private.md)."""
    private_patterns_only: bool = False
    """Run `private` without an NER model: e-mails, phones, IBANs, cards, addresses ... are
    replaced, names, places and organisations pass in the clear."""
    _judges_file: str | None = PrivateAttr(None)

    @field_validator("private_entities")
    @classmethod
    def _known_entities(cls, value: list[str] | None) -> list[str] | None:
        from memjudge.privacy.entities import check_entities

        return None if value is None else check_entities(value)

    @property
    def judges_file(self) -> str | None:
        """The judges file these settings were read from (`judge_config`), recorded in config.json."""
        return self._judges_file

    @property
    def prefix(self) -> str:
        return self.spec.split(":", 1)[0]

    @property
    def model(self) -> str:
        return self.spec.split(":", 1)[1] if ":" in self.spec else ""

    def generation_params(self) -> dict[str, Any]:
        """The parameters that change an answer, hence part of the cache key."""
        return {
            "temperature": self.temperature,
            "max_output_tokens": self.max_output_tokens,
            "seed": self.seed,
            "thinking_budget": self.thinking_budget,
            "options": self.options,
        }


@dataclass(frozen=True)
class Prompt:
    """A rendered rubric: system instruction and user message (source first, item last)."""

    system: str
    user: str


@dataclass(frozen=True, slots=True)
class JudgeCall:
    """One request: a rendered prompt plus what a judge may need to know about the item.

    `item` holds `assertion_id`, `persona_id`, `category` (support) or `persona_id` (coverage);
    simulated judges look up their truth by it, the local judge orders work by persona.
    `schema` is the pydantic model of a valid answer for structured output.
    `fields` holds the rubric's render inputs (support: `source`, `assertion`, `category`) for
    a judge that builds its own prompt from them (the local judge's premise selection); the
    prompt, rendered from the same inputs, is what the cache key covers.
    """

    key: str
    rubric: str
    prompt: Prompt
    schema: type[BaseModel]
    replicate: int
    item: dict[str, Any]
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    # Of input_tokens: read from the provider's prompt cache, and written to it (Anthropic).
    cached_tokens: int = 0
    thinking_tokens: int = 0
    cache_write_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "thinking_tokens": self.thinking_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass
class JudgeAnswer:
    """What came back, before validation. `text` is the raw answer (None when there is none);
    `finish_reason` is normalised to one of FINISH_REASONS."""

    text: str | None
    finish_reason: str
    usage: Usage = field(default_factory=Usage)
    model_version: str | None = None
    judge_score: float | None = None
    # The provider's own parse, when its SDK did one (None if it failed or was not asked).
    parsed: dict[str, Any] | None = None
    raw: dict[str, Any] | None = None


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters per token in English)."""
    return max(1, len(text) // 4)


def parse_answer(call: JudgeCall, text: str | None) -> dict[str, Any] | None:
    """The answer validated against the call's schema, or None when it does not fit."""
    if not text:
        return None
    try:
        return call.schema.model_validate_json(text).model_dump()
    except ValueError:  # pydantic.ValidationError and JSON errors alike
        return None


# ---------------------------------------------------------------------------------------
# response formats and log-odds (hosted and OpenAI-compatible judges)

# What `response_format="auto"` tries, in order: a strict JSON schema, a JSON object with the
# schema in the request (llama-cpp-python's server) and in the prompt, plain text from which
# the first JSON object is taken.
RESPONSE_FORMATS = ("json_schema", "json_object", "text")

SCHEMA_NOTE = "Answer with exactly one JSON object, and nothing else, that follows this JSON schema:\n{schema}"


def schema_prompt(prompt: Prompt, schema: dict[str, Any]) -> Prompt:
    """The prompt with the answer's JSON schema spelt out, for servers that cannot enforce it."""
    note = SCHEMA_NOTE.format(schema=json.dumps(schema, separators=(",", ":")))
    return Prompt(system=f"{prompt.system}\n\n{note}", user=prompt.user)


def first_json_object(text: str | None) -> str | None:
    """The first complete JSON object in `text` (prose, code fences around it), as its text;
    None when there is none. Nothing is repaired: this only cuts."""
    if not text:
        return None
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            obj = None
        if isinstance(obj, dict):
            return text[start:end]
        start = text.find("{", start + 1)
    return None


def text_answer(call: JudgeCall, text: str | None, finish: str, usage: Usage, version: str | None, *,
                mode: str, score: float | None, raw: dict[str, Any]) -> JudgeAnswer:
    """A provider's answer as a JudgeAnswer: in plain-text mode the first JSON object is the
    answer (prose around it is not; the whole text is kept in raw["answer_text"])."""
    parsed = None
    if finish == "stop":
        if mode == "text":
            found = first_json_object(text)
            if found is not None and found != text:
                raw["answer_text"] = text
                text = found
        parsed = parse_answer(call, text)
    return JudgeAnswer(text, finish, usage, version, judge_score=score, parsed=parsed, raw=raw)


VERDICT_WORDS = ("supported", "unsupported")
_VERDICT_KEY = re.compile(r'"verdict"\s*:\s*"')

# One generated token: its text, its log-probability, and the top alternatives at its place.
TokenLogprobs = tuple[str, float, Sequence[tuple[str, float]]]


def _logsumexp(values: list[float]) -> float:
    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def verdict_log_odds(text: str | None, tokens: Sequence[TokenLogprobs] | None) -> float | None:
    """log P(first verdict token = "supported") - log P(= "unsupported"), read at the
    position where the value of the answer's first `"verdict"` key begins; the embedded
    judge's judge_score has the same sign and meaning.

    The generated tokens must spell `text` exactly (else offsets are unknown). At the token
    covering the verdict's first character, every alternative that agrees with the text
    before that character and then starts (or is a start of) a verdict word counts for that
    word; a word's probability is the sum over its tokens. None when either word has no
    token among the alternatives: a score is never guessed."""
    if not text or not tokens:
        return None
    m = _VERDICT_KEY.search(text)
    if m is None:
        return None
    pos = m.end()
    if "".join(t[0] for t in tokens) != text:
        return None
    start = 0
    for token, logprob, top in tokens:
        end = start + len(token)
        if start <= pos < end:
            prefix = text[start:pos]
            alternatives = dict(top)
            alternatives.setdefault(token, logprob)
            mass: dict[str, list[float]] = {w: [] for w in VERDICT_WORDS}
            for alt, lp in alternatives.items():
                if lp is None or not math.isfinite(lp) or not alt.startswith(prefix):
                    continue
                rest = alt[len(prefix):]
                if not rest:
                    continue
                for word in VERDICT_WORDS:
                    if word.startswith(rest) or rest.startswith(word):
                        mass[word].append(lp)
            if not all(mass.values()):
                return None
            return _logsumexp(mass["supported"]) - _logsumexp(mass["unsupported"])
        start = end
    return None


# A request the server refused as malformed: FastAPI/pydantic (llama-cpp-python answers
# these with HTTP 500), OpenAI-style invalid_request_error, vLLM/Ollama messages. Asking
# again cannot help, whatever the status code.
_VALIDATION = re.compile(
    r"validation error|literal_error|Input should be|Extra inputs are not permitted|extra_forbidden|"
    r"invalid_request_error|unrecognized request argument|is not supported|not supported|unsupported parameter|"
    r"Unknown parameter|Invalid parameter|invalid value|Field required|'loc':",
    re.IGNORECASE,
)


def is_request_error(status: int | None, body_text: str) -> bool:
    """True when an HTTP error says the request itself is wrong (not a passing failure)."""
    if status in (400, 422):
        return True
    return status is not None and status >= 500 and bool(_VALIDATION.search(body_text or ""))


def normalise_base_url(url: str | None) -> str | None:
    """One spelling per endpoint: surrounding blanks and trailing slashes do not make a new
    one (`…/v1` and `…/v1/` are the same server). Empty is no URL."""
    if url is None:
        return None
    url = str(url).strip().rstrip("/")
    return url or None


# Statuses worth asking again (with 5xx): timeout, conflict, rate limit. 400/401/403/404 are not.
TRANSIENT_STATUSES = frozenset({408, 409, 429})


def is_transient_status(code: int | None) -> bool:
    return code is not None and (code in TRANSIENT_STATUSES or code >= 500)


def delay_from_headers(headers) -> float | None:
    """The delay a response's headers ask for: `retry-after-ms` (OpenAI), else `Retry-After`
    as seconds or an HTTP date. None when absent or unreadable."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def parse_duration(value) -> float | None:
    """A protobuf JSON Duration ("33s", "0.5s", "1.000340012s") in seconds; None if unreadable."""
    if isinstance(value, (int, float)):
        return max(0.0, float(value))
    if isinstance(value, str) and value.endswith("s"):
        try:
            return max(0.0, float(value[:-1]))
        except ValueError:
            return None
    return None


def unreachable(spec: str, url: str, cause: BaseException | None) -> Exception:
    """The one line of a run whose endpoint does not answer (nothing listens there)."""
    from memjudge.errors import MemjudgeError

    why = f"{type(cause).__name__}: {' '.join(str(cause).split()) or 'no answer'}" if cause is not None else "no answer"
    return MemjudgeError(f"judge {spec}: nothing answers at {url} — is the server running? (cannot reach it: {why})")


async def connection_refused(url: str, timeout_s: float) -> OSError | None:
    """Open (and close) a TCP connection to the URL's host and port: the refusal when nothing
    listens there, else None (a connection, a timeout or any other outcome: the requests
    themselves will tell). No HTTP request is sent."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        async with asyncio.timeout(timeout_s):
            _, writer = await asyncio.open_connection(parts.hostname, port)
    except ConnectionRefusedError as e:
        return e
    except (OSError, TimeoutError):
        return None
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


class LoopBoundClient:
    """One SDK client per event loop. httpx2 connection pools belong to the loop that made
    them: a second asyncio.run() (the Python API called twice) needs a fresh client, and a
    client whose loop is gone cannot be closed cleanly (its sockets went with that loop)."""

    def __init__(self, make: Callable[[], Any], close: Callable[[Any], Awaitable[None]]):
        self._make, self._close = make, close
        self._client: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client, self._loop = self._make(), loop
        return self._client

    async def aclose(self) -> None:
        client, loop = self._client, self._loop
        self._client = self._loop = None
        if client is not None and loop is asyncio.get_running_loop():
            await self._close(client)


def canonical_json(obj: Any, *, allow_nan: bool = True) -> str:
    """The one canonical JSON text of memjudge's keys and identities (sorted keys, no spaces):
    hashing anything else would make equal inputs look different."""
    return _CANONICAL[allow_nan](obj)


# json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=...),
# made once: a large run writes one per answer (the cache's value).
_CANONICAL = {nan: jsontext.encoder(sort_keys=True, separators=(",", ":"), allow_nan=nan) for nan in (True, False)}


# "stop" is the only reason whose text may become a label.
FINISH_REASONS = ("stop", "length", "safety", "empty", "other")


class MalformedResponse(Exception):
    """HTTP 200, but the body is not the provider's response (not JSON, or JSON of something
    else: a proxy's page, a misrouted endpoint). Transient as far as we can tell: retried."""


class RequestTimeout(TimeoutError):
    """No complete response within `timeout_s`: connecting, waiting and reading together.
    The SDKs' own timeouts bound each read, so a body trickled byte by byte never trips them."""


class Judge(ABC):
    """Base class of every provider. Subclasses set `prefix` and implement `generate`."""

    prefix: ClassVar[str]
    simulated: ClassVar[bool] = False
    # Why requests cannot be made (no API key), checked by check_ready() before the first
    # request rather than at construction: a dry run calls nothing and needs no key.
    missing_credentials: str | None = None
    # Requests go over the network: each attempt is bounded by `timeout_s` as a whole. (The
    # local judge's first call loads a model for minutes, and it waits its turn on one CPU.)
    network: ClassVar[bool] = False

    def __init__(self, config: JudgeConfig):
        self.config = config

    @property
    def spec(self) -> str:
        return self.config.spec

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def sends_text(self) -> bool:
        """True when a prompt leaves this process for a server: every judge reached over a
        network, a base URL on loopback included (a proxy there may forward it). `--private`
        pseudonymises what such a judge is sent; a judge that computes its answers in this
        process (`local:`, `sim:`) sends nothing. A provider inherits it from `network`."""
        return bool(self.network)

    @property
    def endpoint(self) -> str | None:
        """The server this judge asks (None: it asks none). Reported in config.json."""
        return normalise_base_url(self.config.base_url)

    def identity(self) -> dict[str, Any]:
        """Everything about the judge that changes its answers (part of the cache key).
        Never includes an API key."""
        return {
            "spec": self.spec,
            "model": self.model,
            "base_url": normalise_base_url(self.config.base_url),
            "params": self.config.generation_params(),
        }

    @property
    def costly(self) -> bool:
        """Each answer costs money (a hosted or served model): the store puts it in the cache
        before its journal line (store.py), so no kill makes any run pay for it again. False
        for in-process judges, whose answers are written behind in large batches."""
        return self.network

    @property
    def deterministic(self) -> bool:
        """True when an answer is a function of the prompt alone (nothing is sampled), so replicate
        r's answer is replicate 0's by construction: the engine then asks once and records the
        other replicates as copies (the label column `replicate_of`), and their flip rate is zero
        by construction, not measured. Default: False (a served model may differ between calls,
        at any temperature)."""
        return False

    def call_identity(self, kind: str) -> dict[str, Any]:
        """The identity in the cache key of a call of rubric kind `kind` ("support",
        "coverage"): `identity()`, unless a judge answers the kinds by different means."""
        return self.identity()

    def label_identity(self, kind: str) -> dict[str, Any]:
        """Everything that decides the labels of a call of kind `kind` (a run's config.json):
        `call_identity(kind)`, unless the judge applies settings to a stored answer (`reread`)."""
        return self.call_identity(kind)

    def former_call_identities(self, kind: str) -> list[dict[str, Any]]:
        """Identities an earlier memjudge put in the cache keys of the very same answers (a key
        that lost a setting the answer never depended on): the engine looks a call up under
        these too, so a cache written before keeps every hit. None for most judges."""
        return []

    def reread(self, answer: dict, judge_score: float | None, call: JudgeCall,
               candidate_scores: dict | None = None) -> dict:
        """A stored answer's object under this judge's current settings. A judge whose verdict
        is a rule over a score it stores (the embedded judge's thresholds), and whose cache key
        therefore leaves the rule out, applies the rule again here; every other judge's stored
        answer is what it said, unchanged."""
        return answer

    def check_options(self, known) -> None:
        """Provider options are free-form in a panel file: a misspelt one must fail loudly,
        not be ignored."""
        unknown = sorted(set(self.config.options) - set(known))
        if unknown:
            from memjudge.errors import UsageError

            where = f"{self.config.judges_file}: " if self.config.judges_file else ""
            raise UsageError(f"{where}{self.spec}: unknown option(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")

    def slot(self):
        """An async context held while one request is in flight (a server's free slot); the
        request's deadline, `timeout_s`, starts once it is held, so waiting for a busy
        single-slot server is not a timeout. Default: no limit."""
        return contextlib.nullcontext()

    def check_ready(self) -> None:
        """Raise UsageError when this judge cannot make requests (a missing API key)."""
        if self.missing_credentials:
            from memjudge.errors import UsageError

            raise UsageError(self.missing_credentials)

    @abstractmethod
    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        """Ask once. Raise the SDK's own exception on failure; do not retry."""

    def is_retryable(self, exc: BaseException) -> bool:
        """True for transient failures: 408/409/429/5xx, timeouts, dropped connections."""
        return False

    def retry_after(self, exc: BaseException) -> float | None:
        """Seconds the server asked us to wait (Retry-After, RetryInfo), if it said."""
        return None

    def cache_prefix(self, call: JudgeCall) -> tuple[Any, int]:
        """The part of this call's prompt the provider's prompt cache may keep (it is marked
        so), and its estimated tokens: (identity of the prefix, tokens); (None, 0) when none
        (the default: a provider that caches by itself, or not at all). The dry run's estimate
        of cache writes and reads comes from it."""
        return None, 0

    def order_key(self, call: JudgeCall) -> Any:
        """Calls are issued sorted by this; keeping a persona's calls together lets prompt
        prefixes (provider caches, the local judge's KV cache) be reused."""
        return (call.item.get("persona_id", ""), call.rubric, call.item.get("assertion_id", ""), call.replicate)

    async def preflight(self) -> None:
        """Called once before a run's first request: check the endpoint can be reached (a
        MemjudgeError says why not, in one line) and learn what the server is. Default:
        nothing to check."""

    def effective(self) -> dict[str, Any]:
        """Settings the provider chose while running (the response format `auto` ended up
        using, whether log-probabilities came back, the served model): recorded per run in
        config.json and the summary. Default: none."""
        return {}

    async def prepare(self) -> None:
        """Do now the slow first-request work (building SDK clients blocks the event loop for
        a tenth of a second): the engine calls it before the rate limiter times requests, so
        the spacing it grants is the spacing the server sees."""

    async def aclose(self) -> None:
        """Release clients and sockets."""
