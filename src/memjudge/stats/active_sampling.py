"""`memjudge sample --strategy active` (spec §15): who to label, drawn where the judge is unsure.

Contract:
- Signal (``uncertainty``): the judge's confidence as a log-odds s_i of `supported`:
  ``log-odds`` its ``judge_score`` (the embedded judge, OpenAI with logprobs, llama.cpp's server,
  a `sim:` judge with ``confidence_auc``); ``panel`` a panel's posterior P(supported) in
  ``judge_score`` (logit taken); ``replicates`` the share k/m of its valid replicates saying
  supported, s = log((k + ½)/(m − k + ½)) (needs ≥ 2 replicates). Default: ``panel`` for a
  ``panel:`` judge with scores, else ``log-odds`` when the judge has scores, else
  ``replicates`` when it has several; a judge with none of these is an error naming the options.
- Uncertainty: u_i = sqrt(P(judge wrong | verdict, |s|)), the square root that minimises the
  IPW estimator's variance at a fixed expected n. With gold labels in hand (``gold``: e.g. a
  first stratified batch, labelled), P is a logistic fit of the gold's disagreement with the
  verdict on (verdict, |s|, their product), each gold item weighted 1/π of the draw that chose
  it (``stats.active.error_model``): the verdict carries most of the risk (a judge's
  `unsupported` verdicts are wrong far more often than its `supported` ones), the confidence
  the rest. Without gold, P = the judge's own 1/(1 + e^|s|) (confidence alone). An item without
  a valid verdict or score gets the largest u.
- π_i = clip(c·u_i, min_prob, 1) over the items not yet sampled, expected n new rows; the floor
  ``min_prob`` defaults to 0.1·n/N_pool; then mixed with uniform, π = W·n/N_pool + (1 − W)·π
  (Li, Zrnic & Candès 2025). ``mix`` "auto": with gold, the W in {0, 0.05, …, 1} of least
  estimated design variance Σ_gold w·(Y − Ŷ)²·(1/π_union − 1) (``stats.active.choose_mix``): the
  gold measures the judge's real errors, so a useless confidence drives W to 1 (uniform);
  without gold, W = 0.5. A number sets W.
- Each item not yet sampled is drawn independently (Poisson) with its π. Top-up of a uniform or
  stratified sample: its rows are kept and every row's ``inclusion_prob`` is the union's,
  π1_i + (1 − π1_i)·π_i, π1 the first draw's (its stratum's, recomputed with this judge's
  verdicts). The union's probabilities are exact when the active rule does not depend on the
  first draw's labels; calibrated on them, it does, weakly (bench/active.py measures the
  coverage). A top-up of an active sample is refused: the probabilities it gave the items it
  did not draw are not stored.
- Rows: those of `memjudge sample` with ``stratum`` and ``strata_by`` "active" (no strata) and
  ``signal``, ``mix_w`` on every row; no column holds the judge's verdict or score. ``attrs``
  carry the design (rule, signal, how u was made, W and how chosen, floor, expected n).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from memjudge.errors import InputError, UsageError
from memjudge.formats import LINE
from memjudge.stats.active import active_design
from memjudge.stats.verdicts import SIGNALS, confidence_signal, no_signal_message

ACTIVE = "active"
DEFAULT_FLOOR_SHARE = 0.1


def _first_draw_probs(existing: pd.DataFrame, ex_path, cand: pd.DataFrame, verdict: pd.Series) -> np.ndarray:
    """π1 of every candidate under the existing (uniform or stratified) sample's design."""
    from memjudge.stats.sampling import stratum_key

    by = str(existing["strata_by"].iloc[0])
    if by == ACTIVE:
        raise UsageError(f"{ex_path}: a top-up of an active sample is not supported: the probabilities it gave the "
                         f"items it did not draw are not stored; draw the whole active sample at once")
    keys = stratum_key(by, cand["category"], verdict)
    rec = existing.set_index("assertion_id")
    ex_keys = pd.Series(keys.to_numpy(), index=cand["assertion_id"].to_numpy()).loc[rec.index]
    mism = ex_keys.to_numpy() != rec["stratum"].astype(str).to_numpy()
    if mism.any():
        i = int(np.flatnonzero(mism)[0])
        raise InputError(ex_path, f"assertion {rec.index[i]!r} is in stratum {rec['stratum'].iloc[i]!r} in the sample "
                                  f"but {ex_keys.iloc[i]!r} under these labels: top it up with the judge and replicate "
                                  f"it was drawn from", int(rec[LINE].iloc[i]))
    pi_h = rec.groupby("stratum")["inclusion_prob"].max()
    return keys.map(pi_h).fillna(0.0).to_numpy(float).copy()


def sample(candidates, n: int, *, labels=None, strategy: str = "uniform", by=None, seed: int = 0, sources=None,
           top_up=None, judge: str | None = None, replicate=0, uncertainty: str | None = None, mix="auto",
           min_prob: float | None = None, gold=None) -> pd.DataFrame:
    """`memjudge sample`: ``strategy`` "active" here (module doc), "uniform" and "stratified" by
    ``memjudge.stats.sampling.sample``. Paths or frames, as there; ``gold``: hand labels in hand
    (a gold file or frame) that calibrate the judge's confidence and choose W."""
    from memjudge.formats import read_candidates, read_labels
    from memjudge.stats import sampling
    from memjudge.stats.verdicts import select_verdicts

    if strategy != ACTIVE:
        if uncertainty is not None or gold is not None or min_prob is not None or mix not in (None, "auto"):
            raise UsageError("--uncertainty, --mix, --min-prob and --gold go with --strategy active")
        return sampling.sample(candidates, n, labels=labels, strategy=strategy, by=by, seed=seed, sources=sources,
                               top_up=top_up, judge=judge, replicate=replicate)
    if n < 1:
        raise UsageError(f"--n must be at least 1, got {n}")
    if labels is None:
        raise UsageError("--strategy active needs --labels: the judge's confidence decides who is labelled")
    cand_path = candidates if isinstance(candidates, (str, os.PathLike)) else "candidates"
    cand = read_candidates(candidates) if isinstance(candidates, (str, os.PathLike)) else candidates
    cand = cand.assign(assertion_id=cand["assertion_id"].astype(str)).sort_values("assertion_id", kind="stable")
    cand = cand.reset_index(drop=True)
    lab = read_labels(labels) if isinstance(labels, (str, os.PathLike, list, tuple)) else labels
    v, judge_name = select_verdicts(lab, judge, replicate)
    return active_sample(cand, cand_path, lab, v, judge_name, n, replicate=replicate, uncertainty=uncertainty,
                         mix=mix, min_prob=min_prob, gold=gold, top_up=top_up, seed=seed, sources=sources, by=by)


def active_sample(cand: pd.DataFrame, cand_path, lab: pd.DataFrame, verdict_by_id: pd.Series, judge: str, n: int, *,
                  replicate=0, uncertainty=None, mix="auto", min_prob=None, gold=None, top_up=None, seed: int = 0,
                  sources=None, by=None) -> pd.DataFrame:
    """The active sample's rows (module doc). ``cand`` is sorted by assertion id."""
    from memjudge.stats.estimate import Gold, read_gold_file, resolve_gold
    from memjudge.stats.sampling import check_sample, read_sample, with_sources

    if by:
        raise UsageError("--by needs --strategy stratified (an active sample has no strata)")
    N = len(cand)
    ids = cand["assertion_id"]
    verdict = verdict_by_id.reindex(ids).astype(object).reset_index(drop=True)
    valid = verdict.notna().to_numpy()
    sup = (verdict == "supported").to_numpy() & valid
    score_s, signal = confidence_signal(lab, judge, replicate, uncertainty)
    score = score_s.reindex(ids).to_numpy(float)

    # The existing sample (top-up) and the first draw's probabilities.
    pi1 = np.zeros(N)
    in_existing = np.zeros(N, bool)
    if top_up is not None:
        ex_path = top_up if isinstance(top_up, (str, os.PathLike)) else "existing sample"
        existing = read_sample(top_up) if isinstance(top_up, (str, os.PathLike)) else check_sample(top_up, ex_path)
        known = set(ids)
        for aid, line in zip(existing["assertion_id"], existing[LINE]):
            if aid not in known:
                raise InputError(ex_path, f"assertion {aid!r} is not among the candidates {cand_path}: "
                                          f"a sample of other candidates?", int(line))
        pi1 = _first_draw_probs(existing, ex_path, cand, verdict)
        in_existing = ids.isin(existing["assertion_id"]).to_numpy()
        ex_pi = existing.set_index("assertion_id")["inclusion_prob"]
        pi1[in_existing] = ex_pi.loc[ids[in_existing]].to_numpy(float)
    pool = ~in_existing
    N_pool = int(pool.sum())
    if n > N_pool:
        raise UsageError(f"--n {n} is larger than the population: {N} candidates"
                         + (f", {N - N_pool} already sampled" if N - N_pool else ""))
    floor = DEFAULT_FLOOR_SHARE * n / N_pool if min_prob is None else float(min_prob)
    if not 0.0 <= floor <= 1.0:
        raise UsageError(f"--min-prob must be in [0, 1], got {min_prob}")
    if floor * N_pool > n + 1e-9:
        raise UsageError(f"--min-prob {floor:g} cannot reach --n {n}: {N_pool} items at that minimum already "
                         f"expect {floor * N_pool:.1f} labels; lower it below {n / N_pool:.4g}")

    gold_mask = y = None
    if gold is not None:
        gpath = gold if isinstance(gold, (str, os.PathLike)) else "gold"
        g = gold if isinstance(gold, Gold) else (read_gold_file(gold) if isinstance(gold, (str, os.PathLike))
                                                 else resolve_gold(gold, gpath))
        gold_y = g.y[g.y.index.isin(ids)]
        if len(gold_y) == 0:
            raise InputError(gpath, f"none of its gold assertion ids is among the candidates {cand_path}")
        gold_mask = ids.isin(gold_y.index).to_numpy()
        y = np.zeros(N)
        y[gold_mask] = gold_y.loc[ids[gold_mask]].to_numpy()
    if mix in (None, "auto"):
        W_given = None
    else:
        try:
            W_given = float(mix)
        except (TypeError, ValueError):
            raise UsageError(f"--mix must be auto or a number in [0, 1], got {mix!r}") from None
        if not 0.0 <= W_given <= 1.0:
            raise UsageError(f"--mix must be auto or a number in [0, 1], got {mix!r}")
    try:
        d = active_design(score, sup, valid, n, pool=pool, pi1=pi1, gold=gold_mask, y=y, min_prob=floor, mix=W_given)
    except ValueError as e:
        if gold is not None and "gold" in str(e):
            raise InputError(gpath, str(e)) from None
        raise UsageError(f"--strategy active: {e}") from None
    W, pi2, union_pi, coef = d["W"], d["pi"], d["union"], d["coef"]
    if coef is not None:
        how = (f"sqrt(P(judge wrong | verdict, |{signal}|)), a logistic fit on {d['n_fit']} gold items "
               f"({d['n_errors']} judge errors)")
    else:
        how = f"sqrt(the judge's own P(wrong) = 1/(1 + e^|{signal}|)): no gold in hand to calibrate it"
    W_how = {"given": "given", "chosen": "chosen on the gold in hand (least estimated variance)",
             "fixed": "no gold in hand to choose it: fixed"}[d["W_how"]]
    rng = np.random.default_rng(seed)
    draw = np.zeros(N, bool)
    draw[pool] = rng.random(N_pool) < pi2[pool]
    chosen = draw | in_existing
    out = cand[chosen].copy()
    out["stratum"] = ACTIVE
    out["strata_by"] = ACTIVE
    out["inclusion_prob"] = np.minimum(union_pi[chosen], 1.0)
    out["signal"] = signal
    out["mix_w"] = W
    out = with_sources(out, sources)
    cols = ["assertion_id", "persona_id", "category", "text", "stratum", "strata_by", "inclusion_prob", "signal",
            "mix_w"]
    cols += ["source"] if sources is not None else ["source_ref"]
    out = out[cols].reset_index(drop=True)
    n_ex = int(in_existing.sum())
    design = {"rule": "pi = W * n/N_pool + (1 - W) * clip(c * u, min_prob, 1), drawn independently (Poisson)",
              "signal": signal, "uncertainty": how, "mix_w": W, "mix_w_chosen": W_how, "min_prob": floor,
              "expected_new": float(pi2[pool].sum()), "min_inclusion_prob": float(out["inclusion_prob"].min()),
              "items_at_prob_1": int((out["inclusion_prob"] >= 1.0).sum()),
              "error_model": None if coef is None else [float(c) for c in coef]}
    out.attrs.update(judge=judge, population=N, strata={}, existing=n_ex, design=design)
    return out


__all__ = ["ACTIVE", "SIGNALS", "active_sample", "confidence_signal", "no_signal_message", "sample"]
