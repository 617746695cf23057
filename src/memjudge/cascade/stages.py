"""A cascade's stages: which judge, how sure it is of each answer, what its calls cost.

A stage's confidence in an item is the size of its `judge_score` (the verdict's log-odds:
the embedded judge, hosted judges with log-probabilities, `sim:` judges), or, for a judge with
`replicates = k` in the judges file, the share of its k replicates that give the majority
verdict (the *Simulated Annotators* idea of Jung et al.). A stage with neither is a usage
error naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from memjudge.errors import UsageError
from memjudge.judges import JudgeConfig


@dataclass
class Stage:
    index: int  # 0-based place in the cascade
    config: JudgeConfig

    @property
    def spec(self) -> str:
        return self.config.spec

    @property
    def replicates(self) -> int:
        return self.config.replicates or 1

    @property
    def confidence(self) -> str:
        """What the stage's confidence is: "judge_score" or "agreement of k replicates"."""
        return "judge_score" if self.config.replicates is None else f"agreement of {self.replicates} replicates"

    @property
    def folder(self) -> str:
        return f"{self.index + 1}-" + re.sub(r"[^A-Za-z0-9._-]+", "_", self.spec)

    def check(self) -> None:
        """Before any call: a judge asked for no log-odds needs replicates to be confident with."""
        if self.config.replicates is None and not self.config.logprobs:
            raise UsageError(f"stage {self.index + 1} ({self.spec}): no confidence: logprobs is off and the judges file "
                             "gives it no `replicates` (agreement among k replicates)")

    def answers(self, labels: pd.DataFrame) -> pd.DataFrame:
        """assertion_id -> verdict (the majority of the replicates asked, None without one) and
        confidence (NaN where the stage has none: never trusted). A judge_score stage whose every
        answer lacks a score is a UsageError naming the stage."""
        lab = labels[["assertion_id", "replicate", "verdict", "judge_score"]]
        if self.config.replicates is None:
            first = lab[lab["replicate"] == 0]
            score = pd.to_numeric(first["judge_score"], errors="coerce").astype(float)
            valid = first["verdict"].notna().to_numpy()
            if valid.any() and not np.isfinite(score.to_numpy()[valid]).any():
                raise UsageError(f"stage {self.index + 1} ({self.spec}): its answers carry no judge_score; give it "
                                 "`replicates = k` in the judges file to use the agreement of k replicates instead")
            conf = np.where(valid, np.abs(score.to_numpy()), np.nan)
            return pd.DataFrame({"assertion_id": first["assertion_id"].to_numpy(), "verdict": first["verdict"].to_numpy(),
                                 "confidence": conf})
        rows = []
        k = self.replicates
        for aid, grp in lab.groupby("assertion_id", sort=False):
            said = grp["verdict"].dropna()
            if len(said) < k:  # a replicate without a valid answer: not confident
                rows.append((aid, said.mode().iloc[0] if len(said) else None, np.nan))
                continue
            counts = said.value_counts()
            top = counts.index[0] if (len(counts) == 1 or counts.iloc[0] > counts.iloc[1]) else None
            rows.append((aid, top, counts.iloc[0] / k if top is not None else np.nan))
        return pd.DataFrame(rows, columns=["assertion_id", "verdict", "confidence"])


def make_stages(specs, judges_file=None) -> list[Stage]:
    from memjudge.judges import make_judge
    from memjudge.judges.panel import judge_config

    if not specs:
        raise UsageError("a cascade needs at least one --stage JUDGE")
    if len(set(specs)) != len(specs):
        raise UsageError(f"a stage is named twice: {', '.join(s for s in dict.fromkeys(specs) if list(specs).count(s) > 1)}")
    stages = []
    for i, spec in enumerate(specs):
        try:
            config = judge_config(spec, judges_file)
            make_judge(config)  # an unknown provider or option fails here, before any call
        except UsageError as e:
            raise UsageError(f"stage {i + 1} ({spec}): {e}") from None
        stage = Stage(i, config)
        stage.check()
        stages.append(stage)
    return stages


__all__ = ["Stage", "make_stages"]
