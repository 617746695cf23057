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
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast, final

from memjudge.judges import Judge, JudgeAnswer, JudgeCall, Prompt
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

USAGE_KEYS = ("input_tokens", "output_tokens", "cached_tokens", "thinking_tokens", "cache_write_tokens")


def zero_usage() -> dict[str, int]:
    return dict.fromkeys(USAGE_KEYS, 0)


def add_usage(total: dict[str, int], answer: JudgeAnswer, *more: dict[str, int]) -> None:
    """Add an answer's token usage to `total` (and to each of `more`)."""
    u = answer.usage.as_dict() if answer.usage is not None else {}
    for k in USAGE_KEYS:
        n = int(u.get(k) or 0)
        for acc in (total, *more):
            acc[k] += n


# final: without subclasses, a record whose type is not LabelAnswer is a dict to the type
# checker too (the rows tell them apart by `type(rec) is LabelAnswer`).
@final
class LabelAnswer:
    """A valid support answer as its label rows read it, and nothing more: what a run holds in
    place of the record once the journal and the cache have it and the journal will not be
    rewritten from it. A million candidates are two million answers held until the rows are
    written; the record (its dict, the answer's dict, the raw text) is ~3/4 of a KB more each.
    Each value is what the rows took from the record (`answer.get("verdict")`, ...)."""

    __slots__ = ("verdict", "evidence", "rationale", "judge_score", "usage", "latency_s", "finish_reason", "model_version")

    def __init__(self, record: dict, usage: Any, latency_s: Any):
        a = record["answer"]
        self.verdict, self.evidence, self.rationale = a.get("verdict"), a.get("evidence"), a.get("rationale")
        self.judge_score, self.usage, self.latency_s = record.get("judge_score"), usage, latency_s
        self.finish_reason, self.model_version = record.get("finish_reason"), record.get("model_version")


class Lightener:
    """`lighten(task)`: a support task whose record the journal and the cache already hold, and
    that no rewrite of the journal will need, keeps only what its label rows read (LabelAnswer).
    Its call goes too (its prompt, and its item's render inputs once every replicate is
    answered: ~300 bytes a call), unless `keep_calls`: the rows of derived replicates read which
    replicate it asked. Equal usage tables and latencies are held once per run (two million
    answers have a few thousand of each; a usage dict is ~180 bytes): rows read them, never
    change them."""

    def __init__(self, keep_calls: bool = False):
        self.keep_calls = keep_calls
        self._usage: dict[tuple, dict] = {}
        self._latency: dict[float, float] = {}

    def __call__(self, task: Task) -> None:
        record = task.record
        if type(record) is not dict:
            return
        usage, latency = record.get("usage"), record.get("latency_s")
        if type(usage) is dict and all(type(v) is int for v in usage.values()):  # 1 == 1.0 == True: ints only
            usage = self._usage.setdefault(tuple(usage.items()), usage)
        if type(latency) is float and latency > 0:  # 0.0 == -0.0, and their JSON differs
            latency = self._latency.setdefault(latency, latency)
        task.record = LabelAnswer(record, usage, latency)
        if not self.keep_calls:
            task.call = None


@dataclass(slots=True)
class Task:
    """One distinct judge call of a run and what became of it."""

    call: JudgeCall | None  # None once lightened (Lightener): nothing asks it again
    # the valid-answer record (from journal, cache or this run); a LabelAnswer once lightened
    record: dict | LabelAnswer | None = None
    origin: str | None = None  # "journal", "cache" or "request"
    error: str | None = None
    usage: dict | None = None
    latency_s: float | None = None
    finish_reason: str | None = None  # of the last answer, kept for error rows
    model_version: str | None = None

    def saw(self, answer: JudgeAnswer) -> None:
        """Remember the last answer's finish reason and model (an error row reports them)."""
        self.finish_reason, self.model_version = _shared(answer.finish_reason), _shared(answer.model_version)

    def accept(self, record: dict) -> None:
        """A valid answer of this run; one completing a kept partial coverage answer adds only
        the facts that one lacked."""
        if self.record is not None and unanswered_facts(self.record):
            # only a dict record has unanswered facts (a LabelAnswer never does)
            record = merge_coverage(cast(dict, self.record), {**record["answer"], "unanswered": record.get("unanswered")})
        self.record, self.origin, self.error = record, "request", None

    def accept_followup(self, answer: JudgeAnswer, value: dict, usage: dict, prior: dict, **more: Any) -> dict:
        """A follow-up's valid answer (`value`, as checked) completing this task's kept coverage
        answer: the facts it gives that the record lacked, one more follow-up counted, and as
        usage those of the requests that built the record before this ask (`prior`) plus this
        ask's (`usage`); `more`: other fields to set. Returns the record, to keep."""
        followups = (cast(dict, self.record).get("followups") or 0) + 1
        self.accept(answer_record(answer, value, usage=usage, latency_s=None, reasks=0))
        total = {k: prior.get(k, 0) + v for k, v in usage.items()}
        self.record = {**cast(dict, self.record), "followups": followups, "usage": total, **more}
        return self.record

    def give_up_facts(self, why: dict[str, str]) -> None:
        """Each fact the kept coverage answer still lacks is given up after MAX_FOLLOWUPS
        follow-up calls, with why its last follow-up did not give it (`why`), else why it was
        missing: its row is null with that error, and a rerun asks for it."""
        still = unanswered_facts(self.record)
        if still:
            self.record = {**cast(dict, self.record), "unanswered": {
                i: f"no valid answer for this fact after {MAX_FOLLOWUPS} follow-up calls ({why.get(i, r)})" for i, r in still.items()}}

    @property
    def pending(self) -> bool:
        """Still to ask: no valid answer, or a coverage answer that lacks some facts."""
        return self.record is None or bool(unanswered_facts(self.record))


def reask_call(call: JudgeCall, problem: str | None) -> JudgeCall:
    """The call asked again after an answer that did not validate (online and batch alike)."""
    note = REASK_NOTE.format(error=problem)
    return dataclasses.replace(call, prompt=Prompt(system=call.prompt.system, user=f"{call.prompt.user}\n\n{note}"))


def followup_call(call: JudgeCall, rubric: Rubric, fact_ids: list[str]) -> JudgeCall:
    """The coverage call asked again for only the facts `fact_ids` (the rest of its answer is
    kept): the rubric rendered with those facts and the same candidates. Same key: its answer
    completes the call's record."""
    f = call.fields
    facts = [x for x in f["facts"] if x["id"] in set(fact_ids)]
    prompt = rubric.render_coverage(source=f["source"], assertions=f["assertions"], facts=facts, persona_id=f.get("persona_id", ""))
    return dataclasses.replace(call, prompt=prompt, fields={**f, "facts": facts})


def _shared(value: Any) -> Any:
    """Text as one object for equal text (a run's records repeat their verdicts, rationales,
    models and quotes thousands of times); anything else as it is."""
    return sys.intern(value) if type(value) is str else value


def answer_record(answer: JudgeAnswer, valid: dict, *, usage: dict, latency_s: float | None, reasks: int,
                  batch_job: str | None = None) -> dict[str, Any]:
    """The valid-answer record: what the journal and the cache keep, and rows are made of (a
    partial coverage answer's left-out facts under `unanswered`)."""
    valid = {k: _shared(v) for k, v in valid.items()}
    unanswered = valid.pop("unanswered", None)
    record = {
        "answer": valid,
        "text": answer.text,
        "finish_reason": _shared(answer.finish_reason),
        "model_version": _shared(answer.model_version),
        "judge_score": answer.judge_score,
        "usage": usage,
        "latency_s": latency_s,
        "reasks": reasks,
    }
    if batch_job is not None:
        record["batch"] = batch_job
    if unanswered:
        record["unanswered"] = unanswered
    scores = (answer.raw or {}).get("candidate_scores")
    if scores is not None:  # the embedded judge's per-candidate log-odds of a per-fact coverage call
        record["candidate_scores"] = scores
    return record


def rereader(judge) -> Callable[[dict, JudgeCall], dict] | None:
    """`record, call -> record` restating a reused answer under the judge's current settings
    (Judge.reread: the embedded judge's thresholds), or None for a judge whose stored answers
    stand as they are (every other judge: nothing is done per record)."""
    if type(judge).reread is Judge.reread:
        return None

    def reread(record: dict, call: JudgeCall) -> dict:
        answer = judge.reread(record["answer"], record.get("judge_score"), call, record.get("candidate_scores"))
        if answer == record["answer"]:
            return record
        return {**record, "answer": answer, "text": json.dumps(answer)}

    return reread


class AnswerCheck:
    """The rubric's checks of one run (coverage: per call key, the known fact and assertion ids;
    a follow-up call is checked against the facts it lists)."""

    def __init__(self, rubric: Rubric, coverage_ctx: dict[str, dict] | None = None):
        self.rubric = rubric
        self.coverage_ctx = coverage_ctx or {}

    def validate(self, call: JudgeCall, answer: JudgeAnswer) -> dict:
        text = answer.text
        obj = answer.parsed if (text is None or not str(text).strip()) and isinstance(answer.parsed, dict) else text
        valid = self.rubric.validate(obj)
        if self.rubric.kind == "coverage":
            ctx = self.coverage_ctx[call.key]
            if ctx.get("fact_ids") is not None and "facts" in call.fields:
                ctx = {**ctx, "fact_ids": [f["id"] for f in call.fields["facts"]]}
            valid = check_coverage(valid, ctx)
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


# A coverage answer's facts that were left out (or listed more than once) are asked again in
# up to this many follow-up calls that list only them; what is still missing is null.
MAX_FOLLOWUPS = 2
LEFT_OUT = "left out of the answer"
REPEATED = "listed more than once in the answer"


def check_coverage(answer: dict, ctx: dict) -> dict:
    """A coverage answer's valid part: every fact it lists once, with known assertion ids.

    An answer that invents an id (a fact id, or an assertion id not shown) is rejected whole
    (AnswerError: it is asked again). With reference facts, a fact the answer leaves out or
    lists more than once is not kept: it goes to `unanswered` (fact id -> why), to be asked
    again in a follow-up call; an answer that keeps no fact at all is rejected. Without
    reference facts (the judge lists them) a repeated fact rejects the answer, as nothing can be
    asked again."""
    known = ctx["assertion_ids"]
    facts = answer["facts"]
    ids = [f["fact_id"] for f in facts]
    if any(not i.strip() for i in ids):
        raise AnswerError("a fact has an empty fact_id")
    ref = ctx.get("fact_ids")
    if ref is not None:
        extra = [i for i in dict.fromkeys(ids) if i not in set(ref)]
        if extra:
            raise AnswerError(f"unknown fact ids in the answer: {', '.join(extra[:5])}")
    for f in facts:
        unknown = [a for a in f["covered_by"] if a not in known]
        if unknown:
            raise AnswerError(f"unknown assertion ids for fact {f['fact_id']!r}: {', '.join(unknown[:5])}")
    repeated = [i for i in dict.fromkeys(ids) if ids.count(i) > 1]
    if repeated and ref is None:
        raise AnswerError(f"fact {repeated[0]!r} is listed more than once")
    out = [{**f, "covered_by": list(dict.fromkeys(f["covered_by"]))} for f in facts if f["fact_id"] not in repeated]
    valid: dict[str, Any] = {**answer, "facts": out}
    if ref is not None:
        kept = {f["fact_id"] for f in out}
        unanswered = {i: (REPEATED if i in repeated else LEFT_OUT) for i in ref if i not in kept}
        if not kept:
            listed = f"; {', '.join(repeated[:5])} {REPEATED}" if repeated else ""
            raise AnswerError(f"no fact of the list was answered (facts missing from the answer: "
                              f"{', '.join(list(unanswered)[:5])}{listed})")
        if unanswered:
            valid["unanswered"] = unanswered
    return valid


def unanswered_facts(record: dict | LabelAnswer | None) -> dict[str, str]:
    """Fact id -> why, for the reference facts a kept coverage answer still lacks (none for a
    support answer's LabelAnswer)."""
    if not isinstance(record, dict):
        return {}
    return dict(record.get("unanswered") or {})


def merge_coverage(record: dict, answer: dict) -> dict:
    """`record` (a kept, partial coverage answer) completed by a later valid `answer` (a
    follow-up's, or a whole new one): the facts it lacked that `answer` gives are added; the
    facts it kept stay as they were (a kept label is never replaced)."""
    missing = unanswered_facts(record)
    old = record["answer"]["facts"]
    have = {f["fact_id"] for f in old}
    new = [f for f in answer["facts"] if f["fact_id"] in missing and f["fact_id"] not in have]
    got = {f["fact_id"] for f in new}
    still = {i: (answer.get("unanswered") or {}).get(i, why) for i, why in missing.items() if i not in got}
    merged = {**record, "answer": {**record["answer"], "facts": old + new}}
    merged.pop("unanswered", None)
    merged["answer"].pop("unanswered", None)
    if still:
        merged["unanswered"] = still
    return merged


__all__ = ["FINISH_ERRORS", "LEFT_OUT", "MAX_FOLLOWUPS", "MAX_REASKS", "REASK_NOTE", "REPEATED", "AnswerCheck", "LabelAnswer", "Lightener", "Task",
           "add_usage", "answer_record", "check_coverage", "followup_call", "merge_coverage", "reask_call",
           "unanswered_facts", "zero_usage"]
