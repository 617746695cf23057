"""One judge's verdicts out of a labels table: the judge and replicate choice shared by
`memjudge compare`, `memjudge sample` and `memjudge estimate` (it sits here, below them all,
so that stats never imports the comparison).

`select_verdicts(labels, judge, replicate)` returns the verdict per assertion id (None = no
valid verdict) of the support rubric: one judge (the only one, or the one named), one replicate
(an index) or the replicates' majority (``"majority"``; a tie between labels has no majority,
so no valid verdict).
"""

from __future__ import annotations

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


__all__ = ["judges_in", "select_verdicts"]
