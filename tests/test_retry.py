"""The retry policy (retry.py) seen from outside: which errors are retried, how long it waits,
when it gives up. A stub judge and an injected sleep keep these exact and instant; the same
policy against the real SDKs and the fake server is tested in test_providers.py."""

from __future__ import annotations

import asyncio
import email.utils
import time

import pytest

from memjudge.judges.base import Judge, JudgeConfig, delay_from_headers, parse_duration
from memjudge.scoring.retry import RetryDelayTooLong, RetryEvent, backoff_s, call_with_retry


class Transient(Exception):
    def __init__(self, delay: float | None = None):
        super().__init__(f"transient (delay {delay})")
        self.delay = delay


class Permanent(Exception):
    pass


class StubJudge(Judge):
    prefix = "stub"

    async def generate(self, call):  # pragma: no cover - the tests pass their own attempt
        raise NotImplementedError

    def is_retryable(self, exc):
        return isinstance(exc, Transient)

    def retry_after(self, exc):
        return exc.delay if isinstance(exc, Transient) else None


def judge(**cfg) -> StubJudge:
    cfg.setdefault("retry_initial_s", 0.5)
    cfg.setdefault("retry_max_s", 30.0)
    return StubJudge(JudgeConfig(spec="stub:model", **cfg))


class Script:
    """An attempt that raises the given errors in turn, then returns "ok"."""

    def __init__(self, *errors: BaseException):
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


class Sleeps(list):
    async def __call__(self, seconds: float) -> None:
        self.append(seconds)


def run(j, attempt, **kw):
    sleeps = Sleeps()
    events: list[RetryEvent] = []
    result = asyncio.run(call_with_retry(j, attempt, on_retry=events.append, sleep=sleeps, **kw))
    return result, sleeps, events


def test_transient_errors_are_retried_until_success():
    attempt = Script(Transient(), Transient(), Transient())
    result, sleeps, events = run(judge(), attempt)
    assert result == "ok"
    assert attempt.calls == 4
    assert len(sleeps) == 3
    assert [e.attempt for e in events] == [1, 2, 3]
    assert all(e.judge == "stub:model" and isinstance(e.error, Transient) for e in events)
    assert [e.wait_s for e in events] == sleeps


def test_a_lambda_returning_a_coroutine_is_awaited_on_every_attempt():
    # The engine calls exactly `call_with_retry(judge, lambda: judge.generate(call))`.
    attempt = Script(Transient(delay=0.0))
    result, sleeps, _ = run(judge(), lambda: attempt())
    assert result == "ok" and attempt.calls == 2 and sleeps == [0.0]


def test_non_retryable_error_raises_at_once():
    err = Permanent("bad request")
    attempt = Script(err)
    sleeps, events = Sleeps(), []
    with pytest.raises(Permanent) as info:
        asyncio.run(call_with_retry(judge(), attempt, on_retry=events.append, sleep=sleeps))
    assert info.value is err
    assert attempt.calls == 1 and sleeps == [] and events == []


def test_attempts_are_bounded_and_the_last_error_is_reraised():
    errors = [Transient() for _ in range(10)]
    attempt = Script(*errors)
    sleeps = Sleeps()
    with pytest.raises(Transient) as info:
        asyncio.run(call_with_retry(judge(max_attempts=4), attempt, sleep=sleeps))
    assert attempt.calls == 4
    assert info.value is errors[3]
    assert len(sleeps) == 3


def test_single_attempt_means_no_retry():
    attempt = Script(Transient())
    with pytest.raises(Transient):
        asyncio.run(call_with_retry(judge(max_attempts=1), attempt, sleep=Sleeps()))
    assert attempt.calls == 1


def test_a_permanent_error_after_transient_ones_stops_the_retries():
    attempt = Script(Transient(), Permanent("401"), Transient())
    with pytest.raises(Permanent):
        asyncio.run(call_with_retry(judge(), attempt, sleep=Sleeps()))
    assert attempt.calls == 2


def test_backoff_is_jittered_exponential_from_initial_and_capped():
    j = judge(retry_initial_s=0.5, retry_max_s=6.0, max_attempts=8)
    waits = {n: [backoff_s(j, n) for _ in range(300)] for n in range(1, 8)}
    for n, ws in waits.items():
        base = 0.5 * 2 ** (n - 1)
        assert all(min(base, 6.0) <= w <= min(2 * base, 6.0) for w in ws), n
    # Jitter: concurrent callers do not all come back at the same instant.
    assert len({round(w, 6) for w in waits[1]}) > 100
    assert max(waits[7]) == 6.0


def test_server_delay_wins_over_backoff_with_small_positive_jitter():
    attempt = Script(Transient(delay=4.0), Transient(delay=0.0), Transient())
    result, sleeps, events = run(judge(retry_initial_s=0.01), attempt)
    assert result == "ok"
    assert 4.0 <= sleeps[0] <= 4.4
    assert sleeps[1] == 0.0
    assert 0.04 <= sleeps[2] < 0.08  # the third failure gave no delay: backoff from 0.01 * 2**2
    assert [e.server_delay_s for e in events] == [4.0, 0.0, None]


def test_server_delay_is_honoured_beyond_retry_max_up_to_retry_after_max():
    attempt = Script(Transient(delay=8.0))
    _, sleeps, events = run(judge(retry_max_s=5.0), attempt)
    assert 8.0 <= sleeps[0] <= 8.8 and events[0].server_delay_s == 8.0  # not cut to 5 s
    attempt = Script(Transient(delay=3600.0))
    with pytest.raises(RetryDelayTooLong, match=r"asked to wait 3600 s .* retry_after_max_s = 600 s: not retried \(Transient\)") as info:
        run(judge(retry_max_s=2.5), attempt)
    assert attempt.calls == 1 and isinstance(info.value.__cause__, Transient)
    # on the last attempt the last error itself is what is left to say
    attempt = Script(Transient(delay=3600.0))
    with pytest.raises(Transient):
        run(judge(max_attempts=1), attempt)


def test_real_sleep_is_used_by_default():
    j = judge(retry_initial_s=0.05, retry_max_s=0.05)
    attempt = Script(Transient())
    start = time.monotonic()
    assert asyncio.run(call_with_retry(j, attempt)) == "ok"
    assert time.monotonic() - start >= 0.04


def test_cancellation_is_not_retried():
    attempt = Script(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(call_with_retry(judge(), attempt, sleep=Sleeps()))
    assert attempt.calls == 1


def test_retry_without_observer():
    attempt = Script(Transient(delay=0.0))
    assert asyncio.run(call_with_retry(judge(), attempt, sleep=Sleeps())) == "ok"


@pytest.mark.parametrize("headers, expected", [
    ({"retry-after-ms": "250"}, 0.25),
    ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
    ({"retry-after": "7"}, 7.0),
    ({"retry-after": "1.5"}, 1.5),
    ({"retry-after": "-3"}, 0.0),
    ({"retry-after": "soon"}, None),
    ({"retry-after-ms": "x", "retry-after": "2"}, 2.0),
    ({}, None),
    (None, None),
])
def test_delay_from_headers(headers, expected):
    assert delay_from_headers(headers) == expected


def test_delay_from_an_http_date_header():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 27 <= delay_from_headers({"retry-after": when}) <= 31
    past = email.utils.formatdate(time.time() - 30, usegmt=True)
    assert delay_from_headers({"retry-after": past}) == 0.0


@pytest.mark.parametrize("value, expected", [
    ("33s", 33.0), ("0.5s", 0.5), ("1.000340012s", 1.000340012), (2, 2.0), ("33", None), ("s", None), (None, None),
])
def test_parse_duration(value, expected):
    assert parse_duration(value) == expected


def test_a_first_attempt_that_succeeds_never_enters_tenacity(monkeypatch):
    """The first attempt runs directly (issue 36: tenacity's setup was most of a sim: judge's cost
    per call); a failure enters tenacity as its attempt 1, so the rest is unchanged (above)."""
    from memjudge.scoring import retry

    def no_tenacity(*a, **kw):
        raise AssertionError("tenacity entered")

    monkeypatch.setattr(retry, "AsyncRetrying", no_tenacity)
    attempt = Script()
    result, sleeps, events = run(judge(), attempt)
    assert result == "ok" and attempt.calls == 1 and sleeps == [] and events == []
    with pytest.raises(AssertionError, match="tenacity entered"):
        run(judge(), Script(Transient()))


def test_a_cancelled_first_attempt_is_cancelled():
    attempt = Script(asyncio.CancelledError())
    with pytest.raises(asyncio.CancelledError):
        run(judge(), attempt)
    assert attempt.calls == 1
