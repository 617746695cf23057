"""Scoring through the providers' batch APIs (`memjudge score --batch`): the durable job
state (state.py) and the protocol that submits, polls and reads results (runner.py).

The names below load on first use: the submodules import this package, never the reverse.
"""

from __future__ import annotations

from memjudge._util.lazy import exports

_LAZY = {
    "LOCK_FILE": "memjudge.scoring.batch.state",
    "STATE_FILE": "memjudge.scoring.batch.state",
    "BatchSettings": "memjudge.scoring.batch.state",
    "BatchState": "memjudge.scoring.batch.state",
    "RunLock": "memjudge.scoring.batch.state",
    "batch_cancel": "memjudge.scoring.batch.runner",
    "batch_status": "memjudge.scoring.batch.runner",
    "run_batch": "memjudge.scoring.batch.runner",
    "check_batch_judge": "memjudge.judges.base_batch",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = exports(__name__, _LAZY, globals())
