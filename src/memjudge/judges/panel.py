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

Each table is a `JudgeConfig`; unknown keys are an error naming the file.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from memjudge.errors import InputError
from memjudge.formats import read_toml
from memjudge.judges.base import JudgeConfig


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
