"""Column mappings (spec §2): any table read as one of memjudge's formats.

A mapping names, for each column a format wants (the *target*), where a row holds it (the *source*):

    text=memory,persona_id=user_id,category=metadata.category,confidence=metadata.score

- A source is a column, or a dotted path into nested JSON objects and lists (``metadata.score``,
  ``categories.0``, ``namespace.-1``; a CSV or Parquet cell holding JSON text is walked the same way).
  A column whose own name has the dots wins over the path.
- ``a | b``: the first of the paths that a row has (a heterogeneous export: Letta blocks and passages).
- ``path?``: the path may be absent from a row (the value is then null); without ``?`` a row that
  lacks it is an error at that row's line.
- ``default.TARGET=VALUE``: a literal where TARGET's path is absent or null, or for every row when
  TARGET has no path (``default.category=memory``: one named category for a file without one).
- ``path*FACTOR``: a number scaled (``confidence=metadata.confidence*0.01`` for a 0-100 score).
- ``assertion_id=@hash``: derive the id, a stable hash of persona and text (`derived_id`).

A target that no format knows is an extra column (kept, and carried into the labels). A direct
rename consumes its source column; a path into an object leaves the object in place.

A mapping file (TOML) holds the same pairs, per input (``[candidates]``, ``[sources]``, ``[facts]``,
``[gold]``) or, without sections, for the command's main input. `Table(path, mapping)` is a file
and how to read it: every reader of memjudge.formats accepts one wherever it accepts a path.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memjudge.errors import InputError, UsageError
from memjudge.formats.tomlfile import read_toml

__all__ = [
    "DERIVE", "INPUT_KINDS", "Table", "TableMap", "derived_id", "describe_input", "lookup", "parse_map", "parse_mappings",
    "table_map",
]

DERIVE = "@hash"
INPUT_KINDS = ("candidates", "sources", "facts", "gold")
_MISSING = object()


@dataclass(frozen=True)
class TableMap:
    """One input's mapping: target → alternative source paths, the optional targets, the defaults."""

    columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    optional: frozenset[str] = frozenset()
    defaults: dict[str, str] = field(default_factory=dict)
    scale: dict[str, float] = field(default_factory=dict)
    drop: tuple[str, ...] = ()  # columns (or dotted paths into objects) left out: embeddings, say

    def __bool__(self) -> bool:
        return bool(self.columns or self.defaults or self.drop)

    @property
    def derives_id(self) -> bool:
        return self.columns.get("assertion_id") == (DERIVE,)

    def describe(self) -> dict[str, Any]:
        """The mapping as written (for config.json and import.json)."""
        out: dict[str, Any] = {t: " | ".join(s) + (f"*{self.scale[t]:g}" if t in self.scale else "") + ("?" if t in self.optional else "")
                               for t, s in self.columns.items()}
        if self.defaults:
            out["default"] = dict(self.defaults)
        if self.drop:
            out["drop"] = list(self.drop)
        return out

    def merged(self, other: TableMap) -> TableMap:
        """`other` over this one (a command line's --map over a preset)."""
        keep = {k: v for k, v in self.scale.items() if k not in other.columns}
        return TableMap({**self.columns, **other.columns}, (self.optional - other.columns.keys()) | other.optional,
                        {**self.defaults, **other.defaults}, {**keep, **other.scale}, tuple(dict.fromkeys(self.drop + other.drop)))


def _parse_pair(target: str, source: Any, where: str) -> tuple[str, tuple[str, ...] | None, bool, str | None, float | None]:
    if not isinstance(source, str):
        raise UsageError(f"{where}: {target} must name a column (a string), found {source!r}")
    target, source = target.strip(), source.strip()
    if not target or not source:
        raise UsageError(f"{where}: expected TARGET=SOURCE, found {target}={source}")
    if target.startswith("default."):
        return target[len("default."):], None, False, source, None
    optional = source.endswith("?")
    body = source.rstrip("?").strip()
    factor = None
    m = re.fullmatch(r"(.*?)\s*\*\s*([0-9.eE+-]+)", body)
    if m:
        try:
            factor = float(m.group(2))
        except ValueError:
            raise UsageError(f"{where}: {target}={source}: {m.group(2)!r} is not a number") from None
        body = m.group(1)
    alts = tuple(a.strip() for a in body.split("|"))
    if any(not a for a in alts):
        raise UsageError(f"{where}: empty path in {target}={source}")
    return target, alts, optional, None, factor


def parse_map(text: str | dict, where: str = "--map") -> TableMap:
    """`target=source,...` (or a dict of them, as a TOML section holds) → TableMap."""
    if isinstance(text, dict):
        pairs: list[tuple[str, Any]] = []
        for k, v in text.items():
            if k == "default" and isinstance(v, dict):
                pairs.extend((f"default.{dk}", dv) for dk, dv in v.items())
            else:
                pairs.append((k, v))
    else:
        pairs = []
        for item in (p for p in text.split(",") if p.strip()):
            if "=" not in item:
                raise UsageError(f"{where}: expected TARGET=SOURCE, found {item.strip()!r}")
            k, v = item.split("=", 1)
            pairs.append((k, v))
    columns: dict[str, tuple[str, ...]] = {}
    optional: set[str] = set()
    defaults: dict[str, str] = {}
    scale: dict[str, float] = {}
    for k, v in pairs:
        target, alts, opt, default, factor = _parse_pair(k, str(v) if isinstance(v, (int, float)) and k.startswith("default.") else v, where)
        if alts is None:
            defaults[target] = str(default)
            continue
        if target in columns:
            raise UsageError(f"{where}: {target} is mapped twice")
        columns[target] = alts
        if opt:
            optional.add(target)
        if factor is not None:
            scale[target] = factor
    return TableMap(columns, frozenset(optional), defaults, scale)


def parse_mappings(specs: Iterable[str] | None, main: str) -> dict[str, TableMap]:
    """The --map arguments of one command: each is `target=source,...` for the command's main input,
    `KIND:target=source,...` for another (sources:persona_id=user), or a TOML mapping file."""
    out: dict[str, TableMap] = {}

    def add(kind: str, tmap: TableMap) -> None:
        out[kind] = out[kind].merged(tmap) if kind in out else tmap

    for spec in specs or ():
        if spec.endswith(".toml"):
            doc = read_toml(spec)
            sections = {k: v for k, v in doc.items() if k in INPUT_KINDS and isinstance(v, dict)}
            rest = {k: v for k, v in doc.items() if k not in sections}
            for kind, section in sections.items():
                add(kind, parse_map(section, f"{spec} [{kind}]"))
            if rest:
                add(main, parse_map(rest, spec))
            continue
        kind, _, body = spec.partition(":") if spec.split("=", 1)[0].count(":") else ("", "", spec)
        kind = kind.strip() or main
        if kind not in INPUT_KINDS:
            raise UsageError(f"--map {spec}: unknown input {kind!r} (known: {', '.join(INPUT_KINDS)})")
        add(kind, parse_map(body, f"--map {spec}"))
    return out


def table_map(mapping) -> TableMap:
    if mapping is None:
        return TableMap()
    if isinstance(mapping, TableMap):
        return mapping
    if isinstance(mapping, (str, dict)):
        return parse_map(mapping)
    raise UsageError(f"a mapping is a TableMap, a dict or 'target=source,...', not {type(mapping).__name__}")


class Table(os.PathLike):
    """A file and the mapping to read it with: `Table("export.jsonl", "text=memory,persona_id=user_id")`.
    `records` names the keys under which a JSON document (or a JSONL line) holds its list of records
    (memjudge.formats.documents); "" among them lets an object without any be one record itself."""

    def __init__(self, path: str | os.PathLike, mapping: TableMap | dict | str | None = None, records: tuple[str, ...] = ()):
        self.path = Path(path)
        self.mapping = table_map(mapping)
        self.records = tuple(records)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"Table({str(self.path)!r}, {self.mapping.describe()!r})"


# ---------------------------------------------------------------------------------------
# applying a mapping to raw rows


def lookup(row: dict, path: str):
    """The value at `path` in a row (`_MISSING` when the row lacks it); see the module docstring."""
    if path in row:
        return row[path]
    head, *steps = path.split(".")
    if head not in row:
        return _MISSING
    value = row[head]
    for step in steps:
        if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
            try:
                value = json.loads(value)
            except (json.JSONDecodeError, RecursionError):
                return _MISSING
        if isinstance(value, dict):
            if step not in value:
                return _MISSING
            value = value[step]
        elif isinstance(value, (list, tuple)) or type(value).__name__ == "ndarray":
            try:
                value = value[int(step)]
            except (ValueError, IndexError):
                return _MISSING
        else:
            return _MISSING
    return value


def _why_missing(row: dict, path: str) -> str:
    head, *steps = path.split(".")
    if head not in row:
        return f"no column {head!r}"
    walked = head
    value = row[head]
    for step in steps:
        if value is None:
            return f"{walked!r} is null"
        nxt = lookup({walked: value}, f"{walked}.{step}")
        if nxt is _MISSING:
            return f"no {step!r} in {walked!r}"
        walked, value = f"{walked}.{step}", nxt
    return f"no {path!r}"


def apply_map(rows: list[dict], lines: list[int], path: Path, tmap: TableMap) -> list[dict]:
    """Rows of memjudge's columns from raw rows: each target from its path, the rest kept as they are."""
    columns = set().union(*(r.keys() for r in rows)) if rows else set()
    for target, alts in tmap.columns.items():
        if alts == (DERIVE,):
            continue
        heads = [a.split(".", 1)[0] for a in alts]
        if target not in tmap.optional and target not in tmap.defaults and not any(a in columns or h in columns for a, h in zip(alts, heads)):
            shown = ", ".join(sorted(columns)[:12]) + (", ..." if len(columns) > 12 else "")
            raise InputError(path, f"--map {target}={' | '.join(alts)}: no column {heads[0]!r} (columns: {shown})", lines[0] if lines else None)
    # A rename consumes its column; of alternatives, each row gives up only the one it used.
    consumed = {alts[0] for alts in tmap.columns.values() if len(alts) == 1 and alts[0] in columns} - set(tmap.columns)
    sources = {a for alts in tmap.columns.values() for a in alts}
    clash = [t for t in tmap.columns if t in columns and t not in tmap.columns[t] and t not in sources]
    if clash:
        t = clash[0]
        raise InputError(path, f"--map {t}={' | '.join(tmap.columns[t])}: the file already has a column {t!r}; "
                               f"map that one to another name first (e.g. --map original_{t}={t})", lines[0] if lines else None)
    out = []
    for row, line in zip(rows, lines):
        new = {k: v for k, v in row.items() if k not in consumed}
        for target, alts in tmap.columns.items():
            if alts == (DERIVE,):
                continue
            value = _MISSING
            for a in alts:
                value = lookup(row, a)
                if value is not _MISSING and value is not None:
                    if len(alts) > 1 and a in row and a not in tmap.columns:
                        new.pop(a, None)
                    break
            if target in tmap.scale and value is not _MISSING and value is not None:
                value = _scaled(value, tmap.scale[target])
            if value is _MISSING or value is None:
                if target in tmap.defaults:
                    value = tmap.defaults[target]
                elif value is _MISSING and target not in tmap.optional:
                    raise InputError(path, f"--map {target}={' | '.join(alts)}: {_why_missing(row, alts[0])}", line)
                else:
                    value = None
            new[target] = value
        for target, value in tmap.defaults.items():
            if target not in tmap.columns:
                new[target] = value
        for gone in tmap.drop:
            _drop(new, gone)
        out.append(new)
    return out


def _drop(row: dict, path: str) -> None:
    head, _, rest = path.partition(".")
    if not rest:
        row.pop(head, None)
    elif isinstance(row.get(head), dict):
        row[head] = dict(row[head])  # a copy: the raw row may be shared
        _drop(row[head], rest)


def _scaled(value, factor: float):
    """A number times `factor` (a 0-100 score as a confidence in [0, 1]); anything else is left
    for the reader's validation to name."""
    if isinstance(value, bool):
        return value
    try:
        return float(value) * factor
    except (TypeError, ValueError):
        return value


def derived_id(persona_id: str, text: str) -> str:
    """A stable assertion id: the first 16 hex digits of sha256 over persona and text."""
    return hashlib.sha256(f"{persona_id}\x1f{text}".encode()).hexdigest()[:16]


def describe_input(obj, df) -> dict[str, Any]:
    """What config.json says about how an input was read beyond its path: the mapping, a derived
    id, a rendered transcript (empty for a plain file)."""
    out: dict[str, Any] = {}
    if isinstance(obj, Table):
        if obj.mapping:
            out["mapping"] = obj.mapping.describe()
        if obj.records:
            out["records"] = list(obj.records)
    for key in ("derived", "transcript"):
        if key in getattr(df, "attrs", {}):
            out[key] = df.attrs[key]
    return out
