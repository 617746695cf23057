"""Scoring through the providers' batch APIs (`memjudge score --batch`): the durable job
state (state.py) and the protocol that submits, polls and reads results (runner.py)."""

from memjudge.judges.base_batch import check_batch_judge
from memjudge.scoring.batch.runner import batch_cancel, batch_status, run_batch
from memjudge.scoring.batch.state import LOCK_FILE, STATE_FILE, BatchSettings, BatchState, RunLock

__all__ = ["LOCK_FILE", "STATE_FILE", "BatchSettings", "BatchState", "RunLock", "batch_cancel", "batch_status",
           "check_batch_judge", "run_batch"]
