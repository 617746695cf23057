"""Importers: public datasets converted into memjudge's formats (spec §2 and §6).

An importer is a small class with a `name`, the files it needs, and `load(folder)`, which
validates the folder and returns an `Imported` (candidates, sources, labels as DataFrames).
`import_dataset(name, folder, out)` looks the importer up by name and, given `out`, writes
`candidates.jsonl`, `sources.jsonl` (when the dataset has sources), `labels.jsonl` and
`import.json` (what was imported, from where, under which licence, with the counts).

Importers are registered by name and imported only when used, like judge providers.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pandas as pd

from memjudge._util.registry import IMPORTERS
from memjudge.errors import InputError, UsageError
from memjudge.formats import LABEL_COLUMNS, csv_records, frame_records, jsonl_records, write_json, write_jsonl

# Built-in names come from the light registry the CLI's help reads too; `register` adds more.
_IMPORTERS: dict[str, str | type[Importer]] = dict(IMPORTERS)


@dataclass
class Imported:
    """A dataset in memjudge's formats. `sources` is None when the dataset ships none."""

    dataset: str
    candidates: pd.DataFrame
    sources: pd.DataFrame | None
    labels: pd.DataFrame
    licence: str
    attribution: str
    notes: list[str] = field(default_factory=list)
    folder: str | None = None
    files: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict:
        """Counts a user checks after an import: rows per file, verdicts per judge."""
        lab = self.labels
        per_judge = {}
        for judge, g in lab.groupby("judge", sort=True):
            counts = g["verdict"].value_counts(dropna=False)
            per_judge[str(judge)] = {
                "labels": int(len(g)),
                "valid": int(g["verdict"].notna().sum()),
                "verdicts": {("null" if pd.isna(cast(Any, k)) else str(k)): int(v) for k, v in counts.items()},
            }
        return {
            "dataset": self.dataset,
            "folder": self.folder,
            "candidates": int(len(self.candidates)),
            "sources": None if self.sources is None else int(len(self.sources)),
            "labels": int(len(lab)),
            "valid_verdicts": int(lab["verdict"].notna().sum()),
            "personas": int(self.candidates["persona_id"].nunique()),
            "categories": sorted(map(str, self.candidates["category"].unique())),
            "judges": per_judge,
            "rubrics": sorted(map(str, lab["rubric"].unique())),
            "licence": self.licence,
            "attribution": self.attribution,
            "notes": list(self.notes),
            "files": dict(self.files),
        }


class Importer:
    """Base class: subclasses set the class attributes and implement `load`."""

    name: str = ""
    description: str = ""
    licence: str = ""
    attribution: str = ""
    required_files: tuple[str, ...] = ()
    # "gold": the importer reads one export file into one gold file through `import_gold`, not `load`
    writes: str | None = None

    def check_folder(self, folder: Path) -> None:
        if not folder.exists():
            raise InputError(folder, "no such folder")
        if not folder.is_dir():
            raise InputError(folder, f"is not a folder (expected the {self.name} data folder)")
        for name in self.required_files:
            if not (folder / name).is_file():
                raise InputError(folder / name, f"missing: the {self.name} importer needs {', '.join(self.required_files)} in {folder}")

    def load(self, folder: Path) -> Imported:  # pragma: no cover - interface
        raise NotImplementedError

    def import_gold(self, path: str | Path, out: str | Path) -> dict[str, Any]:  # pragma: no cover - interface
        raise NotImplementedError


def register(name: str, target: str | type[Importer]) -> None:
    """Add an importer: an Importer subclass or "module:Class"."""
    _IMPORTERS[name] = target


def available() -> list[str]:
    return sorted(_IMPORTERS)


def get_importer(name: str) -> Importer:
    target = _IMPORTERS.get(name)
    if target is None:
        raise UsageError(f"unknown dataset {name!r} (known: {', '.join(available())})")
    if isinstance(target, str):
        module, cls = target.split(":")
        target = getattr(importlib.import_module(module), cls)
        _IMPORTERS[name] = target
    return target()


def import_dataset(name: str, folder, out=None) -> Imported:
    """Validate `folder` with the named importer; write memjudge's files into `out` if given."""
    importer = get_importer(name)
    folder = Path(folder)
    importer.check_folder(folder)
    imported = importer.load(folder)
    imported.folder = str(folder)
    if out is not None:
        write_imported(imported, out)
    return imported


def write_imported(imported: Imported, out) -> dict[str, str]:
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(out, "exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    files = {"candidates": out / "candidates.jsonl", "labels": out / "labels.jsonl"}
    write_jsonl(files["candidates"], frame_records(imported.candidates))
    write_jsonl(files["labels"], frame_records(with_label_columns(imported.labels)))
    if imported.sources is not None:
        files["sources"] = out / "sources.jsonl"
        write_jsonl(files["sources"], frame_records(imported.sources))
    else:
        stale = out / "sources.jsonl"
        if stale.exists():  # a previous import of another dataset must not leave a mismatched file
            stale.unlink()
    imported.files = {k: str(v) for k, v in files.items()}
    files["manifest"] = out / "import.json"
    imported.files["manifest"] = str(files["manifest"])
    write_json(files["manifest"], imported.summary())
    return imported.files


def empty_labels_frame(rows: list[dict]) -> pd.DataFrame:
    """Labels with every spec §6 column; fields an import cannot know are null."""
    return with_label_columns(pd.DataFrame(rows))


def with_label_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Spec §6 columns first (absent ones null), then any extra columns."""
    df = df.copy()
    for col in LABEL_COLUMNS:
        if col not in df.columns:
            df[col] = None
    return df[LABEL_COLUMNS + [c for c in df.columns if c not in LABEL_COLUMNS]]


# ---------------------------------------------------------------------------------------
# cells (records come from io.csv_records / io.jsonl_records, which keep PATH:LINE)


def json_list_cell(path: Path, line: int, column: str, cell: str) -> list:
    """A CSV cell holding a JSON list, e.g. '["Single", "Divorced"]' or '[0, 1, 0.5]'."""
    try:
        value = json.loads(cell)
    except RecursionError:
        raise InputError(path, "JSON nested too deeply", line) from None
    except json.JSONDecodeError as e:
        raise InputError(path, f"{column!r} is not a JSON list ({e.msg}): {cell[:60]!r}", line) from None
    if not isinstance(value, list):
        raise InputError(path, f"{column!r} must be a JSON list, found {type(value).__name__}: {cell[:60]!r}", line)
    return value


__all__ = [
    "Imported", "Importer", "available", "csv_records", "empty_labels_frame", "get_importer",
    "import_dataset", "json_list_cell", "jsonl_records", "register", "with_label_columns", "write_imported",
]
