"""The JSON files memjudge writes, as a checked contract: one JSON Schema per file.

Each file has a model (pydantic, or the writer's own dataclass) whose fields are its keys:
`SCHEMAS` lists them, `json_schema(name)` generates the schema, and `write_schemas(folder)`
writes every one as ``NAME.schema.json`` (the committed copies are ``docs/schemas/``, and
``tests/test_schemas.py`` fails when they differ from what this code generates, or when a real
output of the Quickstart has a key the schema does not name or lacks one it requires).

Adding a file: write its model (a `common.Strict` subclass, in the module of its family, or a
``__pydantic_config__`` on the writer's dataclass as `memjudge.scoring.engine.ScoreSummary`
has), add one `Schema` line below, run ``python -m memjudge.formats.schemas docs/schemas`` and
add the file to the test's outputs. A JSONL file's schema describes one line.
"""

from __future__ import annotations

import fnmatch
import importlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SCHEMAS", "Schema", "json_schema", "schema_for", "write_schemas"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


@dataclass(frozen=True)
class Schema:
    name: str               # docs/schemas/NAME.schema.json
    files: tuple[str, ...]  # the default names of the files it describes (shell patterns)
    model: str              # "module:attribute" (looked up when needed: formats imports no higher layer)
    lines: bool = False     # JSONL: the schema is that of one line

    def load(self) -> Any:
        module, attr = self.model.split(":")
        return getattr(importlib.import_module(module), attr)


_M = "memjudge.formats.schemas."
SCHEMAS: list[Schema] = [
    Schema("candidates", ("candidates.jsonl", "queue.jsonl"), _M + "runs:CandidateRow", lines=True),
    Schema("sources", ("sources.jsonl",), _M + "runs:SourceRow", lines=True),
    Schema("facts", ("facts.jsonl",), _M + "runs:FactRow", lines=True),
    Schema("truth", ("truth.jsonl",), _M + "runs:TruthRow", lines=True),
    Schema("labels", ("labels.jsonl", "panel.jsonl"), _M + "runs:LabelRow", lines=True),
    Schema("coverage", ("coverage.jsonl",), _M + "runs:CoverageRow", lines=True),
    Schema("config", ("config.json",), _M + "runs:ConfigJson"),
    Schema("summary", ("summary.json",), "memjudge.scoring.engine:ScoreSummary"),
    Schema("simulate", ("simulate.json",), _M + "runs:SimulateJson"),
    Schema("import", ("import.json",), _M + "runs:ImportJson"),
    Schema("policy", ("policy.json",), _M + "runs:PolicyJson"),
    Schema("noise", ("noise.json",), _M + "stats:NoiseJson"),
    Schema("agreement", ("agreement.json",), _M + "stats:AgreementJson"),
    Schema("estimate", ("estimate.json",), _M + "stats:EstimateJson"),
    Schema("panel", ("panel.json",), _M + "stats:PanelJson"),
    Schema("compare", ("compare.json",), _M + "comparison:CompareJson"),
    Schema("compare_inputs", ("compare_inputs.json",), _M + "comparison:CompareInputs"),
    Schema("sweep", ("sweep.json",), _M + "comparison:SweepJson"),
    Schema("calibration", ("calibration.json",), _M + "comparison:CalibrationJson"),
    Schema("robustness", ("robustness.json",), _M + "comparison:RobustnessJson"),
    Schema("diff", ("diff.json",), "memjudge.diff.result:DiffResult"),
    Schema("cascade", ("cascade.json",), _M + "cascade:CascadeJson"),
    Schema("demo", ("demo.json",), _M + "demo:DemoJson"),
    Schema("local_judge", ("local_judge.json",), _M + "demo:LocalJudgeJson"),
    Schema("coverage_judge", ("coverage_judge.json",), _M + "demo:CoverageJudgeJson"),
    # files named by the user (--out): no default name to recognise them by
    Schema("sample", (), _M + "runs:SampleRow", lines=True),
    Schema("gold", (), _M + "runs:GoldRow", lines=True),
    # import.json of a memory system's export (the default name is the data sets' `import`)
    Schema("import_memory", (), _M + "runs:MemoryImportJson"),
    # config.json at the top of a demo's folder (the name of a scoring run's)
    Schema("demo_config", (), _M + "demo:DemoConfigJson"),
]


def schema_for(path: str | Path) -> Schema | None:
    """The schema of a file memjudge writes, by its name (None for a file without one)."""
    name = Path(path).name
    return next((s for s in SCHEMAS if any(fnmatch.fnmatch(name, p) for p in s.files)), None)


def json_schema(name: str) -> dict:
    """The JSON Schema (draft 2020-12) of the file called `name` in `SCHEMAS`."""
    from pydantic import TypeAdapter

    entry = next((s for s in SCHEMAS if s.name == name), None)
    if entry is None:
        raise KeyError(f"no schema named {name!r}: one of {', '.join(s.name for s in SCHEMAS)}")
    # Serialization mode: a key every writer always writes is required (a dataclass field with a
    # default too, under its json_schema_serialization_defaults_required); a key some runs add is not.
    body = TypeAdapter(entry.load()).json_schema(mode="serialization", by_alias=True)
    named = ", ".join(entry.files) or f"a {entry.name} file"
    what = f"one line of {named}" if entry.lines else named
    return {"$schema": SCHEMA_DIALECT, "$id": f"{entry.name}.schema.json",
            "title": f"memjudge {entry.name}: {what}", **{k: v for k, v in body.items() if k != "title"}}


def render(name: str) -> str:
    """The schema as committed: sorted keys are not used (field order is the file's order)."""
    return json.dumps(json_schema(name), indent=2, ensure_ascii=False) + "\n"


def write_schemas(folder: str | Path) -> list[Path]:
    """Every schema as FOLDER/NAME.schema.json; returns the paths written."""
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in SCHEMAS:
        p = out / f"{s.name}.schema.json"
        p.write_text(render(s.name), encoding="utf-8")
        paths.append(p)
    return paths
