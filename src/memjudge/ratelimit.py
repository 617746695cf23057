"""Requests- and tokens-per-minute limits for one judge (spec §5).

Requests are spaced evenly (60/rpm seconds apart) rather than released in a burst at the
start of each minute, so a provider's sliding window never sees more than it allows.
Tokens use a bucket holding one minute's budget, refilled continuously; a request larger
than the whole budget waits for a full bucket instead of waiting forever.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


class RateLimiter:
    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        if rpm is not None and rpm <= 0 or tpm is not None and tpm <= 0:
            raise ValueError("rpm and tpm must be positive")
        self.rpm, self.tpm = rpm, tpm
        self._clock, self._sleep = clock, sleep
        self._next_request = clock()
        self._tokens = float(tpm or 0)
        self._refilled = clock()
        self._lock = asyncio.Lock()

    @property
    def active(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    def _refill(self, now: float) -> None:
        if self.tpm is not None:
            self._tokens = min(self.tpm, self._tokens + (now - self._refilled) * self.tpm / 60.0)
        self._refilled = now

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about `tokens` tokens may start."""
        if not self.active:
            return
        # One waiter at a time keeps the order fair (first come, first served).
        async with self._lock:
            now = self._clock()
            wait = 0.0
            if self.rpm is not None:
                wait = max(wait, self._next_request - now)
            if self.tpm is not None:
                self._refill(now)
                need = min(float(tokens), float(self.tpm))
                if self._tokens < need:
                    wait = max(wait, (need - self._tokens) * 60.0 / self.tpm)
            if wait > 0:
                await self._sleep(wait)
                now = self._clock()
            if self.rpm is not None:
                self._next_request = max(now, self._next_request) + 60.0 / self.rpm
            if self.tpm is not None:
                self._refill(now)
                self._tokens -= min(float(tokens), float(self.tpm))


__all__ = ["RateLimiter"]
