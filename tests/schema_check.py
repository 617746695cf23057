"""Real outputs against the committed contract: every JSON file a run folder holds that has a
schema (`memjudge.formats.schemas.schema_for`, or `named` for files without a default name) is
validated with `jsonschema`; shared by tests/test_schemas.py's study and tests/test_demo.py."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import jsonschema

from memjudge.formats.schemas import SCHEMAS, json_schema, schema_for


def documents(path: Path, lines: bool) -> list:
    text = path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()] if lines else [json.loads(text)]


def errors(name: str, doc) -> list[str]:
    """Every error, with those inside an `anyOf` (a nullable object) spelt out."""
    def spelt(e) -> list[str]:
        return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}", *(m for c in e.context for m in spelt(c))]

    return [m for e in _validator(name).iter_errors(doc) for m in spelt(e)]


@cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    # once per schema, not per document: making the schema costs milliseconds, and a run's
    # labels file has thousands of lines
    return jsonschema.Draft202012Validator(json_schema(name))


def check_folder(folder: Path, named: dict[str, str] | None = None, skip: tuple[str, ...] = ()) -> tuple[dict[str, int], list[str]]:
    """(documents checked by schema name, one failure line per file that does not follow its schema)."""
    named = named or {}
    covered: dict[str, int] = {}
    failures = []
    for path in sorted(folder.rglob("*.json*")):
        rel = path.relative_to(folder)
        if rel.parts[0] in skip or path.name == "journal.jsonl":
            continue
        entry = schema_for(path)
        name = named.get(str(rel)) or (entry.name if entry else None)
        if name is None:
            continue
        lines = next(s for s in SCHEMAS if s.name == name).lines
        for doc in documents(path, lines):
            covered[name] = covered.get(name, 0) + 1
            errs = errors(name, doc)
            if errs:
                failures.append(f"{rel} ({name}): {errs[:3]}")
                break
    return covered, failures
