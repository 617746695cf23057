"""The scoring engine (spec §5): rubric-rendered calls to one judge, cached, retried,
validated, resumable.

    result = score_run("candidates.jsonl", "sources.jsonl", "openai:gpt-4o-mini", replicates=2)
    result.labels      # one row per (assertion, judge, rubric, replicate), spec §6
    result.summary     # calls made, cached, errors, verdict counts, tokens, cost, seconds

Every answer that validates is appended to the run's journal (`RUN_DIR/journal.jsonl`,
flushed per answer) and to the cache before anything else happens, so killing the process
at any moment loses nothing; a rerun reuses every valid answer (journal first, then the
cache) and asks only for the rest. Each run begins by copying into the cache any journal
answer it lacks (a kill can fall between the two writes): only then may the journal be
rewritten. Answers that fail (provider error after retries, safety
block, truncation, empty, or invalid JSON after `MAX_REASKS` re-asks) become rows with
`verdict = null` and an `error`, are never cached, and are asked again on the next run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from memjudge import formats as io
from memjudge.scoring.cache import AnswerCache, cache_key
from memjudge.errors import InputError, MemjudgeError, UsageError
from memjudge.judges import Judge, JudgeAnswer, JudgeCall, JudgeConfig, Prompt, make_judge, parse_spec
from memjudge.judges.base import RequestTimeout
from memjudge.scoring.ratelimit import RateLimiter
from memjudge.judges.rubrics import AnswerError, Rubric, evidence_found, load_rubric

log = logging.getLogger("memjudge")

MAX_REASKS = 2
# A streak this long of requests that failed after retries means the judge is unusable
# (wrong key, unknown model, outage): stop and say so instead of writing thousands of nulls.
ABORT_AFTER_FAILURES = 20
# Issue 20: when the first calls of a run all fail with the same error (a server that refuses
# the request, a wrong model name), stop after this many instead of ABORT_AFTER_FAILURES.
FAIL_FAST_FIRST = 3
JOURNAL = "journal.jsonl"
UNANSWERED_FACT = "(unanswered)"  # coverage row of a persona whose judge-listed facts are unknown

REASK_NOTE = (
    "Your previous answer could not be used: {error}. Answer again with exactly one JSON "
    "object that follows the format described above, and nothing else."
)


def reask_call(call: JudgeCall, problem: str | None) -> JudgeCall:
    """The call asked again after an answer that did not validate (online and batch alike)."""
    note = REASK_NOTE.format(error=problem)
    return dataclasses.replace(call, prompt=Prompt(system=call.prompt.system, user=f"{call.prompt.user}\n\n{note}"))

FINISH_ERRORS = {
    "length": "truncated: the answer hit the output token limit (max_output_tokens; thinking tokens count too)",
    "safety": "blocked by the provider's safety filter",
    "empty": "empty answer",
    "other": "the answer did not finish normally",
}

EXTRA_LABEL_COLUMNS = ["finish_reason", "model_version", "simulated"]


# ---------------------------------------------------------------------------------------
# results


@dataclass
class ScoreSummary:
    judge: str
    rubric: str
    simulated: bool
    rows: int  # rows in the output (labels, or coverage facts)
    calls: int  # distinct judge calls the job needs (items x replicates, deduplicated)
    requested: int  # calls sent to the judge in this run
    requests: int  # generate() invocations, re-asks included (retries are counted apart)
    reasks: int
    retries: int
    cached: int  # calls answered from the cache
    resumed: int  # calls answered from this run directory's journal
    errors: int  # calls left without a valid answer
    verdicts: dict[str, int]  # support: counts by verdict, "null" for no valid answer
    tokens: dict[str, int]  # usage of the requests made in this run
    cost_usd: float | None  # of the requests made in this run; None without prices
    seconds: float
    dry_run: bool = False
    estimated_input_tokens: int | None = None  # dry run: for the calls still to make
    estimated_output_tokens: int | None = None
    estimated_cost_usd: float | None = None
    out_dir: str | None = None
    cache_dir: str | None = None
    batch: dict[str, Any] | None = None  # --batch: jobs, rounds, discount (see memjudge.scoring.batch)
    judge_settings: dict[str, Any] | None = None  # what the provider ended up using (Judge.effective)

    def as_dict(self) -> dict[str, Any]:
        return io.json_safe(dataclasses.asdict(self))


@dataclass
class ScoreResult:
    labels: pd.DataFrame | None  # support rubric
    coverage: pd.DataFrame | None  # coverage rubric
    summary: ScoreSummary
    out_dir: Path | None = None


# ---------------------------------------------------------------------------------------
# inputs


def _frame_input(df: pd.DataFrame, reader, what: str, **kw) -> pd.DataFrame:
    """Validate a DataFrame given to the Python API with the file reader's own rules; errors
    name `<what DataFrame>` and the 1-based row."""
    import tempfile

    label = f"<{what} DataFrame>"
    cols = [str(c) for c in df.columns]
    records = [_lenient(dict(zip(cols, row))) for row in df.itertuples(index=False, name=None)]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{what}.jsonl"
        io.write_jsonl(path, records)
        try:
            return reader(path, **kw)
        except InputError as e:
            raise InputError(label, e.message, e.line) from None


def _read(obj, reader, what: str, **kw) -> tuple[pd.DataFrame, str]:
    if isinstance(obj, pd.DataFrame):
        return _frame_input(obj, reader, what, **kw), f"<{what} DataFrame>"
    if obj is None:
        raise UsageError(f"no {what} given")
    return reader(obj, **kw), str(obj)


def _file_digest(path: str) -> str | None:
    p = Path(path)
    if not p.is_file():
        return None
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------
# judges


_OVERRIDABLE = ("base_url", "concurrency", "rpm", "tpm", "temperature", "seed", "max_output_tokens", "thinking_budget",
                "response_format", "logprobs")


def resolve_judge(judge: str | JudgeConfig | Judge, *, judges_file=None, **overrides) -> tuple[Judge, bool]:
    """A ready judge, and whether we made it (and so must close it).

    A spec string takes its settings from the panel file's entry for that spec, if any;
    explicit overrides (CLI flags) win over both."""
    from pydantic import ValidationError

    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(overrides) - set(_OVERRIDABLE)
    if unknown:
        raise UsageError(f"unknown judge setting(s): {', '.join(sorted(unknown))}")
    if isinstance(judge, Judge):
        if overrides:
            raise UsageError("judge settings cannot be overridden on a Judge instance; pass a spec or a JudgeConfig")
        return judge, False
    try:
        if isinstance(judge, JudgeConfig):
            config = judge.model_copy(update=overrides) if overrides else judge
            JudgeConfig.model_validate(config.model_dump())
        else:
            parse_spec(judge)
            config = JudgeConfig(spec=judge)
            if judges_file:
                from memjudge.judges.panel import load_panel

                config = load_panel(judges_file).get(judge, config)
            config = JudgeConfig.model_validate({**config.model_dump(), **overrides})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise UsageError(f"judge {getattr(judge, 'spec', judge)}: {where}: {first['msg']}") from None
    parse_spec(config.spec)
    return make_judge(config), True


def _secrets() -> list[str]:
    """Values that must never reach a file: every *_API_KEY / *_TOKEN in the environment."""
    out = []
    for name, value in os.environ.items():
        if value and len(value) >= 8 and (name.endswith("_API_KEY") or name.endswith("_TOKEN") or name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY")):
            out.append(value)
    return out


def _scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        text = text.replace(s, "***")
    return text


def _error_text(exc: BaseException, secrets: list[str]) -> str:
    msg = " ".join(str(exc).split())
    if len(msg) > 500:
        msg = msg[:500] + "..."
    return _scrub(f"request failed: {type(exc).__name__}: {msg}" if msg else f"request failed: {type(exc).__name__}", secrets)


def price_usd(config: JudgeConfig, usage: dict[str, int]) -> float | None:
    """Cost of the given usage at the judge's prices (thinking tokens bill as output)."""
    if config.price_input_per_mtok is None and config.price_output_per_mtok is None:
        return None
    pin = config.price_input_per_mtok or 0.0
    pout = config.price_output_per_mtok or 0.0
    return (usage.get("input_tokens", 0) * pin + (usage.get("output_tokens", 0) + usage.get("thinking_tokens", 0)) * pout) / 1e6


def job_cost_usd(config: JudgeConfig, tokens: dict[str, int], batch_tokens: dict[str, int]) -> float | None:
    """Cost of a run's usage: batch requests at `batch_discount` times the online prices."""
    online = {k: tokens.get(k, 0) - batch_tokens.get(k, 0) for k in tokens}
    full, batch = price_usd(config, online), price_usd(config, batch_tokens)
    return None if full is None else full + config.batch_discount * batch


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters per token in English)."""
    return max(1, len(text) // 4)


def _path_part(name: str) -> str:
    """A name (judge spec, rubric name) as part of one file name: no separators, no way up."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_.")[:100] or "_"


def default_out_dir(judge_spec: str, rubric_name: str) -> Path:
    return Path("runs") / f"{_path_part(judge_spec)}-{_path_part(rubric_name)}"


def run_files(out_dir: Path) -> list[Path]:
    """Files of a run folder that memjudge opens itself (to append, write or read back as its
    own); the outputs proper are replaced by a rename, which never follows a link."""
    from memjudge.scoring.batch import LOCK_FILE, STATE_FILE

    opened = [JOURNAL, STATE_FILE, LOCK_FILE]
    replaced = [JOURNAL, STATE_FILE, "labels.jsonl", "coverage.jsonl", "labels.parquet", "coverage.parquet", "config.json", "summary.json"]
    return [out_dir / n for n in opened] + [out_dir / f"{n}.tmp" for n in replaced]


# ---------------------------------------------------------------------------------------
# the job


@dataclass
class _Task:
    call: JudgeCall
    record: dict | None = None  # a validated answer (from journal, cache or this run)
    origin: str | None = None  # "journal", "cache" or "request"
    error: str | None = None
    usage: dict | None = None
    latency_s: float | None = None
    finish_reason: str | None = None  # of the last answer, kept for error rows
    model_version: str | None = None


class _Job:
    def __init__(self, judge: Judge, rubric: Rubric, cache: AnswerCache | None, out_dir: Path | None, progress: bool, coverage_ctx: dict | None):
        self.judge = judge
        self.rubric = rubric
        self.cache = cache
        self.out_dir = out_dir
        self.progress = progress
        self.coverage_ctx = coverage_ctx or {}
        self.secrets = _secrets()
        self.requests = 0
        self.reasks = 0
        self.retries = 0
        self.tokens = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "thinking_tokens": 0}
        self.batch_tokens = dict(self.tokens)  # the part of `tokens` billed at batch prices
        self.failure_streak = 0
        self.last_failure: str | None = None
        self.answered = 0  # answers received (valid or not): fail-fast only before the first
        self.first_failures: list[str] = []
        self._journal = None
        self._unsaved: list[tuple[str, dict]] = []
        self._saver: asyncio.Task | None = None
        self.limiter: RateLimiter | None = None  # rpm/tpm, applied to every request incl. re-asks
        self.last_retry: str | None = None  # shown in the progress line while a run is retrying
        self.bar: _Progress | None = None

    # -- journal ------------------------------------------------------------------------

    def open_journal(self):
        if self.out_dir is None:
            return
        io.make_dir(self.out_dir)
        path = self.out_dir / JOURNAL
        self._journal = io.open_private(path, "a")
        # A kill can leave a last line without its newline; start ours on a fresh line.
        needs_newline = self._journal.tell() > 0 and not _ends_with_newline(path)
        if needs_newline:
            self._journal.write("\n")
            self._journal.flush()

    def journal(self, key: str, record: dict) -> None:
        if self._journal is not None:
            self._journal.write(_json_line({"key": key, **record}))
            self._journal.flush()

    def close_journal(self):
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    # -- one call -------------------------------------------------------------------------

    def _validate(self, call: JudgeCall, answer: JudgeAnswer) -> dict:
        text = answer.text
        obj = answer.parsed if (text is None or not str(text).strip()) and isinstance(answer.parsed, dict) else text
        valid = self.rubric.validate(obj)
        if self.rubric.kind == "coverage":
            valid = _check_coverage(valid, self.coverage_ctx[call.item["persona_id"]])
        return valid

    def examine(self, call: JudgeCall, answer: JudgeAnswer) -> tuple[str, Any]:
        """What an answer is worth, the same for online and batch answers: ("valid", the
        validated answer), ("final", error) when a re-ask cannot help (truncated, blocked,
        empty), or ("reask", problem) when it does not validate."""
        reason = answer.finish_reason
        if reason != "stop":
            return "final", FINISH_ERRORS.get(reason, f"the answer finished with {reason!r}")
        if answer.text is None and answer.parsed is None or (answer.text is not None and not answer.text.strip() and answer.parsed is None):
            return "final", FINISH_ERRORS["empty"]
        try:
            return "valid", self._validate(call, answer)
        except AnswerError as e:
            return "reask", str(e)

    async def keep(self, key: str, record: dict) -> None:
        """A valid answer goes to the journal (flushed now: this is what survives a kill) and
        then to the cache, in batches: one thread hop and one SQLite transaction per batch
        rather than per answer keeps the event loop free for requests."""
        self.journal(key, record)
        if self.cache is not None:
            self._unsaved.append((key, record))
            if self._saver is None or self._saver.done():
                self._saver = asyncio.get_running_loop().create_task(self._save_unsaved())

    async def _save_unsaved(self) -> None:
        while self._unsaved:
            batch, self._unsaved = self._unsaved, []
            await asyncio.to_thread(self.cache.set_many, batch)

    async def drain(self) -> None:
        """Wait until every kept answer is in the cache."""
        while self._saver is not None:
            saver = self._saver
            await saver
            if saver is self._saver:
                self._saver = None
        if self._unsaved:
            await self._save_unsaved()

    async def finishing(self, coro):
        try:
            return await coro
        finally:
            await self.drain()

    def _on_retry(self, event) -> None:
        self.retries += 1
        self.last_retry = _scrub(f"{type(event.error).__name__}: {' '.join(str(event.error).split())[:120]}", self.secrets)
        log.info("%s: attempt %d failed (%s); retrying in %.1f s", event.judge, event.attempt, self.last_retry, event.wait_s or 0.0)
        if self.bar is not None:
            self.bar.refresh()

    async def ask(self, task: _Task) -> None:
        from memjudge.scoring.retry import call_with_retry

        call = task.call
        usage = {"input_tokens": 0, "output_tokens": 0, "cached_tokens": 0, "thinking_tokens": 0}
        latency = 0.0
        current = call
        last_problem = None
        for attempt in range(MAX_REASKS + 1):
            if attempt:
                self.reasks += 1
                current = reask_call(call, last_problem)
            tokens = estimate_tokens(current.prompt.system + current.prompt.user) + self.rubric.expected_output_tokens
            t0 = time.perf_counter()
            self.requests += 1
            try:
                async def attempt_once(c=current, tokens=tokens):  # a coroutine function, so tenacity awaits it
                    # Every attempt, each retry included, waits for the limiter: a provider
                    # counts the requests that were refused as well.
                    if self.limiter is not None and self.limiter.active:
                        await self.limiter.acquire(tokens)
                    if not self.judge.network:
                        return await self.judge.generate(c)
                    timeout_s = self.judge.config.timeout_s
                    async with self.judge.slot():  # the deadline starts once a server slot is ours
                        try:
                            async with asyncio.timeout(timeout_s):
                                return await self.judge.generate(c)
                        except TimeoutError as e:
                            raise RequestTimeout(f"no complete response within timeout_s = {timeout_s:g} s") from e

                answer = await call_with_retry(self.judge, attempt_once, on_retry=self._on_retry)
            except asyncio.CancelledError:
                raise
            except Exception as e:  # the provider's error after retries: a null row, never a label
                latency += time.perf_counter() - t0
                task.error, task.usage, task.latency_s = _error_text(e, self.secrets), usage, round(latency, 4)
                log.info("%s: %s: %s", self.judge.spec, call.item.get("assertion_id") or call.item.get("persona_id"), task.error)
                self.failure_streak += 1
                self.last_failure = task.error
                if not self.answered:
                    self.first_failures.append(task.error)
                return
            latency += time.perf_counter() - t0
            self.failure_streak = 0
            self.answered += 1
            u = answer.usage.as_dict() if answer.usage is not None else {}
            for k in usage:
                usage[k] += int(u.get(k) or 0)
                self.tokens[k] += int(u.get(k) or 0)
            reason = answer.finish_reason
            task.finish_reason, task.model_version = reason, answer.model_version
            outcome, value = self.examine(call, answer)
            if outcome == "final":
                task.error = value
                break
            if outcome == "reask":
                last_problem = value
                continue
            valid = value
            task.record = {
                "answer": valid,
                "text": answer.text,
                "finish_reason": reason,
                "model_version": answer.model_version,
                "judge_score": answer.judge_score,
                "usage": usage,
                "latency_s": round(latency, 4),
                "reasks": attempt,
            }
            task.origin = "request"
            task.error = None
            await self.keep(call.key, task.record)
            break
        else:
            task.error = f"invalid answer after {MAX_REASKS} re-asks: {last_problem}"
        task.usage, task.latency_s = usage, round(latency, 4)

    # -- all calls --------------------------------------------------------------------------

    async def run(self, pending: list[_Task], limiter: RateLimiter, progress_total: int, progress_done: int) -> None:
        self.limiter = limiter
        queue = sorted(pending, key=lambda t: self.judge.order_key(t.call))
        it = iter(queue)
        bar = self.bar = _Progress(self, progress_total, progress_done) if self.progress else None
        abort: list[str] = []

        async def worker():
            for task in it:
                if abort:
                    return
                await self.ask(task)
                if bar is not None:
                    bar.advance()
                if self.failure_streak >= ABORT_AFTER_FAILURES and not abort:
                    abort.append(self.last_failure or "requests failed")
                if _fail_fast(self) and not abort:
                    abort.append(self.first_failures[0])

        n = max(1, min(self.judge.config.concurrency, len(queue)))
        await self.judge.prepare()
        try:
            await self.judge.preflight()
        except MemjudgeError as e:
            raise RunStopped(str(e)) from None
        try:
            if bar is not None:
                bar.start()
            await asyncio.gather(*(worker() for _ in range(n)))
        finally:
            if bar is not None:
                bar.stop()
        if abort:
            n = len(self.first_failures) if _fail_fast(self) else ABORT_AFTER_FAILURES
            raise RunStopped(
                f"judge {self.judge.spec}: {n} requests in a row failed, stopping "
                f"(last: {abort[0]}); answers received so far are saved, rerun the same command to resume"
            )


class RunStopped(MemjudgeError):
    """The run stopped early (unreachable judge, failures): the rows are still written, the
    calls not asked have `error` "not asked: ...", then this is raised (exit status 2)."""


class AllCallsFailed(MemjudgeError):
    """Every call of the run failed; the rows (all null, with errors) are written. `result`
    is the ScoreResult."""

    def __init__(self, message: str, result: Any = None):
        super().__init__(message)
        self.result = result


def _fail_fast(job: _Job) -> bool:
    """The first calls all failed the same way, before any answer came back."""
    f = job.first_failures
    return not job.answered and len(f) >= FAIL_FAST_FIRST and len(set(f)) == 1


class _Progress:
    """rich progress bar on stderr: done/total, rate, ETA, tokens and cost so far."""

    def __init__(self, job: _Job, total: int, done: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self.job = job
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("{task.fields[tokens]} tok  {task.fields[cost]}"), TextColumn("[yellow]{task.fields[retrying]}"),
            console=Console(stderr=True), transient=False, refresh_per_second=4,
        )
        self.task = self.progress.add_task(f"{job.judge.spec} {job.rubric.name}", total=total, completed=done, rate="", tokens=0, cost="",
                                           retrying="")
        self.t0 = time.perf_counter()
        self.new = 0

    def start(self):
        self.progress.start()

    def stop(self):
        self.progress.stop()

    def refresh(self):
        """Retries show live, with the last error, so a run that only retries is not silent."""
        self.progress.update(self.task, retrying=f"{self.job.retries} retries, last: {self.job.last_retry}" if self.job.retries else "")

    def advance(self):
        self.new += 1
        dt = max(time.perf_counter() - self.t0, 1e-9)
        tokens = sum(self.job.tokens.values()) - self.job.tokens["cached_tokens"]
        cost = price_usd(self.job.judge.config, self.job.tokens)
        self.progress.update(
            self.task, advance=1, rate=f"{self.new / dt:.1f}/s", tokens=f"{tokens:,}",
            cost="" if cost is None else f"${cost:.4f}",
        )


def _check_coverage(answer: dict, ctx: dict) -> dict:
    """Coverage answers must list every reference fact once and only known assertion ids."""
    known = ctx["assertion_ids"]
    facts = answer["facts"]
    ids = [f["fact_id"] for f in facts]
    if any(not i.strip() for i in ids):
        raise AnswerError("a fact has an empty fact_id")
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise AnswerError(f"fact {dup!r} is listed more than once")
    ref = ctx.get("fact_ids")
    if ref is not None:
        missing = [i for i in ref if i not in set(ids)]
        extra = [i for i in ids if i not in set(ref)]
        if missing:
            raise AnswerError(f"facts missing from the answer: {', '.join(missing[:5])}")
        if extra:
            raise AnswerError(f"unknown fact ids in the answer: {', '.join(extra[:5])}")
    out = []
    for f in facts:
        unknown = [a for a in f["covered_by"] if a not in known]
        if unknown:
            raise AnswerError(f"unknown assertion ids for fact {f['fact_id']!r}: {', '.join(unknown[:5])}")
        out.append({**f, "covered_by": list(dict.fromkeys(f["covered_by"]))})
    return {**answer, "facts": out}


def _ends_with_newline(path: Path) -> bool:
    with io.open_private(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def _load_journal(path: Path) -> tuple[dict[str, dict], int]:
    """key → record of every valid answer in the journal, and the number of lines; a damaged
    line (a kill mid-write) is skipped, it is asked again."""
    out: dict[str, dict] = {}
    lines = 0
    if not path.is_file() and not path.is_symlink():
        return out, lines
    with io.open_private(path, "rb") as f:
        data = f.read()
    for line in io.jsonl_lines(data.decode("utf-8", "replace")):
        lines += 1
        try:
            rec = json.loads(line)
        except (json.JSONDecodeError, RecursionError):  # not an answer we wrote: asked again
            continue
        if isinstance(rec, dict) and isinstance(rec.get("key"), str) and isinstance(rec.get("answer"), dict):
            out[rec.pop("key")] = rec
    return out, lines


def _json_line(row: dict) -> str:
    """One JSONL line; the plain json fast path, then NaN as null and other values of extra
    columns (numpy scalars, Parquet timestamps, decimals) as their JSON or ISO/text form."""
    try:
        return json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n"
    except (TypeError, ValueError):
        return json.dumps(_lenient(row), ensure_ascii=False, allow_nan=False) + "\n"


def _lenient(obj):
    if isinstance(obj, dict):
        return {str(k): _lenient(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_lenient(v) for v in obj]
    try:
        return io.json_safe(obj)
    except TypeError:
        if hasattr(obj, "isoformat"):
            return obj.isoformat()
        if isinstance(obj, bytes):
            return obj.decode("utf-8", "replace")
        return str(obj)


def _to_parquet(frame: pd.DataFrame, path: Path) -> None:
    """Parquet wants one type per column; an extra column mixing types (JSON allows it) is
    written as text rather than failing after the judging is done."""
    import io as _bytes_io

    buf = _bytes_io.BytesIO()
    try:
        frame.to_parquet(buf, index=False)
    except Exception:  # pyarrow's type errors come in several classes
        fixed = frame.copy()
        for col in fixed.columns:
            if fixed[col].dtype == object and col != "usage":
                kinds = {type(v) for v in fixed[col] if v is not None}
                if len(kinds) > 1 or (kinds and not kinds <= {str, bool, int, float}):
                    fixed[col] = [None if v is None else (v if isinstance(v, str) else json.dumps(_lenient(v), ensure_ascii=False)) for v in fixed[col]]
        buf = _bytes_io.BytesIO()
        fixed.to_parquet(buf, index=False)
    io.write_atomic(path, buf.getvalue())  # pyarrow would follow a link planted at PATH.tmp


def _write_text(path: Path, text: str) -> None:
    """Atomically: a reader (or a kill) never leaves half a file."""
    io.write_atomic(path, text)


# ---------------------------------------------------------------------------------------
# rows


def _label_row(item: dict, replicate: int, task: _Task, judge: Judge, rubric: Rubric, source: str, extras: dict) -> dict:
    rec = task.record
    a = rec["answer"] if rec else {}
    evidence = a.get("evidence") if rec else None
    row = {
        "assertion_id": item["assertion_id"], "persona_id": item["persona_id"], "category": item["category"],
        "judge": judge.spec, "rubric": rubric.id, "replicate": replicate,
        "verdict": a.get("verdict") if rec else None,
        "judge_score": rec.get("judge_score") if rec else None,
        "evidence": evidence,
        "evidence_found": evidence_found(evidence, source) if rec else None,
        "rationale": a.get("rationale") if rec else None,
        "error": None if rec else task.error,
        "cached": task.origin in ("journal", "cache") if rec else False,
        "usage": rec.get("usage") if rec else task.usage,
        "latency_s": rec.get("latency_s") if rec else task.latency_s,
        "finish_reason": rec.get("finish_reason") if rec else task.finish_reason,
        "model_version": rec.get("model_version") if rec else task.model_version,
        "simulated": bool(getattr(judge, "simulated", False)),
    }
    row.update(extras)
    return row


def _coverage_rows(persona: str, replicate: int, task: _Task, judge: Judge, rubric: Rubric, facts: list[dict] | None) -> list[dict]:
    def row(fact_id, fact_text, covered_by, error, cached):
        return {"persona_id": persona, "fact_id": fact_id, "fact_text": fact_text, "covered_by": covered_by, "judge": judge.spec,
                "rubric": rubric.id, "replicate": replicate, "error": error, "cached": cached}

    rec = task.record
    cached = task.origin in ("journal", "cache")
    if rec is None:
        listed = facts if facts else [{"id": UNANSWERED_FACT, "text": None}]
        return [row(f["id"], f["text"], None, task.error, False) for f in listed]
    by_id = {f["fact_id"]: f for f in rec["answer"]["facts"]}
    if facts:
        return [row(f["id"], f["text"], by_id[f["id"]]["covered_by"], None, cached) for f in facts]
    return [row(f["fact_id"], f.get("fact"), f["covered_by"], None, cached) for f in rec["answer"]["facts"]]


def _order_columns(df: pd.DataFrame, front: list[str]) -> pd.DataFrame:
    return df[[c for c in front if c in df.columns] + [c for c in df.columns if c not in front]]


# ---------------------------------------------------------------------------------------
# public API


def _run_coro(coro):
    """asyncio.run, also from inside a running loop (Jupyter): then in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target():
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="memjudge-score")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def score_run(
    candidates,
    sources,
    judge: str | JudgeConfig | Judge,
    *,
    rubric: str | Rubric = "support",
    facts=None,
    replicates: int = 1,
    out: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    dry_run: bool = False,
    progress: bool = True,
    parquet: bool = False,
    judges_file: str | os.PathLike | None = None,
    base_url: str | None = None,
    concurrency: int | None = None,
    rpm: float | None = None,
    tpm: float | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    max_output_tokens: int | None = None,
    thinking_budget: int | None = None,
    response_format: str | None = None,
    logprobs: bool | None = None,
    write: bool = True,
    argv: list[str] | None = None,
    echo=None,
    batch: bool = False,
    batch_fallback: str = "resubmit",
    batch_options: dict[str, Any] | None = None,
    limit: int | None = None,
) -> ScoreResult:
    """Score `candidates` against `sources` with one judge and one rubric.

    `candidates`, `sources`, `facts` are paths (JSONL/CSV/Parquet) or DataFrames; `judge` is a
    spec ("openai:gpt-4o-mini"), a JudgeConfig or a Judge. Outputs go to `out` (default
    runs/<judge>-<rubric>) unless `write=False`. `dry_run` validates everything and estimates
    calls, tokens and cost without calling. `echo(line)` receives the dry run's listing.
    `limit=N` scores only the first N personas of the candidates (in file order): a quick
    look before paying for the whole run; the rerun without it reuses those answers.
    `batch=True` sends the calls through the provider's batch API instead (memjudge.scoring.batch:
    `batch_fallback` "resubmit" or "online" for lines that fail, `batch_options` for limits
    and polling); costs are then at batch prices.
    """
    t_start = time.perf_counter()
    if not isinstance(replicates, int) or isinstance(replicates, bool) or replicates < 1:
        raise UsageError(f"replicates must be an integer >= 1, got {replicates!r}")
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        raise UsageError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    for name, v in (("rpm", rpm), ("tpm", tpm)):
        if v is not None and not v > 0:
            raise UsageError(f"{name} must be > 0, got {v!r}")
    rub = load_rubric(rubric)
    batch_settings = None
    if batch:
        from memjudge.scoring.batch import BatchSettings, check_batch_judge

        check_batch_judge(judge)
        if not write:
            raise UsageError("batch scoring keeps its job state in the run directory; it needs write=True")
        batch_settings = BatchSettings.make(fallback=batch_fallback, **(batch_options or {}))
    if facts is not None and rub.kind != "coverage":
        raise UsageError(f"--facts is for the coverage rubric, not {rub.name!r}")

    cands, cand_label = _read(candidates, io.read_candidates, "candidates", keep_line=True)
    srcs, src_label = _read(sources, io.read_sources, "sources")
    io.check_sources_cover(cands, srcs, cand_label, src_label)
    cands = cands.drop(columns=[io.LINE])
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be an integer >= 1, got {limit!r}")
        first = list(dict.fromkeys(cands["persona_id"]))[:limit]
        cands = cands[cands["persona_id"].isin(first)].reset_index(drop=True)
    fact_df = None
    if facts is not None:
        fact_df, _ = _read(facts, io.read_facts, "facts")

    the_judge, owned = resolve_judge(
        judge, judges_file=judges_file, base_url=base_url, concurrency=concurrency, rpm=rpm, tpm=tpm,
        temperature=temperature, seed=seed, max_output_tokens=max_output_tokens, thinking_budget=thinking_budget,
        response_format=response_format, logprobs=logprobs,
    )
    closer = _Closer(the_judge if owned else None)
    try:
        return _score(
            the_judge, rub, cands, srcs, fact_df, replicates=replicates, out=out, cache_dir=cache_dir, closer=closer,
            use_cache=use_cache, dry_run=dry_run, progress=progress, parquet=parquet, write=write,
            inputs={"candidates": cand_label, "sources": src_label, "facts": str(facts) if isinstance(facts, (str, os.PathLike)) else (None if facts is None else "<facts DataFrame>")},
            judges_file=judges_file, argv=argv, echo=echo, t_start=t_start, batch=batch_settings,
        )
    finally:
        if closer.judge is not None:
            _run_coro(closer.close())


class _Closer:
    """Closes a judge we made, on the event loop that used its clients."""

    def __init__(self, judge: Judge | None):
        self.judge = judge

    async def close(self):
        judge, self.judge = self.judge, None
        if judge is not None:
            await judge.aclose()

    async def after(self, coro):
        try:
            return await coro
        finally:
            await self.close()


def _score(judge: Judge, rub: Rubric, cands: pd.DataFrame, srcs: pd.DataFrame, fact_df, *, replicates, out, cache_dir, closer,
           use_cache, dry_run, progress, parquet, write, inputs, judges_file, argv, echo, t_start, batch=None) -> ScoreResult:
    source_of = dict(zip(srcs["persona_id"], srcs["source"]))
    identity = judge.identity()
    rid = rub.cache_identity()
    extras_cols = [c for c in cands.columns if c not in io.CANDIDATE_COLUMNS]
    reserved = set(io.LABEL_COLUMNS) | set(EXTRA_LABEL_COLUMNS)
    extra_names = {c: (f"candidate_{c}" if c in reserved else c) for c in extras_cols}

    tasks: dict[str, _Task] = {}
    # slots: (task key, item, replicate, extras) for support; (task key, persona, replicate) for coverage
    slots: list[tuple] = []
    coverage_ctx: dict[str, dict] = {}
    persona_facts: dict[str, list[dict] | None] = {}

    def add(call_prompt: Prompt, item: dict, r: int, fields: dict | None = None) -> str:
        key = cache_key(identity, rid, call_prompt, r)
        if key not in tasks:
            tasks[key] = _Task(JudgeCall(key=key, rubric=rub.id, prompt=call_prompt, schema=rub.model, replicate=r, item=item,
                                         fields=fields or {}))
        return key

    if rub.kind == "support":
        cols = ["persona_id", "assertion_id", "category", "text"] + extras_cols
        for values in cands[cols].itertuples(index=False, name=None):
            pid, aid, cat, text = values[:4]
            extras = {extra_names[c]: v for c, v in zip(extras_cols, values[4:])}
            prompt = rub.render_support(source=source_of[pid], assertion=text, category=cat, persona_id=pid, assertion_id=aid)
            item = {"assertion_id": aid, "persona_id": pid, "category": cat}
            for r in range(replicates):
                slots.append((add(prompt, item, r, {"source": source_of[pid], "assertion": text, "category": cat}), item, r, extras))
    else:
        by_persona = {pid: g for pid, g in cands.groupby("persona_id", sort=False)}
        facts_by = {pid: g for pid, g in fact_df.groupby("persona_id", sort=False)} if fact_df is not None else {}
        for pid, g in by_persona.items():
            assertions = [{"id": a, "text": t, "category": c} for a, t, c in zip(g["assertion_id"], g["text"], g["category"])]
            if fact_df is not None:
                if pid not in facts_by:
                    continue  # no reference facts for this persona: nothing to cover
                fl = [{"id": i, "text": t} for i, t in zip(facts_by[pid]["fact_id"], facts_by[pid]["text"])]
            else:
                fl = None
            persona_facts[pid] = fl
            coverage_ctx[pid] = {"assertion_ids": set(g["assertion_id"]), "fact_ids": [f["id"] for f in fl] if fl else None}
            prompt = rub.render_coverage(source=source_of[pid], assertions=assertions, facts=fl, persona_id=pid)
            item = {"persona_id": pid}
            for r in range(replicates):
                slots.append((add(prompt, item, r), pid, r))

    out_dir = Path(out) if out is not None else default_out_dir(judge.spec, rub.name)
    if write:
        # Before any paid request: a folder that cannot be made, or a planted link that would
        # make us write wherever it points.
        io.check_dir(out_dir)
        io.refuse_links(run_files(out_dir))
    cache = AnswerCache(cache_dir) if use_cache else None
    try:
        # Reuse: this run directory's journal first, then the cache.
        journal, journal_lines = _load_journal(out_dir / JOURNAL) if write else ({}, 0)
        if cache is not None and journal and not dry_run:
            # Answers journaled just before a kill may not have reached the cache. All of them
            # go there now, pending work or not and whatever settings they were asked with:
            # the journal may be rewritten at the end of this run, and only then is that safe.
            unsaved = cache.missing(journal)
            if unsaved:
                cache.set_many((k, journal[k]) for k in unsaved)
        for key, task in tasks.items():
            rec = journal.get(key)
            if rec is not None:
                task.record, task.origin = rec, "journal"
        if cache is not None:
            missing = [k for k, t in tasks.items() if t.record is None]
            found = cache.get_many(missing)
            for key, rec in found.items():
                tasks[key].record, tasks[key].origin = rec, "cache"
        pending = [t for t in tasks.values() if t.record is None]

        if dry_run:
            est_in = sum(estimate_tokens(t.call.prompt.system + "\n" + t.call.prompt.user) for t in pending)
            est_out = len(pending) * rub.expected_output_tokens
            est_cost = price_usd(judge.config, {"input_tokens": est_in, "output_tokens": est_out})
            if batch is not None and est_cost is not None:
                est_cost *= judge.config.batch_discount
            summary = ScoreSummary(
                judge=judge.spec, rubric=rub.id, simulated=bool(judge.simulated), rows=len(slots) if rub.kind == "support" else sum(len(persona_facts.get(s[1]) or [None]) for s in slots),
                calls=len(tasks), requested=0, requests=0, reasks=0, retries=0,
                cached=sum(t.origin == "cache" for t in tasks.values()), resumed=sum(t.origin == "journal" for t in tasks.values()),
                errors=0, verdicts={}, tokens={}, cost_usd=None, seconds=round(time.perf_counter() - t_start, 3), dry_run=True,
                estimated_input_tokens=est_in, estimated_output_tokens=est_out, estimated_cost_usd=est_cost,
                out_dir=str(out_dir), cache_dir=str(cache.directory) if cache is not None else None,
                batch={"discount": judge.config.batch_discount} if batch is not None else None,
            )
            if echo is not None and pending:
                first = sorted(pending, key=lambda t: judge.order_key(t.call))[0].call
                echo(f"first call ({first.item}):\n--- system ---\n{first.prompt.system}\n--- user ---\n{first.prompt.user}\n---")
            return ScoreResult(labels=None, coverage=None, summary=summary, out_dir=out_dir)

        if pending or batch is not None:
            judge.check_ready()
        job = _Job(judge, rub, cache, out_dir if write else None, progress, coverage_ctx)
        if write:
            job.open_journal()
        limiter = RateLimiter(judge.config.rpm, judge.config.tpm)
        batch_report = None
        stopped: RunStopped | None = None
        try:
            if batch is not None:
                from memjudge.scoring.batch import run_batch

                # Also without pending calls: jobs of an earlier run may still be open.
                batch_report = _run_coro(closer.after(job.finishing(run_batch(job, pending, out_dir, batch, limiter))))
            elif pending:
                _run_coro(closer.after(job.finishing(job.run(pending, limiter, progress_total=len(tasks), progress_done=len(tasks) - len(pending)))))
        except RunStopped as e:  # the rows are still written (below), then the error stands
            stopped = e
            for t in pending:
                if t.record is None and t.error is None:
                    t.error = f"not asked: {e}"
        finally:
            job.close_journal()

        # rows
        labels = coverage = None
        if rub.kind == "support":
            rows = [_label_row(item, r, tasks[key], judge, rub, source_of[item["persona_id"]], extras) for key, item, r, extras in slots]
            labels = io.text_as_objects(_order_columns(pd.DataFrame(rows), io.LABEL_COLUMNS + EXTRA_LABEL_COLUMNS) if rows else pd.DataFrame(columns=io.LABEL_COLUMNS + EXTRA_LABEL_COLUMNS))
            verdicts = labels["verdict"].fillna("null").value_counts().to_dict()
            nrows = len(labels)
        else:
            rows = [row for key, pid, r in slots for row in _coverage_rows(pid, r, tasks[key], judge, rub, persona_facts[pid])]
            coverage = io.text_as_objects(pd.DataFrame(rows, columns=io.COVERAGE_COLUMNS + ["cached"]))
            verdicts = {}
            nrows = len(coverage)
        summary = ScoreSummary(
            judge=judge.spec, rubric=rub.id, simulated=bool(judge.simulated), rows=nrows, calls=len(tasks),
            requested=sum(1 for t in pending), requests=job.requests, reasks=job.reasks, retries=job.retries,
            cached=sum(t.origin == "cache" for t in tasks.values()), resumed=sum(t.origin == "journal" for t in tasks.values()),
            errors=sum(t.record is None for t in tasks.values()), verdicts={str(k): int(v) for k, v in verdicts.items()},
            tokens=dict(job.tokens), cost_usd=job_cost_usd(judge.config, job.tokens, job.batch_tokens), seconds=0.0,
            out_dir=str(out_dir) if write else None, cache_dir=str(cache.directory) if cache is not None else None, batch=batch_report,
            judge_settings=judge.effective() or None,
        )
        if write:
            # New answers were appended as they came; rewrite only when the journal holds
            # lines this job did not use (damaged, other settings) or lacks cache hits.
            compact = summary.cached > 0 or journal_lines != summary.resumed
            kept = None
            if compact:
                kept = {k: t.record for k, t in tasks.items() if t.record is not None}
                if cache is None:  # the journal is then the only copy of other jobs' answers
                    kept = {**{k: v for k, v in journal.items() if k not in tasks}, **kept}
            _write_outputs(out_dir, judge, rub, labels, coverage, rows, kept, summary, parquet=parquet, inputs=inputs,
                           replicates=replicates, judges_file=judges_file, argv=argv, cache_dir=cache.directory if cache is not None else None, use_cache=use_cache)
        summary.seconds = round(time.perf_counter() - t_start, 3)
        if write:
            io.write_json(out_dir / "summary.json", summary.as_dict())
        result = ScoreResult(labels=labels, coverage=coverage, summary=summary, out_dir=out_dir if write else None)
        if stopped is not None:
            raise stopped
        if batch is None and pending and not job.answered and summary.errors == summary.calls:
            first = next((t.error for t in pending if t.error), "no valid answer")
            where = f"; wrote {out_dir / ('labels.jsonl' if labels is not None else 'coverage.jsonl')} with null verdicts" if write else ""
            raise AllCallsFailed(f"judge {judge.spec}: every call failed ({first}){where}", result)
        return result
    finally:
        if cache is not None:
            cache.close()


def _write_outputs(out_dir: Path, judge: Judge, rub: Rubric, labels, coverage, rows, kept, summary, *, parquet, inputs, replicates,
                   judges_file, argv, cache_dir, use_cache) -> None:
    io.make_dir(out_dir)
    frame, name = (labels, "labels") if labels is not None else (coverage, "coverage")
    _write_text(out_dir / f"{name}.jsonl", "".join(map(_json_line, rows)))
    if parquet:
        _to_parquet(frame, out_dir / f"{name}.parquet")
    # The journal keeps the valid answers of this job (it is the run's own memory when the
    # cache is cleared or elsewhere); written atomically like the outputs. Its other answers
    # were copied into the cache when the run began (without a cache, `kept` holds them).
    if kept is not None:  # None: the journal already holds exactly these answers
        _write_text(out_dir / JOURNAL, "".join(_json_line({"key": k, **rec}) for k, rec in kept.items()))
    from memjudge import __version__

    config = {
        "memjudge_version": __version__,
        "command": argv,
        "judge": {**judge.identity(), "endpoint": judge.endpoint, "simulated": bool(judge.simulated),
                  "config": judge.config.model_dump(mode="json"), "effective": judge.effective() or None},
        "rubric": rub.describe(),
        "replicates": replicates,
        "inputs": {k: ({"path": v, "sha256": _file_digest(v)} if v else None) for k, v in inputs.items()},
        "judges_file": str(judges_file) if judges_file else None,
        "cache_dir": str(cache_dir) if cache_dir else None,
        "use_cache": use_cache,
        "python": sys.version.split()[0],
    }
    io.write_json(out_dir / "config.json", json.loads(_scrub(io.dumps(config), _secrets())))


def score(
    candidates,
    sources,
    judge: str | JudgeConfig | Judge,
    *,
    rubric: str | Rubric = "support",
    facts=None,
    replicates: int = 1,
    out: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    **options,
) -> pd.DataFrame:
    """Labels (support rubric) or coverage rows (coverage rubric) as a DataFrame, exactly the
    rows of the run's labels.jsonl / coverage.jsonl. `options` are score_run's (base_url,
    concurrency, rpm, tpm, temperature, seed, judges_file, parquet, use_cache, write, ...)."""
    if options.get("dry_run"):
        raise UsageError("score(dry_run=True) has no labels; use score_run(..., dry_run=True) for the estimate")
    result = score_run(candidates, sources, judge, rubric=rubric, facts=facts, replicates=replicates, out=out,
                       cache_dir=cache_dir, progress=progress, **options)
    return result.labels if result.labels is not None else result.coverage


__all__ = ["MAX_REASKS", "ScoreResult", "ScoreSummary", "default_out_dir", "job_cost_usd", "price_usd", "resolve_judge", "score", "score_run"]
