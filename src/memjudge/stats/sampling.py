"""`memjudge sample`: which assertions to label by hand, with each row's inclusion probability.

Contract:
- ``uniform``: a simple random sample of n assertions; every row's ``inclusion_prob`` is n/N.
- ``stratified``: strata by ``category`` and/or the judge's ``verdict`` (default
  category × verdict with labels, category without). Allocation: Neyman (n_h ∝ N_h·S_h) when
  labels are given, else proportional (n_h ∝ N_h); at least ``MIN_PER_STRATUM`` (2) per
  non-empty stratum (1 when n is too small for 2 each; n below the number of strata is an
  error). S_h: without ``verdict`` among the strata, the SD of the judge's verdict in the
  stratum, sqrt(p_h(1 − p_h)); with ``verdict`` the judge's verdict is constant inside a
  stratum, so S_h is the SD of the *gold* verdict expected there under a prior judge accuracy
  of ``PRIOR_ACCURACY`` (sensitivity = specificity = 0.9, prevalence = the judge's support rate
  in the category): about 0.5 among `unsupported` verdicts and 0.1 among `supported` ones, so
  the rare `unsupported` verdicts are over-sampled. S_h is floored at 0.05. Within a stratum
  the draw is a simple random sample; ``inclusion_prob`` = n_h / N_h.
- Same candidates, labels, arguments and seed → the same sample (ids are sorted before the draw).
- Top-up (``top_up``): the existing sample's rows are kept; the total n_existing + n is
  allocated as above with each stratum's existing count as a lower bound, and only new rows are
  drawn, from the items not yet sampled. The output is the whole sample (existing + new rows)
  and every row's ``inclusion_prob`` is recomputed as (rows in its stratum) / (stratum size):
  conditional on the counts, an SRS plus an SRS of the rest is an SRS of the union. This is
  exact when the existing sample was drawn uniformly or with the same strata.
- Rows: ``assertion_id, persona_id, category, text, stratum, strata_by, inclusion_prob`` and
  ``source`` (the persona's source text) when sources are given, else ``source_ref``
  (``sources:<persona_id>``: the row of the sources file to read). ``stratum`` names the judge
  verdict when strata use it: hide that column from annotators.
"""

from __future__ import annotations

import os
from typing import cast

import numpy as np
import pandas as pd

from memjudge.errors import InputError, UsageError
from memjudge.formats import LINE  # the readers' private line-number column

MIN_PER_STRATUM = 2
PRIOR_ACCURACY = 0.9
SD_FLOOR = 0.05
FIELDS = ("category", "verdict")
SAMPLE_COLUMNS = ["assertion_id", "inclusion_prob", "stratum", "strata_by"]


def parse_by(by) -> list[str]:
    if by is None or by == "" or by == []:
        return []
    parts = [p.strip() for p in (by.split(",") if isinstance(by, str) else by) if p.strip()]
    for p in parts:
        if p not in FIELDS:
            raise UsageError(f"--by: unknown stratum field {p!r} (use category, verdict or category,verdict)")
    return parts


def stratum_key(by, category: pd.Series, verdict: pd.Series) -> pd.Series:
    """The stratum of each item: 'all' without strata, else its fields joined by '|'
    (a null judge verdict is 'none')."""
    by = parse_by(by)
    if not by:
        return pd.Series(["all"] * len(category), index=category.index, dtype=object)
    cols = []
    for f in by:
        s = category if f == "category" else verdict
        cols.append(s.astype(object).where(s.notna(), "none").astype(str).to_numpy())
    return pd.Series(["|".join(t) for t in zip(*cols)], index=category.index, dtype=object)


def allocate(n: int, sizes: np.ndarray, sds: np.ndarray, lower: np.ndarray) -> np.ndarray:
    """Integer n_h summing to n with lower[h] ≤ n_h ≤ sizes[h], as close as rounding allows to
    n·N_h·S_h / Σ N·S (Neyman; S = 1 gives proportional)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    lower = np.minimum(np.asarray(lower, dtype=np.int64), sizes)
    if lower.sum() > n:
        raise UsageError(f"--n {n} is smaller than the {int(lower.sum())} rows the strata need at least "
                         f"(one or two per non-empty stratum, plus an existing sample): raise --n or use fewer strata")
    share = sizes * np.asarray(sds, dtype=float)
    ideal = n * share / share.sum() if share.sum() > 0 else n * sizes / sizes.sum()
    out = np.clip(np.floor(ideal).astype(np.int64), lower, sizes)
    while out.sum() < n:   # largest shortfall first, among strata with room
        gap = np.where(out < sizes, ideal - out, -np.inf)
        out[int(np.argmax(gap))] += 1
    while out.sum() > n:   # largest excess first, among strata above their floor
        gap = np.where(out > lower, out - ideal, -np.inf)
        out[int(np.argmax(gap))] -= 1
    return out


def _stratum_sd(keys: pd.Series, items: pd.DataFrame, by: list[str]) -> pd.Series:
    sup = (items["verdict"] == "supported").astype(float)
    if "verdict" not in by:
        p = sup.groupby(keys.to_numpy()).mean()
        return cast(pd.Series, np.sqrt(p * (1 - p))).clip(lower=SD_FLOOR)
    # Gold SD given the judge's verdict, under a prior judge accuracy (module doc).
    prev = sup.groupby(items["category"].to_numpy()).transform("mean").clip(0.01, 0.99)
    a = PRIOR_ACCURACY
    p_if_sup = a * prev / (a * prev + (1 - a) * (1 - prev))
    p_if_not = (1 - a) * prev / ((1 - a) * prev + a * (1 - prev))
    p_given = np.where(items["verdict"] == "supported", p_if_sup, p_if_not)
    sd = pd.Series(np.sqrt(p_given * (1 - p_given)), index=items.index).groupby(keys.to_numpy()).mean()
    return sd.clip(lower=SD_FLOOR)


def read_sample(path) -> pd.DataFrame:
    """A sample file written by `memjudge sample` (or a gold file made from one)."""
    from memjudge.formats import read_table

    return check_sample(read_table(path), path)


def check_sample(df: pd.DataFrame, path) -> pd.DataFrame:
    df = df.copy()
    if LINE not in df.columns:
        df[LINE] = np.arange(1, len(df) + 1)
    missing = [c for c in SAMPLE_COLUMNS if c not in df.columns]
    if missing:
        raise InputError(path, f"not a sample file of memjudge sample: missing column(s) {', '.join(missing)}")
    df["assertion_id"] = df["assertion_id"].astype(str)
    df["strata_by"] = df["strata_by"].where(df["strata_by"].notna(), "").astype(str)
    probs = []
    for v, line in zip(df["inclusion_prob"], df[LINE]):
        try:
            f = float(v)
            if isinstance(v, bool) or not (0.0 < f <= 1.0):
                raise ValueError
        except (TypeError, ValueError):
            raise InputError(path, f"'inclusion_prob' must be a number in (0, 1], found {v!r}", int(line)) from None
        probs.append(f)
    df["inclusion_prob"] = probs
    if df["strata_by"].nunique() > 1:
        raise InputError(path, "rows from different designs ('strata_by' differs)", int(df[LINE].iloc[1]))
    dup = df["assertion_id"].duplicated()
    if dup.any():
        i = int(np.flatnonzero(dup.to_numpy())[0])
        raise InputError(path, f"duplicate assertion_id {df['assertion_id'].iloc[i]!r}", int(df[LINE].iloc[i]))
    return df


def sample(candidates, n: int, *, labels=None, strategy: str = "uniform", by=None, seed: int = 0,
           sources=None, top_up=None, judge: str | None = None, replicate=0) -> pd.DataFrame:
    """The rows to label by hand (module doc). ``candidates``/``labels``/``sources``/``top_up``
    are paths or frames (memjudge.formats readers' shapes). ``--strategy active`` is
    ``memjudge.stats.active_sampling.sample`` (which falls back to this one for the others)."""
    from memjudge.formats import read_candidates, read_labels

    if n < 1:
        raise UsageError(f"--n must be at least 1, got {n}")
    if strategy not in ("uniform", "stratified"):
        raise UsageError(f"--strategy must be uniform, stratified or active, got {strategy!r}")
    cand_path = candidates if isinstance(candidates, (str, os.PathLike)) else "candidates"
    cand = read_candidates(candidates) if isinstance(candidates, (str, os.PathLike)) else candidates
    cand = cand.assign(assertion_id=cand["assertion_id"].astype(str)).sort_values("assertion_id", kind="stable")
    cand = cand.reset_index(drop=True)
    verdict = pd.Series([None] * len(cand), dtype=object)
    judge_name = None
    if labels is not None:
        from memjudge.stats.verdicts import select_verdicts

        lab = read_labels(labels) if isinstance(labels, (str, os.PathLike, list, tuple)) else labels
        v, judge_name = select_verdicts(lab, judge, replicate)
        verdict = v.reindex(cand["assertion_id"]).astype(object).reset_index(drop=True)
        verdict = verdict.where(verdict.notna(), None)
    by_list = parse_by(by)
    if strategy == "uniform":
        if by_list:
            raise UsageError("--by needs --strategy stratified")
    else:
        if not by_list:
            by_list = ["category", "verdict"] if labels is not None else ["category"]
        if "verdict" in by_list and labels is None:
            raise UsageError("--by verdict needs --labels (the judge's verdicts define the strata)")
    items = cand.assign(verdict=verdict)
    keys = stratum_key(by_list, items["category"], items["verdict"])
    N = len(cand)

    existing = None
    if top_up is not None:
        ex_path = top_up if isinstance(top_up, (str, os.PathLike)) else "existing sample"
        existing = read_sample(top_up) if isinstance(top_up, (str, os.PathLike)) else check_sample(top_up, ex_path)
        if len(existing) and str(existing["strata_by"].iloc[0]) == "active":
            raise UsageError(f"{ex_path}: an active sample has per-item probabilities: top it up with --strategy active")
        known = set(cand["assertion_id"])
        for aid, line in zip(existing["assertion_id"], existing[LINE]):
            if aid not in known:
                raise InputError(ex_path, f"assertion {aid!r} is not among the candidates {cand_path}: "
                                          f"a sample of other candidates?", int(line))
    in_existing = cand["assertion_id"].isin(existing["assertion_id"]) if existing is not None else pd.Series(False, index=cand.index)
    n_ex = int(in_existing.sum())
    if n_ex + n > N:
        raise UsageError(f"--n {n} is larger than the population: {N} candidates"
                         + (f", {n_ex} already sampled" if n_ex else ""))

    strata = np.array(sorted(keys.unique()), dtype=object)
    h_of = pd.Index(strata).get_indexer(keys)
    sizes = np.bincount(h_of, minlength=len(strata))
    have = np.bincount(h_of[in_existing.to_numpy()], minlength=len(strata))
    if strategy == "uniform":
        alloc = np.array([n_ex + n])
    else:
        sd = _stratum_sd(keys, items, by_list).reindex(strata).to_numpy() if labels is not None else np.ones(len(strata))
        floor = np.minimum(MIN_PER_STRATUM, sizes)
        if floor.sum() > n_ex + n:
            floor = np.minimum(1, sizes)
        alloc = allocate(n_ex + n, sizes, sd, np.maximum(floor, have))
    rng = np.random.default_rng(seed)
    chosen = in_existing.to_numpy().copy()
    for h in range(len(strata)):
        pool = np.flatnonzero((h_of == h) & ~chosen)
        k = int(alloc[h] - have[h])
        if k > 0:
            chosen[rng.choice(pool, size=k, replace=False)] = True
    out = items[chosen].copy()
    hh = h_of[chosen]
    out["stratum"] = strata[hh]
    out["strata_by"] = ",".join(by_list)
    out["inclusion_prob"] = alloc[hh] / sizes[hh]
    out = with_sources(out, sources)
    cols = ["assertion_id", "persona_id", "category", "text", "stratum", "strata_by", "inclusion_prob"]
    cols += ["source"] if sources is not None else ["source_ref"]
    out = out[cols].reset_index(drop=True)
    out.attrs.update(judge=judge_name, population=N, strata={str(s): {"size": int(sizes[i]), "sampled": int(alloc[i])}
                                                            for i, s in enumerate(strata)}, existing=n_ex)
    return out


def with_sources(out: pd.DataFrame, sources) -> pd.DataFrame:
    """The rows with their persona's ``source`` (given sources) or a ``source_ref``."""
    from memjudge.formats import read_sources

    if sources is not None:
        src = read_sources(sources) if isinstance(sources, (str, os.PathLike)) else sources
        smap = dict(zip(src["persona_id"].astype(str), src["source"]))
        miss = ~out["persona_id"].astype(str).isin(smap.keys())
        if miss.any():
            raise InputError(sources if isinstance(sources, (str, os.PathLike)) else "sources",
                             f"no source for persona {out['persona_id'][miss].iloc[0]!r}")
        out["source"] = out["persona_id"].astype(str).map(smap)
    else:
        out["source_ref"] = "sources:" + out["persona_id"].astype(str)
    return out
