"""Scoring through the providers' batch APIs (`memjudge score --batch`): the durable job
state (state.py) and the protocol that submits, polls and reads results (runner.py).

The names below load on first use: the submodules import this package, never the reverse.
"""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memjudge.scoring.batch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
