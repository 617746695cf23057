"""The comparison's inputs (spec §8): candidates joined to one judge's verdicts and the
coverage map, as arrays (`Prepared`), and what was left out of them (`prepared_notes`).

- A candidate without a label for the judge has no valid verdict (counted in the notes).
- A third verdict (``partial``, or any label but supported/unsupported) is a valid verdict that
  is not supported; with ``strict_binary=True`` (``--strict-binary``) it is no valid verdict,
  exactly like null — left out of faithfulness, support rates and majorities, still counted in
  retention. The notes count such candidates.
- Coverage: fact → assertion map from a coverage file judged once on the full candidate set; a
  fact whose ``covered_by`` is null was not judged and is excluded, and so is a fact of a
  persona without candidates (both counted in the notes); only a candidate of the fact's own
  persona can state it. With no judged fact left, coverage is null everywhere.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import cast

import numpy as np
import pandas as pd

from memjudge.errors import UsageError
from memjudge.stats.verdicts import judges_in, select_verdicts

# The two labels of the support rubric; any other label (e.g. "partial") is a third verdict.
BINARY = ("supported", "unsupported")


@dataclass
class Prepared:
    """Candidates joined to one judge's verdicts, as arrays (index = candidate)."""

    personas: np.ndarray          # sorted persona ids (str)
    categories: np.ndarray        # sorted category names (str)
    persona: np.ndarray           # persona code per candidate
    cat: np.ndarray               # category code per candidate
    conf: np.ndarray
    valid: np.ndarray
    sup: np.ndarray
    assertion_ids: np.ndarray
    judge: str | None
    replicate: object
    # coverage: judged facts only; pairs (fact, candidate) with the candidate of the same persona
    has_coverage: bool = False
    fact_persona: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pair_fact: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    pair_cand: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    n_facts_unjudged: int = 0
    n_facts_without_candidates: int = 0
    n_unlabelled: int = 0
    n_labels_unmatched: int = 0
    # candidates whose standing verdict is a third label: valid and not supported by default,
    # no valid verdict with strict_binary
    n_nonbinary: int = 0
    strict_binary: bool = False
    inputs: dict = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.conf)

    @property
    def coverage_measured(self) -> bool:
        """A coverage map with at least one judged fact of a persona with candidates: without
        one, coverage is null everywhere (not 0, not NaN) and the notes say why."""
        return self.has_coverage and len(self.fact_persona) > 0

    def gate_codes(self, gate) -> np.ndarray:
        return np.flatnonzero(np.isin(self.categories, list(gate)))


def load_candidates(candidates) -> pd.DataFrame:
    from memjudge.formats import read_candidates

    if isinstance(candidates, (str, os.PathLike)):
        return read_candidates(candidates, require_confidence=True)
    df = candidates.copy()
    missing = [c for c in ("persona_id", "assertion_id", "category", "confidence") if c not in df.columns]
    if missing:
        raise UsageError(f"candidates need column(s): {', '.join(missing)}")
    conf = pd.to_numeric(df["confidence"], errors="coerce").to_numpy(dtype=float)
    if np.isnan(conf).any() or (conf < 0).any() or (conf > 1).any():
        raise UsageError("every candidate needs a confidence in [0, 1] for policy comparison")
    if df["assertion_id"].astype(str).duplicated().any():
        raise UsageError("candidates: assertion_id must be unique")
    df["confidence"] = conf
    for c in ("persona_id", "assertion_id", "category"):
        df[c] = df[c].astype(str)
    return df


def load_labels(labels) -> pd.DataFrame:
    from memjudge.formats import read_labels

    if isinstance(labels, (str, os.PathLike)) or (isinstance(labels, (list, tuple)) and labels
                                                   and all(isinstance(p, (str, os.PathLike)) for p in labels)):
        return read_labels(labels)
    df = labels.copy()
    missing = [c for c in ("assertion_id", "verdict") if c not in df.columns]
    if missing:
        raise UsageError(f"labels need column(s): {', '.join(missing)}")
    if "judge" not in df.columns:
        df["judge"] = "unnamed"
    if "replicate" not in df.columns:
        df["replicate"] = 0
    df["assertion_id"] = df["assertion_id"].astype(str)
    df["verdict"] = df["verdict"].where(df["verdict"].notna(), None)
    return df


def load_coverage(coverage, judge, replicate) -> pd.DataFrame | None:
    from memjudge.formats import read_coverage

    if coverage is None:
        return None
    if isinstance(coverage, (str, os.PathLike)) or (isinstance(coverage, (list, tuple))
                                                     and all(isinstance(p, (str, os.PathLike)) for p in coverage)):
        cov = read_coverage(coverage)
    else:
        cov = coverage.copy()
        missing = [c for c in ("persona_id", "fact_id", "covered_by") if c not in cov.columns]
        if missing:
            raise UsageError(f"coverage needs column(s): {', '.join(missing)}")
    cov["persona_id"] = cov["persona_id"].astype(str)
    cov["fact_id"] = cov["fact_id"].astype(str)
    if "judge" in cov.columns and cov["judge"].notna().any():
        cj = sorted(cov["judge"].dropna().astype(str).unique().tolist())
        if len(cj) > 1:
            if judge not in cj:
                raise UsageError(f"coverage holds several judges ({', '.join(cj)}) and none is {judge!r}")
            cov = cov[cov["judge"].astype(str) == judge]
    if "replicate" in cov.columns and cov["replicate"].notna().any():
        reps = sorted(set(int(r) for r in cov["replicate"].dropna()))
        if len(reps) > 1:
            r = int(replicate) if replicate != "majority" and int(replicate) in reps else reps[0]
            cov = cov[cov["replicate"].fillna(-1).astype(int) == r]
    if cov.duplicated(subset=["persona_id", "fact_id"]).any():
        d = cov[cov.duplicated(subset=["persona_id", "fact_id"])].iloc[0]
        raise UsageError(f"coverage: fact {d['fact_id']!r} of persona {d['persona_id']!r} appears more than once")
    return cov


def binary_only(labels: pd.DataFrame) -> pd.DataFrame:
    """Labels with every verdict other than supported/unsupported set to null (strict_binary)."""
    v = labels["verdict"]
    return labels.assign(verdict=v.astype(object).where(v.isin(BINARY), None))


def prepare(candidates, labels, coverage=None, *, judge=None, replicate=0, strict_binary: bool = False) -> Prepared:
    """Join candidates to one judge's verdicts (and the coverage map) as arrays.

    candidates/labels/coverage: DataFrames or paths (labels and coverage: one path or a list).
    A candidate without a label for the judge counts as "no valid verdict". A third verdict
    (any label but supported/unsupported) is valid and not supported, or — with
    `strict_binary` — no valid verdict, exactly like null (so it takes no part in a majority)."""
    inputs = {
        "candidates": str(candidates) if isinstance(candidates, (str, os.PathLike)) else None,
        "labels": ([str(labels)] if isinstance(labels, (str, os.PathLike)) else
                   [str(p) for p in labels] if isinstance(labels, (list, tuple)) else None),
        "coverage": (str(coverage) if isinstance(coverage, (str, os.PathLike)) else
                     [str(p) for p in coverage] if isinstance(coverage, (list, tuple)) else None),
    }
    if replicate != "majority":
        try:
            replicate = int(replicate)
        except (TypeError, ValueError):
            raise UsageError(f"replicate must be an index or 'majority', got {replicate!r}") from None
    cand = load_candidates(candidates)
    lab = cast(pd.DataFrame, load_labels(labels) if not isinstance(labels, pd.Series) else labels)
    verdicts, judge = select_verdicts(lab, judge, replicate)
    personas, persona = np.unique(cand["persona_id"].astype(str).to_numpy(), return_inverse=True)
    categories, cat = np.unique(cand["category"].astype(str).to_numpy(), return_inverse=True)
    aid = cand["assertion_id"].astype(str).to_numpy()
    v = verdicts.reindex(aid)
    nonbinary = (v.notna() & ~v.isin(BINARY)).to_numpy()
    if strict_binary:
        v = select_verdicts(binary_only(lab), judge, replicate)[0].reindex(aid)
    valid = v.notna().to_numpy()
    sup = (v == "supported").to_numpy() & valid
    prep = Prepared(
        personas=personas.astype(str), categories=categories.astype(str), persona=persona.astype(np.int64),
        cat=cat.astype(np.int64), conf=cand["confidence"].to_numpy(dtype=float), valid=valid, sup=sup,
        assertion_ids=aid, judge=judge, replicate=replicate,
        n_unlabelled=int((~aid_in(aid, verdicts.index)).sum()),
        n_labels_unmatched=int((~aid_in(np.asarray(verdicts.index, dtype=str), aid)).sum()), inputs=inputs,
        n_nonbinary=int(nonbinary.sum()), strict_binary=bool(strict_binary),
    )
    cov = load_coverage(coverage, judge, replicate)
    if cov is not None:
        _attach_coverage(prep, cov)
    return prep


def aid_in(aid: np.ndarray, index) -> np.ndarray:
    return pd.Index(index).get_indexer(aid) >= 0


def _attach_coverage(prep: Prepared, cov: pd.DataFrame) -> None:
    # Masks as numpy bools: a boolean Series of an empty frame has dtype object, and indexing
    # with it selects (no) columns instead of rows.
    judged = np.fromiter((x is not None and not (isinstance(x, float) and np.isnan(x)) for x in cov["covered_by"]),
                         dtype=bool, count=len(cov))
    prep.n_facts_unjudged = int((~judged).sum())
    cov = cov[judged]
    # Facts of personas without candidates cannot be held out with a persona; left out, counted.
    pcode = pd.Index(prep.personas).get_indexer(cov["persona_id"].to_numpy())
    prep.n_facts_without_candidates = int((pcode < 0).sum())
    cov = cov[pcode >= 0]
    pcode = pcode[pcode >= 0]
    prep.has_coverage = True
    prep.fact_persona = pcode.astype(np.int64)
    lengths = np.fromiter((len(x) for x in cov["covered_by"]), dtype=np.int64, count=len(cov))
    fact = np.repeat(np.arange(len(cov), dtype=np.int64), lengths)
    ids = [str(x) for lst in cov["covered_by"] for x in lst]
    cand = pd.Index(prep.assertion_ids).get_indexer(ids) if ids else np.zeros(0, np.int64)
    ok = cand >= 0
    # Only a candidate of the fact's own persona can state it.
    ok &= prep.persona[np.where(ok, cand, 0)] == prep.fact_persona[fact] if len(fact) else ok
    prep.pair_fact = fact[ok].astype(np.int64)
    prep.pair_cand = cand[ok].astype(np.int64)


def prepared_notes(p: Prepared) -> list[str]:
    """What was left out of (or counted differently in) the figures, in sentences."""
    notes = []
    if p.n_unlabelled:
        notes.append(f"{p.n_unlabelled} candidates have no label from this judge (no valid verdict)")
    if p.n_labels_unmatched:
        notes.append(f"{p.n_labels_unmatched} labels name assertions that are not among the candidates (ignored)")
    if p.n_nonbinary:
        notes.append(f"{p.n_nonbinary} candidates have a verdict other than supported/unsupported: "
                     + ("excluded from faithfulness and support rates (strict binary), still counted in retention"
                        if p.strict_binary else "valid and not supported (--strict-binary excludes them)"))
    if p.has_coverage and p.n_facts_unjudged:
        notes.append(f"{p.n_facts_unjudged} reference facts without a coverage verdict excluded")
    if p.has_coverage and p.n_facts_without_candidates:
        notes.append(f"{p.n_facts_without_candidates} reference facts of personas without candidates excluded")
    if p.has_coverage and not p.coverage_measured:
        notes.append("no judged reference fact of a persona with candidates: estimated coverage not computed")
    if not p.has_coverage:
        notes.append("no coverage file: estimated coverage not computed")
    return notes


__all__ = ["BINARY", "Prepared", "aid_in", "binary_only", "judges_in", "load_candidates", "load_coverage",
           "load_labels", "prepare", "prepared_notes", "select_verdicts"]
