"""Scoring through the providers' batch APIs (`memjudge score --batch`): about half the price
of online calls and no per-minute limits, finished within a day.

    score_run(cands, srcs, "openai:gpt-4o-mini", batch=True, out="runs/x")

The engine hands over the calls that no journal or cache answers (`run_batch`); this module
turns them into batch requests whose custom id (OpenAI) / metadata key (Gemini) is the cache
key, splits them into jobs within the provider's limits, submits, polls, and joins results on
that key (the order is not kept). Every answer then goes through the engine's own checks
(`_Job.examine`, the online path's): a valid one is journaled and cached exactly like an
online answer; one that does not validate is re-asked in the next job (up to MAX_REASKS, as
online); one that is truncated, blocked or unreadable is `verdict: null` with its error.
Lines that failed (5xx/429 in the error file, expired, missing) are resubmitted in a new job,
at most `max_resubmits` times, or with `fallback="online"` asked online by the engine.

Durable state: `RUN_DIR/batches.json`, replaced atomically before and after every change of
state. A job is first recorded as an *intent* (its keys and a label unique to it), then its
file is uploaded, then it is created with the label in its metadata (OpenAI `metadata`,
Gemini `display_name`), then recorded as submitted. A rerun polls recorded jobs instead of
submitting their keys again, and for an intent without a job id (a kill during `create`) it
first looks for a job carrying the intent's label. So a kill at any point loses no answer
and never has the same item in two live jobs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memjudge.errors import InputError, MemjudgeError, UsageError
from memjudge.formats import is_blank, jsonl_lines, open_private
from memjudge.judges.base import Judge, JudgeAnswer, JudgeCall

STATE_FILE = "batches.json"
LOCK_FILE = "batches.lock"
STATE_VERSION = 1
LABEL_FIELD = "memjudge_label"  # OpenAI batch metadata key carrying the job's label

# Provider limits per job. OpenAI: 50,000 requests and 200 MB per input file. Gemini: a
# create request with inline requests must stay under 20 MB; larger jobs go as a JSONL file
# (up to 2 GB).
LIMITS = {"openai": (50_000, 200 * 1024 * 1024), "gemini": (50_000, 2 * 1000**3)}
GEMINI_INLINE_BYTES = 20 * 1000 * 1000

ENV_POLL = "MEMJUDGE_BATCH_POLL_S"
ENV_POLL_MAX = "MEMJUDGE_BATCH_POLL_MAX_S"
ENV_MAX_REQUESTS = "MEMJUDGE_BATCH_MAX_REQUESTS"
ENV_MAX_BYTES = "MEMJUDGE_BATCH_MAX_BYTES"
ENV_GEMINI_INPUT = "MEMJUDGE_BATCH_GEMINI_INPUT"

# Error codes of a failed line that a new job may cure (HTTP and gRPC codes alike).
_RETRYABLE_CODES = {408, 409, 429, 4, 8, 10, 13, 14}


def _result_line(raw: str, id_field: str, calls: dict, out: dict) -> tuple[dict | None, str | None]:
    """One line of a batch result file as (record, key), or (None, None) when it is not ours.

    A line we cannot read still names its key near its start: that item gets a null with the
    reason, never a guessed label."""
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        m = re.search(r'"%s"\s*:\s*"([^"]+)"' % id_field, raw)
        if m and m.group(1) in calls:
            out[m.group(1)] = LineResult("final", error=f"unreadable batch output line: not JSON ({raw[:80]!r}...)")
        return None, None
    key = rec.get(id_field) if isinstance(rec, dict) else None
    return (rec, key) if key in calls else (None, None)


@dataclass(frozen=True)
class BatchSettings:
    """How batch scoring behaves. Limits default to the provider's; polling starts every
    `poll_s` seconds and backs off (x1.5) to `poll_max_s` while nothing changes."""

    fallback: str = "resubmit"  # failed lines: "resubmit" in a new job, or "online"
    max_requests: int | None = None
    max_bytes: int | None = None
    max_resubmits: int = 2
    poll_s: float = 10.0
    poll_max_s: float = 300.0
    gemini_input: str = "auto"  # "inline", "file", or "auto": inline up to 20 MB a job, else a file

    @classmethod
    def make(cls, fallback: str = "resubmit", **kw) -> BatchSettings:
        """Settings from keyword arguments, else the MEMJUDGE_BATCH_* environment, else defaults."""
        unknown = set(kw) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise UsageError(f"unknown batch option(s): {', '.join(sorted(unknown))}")
        env = {"poll_s": (ENV_POLL, float), "poll_max_s": (ENV_POLL_MAX, float),
               "max_requests": (ENV_MAX_REQUESTS, int), "max_bytes": (ENV_MAX_BYTES, int), "gemini_input": (ENV_GEMINI_INPUT, str)}
        for name, (var, kind) in env.items():
            if kw.get(name) is None and os.environ.get(var):
                try:
                    kw[name] = kind(os.environ[var])
                except ValueError:
                    raise UsageError(f"{var} must be a number, got {os.environ[var]!r}") from None
        kw = {k: v for k, v in kw.items() if v is not None}
        s = cls(fallback=fallback, **kw)
        if s.gemini_input not in ("auto", "inline", "file"):
            raise UsageError(f"batch gemini_input must be auto, inline or file, got {s.gemini_input!r}")
        if s.fallback not in ("resubmit", "online"):
            raise UsageError(f"batch fallback must be 'resubmit' or 'online', got {s.fallback!r}")
        for name in ("max_requests", "max_bytes"):
            v = getattr(s, name)
            if v is not None and v < 1:
                raise UsageError(f"batch {name} must be >= 1, got {v}")
        if s.max_resubmits < 0 or not s.poll_s > 0 or s.poll_max_s < s.poll_s:
            raise UsageError("batch settings: need max_resubmits >= 0 and 0 < poll_s <= poll_max_s")
        return s

    def limits(self, provider: str) -> tuple[int, int]:
        n, size = LIMITS[provider]
        if provider == "gemini" and self.gemini_input == "inline":
            size = GEMINI_INLINE_BYTES
        return (min(n, self.max_requests) if self.max_requests else n, min(size, self.max_bytes) if self.max_bytes else size)


def check_batch_judge(judge) -> None:
    """Only OpenAI and Gemini judges have a batch API (a spec string, JudgeConfig or Judge)."""
    spec = judge if isinstance(judge, str) else judge.spec
    if spec.split(":", 1)[0] not in LIMITS:
        raise UsageError(f"--batch needs an openai: or gemini: judge, not {spec}")


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# ---------------------------------------------------------------------------------------
# durable state


class BatchState:
    """RUN_DIR/batches.json: the judge, and every job with its label, provider id, keys,
    status and (once its results are read) the outcome of each key that got no valid answer."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    @classmethod
    def load(cls, run_dir: Path) -> BatchState:
        path = Path(run_dir) / STATE_FILE
        if not path.is_file():
            return cls(path, {"version": STATE_VERSION, "judge": None, "invocations": 0, "jobs": []})
        try:
            with open_private(path, "r") as f:
                data = json.loads(f.read())
        except (OSError, ValueError) as e:
            raise InputError(str(path), f"cannot read the batch state: {e}") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION or not isinstance(data.get("jobs"), list):
            raise InputError(str(path), f"not a memjudge batch state (version {STATE_VERSION})")
        return cls(path, data)

    @property
    def jobs(self) -> list[dict]:
        return self.data["jobs"]

    def save(self) -> None:
        """Atomically, and on disk before we act on it (fsync), so a kill or a power cut
        leaves the previous or the new state, never half of one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open_private(tmp, "w") as f:
            json.dump(self.data, f, separators=(",", ":"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)


class _RunLock:
    """One batch process per run directory (released by the OS if the process dies)."""

    def __init__(self, run_dir: Path):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.f = open_private(run_dir / LOCK_FILE, "w")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.f.close()
            raise UsageError(f"another memjudge process is running batch jobs of {run_dir}") from None

    def release(self) -> None:
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


# ---------------------------------------------------------------------------------------
# provider adapters: build request lines, submit, find by label, poll, read results


@dataclass
class JobInfo:
    id: str
    status: str  # the provider's own status name
    terminal: bool
    outcome: str | None  # completed, failed, expired, cancelled (terminal only)
    counts: dict[str, int]
    message: str | None = None  # why a whole job failed
    raw: Any = None


@dataclass
class LineResult:
    kind: str  # "answer", "failed" (a new job may cure it), "final" (it will not)
    answer: JudgeAnswer | None = None
    error: str | None = None


def _error_text(prefix: str, code, message) -> str:
    msg = " ".join(str(message or "").split())[:300]
    return f"{prefix}: {code}: {msg}" if code is not None else f"{prefix}: {msg}"


def _failed_line(code, message) -> LineResult:
    """A request the provider answered with an error: "failed" (a new job may cure it) for
    5xx, the codes in _RETRYABLE_CODES or no numeric code; "final" otherwise."""
    retryable = not isinstance(code, int) or code in _RETRYABLE_CODES or code >= 500
    return LineResult("failed" if retryable else "final", error=_error_text("batch request failed", code, message))


class _OpenAIBatches:
    provider = "openai"
    _TERMINAL = {"completed": "completed", "failed": "failed", "expired": "expired", "cancelled": "cancelled"}

    def __init__(self, judge):
        self.judge = judge

    def line(self, key: str, call: JudgeCall) -> bytes:
        body = {"custom_id": key, "method": "POST", "url": "/v1/chat/completions", "body": self.judge.request_body(call)}
        return (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    def _client(self):
        return self.judge._aio()

    async def upload(self, label: str, lines: list[bytes]) -> str:
        f = await self._client().files.create(file=(f"{label}.jsonl", b"".join(lines)), purpose="batch")
        return f.id

    async def create(self, label: str, file_id: str | None, lines: list[bytes]) -> JobInfo:
        b = await self._client().batches.create(input_file_id=file_id, endpoint="/v1/chat/completions",
                                                completion_window="24h", metadata={LABEL_FIELD: label})
        return self._info(b)

    async def find(self, label: str, since: float) -> JobInfo | None:
        # Newest first; a job with our label was created after its intent was recorded.
        async for b in self._client().batches.list(limit=100):
            if (b.metadata or {}).get(LABEL_FIELD) == label:
                return self._info(b)
            if b.created_at < since - 3600:
                return None
        return None

    async def get(self, job_id: str) -> JobInfo:
        return self._info(await self._client().batches.retrieve(job_id))

    async def cancel(self, job_id: str) -> JobInfo:
        return self._info(await self._client().batches.cancel(job_id))

    def _info(self, b) -> JobInfo:
        rc = b.request_counts
        counts = {"total": rc.total, "completed": rc.completed, "failed": rc.failed} if rc else {}
        message = None
        if b.errors is not None and b.errors.data:
            e = b.errors.data[0]
            message = _error_text("batch job failed", e.code, e.message)
        outcome = self._TERMINAL.get(b.status)
        return JobInfo(b.id, b.status, outcome is not None, outcome, counts, message, raw=b)

    async def results(self, info: JobInfo, keys: list[str], calls: dict[str, JudgeCall]) -> dict[str, LineResult]:
        from memjudge.scoring.retry import call_with_retry

        out: dict[str, LineResult] = {}
        b = info.raw
        for file_id in (b.error_file_id, b.output_file_id):  # output last: it wins for a key in both
            if not file_id:
                continue

            async def download(fid=file_id):
                return (await self._client().files.content(fid)).content

            data = await call_with_retry(self.judge, download, on_retry=getattr(self, "on_retry", None))
            for raw in jsonl_lines(data.decode("utf-8", "replace")):
                if not is_blank(raw):
                    self._line(raw, calls, out)
        return out

    def _line(self, raw: str, calls: dict[str, JudgeCall], out: dict[str, LineResult]) -> None:
        import pydantic
        from openai.types.chat import ChatCompletion

        rec, key = _result_line(raw, "custom_id", calls, out)
        if rec is None:
            return
        response, error = rec.get("response"), rec.get("error")
        status = response.get("status_code") if isinstance(response, dict) else None
        if status == 200 and isinstance(response.get("body"), dict):
            try:
                completion = ChatCompletion.model_validate(response["body"])
            except pydantic.ValidationError as e:
                out[key] = LineResult("final", error=f"unreadable batch output line: {str(e).splitlines()[0]}")
                return
            answer = self.judge.to_answer(completion, calls[key])
            if response.get("request_id"):
                answer.raw["request_id"] = response["request_id"]
            out[key] = LineResult("answer", answer)
            return
        if isinstance(error, dict) and error:
            code, message = error.get("code"), error.get("message")
        else:
            body = response.get("body") if isinstance(response, dict) else None
            err = body.get("error") if isinstance(body, dict) else None
            code, message = status, (err or {}).get("message") if isinstance(err, dict) else body
        out[key] = _failed_line(code, message)


class _GeminiBatches:
    provider = "gemini"
    _TERMINAL = {"JOB_STATE_SUCCEEDED": "completed", "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
                 "JOB_STATE_FAILED": "failed", "JOB_STATE_EXPIRED": "expired", "JOB_STATE_CANCELLED": "cancelled"}

    def __init__(self, judge):
        self.judge = judge

    def _request(self, key: str, call: JudgeCall):
        from google.genai import types

        return types.InlinedRequest(contents=call.prompt.user, config=self.judge.request_config(call), metadata={"key": key})

    def line(self, key: str, call: JudgeCall) -> bytes:
        """The {"key", "request"} line of a batch file: a GenerateContentRequest in the API's
        JSON, with what `generate` sends. Its size is also what an inline request weighs."""
        cfg = self.judge.request_config(call).model_dump(mode="json", by_alias=True, exclude_none=True)
        system = cfg.pop("systemInstruction", None)
        request = {"contents": [{"parts": [{"text": call.prompt.user}], "role": "user"}], "generationConfig": cfg}
        if system is not None:
            request["systemInstruction"] = {"parts": [{"text": system}], "role": "user"}
        return (json.dumps({"key": key, "request": request}, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    def _client(self):
        return self.judge._aio()

    async def upload(self, label: str, lines: list[bytes]) -> str:
        import io as _io

        f = await self._client().files.upload(file=_io.BytesIO(b"".join(lines)),
                                              config={"mime_type": "application/jsonl", "display_name": label})
        return f.name

    async def create(self, label: str, file_id, lines: list[bytes], calls: list[tuple[str, JudgeCall]] | None = None) -> JobInfo:
        src = file_id if file_id else [self._request(k, c) for k, c in calls]
        job = await self._client().batches.create(model=self.judge.model, src=src, config={"display_name": label})
        return self._info(job)

    async def find(self, label: str, since: float) -> JobInfo | None:
        pager = await self._client().batches.list(config={"page_size": 100})
        async for job in pager:
            if job.display_name == label:
                return self._info(job)
            if job.create_time is not None and job.create_time.timestamp() < since - 3600:
                return None
        return None

    async def get(self, job_id: str) -> JobInfo:
        return self._info(await self._client().batches.get(name=job_id))

    async def cancel(self, job_id: str) -> JobInfo:
        await self._client().batches.cancel(name=job_id)
        return await self.get(job_id)

    def _info(self, job) -> JobInfo:
        state = str(getattr(job.state, "value", job.state))
        outcome = self._TERMINAL.get(state)
        message = None
        if job.error is not None:
            message = _error_text("batch job failed", job.error.code, job.error.message)
        return JobInfo(job.name, state, outcome is not None, outcome, {}, message, raw=job)

    async def results(self, info: JobInfo, keys: list[str], calls: dict[str, JudgeCall]) -> dict[str, LineResult]:
        out: dict[str, LineResult] = {}
        dest = info.raw.dest
        if dest is not None and dest.file_name:
            from memjudge.scoring.retry import call_with_retry

            async def download():
                return await self._client().files.download(file=dest.file_name)

            data = await call_with_retry(self.judge, download, on_retry=getattr(self, "on_retry", None))
            for raw in jsonl_lines(data.decode("utf-8", "replace")):
                if not is_blank(raw):
                    self._file_line(raw, calls, out)
            return out
        responses = (dest.inlined_responses if dest is not None else None) or []
        for i, r in enumerate(responses):
            key = (r.metadata or {}).get("key")
            if key is None and len(responses) == len(keys):
                key = keys[i]  # without metadata, inline responses are in request order
            if key not in calls:
                continue
            if r.error is not None:
                out[key] = _failed_line(r.error.code, r.error.message)
            elif r.response is not None:
                out[key] = LineResult("answer", self.judge.to_answer(r.response, calls[key]))
        return out


    def _file_line(self, raw: str, calls: dict[str, JudgeCall], out: dict[str, LineResult]) -> None:
        from google.genai import types
        from google.genai.batches import _GenerateContentResponse_from_mldev

        rec, key = _result_line(raw, "key", calls, out)
        if rec is None:
            return
        error, response = rec.get("error") or rec.get("status"), rec.get("response")
        if isinstance(response, dict):
            try:
                # as the SDK reads an inline response
                parsed = types.GenerateContentResponse._from_response(response=_GenerateContentResponse_from_mldev(response), kwargs={})
            except Exception as e:  # pydantic errors and whatever a damaged response triggers
                out[key] = LineResult("final", error=f"unreadable batch output line: {' '.join(str(e).split())[:200]}")
                return
            out[key] = LineResult("answer", self.judge.to_answer(parsed, calls[key]))
            return
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        out[key] = _failed_line(code, message)


def adapter_for(judge: Judge):
    check_batch_judge(judge)
    return _OpenAIBatches(judge) if judge.prefix == "openai" else _GeminiBatches(judge)


# ---------------------------------------------------------------------------------------
# the orchestration


def _label(judge: Judge, run_dir: Path, seq: int, keys: list[str]) -> str:
    """Unique to one job of one run directory, and recorded before the job is created."""
    h = hashlib.sha256(json.dumps([judge.spec, str(run_dir.resolve()), seq, sorted(keys)]).encode()).hexdigest()
    return f"memjudge-{h[:24]}"


_ZERO = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "thinking_tokens": 0}


class _Runner:
    def __init__(self, job, adapter, state: BatchState, settings: BatchSettings, tasks: dict, run_dir: Path):
        self.job = job  # the engine's _Job: examine(), keep(), journal, cache, counters
        self.judge = job.judge
        self.adapter = adapter
        self.state = state
        self.settings = settings
        self.tasks = tasks  # key -> engine _Task still without an answer
        self.run_dir = run_dir
        self.calls = {k: t.call for k, t in tasks.items()}
        self.next_request: dict[str, tuple[int, str | None]] = {}  # key -> (re-ask number, problem)
        self.resubmits: dict[str, int] = {}
        self.usage: dict[str, dict[str, int]] = {}
        self.settled: set[str] = set()
        self.online: set[str] = set()
        self.submitted = 0
        self.adopted = 0
        self.polls = 0
        self.touched: set[str] = set()  # labels of the jobs this run submitted, found or polled

    # -- helpers ----------------------------------------------------------------------------

    def echo(self, text: str) -> None:
        if self.job.progress:
            print(f"memjudge batch: {text}", file=sys.stderr, flush=True)

    async def _retry(self, fn):
        from memjudge.scoring.retry import call_with_retry

        return await call_with_retry(self.judge, fn, on_retry=self.job._on_retry)

    def _open(self) -> list[dict]:
        """Jobs not yet read that cover at least one key we still need."""
        return [j for j in self.state.jobs if j["state"] != "done" and any(k in self.tasks for k in j["keys"])]

    def _call(self, key: str, reask: int, problem: str | None) -> JudgeCall:
        from memjudge.scoring.engine import reask_call

        call = self.calls[key]
        return reask_call(call, problem) if reask else call

    def _settle(self, key: str, error: str) -> None:
        task = self.tasks[key]
        task.error = error
        task.usage = self.usage.get(key) or dict(_ZERO)
        self.settled.add(key)

    def _last_outcomes(self) -> dict[str, dict | None]:
        """key -> its outcome in the last finished job that had it (None: it was answered)."""
        last: dict[str, dict | None] = {}
        for j in self.state.jobs:
            if j["state"] == "done":
                outcomes = j.get("outcomes", {})
                for k in j["keys"]:
                    last[k] = outcomes.get(k)
        return last

    # -- planning -------------------------------------------------------------------------

    def plan(self) -> None:
        """New job intents for the keys that need a request and are in no open job."""
        covered = {k for j in self.state.jobs if j["state"] != "done" for k in j["keys"]}
        needy: list[str] = []
        last_outcomes = self._last_outcomes() if self.settings.fallback == "online" else {}
        for key, task in self.tasks.items():
            if task.record is not None or key in self.settled or key in self.online or key in covered:
                continue
            if key not in self.next_request:
                last = last_outcomes.get(key)
                if last is not None and last.get("kind") == "failed":
                    self.online.add(key)  # failed in an earlier run's job: online, as asked
                    continue
                self.next_request[key] = (0, None)
            needy.append(key)
        if not needy:
            return
        needy.sort(key=lambda k: self.judge.order_key(self.calls[k]))
        max_n, max_bytes = self.settings.limits(self.adapter.provider)
        chunks: list[list[str]] = []
        sizes: list[int] = []
        for key in needy:
            n = len(self.adapter.line(key, self._call(key, *self.next_request[key])))
            if n > max_bytes:
                self._settle(key, f"the request is {n:,} bytes, over the batch limit of {max_bytes:,} bytes per job")
                continue
            if not chunks or len(chunks[-1]) >= max_n or sizes[-1] + n > max_bytes:
                chunks.append([])
                sizes.append(0)
            chunks[-1].append(key)
            sizes[-1] += n
        for keys, nbytes in zip(chunks, sizes):
            seq = len(self.state.jobs)
            mode = "file"
            if self.adapter.provider == "gemini":
                inline = self.settings.gemini_input == "inline" or (self.settings.gemini_input == "auto" and nbytes <= GEMINI_INLINE_BYTES)
                mode = "inline" if inline else "file"
            reasks = {k: list(self.next_request[k]) for k in keys if self.next_request[k][0]}
            self.state.jobs.append({
                "label": _label(self.judge, self.run_dir, seq, keys), "seq": seq, "provider": self.adapter.provider,
                "invocation": self.state.data["invocations"], "state": "intent", "input": mode, "job_id": None, "input_file_id": None,
                "status": None, "keys": keys, "reasks": reasks, "intent_at": time.time(), "submitted_at": None,
                "updated_at": _now(), "finished_at": None, "counts": {}, "outcomes": {},
            })
        self.state.save()  # the intents are on disk before anything is sent

    # -- submitting -----------------------------------------------------------------------

    async def submit(self, j: dict) -> None:
        """Create the provider job of an intent, or adopt the one a killed run created."""
        keys = j["keys"]
        calls = [(k, self._call(k, *(j["reasks"].get(k) or (0, None)))) for k in keys]
        lines = [self.adapter.line(k, c) for k, c in calls]
        from_before = j["invocation"] != self.state.data["invocations"]
        if from_before:
            found = await self._retry(lambda: self.adapter.find(j["label"], j["intent_at"]))
            if found is not None:
                self._record_submitted(j, found, adopted=True)
                return
        if j.get("input", "file") == "file" and not j["input_file_id"]:
            j["input_file_id"] = await self._retry(lambda: self.adapter.upload(j["label"], lines))
            j["updated_at"] = _now()
            self.state.save()
        attempts = 0

        async def create_once():
            # A create that timed out may have succeeded: look before asking again.
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                found = await self.adapter.find(j["label"], j["intent_at"])
                if found is not None:
                    return found, True
            if self.adapter.provider == "gemini":
                return await self.adapter.create(j["label"], j["input_file_id"], lines, calls), False
            return await self.adapter.create(j["label"], j["input_file_id"], lines), False

        info, adopted = await self._retry(create_once)
        self._record_submitted(j, info, adopted=adopted)
        self.job.requests += len(keys)
        self.job.reasks += len(j["reasks"])

    def _record_submitted(self, j: dict, info: JobInfo, adopted: bool) -> None:
        j.update(state="submitted", job_id=info.id, status=info.status, submitted_at=j["submitted_at"] or _now(), updated_at=_now())
        self.state.save()
        if adopted:
            self.adopted += 1
        else:
            self.submitted += 1
        self.echo(f"{'found' if adopted else 'submitted'} job {info.id} ({len(j['keys'])} requests)")

    # -- reading results ----------------------------------------------------------------

    async def ingest(self, j: dict, info: JobInfo) -> None:
        results = await self.adapter.results(info, j["keys"], {k: self.calls[k] for k in j["keys"] if k in self.calls})
        cancelled_now = info.outcome == "cancelled" and j["invocation"] == self.state.data["invocations"]
        outcomes: dict[str, dict] = {}
        for key in j["keys"]:
            task = self.tasks.get(key)
            if task is None or task.record is not None:
                continue
            reask, problem = j["reasks"].get(key) or (0, None)
            r = results.get(key)
            if r is None:
                why = info.message or (f"no result: the batch job {info.outcome}" if info.outcome != "completed" else "no result in the batch output")
                r = LineResult("failed", error=why)
            if r.kind == "answer":
                outcomes.update(await self._answer(j, key, task, r.answer, reask))
                continue
            outcome = {"kind": r.kind, "error": r.error}
            if r.kind == "final":
                self._settle(key, r.error)
            elif cancelled_now:
                self._settle(key, f"{r.error} (the batch job was cancelled; rerun to ask again)")
            elif self.settings.fallback == "online":
                self.online.add(key)
            elif self.resubmits.get(key, 0) < self.settings.max_resubmits:
                self.resubmits[key] = self.resubmits.get(key, 0) + 1
                self.next_request[key] = (reask, problem)
            else:
                self._settle(key, f"{r.error} (after {self.resubmits.get(key, 0) + 1} batch jobs)")
            outcomes[key] = outcome
        j.update(state="done", status=info.status, counts=info.counts, outcomes=outcomes, finished_at=_now(), updated_at=_now())
        self.state.save()
        self.echo(f"job {info.id} {info.status}: {len(j['keys']) - len(outcomes)} answered, {len(outcomes)} without a valid answer")

    async def _answer(self, j: dict, key: str, task, answer: JudgeAnswer, reask: int) -> dict[str, dict]:
        u = answer.usage.as_dict()
        acc = self.usage.setdefault(key, dict(_ZERO))
        for k in acc:
            acc[k] += int(u.get(k) or 0)
            self.job.tokens[k] += int(u.get(k) or 0)
            self.job.batch_tokens[k] += int(u.get(k) or 0)
        task.finish_reason, task.model_version = answer.finish_reason, answer.model_version
        outcome, value = self.job.examine(task.call, answer)
        if outcome == "valid":
            task.record = {
                "answer": value, "text": answer.text, "finish_reason": answer.finish_reason,
                "model_version": answer.model_version, "judge_score": answer.judge_score,
                "usage": dict(acc), "latency_s": None, "reasks": reask, "batch": j["job_id"],
            }
            task.origin, task.error = "request", None
            await self.job.keep(key, task.record)
            return {}
        if outcome == "final":
            self._settle(key, value)
            return {key: {"kind": "final", "error": value}}
        from memjudge.scoring.engine import MAX_REASKS

        if reask < MAX_REASKS:
            self.next_request[key] = (reask + 1, value)
        else:
            self._settle(key, f"invalid answer after {MAX_REASKS} re-asks: {value}")
        return {key: {"kind": "invalid", "error": value}}

    # -- the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        delay = self.settings.poll_s
        while True:
            self.plan()
            open_jobs = self._open()
            if not open_jobs:
                return
            for j in open_jobs:
                self.touched.add(j["label"])
                if j["state"] == "intent":
                    await self.submit(j)
            changed = False
            for j in open_jobs:
                info = await self._retry(lambda j=j: self.adapter.get(j["job_id"]))
                self.polls += 1
                if info.terminal:
                    await self.ingest(j, info)
                    changed = True
                elif info.status != j["status"]:
                    j.update(status=info.status, counts=info.counts, updated_at=_now())
                    self.state.save()
                    self.echo(f"job {info.id} {info.status} {info.counts or ''}")
                    changed = True
            if changed:
                delay = self.settings.poll_s
                if any(j["state"] == "done" for j in open_jobs):
                    continue  # re-plan at once: resubmissions and re-asks go out now
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.settings.poll_max_s)


async def run_batch(job, pending: list, run_dir: Path, settings: BatchSettings, limiter) -> dict[str, Any]:
    """Answer the engine's pending tasks through the provider's batch API (see the module
    docstring); returns what the summary reports under `batch`."""
    adapter = adapter_for(job.judge)
    adapter.on_retry = job._on_retry  # retries of downloads count in the summary too
    run_dir = Path(run_dir)
    lock = _RunLock(run_dir)
    try:
        state = BatchState.load(run_dir)
        ident = {"spec": job.judge.spec, "base_url": job.judge.identity().get("base_url")}
        if state.data["judge"] not in (None, ident) and any(j["state"] != "done" for j in state.jobs):
            raise UsageError(f"{state.path} has open batch jobs of judge {state.data['judge']['spec']}; "
                             "rerun with that judge, or cancel them with 'memjudge batch cancel'")
        state.data["judge"] = ident
        state.data["invocations"] = int(state.data.get("invocations", 0)) + 1
        state.save()
        runner = _Runner(job, adapter, state, settings, {t.call.key: t for t in pending}, run_dir)
        try:
            await runner.run()
        except (MemjudgeError, asyncio.CancelledError):
            raise
        except Exception as e:  # the provider refused a batch call after retries
            from memjudge.scoring.engine import _error_text as request_error, _secrets

            raise MemjudgeError(f"memjudge: batch {job.judge.spec}: {request_error(e, _secrets())}; "
                                f"the job state is kept in {state.path}, rerun the same command to resume") from None
        online = [runner.tasks[k] for k in sorted(runner.online) if runner.tasks[k].record is None]
        if online:
            runner.echo(f"{len(online)} failed batch requests go online")
            await job.run(online, limiter, progress_total=len(online), progress_done=0)
        mine = [j for j in state.jobs if j["label"] in runner.touched]
        return {
            "discount": job.judge.config.batch_discount,
            "state_file": str(state.path),
            "jobs_submitted": runner.submitted,
            "jobs_found": runner.adopted,
            "jobs": [{"label": j["label"], "job_id": j["job_id"], "status": j["status"], "requests": len(j["keys"]),
                      "without_answer": len(j.get("outcomes", {}))} for j in mine],
            "resubmitted": sum(runner.resubmits.values()),
            "online": len(online),
            "polls": runner.polls,
        }
    finally:
        lock.release()


# ---------------------------------------------------------------------------------------
# memjudge batch status | cancel


def _judge_of(state: BatchState, base_url: str | None) -> Judge:
    from memjudge.judges import JudgeConfig, make_judge

    ident = state.data.get("judge") or {}
    if not ident.get("spec"):
        raise InputError(str(state.path), "no judge recorded in the batch state")
    judge = make_judge(JudgeConfig(spec=ident["spec"], base_url=base_url or ident.get("base_url")))
    judge.check_ready()
    return judge


def _open_state(run_dir) -> BatchState:
    path = Path(run_dir) / STATE_FILE
    if not path.is_file():
        raise UsageError(f"{run_dir}: no batch jobs here ({STATE_FILE} not found)")
    return BatchState.load(Path(run_dir))


async def _live(adapter, j: dict) -> JobInfo | None:
    from memjudge.scoring.retry import call_with_retry

    if j["job_id"]:
        return await call_with_retry(adapter.judge, lambda: adapter.get(j["job_id"]))
    return await call_with_retry(adapter.judge, lambda: adapter.find(j["label"], j["intent_at"]))


def _row(j: dict, info: JobInfo | None) -> dict[str, Any]:
    return {
        "label": j["label"], "job_id": (info.id if info else None) or j["job_id"], "provider": j["provider"],
        "state": j["state"], "status": info.status if info else j["status"], "requests": len(j["keys"]),
        "counts": info.counts if info else j.get("counts", {}), "without_answer": len(j.get("outcomes", {})) if j["state"] == "done" else None,
        "submitted_at": j["submitted_at"], "finished_at": j.get("finished_at"),
    }


async def _status(run_dir, base_url, cancel: bool) -> list[dict]:
    state = _open_state(run_dir)
    judge = _judge_of(state, base_url)
    adapter = adapter_for(judge)
    rows = []
    try:
        for j in state.jobs:
            info = None
            if j["state"] != "done":
                info = await _live(adapter, j)
                if cancel and info is not None and not info.terminal:
                    from memjudge.scoring.retry import call_with_retry

                    info = await call_with_retry(judge, lambda i=info: adapter.cancel(i.id))
            rows.append(_row(j, info))
    finally:
        await judge.aclose()
    return rows


def batch_status(run_dir, base_url: str | None = None) -> list[dict]:
    """Every batch job of a run directory; open ones with the provider's current status.
    Read-only: the next `score --batch` of the run reads their results."""
    from memjudge.scoring.engine import _run_coro

    return _run_coro(_status(run_dir, base_url, cancel=False))


def batch_cancel(run_dir, base_url: str | None = None) -> list[dict]:
    """Cancel the run directory's open jobs at the provider. Answers they already produced
    are kept by the next `score --batch` of the run; the rest are asked again by a later one."""
    from memjudge.scoring.engine import _run_coro

    return _run_coro(_status(run_dir, base_url, cancel=True))


__all__ = ["BatchSettings", "BatchState", "batch_cancel", "batch_status", "check_batch_judge", "run_batch"]
