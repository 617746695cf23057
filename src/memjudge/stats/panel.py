"""Judge panels (spec §10): consensus verdicts from several judges, and each judge's error
rates estimated without gold.

Input: a labels frame (spec §6) with two or more judges. One verdict stands per (judge, item):
replicate r (default 0) or the strict majority of the judge's valid replicates (a tie: no
verdict), as in `memjudge agreement`. Items labelled by only some judges use the judges they
have; an item no judge labelled validly stays in the output with a null verdict.

Labels are nominal: the declared set is `supported`, `unsupported` and `partial`; the model's
classes are the labels present plus `supported` and `unsupported`. Any other label is an error.

Methods
- `majority`: the label given by strictly more judges than any other; a tie is no verdict
  (null, with the tie in `error`), never a coin flip. `judge_score` = share of votes for
  `supported`.
- `dawid-skene` (Dawid & Skene 1979): latent true class z_i with prior p, and per judge a full
  confusion matrix e_j[k, c] = P(judge j says k | z = c); fitted by EM.
- `one-coin`: the same with one accuracy s_j per judge: e_j[k, c] = s_j if k = c, else
  (1 − s_j)/(K − 1).

The EM reproduces crowd-kit 1.4.2 (`DawidSkene`, `OneCoinDawidSkene`) step for step, so that
the two agree to rounding: start from the majority-vote shares (crowd-kit's
`MajorityVote.fit_predict_proba`), prior = mean posterior, M-step, then up to N_ITER = 100
rounds of E-step, prior, M-step, and stop when crowd-kit's per-response evidence lower bound
rises by less than TOL = 1e-5. Its details are kept: counts are clipped at EPS = 1e-10 before
normalising (only for labels the judge gave), one-coin errors are clipped to [EPS, 1 − EPS],
and the bound adds log p_c once per response. `judge_score` = posterior P(z = supported); the
verdict is the most probable class (an exact tie is null).

Sensitivity and specificity are for `supported` against the rest (`unsupported`, `partial`,
...): sensitivity_j = P(j says supported | z = supported) = e_j[s, s]; specificity_j =
P(j says anything else | z ≠ supported) = Σ_{c≠s} p_c (1 − e_j[s, c]) / Σ_{c≠s} p_c (with two
labels this is e_j[u, u]). Against gold (`--gold`) the same are counted directly over the
items with both a gold label and the judge's verdict.

The EM runs on response patterns: items with the same verdicts from the same judges have the
same posterior, so the data reduce to at most (K + 1)^J distinct patterns and their counts
(exact: a count c is c copies of the pattern).

Intervals: persona-cluster bootstrap (spec §7). The sufficient statistics are each persona's
pattern counts; a resample's counts are `cluster_weights(...) @ per_persona` and the whole EM
is rerun on them from the resample's own majority-vote start, so resample b equals an EM on
the resampled data. All B resamples run at once as batched array operations (chunks of
CHUNK), each stopping by the rule above on its own.

`by="category"`: error rates and prior per category from a separate fit on that category's
items (judges may err differently there); the consensus labels always come from the fit on
all items, so the panel judge does not change with a reporting option.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from memjudge._util.text import coef, with_interval
from memjudge.errors import InputError, UsageError
from memjudge.formats import LINE  # the readers' private line-number column
from memjudge.formats.estimate import Estimate
from memjudge.stats.bootstrap import B_DEFAULT, cluster_weights, interval_pairs

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
DECLARED = (SUPPORTED, UNSUPPORTED, "partial")
METHODS = ("majority", "dawid-skene", "one-coin")
N_ITER = 100  # crowd-kit DawidSkene.n_iter default
TOL = 1e-5  # crowd-kit DawidSkene.tol default
EPS = 1e-10  # crowd-kit's _EPS
CHUNK = 500  # bootstrap resamples per batch (memory: CHUNK × patterns × classes floats, a few times)


# ---------------------------------------------------------------------------------------
# checks and the response matrix


def check_declared(labels: pd.DataFrame, path=None) -> None:
    """Every non-null verdict is one of DECLARED; the first other one is an error naming the
    file and line when `labels` carries `_line` (read with keep_line=True)."""
    v = labels["verdict"]
    bad = v.notna() & ~v.isin(DECLARED)
    if bad.any():
        i = int(np.flatnonzero(bad.to_numpy())[0])
        row = labels.iloc[i]
        msg = f"verdict {row['verdict']!r} is not one of the declared labels ({', '.join(DECLARED)})"
        if path is not None:
            line = int(row[LINE]) if LINE in labels.columns else None
            raise InputError(path, msg, line)
        raise UsageError(f"item {row['assertion_id']!r}, judge {row['judge']}: {msg}")


@dataclass
class Responses:
    """One verdict per (item, judge): `Y[i, j]` is a class index or −1 (no verdict)."""

    items: pd.DataFrame  # assertion_id, persona_id, category (one row per item, input order)
    judges: list[str]
    classes: list[str]
    Y: np.ndarray
    rubric: str
    simulated: bool
    ties: int = 0  # (judge, item) replicate-majority ties left without a verdict

    @property
    def one_hot(self) -> np.ndarray:
        """(n_items, n_judges, K) indicator of each judge's verdict (all zero when none)."""
        K = len(self.classes)
        R = np.zeros(self.Y.shape + (K,))
        i, j = np.nonzero(self.Y >= 0)
        R[i, j, self.Y[i, j]] = 1.0
        return R


def responses(labels: pd.DataFrame, judges: Sequence[str] | None = None, replicate: int | str = 0) -> Responses:
    """The panel's response matrix from a labels frame; checks the bad inputs of a panel."""
    from memjudge.stats.agreement import standing_verdicts

    if labels.empty:
        raise UsageError("no labels")
    check_declared(labels)
    lab = labels
    if judges is None:
        # a panel's own earlier output is not one of its judges unless named
        names = [j for j in dict.fromkeys(lab["judge"].astype(str)) if not j.startswith("panel:")]
    else:
        names = list(dict.fromkeys(judges))
        known = list(dict.fromkeys(lab["judge"].astype(str)))
        missing = [j for j in names if j not in known]
        if missing:
            raise UsageError(f"judge(s) not in the labels: {', '.join(missing)} (found: {', '.join(known)})")
    lab = lab[lab["judge"].astype(str).isin(names)]
    if len(names) < 2:
        raise UsageError(f"a panel needs at least 2 judges, found {len(names)} ({', '.join(names) or 'none'})")
    rubrics = list(dict.fromkeys(lab["rubric"].astype(str)))
    per_judge = lab.groupby("judge")["rubric"].nunique()
    if (per_judge > 1).any():
        j = per_judge[per_judge > 1].index[0]
        raise UsageError(f"judge {j} has labels under several rubrics ({', '.join(sorted(set(lab.loc[lab['judge'] == j, 'rubric'].astype(str))))}): "
                         "give the panel one rubric's labels")
    items = lab.drop_duplicates("assertion_id")[["assertion_id", "persona_id", "category"]].reset_index(drop=True)
    # one verdict per (judge, item); the rater name must be the judge even with several rubrics
    chosen, ties = standing_verdicts(lab.assign(rubric=rubrics[0]), replicate)
    classes = sorted(set(chosen["verdict"]) | {SUPPORTED, UNSUPPORTED})
    Y = np.full((len(items), len(names)), -1, dtype=np.int64)
    row = pd.Index(items["assertion_id"]).get_indexer(pd.Index(chosen["assertion_id"]))
    col = pd.Index(names).get_indexer(pd.Index(chosen["rater"]))
    Y[row, col] = pd.Index(classes).get_indexer(pd.Index(chosen["verdict"]))
    valid = (Y >= 0).astype(np.int64)
    for j, name in enumerate(names):
        if valid[:, j].sum() == 0:
            raise UsageError(f"judge {name} has no valid verdict" + (f" at replicate {replicate}" if replicate != "majority" else ""))
    shared = valid.T @ valid
    np.fill_diagonal(shared, 0)
    for j, name in enumerate(names):
        if shared[j].sum() == 0:
            raise UsageError(f"judge {name} shares no item with any other judge of the panel ({', '.join(n for n in names if n != name)})")
    sim = bool(lab["simulated"].fillna(False).astype(bool).any()) if "simulated" in lab.columns else False
    sim = sim or any(n.startswith("sim:") for n in names)
    return Responses(items, names, classes, Y, rubrics[0] if len(rubrics) == 1 else "panel", sim, ties)


# ---------------------------------------------------------------------------------------
# EM, batched over bootstrap resamples (leading axis b)


def _loge(e: np.ndarray) -> np.ndarray:
    """log of the confusion entries, 0 where a judge never gave that label (never used: no
    response points there) and where a resample left a judge without responses (NaN)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(e > 0, np.log(np.where(e > 0, e, 1.0)), 0.0)


def _m_step(method: str, q: np.ndarray, w: np.ndarray, R2: np.ndarray, J: int, K: int) -> np.ndarray:
    """Confusion matrices e[b, j, k, c] from posteriors q[b, i, c] and item weights w[b, i]."""
    B = q.shape[0]
    # S[b, c, (j, k)] = Σ_i w_bi q_bic R_ijk: one batched matrix product
    S = np.matmul(np.swapaxes(q * w[:, :, None], 1, 2), R2).reshape(B, K, J, K).transpose(0, 2, 3, 1)  # b, j, k, c
    if method == "dawid-skene":
        seen = (w @ R2).reshape(B, J, K) > 0  # labels each judge gave in this resample
        e = np.where(seen[..., None], np.maximum(S, EPS), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            return e / e.sum(axis=2, keepdims=True)
    # one-coin: accuracy = mean posterior of the label given, over the judge's responses
    n_resp = (w @ R2).reshape(B, J, K).sum(axis=2)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.einsum("bjkk->bj", S) / n_resp
    off = (1.0 - s) / (K - 1)
    e = np.where(np.eye(K, dtype=bool)[None, None], s[..., None, None], off[..., None, None])
    return np.clip(e, EPS, 1 - EPS)


def _e_step(p: np.ndarray, e: np.ndarray, R2: np.ndarray, J: int, K: int) -> np.ndarray:
    B = p.shape[0]
    L = np.log(np.maximum(p, EPS))[:, None, :] + np.matmul(R2, _loge(e).reshape(B, J * K, K))
    L -= L.max(axis=2, keepdims=True)
    q = np.exp(L)
    return q / q.sum(axis=2, keepdims=True)


def _bound(q, p, e, w, R2, m, J, K) -> np.ndarray:
    """crowd-kit's evidence lower bound per response (its stopping criterion), per resample."""
    B = q.shape[0]
    loglik = np.matmul(R2, _loge(e).reshape(B, J * K, K)) + m[None, :, None] * np.log(np.maximum(p, EPS))[:, None, :]
    joint = np.einsum("bi,bic,bic->b", w, q, loglik)
    qc = np.maximum(q, EPS)
    entropy = -np.einsum("bi,bic->b", w, qc * np.log(qc))
    return (joint + entropy) / (w @ m)


@dataclass
class EMFit:
    """Fitted panels, one per resample row: posteriors q (B, n, K), prior (B, K), confusion
    matrices e (B, J, K, K) indexed [judge, said, true], EM iterations (B,)."""

    q: np.ndarray
    prior: np.ndarray
    e: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    class_counts: np.ndarray | None = None  # (B, J, K) expected true classes among each judge's responses


def response_patterns(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct response patterns of one-hot responses R (n, J, K): (patterns (P, J, K),
    each item's pattern index (n,)). Items with one pattern have one posterior, so the EM runs
    on at most (K + 1)^J patterns weighted by their counts, whatever the number of items."""
    n, J, K = R.shape
    P, inverse = np.unique(R.reshape(n, J * K), axis=0, return_inverse=True)
    return P.reshape(-1, J, K), inverse.ravel()


def fit_em(R: np.ndarray, method: str = "dawid-skene", weights: np.ndarray | None = None,
           n_iter: int = N_ITER, tol: float = TOL) -> EMFit:
    """EM of the Dawid–Skene (or one-coin) model on one-hot responses R (n, J, K), once per
    row of `weights` (B, n) (item weights; None: one fit with every weight 1). Runs on the
    response patterns (`response_patterns`); `q` is returned per item."""
    P, inverse = response_patterns(R)
    if weights is None:
        wp = np.bincount(inverse, minlength=P.shape[0]).astype(float)[None, :]
    else:
        w = np.asarray(weights, dtype=float)
        wp = np.zeros((w.shape[0], P.shape[0]))
        np.add.at(wp.T, inverse, w.T)
    fit = fit_patterns(P, wp, method, n_iter, tol)
    fit.q = fit.q[:, inverse]
    return fit


def fit_patterns(R: np.ndarray, w: np.ndarray, method: str = "dawid-skene",
                 n_iter: int = N_ITER, tol: float = TOL) -> EMFit:
    """The EM on weighted rows: R (n, J, K) one-hot rows (items or patterns), w (B, n) their
    weights (a weight w is w copies of the row), one fit per row of w."""
    if method not in ("dawid-skene", "one-coin"):
        raise UsageError(f"unknown EM method {method!r}")
    n, J, K = R.shape
    B = w.shape[0]
    R2 = R.reshape(n, J * K)
    m = R.sum(axis=(1, 2))  # responses per row
    votes = R.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mv = votes / votes.sum(axis=1, keepdims=True)  # crowd-kit's MajorityVote probabilities
    q = np.broadcast_to(mv, (B, n, K)).copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        p = (w @ mv) / w.sum(axis=1, keepdims=True)
    e = _m_step(method, q, w, R2, J, K)
    loss = np.full(B, -np.inf)
    iters = np.zeros(B, dtype=np.int64)
    done = np.zeros(B, dtype=bool)
    for _ in range(n_iter):
        a = np.flatnonzero(~done)
        if a.size == 0:
            break
        wa = w[a]
        qa = _e_step(p[a], e[a], R2, J, K)
        with np.errstate(invalid="ignore", divide="ignore"):
            pa = np.einsum("bi,bic->bc", wa, qa) / wa.sum(axis=1, keepdims=True)
        ea = _m_step(method, qa, wa, R2, J, K)
        new = _bound(qa, pa, ea, wa, R2, m, J, K)
        q[a], p[a], e[a] = qa, pa, ea
        iters[a] += 1
        stop = ~(new - loss[a] >= tol)  # NaN (a degenerate resample) stops too
        done[a[stop]] = True
        loss[a] = new
    # expected count of each true class among each judge's responses: a rate resting on less
    # than one expected item is not estimated (NaN), e.g. specificity when every verdict is supported
    counts = np.matmul(np.swapaxes(q * w[:, :, None], 1, 2), R2).reshape(B, K, J, K).sum(axis=3).transpose(0, 2, 1)
    return EMFit(q, p, e, iters, done, counts)


def sens_spec(e: np.ndarray, prior: np.ndarray, s: int, class_counts: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray]:
    """Sensitivity e[s, s] and prior-weighted specificity for `supported` (index s) vs the rest;
    e (..., J, K, K), prior (..., K) → two (..., J) arrays. With `class_counts` (..., J, K), a
    rate is NaN where the judge's responses hold less than one expected item of its classes."""
    K = e.shape[-1]
    rest = np.arange(K) != s
    pr = prior[..., None, :] * rest  # (..., 1, K) weights of the non-supported classes
    with np.errstate(invalid="ignore", divide="ignore"):
        spec = (pr * (1.0 - e[..., s, :])).sum(axis=-1) / pr.sum(axis=-1)
    sens = e[..., s, s]
    if class_counts is not None:
        sens = np.where(class_counts[..., s] >= 1, sens, np.nan)
        spec = np.where((class_counts * rest).sum(axis=-1) >= 1, spec, np.nan)
    return sens, spec


def majority_vote(R: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(vote shares (n, K), verdict index or −1 for a tie or no vote) of one-hot responses."""
    votes = R.sum(axis=1)
    total = votes.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = votes / total
    top = votes.max(axis=1)
    unique = (votes == top[:, None]).sum(axis=1) == 1
    return share, np.where(unique & (top > 0), votes.argmax(axis=1), -1)


# ---------------------------------------------------------------------------------------
# result


def _est(value, lo=None, hi=None) -> dict:
    return Estimate(value, lo, hi).to_dict()


@dataclass
class PanelResult:
    method: str
    judge: str  # the panel's judge name, panel:<method>(A+B+…)
    judges: list[str]
    classes: list[str]
    labels: pd.DataFrame  # the consensus verdicts, columns of spec §6 (+ simulated)
    n_items: int
    iterations: int
    converged: bool
    prior: dict
    judge_errors: list[dict]
    by_category: list[dict]
    gold: dict | None
    replicate: int | str
    B: int
    seed: int
    personas: int
    prior_interval: dict
    simulated: bool
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        from memjudge.formats import json_safe

        out = {
            "method": self.method, "judge": self.judge, "judges": self.judges, "labels": self.classes,
            "n_items": self.n_items, "iterations": self.iterations, "converged": self.converged,
            "n_iter": N_ITER, "tol": TOL, "prior": self.prior, "prior_interval": self.prior_interval,
            "judge_errors": self.judge_errors,
            "by_category": self.by_category, "gold": self.gold, "replicate": self.replicate,
            "B": self.B, "seed": self.seed, "personas": self.personas, "simulated": self.simulated,
            "verdicts": {str(k): int(v) for k, v in self.labels["verdict"].fillna("null").value_counts().items()},
            "definitions": {
                "sensitivity": "P(judge says supported | true class supported)",
                "specificity": "P(judge says anything but supported | true class is not supported), "
                               "weighted by the prior of the non-supported classes",
                "interval": f"persona-cluster bootstrap, B = {self.B}, percentile 95%, seed {self.seed}; "
                            "EM refitted in every resample",
            },
            "notes": self.notes,
        }
        return json_safe(out)

    def to_text(self) -> str:
        def fi(value, lo=None, hi=None) -> str:
            return with_interval(coef, value, lo, hi)

        lines = [f"{self.judge}: {self.n_items} items, {len(self.judges)} judges"
                 + (f", {self.iterations} EM iterations" if self.method != "majority" else "")
                 + ("  [simulated]" if self.simulated else "")]
        lines.append("prior: " + ", ".join(f"{k} {v:.3f}" for k, v in self.prior.items() if v is not None))
        head = f"{'judge':<32} {'sensitivity':>24} {'specificity':>24}"
        if self.gold:
            head += f" {'gold sensitivity':>24} {'gold specificity':>24}"
        lines.append(head)
        for r in self.judge_errors:
            line = f"{r['judge']:<32} {fi(r['sensitivity']['value'], r['sensitivity']['lo'], r['sensitivity']['hi']):>24} " \
                   f"{fi(r['specificity']['value'], r['specificity']['lo'], r['specificity']['hi']):>24}"
            if self.gold:
                gs, gp = r["gold_sensitivity"] or {}, r["gold_specificity"] or {}
                line += f" {fi(gs.get('value'), gs.get('lo'), gs.get('hi')):>24} {fi(gp.get('value'), gp.get('lo'), gp.get('hi')):>24}"
            lines.append(line)
        if self.gold:
            acc = self.gold["accuracy"]
            lines.append("accuracy against gold: " + ", ".join(
                f"{k} {fi(v['value'], v['lo'], v['hi'])}" for k, v in acc.items()))
        for c in self.by_category:
            lines.append(f"  [{c['category']}] " + ", ".join(
                f"{r['judge']} sens {fi(r['sensitivity']['value'])} spec {fi(r['specificity']['value'])}"
                for r in c["judge_errors"]))
        lines += [f"note: {n}" for n in self.notes]
        return "\n".join(lines)

    def write(self, out) -> tuple:
        """The consensus labels as OUT (a labels file: .jsonl, .csv or .parquet) and panel.json beside it."""
        from pathlib import Path

        from memjudge.formats import frame_records, write_json, write_jsonl

        out = Path(out)
        ext = out.suffix.lower()
        if ext not in (".jsonl", ".csv", ".parquet"):
            raise UsageError(f"--out must be a labels file (.jsonl, .csv or .parquet), got {str(out)!r}")
        out.parent.mkdir(parents=True, exist_ok=True)
        if ext == ".jsonl":
            write_jsonl(out, frame_records(self.labels))
        elif ext == ".csv":
            self.labels.to_csv(out, index=False)
        else:
            self.labels.to_parquet(out, index=False)
        summary = out.parent / "panel.json"
        write_json(summary, self.to_json())
        return out, summary


def panel_name(method: str, judges: Sequence[str]) -> str:
    return f"panel:{method}({'+'.join(judges)})"


def _bootstrap_errors(R, method, s, cluster, n_personas, B, seed, chunk=CHUNK):
    """(sens (B, J), spec (B, J), prior (B, K)) over persona-cluster resamples: per-persona
    counts of each response pattern are the sufficient statistics, a resample's pattern
    weights are `cluster_weights(...) @ counts`."""
    from memjudge.stats.bootstrap import cluster_counts

    P, inverse = response_patterns(R)
    counts = cluster_counts(cluster, inverse, n_personas, P.shape[0])
    W = cluster_weights(n_personas, B, seed) @ counts
    sens, spec, prior = [], [], []
    for start in range(0, B, chunk):
        fit = fit_patterns(P, W[start:start + chunk], method)
        a, b = sens_spec(fit.e, fit.prior, s, fit.class_counts)
        sens.append(a)
        spec.append(b)
        prior.append(fit.prior)
    return np.vstack(sens), np.vstack(spec), np.vstack(prior)


def _errors_block(R, method, s, judges, classes, cluster, n_personas, B, seed):
    """judge_errors rows and the prior (with intervals) for one set of items."""
    if method == "majority":
        # no latent model: error rates against the majority verdict are not estimates of the
        # truth, so none are given (use dawid-skene or one-coin for error rates)
        return None, None, None
    fit = fit_em(R, method)
    assert fit.class_counts is not None  # fit_em always counts
    sens, spec = sens_spec(fit.e[0], fit.prior[0], s, fit.class_counts[0])
    ci_s = ci_p = np.full((len(judges), 2), np.nan)
    ci_pr = np.full((len(classes), 2), np.nan)
    if B > 0 and n_personas > 1:
        bs, bp, bpr = _bootstrap_errors(R, method, s, cluster, n_personas, B, seed)
        ci_s, ci_p, ci_pr = interval_pairs(bs), interval_pairs(bp), interval_pairs(bpr)
    rows = [{"judge": j, "sensitivity": _est(sens[i], *ci_s[i]), "specificity": _est(spec[i], *ci_p[i]),
             "confusion": {said: {true: fit.e[0, i, k, c] for c, true in enumerate(classes)}
                           for k, said in enumerate(classes)}}
            for i, j in enumerate(judges)]
    prior = {c: _est(fit.prior[0, k], *ci_pr[k]) for k, c in enumerate(classes)}
    return rows, prior, fit


def _gold_rates(Y, verdict_idx, gold_idx, s, cluster, n_personas, B, seed):
    """Measured sensitivity/specificity per column of Y and accuracy per column of Y plus the
    panel, against gold class indices (−1: no gold), with persona-cluster intervals."""
    cols = np.column_stack([Y, verdict_idx])  # last column: the panel
    has = (gold_idx >= 0)[:, None] & (cols >= 0)
    g_pos = (gold_idx == s)[:, None]
    said_pos = cols == s
    stats = np.stack([has & g_pos, has & g_pos & said_pos, has & ~g_pos, has & ~g_pos & ~said_pos,
                      has, has & (cols == gold_idx[:, None])], axis=2).astype(float)  # n, J+1, 6
    n, C, F = stats.shape
    per_p = np.zeros((n_personas, C * F))
    np.add.at(per_p, cluster, stats.reshape(n, C * F))
    tot = per_p.sum(axis=0).reshape(C, F)

    def ratios(t):
        with np.errstate(invalid="ignore", divide="ignore"):
            return t[..., 1] / t[..., 0], t[..., 3] / t[..., 2], t[..., 5] / t[..., 4]

    point = ratios(tot)
    if B > 0 and n_personas > 1:
        reps = (cluster_weights(n_personas, B, seed) @ per_p).reshape(B, C, F)
        cis = [interval_pairs(r) for r in ratios(reps)]
    else:
        cis = [np.full((C, 2), np.nan)] * 3
    return [[_est(point[k][c], *cis[k][c]) for c in range(C)] for k in range(3)], tot[:, 4]


def panel(labels, judges: Sequence[str] | None = None, method: str = "dawid-skene", replicate: int | str = 0,
          by: str | None = None, gold=None, B: int = B_DEFAULT, seed: int = 0) -> PanelResult:
    """Consensus verdicts of a panel of judges and each judge's error rates (module docstring).

    `labels`: a labels frame or file path(s); `gold`: a gold frame (assertion_id, verdict) or a
    path; `by`: None or "category"; `B`: bootstrap resamples (0: no intervals)."""
    import time

    from memjudge.formats import LABEL_COLUMNS, read_gold, read_labels

    if method not in METHODS:
        raise UsageError(f"unknown panel method {method!r} (known: {', '.join(METHODS)})")
    if by not in (None, "category"):
        raise UsageError(f"--by must be 'category', got {by!r}")
    if B < 0:
        raise UsageError(f"bootstrap resamples must be >= 0, got {B}")
    if not isinstance(labels, pd.DataFrame):
        paths = [labels] if isinstance(labels, (str, bytes)) or hasattr(labels, "__fspath__") else list(labels)
        frames = []
        for p in paths:
            df = read_labels(p, keep_line=True)
            check_declared(df, p)
            frames.append(df.drop(columns=[LINE]))
        labels = pd.concat(frames, ignore_index=True)
        dup = labels.duplicated(["assertion_id", "judge", "rubric", "replicate"])
        if dup.any():
            r = labels[dup].iloc[0]
            raise UsageError(f"duplicate label for {r['assertion_id']!r} (judge {r['judge']}, replicate {r['replicate']}) across the labels files")
    if gold is not None and not isinstance(gold, pd.DataFrame):
        gold_path = gold
        gold = read_gold(gold_path, keep_line=True)
        check_declared(gold.assign(judge="gold"), gold_path)
    elif gold is not None:
        check_declared(gold.assign(judge="gold"))
    rs = responses(labels, judges, replicate)
    classes, names = rs.classes, rs.judges
    s = classes.index(SUPPORTED)
    R = rs.one_hot
    n, J, K = R.shape
    answered = R.sum(axis=(1, 2)) > 0
    personas = pd.Index(sorted(rs.items["persona_id"].astype(str).unique()))
    cluster_all = personas.get_indexer(rs.items["persona_id"].astype(str))
    judge_name = panel_name(method, names)
    notes: list[str] = []
    t0 = time.perf_counter()

    Ra, cl = R[answered], cluster_all[answered]
    if method == "majority":
        share, vidx = majority_vote(Ra)
        score = share[:, s]
        iterations, converged = 0, True
        decided = vidx[vidx >= 0]  # the prior of a majority panel: the shares of its verdicts
        prior = {c: _est(float(np.mean(decided == k)) if len(decided) else np.nan) for k, c in enumerate(classes)}
        judge_errors: list[dict[str, Any]] = [{"judge": j, "sensitivity": _est(np.nan), "specificity": _est(np.nan)}
                                              for j in names]
        notes.append("majority vote has no latent model: sensitivity and specificity are estimated by "
                     "--method dawid-skene or one-coin")
    else:
        rows, prior, fit = _errors_block(Ra, method, s, names, classes, cl, len(personas), B, seed)
        q = fit.q[0]
        score = q[:, s]
        top = q.max(axis=1)
        unique = (np.abs(q - top[:, None]) <= 1e-12).sum(axis=1) == 1
        vidx = np.where(unique, q.argmax(axis=1), -1)
        iterations, converged = int(fit.iterations[0]), bool(fit.converged[0])
        judge_errors = rows
        if not converged:
            notes.append(f"EM stopped at the iteration limit ({N_ITER}) before the bound settled")
    verdict_idx = np.full(n, -1)
    verdict_idx[answered] = vidx
    scores = np.full(n, np.nan)
    scores[answered] = score

    by_category: list[dict] = []
    if by == "category" and method != "majority":
        for cat in sorted(rs.items["category"].astype(str).unique()):
            sel = answered & (rs.items["category"].astype(str).to_numpy() == cat)
            Rc = R[sel]
            if Rc.shape[0] == 0:
                continue
            pc = pd.Index(sorted(set(cluster_all[sel])))
            rows_c, prior_c, fit_c = _errors_block(Rc, method, s, names, classes, pc.get_indexer(cluster_all[sel]),
                                                   len(pc), B, seed)
            given = (Rc.sum(axis=2) > 0).sum(axis=0)
            for r, g in zip(rows_c, given):
                r["n_items"] = int(g)
                if g == 0:
                    r["sensitivity"] = r["specificity"] = _est(np.nan)
                r.pop("confusion", None)
            by_category.append({"category": cat, "n_items": int(sel.sum()), "iterations": int(fit_c.iterations[0]),
                                "prior": prior_c, "judge_errors": rows_c})
    elif by == "category":
        notes.append("--by category needs --method dawid-skene or one-coin (majority estimates no error rates)")

    gold_out: dict[str, Any] | None = None
    if gold is not None:
        if gold["assertion_id"].duplicated().any():
            # several annotators per item (memjudge annotate): the strict majority; a tie is no gold
            from memjudge.stats.agreement import majority_votes

            gold, gold_ties = majority_votes(gold.assign(assertion_id=gold["assertion_id"].astype(str)), ["assertion_id"])
            if gold_ties:
                notes.append(f"{gold_ties} item(s) whose gold annotators tie: left out of the gold figures")
        gmap = dict(zip(gold["assertion_id"].astype(str), gold["verdict"]))
        gv = rs.items["assertion_id"].astype(str).map(gmap)
        gidx = np.array([classes.index(v) if isinstance(v, str) and v in classes else (-2 if isinstance(v, str) else -1)
                         for v in gv])
        # a gold label no judge used (e.g. partial) is still "not supported"
        gidx = np.where(gidx == -2, K, gidx)
        (gs, gp, acc), n_gold = _gold_rates(rs.Y, verdict_idx, gidx, s, cluster_all, len(personas), B, seed)
        for i, r in enumerate(judge_errors):
            r["gold_sensitivity"], r["gold_specificity"], r["gold_n"] = gs[i], gp[i], int(n_gold[i])
        gold_out = {"n_items": int((gidx >= 0).sum()),
                    "accuracy": {**{j: acc[i] for i, j in enumerate(names)}, judge_name: acc[J]},
                    "panel_sensitivity": gs[J], "panel_specificity": gp[J]}
        if gold_out["n_items"] == 0:
            notes.append("no item of the panel has a gold label")
    else:
        for r in judge_errors:
            r["gold_sensitivity"] = r["gold_specificity"] = None

    # the consensus labels file
    items = rs.items
    verdicts = [classes[k] if k >= 0 else None for k in verdict_idx]
    n_valid = (rs.Y >= 0).sum(axis=1)
    counts = R.sum(axis=1)
    errors: list[str | None] = []
    rationale: list[str | None] = []
    for i in range(n):
        tally = ", ".join(f"{c} {int(counts[i, k])}" for k, c in enumerate(classes) if counts[i, k])
        rationale.append(f"{method} over {n_valid[i]} of {J} judges ({tally})" if n_valid[i] else None)
        if n_valid[i] == 0:
            errors.append("no judge of the panel gave a valid verdict")
        elif verdict_idx[i] < 0:
            errors.append(f"tie between the judges ({tally}): no verdict")
        else:
            errors.append(None)
    out = pd.DataFrame({
        "assertion_id": items["assertion_id"].astype(str), "persona_id": items["persona_id"].astype(str),
        "category": items["category"].astype(str), "judge": judge_name, "rubric": rs.rubric, "replicate": 0,
        "verdict": pd.Series(verdicts, dtype=object), "judge_score": scores, "evidence": None,
        "evidence_found": None, "rationale": rationale, "error": errors, "cached": False, "usage": None,
        "latency_s": None,
    })[LABEL_COLUMNS]
    out["simulated"] = rs.simulated
    ties = sum(1 for i in range(n) if n_valid[i] and verdict_idx[i] < 0)
    if ties:
        notes.append(f"{ties} item(s) tied between the judges: verdict null (see 'error')")
    if (~answered).any():
        notes.append(f"{int((~answered).sum())} item(s) without any valid verdict: verdict null")
    if rs.ties:
        notes.append(f"{rs.ties} (judge, item) replicate-majority ties left out")
    if len(personas) < 2 and B > 0 and method != "majority":
        notes.append("fewer than two personas: no persona-cluster interval")
    prior_out = {c: (v["value"] if isinstance(v, dict) else v) for c, v in prior.items()}
    return PanelResult(
        method=method, judge=judge_name, judges=names, classes=classes, labels=out, n_items=n,
        iterations=iterations, converged=converged, prior=prior_out, judge_errors=judge_errors,
        by_category=by_category, gold=gold_out, replicate=replicate, B=B, seed=seed, personas=len(personas),
        prior_interval=prior, simulated=rs.simulated, seconds=time.perf_counter() - t0, notes=notes)
