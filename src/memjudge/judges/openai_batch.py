"""OpenAI's Batch API for `openai:` and `azure:` judges: request lines in the chat completions
format (`Judge.batch_endpoint`: `/v1/chat/completions`, Azure's `/chat/completions`, the
model its deployment) with the cache key as `custom_id`, the job's label in its `metadata`, results read
from the error file and then the output file (see base_batch.py for the interface)."""

from __future__ import annotations

import json

from memjudge.formats import is_blank, jsonl_lines
from memjudge.judges.base import JudgeCall
from memjudge.judges.base_batch import JobInfo, LineResult, error_line, failed_line, result_line

LABEL_FIELD = "memjudge_label"  # batch metadata key carrying the job's label
# Per job: 50,000 requests and 200 MB per input file.
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024


class OpenAIBatches:
    _TERMINAL = {"completed": "completed", "failed": "failed", "expired": "expired", "cancelled": "cancelled"}

    def __init__(self, judge):
        self.judge = judge
        self.provider = judge.prefix  # "openai" or "azure": the same API through two clients
        self.endpoint = judge.batch_endpoint

    def max_job_bytes(self, input_mode: str) -> int:
        return MAX_BYTES

    @property
    def max_requests(self) -> int:
        return MAX_REQUESTS

    def input_mode(self, nbytes: int, preference: str) -> str:
        return "file"  # OpenAI takes only an uploaded file

    def line(self, key: str, call: JudgeCall) -> bytes:
        body = {"custom_id": key, "method": "POST", "url": self.endpoint, "body": self.judge.request_body(call)}
        return (json.dumps(body, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")

    async def upload(self, label: str, lines: list[bytes]) -> str:
        f = await self.judge.client().files.create(file=(f"{label}.jsonl", b"".join(lines)), purpose="batch")
        return f.id

    async def create(self, label: str, file_id: str | None, lines: list[bytes], calls: list[tuple[str, JudgeCall]]) -> JobInfo:
        b = await self.judge.client().batches.create(input_file_id=file_id, endpoint=self.endpoint,
                                                     completion_window="24h", metadata={LABEL_FIELD: label})
        return self._info(b)

    async def find(self, label: str, since: float, keys: list[str] | None = None) -> JobInfo | None:
        # Newest first; a job with our label was created after its intent was recorded.
        async for b in self.judge.client().batches.list(limit=100):
            if (b.metadata or {}).get(LABEL_FIELD) == label:
                return self._info(b)
            if b.created_at < since - 3600:
                return None
        return None

    async def get(self, job_id: str) -> JobInfo:
        return self._info(await self.judge.client().batches.retrieve(job_id))

    async def cancel(self, job_id: str) -> JobInfo:
        return self._info(await self.judge.client().batches.cancel(job_id))

    def _info(self, b) -> JobInfo:
        rc = b.request_counts
        counts = {"total": rc.total, "completed": rc.completed, "failed": rc.failed} if rc else {}
        message = None
        if b.errors is not None and b.errors.data:
            e = b.errors.data[0]
            message = error_line("batch job failed", e.code, e.message)
        outcome = self._TERMINAL.get(b.status)
        return JobInfo(b.id, b.status, outcome is not None, outcome, counts, message, raw=b)

    async def results(self, info: JobInfo, keys: list[str], calls: dict[str, JudgeCall], retry) -> dict[str, LineResult]:
        out: dict[str, LineResult] = {}
        b = info.raw
        for file_id in (b.error_file_id, b.output_file_id):  # output last: it wins for a key in both
            if not file_id:
                continue

            async def download(fid=file_id):
                return (await self.judge.client().files.content(fid)).content

            data = await retry(download)
            for raw in jsonl_lines(data.decode("utf-8", "replace")):
                if not is_blank(raw):
                    self._line(raw, calls, out)
        return out

    def _line(self, raw: str, calls: dict[str, JudgeCall], out: dict[str, LineResult]) -> None:
        import pydantic
        from openai.types.chat import ChatCompletion

        rec, key = result_line(raw, "custom_id", calls, out)
        if rec is None or key is None:  # both or neither
            return
        response, error = rec.get("response"), rec.get("error")
        status = response.get("status_code") if isinstance(response, dict) else None
        if status == 200 and isinstance(response, dict) and isinstance(response.get("body"), dict):
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
        out[key] = failed_line(code, message)


__all__ = ["LABEL_FIELD", "MAX_BYTES", "MAX_REQUESTS", "OpenAIBatches"]
