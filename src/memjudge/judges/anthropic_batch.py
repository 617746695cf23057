"""Anthropic's Message Batches for `anthropic:` judges: one request per call, `{"custom_id":
cache key, "params": the body `generate` would post}`, sent inline (no file upload), polled
until `processing_status` is `ended`, results read from the batch's `results_url` (JSONL,
joined on `custom_id`; see base_batch.py for the interface).

A result line is `succeeded` (its message is read as an online answer is), `errored` (an
`invalid_request_error` is final; other errors (overloaded, api_error, rate limit) may be cured
by a new job), `canceled` or `expired` (a new job may answer them).

Message Batches carry no metadata, so a job cannot carry memjudge's label. A job whose
create was interrupted (a kill, a timeout) is found instead among the batches created since
its intent was recorded that hold exactly as many requests; an ended one is only taken when
its results answer exactly the intent's keys. When two such jobs are in progress at once none
is taken (a new job is created: the one left is visible in `memjudge batch status` of no run,
and the Console)."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from memjudge.formats import is_blank, jsonl_lines
from memjudge.judges.base import JudgeCall
from memjudge.judges.base_batch import JobInfo, LineResult, error_line, result_line

# Per batch: 100,000 requests and 256 MB (Anthropic's limits).
MAX_REQUESTS = 100_000
MAX_BYTES = 256 * 1000 * 1000
# A job created by an interrupted create starts after its intent was recorded; clocks differ a little.
CLOCK_SLACK_S = 60.0
# Errors a new job cannot cure.
FINAL_ERRORS = frozenset({"invalid_request_error", "authentication_error", "permission_error", "not_found_error",
                          "request_too_large", "billing_error"})


def _epoch(value: Any) -> float:
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return 0.0


class AnthropicBatches:
    provider = "anthropic"

    def __init__(self, judge):
        self.judge = judge

    def max_job_bytes(self, input_mode: str) -> int:
        return MAX_BYTES

    @property
    def max_requests(self) -> int:
        return MAX_REQUESTS

    def input_mode(self, nbytes: int, preference: str) -> str:
        return "inline"  # requests go in the create call itself: no file to upload

    def line(self, key: str, call: JudgeCall) -> bytes:
        body = {"custom_id": key, "params": self.judge.request_body(call)}
        return (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    async def upload(self, label: str, lines: list[bytes]) -> str:
        raise AssertionError("Message Batches take their requests inline")

    async def create(self, label: str, file_id: str | None, lines: list[bytes], calls: list[tuple[str, JudgeCall]]) -> JobInfo:
        requests = [json.loads(line) for line in lines]
        return self._info(await self.judge.client().messages.batches.create(requests=requests))

    async def find(self, label: str, since: float, keys: list[str] | None = None) -> JobInfo | None:
        """The job an interrupted create made (see the module docstring), or None."""
        if keys is None:
            return None
        wanted = set(keys)
        running: list[JobInfo] = []
        async for b in self.judge.client().messages.batches.list(limit=100):
            created = _epoch(b.created_at)
            if created < since - CLOCK_SLACK_S:
                break  # newest first: the rest are older than the intent
            info = self._info(b)
            if sum(info.counts.values()) != len(wanted):
                continue
            if not info.terminal:
                running.append(info)
            elif await self._answers_exactly(info, wanted):
                return info
        return running[0] if len(running) == 1 else None

    async def _answers_exactly(self, info: JobInfo, keys: set[str]) -> bool:
        seen = set()
        for raw in await self._lines(info):
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                seen.add(rec.get("custom_id"))
        return seen == keys

    async def get(self, job_id: str) -> JobInfo:
        return self._info(await self.judge.client().messages.batches.retrieve(job_id))

    async def cancel(self, job_id: str) -> JobInfo:
        return self._info(await self.judge.client().messages.batches.cancel(job_id))

    def _info(self, b) -> JobInfo:
        rc = b.request_counts
        counts = {"processing": rc.processing, "succeeded": rc.succeeded, "errored": rc.errored,
                  "canceled": rc.canceled, "expired": rc.expired}
        terminal = b.processing_status == "ended"
        outcome = ("cancelled" if b.cancel_initiated_at is not None else "completed") if terminal else None
        return JobInfo(b.id, b.processing_status, terminal, outcome, counts, None, raw=b)

    async def _lines(self, info: JobInfo) -> list[str]:
        import httpx2

        url = info.raw.results_url if info.raw is not None else None
        if not url:
            return []
        # The results file as bytes, not the SDK's decoder of typed lines: a line we cannot
        # read is one item's null with its reason, not a failed download of all of them.
        response = await self.judge.client().get(url, cast_to=httpx2.Response, options={"headers": {"Accept": "application/binary"}})
        return [raw for raw in jsonl_lines(response.content.decode("utf-8", "replace")) if not is_blank(raw)]

    async def results(self, info: JobInfo, keys: list[str], calls: dict[str, JudgeCall], retry) -> dict[str, LineResult]:
        out: dict[str, LineResult] = {}
        for raw in await retry(lambda: self._lines(info)):
            self._line(raw, calls, out)
        return out

    def _line(self, raw: str, calls: dict[str, JudgeCall], out: dict[str, LineResult]) -> None:
        rec, key = result_line(raw, "custom_id", calls, out)
        if rec is None or key is None:
            return
        result: dict = rec["result"] if isinstance(rec.get("result"), dict) else {}
        kind = result.get("type")
        if kind == "succeeded":
            message = result.get("message")
            if not isinstance(message, dict) or message.get("type") != "message" or not isinstance(message.get("content"), list):
                out[key] = LineResult("final", error="unreadable batch output line: its message is not an Anthropic message")
                return
            try:
                out[key] = LineResult("answer", self.judge.answer_from_body(message, calls[key]))
            except (AttributeError, TypeError, KeyError, IndexError, ValueError) as e:
                out[key] = LineResult("final", error=f"unreadable batch output line: {type(e).__name__}: {e}")
            return
        if kind == "errored":
            err = (result.get("error") or {}).get("error") or {}
            code = err.get("type") if isinstance(err, dict) else None
            message = err.get("message") if isinstance(err, dict) else None
            final = code in FINAL_ERRORS
            out[key] = LineResult("final" if final else "failed", error=error_line("batch request failed", code, message))
            return
        out[key] = LineResult("failed", error=f"batch request {kind or 'without a result'}")


__all__ = ["AnthropicBatches", "MAX_BYTES", "MAX_REQUESTS"]
