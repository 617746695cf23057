"""The one retry policy of memjudge (spec §5). Providers never retry; the SDKs' own retries
are off; every request to a judge goes through `call_with_retry`.

Which errors are transient and how long the server asked us to wait are the provider's
knowledge (`Judge.is_retryable`, `Judge.retry_after`); when to give up and how to back off
is this module's.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import NoReturn, TypeVar, cast

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from memjudge.judges.base import Judge

T = TypeVar("T")


@dataclass(frozen=True)
class RetryEvent:
    """One failed attempt that is about to be retried."""

    judge: str  # the judge's spec
    attempt: int  # 1-based number of the attempt that failed
    error: BaseException
    wait_s: float  # how long we sleep before the next attempt
    server_delay_s: float | None  # what the server asked for, if it said


RetryObserver = Callable[[RetryEvent], None]


class RetryDelayTooLong(Exception):
    """The server asked for a longer wait than `retry_after_max_s`: retrying any earlier would
    only be refused again, and waiting that long is not what the user asked for."""


def backoff_s(judge: Judge, attempt: int, server_delay_s: float | None = None) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based).

    The server's own delay wins when it gives one, plus up to 10% jitter so a burst of
    concurrent requests told "retry in 30s" does not return as one burst. It is never cut to
    `retry_max_s` (an early retry is refused again); `call_with_retry` gives up instead when
    it is over `retry_after_max_s`. Otherwise jittered exponential backoff from
    `retry_initial_s`, capped at `retry_max_s`.
    """
    cfg = judge.config
    if server_delay_s is not None:
        return max(0.0, server_delay_s) * (1.0 + 0.1 * random.random())
    base = cfg.retry_initial_s * 2.0 ** (attempt - 1)
    # Jitter in [base, 2*base): never shorter than the schedule, decorrelated across calls.
    return min(base * (1.0 + random.random()), cfg.retry_max_s)


async def call_with_retry(
    judge: Judge,
    attempt: Callable[[], Awaitable[T]],
    *,
    on_retry: RetryObserver | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """Await `attempt()` until it succeeds, a non-retryable error occurs, or
    `judge.config.max_attempts` attempts have failed; then re-raise the last error as is.
    When the server asks for a wait over `retry_after_max_s`, raise `RetryDelayTooLong`
    (from that error) at once.

    `on_retry` is called (synchronously, before sleeping) for every retry, so callers can
    count retries or show them in progress. `sleep` is injectable for tests.
    """
    # The first attempt runs directly: most succeed, and tenacity's machinery costs more than
    # a simulated judge's answer. A failure enters tenacity as its attempt 1 (re-raised there),
    # so what follows (retry or not, waits, observer, giving up) is as if tenacity had run it.
    try:
        return await attempt()
    except BaseException as e:  # noqa: BLE001 - handed to tenacity as it would have caught it
        first: list[BaseException] = [e]

    # retry_after(exc) is asked once per failure; the wait callback and the observer share it.
    server_delay: dict[int, float | None] = {}

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        delay = judge.retry_after(exc) if exc is not None else None
        server_delay[state.attempt_number] = delay
        return backoff_s(judge, state.attempt_number, delay)

    # tenacity retries (before_sleep), or gives up (give_up), only after an attempt that raised:
    # `retry` is retry_if_exception, false for an attempt that returned.
    def before_sleep(state: RetryCallState) -> None:
        if on_retry is None or state.outcome is None:
            return
        error = state.outcome.exception()
        assert error is not None
        on_retry(
            RetryEvent(
                judge=judge.spec,
                attempt=state.attempt_number,
                error=error,
                wait_s=state.upcoming_sleep,
                server_delay_s=server_delay.get(state.attempt_number),
            )
        )

    cfg = judge.config

    def too_long(state: RetryCallState) -> bool:
        delay = server_delay.get(state.attempt_number)
        return delay is not None and delay > cfg.retry_after_max_s

    def give_up(state: RetryCallState) -> NoReturn:  # tenacity asks `wait` before `stop`: the delay is known
        assert state.outcome is not None
        exc = state.outcome.exception()
        assert exc is not None
        if too_long(state) and state.attempt_number < cfg.max_attempts:
            raise RetryDelayTooLong(
                f"the server asked to wait {server_delay[state.attempt_number]:g} s before retrying, more than "
                f"retry_after_max_s = {cfg.retry_after_max_s:g} s: not retried ({type(exc).__name__})"
            ) from exc
        raise exc

    retrying = AsyncRetrying(
        retry=retry_if_exception(judge.is_retryable),
        # stop_any calls each stop with the state, a plain function too (tenacity's StopBaseT
        # admits one), but `|` is annotated for stop_base alone.
        stop=stop_after_attempt(cfg.max_attempts) | cast(stop_base, too_long),
        wait=wait,
        before_sleep=before_sleep,
        sleep=sleep,
        retry_error_callback=give_up,
    )

    # tenacity awaits only coroutine *functions*; `lambda: judge.generate(call)` is a plain
    # function returning a coroutine, which it would hand back unawaited.
    async def once() -> T:
        if first:
            raise first.pop()
        return await attempt()

    return await retrying(once)


__all__ = ["RetryDelayTooLong", "RetryEvent", "RetryObserver", "backoff_s", "call_with_retry"]
