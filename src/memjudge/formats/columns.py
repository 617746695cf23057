"""Column names of memjudge's file formats (spec §2 and §6) and the readers' line column.

`LINE` is the private column in which a reader keeps each row's 1-based line (for Parquet,
row) until validation ends; its name holds a NUL so that no real column (`_line` included) is
mistaken for it. A rubric id is ``NAME@VERSION``; `rubric_name` strips the version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "CANDIDATE_COLUMNS", "COVERAGE_COLUMNS", "EXTENSIONS", "FACT_COLUMNS", "GOLD_COLUMNS", "LABEL_COLUMNS",
    "LABEL_REQUIRED", "LINE", "REPLICATE_OF", "SOURCE_COLUMNS", "only_rubric", "rubric_name",
]

LINE = "\x00line"
EXTENSIONS = (".jsonl", ".json", ".csv", ".parquet")

CANDIDATE_COLUMNS = ["persona_id", "assertion_id", "category", "confidence", "text"]
SOURCE_COLUMNS = ["persona_id", "source"]
FACT_COLUMNS = ["persona_id", "fact_id", "text"]
GOLD_COLUMNS = ["assertion_id", "verdict"]
LABEL_COLUMNS = [
    "assertion_id", "persona_id", "category", "judge", "rubric", "replicate", "verdict",
    "judge_score", "evidence", "evidence_found", "rationale", "error", "cached", "usage",
    "latency_s",
]
# Columns a labels file must have for analysis; the rest default to null when imported.
LABEL_REQUIRED = ["assertion_id", "persona_id", "category", "judge", "rubric", "replicate", "verdict"]
# Optional label column, written by runs of a deterministic judge (the embedded judge at
# temperature 0) with replicates: the replicate whose answer the row copies (0), null on the rows
# that were asked. Such a judge's flip rate is zero by construction (memjudge.stats.noise).
REPLICATE_OF = "replicate_of"
COVERAGE_COLUMNS = [
    "persona_id", "fact_id", "fact_text", "covered_by", "judge", "rubric", "replicate", "error",
]


def rubric_name(rubric_id) -> str:
    """'support@1a2b3c4d' → 'support': a rubric's name without its version hash."""
    return str(rubric_id).split("@", 1)[0]


def only_rubric(labels: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of rubric `name` (any version) when there are such rows; else the frame as is
    (imported labels carry their own rubric name, e.g. 'synthpai-correctness')."""
    if "rubric" not in labels.columns:
        return labels
    base = labels["rubric"].astype(str).str.split("@", n=1).str[0]
    return labels[base == name] if (base == name).any() else labels
