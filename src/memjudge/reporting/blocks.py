"""The document model (heading, paragraph, note, bullets, table, figure) that the report
is built from before it is rendered to Markdown and HTML. Its numbers print by the one
convention of `memjudge._util.text` (a figure that cannot be computed is `MISSING`, "—")."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memjudge._util.text import MISSING


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Note:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    caption: str
    header: list[str]
    rows: list[list[str]]
    notes: str = ""


@dataclass
class FigureBlock:
    path: Path
    caption: str
_NUMBER = re.compile(r"^[-+]?\d")


def numeric_columns(t: Table) -> list[bool]:
    """Columns whose cells are mostly numbers are right-aligned; text columns stay left."""
    out = []
    for i in range(len(t.header)):
        cells = [r[i] for r in t.rows if i < len(r) and r[i] not in ("", MISSING)]
        out.append(i > 0 and bool(cells) and sum(bool(_NUMBER.match(c)) for c in cells) * 2 >= len(cells))
    return out
