"""cascade.json: what `memjudge cascade` certified, decided and spent (spec §14)."""

from __future__ import annotations

from typing import Literal

from memjudge.formats.schemas.common import Num, Strict, described


class CascadeGold(Strict):
    kind: Literal["people", "last_stage"] = described(
        "people: a gold file's labels; last_stage: the last stage's labels on random candidates (agreement with that judge)")
    file: str | None = described("the gold file (--gold)")
    n: int = described("gold items used (several annotators: the majority verdict, ties left out)")
    sample: int | None = described("--gold-sample N")


class CascadeCalibration(Strict):
    certified: bool
    level: Num = described("the thresholds' path: the error level certified")
    bound: Num = described("one-sided Clopper-Pearson upper bound (at 1 - delta) of the trusted gold items' error")
    agreement_bound: Num = described("1 - bound: the agreement certified to be at least the target")
    n: int = described("gold items")
    n_select: int = described("items that chose the path: the selection sample, or a third of the gold items")
    n_certify: int = described("gold items the certificate rests on")
    trusted: int = described("of those, trusted by the cascade at the thresholds")
    errors: int = described("of those, wrong")
    tested: int = described("levels of the path tested (fixed-sequence testing)")
    min_gold: int = described("the fewest gold items that could certify the target at delta")
    message: str = described("why nothing is certified (empty when certified)")
    select_items: int = described("candidates outside the gold items answered by every stage to choose the path (--select)")


class CascadeStage(Strict):
    judge: str
    confidence: str = described("judge_score (its size), or the agreement of k replicates")
    threshold: Num = described("trusted when the confidence is at least this; null: the stage trusts nothing")
    asked: int = described("items the stage was asked about in the cascade (gold and selection calls aside)")
    decided: int = described("of those, trusted")
    calls: int = described("distinct calls, gold and selection items included")
    cost_usd: Num = described("of those calls at the judges file's prices; null without prices")
    run: str | None = described("the stage's run folder")


class CascadeInputs(Strict):
    candidates: str | None = described("the candidates file, as given (null: a DataFrame)")
    sources: str | None = described("the sources file, as given")


class CascadeJson(Strict):
    """DIR/cascade.json."""

    target: float = described("agreement certified on the trusted items")
    delta: float = described("chance the certificate is wrong")
    certified: bool
    gold: CascadeGold
    calibration: CascadeCalibration
    stages: list[CascadeStage]
    candidates: int
    decided: int
    decided_share: float
    abstained: int = described("items no stage trusted: queue.jsonl, for memjudge annotate")
    queue: str
    cost_usd: Num = described("every stage's calls, gold and selection items included")
    top_judge_cost_usd: Num = described("the last stage asked about every candidate, at the same prices (from its cost per call)")
    cost_share: Num = described("cost_usd / top_judge_cost_usd")
    guarantee: str = described("what is certified, and what is not, in one sentence")
    inputs: CascadeInputs = described("what memjudge view reads the items and sources from")
