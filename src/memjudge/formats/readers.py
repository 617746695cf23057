"""Readers of memjudge's file formats (spec §2, §6 and §10).

Every reader takes JSONL, CSV or Parquet by extension and either returns a validated
DataFrame or raises `InputError` naming the file and the 1-based line (for Parquet, the
1-based row). A line's number is kept in the column `LINE` (memjudge.formats.columns) until
validation ends; `keep_line=True` keeps it for callers that report errors of their own.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from memjudge.errors import InputError
from memjudge.formats.columns import (
    CANDIDATE_COLUMNS,
    COVERAGE_COLUMNS,
    EXTENSIONS,
    FACT_COLUMNS,
    GOLD_COLUMNS,
    LABEL_COLUMNS,
    LABEL_REQUIRED,
    LINE,
    REPLICATE_OF,
    SOURCE_COLUMNS,
)
from memjudge.formats.documents import document_rows, expand_line
from memjudge.formats.mapping import Table, apply_map, derived_id
from memjudge.formats.tomlfile import read_toml
from memjudge.formats.transcripts import is_transcript, render_transcripts

__all__ = [
    "check_sources_cover", "csv_records", "decode_file", "is_blank", "jsonl_lines", "jsonl_records",
    "read_candidates", "read_coverage", "read_facts", "read_gold", "read_labels", "read_sources",
    "read_table", "read_toml",
]


# ---------------------------------------------------------------------------------------
# raw records


def _check_path(path: Path) -> str:
    if path.is_dir():
        raise InputError(path, "is a directory, expected a file")
    if not path.exists():
        raise InputError(path, "no such file")
    ext = path.suffix.lower()
    if ext not in EXTENSIONS:
        raise InputError(path, f"unknown extension {ext or '(none)'!r} (expected .jsonl, .json, .csv or .parquet)")
    return ext


def decode_file(path: Path) -> str:
    """The file's text (UTF-8, BOM accepted); empty or undecodable → InputError with the line."""
    data = path.read_bytes()
    if not data.strip():
        raise InputError(path, "file is empty")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise InputError(path, f"not valid UTF-8 (byte 0x{data[e.start]:02x})", line) from None


def jsonl_lines(text: str) -> list[str]:
    """A JSONL text's lines. Only "\n" ends a line ("\r\n" too): `str.splitlines()` also
    breaks at U+2028, U+2029, U+0085 and others, which JSON allows raw inside strings."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def is_blank(line: str) -> bool:
    """Nothing but JSON whitespace (str.strip() would also eat U+2028 and friends)."""
    return not line.strip(" \t\r\n")


def jsonl_records(path: Path):
    """(line number, object) for each non-blank line; anything but a JSON object is an error."""
    text = decode_file(path)
    for n, raw in enumerate(jsonl_lines(text), start=1):
        if not is_blank(raw):
            yield n, _json_object(path, n, raw)


def _json_object(path: Path, n: int, raw: str) -> dict:
    """Line `n`'s JSON object; anything else (bad JSON, too deep, not an object) is its error."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg})", n) from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply", n) from None
    if not isinstance(obj, dict):
        raise InputError(path, f"expected a JSON object, found {type(obj).__name__}", n)
    return obj


def _jsonl_rows(path: Path) -> tuple[list[dict], list[int]]:
    rows: list[dict] = []
    lines: list[int] = []
    for n, obj in jsonl_records(path):
        rows.append(obj)
        lines.append(n)
    if not rows:
        raise InputError(path, "file is empty")
    return rows, lines


def csv_records(path: Path, required=()):
    """(first line of the record, {column: text}) for each non-blank CSV record; checks the
    header (required columns, no duplicates) and every record's width.

    Quoted fields may span lines, so a record's number is the line it starts on.
    """
    reader = csv.reader(io.StringIO(decode_file(path), newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InputError(path, "file is empty") from None
    except csv.Error as e:
        raise InputError(path, f"malformed CSV header ({e})", 1) from None
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(path, f"missing required column(s): {', '.join(missing)}", 1)
    if len(set(header)) != len(header):
        raise InputError(path, "duplicate column names in header", 1)
    start = reader.line_num + 1
    while True:
        try:
            rec = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise InputError(path, f"malformed CSV ({e})", start) from None
        if rec and not (len(rec) == 1 and not rec[0].strip()):
            if len(rec) != len(header):
                raise InputError(path, f"expected {len(header)} fields, found {len(rec)}", start)
            yield start, dict(zip(header, rec))
        start = reader.line_num + 1


def _csv_rows(path: Path) -> tuple[list[dict], list[int]]:
    lines: list[int] = []
    rows: list[dict] = []
    for n, rec in csv_records(path):
        lines.append(n)
        # CSV has no null: an empty field means "missing".
        rows.append({k: (None if v == "" else v) for k, v in rec.items()})
    if not rows:
        raise InputError(path, "no rows after the header")
    return rows, lines


def _parquet_rows(path: Path) -> tuple[list[dict], list[int]]:
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except Exception as e:  # pyarrow raises many types for a bad file
        raise InputError(path, f"not a readable Parquet file ({type(e).__name__}: {' '.join(str(e).split())})") from None
    if table.num_rows == 0:
        raise InputError(path, "file is empty")
    # Through Python objects, not pandas: pandas turns null into NaN, and a NaN confidence
    # must stay an error while a null one means "missing".
    return table.to_pylist(), list(range(1, table.num_rows + 1))


def _frame(rows: list[dict], lines: list[int], path: Path) -> pd.DataFrame:
    # Object columns and None for absent keys, so an explicit NaN stays distinguishable from "missing".
    cols = list(dict.fromkeys(k for r in rows for k in r))
    if LINE in cols:
        raise InputError(path, f"column name {LINE!r} is reserved")
    df = pd.DataFrame([[r.get(c) for c in cols] for r in rows], columns=cols, dtype=object)
    df[LINE] = lines
    return df


# Lines parsed at once by the column reader (one JSON array of them).
_CHUNK_LINES = 4096


def _jsonl_lines_numbered(text: str):
    """(line number, line) of each non-blank line of a JSONL text, split as `jsonl_lines`
    splits it, one at a time (no list of every line)."""
    pos, n, end = 0, 0, len(text)
    while pos < end:
        nl = text.find("\n", pos)
        if nl < 0:
            nl = end
        n += 1
        line = text[pos:nl]
        pos = nl + 1
        if line.endswith("\r"):
            line = line[:-1]
        if not is_blank(line):
            yield n, line


def _parse_chunk(path: Path, chunk: list[tuple[int, str]]) -> list:
    """Each line's JSON object, with the errors (and their order) of `jsonl_records`: one parse
    of the lines as one array, line by line when that fails or does not give one object per line."""
    try:
        whole = json.loads("[" + ",".join(line for _, line in chunk) + "]")
    except (json.JSONDecodeError, RecursionError):
        whole = None
    if whole is not None and len(whole) == len(chunk) and all(type(obj) is dict for obj in whole):
        return whole
    return [_json_object(path, n, raw) for n, raw in chunk]


def _shared(value, memo: dict):
    """One object for equal text (and equal flat dicts, such as a label's usage) across the
    rows: a large file repeats ids, verdicts and rationales thousands of times. Dicts are
    equal only with values of the same types (1, 1.0 and true stay apart)."""
    t = type(value)
    if t is str:
        return memo.setdefault(value, value)
    if t is dict and len(value) <= 8:
        try:
            return memo.setdefault((dict, *((k, type(v), v) for k, v in value.items())), value)
        except TypeError:  # a value that is no key (a list, a dict)
            return value
    return value


def _jsonl_frame(path: Path) -> pd.DataFrame:
    """`_frame(*_jsonl_rows(path), path)`, equal value for value, built column by column from
    chunks of lines: the rows never exist as dicts all at once (a million-row labels file as
    dicts is several GiB), and equal text is one object."""
    text = decode_file(path)
    columns: dict[str, list] = {}
    numbers: list[int] = []
    memo: dict = {}
    chunk: list[tuple[int, str]] = []

    def flush() -> None:
        rows = len(numbers) - len(chunk)  # rows already in the columns
        for obj in _parse_chunk(path, chunk):
            if obj.keys() != columns.keys():
                for k in obj:
                    if k not in columns:
                        columns[k] = [None] * rows
            for c, col in columns.items():
                v = obj.get(c)
                col.append(v if v is None else _shared(v, memo))
            rows += 1
        chunk.clear()

    for n, line in _jsonl_lines_numbered(text):
        chunk.append((n, line))
        numbers.append(n)
        if len(chunk) >= _CHUNK_LINES:
            flush()
    if chunk:
        flush()
    del text
    memo.clear()
    if not numbers:
        raise InputError(path, "file is empty")
    if LINE in columns:
        raise InputError(path, f"column name {LINE!r} is reserved")
    df = pd.DataFrame(columns, dtype=object) if columns else pd.DataFrame(index=range(len(numbers)))
    df[LINE] = numbers
    return df


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """Read any supported file into a DataFrame of raw values plus the `LINE` column; a `Table`
    is read through its column mapping (memjudge.formats.mapping)."""
    mapping = path.mapping if isinstance(path, Table) else None
    records = path.records if isinstance(path, Table) else ()
    path = Path(path)
    ext = _check_path(path)
    if ext == ".jsonl" and not records and not mapping:
        return _jsonl_frame(path)
    if ext == ".json":
        rows, lines = document_rows(path, decode_file(path), records)
        if not rows:
            raise InputError(path, "no records" + (f" (looked for {', '.join(repr(k) for k in records if k)})" if records else ""))
    else:
        rows, lines = (_jsonl_rows if ext == ".jsonl" else _csv_rows if ext == ".csv" else _parquet_rows)(path)
    if records and ext == ".jsonl":
        pairs = [(r, n) for row, n in zip(rows, lines) for r in expand_line(row, n, path, records)]
        if not pairs:
            raise InputError(path, f"no records (looked for {', '.join(repr(k) for k in records if k)})")
        rows, lines = [p[0] for p in pairs], [p[1] for p in pairs]
    if mapping:
        rows = apply_map(rows, lines, path, mapping)
    return _frame(rows, lines, path)


# ---------------------------------------------------------------------------------------
# field validation


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _require_columns(df: pd.DataFrame, path: Path, columns: Iterable[str]) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise InputError(path, f"missing required column(s): {', '.join(missing)}")


def _as_id(df, path, col, values=None):
    """Ids are strings; JSON integers are accepted and converted, floats and bools are not."""
    out = []
    for v, line in zip(df[col] if values is None else values, df[LINE]):
        if _is_missing(v) or (isinstance(v, str) and not v.strip()):
            raise InputError(path, f"missing or empty {col!r}", line)
        if isinstance(v, bool) or not isinstance(v, (str, int, np.integer)):
            raise InputError(path, f"{col!r} must be a string, found {type(v).__name__}", line)
        out.append(str(v))
    df[col] = out


def _as_text(df, path, col):
    for v, line in zip(df[col], df[LINE]):
        if _is_missing(v):
            raise InputError(path, f"missing {col!r}", line)
        if not isinstance(v, str):
            raise InputError(path, f"{col!r} must be a string, found {type(v).__name__}", line)
        if not v.strip():
            raise InputError(path, f"empty {col!r}", line)


def _as_confidence(df, path, required: bool):
    if "confidence" not in df.columns:
        if required:
            raise InputError(path, "missing required column: confidence")
        df["confidence"] = np.nan
        return
    out = np.empty(len(df))
    for i, (v, line) in enumerate(zip(df["confidence"], df[LINE])):
        if v is None:
            if required:
                raise InputError(path, "missing 'confidence'", line)
            out[i] = np.nan
            continue
        if isinstance(v, (bool, np.bool_)):
            raise InputError(path, f"'confidence' must be a number, found {v!r}", line)
        if isinstance(v, str):
            try:
                f = float(v.strip())
            except ValueError:
                raise InputError(path, f"'confidence' must be a number, found {v!r}", line) from None
        elif isinstance(v, (int, float, np.integer, np.floating)):
            f = float(v)
        else:
            raise InputError(path, f"'confidence' must be a number, found {type(v).__name__}", line)
        if math.isnan(f) or math.isinf(f):
            raise InputError(path, f"'confidence' must be finite, found {v!r}", line)
        if not 0.0 <= f <= 1.0:
            raise InputError(path, f"'confidence' must be in [0, 1], found {f!r}", line)
        out[i] = f
    df["confidence"] = out


def _check_unique(df, path, cols: Sequence[str], what: str):
    dup = df.duplicated(subset=list(cols), keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        key = tuple(df[c].iloc[i] for c in cols)
        first = df.loc[(df[list(cols)] == pd.Series(key, index=list(cols))).all(axis=1), LINE].iloc[0]
        shown = key[0] if len(key) == 1 else key
        raise InputError(path, f"duplicate {what} {shown!r} (first at line {first})", int(df[LINE].iloc[i]))


def _finish(df: pd.DataFrame, keep_line: bool) -> pd.DataFrame:
    df = df.reset_index(drop=True)
    return df if keep_line else df.drop(columns=[LINE])


# ---------------------------------------------------------------------------------------
# public readers


def read_candidates(path, *, require_confidence: bool = False, keep_line: bool = False) -> pd.DataFrame:
    """Candidates (spec §2). Extra columns are kept in the order they came. A `Table` whose
    mapping says ``assertion_id=@hash`` derives each id from persona and text; the frame's
    ``attrs["derived"]`` then says so (config.json records it)."""
    derive = isinstance(path, Table) and path.mapping.derives_id
    df = read_table(path)
    path = Path(path)
    missing = [c for c in ("persona_id", "assertion_id", "category", "text") if c not in df.columns and not (derive and c == "assertion_id")]
    if missing:
        hints = {"assertion_id": "--map assertion_id=@hash derives one from persona and text",
                 "category": "--map default.category=NAME puts every row in one category"}
        hint = "; ".join(hints[c] for c in missing if c in hints)
        raise InputError(path, f"missing required column(s): {', '.join(missing)}" + (f" ({hint})" if hint else ""))
    for col in ("persona_id", "category") + (() if derive else ("assertion_id",)):
        _as_id(df, path, col)
    _as_text(df, path, "text")
    if derive:
        if "assertion_id" in df.columns:
            raise InputError(path, "--map assertion_id=@hash: the file already has an assertion_id column (map it away or drop @hash)")
        df["assertion_id"] = [derived_id(p, t) for p, t in zip(df["persona_id"], df["text"])]
        df.attrs["derived"] = {"assertion_id": "sha256(persona_id + U+001F + text), first 16 hex digits"}
    if require_confidence and "confidence" not in df.columns:
        raise InputError(path, "no confidence column: a retention policy thresholds each candidate's confidence "
                               "(map the extractor's score with --map confidence=COLUMN)")
    _as_confidence(df, path, require_confidence)
    _check_unique(df, path, ["assertion_id"], "derived assertion_id (same persona and text)" if derive else "assertion_id")
    front = [c for c in CANDIDATE_COLUMNS if c in df.columns]
    attrs = dict(df.attrs)
    df = df[front + [c for c in df.columns if c not in front]]
    df.attrs.update(attrs)
    return _finish(df, keep_line)


def read_sources(path, *, keep_line: bool = False) -> pd.DataFrame:
    """Sources, one row per persona; an identical repeat is accepted, a conflicting one is not.
    A chat transcript (messages with `role` and `content`, or conversations with `messages`) is
    rendered into one source per persona (memjudge.formats.transcripts)."""
    df = read_table(path)
    path = Path(path)
    if is_transcript(df):
        return _finish(render_transcripts(df, path), keep_line)
    _require_columns(df, path, SOURCE_COLUMNS)
    _as_id(df, path, "persona_id")
    _as_text(df, path, "source")
    seen: dict[str, tuple[str, int]] = {}
    keep = []
    for pid, src, line in zip(df["persona_id"], df["source"], df[LINE]):
        if pid in seen:
            if seen[pid][0] != src:
                raise InputError(path, f"conflicting duplicate source for persona {pid!r} (first at line {seen[pid][1]})", line)
            keep.append(False)
        else:
            seen[pid] = (src, line)
            keep.append(True)
    return _finish(df[np.array(keep)], keep_line)


def read_facts(path, *, keep_line: bool = False) -> pd.DataFrame:
    """Reference facts for coverage: (persona_id, fact_id) unique."""
    df = read_table(path)
    path = Path(path)
    _require_columns(df, path, FACT_COLUMNS)
    _as_id(df, path, "persona_id")
    _as_id(df, path, "fact_id")
    _as_text(df, path, "text")
    _check_unique(df, path, ["persona_id", "fact_id"], "fact")
    return _finish(df, keep_line)


def read_gold(path, *, keep_line: bool = False, unique: bool = True) -> pd.DataFrame:
    """Gold labels: assertion_id, verdict (a non-empty string); optionally annotator, note,
    labelled_at (spec §10). With an `annotator` column a file may hold several rows per
    assertion (an append-only file of `memjudge annotate`): the latest, i.e. last in the file,
    per (assertion_id, annotator) counts. Without it an assertion_id is unique.
    `unique=False` keeps every row (`memjudge estimate` resolves them itself)."""
    df = read_table(path)
    path = Path(path)
    _require_columns(df, path, GOLD_COLUMNS)
    _as_id(df, path, "assertion_id")
    _as_id(df, path, "verdict")
    if unique and "annotator" in df.columns:
        _as_id(df, path, "annotator")
        df = df.drop_duplicates(["assertion_id", "annotator"], keep="last")
    elif unique:
        _check_unique(df, path, ["assertion_id"], "assertion_id")
    return _finish(df, keep_line)


def check_sources_cover(candidates: pd.DataFrame, sources: pd.DataFrame, candidates_path, sources_path) -> None:
    """Every candidate's persona must have a source; names the first candidate line that has none."""
    have = set(sources["persona_id"])
    missing = ~candidates["persona_id"].isin(have)
    if missing.any():
        i = int(np.flatnonzero(missing.to_numpy())[0])
        pid = candidates["persona_id"].iloc[i]
        line = int(candidates[LINE].iloc[i]) if LINE in candidates.columns else None
        raise InputError(candidates_path, f"persona {pid!r} has no source in {sources_path}", line)


def read_labels(paths, *, keep_line: bool = False) -> pd.DataFrame:
    """One or more labels files (spec §6), concatenated.

    `verdict` is a string or null (null = no valid answer; its `error` says why). A repeated
    (assertion_id, judge, rubric, replicate) is an error: the scorer never writes one.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames = []
    for p in paths:
        p = Path(p)
        df = read_table(p)
        _require_columns(df, p, LABEL_REQUIRED)
        for col in ("assertion_id", "persona_id", "category", "judge", "rubric"):
            _as_id(df, p, col)
        reps = []
        for v, line in zip(df["replicate"], df[LINE]):
            try:
                r = int(v)
                if isinstance(v, bool) or float(v) != r or r < 0:
                    raise ValueError
            except (TypeError, ValueError):
                raise InputError(p, f"'replicate' must be a non-negative integer, found {v!r}", line) from None
            reps.append(r)
        df["replicate"] = np.array(reps, dtype=np.int64)
        if REPLICATE_OF in df.columns:
            _check_replicate_of(df, p)
        verdicts: list[str | None] = []
        for v, line in zip(df["verdict"], df[LINE]):
            if _is_missing(v):
                verdicts.append(None)
            elif isinstance(v, str) and v.strip():
                verdicts.append(v.strip())
            else:
                raise InputError(p, f"'verdict' must be a non-empty string or null, found {v!r}", line)
        df["verdict"] = pd.Series(verdicts, dtype=object, index=df.index)
        for col in LABEL_COLUMNS:
            if col not in df.columns:
                df[col] = None
        df["judge_score"] = pd.to_numeric(df["judge_score"], errors="coerce")
        df["_file"] = str(p)
        frames.append(df)
    out = pd.concat(frames, ignore_index=True)
    key = ["assertion_id", "judge", "rubric", "replicate"]
    dup = out.duplicated(subset=key, keep="first")
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        row = out.iloc[i]
        raise InputError(row["_file"], f"duplicate label for {row['assertion_id']!r} (judge {row['judge']}, rubric {row['rubric']}, replicate {row['replicate']})", int(row[LINE]))
    out = out.drop(columns=["_file"])
    return _finish(out, keep_line)


def _check_replicate_of(df: pd.DataFrame, p: Path) -> None:
    """replicate_of (a copied replicate, spec §6) is null or an earlier replicate of the same row."""
    copied: list[int | None] = []
    for v, r, line in zip(df[REPLICATE_OF], df["replicate"], df[LINE]):
        if _is_missing(v):
            copied.append(None)
            continue
        try:
            c = int(v)
            if isinstance(v, bool) or float(v) != c or not 0 <= c < r:
                raise ValueError
        except (TypeError, ValueError):
            raise InputError(p, f"'{REPLICATE_OF}' must be null or an earlier replicate than {r}, found {v!r}", line) from None
        copied.append(c)
    df[REPLICATE_OF] = pd.array(copied, dtype="Int64")


def read_coverage(paths, *, keep_line: bool = False) -> pd.DataFrame:
    """Coverage answers (`memjudge score --rubric coverage`, or simulated): covered_by is a list of ids."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    frames = []
    for p in paths:
        p = Path(p)
        df = read_table(p)
        _require_columns(df, p, ["persona_id", "fact_id", "covered_by"])
        _as_id(df, p, "persona_id")
        _as_id(df, p, "fact_id")
        cov: list[list[str] | None] = []
        for v, line in zip(df["covered_by"], df[LINE]):
            if isinstance(v, str):  # CSV: a JSON list in one field
                try:
                    v = json.loads(v)
                except (json.JSONDecodeError, RecursionError):
                    raise InputError(p, "'covered_by' must be a JSON list of assertion ids", line) from None
            if v is None:
                cov.append(None)  # the judge gave no valid answer for this persona
                continue
            if isinstance(v, np.ndarray):
                v = v.tolist()
            if not isinstance(v, list) or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in v):
                raise InputError(p, "'covered_by' must be a list of assertion ids", line)
            cov.append([str(x) for x in v])
        df["covered_by"] = pd.Series(cov, dtype=object, index=df.index)
        for col in COVERAGE_COLUMNS:
            if col not in df.columns:
                df[col] = None
        if df["replicate"].isna().all():
            df["replicate"] = 0
        frames.append(df)
    return _finish(pd.concat(frames, ignore_index=True), keep_line)
