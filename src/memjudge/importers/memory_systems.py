"""Memory systems' exports (spec §2): `memjudge import mem0|memos|graphiti|langmem|letta FILE --out DIR`.

A memory system is a data file, `importers/systems/NAME.toml`, as a rubric is: a title, where its
documentation describes the export, what it says about confidence, and two sections —

- ``[memories]``: ``records`` (the keys under which an export document holds its list of memories;
  "" lets a lone object be one memory), ``drop`` (fields left out, e.g. embeddings) and ``[memories.map]``,
  the column mapping from the system's fields to memjudge's candidates (memjudge.formats.mapping);
- ``[messages]`` (optional): where the export holds the conversation, and the mapping to a chat
  transcript (memjudge.formats.transcripts).

One reader serves them all: the candidates are read by `read_candidates` through the mapping (so
every rule of the candidates format holds, with the export's own line numbers in errors), the
conversation, when the export holds one, by `read_sources`. Adding a system is adding a file.
The memory id is the assertion id; fields the mapping names beyond memjudge's (provenance,
timestamps) and the ones it leaves alone are extra columns, carried into the labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd

from memjudge._util.registry import memory_system_names
from memjudge.errors import InputError, UsageError
from memjudge.formats import (
    Table,
    TableMap,
    frame_records,
    parse_map,
    read_candidates,
    read_sources,
    read_toml,
    write_json,
    write_jsonl,
)
from memjudge.formats.documents import document_rows

__all__ = ["MemoryImport", "SystemPreset", "import_memories", "load_system", "system_path"]


@dataclass(frozen=True)
class Records:
    keys: tuple[str, ...]
    mapping: TableMap


@dataclass(frozen=True)
class SystemPreset:
    name: str
    title: str
    docs: str
    confidence: str
    memories: Records
    messages: Records | None
    path: str


def system_path(name: str):
    if name not in memory_system_names():
        raise UsageError(f"unknown memory system {name!r} (known: {', '.join(memory_system_names())})")
    return resources.files("memjudge").joinpath("importers", "systems", f"{name}.toml")


def _records(doc: dict, section: str, where: str) -> Records:
    sec = doc.get(section)
    if not isinstance(sec, dict) or not isinstance(sec.get("map"), dict):
        raise InputError(where, f"[{section}] needs a [{section}.map] table")
    keys = sec.get("records", [""])
    drop = sec.get("drop", [])
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise InputError(where, f"[{section}] records must be a list of keys")
    if not isinstance(drop, list) or not all(isinstance(k, str) for k in drop):
        raise InputError(where, f"[{section}] drop must be a list of field names")
    try:
        m = parse_map(sec["map"], f"{where} [{section}.map]")
    except UsageError as e:
        raise InputError(where, str(e)) from None
    return Records(tuple(keys), TableMap(m.columns, m.optional, m.defaults, m.scale, tuple(drop)))


def load_system(name_or_path: str | Path) -> SystemPreset:
    """A memory system's preset by name (shipped) or from a TOML file of the same shape."""
    p = Path(name_or_path)
    if p.suffix == ".toml":
        doc, where, name = read_toml(p), str(p), p.stem
    else:
        ref = system_path(str(name_or_path))
        where, name = f"memjudge/importers/systems/{name_or_path}.toml", str(name_or_path)
        import tomllib

        doc = tomllib.loads(ref.read_text(encoding="utf-8"))
    for key in ("title", "docs", "confidence"):
        if not isinstance(doc.get(key), str):
            raise InputError(where, f"missing {key!r} (a string)")
    messages = _records(doc, "messages", where) if "messages" in doc else None
    return SystemPreset(name, doc["title"], doc["docs"], doc["confidence"], _records(doc, "memories", where), messages, where)


@dataclass
class MemoryImport:
    """An export in memjudge's formats. `sources` is None when the export holds no conversation."""

    system: SystemPreset
    file: str
    candidates: pd.DataFrame
    sources: pd.DataFrame | None
    mapping: TableMap
    confidence_note: str = ""
    files: dict[str, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        c = self.candidates
        extra = [col for col in c.columns if col not in ("persona_id", "assertion_id", "category", "confidence", "text")]
        return {
            "system": self.system.name,
            "title": self.system.title,
            "file": self.file,
            "candidates": int(len(c)),
            "personas": int(c["persona_id"].nunique()),
            "categories": {str(k): int(v) for k, v in c["category"].value_counts().sort_index().items()},
            "confidence": {"with": int(c["confidence"].notna().sum()), "note": self.confidence_note or self.system.confidence},
            "extra_columns": extra,
            "sources": None if self.sources is None else int(len(self.sources)),
            "mapping": self.mapping.describe(),
            "preset": self.system.path,
            "docs": self.system.docs,
            "files": dict(self.files),
        }


def _has_messages(path: Path, rec: Records) -> bool:
    """Whether the export holds the conversation (the keys of `[messages]` in the document or a line)."""
    if path.suffix.lower() not in (".json", ".jsonl"):
        return False
    from memjudge.formats import decode_file, jsonl_records

    if path.suffix.lower() == ".json":
        return bool(document_rows(path, decode_file(path), [k for k in rec.keys if k])[0])
    return any(k in obj for _, obj in jsonl_records(path) for k in rec.keys if k)


def import_memories(system: str | Path, file, out=None, mapping: dict[str, TableMap] | None = None) -> MemoryImport:
    """Read a memory system's export; write DIR/candidates.jsonl (and sources.jsonl) if `out`.

    `mapping` overrides the preset's: {"candidates": TableMap, "sources": TableMap} (a command
    line's --map)."""
    preset = load_system(system)
    path = Path(file)
    mapping = mapping or {}
    unknown = set(mapping) - {"candidates", "sources"}
    if unknown:
        raise UsageError(f"memjudge import {preset.name}: --map applies to candidates and sources, not {', '.join(sorted(unknown))}")
    cmap = preset.memories.mapping.merged(mapping.get("candidates", TableMap()))
    try:
        cands = read_candidates(Table(path, cmap, preset.memories.keys))
    except InputError as e:
        if "persona_id" in e.message and ("missing" in e.message or "no column" in e.message):
            raise InputError(e.path, f"{e.message}: {preset.title}'s export does not name the user here; "
                                     "give one with --map default.persona_id=USER", e.line) from None
        raise
    sources = None
    if preset.messages is not None and _has_messages(path, preset.messages):
        smap = preset.messages.mapping.merged(mapping.get("sources", TableMap()))
        sources = read_sources(Table(path, smap, preset.messages.keys))
    override = mapping.get("candidates", TableMap())
    note = f"mapped: confidence={override.describe()['confidence']}" if "confidence" in override.columns else ""
    result = MemoryImport(preset, str(path), cands, sources, cmap, note)
    if out is not None:
        write_memory_import(result, out)
    return result


def write_memory_import(result: MemoryImport, out) -> dict[str, str]:
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(out, "exists and is not a folder")
    out.mkdir(parents=True, exist_ok=True)
    files = {"candidates": out / "candidates.jsonl"}
    write_jsonl(files["candidates"], frame_records(result.candidates))
    stale = out / "sources.jsonl"
    if result.sources is not None:
        files["sources"] = stale
        write_jsonl(stale, frame_records(result.sources))
    elif stale.exists():  # an earlier import's conversation must not pass for this export's
        stale.unlink()
    files["manifest"] = out / "import.json"
    result.files = {k: str(v) for k, v in files.items()}
    write_json(files["manifest"], result.summary())
    return result.files
