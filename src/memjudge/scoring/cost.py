"""Prices and token estimates: what a run cost, and what a dry run says it would."""

from __future__ import annotations

from typing import cast

from memjudge.judges import JudgeConfig
from memjudge.judges.base import estimate_tokens  # the judges' own estimate (a prompt's cacheable prefix)


def has_prices(config: JudgeConfig) -> bool:
    """True when the judges file gives this judge a price (per token or per call)."""
    return any(p is not None for p in (config.price_input_per_mtok, config.price_output_per_mtok, config.price_per_call))


def price_usd(config: JudgeConfig, usage: dict[str, int], requests: int = 0) -> float | None:
    """Cost of the given usage and requests at the judge's prices (thinking tokens bill as
    output; `price_per_call` per request); None when the judge has no price. Input tokens read
    from or written to a provider's prompt cache (`cached_tokens`, `cache_write_tokens`, both
    part of `input_tokens`) bill at the cache prices where the judge has them, else as input."""
    if not has_prices(config):
        return None
    pin = config.price_input_per_mtok or 0.0
    pout = config.price_output_per_mtok or 0.0
    inp = usage.get("input_tokens", 0)
    read = usage.get("cached_tokens", 0) if config.price_cache_read_per_mtok is not None else 0
    written = usage.get("cache_write_tokens", 0) if config.price_cache_write_per_mtok is not None else 0
    cost = (inp - read - written) * pin + (usage.get("output_tokens", 0) + usage.get("thinking_tokens", 0)) * pout
    if read:
        cost += read * cast(float, config.price_cache_read_per_mtok)
    if written:
        cost += written * cast(float, config.price_cache_write_per_mtok)
    return cost / 1e6 + requests * (config.price_per_call or 0.0)


def job_cost_usd(config: JudgeConfig, tokens: dict[str, int], batch_tokens: dict[str, int], requests: int = 0,
                 batch_requests: int = 0) -> float | None:
    """Cost of a run's usage: batch requests at `batch_discount` times the online prices."""
    online = {k: tokens.get(k, 0) - batch_tokens.get(k, 0) for k in tokens}
    full, batch = price_usd(config, online, requests - batch_requests), price_usd(config, batch_tokens, batch_requests)
    # price_usd is None for a config without prices alone, whatever the usage: both or neither.
    return None if full is None else full + config.batch_discount * cast(float, batch)


def cache_saving_usd(config: JudgeConfig, tokens: dict[str, int], batch_tokens: dict[str, int] | None = None) -> float | None:
    """What prompt caching saved on a run's usage (negative: what it cost): the run's cost with
    every input token at the input price, minus its cost at the cache prices (batch requests
    at `batch_discount`, as `job_cost_usd`). None for a judge without cache prices."""
    if config.price_cache_read_per_mtok is None and config.price_cache_write_per_mtok is None:
        return None
    batch_tokens = batch_tokens or {}
    cost = job_cost_usd(config, tokens, batch_tokens)
    if cost is None:
        return None
    plain = config.model_copy(update={"price_cache_read_per_mtok": None, "price_cache_write_per_mtok": None})
    return cast(float, job_cost_usd(plain, tokens, batch_tokens)) - cost


def estimated_cache_usage(judge, calls) -> dict[str, int]:
    """The prompt-cache tokens a run of `calls` (in the judge's order) is expected to write and
    read: the first call of each cacheable prefix writes it, every later one reads it (entries
    live for minutes; a persona's calls go out together). Judge.cache_prefix says what is
    cacheable."""
    seen: set = set()
    written = read = 0
    for call in calls:
        prefix, tokens = judge.cache_prefix(call)
        if not tokens:
            continue
        if prefix in seen:
            read += tokens
        else:
            seen.add(prefix)
            written += tokens
    return {"cache_write_tokens": written, "cached_tokens": read}


__all__ = ["cache_saving_usd", "estimate_tokens", "estimated_cache_usage", "has_prices", "job_cost_usd", "price_usd"]
