"""Judge panels: a TOML file (`judges.toml`) declaring judges and their settings.

    [[judge]]
    spec = "openai:gpt-4o-mini"
    temperature = 0
    concurrency = 32
    price_input_per_mtok = 0.15
    price_output_per_mtok = 0.60

    [[judge]]
    spec = "local:qwen2.5-coder-1.5b"
    [judge.options]
    threshold = -1.9

Each table is a `JudgeConfig`; unknown keys are an error naming the file. `judge_config` is how
the CLI and the Python API fill one judge's settings: its table, then explicit overrides.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from memjudge.errors import InputError, UsageError
from memjudge.formats import read_toml
from memjudge.judges.base import JudgeConfig

# The settings CLI flags (and score_run's former keywords) override.
OVERRIDABLE = ("base_url", "concurrency", "rpm", "tpm", "temperature", "seed", "max_output_tokens", "thinking_budget",
               "response_format", "logprobs")


def load_panel(path) -> dict[str, JudgeConfig]:
    """spec → JudgeConfig for every `[[judge]]` table of the file."""
    path = Path(path)
    data = read_toml(path)
    tables = data.get("judge", [])
    if not isinstance(tables, list) or not tables:
        raise InputError(path, "expected one or more [[judge]] tables")
    panel: dict[str, JudgeConfig] = {}
    for i, table in enumerate(tables, start=1):
        try:
            cfg = JudgeConfig(**table)
        except (ValidationError, TypeError) as e:
            first = e.errors()[0] if isinstance(e, ValidationError) else {"loc": (), "msg": str(e)}
            where = ".".join(str(x) for x in first.get("loc", ()))
            raise InputError(path, f"judge #{i}: {where + ': ' if where else ''}{first['msg']}") from None
        if cfg.spec in panel:
            raise InputError(path, f"judge #{i}: spec {cfg.spec!r} declared twice")
        panel[cfg.spec] = cfg
    return panel


def judge_config(judge: str | JudgeConfig, judges_file=None, **overrides) -> JudgeConfig:
    """One judge's settings, as `memjudge score` fills them: for a spec, its `[[judge]]` table in
    `judges_file` (if the file has one; else the defaults), then `overrides` that are not None
    (the CLI's flags: base_url, concurrency, rpm, tpm, temperature, seed, max_output_tokens,
    thinking_budget, response_format, logprobs). A JudgeConfig takes only the overrides.
    Invalid settings are a UsageError naming the judge and the setting."""
    from memjudge.judges import parse_spec

    overrides = {k: v for k, v in overrides.items() if v is not None}
    unknown = set(overrides) - set(OVERRIDABLE)
    if unknown:
        raise UsageError(f"unknown judge setting(s): {', '.join(sorted(unknown))}")
    concurrency = overrides.get("concurrency")
    if concurrency is not None and (not isinstance(concurrency, int) or isinstance(concurrency, bool) or concurrency < 1):
        raise UsageError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    for name in ("rpm", "tpm"):
        if name in overrides and not overrides[name] > 0:
            raise UsageError(f"{name} must be > 0, got {overrides[name]!r}")
    try:
        if isinstance(judge, JudgeConfig):
            config = JudgeConfig.model_validate({**judge.model_dump(), **overrides})
            config._judges_file = judge.judges_file
        else:
            parse_spec(judge)
            config = JudgeConfig(spec=judge)
            if judges_file:
                config = load_panel(judges_file).get(judge, config)
            config = JudgeConfig.model_validate({**config.model_dump(), **overrides})
            config._judges_file = str(judges_file) if judges_file else None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise UsageError(f"judge {getattr(judge, 'spec', judge)}: {where}: {first['msg']}") from None
    parse_spec(config.spec)
    return config
