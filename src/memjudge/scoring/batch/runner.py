"""Scoring through the providers' batch APIs (`memjudge score --batch`): about half the price
of online calls and no per-minute limits, finished within a day.

    score_run(cands, srcs, "openai:gpt-4o-mini", batch=True, out="runs/x")

The engine hands over the calls that no journal or cache answers (`run_batch`); this module
turns them into batch requests whose custom id (OpenAI) / metadata key (Gemini) is the cache
key, splits them into jobs within the provider's limits, submits, polls, and joins results on
that key (the order is not kept). Every answer then goes through the online path's checks
(`answers.AnswerCheck.examine`): a valid one is journaled and cached exactly like an online
answer (`store.AnswerStore.keep`); one that does not validate is re-asked in the next job
(up to MAX_REASKS, as online); one that is truncated, blocked or unreadable is
`verdict: null` with its error. A coverage answer that leaves out facts is kept, and the facts
it lacks (or a kept one from an earlier run lacks) are asked in the next job, in a follow-up
request listing only them (up to MAX_FOLLOWUPS, as online).
Lines that failed (5xx/429 in the error file, expired, missing) are resubmitted in a new job,
at most `max_resubmits` times, or with `fallback="online"` asked online (online.py).
The providers' request and result formats are theirs: judges/openai_batch.py,
judges/gemini_batch.py and judges/anthropic_batch.py (the interface in judges/base_batch.py).

Durable state: `RUN_DIR/batches.json`, replaced atomically before and after every change of
state. A job is first recorded as an *intent* (its keys and a label unique to it), then its
file is uploaded, then it is created with the label in its metadata (OpenAI `metadata`,
Gemini `display_name`; Anthropic's Message Batches have none, see anthropic_batch.py), then
recorded as submitted. A rerun polls recorded jobs instead of submitting their keys again, and
for an intent without a job id (a kill during `create`) it first looks for the job it made
(`find`: by the intent's label, or its keys). So a kill at any point loses no answer
and never has the same item in two live jobs.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any, cast

from memjudge._util.aio import run_sync
from memjudge._util.secrets import request_error
from memjudge.errors import InputError, MemjudgeError, UsageError
from memjudge.judges import Judge, JudgeAnswer, JudgeCall, JudgeConfig, make_judge
from memjudge.judges.base_batch import JobInfo, LineResult, batch_adapter
from memjudge.scoring.answers import (
    MAX_FOLLOWUPS,
    MAX_REASKS,
    AnswerCheck,
    Task,
    add_usage,
    answer_record,
    followup_call,
    reask_call,
    unanswered_facts,
    zero_usage,
)
from memjudge.scoring.batch.state import BatchSettings, BatchState, RunLock, job_label, now
from memjudge.scoring.online import OnlineRunner, Tally
from memjudge.scoring.retry import call_with_retry
from memjudge.scoring.store import AnswerStore


class Runner:
    """One `score --batch` invocation over a run directory's pending tasks."""

    def __init__(self, judge: Judge, adapter, state: BatchState, settings: BatchSettings, tasks: dict[str, Task], run_dir: Path, *,
                 check: AnswerCheck, store: AnswerStore, tally: Tally, echo: bool):
        self.judge = judge
        self.check = check
        self.store = store
        self.tally = tally
        self.show = echo
        self.adapter = adapter
        self.state = state
        self.settings = settings
        self.tasks = tasks  # key -> Task still without an answer, or with a partial coverage answer
        self.run_dir = run_dir
        # pending tasks: only an answered task's call is dropped (Lightener)
        self.calls = cast("dict[str, JudgeCall]", {k: t.call for k, t in tasks.items()})
        self.next_request: dict[str, tuple[int, str | None]] = {}  # key -> (re-ask number, problem)
        self.resubmits: dict[str, int] = {}
        self.usage: dict[str, dict[str, int]] = {}
        # A partial coverage answer kept from an earlier run (journal, cache): the usage of the
        # requests that built it, which its follow-ups add to (as online).
        self.prior = {k: dict(t.record.get("usage") or {}) for k, t in tasks.items() if isinstance(t.record, dict)}
        self.followups: dict[str, int] = {}  # key -> follow-up answers read in this run
        self.why: dict[str, dict[str, str]] = {}  # key -> fact id -> why the last follow-up did not answer it
        self.settled: set[str] = set()
        self.online: set[str] = set()
        self.submitted = 0
        self.adopted = 0
        self.polls = 0
        self.touched: set[str] = set()  # labels of the jobs this run submitted, found or polled

    # -- helpers ----------------------------------------------------------------------------

    def echo(self, text: str) -> None:
        if self.show:
            print(f"memjudge batch: {text}", file=sys.stderr, flush=True)

    async def _retry(self, fn):
        return await self.tally.retry(fn)

    def _open(self) -> list[dict]:
        """Jobs not yet read that cover at least one key we still need."""
        return [j for j in self.state.jobs if j["state"] != "done" and any(k in self.tasks for k in j["keys"])]

    def _call(self, key: str, reask: int, problem: str | None) -> JudgeCall:
        call = self.calls[key]
        missing = unanswered_facts(self.tasks[key].record)
        if missing:
            # Built again from the kept record (the journal has it), so a rerun after a kill
            # reads a submitted follow-up's answer against the facts it asked for.
            return followup_call(call, self.check.rubric, list(missing))
        return reask_call(call, problem) if reask else call

    def _settle(self, key: str, error: str) -> None:
        task = self.tasks[key]
        missing = unanswered_facts(task.record)
        if missing:
            # a follow-up that cannot be asked or read: the kept facts stand, the rows of the
            # missing ones carry the error
            n = self.followups.get(key, 0) + 1
            task.record = {**cast(dict, task.record), "unanswered": dict.fromkeys(missing, f"no valid answer for this fact (follow-up {n}: {error})")}
        else:
            task.error = error
            task.usage = self.usage.get(key) or zero_usage()
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
            if not task.pending or key in self.settled or key in self.online or key in covered:
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
        max_n, max_bytes = self.settings.limits(self.adapter)
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
            mode = self.adapter.input_mode(nbytes, self.settings.gemini_input)
            reasks = {k: list(self.next_request[k]) for k in keys if self.next_request[k][0]}
            self.state.jobs.append({
                "label": job_label(self.judge, self.run_dir, seq, keys), "seq": seq, "provider": self.adapter.provider,
                "invocation": self.state.data["invocations"], "state": "intent", "input": mode, "job_id": None, "input_file_id": None,
                "status": None, "keys": keys, "reasks": reasks, "intent_at": time.time(), "submitted_at": None,
                "updated_at": now(), "finished_at": None, "counts": {}, "outcomes": {},
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
            found = await self._retry(lambda: self.adapter.find(j["label"], j["intent_at"], j["keys"]))
            if found is not None:
                self._record_submitted(j, found, adopted=True)
                return
        if j.get("input", "file") == "file" and not j["input_file_id"]:
            j["input_file_id"] = await self._retry(lambda: self.adapter.upload(j["label"], lines))
            j["updated_at"] = now()
            self.state.save()
        attempts = 0

        async def create_once():
            # A create that timed out may have succeeded: look before asking again.
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                found = await self.adapter.find(j["label"], j["intent_at"], j["keys"])
                if found is not None:
                    return found, True
            return await self.adapter.create(j["label"], j["input_file_id"], lines, calls), False

        info, adopted = await self._retry(create_once)
        self._record_submitted(j, info, adopted=adopted)
        self.tally.requests += len(keys)
        self.tally.batch_requests += len(keys)
        self.tally.reasks += len(j["reasks"])
        self.tally.followups += sum(1 for k in keys if unanswered_facts(self.tasks[k].record))

    def _record_submitted(self, j: dict, info: JobInfo, adopted: bool) -> None:
        j.update(state="submitted", job_id=info.id, status=info.status, submitted_at=j["submitted_at"] or now(), updated_at=now())
        self.state.save()
        if adopted:
            self.adopted += 1
        else:
            self.submitted += 1
        self.echo(f"{'found' if adopted else 'submitted'} job {info.id} ({len(j['keys'])} requests)")

    # -- reading results ----------------------------------------------------------------

    async def ingest(self, j: dict, info: JobInfo) -> None:
        results = await self.adapter.results(info, j["keys"], {k: self.calls[k] for k in j["keys"] if k in self.calls}, self._retry)
        cancelled_now = info.outcome == "cancelled" and j["invocation"] == self.state.data["invocations"]
        outcomes: dict[str, dict] = {}
        for key in j["keys"]:
            task = self.tasks.get(key)
            if task is None or not task.pending:
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
        j.update(state="done", status=info.status, counts=info.counts, outcomes=outcomes, finished_at=now(), updated_at=now())
        self.state.save()
        self.echo(f"job {info.id} {info.status}: {len(j['keys']) - len(outcomes)} answered, {len(outcomes)} without a valid answer")

    async def _answer(self, j: dict, key: str, task: Task, answer: JudgeAnswer, reask: int) -> dict[str, dict]:
        acc = self.usage.setdefault(key, zero_usage())
        add_usage(acc, answer, self.tally.tokens, self.tally.batch_tokens)
        task.saw(answer)
        if unanswered_facts(task.record):
            return await self._follow_up(key, task, answer)
        # a task still without an answer: it has its call (only an answered task's is dropped)
        outcome, value = self.check.examine(cast(JudgeCall, task.call), answer)
        if outcome == "valid":
            task.accept(answer_record(answer, value, usage=dict(acc), latency_s=None, reasks=reask, batch_job=j["job_id"]))
            await self.store.keep(key, cast(dict, task.record))  # accept leaves a dict
            if unanswered_facts(task.record):
                self.next_request[key] = (0, None)  # a follow-up next, neither a re-ask nor counted as one
            return {}
        if outcome == "final":
            self._settle(key, value)
            return {key: {"kind": "final", "error": value}}
        if reask < MAX_REASKS:
            self.next_request[key] = (reask + 1, value)
        else:
            self._settle(key, f"invalid answer after {MAX_REASKS} re-asks: {value}")
        return {key: {"kind": "invalid", "error": value}}

    async def _follow_up(self, key: str, task: Task, answer: JudgeAnswer) -> dict[str, dict]:
        """The answer to a follow-up request: OnlineRunner.follow_up's steps, one per job. A
        valid part is kept (journal, cache) as it comes; an answer that does not validate, or is
        final, uses up a follow-up as online (never a re-ask). After MAX_FOLLOWUPS in this run
        what is still missing stays in `unanswered` with its error: a rerun asks only for it."""
        missing = unanswered_facts(task.record)
        n = self.followups[key] = self.followups.get(key, 0) + 1
        current = self._call(key, 0, None)
        outcome, value = self.check.examine(current, answer)
        result: dict[str, dict] = {}
        if outcome == "valid":
            await self.store.keep(key, task.accept_followup(answer, value, dict(self.usage[key]), self.prior.get(key, {})))
            self.why.pop(key, None)
        else:
            self.why[key] = dict.fromkeys(missing, f"follow-up {n}: {value}")
            result = {key: {"kind": "final" if outcome == "final" else "invalid", "error": value}}
        if n >= MAX_FOLLOWUPS and unanswered_facts(task.record):
            task.give_up_facts(self.why.pop(key, {}))
            self.settled.add(key)
        return result

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
                    j.update(status=info.status, counts=info.counts, updated_at=now())
                    self.state.save()
                    self.echo(f"job {info.id} {info.status} {info.counts or ''}")
                    changed = True
            if changed:
                delay = self.settings.poll_s
                if any(j["state"] == "done" for j in open_jobs):
                    continue  # re-plan at once: resubmissions and re-asks go out now
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, self.settings.poll_max_s)


async def run_batch(judge: Judge, pending: list[Task], run_dir: Path, settings: BatchSettings, *, check: AnswerCheck,
                    store: AnswerStore, tally: Tally, online: OnlineRunner, progress: bool) -> dict[str, Any]:
    """Answer the pending tasks through the provider's batch API (see the module docstring);
    lines that fail go to `online` when the settings say so. Returns what the summary
    reports under `batch`."""
    adapter = batch_adapter(judge)
    run_dir = Path(run_dir)
    lock = RunLock(run_dir)
    try:
        state = BatchState.load(run_dir)
        ident = {"spec": judge.spec, "base_url": judge.identity().get("base_url")}
        if state.data["judge"] not in (None, ident) and any(j["state"] != "done" for j in state.jobs):
            raise UsageError(f"{state.path} has open batch jobs of judge {state.data['judge']['spec']}; "
                             "rerun with that judge, or cancel them with 'memjudge batch cancel'")
        state.data["judge"] = ident
        state.data["invocations"] = int(state.data.get("invocations", 0)) + 1
        state.save()
        # pending tasks: only an answered task's call is dropped (Lightener)
        runner = Runner(judge, adapter, state, settings, {cast(JudgeCall, t.call).key: t for t in pending}, run_dir,
                        check=check, store=store, tally=tally, echo=progress)
        try:
            await runner.run()
        except (MemjudgeError, asyncio.CancelledError):
            raise
        except Exception as e:  # the provider refused a batch call after retries
            raise MemjudgeError(f"memjudge: batch {judge.spec}: {request_error(e, tally.secrets)}; "
                                f"the job state is kept in {state.path}, rerun the same command to resume") from None
        # a partial coverage answer's failed follow-up too: online asks for its missing facts
        asked_online = [runner.tasks[k] for k in sorted(runner.online) if runner.tasks[k].pending]
        if asked_online:
            runner.echo(f"{len(asked_online)} failed batch requests go online")
            await online.run(asked_online, progress_total=len(asked_online), progress_done=0)
        mine = [j for j in state.jobs if j["label"] in runner.touched]
        return {
            "discount": judge.config.batch_discount,
            "state_file": str(state.path),
            "jobs_submitted": runner.submitted,
            "jobs_found": runner.adopted,
            "jobs": [{"label": j["label"], "job_id": j["job_id"], "status": j["status"], "requests": len(j["keys"]),
                      "without_answer": len(j.get("outcomes", {}))} for j in mine],
            "resubmitted": sum(runner.resubmits.values()),
            "online": len(asked_online),
            "polls": runner.polls,
        }
    finally:
        lock.release()


# ---------------------------------------------------------------------------------------
# memjudge batch status | cancel


def _judge_of(state: BatchState, base_url: str | None) -> Judge:
    ident = state.data.get("judge") or {}
    if not ident.get("spec"):
        raise InputError(str(state.path), "no judge recorded in the batch state")
    judge = make_judge(JudgeConfig(spec=ident["spec"], base_url=base_url or ident.get("base_url")))
    judge.check_ready()
    return judge


async def _live(adapter, j: dict) -> JobInfo | None:
    if j["job_id"]:
        return await call_with_retry(adapter.judge, lambda: adapter.get(j["job_id"]))
    return await call_with_retry(adapter.judge, lambda: adapter.find(j["label"], j["intent_at"], j["keys"]))


def _row(j: dict, info: JobInfo | None) -> dict[str, Any]:
    return {
        "label": j["label"], "job_id": (info.id if info else None) or j["job_id"], "provider": j["provider"],
        "state": j["state"], "status": info.status if info else j["status"], "requests": len(j["keys"]),
        "counts": info.counts if info else j.get("counts", {}), "without_answer": len(j.get("outcomes", {})) if j["state"] == "done" else None,
        "submitted_at": j["submitted_at"], "finished_at": j.get("finished_at"),
    }


async def _status(run_dir, base_url, cancel: bool) -> list[dict]:
    state = BatchState.open_existing(run_dir)
    judge = _judge_of(state, base_url)
    adapter = batch_adapter(judge)
    rows = []
    try:
        for j in state.jobs:
            info = None
            if j["state"] != "done":
                info = await _live(adapter, j)
                if cancel and info is not None and not info.terminal:
                    # a def, not a lambda: mypy cannot infer a lambda with a default argument here
                    def cancel_job(i: JobInfo = info) -> Awaitable[JobInfo]:
                        return adapter.cancel(i.id)

                    info = await call_with_retry(judge, cancel_job)
            rows.append(_row(j, info))
    finally:
        await judge.aclose()
    return rows


def batch_status(run_dir, base_url: str | None = None) -> list[dict]:
    """Every batch job of a run directory; open ones with the provider's current status.
    Read-only: the next `score --batch` of the run reads their results."""
    return run_sync(_status(run_dir, base_url, cancel=False))


def batch_cancel(run_dir, base_url: str | None = None) -> list[dict]:
    """Cancel the run directory's open jobs at the provider. Answers they already produced
    are kept by the next `score --batch` of the run; the rest are asked again by a later one."""
    return run_sync(_status(run_dir, base_url, cancel=True))


__all__ = ["Runner", "batch_cancel", "batch_status", "run_batch"]
