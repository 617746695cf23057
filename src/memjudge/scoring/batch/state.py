"""The durable side of batch scoring: its settings, `RUN_DIR/batches.json` (every job with
its label, provider id, keys, status and outcomes) and the lock that lets one process at a
time run a folder's batch jobs. See runner.py for the protocol."""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from memjudge._util.files import write_atomic
from memjudge.errors import InputError, UsageError
from memjudge.formats import open_private
from memjudge.judges import Judge

STATE_FILE = "batches.json"
LOCK_FILE = "batches.lock"
STATE_VERSION = 1

ENV_POLL = "MEMJUDGE_BATCH_POLL_S"
ENV_POLL_MAX = "MEMJUDGE_BATCH_POLL_MAX_S"
ENV_MAX_REQUESTS = "MEMJUDGE_BATCH_MAX_REQUESTS"
ENV_MAX_BYTES = "MEMJUDGE_BATCH_MAX_BYTES"
ENV_GEMINI_INPUT = "MEMJUDGE_BATCH_GEMINI_INPUT"


@dataclass(frozen=True)
class BatchSettings:
    """How batch scoring behaves. Limits default to the provider's; polling starts every
    `poll_s` seconds and backs off (x1.5) to `poll_max_s` while nothing changes."""

    fallback: str = "resubmit"  # failed lines: "resubmit" in a new job, or "online"
    max_requests: int | None = None
    max_bytes: int | None = None
    max_resubmits: int = 2
    poll_s: float = 10.0
    poll_max_s: float = 300.0
    gemini_input: str = "auto"  # "inline", "file", or "auto": inline up to 20 MB a job, else a file

    @classmethod
    def make(cls, fallback: str = "resubmit", **kw) -> BatchSettings:
        """Settings from keyword arguments, else the MEMJUDGE_BATCH_* environment, else defaults."""
        unknown = set(kw) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise UsageError(f"unknown batch option(s): {', '.join(sorted(unknown))}")
        env = {"poll_s": (ENV_POLL, float), "poll_max_s": (ENV_POLL_MAX, float),
               "max_requests": (ENV_MAX_REQUESTS, int), "max_bytes": (ENV_MAX_BYTES, int), "gemini_input": (ENV_GEMINI_INPUT, str)}
        for name, (var, kind) in env.items():
            if kw.get(name) is None and os.environ.get(var):
                try:
                    kw[name] = kind(os.environ[var])
                except ValueError:
                    raise UsageError(f"{var} must be a number, got {os.environ[var]!r}") from None
        kw = {k: v for k, v in kw.items() if v is not None}
        s = cls(fallback=fallback, **kw)
        if s.gemini_input not in ("auto", "inline", "file"):
            raise UsageError(f"batch gemini_input must be auto, inline or file, got {s.gemini_input!r}")
        if s.fallback not in ("resubmit", "online"):
            raise UsageError(f"batch fallback must be 'resubmit' or 'online', got {s.fallback!r}")
        for name in ("max_requests", "max_bytes"):
            v = getattr(s, name)
            if v is not None and v < 1:
                raise UsageError(f"batch {name} must be >= 1, got {v}")
        if s.max_resubmits < 0 or not s.poll_s > 0 or s.poll_max_s < s.poll_s:
            raise UsageError("batch settings: need max_resubmits >= 0 and 0 < poll_s <= poll_max_s")
        return s

    def limits(self, adapter) -> tuple[int, int]:
        """(requests, bytes) per job: the provider's limits, lowered by these settings."""
        n, size = adapter.max_requests, adapter.max_job_bytes(self.gemini_input)
        return (min(n, self.max_requests) if self.max_requests else n, min(size, self.max_bytes) if self.max_bytes else size)


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def job_label(judge: Judge, run_dir: Path, seq: int, keys: list[str]) -> str:
    """Unique to one job of one run directory, and recorded before the job is created."""
    h = hashlib.sha256(json.dumps([judge.spec, str(run_dir.resolve()), seq, sorted(keys)]).encode()).hexdigest()
    return f"memjudge-{h[:24]}"


class BatchState:
    """RUN_DIR/batches.json: the judge, and every job with its label, provider id, keys,
    status and (once its results are read) the outcome of each key that got no valid answer."""

    def __init__(self, path: Path, data: dict):
        self.path = path
        self.data = data

    @classmethod
    def load(cls, run_dir: Path) -> BatchState:
        path = Path(run_dir) / STATE_FILE
        if not path.is_file():
            return cls(path, {"version": STATE_VERSION, "judge": None, "invocations": 0, "jobs": []})
        try:
            with open_private(path, "r") as f:
                data = json.loads(f.read())
        except (OSError, ValueError) as e:
            raise InputError(str(path), f"cannot read the batch state: {e}") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION or not isinstance(data.get("jobs"), list):
            raise InputError(str(path), f"not a memjudge batch state (version {STATE_VERSION})")
        return cls(path, data)

    @classmethod
    def open_existing(cls, run_dir) -> BatchState:
        """The state of a run directory that has batch jobs (UsageError when it has none)."""
        path = Path(run_dir) / STATE_FILE
        if not path.is_file():
            raise UsageError(f"{run_dir}: no batch jobs here ({STATE_FILE} not found)")
        return cls.load(Path(run_dir))

    @property
    def jobs(self) -> list[dict]:
        return self.data["jobs"]

    def save(self) -> None:
        """Atomically, and on disk before we act on it (fsync), so a kill or a power cut
        leaves the previous or the new state, never half of one."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(self.path, json.dumps(self.data, separators=(",", ":")))


class RunLock:
    """One batch process per run directory (released by the OS if the process dies)."""

    def __init__(self, run_dir: Path):
        run_dir.mkdir(parents=True, exist_ok=True)
        self.f = open_private(run_dir / LOCK_FILE, "w")
        try:
            fcntl.flock(self.f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.f.close()
            raise UsageError(f"another memjudge process is running batch jobs of {run_dir}") from None

    def release(self) -> None:
        fcntl.flock(self.f, fcntl.LOCK_UN)
        self.f.close()


__all__ = ["BatchSettings", "BatchState", "LOCK_FILE", "RunLock", "STATE_FILE", "STATE_VERSION", "job_label", "now"]
