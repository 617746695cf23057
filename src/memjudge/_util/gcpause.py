"""Automatic garbage collection paused while a run builds and writes its thousands of rows.

A cached rerun allocates a few million small objects (every prompt, key, answer record and
row) and frees almost none of them before it ends; CPython's collector, which counts
allocations, traverses them again and again meanwhile (a quarter of a rerun's time on 9,430
calls). None of them form reference cycles, so nothing waits for the collector but the
collector's own work: it is paused for those stretches and resumed around the requests
(network clients, retries and tracebacks do make cycles), and on the way out. The switch is
the interpreter's, shared by every thread: the pauses are kept to the stretches of pure
computation.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_held = 0  # nested paused() blocks that turned collection off


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Collection off inside the block, if it was on (a caller's own gc.disable() stands)."""
    global _held
    with _lock:
        mine = gc.isenabled() or _held > 0
        if mine:
            _held += 1
            gc.disable()
    try:
        yield
    finally:
        if mine:
            with _lock:
                _held -= 1
                if _held == 0:
                    gc.enable()


@contextlib.contextmanager
def resumed() -> Iterator[None]:
    """Collection on inside the block if `paused` turned it off (the requests of a run).

    What was made while paused (every task, prompt and key of the run: millions of objects)
    is frozen meanwhile: it all sat in the youngest generation, and the block's first
    collections would walk all of it, then the full ones again and again, to find cycles it
    does not make (a tenth of a first run's CPU at 100,000 candidates). The collections of the
    block walk only what the block makes. Not when something else froze objects already:
    unfreezing ours would unfreeze theirs too."""
    with _lock:
        mine = _held > 0 and not gc.isenabled()
        froze = mine and gc.get_freeze_count() == 0
        if froze:
            gc.freeze()
        if mine:
            gc.enable()
    try:
        yield
    finally:
        if mine:
            with _lock:
                if _held > 0:
                    gc.disable()
                if froze:
                    gc.unfreeze()


__all__ = ["paused", "resumed"]
