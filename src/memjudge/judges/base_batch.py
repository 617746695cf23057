"""The batch-API interface of a provider (`memjudge score --batch`), as `base.py` is for
online requests: build a request line, upload, create a job carrying a label, find a job by
its label (or, where jobs carry none, by its keys), poll, cancel, read results joined on the
cache key.

An adapter makes one attempt per method: retrying (and the durable job state) is
scoring/batch's. Reading results downloads files through the `retry` callable it is given,
so a dropped download is retried by the one retry policy.

Result lines come back as `LineResult`s: an answer (validated later, like an online one),
"failed" (a new job may cure it: 5xx, 429, an expired job) or "final" (it will not).
"""

from __future__ import annotations

import importlib
import json
import re
from dataclasses import dataclass
from typing import Any

from memjudge.errors import UsageError
from memjudge.judges.base import Judge, JudgeAnswer

# Providers with a batch API: spec prefix -> "module:adapter class".
ADAPTERS = {
    "openai": "memjudge.judges.openai_batch:OpenAIBatches",
    "gemini": "memjudge.judges.gemini_batch:GeminiBatches",
    "anthropic": "memjudge.judges.anthropic_batch:AnthropicBatches",
    "azure": "memjudge.judges.openai_batch:OpenAIBatches",
}

# Error codes of a failed line that a new job may cure (HTTP and gRPC codes alike).
RETRYABLE_CODES = frozenset({408, 409, 429, 4, 8, 10, 13, 14})


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


def error_line(prefix: str, code, message) -> str:
    """A provider's error as one line: "prefix: code: message" (300 characters of message)."""
    msg = " ".join(str(message or "").split())[:300]
    return f"{prefix}: {code}: {msg}" if code is not None else f"{prefix}: {msg}"


def failed_line(code, message) -> LineResult:
    """A request the provider answered with an error: "failed" (a new job may cure it) for
    5xx, the codes in RETRYABLE_CODES or no numeric code; "final" otherwise."""
    retryable = not isinstance(code, int) or code in RETRYABLE_CODES or code >= 500
    return LineResult("failed" if retryable else "final", error=error_line("batch request failed", code, message))


def result_line(raw: str, id_field: str, calls: dict, out: dict) -> tuple[dict | None, str | None]:
    """One line of a batch result file as (record, key), or (None, None) when it is not ours.

    A line we cannot read still names its key near its start: that item gets a null with the
    reason, never a guessed label."""
    try:
        rec = json.loads(raw)
    except (ValueError, RecursionError):
        m = re.search(r'"' + re.escape(id_field) + r'"\s*:\s*"([^"]+)"', raw)
        if m and m.group(1) in calls:
            out[m.group(1)] = LineResult("final", error=f"unreadable batch output line: not JSON ({raw[:80]!r}...)")
        return None, None
    key = rec.get(id_field) if isinstance(rec, dict) else None
    return (rec, key) if key in calls else (None, None)


def check_batch_judge(judge) -> None:
    """Only some providers have a batch API (a spec string, JudgeConfig or Judge)."""
    spec = judge if isinstance(judge, str) else judge.spec
    if spec.split(":", 1)[0] not in ADAPTERS:
        kinds = ", ".join(f"{p}:" for p in ADAPTERS)
        raise UsageError(f"--batch needs a judge with a batch API ({kinds}), not {spec}")


def batch_adapter(judge: Judge):
    """The batch adapter of a judge whose provider has a batch API (UsageError otherwise)."""
    check_batch_judge(judge)
    module, name = ADAPTERS[judge.prefix].split(":")
    return getattr(importlib.import_module(module), name)(judge)


__all__ = ["ADAPTERS", "JobInfo", "LineResult", "RETRYABLE_CODES", "batch_adapter", "check_batch_judge", "error_line",
           "failed_line", "result_line"]
