"""memjudge's file formats (spec §2, §6 and §10): column names, readers, writers, `Estimate`.

- `columns`: the columns of each format and the readers' line column `LINE`.
- `mapping`: column mappings, `Table(path, mapping)`: any table read as one of these formats.
- `transcripts`: chat transcripts rendered as sources.
- `readers`: JSONL, CSV or Parquet in, a validated DataFrame out, or an `InputError` naming the
  file and the 1-based line.
- `writers`: JSON and JSONL out (NaN as null), written atomically through `memjudge._util.files`.
- `estimate`: the one shape of a figure with its interval, ``{"value", "lo", "hi"}``.

Everything is re-exported here: ``from memjudge.formats import read_candidates``.
"""

from __future__ import annotations

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
    only_rubric,
    rubric_name,
)
from memjudge.formats.estimate import Estimate
from memjudge.formats.mapping import INPUT_KINDS, Table, TableMap, derived_id, describe_input, parse_map, parse_mappings
from memjudge.formats.readers import (
    check_sources_cover,
    csv_records,
    decode_file,
    is_blank,
    jsonl_lines,
    jsonl_records,
    read_candidates,
    read_coverage,
    read_facts,
    read_gold,
    read_labels,
    read_sources,
    read_table,
    read_toml,
)
from memjudge.formats.writers import (
    check_dir,
    dumps,
    frame_records,
    json_safe,
    make_dir,
    open_private,
    refuse_links,
    text_as_objects,
    write_atomic,
    write_json,
    write_jsonl,
)

__all__ = [
    # columns
    "CANDIDATE_COLUMNS", "COVERAGE_COLUMNS", "EXTENSIONS", "FACT_COLUMNS", "GOLD_COLUMNS", "LABEL_COLUMNS",
    "LABEL_REQUIRED", "LINE", "REPLICATE_OF", "SOURCE_COLUMNS", "only_rubric", "rubric_name",
    # the interval shape
    "Estimate",
    # column mappings (any table read as a memjudge format)
    "INPUT_KINDS", "Table", "TableMap", "derived_id", "describe_input", "parse_map", "parse_mappings",
    # readers
    "check_sources_cover", "csv_records", "decode_file", "is_blank", "jsonl_lines", "jsonl_records",
    "read_candidates", "read_coverage", "read_facts", "read_gold", "read_labels", "read_sources",
    "read_table", "read_toml",
    # writers and run-folder files
    "check_dir", "dumps", "frame_records", "json_safe", "make_dir", "open_private", "refuse_links",
    "text_as_objects", "write_atomic", "write_json", "write_jsonl",
]
