"""JSON text of the run folder's lines (journal, labels, coverage): the plain json fast path,
then values of extra columns (numpy scalars, Parquet timestamps, decimals, bytes) in their
JSON, ISO or text form, and NaN as null."""

from __future__ import annotations

from memjudge import formats as io
from memjudge._util import jsontext

# json.dumps(..., ensure_ascii=False, allow_nan=False), made once: a run pays it per line
# (journal and labels).
_encode = jsontext.encoder(allow_nan=False)


def json_line(row: dict) -> str:
    """One JSONL line; the plain json fast path, then NaN as null and other values of extra
    columns (numpy scalars, Parquet timestamps, decimals) as their JSON or ISO/text form."""
    try:
        return _encode(row) + "\n"
    except (TypeError, ValueError):
        return _encode(lenient(row)) + "\n"


def lenient(obj):
    """`obj` as JSON-ready values: what json_safe takes, else ISO text, decoded bytes or str()."""
    if isinstance(obj, dict):
        return {str(k): lenient(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [lenient(v) for v in obj]
    try:
        return io.json_safe(obj)
    except TypeError:
        if hasattr(obj, "isoformat"):
            return obj.isoformat()
        if isinstance(obj, bytes):
            return obj.decode("utf-8", "replace")
        return str(obj)


__all__ = ["json_line", "lenient"]
