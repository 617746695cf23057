"""What `memjudge annotate` shows: items in the input file's order, with their sources and,
only when asked (`--show-judge LABELS`), the judges' verdicts.

Input: any candidates-like file (`assertion_id, persona_id, category, text`; the output of
`memjudge sample` or a plain candidates file), read by `memjudge.formats.read_candidates`, so
extra columns such as `inclusion_prob` are kept. Sources: `--sources` (one per persona,
`memjudge.formats.read_sources`) or else a `source` column on every row.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from memjudge.errors import InputError


def load_items(path, sources=None) -> pd.DataFrame:
    """Items with a `source` column, in file order; errors name the file and line."""
    from memjudge.formats import LINE, check_sources_cover, read_candidates, read_sources

    path = Path(path)
    items = read_candidates(path, keep_line=True)
    if sources is not None:
        src = read_sources(sources)
        check_sources_cover(items, src, path, sources)
        items = items.drop(columns=["source"], errors="ignore")
        items["source"] = items["persona_id"].map(src.set_index("persona_id")["source"])
    else:
        if "source" not in items.columns:
            raise InputError(path, "no 'source' column: give the sources with --sources SOURCES")
        for v, line in zip(items["source"], items[LINE]):
            if not isinstance(v, str) or not v.strip():
                raise InputError(path, "missing or empty 'source' (give the sources with --sources SOURCES)", int(line))
    return items.drop(columns=[LINE]).reset_index(drop=True)


def _as_display(v):
    if v is None or (isinstance(v, float) and v != v):
        return None
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, (list, tuple)):
        return " … ".join(str(x) for x in v) or None
    return str(v)


def judge_views(labels_paths) -> dict[str, list[dict]]:
    """assertion_id → the judges' standing answers (lowest replicate per judge and rubric):
    judge, rubric, verdict, evidence, rationale as display strings."""
    from memjudge.formats import read_labels

    lab = read_labels(labels_paths)
    lab = lab.sort_values(["assertion_id", "judge", "rubric", "replicate"], kind="stable")
    lab = lab.drop_duplicates(["assertion_id", "judge", "rubric"], keep="first")
    out: dict[str, list[dict]] = {}
    for r in lab.itertuples(index=False):
        out.setdefault(str(r.assertion_id), []).append({
            "judge": str(r.judge), "rubric": str(r.rubric), "verdict": _as_display(r.verdict),
            "evidence": _as_display(r.evidence), "rationale": _as_display(r.rationale),
        })
    return out


__all__ = ["judge_views", "load_items"]
