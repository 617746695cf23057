"""Writers of memjudge's file formats: JSON and JSONL from DataFrames, numpy and pandas values.

JSON has no NaN: `json_safe` turns NaN and ±inf into null and numpy/pandas scalars into plain
ones. Files are written with `memjudge._util.files` (atomically, fsynced, never through a
planted link), whose helpers are re-exported here for the run-folder writers.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memjudge._util import files
from memjudge._util.files import check_dir, make_dir, open_private, refuse_links, write_atomic
from memjudge.formats.columns import LINE

__all__ = [
    "check_dir", "dumps", "frame_records", "json_safe", "make_dir", "open_private", "refuse_links",
    "text_as_objects", "write_atomic", "write_json", "write_jsonl",
]


def json_safe(obj):
    """Plain JSON types, with NaN and ±inf as null (JSON has no NaN)."""
    # The plain types first, by exact type: nearly every value of a label or candidate row is
    # one, and a writer calls this once per value (the general checks below cost ~3x as much).
    t = type(obj)
    if t is str or t is int or t is bool or obj is None:
        return obj
    if t is float:
        return obj if math.isfinite(obj) else None
    if t is dict:
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, dict):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [json_safe(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return None if math.isnan(f) or math.isinf(f) else f
    if obj is None or isinstance(obj, str):
        return obj
    if obj is pd.NA or obj is pd.NaT:
        return None
    if isinstance(obj, os.PathLike):   # a Path, or a Table (its mapping is recorded beside it)
        return str(os.fspath(obj))
    raise TypeError(f"not JSON-serialisable: {type(obj).__name__}")


def dumps(obj: Any, **kw: Any) -> str:
    """`json.dumps` of `json_safe(obj)`: UTF-8 text as is, no NaN."""
    return json.dumps(json_safe(obj), ensure_ascii=False, allow_nan=False, **kw)


def write_json(path, obj) -> None:
    """Indented JSON of `obj` (made plain by `json_safe`), written atomically: a reader never
    sees half a file. The folder is created if needed."""
    path = Path(path)
    make_dir(path.parent)
    write_atomic(path, dumps(obj, indent=2) + "\n")


def write_jsonl(path, rows: Iterable[dict]) -> None:
    """One JSON object per line (made plain by `json_safe`), streamed and written atomically."""
    path = Path(path)
    make_dir(path.parent)
    files.write_lines(path, (dumps(r) + "\n" for r in rows))


def text_as_objects(df: pd.DataFrame) -> pd.DataFrame:
    """Text columns as plain objects with None for missing. pandas 3 infers a string dtype
    whose missing value is NaN; a label frame's null verdict must read the same whatever
    pandas is installed and whatever path (online, batch, cache) produced it."""
    for col in df.columns:
        if isinstance(df[col].dtype, pd.StringDtype):
            df[col] = pd.Series([None if v is pd.NA or (isinstance(v, float) and math.isnan(v)) else v
                                 for v in df[col].tolist()], index=df.index, dtype=object)
    return df


def frame_records(df: pd.DataFrame) -> list[dict]:
    """DataFrame rows as JSON-safe dicts (NaN → null)."""
    cols = [c for c in df.columns if c != LINE]
    return [json_safe(dict(zip(cols, row))) for row in df[cols].itertuples(index=False, name=None)]
