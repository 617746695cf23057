"""Requests- and tokens-per-minute limits for one judge (spec §5).

Guarantee: no window of `window_s` seconds (a minute) holds more than `rpm` request starts,
or requests of more than `tpm` estimated tokens, plus at most one request. The engine asks
the limiter before every attempt it sends — retries after a 429 and re-asks included.

Both limits are spacings, not buckets: a request may start `window_s / rpm` seconds after
the previous one, and a request of k tokens delays the next by `k * window_s / tpm` seconds.
A bucket that starts full (or refills while idle) lets a whole minute's budget out at once
and then the refill on top of it: nearly twice the limit in the first minute. Spacing keeps
a provider's sliding window under its limit from the first request on. A request larger than
the whole budget is not refused: it goes out, and the next one waits for it to be paid back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

# The providers' limits are per minute. A parameter so tests can check the guarantee on
# windows of a second or two instead of minutes.
WINDOW_S = 60.0


class RateLimiter:
    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        window_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        if rpm is not None and rpm <= 0 or tpm is not None and tpm <= 0:
            raise ValueError("rpm and tpm must be positive")
        self.rpm, self.tpm = rpm, tpm
        self.window_s = float(WINDOW_S if window_s is None else window_s)
        if not self.window_s > 0:
            raise ValueError("window_s must be positive")
        self._clock, self._sleep = clock, sleep
        self._next_request = clock()  # earliest start allowed by rpm
        self._next_tokens = clock()  # earliest start allowed by tpm (tokens spent so far paid back)
        self._lock = asyncio.Lock()

    @property
    def active(self) -> bool:
        return self.rpm is not None or self.tpm is not None

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about `tokens` tokens may start."""
        if not self.active:
            return
        # One waiter at a time keeps the order fair (first come, first served).
        async with self._lock:
            now = self._clock()
            start = now
            if self.rpm is not None:
                start = max(start, self._next_request)
            if self.tpm is not None:
                start = max(start, self._next_tokens)
            if start > now:
                await self._sleep(start - now)
                now = self._clock()
            # Spacing from the actual start (a late wake-up never lets the next one in early).
            start = max(now, start)
            if self.rpm is not None:
                self._next_request = start + self.window_s / self.rpm
            if self.tpm is not None:
                self._next_tokens = start + max(0.0, float(tokens)) * self.window_s / self.tpm


__all__ = ["RateLimiter", "WINDOW_S"]
