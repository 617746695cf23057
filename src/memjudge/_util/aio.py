"""Run a coroutine from synchronous code, wherever that code runs.

The Python API is synchronous; a notebook (Jupyter) already runs an event loop in the
calling thread, where `asyncio.run` refuses to start a second one. There the coroutine runs
on a fresh loop in a helper thread, and its result or exception comes back to the caller.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run, also from inside a running loop (Jupyter): then in a helper thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as e:  # re-raised in the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name="memjudge-score")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


__all__ = ["run_sync"]
