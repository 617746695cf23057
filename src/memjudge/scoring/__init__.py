"""Scoring (spec §5): inputs to tasks, judge calls, validated answers, the journal and the cache.

    from memjudge.scoring import score, score_run
    result = score_run("candidates.jsonl", "sources.jsonl", "openai:gpt-4o-mini", replicates=2)

The modules, in the one direction their imports run:

    engine      score(), score_run(): one job from its judge (a JudgeConfig) and RunOptions
    online      the worker pool: rate limits, retries, failure streak, progress line
    batch/      the providers' batch APIs: durable job state (state), the protocol (runner)
    answers     validate an answer, re-ask, the valid-answer record
    store       the run's journal, then the write-behind cache
    plan        inputs (files or DataFrames) and the judge → the run's tasks
    outputs     rows and the run folder's files;  cost: prices and token estimates
    cache, retry, ratelimit, jsonl   one concern each

The names below are loaded on first use, so importing a leaf module (`scoring.cache`,
`scoring.retry`) does not load the engine and pandas.
"""

from __future__ import annotations

from memjudge._util.lazy import exports

_LAZY = {
    "score": "memjudge.scoring.engine",
    "score_run": "memjudge.scoring.engine",
    "ScoreResult": "memjudge.scoring.engine",
    "ScoreSummary": "memjudge.scoring.engine",
    "RunOptions": "memjudge.scoring.engine",
    "batch_status": "memjudge.scoring.batch.runner",
    "batch_cancel": "memjudge.scoring.batch.runner",
}

__all__ = ["RunOptions", "ScoreResult", "ScoreSummary", "batch_cancel", "batch_status", "score", "score_run"]


__getattr__, __dir__ = exports(__name__, _LAZY, globals())
