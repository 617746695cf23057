"""Records held in JSON documents: a `.json` file (a list of objects, or an object holding the list
under a named key, as mem0's ``get_all()`` returns ``{"results": [...]}``), or JSONL lines that hold
such lists. Each record keeps the 1-based line on which it starts, so that errors name it.

The document is parsed once by `json.loads` (its errors carry a line); the positions of the list's
elements are then found with the standard decoder's `raw_decode`, element by element, which is exact
for any valid JSON (strings, escapes and nesting are the decoder's business, not a scanner's).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Sequence
from pathlib import Path

from memjudge.errors import InputError

__all__ = ["document_rows", "expand_line", "parse_json"]

_DECODER = json.JSONDecoder()
_WS = re.compile(r"[ \t\n\r]*")


class _Text:
    def __init__(self, text: str):
        self.text = text
        self.newlines = [m.start() for m in re.finditer("\n", text)]

    def line(self, pos: int) -> int:
        return bisect.bisect_left(self.newlines, pos) + 1

    def ws(self, pos: int) -> int:
        m = _WS.match(self.text, pos)
        return m.end() if m else pos

    def items(self, pos: int) -> list[tuple[int, object]]:
        """(line, value) of each element of the list that starts at `pos`."""
        out: list[tuple[int, object]] = []
        pos = self.ws(pos + 1)
        if self.text[pos] == "]":
            return out
        while True:
            value, end = _DECODER.raw_decode(self.text, pos)
            out.append((self.line(pos), value))
            pos = self.ws(end)
            if self.text[pos] != ",":
                return out
            pos = self.ws(pos + 1)

    def members(self, pos: int) -> dict[str, int]:
        """Position of each member's value of the object that starts at `pos`."""
        out: dict[str, int] = {}
        pos = self.ws(pos + 1)
        if self.text[pos] == "}":
            return out
        while True:
            key, end = _DECODER.raw_decode(self.text, pos)
            pos = self.ws(self.ws(end) + 1)  # past the colon
            out[str(key)] = pos
            _, end = _DECODER.raw_decode(self.text, pos)
            pos = self.ws(end)
            if self.text[pos] != ",":
                return out
            pos = self.ws(pos + 1)


def _records(path: Path, found: list[tuple[int, object]]) -> tuple[list[dict], list[int]]:
    rows, lines = [], []
    for line, value in found:
        if not isinstance(value, dict):
            raise InputError(path, f"expected a JSON object for each record, found {type(value).__name__}", line)
        rows.append(value)
        lines.append(line)
    return rows, lines


def parse_json(path, text: str):
    """A JSON document's value; invalid JSON is an InputError at its line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg})", e.lineno) from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None


def document_rows(path: Path, text: str, keys: Sequence[str]) -> tuple[list[dict], list[int]]:
    """The records of a JSON document: its elements if it is a list; else the lists under those of
    `keys` that it has, one after the other; else, when `keys` holds "" (or is empty), the object itself as one record."""
    doc = parse_json(path, text)
    t = _Text(text)
    start = t.ws(0)
    if isinstance(doc, list):
        return _records(path, t.items(start))
    if not isinstance(doc, dict):
        raise InputError(path, f"expected a JSON list or object, found {type(doc).__name__}", t.line(start))
    members = t.members(start)
    found: list[tuple[int, object]] = []
    present = [k for k in keys if k and k in doc]
    for key in present:
        if not isinstance(doc[key], list):
            raise InputError(path, f"{key!r} must be a list of records, found {type(doc[key]).__name__}", t.line(members[key]))
        found.extend(t.items(members[key]))
    if present:
        return _records(path, found)
    if not keys or "" in keys:
        return [doc], [t.line(start)]
    return [], []


def expand_line(obj: dict, line: int, path: Path, keys: Sequence[str]) -> list[dict]:
    """A JSONL line's records: the lists under those of `keys` it has, else the line itself (when
    `keys` allows it, i.e. holds "" or is empty)."""
    present = [k for k in keys if k and k in obj]
    out: list[dict] = []
    for key in present:
        value = obj[key]
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise InputError(path, f"{key!r} must be a list of JSON objects", line)
        out.extend(value)
    if present:
        return out
    return [obj] if not keys or "" in keys else []
