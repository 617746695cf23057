"""Online scoring: a pool of workers asks the judge, one call at a time each, through the
rate limiter and the one retry policy; validates each answer and re-asks (answers.py);
keeps the valid ones (store.py); and shows progress.

A streak of `ABORT_AFTER_FAILURES` requests that failed after retries means the judge is
unusable (wrong key, unknown model, outage): the run stops and says so instead of writing
thousands of nulls; when the *first* calls of a run all fail with the same error, it stops
after `FAIL_FAST_FIRST`. A stopped run raises `RunStopped` once the workers are done; the
calls not asked keep no answer (the engine writes them as "not asked" rows).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import cast

from memjudge._util.secrets import redact, request_error, secret_values
from memjudge.errors import MemjudgeError
from memjudge.judges import Judge, JudgeCall
from memjudge.judges.base import RequestTimeout
from memjudge.scoring.answers import (
    MAX_FOLLOWUPS,
    MAX_REASKS,
    AnswerCheck,
    Lightener,
    Task,
    add_usage,
    answer_record,
    followup_call,
    reask_call,
    unanswered_facts,
    zero_usage,
)
from memjudge.scoring.cost import estimate_tokens, price_usd
from memjudge.scoring.ratelimit import RateLimiter
from memjudge.scoring.retry import RetryEvent, call_with_retry
from memjudge.scoring.store import AnswerStore

log = logging.getLogger("memjudge")

ABORT_AFTER_FAILURES = 20
# Issue 20: when the first calls of a run all fail with the same error (a server that refuses
# the request, a wrong model name), stop after this many instead of ABORT_AFTER_FAILURES.
FAIL_FAST_FIRST = 3


class RunStopped(MemjudgeError):
    """The run stopped early (unreachable judge, failures): the rows are still written, the
    calls not asked have `error` "not asked: ...", then this is raised (exit status 2)."""


class Tally:
    """What a run's requests cost and how they went, online and batch alike: requests (re-asks
    included), re-asks, retries, tokens (and the part billed at batch prices)."""

    def __init__(self, judge: Judge):
        self.judge = judge
        self.secrets = secret_values()
        self.requests = 0
        self.reasks = 0
        self.followups = 0  # coverage calls asked again for the facts an answer left out
        self.retries = 0
        self.tokens = zero_usage()
        self.batch_tokens = zero_usage()  # the part of `tokens` billed at batch prices
        self.batch_requests = 0  # the part of `requests` billed at batch prices
        self.last_retry: str | None = None  # shown in the progress line while a run is retrying
        self.progress: Progress | None = None

    def on_retry(self, event: RetryEvent) -> None:
        """The retry observer of every request of the run (call_with_retry's `on_retry`)."""
        self.retries += 1
        self.last_retry = redact(f"{type(event.error).__name__}: {' '.join(str(event.error).split())[:120]}", self.secrets)
        log.info("%s: attempt %d failed (%s); retrying in %.1f s", event.judge, event.attempt, self.last_retry, event.wait_s or 0.0)
        if self.progress is not None:
            self.progress.refresh()

    async def retry(self, attempt):
        """`attempt()` under the retry policy, its retries counted here."""
        return await call_with_retry(self.judge, attempt, on_retry=self.on_retry)


class OnlineRunner:
    def __init__(self, judge: Judge, check: AnswerCheck, store: AnswerStore, tally: Tally, limiter: RateLimiter | None,
                 progress: bool):
        self.judge = judge
        self.check = check
        self.store = store
        self.tally = tally
        self.limiter = limiter  # rpm/tpm, applied to every request incl. re-asks
        self.progress = progress
        self.failure_streak = 0
        self.last_failure: str | None = None
        self.answered = 0  # answers received (valid or not): fail-fast only before the first
        self.first_failures: list[str] = []
        # Given by the engine when the journal will not be rewritten from the records: each
        # support answer is then held as its LabelAnswer once kept.
        self.lighten: Lightener | None = None

    def failing_fast(self) -> bool:
        """The first calls all failed the same way, before any answer came back."""
        f = self.first_failures
        return not self.answered and len(f) >= FAIL_FAST_FIRST and len(set(f)) == 1

    def _tokens(self, call) -> int:
        """The tokens the limiter counts for one request (its estimate)."""
        return estimate_tokens(call.prompt.system + call.prompt.user) + self.check.rubric.expected_output_tokens

    async def _attempt(self, call, tokens: int):
        # Every attempt, each retry included, waits for the limiter: a provider counts the
        # requests that were refused as well.
        if self.limiter is not None and self.limiter.active:
            await self.limiter.acquire(tokens)
        if not self.judge.network:
            return await self.judge.generate(call)
        timeout_s = self.judge.config.timeout_s
        async with self.judge.slot():  # the deadline starts once a server slot is ours
            try:
                async with asyncio.timeout(timeout_s):
                    return await self.judge.generate(call)
            except TimeoutError as e:
                raise RequestTimeout(f"no complete response within timeout_s = {timeout_s:g} s") from e

    async def _send(self, task: Task, current, usage: dict, latency: list[float]):
        """One request (under the retry policy): the answer, or None after the provider's error
        (recorded on the task: a null row, never a label)."""
        # Estimated only for a limiter that counts tokens (tpm; the limiter reads them for nothing
        # else): it joins the whole prompt, a cost per call of its own beside an in-process judge.
        tokens = self._tokens(current) if self.limiter is not None and self.limiter.tpm is not None else 0
        t0 = time.perf_counter()
        self.tally.requests += 1
        try:
            async def attempt_once(c=current, tokens=tokens):  # a coroutine function, so tenacity awaits it
                return await self._attempt(c, tokens)

            answer = await self.tally.retry(attempt_once)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            latency[0] += time.perf_counter() - t0
            error = request_error(e, self.tally.secrets)
            assert task.call is not None  # asked: only an answered task's call is dropped (Lightener)
            log.info("%s: %s: %s", self.judge.spec, task.call.item.get("assertion_id") or task.call.item.get("persona_id"), error)
            self.failure_streak += 1
            self.last_failure = error
            if not self.answered:
                self.first_failures.append(error)
            if task.record is None:
                task.error = error
            return None, error
        latency[0] += time.perf_counter() - t0
        self.failure_streak = 0
        self.answered += 1
        add_usage(usage, answer, self.tally.tokens)
        task.saw(answer)
        return answer, None

    async def ask(self, task: Task) -> None:
        """Ask for one call until it has a valid answer, a final error, or no re-asks left; then
        ask again, in follow-up calls, for the facts a coverage answer left out."""
        call = task.call
        usage = zero_usage()
        latency = [0.0]
        current = call
        last_problem = None
        # The usage of the requests that built a record kept before this ask (journal, cache, or
        # a batch job whose follow-up failed over to here): its follow-ups add to it.
        prior = {} if task.record is None else dict(cast(dict, task.record).get("usage") or {})
        if task.record is None:
            assert call is not None  # only an answered task's call is dropped (Lightener)
            for attempt in range(MAX_REASKS + 1):
                if attempt:
                    self.tally.reasks += 1
                    current = reask_call(call, last_problem)
                answer, failed = await self._send(task, current, usage, latency)
                if answer is None:
                    task.usage, task.latency_s = usage, round(latency[0], 4)
                    return
                outcome, value = self.check.examine(call, answer)
                if outcome == "final":
                    task.error = value
                    break
                if outcome == "reask":
                    last_problem = value
                    continue
                task.accept(answer_record(answer, value, usage=usage, latency_s=round(latency[0], 4), reasks=attempt))
                await self.store.keep(call.key, cast(dict, task.record))  # accept leaves a dict
                if self.lighten is not None:
                    self.lighten(task)
                break
            else:
                task.error = f"invalid answer after {MAX_REASKS} re-asks: {last_problem}"
        if task.record is not None and unanswered_facts(task.record):
            await self.follow_up(task, usage, latency, prior)
        if task.record is None:  # read by the error row only (an answer's row reads its record's)
            task.usage, task.latency_s = usage, round(latency[0], 4)

    async def follow_up(self, task: Task, usage: dict, latency: list[float], prior: dict) -> None:
        """Ask for the facts the kept coverage answer lacks, listing only them, up to
        MAX_FOLLOWUPS times; each valid part is kept (journal, cache) as it comes. What is still
        missing stays in the record's `unanswered` with its error: a rerun asks only for it.
        `usage` counts this ask's requests, `prior` those of a record kept before it."""
        why: dict[str, str] = {}
        # Asked for a record with unanswered facts: a dict (a LabelAnswer has none), whose task
        # kept its call (Lightener drops it with the dict); accept and the updates below keep it a dict.
        assert isinstance(task.record, dict) and task.call is not None
        for n in range(1, MAX_FOLLOWUPS + 1):
            missing = unanswered_facts(task.record)
            if not missing:
                return
            self.tally.followups += 1
            current = followup_call(task.call, self.check.rubric, list(missing))
            answer, failed = await self._send(task, current, usage, latency)
            problem = failed
            if answer is not None:
                outcome, value = self.check.examine(current, answer)
                if outcome == "valid":
                    record = task.accept_followup(answer, value, usage, prior, latency_s=round(latency[0], 4))
                    await self.store.keep(task.call.key, record)
                    why = {}
                    continue
                problem = value
            why = dict.fromkeys(missing, f"follow-up {n}: {problem}")
        task.give_up_facts(why)

    async def run(self, pending: list[Task], progress_total: int, progress_done: int) -> None:
        """Ask every pending task; RunStopped when the judge is unreachable or keeps failing."""
        # pending: no record, or a partial one (a dict), and so still their calls (see Lightener)
        queue = sorted(pending, key=lambda t: self.judge.order_key(cast(JudgeCall, t.call)))
        it = iter(queue)
        bar = self.tally.progress = Progress(self.tally, self.check.rubric.name, progress_total, progress_done) if self.progress else None
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
                if self.failing_fast() and not abort:
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
            n = len(self.first_failures) if self.failing_fast() else ABORT_AFTER_FAILURES
            raise RunStopped(
                f"judge {self.judge.spec}: {n} requests in a row failed, stopping "
                f"(last: {abort[0]}); answers received so far are saved, rerun the same command to resume"
            )


class Progress:
    """rich progress bar on stderr: done/total, rate, ETA, tokens and cost so far."""

    def __init__(self, tally: Tally, rubric_name: str, total: int, done: int):
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
        from rich.progress import Progress as Bar

        self.tally = tally
        self.progress = Bar(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[rate]}"), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            TextColumn("{task.fields[tokens]} tok  {task.fields[cost]}"), TextColumn("[yellow]{task.fields[retrying]}"),
            console=Console(stderr=True), transient=False, refresh_per_second=4,
        )
        self.task = self.progress.add_task(f"{tally.judge.spec} {rubric_name}", total=total, completed=done, rate="", tokens=0, cost="",
                                           retrying="")
        self.t0 = time.perf_counter()
        self.new = 0

    def start(self):
        self.progress.start()

    def stop(self):
        self.progress.stop()

    def refresh(self):
        """Retries show live, with the last error, so a run that only retries is not silent."""
        t = self.tally
        self.progress.update(self.task, retrying=f"{t.retries} retries, last: {t.last_retry}" if t.retries else "")

    def advance(self):
        self.new += 1
        dt = max(time.perf_counter() - self.t0, 1e-9)
        t = self.tally.tokens
        tokens = t["input_tokens"] + t["output_tokens"] + t["thinking_tokens"]
        cost = price_usd(self.tally.judge.config, self.tally.tokens, self.tally.requests)
        self.progress.update(
            self.task, advance=1, rate=f"{self.new / dt:.1f}/s", tokens=f"{tokens:,}",
            cost="" if cost is None else f"${cost:.4f}",
        )


__all__ = ["ABORT_AFTER_FAILURES", "FAIL_FAST_FIRST", "OnlineRunner", "Progress", "RunStopped", "Tally"]
