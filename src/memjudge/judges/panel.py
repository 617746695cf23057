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
`write_threshold` is the one writer (`memjudge calibrate`): the file is read and written here.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import ValidationError

from memjudge.errors import InputError, UsageError
from memjudge.formats import read_toml
from memjudge.judges.base import JudgeConfig

# The settings CLI flags (and score_run's former keywords) override.
OVERRIDABLE = ("base_url", "concurrency", "rpm", "tpm", "temperature", "seed", "max_output_tokens", "thinking_budget",
               "response_format", "logprobs")


# The privacy settings (spec §16) a command's flags may set too (`--private`, ...).
PRIVATE_SETTINGS = ("private", "private_patterns_only", "private_style")


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
    unknown = set(overrides) - set(OVERRIDABLE) - set(PRIVATE_SETTINGS)
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


# ---------------------------------------------------------------------------------------
# writing the panel file (memjudge calibrate's thresholds; read back by load_panel)


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            raise UsageError(f"cannot write non-finite number {v!r} to a panel file")
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + "}"
    if v is None:
        raise UsageError("cannot write a null value to a panel file")
    raise UsageError(f"cannot write {type(v).__name__} to a panel file")


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else _toml_value(k)


def dump_panel(tables: list[dict]) -> str:
    out = ["# Judge panel (memjudge). Thresholds under [judge.options] were written by `memjudge calibrate`.", ""]
    for table in tables:
        out.append("[[judge]]")
        nested = {k: v for k, v in table.items() if isinstance(v, dict)}
        for k, v in table.items():
            if k not in nested:
                out.append(f"{_toml_key(k)} = {_toml_value(v)}")
        for name, sub in nested.items():
            out.append(f"[judge.{_toml_key(name)}]")
            for k, v in sub.items():
                out.append(f"{_toml_key(k)} = {_toml_value(v)}")
        out.append("")
    return "\n".join(out)


def write_threshold(panel, spec: str, threshold: float, category_thresholds: dict[str, float] | None = None, *,
                    key: str = "threshold") -> None:
    """Create the panel or update its `[[judge]]` for `spec` with options.threshold (and
    options.category_thresholds, replaced or removed: a calibration decides them all), keeping
    every other judge and setting. The result is re-read with the panel loader before replacing the file.
    `key` "coverage_threshold" writes that option alone (a coverage calibration)."""
    from memjudge._util.files import write_atomic

    path = Path(panel)
    tables: list[dict] = []
    if path.exists():
        load_panel(path)  # a broken panel is reported, never overwritten
        tables = read_toml(path).get("judge", [])
    new: dict[str, float | dict[str, float]] = {key: float(threshold)}
    if category_thresholds:
        new["category_thresholds"] = {str(c): float(t) for c, t in category_thresholds.items()}
    for table in tables:
        if table.get("spec") == spec:
            options = table.setdefault("options", {})
            if key == "threshold":
                options.pop("category_thresholds", None)
            options.update(new)
            break
    else:
        tables.append({"spec": spec, "options": new})
    text = dump_panel(tables)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # re-read before it replaces the panel: a failed check leaves the old file
        write_atomic(path, text, check=load_panel)
    except InputError as e:  # pragma: no cover - dump_panel writes only what load_panel reads
        raise UsageError(f"{path}: could not write a valid panel ({e})") from None
