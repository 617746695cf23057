"""Gemini's Batch API for `gemini:` judges: requests inline (up to INLINE_BYTES a job) or as
an uploaded JSONL file of {"key", "request"} lines, the cache key as each request's metadata
key, the job's label as its `display_name` (see base_batch.py for the interface)."""

from __future__ import annotations

import json

from memjudge.formats import is_blank, jsonl_lines
from memjudge.judges.base import JudgeCall
from memjudge.judges.base_batch import JobInfo, LineResult, error_line, failed_line, result_line

# Per job: 50,000 requests; a create request with inline requests must stay under 20 MB,
# larger jobs go as a JSONL file (up to 2 GB).
MAX_REQUESTS = 50_000
MAX_BYTES = 2 * 1000**3
INLINE_BYTES = 20 * 1000 * 1000


class GeminiBatches:
    provider = "gemini"
    _TERMINAL = {"JOB_STATE_SUCCEEDED": "completed", "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
                 "JOB_STATE_FAILED": "failed", "JOB_STATE_EXPIRED": "expired", "JOB_STATE_CANCELLED": "cancelled"}

    def __init__(self, judge):
        self.judge = judge

    @property
    def max_requests(self) -> int:
        return MAX_REQUESTS

    def max_job_bytes(self, preference: str) -> int:
        """A job's size limit for the input preference ("inline", "file" or "auto")."""
        return INLINE_BYTES if preference == "inline" else MAX_BYTES

    def input_mode(self, nbytes: int, preference: str) -> str:
        """"inline" or "file" for a job of `nbytes`: "auto" sends up to INLINE_BYTES inline."""
        inline = preference == "inline" or (preference == "auto" and nbytes <= INLINE_BYTES)
        return "inline" if inline else "file"

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

    async def upload(self, label: str, lines: list[bytes]) -> str:
        import io as _io

        f = await self.judge.client().files.upload(file=_io.BytesIO(b"".join(lines)),
                                                   config={"mime_type": "application/jsonl", "display_name": label})
        return f.name

    async def create(self, label: str, file_id, lines: list[bytes], calls: list[tuple[str, JudgeCall]]) -> JobInfo:
        src = file_id if file_id else [self._request(k, c) for k, c in calls]
        job = await self.judge.client().batches.create(model=self.judge.model, src=src, config={"display_name": label})
        return self._info(job)

    async def find(self, label: str, since: float, keys: list[str] | None = None) -> JobInfo | None:
        pager = await self.judge.client().batches.list(config={"page_size": 100})
        async for job in pager:
            if job.display_name == label:
                return self._info(job)
            if job.create_time is not None and job.create_time.timestamp() < since - 3600:
                return None
        return None

    async def get(self, job_id: str) -> JobInfo:
        return self._info(await self.judge.client().batches.get(name=job_id))

    async def cancel(self, job_id: str) -> JobInfo:
        await self.judge.client().batches.cancel(name=job_id)
        return await self.get(job_id)

    def _info(self, job) -> JobInfo:
        state = str(getattr(job.state, "value", job.state))
        outcome = self._TERMINAL.get(state)
        message = None
        if job.error is not None:
            message = error_line("batch job failed", job.error.code, job.error.message)
        return JobInfo(job.name, state, outcome is not None, outcome, {}, message, raw=job)

    async def results(self, info: JobInfo, keys: list[str], calls: dict[str, JudgeCall], retry) -> dict[str, LineResult]:
        out: dict[str, LineResult] = {}
        dest = info.raw.dest
        if dest is not None and dest.file_name:
            async def download():
                return await self.judge.client().files.download(file=dest.file_name)

            data = await retry(download)
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
                out[key] = failed_line(r.error.code, r.error.message)
            elif r.response is not None:
                out[key] = LineResult("answer", self.judge.to_answer(r.response, calls[key]))
        return out

    def _file_line(self, raw: str, calls: dict[str, JudgeCall], out: dict[str, LineResult]) -> None:
        from google.genai import types
        from google.genai.batches import _GenerateContentResponse_from_mldev

        rec, key = result_line(raw, "key", calls, out)
        if rec is None or key is None:  # both or neither
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
        out[key] = failed_line(code, message)


__all__ = ["GeminiBatches", "INLINE_BYTES", "MAX_BYTES", "MAX_REQUESTS"]
