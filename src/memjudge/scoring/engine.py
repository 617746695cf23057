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

This module runs one job from its settings; the parts are: plan.py (inputs → tasks),
answers.py (validate, re-ask, the valid-answer record), store.py (journal + cache),
online.py (worker pool, limits, progress) or batch/ (the providers' batch APIs), cost.py,
outputs.py (rows and files). Imports run one way: engine → online/batch → answers/store.
"""

from __future__ import annotations

import dataclasses
import os
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import ConfigDict

from memjudge import formats as io
from memjudge._util import gcpause
from memjudge._util.aio import run_sync
from memjudge.errors import MemjudgeError, UsageError
from memjudge.judges import Judge, JudgeConfig
from memjudge.judges.panel import OVERRIDABLE
from memjudge.judges.rubrics import Rubric, load_rubric
from memjudge.scoring.answers import AnswerCheck, Lightener, rereader
from memjudge.scoring.cache import AnswerCache
from memjudge.scoring.cost import cache_saving_usd, estimate_tokens, estimated_cache_usage, job_cost_usd, price_usd
from memjudge.scoring.online import OnlineRunner, RunStopped, Tally
from memjudge.scoring.outputs import EXTRA_LABEL_COLUMNS, REPLICATE_OF, make_rows, write_outputs
from memjudge.scoring.plan import default_out_dir, plan_calls, read_input, resolve_judge
from memjudge.scoring.ratelimit import RateLimiter
from memjudge.scoring.store import JOURNAL, AnswerStore, load_journal, reuse_answers

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
    followups: int = 0  # coverage: calls asked again for only the facts an answer left out
    facts_unanswered: int = 0  # coverage: fact rows left null (no valid answer for that fact)
    cache_saving_usd: float | None = None  # what the provider's prompt cache saved (judges with cache prices)
    estimated_cache_tokens: dict[str, int] | None = None  # dry run: cache writes and reads expected (marked prefixes)
    estimated_cache_saving_usd: float | None = None  # dry run: what the prompt cache is expected to save
    # --private: entities replaced by type, placeholders the judge invented, detection time (no original text)
    privacy: dict[str, Any] | None = None

    # summary.json is this dataclass, every field written: its JSON Schema (memjudge.formats.schemas)
    # is generated from it, with no other key allowed and every field required.
    __pydantic_config__ = ConfigDict(extra="forbid", json_schema_serialization_defaults_required=True)

    def as_dict(self) -> dict[str, Any]:
        return io.json_safe(dataclasses.asdict(self))


@dataclass
class ScoreResult:
    labels: pd.DataFrame | None  # support rubric
    coverage: pd.DataFrame | None  # coverage rubric
    summary: ScoreSummary
    out_dir: Path | None = None


class AllCallsFailed(MemjudgeError):
    """Every call of the run failed; the rows (all null, with errors) are written. `result`
    is the ScoreResult."""

    def __init__(self, message: str, result: Any = None):
        super().__init__(message)
        self.result = result




@dataclass(frozen=True)
class RunSettings:
    """How one job runs (score_run's keywords, checked): where its files go, what it reuses,
    whether it calls at all, online or batch."""

    replicates: int = 1
    out: str | os.PathLike | None = None  # None: default_out_dir(judge, rubric)
    cache_dir: str | os.PathLike | None = None
    use_cache: bool = True
    dry_run: bool = False
    progress: bool = True
    parquet: bool = False
    write: bool = True
    judges_file: str | os.PathLike | None = None
    argv: dict[str, Any] | None = None  # config.json's `command`: the CLI's settings by option name
    echo: Any = None  # echo(line): the dry run's listing of the first call
    batch: Any = None  # BatchSettings, or None for online calls
    inputs: dict[str, str | None] = dataclasses.field(default_factory=dict)  # how each input is named in config.json
    read_as: dict[str, dict] = dataclasses.field(default_factory=dict)  # and how it was read (mapping, derived ids, transcript)


def run_files(out_dir: Path) -> list[Path]:
    """Files of a run folder that memjudge opens itself (to append, write or read back as its
    own); the outputs proper are replaced by a rename, which never follows a link."""
    from memjudge.scoring.batch.state import LOCK_FILE, STATE_FILE

    opened = [JOURNAL, STATE_FILE, LOCK_FILE]
    replaced = [JOURNAL, STATE_FILE, "labels.jsonl", "coverage.jsonl", "labels.parquet", "coverage.parquet", "config.json", "summary.json"]
    return [out_dir / n for n in opened] + [out_dir / f"{n}.tmp" for n in replaced]


# ---------------------------------------------------------------------------------------
# the public API


@dataclass(frozen=True)
class RunOptions:
    """How one scoring run keeps its files and what it reuses (`score_run(..., run=...)`);
    what the judge is and how it is called is its `JudgeConfig`."""

    use_cache: bool = True
    """Read and write the answer cache (False: ask everything again; the run's journal still resumes)."""
    parquet: bool = False
    """Also write labels.parquet / coverage.parquet beside the JSONL."""
    write: bool = True
    """Write the run folder (journal, labels, config.json, summary.json); False: results in memory only."""
    argv: dict[str, Any] | None = None
    """The command's arguments, recorded in config.json (the CLI's; None from Python)."""
    echo: Callable[[str], None] | None = None
    """Receives the dry run's listing of the first call."""
    batch: bool = False
    """Send the calls through the provider's batch API (memjudge.scoring.batch), at batch prices."""
    batch_fallback: str = "resubmit"
    """Lines a batch fails: "resubmit" them in a new job, or ask them "online"."""
    batch_options: dict[str, Any] | None = None
    """Batch limits and polling (`BatchSettings`: max_requests, poll_s, ...)."""


# score_run's keywords before RunOptions and judge_config (0.2.0); they work for one release.
_RUN_KEYWORDS = tuple(f.name for f in dataclasses.fields(RunOptions))
_JUDGE_KEYWORDS = OVERRIDABLE + ("judges_file",)


def _former_keywords(former: dict[str, Any], run: RunOptions | None) -> tuple[RunOptions, dict[str, Any]]:
    """score_run's former keywords sorted into RunOptions and judge settings, with a
    DeprecationWarning that says where each now goes; any other keyword is a TypeError."""
    unknown = sorted(set(former) - set(_RUN_KEYWORDS) - set(_JUDGE_KEYWORDS))
    if unknown:
        raise TypeError(f"score_run() got an unexpected keyword argument {unknown[0]!r}")
    run = run or RunOptions()
    run_kw = {k: v for k, v in former.items() if k in _RUN_KEYWORDS}
    judge_kw = {k: v for k, v in former.items() if k in _JUDGE_KEYWORDS}
    if run_kw:
        warnings.warn(f"score_run({', '.join(f'{k}=' for k in run_kw)}) is deprecated: pass run=RunOptions("
                      f"{', '.join(f'{k}=...' for k in run_kw)})", DeprecationWarning, stacklevel=3)
        run = dataclasses.replace(run, **run_kw)
    if judge_kw:
        warnings.warn(f"score_run({', '.join(f'{k}=' for k in judge_kw)}) is deprecated: pass the judge as "
                      f"memjudge.judge_config(spec, {', '.join(f'{k}=...' for k in judge_kw)}) (a JudgeConfig)",
                      DeprecationWarning, stacklevel=3)
    return run, judge_kw


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
    progress: bool = True,
    limit: int | None = None,
    dry_run: bool = False,
    run: RunOptions | None = None,
    **former: Any,
) -> ScoreResult:
    """Score `candidates` against `sources` with one judge and one rubric.

    `candidates`, `sources`, `facts` are paths (JSONL/CSV/Parquet) or DataFrames; `judge` is a
    spec ("openai:gpt-4o-mini"), a JudgeConfig (every judge setting: `memjudge.judge_config`
    fills one from a judges file and overrides, as the CLI does) or a Judge. Outputs go to
    `out` (default runs/<judge>-<rubric>); `run` says how the run keeps its files (RunOptions:
    cache use, Parquet, writing at all, batch). `dry_run` validates everything and estimates
    calls, tokens and cost without calling. `limit=N` scores only the first N personas of the
    candidates (in file order): a quick look before paying for the whole run; the rerun
    without it reuses those answers. The keywords of memjudge 0.2.0 (base_url, concurrency,
    ..., judges_file, use_cache, batch, ...) still work, with a DeprecationWarning.
    """
    run, judge_kw = _former_keywords(former, run)
    t_start = time.perf_counter()
    if not isinstance(replicates, int) or isinstance(replicates, bool) or replicates < 1:
        raise UsageError(f"replicates must be an integer >= 1, got {replicates!r}")
    rub = load_rubric(rubric)
    batch_settings = None
    if run.batch:
        from memjudge.judges.base_batch import check_batch_judge
        from memjudge.scoring.batch.state import BatchSettings

        check_batch_judge(judge)
        if not run.write:
            raise UsageError("batch scoring keeps its job state in the run directory; it needs RunOptions(write=True)")
        batch_settings = BatchSettings.make(fallback=run.batch_fallback, **(run.batch_options or {}))
    if facts is not None and rub.kind != "coverage":
        raise UsageError(f"--facts is for the coverage rubric, not {rub.name!r}")

    with gcpause.paused():
        cands, srcs, fact_df, cand_label, src_label, read_as = _read_inputs(candidates, sources, facts, limit)

    the_judge, owned = resolve_judge(judge, **judge_kw)
    settings = RunSettings(
        replicates=replicates, out=out, cache_dir=cache_dir, use_cache=run.use_cache, dry_run=dry_run, progress=progress,
        parquet=run.parquet, write=run.write, argv=run.argv, echo=run.echo,
        # a former judges_file= beside a Judge is recorded as it was (a JudgeConfig says what it read)
        judges_file=the_judge.config.judges_file or judge_kw.get("judges_file"),
        batch=batch_settings,
        read_as=read_as, inputs={"candidates": cand_label, "sources": src_label, "facts": str(facts) if isinstance(facts, (str, os.PathLike)) else (None if facts is None else "<facts DataFrame>")},
    )
    closer = _Closer(the_judge if owned else None)
    try:
        with gcpause.paused():  # resumed around the requests (_score)
            return _score(the_judge, rub, cands, srcs, fact_df, settings, closer, t_start)
    finally:
        if closer.judge is not None:
            run_sync(closer.close())


def _read_inputs(candidates, sources, facts, limit: int | None):
    """(candidates, sources, facts or None, how candidates and sources are named, how each
    input was read), checked: every candidate's persona has a source."""
    cands, cand_label = read_input(candidates, io.read_candidates, "candidates", keep_line=True)
    srcs, src_label = read_input(sources, io.read_sources, "sources")
    read_as = {"candidates": io.describe_input(candidates, cands), "sources": io.describe_input(sources, srcs)}
    io.check_sources_cover(cands, srcs, cand_label, src_label)
    cands = cands.drop(columns=[io.LINE])
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"limit must be an integer >= 1, got {limit!r}")
        first = list(dict.fromkeys(cands["persona_id"]))[:limit]
        cands = cands[cands["persona_id"].isin(first)].reset_index(drop=True)
    fact_df = None
    if facts is not None:
        fact_df, _ = read_input(facts, io.read_facts, "facts")
        read_as["facts"] = io.describe_input(facts, fact_df)
    return cands, srcs, fact_df, cand_label, src_label, read_as


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


def _dry_run(judge: Judge, rub: Rubric, plan, pending, s: RunSettings, out_dir: Path, cache, t_start: float) -> ScoreResult:
    """Calls, tokens and cost of what is still to ask, and the first call's prompt; nothing is called."""
    tasks = plan.tasks
    est_in = sum(estimate_tokens(t.call.prompt.system + "\n" + t.call.prompt.user) for t in pending)
    est_out = len(pending) * rub.expected_output_tokens
    est_cache = estimated_cache_usage(judge, [t.call for t in sorted(pending, key=lambda t: judge.order_key(t.call))])
    est_usage = {"input_tokens": est_in, "output_tokens": est_out, **est_cache}
    est_cost = price_usd(judge.config, est_usage, len(pending))
    est_saving = cache_saving_usd(judge.config, est_usage)
    if s.batch is not None and est_cost is not None:
        est_cost *= judge.config.batch_discount
        est_saving = None if est_saving is None else est_saving * judge.config.batch_discount
    rows = len(plan.slots) if rub.kind == "support" else sum(len(slot[3] or [None]) for slot in plan.slots)
    summary = ScoreSummary(
        judge=judge.spec, rubric=rub.id, simulated=bool(judge.simulated), rows=rows,
        calls=len(tasks), requested=0, requests=0, reasks=0, retries=0,
        cached=sum(t.origin == "cache" for t in tasks.values()), resumed=sum(t.origin == "journal" for t in tasks.values()),
        errors=0, verdicts={}, tokens={}, cost_usd=None, seconds=round(time.perf_counter() - t_start, 3), dry_run=True,
        estimated_input_tokens=est_in, estimated_output_tokens=est_out, estimated_cost_usd=est_cost,
        out_dir=str(out_dir), cache_dir=str(cache.directory) if cache is not None else None,
        batch={"discount": judge.config.batch_discount} if s.batch is not None else None,
        estimated_cache_tokens=est_cache if any(est_cache.values()) else None, estimated_cache_saving_usd=est_saving,
    )
    if s.echo is not None and pending:
        first = sorted(pending, key=lambda t: judge.order_key(t.call))[0].call
        s.echo(f"first call ({first.item}):\n--- system ---\n{first.prompt.system}\n--- user ---\n{first.prompt.user}\n---")
    return ScoreResult(labels=None, coverage=None, summary=summary, out_dir=out_dir)


def _score(judge: Judge, rub: Rubric, cands: pd.DataFrame, srcs: pd.DataFrame, fact_df, s: RunSettings, closer: _Closer,
           t_start: float) -> ScoreResult:
    extras_cols = [c for c in cands.columns if c not in io.CANDIDATE_COLUMNS]
    reserved = set(io.LABEL_COLUMNS) | set(EXTRA_LABEL_COLUMNS) | {REPLICATE_OF}
    out_dir = Path(s.out) if s.out is not None else default_out_dir(judge.spec, rub.name)
    if s.write:
        # Before any paid request: a folder that cannot be made, or a planted link that would
        # make us write wherever it points.
        io.check_dir(out_dir)
        io.refuse_links(run_files(out_dir))
    guard = _private_inputs(judge, cands, srcs, fact_df, out_dir if s.write and not s.dry_run else None)
    if guard is not None and guard.protection is not None:
        cands, srcs, fact_df = guard.protection.candidates, guard.protection.sources, guard.protection.facts
    plan = plan_calls(judge, rub, cands, srcs, fact_df, s.replicates,
                      {c: (f"candidate_{c}" if c in reserved else c) for c in extras_cols})
    if guard is not None:
        guard.restore_plan(plan)
    tasks = plan.tasks
    cache = AnswerCache(s.cache_dir) if s.use_cache else None
    try:
        # Reuse: this run directory's journal first, then the cache.
        journal, journal_lines = load_journal(out_dir / JOURNAL) if s.write else ({}, 0)
        former_hits = reuse_answers(tasks, journal, cache, sync_cache=not s.dry_run, former_keys=plan.former_keys,
                                    reread=rereader(judge))
        pending = plan.pending

        if s.dry_run:
            return _dry_run(judge, rub, plan, pending, s, out_dir, cache, t_start)

        if pending or s.batch is not None:
            judge.check_ready()
        check = AnswerCheck(rub, plan.coverage_ctx)
        store = AnswerStore(cache, out_dir / JOURNAL if s.write else None, write_through=judge.costly)
        tally = Tally(judge)
        online = OnlineRunner(judge, check, store, tally, RateLimiter(judge.config.rpm, judge.config.tpm), s.progress)
        # A support run knows now whether the journal will be rewritten from the answers held
        # (`compact` below: its counts do not change while support calls are asked); when it
        # will not, each answer is held as what its rows read (Lightener) once the journal
        # and the cache have it. Online only: the batch runner keeps its records.
        if rub.kind == "support" and s.batch is None and not (s.write and _rewrites_journal(tasks, journal_lines, former_hits)):
            online.lighten = Lightener(keep_calls=plan.derived_replicates)
            journal = {}  # its answers are the reused tasks' records, lightened here
            for t in tasks.values():
                online.lighten(t)
        if s.write:
            store.open()
        batch_report = None
        stopped: RunStopped | None = None
        try:
            with gcpause.resumed():
                if s.batch is not None:
                    from memjudge.scoring.batch.runner import run_batch

                    # Also without pending calls: jobs of an earlier run may still be open.
                    batch_report = run_sync(closer.after(store.finishing(run_batch(
                        judge, pending, out_dir, s.batch, check=check, store=store, tally=tally, online=online, progress=s.progress))))
                elif pending:
                    run_sync(closer.after(store.finishing(online.run(pending, progress_total=len(tasks), progress_done=len(tasks) - len(pending)))))
        except RunStopped as e:  # the rows are still written (below), then the error stands
            stopped = e
            for t in pending:
                if t.record is None and t.error is None:
                    t.error = f"not asked: {e}"
        finally:
            store.close()

        labels, coverage, rows = make_rows(plan, judge, rub)
        if labels is not None:
            verdicts = labels["verdict"].fillna("null").value_counts().to_dict()
            nrows = len(labels)
        else:
            assert coverage is not None  # make_rows leaves out only the frame of the other kind
            verdicts = {}
            nrows = len(coverage)
        summary = ScoreSummary(
            judge=judge.spec, rubric=rub.id, simulated=bool(judge.simulated), rows=nrows, calls=len(tasks),
            requested=len(pending), requests=tally.requests, reasks=tally.reasks, retries=tally.retries,
            cached=sum(t.origin == "cache" for t in tasks.values()), resumed=sum(t.origin == "journal" for t in tasks.values()),
            errors=sum(t.record is None for t in tasks.values()), verdicts={str(k): int(v) for k, v in verdicts.items()},
            tokens=dict(tally.tokens), cost_usd=job_cost_usd(judge.config, tally.tokens, tally.batch_tokens, tally.requests, tally.batch_requests), seconds=0.0,
            out_dir=str(out_dir) if s.write else None, cache_dir=str(cache.directory) if cache is not None else None, batch=batch_report,
            judge_settings=judge.effective() or None, followups=tally.followups,
            facts_unanswered=int(coverage["covered_by"].isna().sum()) if coverage is not None else 0,
            cache_saving_usd=cache_saving_usd(judge.config, tally.tokens, tally.batch_tokens),
            privacy=guard.summary() if guard is not None else None,
        )
        if s.write:
            # New answers were appended as they came; rewrite only when the journal holds
            # lines this job did not use (damaged, other settings) or lacks cache hits.
            compact = _rewrites_journal(tasks, journal_lines, former_hits)
            if compact and online.lighten is not None:
                raise AssertionError("the journal's rewrite needs records a lightened run did not keep")
            kept = None
            if compact:
                kept = {k: t.record for k, t in tasks.items() if t.record is not None}
                if cache is None:  # the journal is then the only copy of other jobs' answers
                    kept = {**{k: v for k, v in journal.items() if k not in tasks}, **kept}
            write_outputs(out_dir, judge, rub, labels, coverage, rows, kept, parquet=s.parquet, inputs=s.inputs, read_as=s.read_as,
                          replicates=s.replicates, replicates_derived=plan.derived_replicates, judges_file=s.judges_file, argv=s.argv,
                          cache_dir=cache.directory if cache is not None else None, use_cache=s.use_cache,
                          privacy=guard.describe() if guard is not None else None)
        summary.seconds = round(time.perf_counter() - t_start, 3)
        if s.write:
            io.write_json(out_dir / "summary.json", summary.as_dict())
        result = ScoreResult(labels=labels, coverage=coverage, summary=summary, out_dir=out_dir if s.write else None)
        if stopped is not None:
            raise stopped
        if s.batch is None and pending and not online.answered and summary.errors == summary.calls:
            first = next((t.error for t in pending if t.error), "no valid answer")
            where = f"; wrote {out_dir / ('labels.jsonl' if labels is not None else 'coverage.jsonl')} with null verdicts" if s.write else ""
            raise AllCallsFailed(f"judge {judge.spec}: every call failed ({first}){where}", result)
        return result
    finally:
        if cache is not None:
            cache.close()


class _PrivateRun:
    """--private in one run (spec §16): the inputs pseudonymised before the plan is made (so the
    prompts and their cache keys are), and the plan told how to map answers back."""

    def __init__(self, judge: Judge, protection):
        self.judge, self.protection = judge, protection
        self.sources: dict[str, str] = {}
        self.facts: dict[tuple[str, str], str] = {}

    def restore_plan(self, plan) -> None:
        p = self.protection
        if p is None:
            return
        plan.restore = p.restorer
        plan.source_of = self.sources  # the evidence check reads the user's own source
        if self.facts:  # coverage rows show the reference facts as the user wrote them
            plan.slots = [(k, pid, r, [{**f, "text": self.facts.get((pid, f["id"]), f["text"])} for f in facts] if facts else facts)
                          for k, pid, r, facts in plan.slots]

    def describe(self) -> dict[str, Any]:
        """config.json's `privacy`: what ran and what was replaced (never an original)."""
        if self.protection is None:
            return {"applied": False, "why": f"{self.judge.spec} sends nothing over a network: its prompts stay on this machine"}
        return self.protection.describe()

    def summary(self) -> dict[str, Any]:
        if self.protection is None:
            return {"applied": False}
        p = self.protection
        return {"applied": True, "style": p.restorer.map.style, "entities_replaced": p.stats["entities_replaced"],
                "texts_detected": p.stats["texts_detected"], "detection_seconds": p.stats["detection_seconds"],
                **p.restorer.counts()}


def _private_inputs(judge: Judge, cands: pd.DataFrame, srcs: pd.DataFrame, fact_df, run_dir: Path | None) -> _PrivateRun | None:
    """None without --private; else the run's privacy, its inputs pseudonymised when the judge
    sends text over a network (a map file that is not the run's, or a missing extra, is an error
    before any request)."""
    if not judge.config.private:
        return None
    if not judge.sends_text:
        return _PrivateRun(judge, None)
    from memjudge.privacy import PrivacySettings, protect

    guard = _PrivateRun(judge, protect(cands, srcs, fact_df, PrivacySettings.of(judge.config), run_dir))
    guard.sources = dict(zip(srcs["persona_id"], srcs["source"]))
    if fact_df is not None:
        guard.facts = {(pid, fid): t for pid, fid, t in zip(fact_df["persona_id"], fact_df["fact_id"], fact_df["text"])}
    return guard


def _rewrites_journal(tasks: dict, journal_lines: int, former_hits: int) -> bool:
    """Is the journal rewritten at the end of the run (from the records held)? When the cache
    answered some calls, the journal holds lines this job did not use (damaged, other
    settings), or answers were found under a former key only."""
    cached = sum(t.origin == "cache" for t in tasks.values())
    resumed = sum(t.origin == "journal" for t in tasks.values())
    return cached > 0 or journal_lines != resumed or former_hits > 0


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
    rows of the run's labels.jsonl / coverage.jsonl. `options` are score_run's other keywords
    (limit, run=RunOptions(...)); the judge's settings are its JudgeConfig."""
    if options.get("dry_run"):
        raise UsageError("score(dry_run=True) has no labels; use score_run(..., dry_run=True) for the estimate")
    result = score_run(candidates, sources, judge, rubric=rubric, facts=facts, replicates=replicates, out=out,
                       cache_dir=cache_dir, progress=progress, **options)
    frame = result.labels if result.labels is not None else result.coverage
    assert frame is not None  # only a dry run has neither, refused above
    return frame


__all__ = ["AllCallsFailed", "RunOptions", "RunSettings", "ScoreResult", "ScoreSummary", "run_files", "score", "score_run"]
