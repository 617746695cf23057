"""The gold file written by `memjudge annotate` (spec §10).

Format: JSONL, one decision per line with the fields `assertion_id, verdict, annotator, note,
labelled_at` (ISO 8601, UTC). The file is append-only: a changed mind appends a newer row,
and readers take the latest row (the last in the file) per (assertion_id, annotator), as
`memjudge.formats.read_gold` does. A skip is not a decision and is not written.

Durability: each row is one `os.write` on a descriptor opened with O_APPEND, then `os.fsync`,
before the server answers the page; so a decision the page saw acknowledged survives a kill
of the server, and two annotators may append to one file at the same time (each row lands
whole). A kill in the middle of a write can leave a torn last line without its newline; it
was never acknowledged, so `GoldWriter` cuts it off when it opens the file and says so.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from memjudge._util.files import fsync_dir
from memjudge.errors import InputError

GOLD_FIELDS = ["assertion_id", "verdict", "annotator", "note", "labelled_at"]
VERDICTS = ("supported", "unsupported", "partial")


def now_utc() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def repair_tail(path) -> str | None:
    """Cut a torn last line (no trailing newline and not a JSON object) off the file; a
    complete last row that only lacks its newline gets one. Returns what was done, or None."""
    path = Path(path)
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return None
        cut = data.rfind(b"\n") + 1
        tail = data[cut:]
        try:
            ok = isinstance(json.loads(tail.decode("utf-8")), dict)
        except (UnicodeDecodeError, json.JSONDecodeError):
            ok = False
        if ok:
            f.write(b"\n")
            msg = "added the missing newline after its last row"
        else:
            f.truncate(cut)
            msg = f"dropped an incomplete last line ({len(tail)} bytes, a write cut off by a kill; it was never acknowledged)"
        f.flush()
        os.fsync(f.fileno())
    return msg


class GoldWriter:
    """Appends decisions of one annotator to a gold file; each `append` is on disk when it returns."""

    def __init__(self, path, annotator: str):
        self.path = Path(path)
        self.annotator = annotator
        if self.path.is_dir():
            raise InputError(self.path, "is a directory, expected a gold file (.jsonl)")
        self.repaired = repair_tail(self.path)
        created = not self.path.exists()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        if created:  # the new file's directory entry must survive a crash too
            fsync_dir(self.path.parent)

    def append(self, assertion_id: str, verdict: str, note: str | None = None) -> dict:
        row = {"assertion_id": assertion_id, "verdict": verdict, "annotator": self.annotator,
               "note": note or None, "labelled_at": now_utc()}
        data = (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8")
        fd = self._fd
        if fd is None:
            raise ValueError(f"{self.path}: the gold writer is closed")
        view = memoryview(data)
        while view:  # a regular file takes the whole row in one write; loop only on a short write
            view = view[os.write(fd, view):]
        os.fsync(fd)
        return row

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_gold_rows(path) -> pd.DataFrame:
    """The standing decisions in a gold file (latest per assertion and annotator); an absent
    or empty file has none. Errors name the file and line (memjudge.formats.read_gold)."""
    from memjudge.formats import read_gold

    path = Path(path)
    if not path.exists() or (path.is_file() and not path.read_bytes().strip()):
        return pd.DataFrame({c: pd.Series(dtype=object) for c in GOLD_FIELDS})
    df = read_gold(path)
    if "annotator" not in df.columns:
        raise InputError(path, "has no 'annotator' column: memjudge annotate appends to its own gold files only (use a new --out)")
    for col in GOLD_FIELDS:
        if col not in df.columns:
            df[col] = None
    return df


def latest_gold(df: pd.DataFrame) -> pd.DataFrame:
    """The latest row (last in file order) per (assertion_id, annotator)."""
    return df.drop_duplicates(["assertion_id", "annotator"], keep="last").reset_index(drop=True)


def gold_raters(gold: pd.DataFrame, labels: pd.DataFrame, replicate=0) -> tuple[pd.DataFrame, list[str]]:
    """A gold frame with several annotators as label rows of one rater per annotator,
    judge `human:NAME`, for `memjudge agreement`. Personas and categories come from the
    labels (the gold file has none); gold rows of assertions absent from the labels are
    left out and counted in a note. The rows carry the labels' rubric when they have one, so
    rater names stay plain, and the replicate agreement reads (`majority` of one row is it)."""
    first = labels.drop_duplicates("assertion_id").set_index("assertion_id")
    g = gold[gold["assertion_id"].isin(first.index)]
    notes = []
    if len(g) < len(gold):
        notes.append(f"{len(gold) - len(g)} gold rows name assertions absent from the labels (left out)")
    rubrics = labels["rubric"].astype(str).unique()
    rows = pd.DataFrame({
        "assertion_id": g["assertion_id"].to_numpy(),
        "persona_id": first.loc[g["assertion_id"], "persona_id"].to_numpy(),
        "category": first.loc[g["assertion_id"], "category"].to_numpy(),
        "judge": ("human:" + g["annotator"].astype(str)).to_numpy(),
        "rubric": rubrics[0] if len(rubrics) == 1 else "gold",
        "replicate": 0 if replicate == "majority" else int(replicate),
        "verdict": g["verdict"].astype(str).to_numpy(),
    })
    return rows, notes


__all__ = ["GOLD_FIELDS", "VERDICTS", "GoldWriter", "gold_raters", "latest_gold", "now_utc", "read_gold_rows", "repair_tail"]
