"""Judge registry, keyed by the spec prefix (`anthropic:`, `azure:`, `gemini:`, `openai:`, `local:`, `sim:`).

Providers are imported only when used, so a missing optional dependency (the embedded
model's runtime) only matters to those who ask for that judge.
"""

from __future__ import annotations

import importlib
from typing import Any

from memjudge.errors import UsageError
from memjudge.judges.base import FINISH_REASONS, Judge, JudgeAnswer, JudgeCall, JudgeConfig, Prompt, Usage

_PROVIDERS: dict[str, str] = {
    "anthropic": "memjudge.judges.anthropic:AnthropicJudge",
    "azure": "memjudge.judges.openai:AzureOpenAIJudge",
    "gemini": "memjudge.judges.gemini:GeminiJudge",
    "openai": "memjudge.judges.openai:OpenAIJudge",
    "local": "memjudge.judges.local:LocalJudge",
    "sim": "memjudge.judges.sim:SimJudge",
}


def register(prefix: str, target: str | type[Judge]) -> None:
    """Add a provider: `target` is a Judge subclass or "module:Class"."""
    _PROVIDERS[prefix] = target  # type: ignore[assignment]


def providers() -> list[str]:
    return sorted(_PROVIDERS)


def judge_class(prefix: str) -> type[Judge]:
    target = _PROVIDERS.get(prefix)
    if target is None:
        raise UsageError(f"unknown judge provider {prefix!r} (known: {', '.join(providers())})")
    if isinstance(target, str):
        module, name = target.split(":")
        target = getattr(importlib.import_module(module), name)
        _PROVIDERS[prefix] = target
    return target


def parse_spec(spec: str) -> tuple[str, str]:
    """`PROVIDER:MODEL` → (provider, model); one-line UsageError when malformed."""
    if not isinstance(spec, str) or ":" not in spec:
        raise UsageError(f"judge spec {spec!r} must look like PROVIDER:MODEL (e.g. openai:gpt-4o-mini)")
    prefix, model = spec.split(":", 1)
    if prefix not in _PROVIDERS:
        raise UsageError(f"unknown judge provider {prefix!r} in {spec!r} (known: {', '.join(providers())})")
    if not model.strip():
        raise UsageError(f"judge spec {spec!r} names no model")
    return prefix, model


def make_judge(spec_or_config: str | JudgeConfig, **overrides: Any) -> Judge:
    """Build a judge from a spec string (plus JudgeConfig fields) or a full JudgeConfig."""
    if isinstance(spec_or_config, JudgeConfig):
        config = spec_or_config.model_copy(update=overrides) if overrides else spec_or_config
    else:
        config = JudgeConfig(spec=spec_or_config, **{k: v for k, v in overrides.items() if v is not None})
    prefix, _ = parse_spec(config.spec)
    return judge_class(prefix)(config)


__all__ = [
    "FINISH_REASONS", "Judge", "JudgeAnswer", "JudgeCall", "JudgeConfig", "Prompt", "Usage",
    "judge_class", "make_judge", "parse_spec", "providers", "register",
]
