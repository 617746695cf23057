"""What a judge's answer is worth, the same for online and batch answers.

An answer that finished normally and validates under the rubric (and, for coverage, lists
every reference fact once and only known assertion ids) becomes the *valid-answer record*
that is journaled, cached and turned into rows; `answer_record` builds it, the one place
that does. An answer that does not validate is asked again (`reask_call`, up to
`MAX_REASKS` times); one that is truncated, blocked or empty is final: a row with
`verdict = null` and its error, never a guessed label.

A `Task` is one distinct judge call of a run and what became of it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from memjudge.judges import JudgeAnswer, JudgeCall, Prompt
from memjudge.judges.rubrics import AnswerError, Rubric

MAX_REASKS = 2

REASK_NOTE = (
    "Your previous answer could not be used: {error}. Answer again with exactly one JSON "
    "object that follows the format described above, and nothing else."
)

FINISH_ERRORS = {
    "length": "truncated: the answer hit the output token limit (max_output_tokens; thinking tokens count too)",
    "safety": "blocked by the provider's safety filter",
    "empty": "empty answer",
    "other": "the answer did not finish normally",
}

USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "thinking_tokens")


def zero_usage() -> dict[str, int]:
    return dict.fromkeys(USAGE_KEYS, 0)


def add_usage(total: dict[str, int], answer: JudgeAnswer, *more: dict[str, int]) -> None:
    """Add an answer's token usage to `total` (and to each of `more`)."""
    u = answer.usage.as_dict() if answer.usage is not None else {}
    for k in USAGE_KEYS:
        n = int(u.get(k) or 0)
        for acc in (total, *more):
            acc[k] += n


@dataclass
class Task:
    """One distinct judge call of a run and what became of it."""

    call: JudgeCall
    record: dict | None = None  # the valid-answer record (from journal, cache or this run)
    origin: str | None = None  # "journal", "cache" or "request"
    error: str | None = None
    usage: dict | None = None
    latency_s: float | None = None
    finish_reason: str | None = None  # of the last answer, kept for error rows
    model_version: str | None = None

    def saw(self, answer: JudgeAnswer) -> None:
        """Remember the last answer's finish reason and model (an error row reports them)."""
        self.finish_reason, self.model_version = answer.finish_reason, answer.model_version

    def accept(self, record: dict) -> None:
        self.record, self.origin, self.error = record, "request", None


def reask_call(call: JudgeCall, problem: str | None) -> JudgeCall:
    """The call asked again after an answer that did not validate (online and batch alike)."""
    note = REASK_NOTE.format(error=problem)
    return dataclasses.replace(call, prompt=Prompt(system=call.prompt.system, user=f"{call.prompt.user}\n\n{note}"))


def answer_record(answer: JudgeAnswer, valid: dict, *, usage: dict, latency_s: float | None, reasks: int,
                  batch_job: str | None = None) -> dict[str, Any]:
    """The valid-answer record: what the journal and the cache keep, and rows are made of."""
    record = {
        "answer": valid,
        "text": answer.text,
        "finish_reason": answer.finish_reason,
        "model_version": answer.model_version,
        "judge_score": answer.judge_score,
        "usage": usage,
        "latency_s": latency_s,
        "reasks": reasks,
    }
    if batch_job is not None:
        record["batch"] = batch_job
    return record


class AnswerCheck:
    """The rubric's checks of one run (coverage: per persona, the known fact and assertion ids)."""

    def __init__(self, rubric: Rubric, coverage_ctx: dict[str, dict] | None = None):
        self.rubric = rubric
        self.coverage_ctx = coverage_ctx or {}

    def validate(self, call: JudgeCall, answer: JudgeAnswer) -> dict:
        text = answer.text
        obj = answer.parsed if (text is None or not str(text).strip()) and isinstance(answer.parsed, dict) else text
        valid = self.rubric.validate(obj)
        if self.rubric.kind == "coverage":
            valid = check_coverage(valid, self.coverage_ctx[call.item["persona_id"]])
        return valid

    def examine(self, call: JudgeCall, answer: JudgeAnswer) -> tuple[str, Any]:
        """("valid", the validated answer), ("final", error) when a re-ask cannot help
        (truncated, blocked, empty), or ("reask", problem) when it does not validate."""
        reason = answer.finish_reason
        if reason != "stop":
            return "final", FINISH_ERRORS.get(reason, f"the answer finished with {reason!r}")
        if answer.text is None and answer.parsed is None or (answer.text is not None and not answer.text.strip() and answer.parsed is None):
            return "final", FINISH_ERRORS["empty"]
        try:
            return "valid", self.validate(call, answer)
        except AnswerError as e:
            return "reask", str(e)


def check_coverage(answer: dict, ctx: dict) -> dict:
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


__all__ = ["FINISH_ERRORS", "MAX_REASKS", "REASK_NOTE", "AnswerCheck", "Task", "add_usage", "answer_record",
           "check_coverage", "reask_call", "zero_usage"]
