"""Prices and token estimates: what a run cost, and what a dry run says it would."""

from __future__ import annotations

from typing import cast

from memjudge.judges import JudgeConfig


def has_prices(config: JudgeConfig) -> bool:
    """True when the judges file gives this judge a price (per token or per call)."""
    return any(p is not None for p in (config.price_input_per_mtok, config.price_output_per_mtok, config.price_per_call))


def price_usd(config: JudgeConfig, usage: dict[str, int], requests: int = 0) -> float | None:
    """Cost of the given usage and requests at the judge's prices (thinking tokens bill as
    output; `price_per_call` per request); None when the judge has no price."""
    if not has_prices(config):
        return None
    pin = config.price_input_per_mtok or 0.0
    pout = config.price_output_per_mtok or 0.0
    tokens = (usage.get("input_tokens", 0) * pin + (usage.get("output_tokens", 0) + usage.get("thinking_tokens", 0)) * pout) / 1e6
    return tokens + requests * (config.price_per_call or 0.0)


def job_cost_usd(config: JudgeConfig, tokens: dict[str, int], batch_tokens: dict[str, int], requests: int = 0,
                 batch_requests: int = 0) -> float | None:
    """Cost of a run's usage: batch requests at `batch_discount` times the online prices."""
    online = {k: tokens.get(k, 0) - batch_tokens.get(k, 0) for k in tokens}
    full, batch = price_usd(config, online, requests - batch_requests), price_usd(config, batch_tokens, batch_requests)
    # price_usd is None for a config without prices alone, whatever the usage: both or neither.
    return None if full is None else full + config.batch_discount * cast(float, batch)


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate (about 4 characters per token in English)."""
    return max(1, len(text) // 4)


__all__ = ["estimate_tokens", "has_prices", "job_cost_usd", "price_usd"]
