"""The document model (heading, paragraph, note, bullets, table, figure) that the report
is built from before it is rendered to Markdown and HTML, and how its numbers print."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from memjudge.reporting.reader import interval, num, stat


def pct(x, digits: int = 2) -> str:
    v = num(x)
    return "n/a" if v is None else f"{100 * v:.{digits}f}"


def pts(x, digits: int = 2) -> str:
    """A change in percentage points, always signed."""
    v = num(x)
    return "n/a" if v is None else f"{100 * v:+.{digits}f}"


def coef(x, digits: int = 3) -> str:
    v = num(x)
    return "n/a" if v is None else f"{v:.{digits}f}"


def _with_ci(fmt, x, ci) -> str:
    """`fmt(x)`, followed by the interval in brackets when both bounds are numbers."""
    lo, hi = interval(ci)
    return fmt(x) + (f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else "")


def pct_ci(x, ci) -> str:
    return _with_ci(pct, x, ci)


def coef_ci(x, ci) -> str:
    return _with_ci(coef, x, ci)


def paired_ci(p) -> str:
    """A paired difference {mean, lo, hi} in signed points, its interval in brackets."""
    if stat(p) is None:
        return "n/a"
    return _with_ci(pts, p["mean"], (p.get("lo"), p.get("hi")))


def pvalue(x) -> str:
    v = num(x)
    return "n/a" if v is None else "< 0.001" if v < 0.001 else f"{v:.3f}"


def count(x) -> str:
    v = num(x)
    return "n/a" if v is None else f"{int(round(v)):,}"


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
        cells = [r[i] for r in t.rows if i < len(r) and r[i] not in ("", "—", "n/a")]
        out.append(i > 0 and bool(cells) and sum(bool(_NUMBER.match(c)) for c in cells) * 2 >= len(cells))
    return out
