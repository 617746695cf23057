"""One judge's verdicts out of a labels table: the judge and replicate choice shared by
`memjudge compare`, `memjudge sample` and `memjudge estimate` (it sits here, below them all,
so that stats never imports the comparison), and its confidence signal as log-odds
(`confidence_signal`: stats/active_sampling.py's module doc).

`select_verdicts(labels, judge, replicate)` returns the verdict per assertion id (None = no
valid verdict) of the support rubric: one judge (the only one, or the one named), one replicate
(an index) or the replicates' majority (``"majority"``; a tie between labels has no majority,
so no valid verdict).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from memjudge.errors import UsageError
from memjudge.formats import only_rubric, rubric_name
from memjudge.stats.agreement import majority_votes


def judges_in(labels: pd.DataFrame) -> list[str]:
    return sorted(labels["judge"].dropna().astype(str).unique().tolist())


def select_verdicts(labels: pd.DataFrame, judge: str | None, replicate) -> tuple[pd.Series, str]:
    """verdict per assertion_id (None = no valid verdict) for one judge and replicate choice."""
    if "rubric" in labels.columns:
        labels = only_rubric(labels, "support")
        rubrics = sorted(labels["rubric"].dropna().astype(str).map(rubric_name).unique().tolist())
        if len(rubrics) > 1:
            raise UsageError(f"labels hold several rubrics ({', '.join(rubrics)}) and none is 'support'")
    judges = judges_in(labels)
    if not judges:
        raise UsageError("labels hold no judge")
    if judge is None:
        if len(judges) > 1:
            raise UsageError(f"labels hold several judges ({', '.join(judges)}); choose one with --judge")
        judge = judges[0]
    elif judge not in judges:
        raise UsageError(f"judge {judge!r} not in labels (judges: {', '.join(judges)})")
    lab = labels[labels["judge"].astype(str) == judge]
    if replicate == "majority":
        # A tie between labels has no majority: no valid verdict.
        chosen, _ = majority_votes(lab[lab["verdict"].notna()], ["assertion_id"])
        ids = lab["assertion_id"].unique()
        majority = chosen.set_index("assertion_id")["verdict"]
        return majority.reindex(ids).astype(object).where(lambda s: s.notna(), None), judge
    reps = sorted(int(r) for r in lab["replicate"].unique())
    if int(replicate) not in reps:
        raise UsageError(f"judge {judge!r} has no replicate {replicate} (replicates: {', '.join(map(str, reps))})")
    lab = lab[lab["replicate"].astype(int) == int(replicate)]
    if lab["assertion_id"].duplicated().any():
        dup = lab["assertion_id"][lab["assertion_id"].duplicated()].iloc[0]
        raise UsageError(f"labels: more than one verdict for {dup!r} (judge {judge}, replicate {replicate})")
    return pd.Series(lab["verdict"].to_numpy(), index=lab["assertion_id"].to_numpy(), dtype=object), judge


SIGNALS = ("log-odds", "replicates", "panel")
SCORE_CLIP = 1e-6


def no_signal_message(judge: str) -> str:
    return (f"judge {judge!r} has no confidence signal for --strategy active: no judge_score and a single replicate. "
            f"Give it one: score with a judge that returns log-odds (the embedded local: judge, openai: with "
            f"logprobs, llama.cpp's server), or --replicates 3 or more (--uncertainty replicates), or a panel of "
            f"judges (memjudge panel; --uncertainty panel), or a sim: judge with confidence_auc")


def confidence_signal(lab: pd.DataFrame, judge: str, replicate, uncertainty: str | None) -> tuple[pd.Series, str]:
    """Log-odds of `supported` per assertion id from one judge's labels (module doc), and the
    signal's name."""
    from memjudge.formats import only_rubric

    if uncertainty is not None and uncertainty not in SIGNALS:
        raise UsageError(f"--uncertainty must be one of {', '.join(SIGNALS)}, got {uncertainty!r}")
    rows = only_rubric(lab, "support") if "rubric" in lab.columns else lab
    rows = rows[rows["judge"].astype(str) == judge]
    scores = pd.to_numeric(rows["judge_score"], errors="coerce") if "judge_score" in rows.columns else None
    has_score = scores is not None and bool(scores.notna().any())
    reps = rows["replicate"].astype(int).nunique() if "replicate" in rows.columns else 1
    if uncertainty is None:
        if has_score:
            uncertainty = "panel" if judge.startswith("panel:") else "log-odds"
        elif reps >= 2:
            uncertainty = "replicates"
        else:
            raise UsageError(no_signal_message(judge))
    if uncertainty in ("log-odds", "panel"):
        if not has_score:
            raise UsageError(f"--uncertainty {uncertainty}: judge {judge!r} has no judge_score. "
                             + no_signal_message(judge).split(". ", 1)[1])
        assert scores is not None
        r = rows.assign(_s=scores)
        if replicate != "majority":
            r = r[r["replicate"].astype(int) == int(replicate)]
        s = r.groupby("assertion_id")["_s"].mean()
        if uncertainty == "panel":
            if ((s < 0) | (s > 1)).any():
                raise UsageError(f"--uncertainty panel: judge {judge!r}'s judge_score is not a probability "
                                 f"(found {float(s[(s < 0) | (s > 1)].iloc[0])!r}); use --uncertainty log-odds")
            p = s.clip(SCORE_CLIP, 1 - SCORE_CLIP)
            s = pd.Series(np.log(p / (1 - p)), index=p.index)
        return s, uncertainty
    if reps < 2:
        raise UsageError(f"--uncertainty replicates: judge {judge!r} has {reps} replicate. "
                         + no_signal_message(judge).split(". ", 1)[1])
    valid = rows[rows["verdict"].notna()]
    k = (valid["verdict"] == "supported").groupby(valid["assertion_id"]).sum()
    m = valid.groupby("assertion_id").size()
    return pd.Series(np.log((k + 0.5) / (m - k + 0.5)), index=k.index), "replicates"


__all__ = ["SIGNALS", "confidence_signal", "judges_in", "no_signal_message", "select_verdicts"]
