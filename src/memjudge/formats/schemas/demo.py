"""demo.json, local_judge.json and coverage_judge.json (written by `memjudge demo`): how long
each step took, and how good the embedded judge was against the simulated corpus's truth."""

from __future__ import annotations

from typing import Literal

from memjudge.formats.schemas.common import Json, Num, Strict, described


class DemoSeconds(Strict):
    """Wall seconds of each step (a cached rerun's are seconds in all)."""

    verify_model: float = described("verifying the weights (the model loads at its first call, inside score_local)")
    llama_self_test: float = described(
        "reading (or, the first time for this llama.cpp build, CPU and model, running) the self-test of llama.cpp")
    simulate: float
    score_local: float = described("calibrating and scoring with the embedded judge (the model's load included)")
    coverage_local: float
    noise_agreement: float
    compare_robustness: float
    report: float
    total: float
    cpu_process: float = described("user + system CPU seconds of the process (less load-dependent than wall time)")


class LocalCalibration(Strict):
    """The embedded judge's threshold, picked by `memjudge calibrate` on other personas."""

    threshold: float
    target: str
    options: dict[str, Json] = described("the judge's options beside the threshold")
    n: int = described("candidates of the calibration sample")
    n_unsupported: int
    personas: int
    seed: int = described("the calibration sample's seed (the demo's seed + 1000: other personas)")
    packaged_threshold: float
    packaged_category_thresholds: dict[str, float] = described("categories with a packaged threshold of their own")


class LocalJudgeJson(Strict):
    """local_judge.json: the embedded judge's support verdicts (replicate 0) against the corpus's
    construction truth, which is simulated. Only `judge` and `n` when the gold is one-sided."""

    judge: str
    n: int
    gold_supported: int = described("absent when the gold is all one class", default=None)
    threshold: float = described("the threshold the verdicts used", default=None)
    auc: Num = described("of judge_score against the gold", default=None)
    balanced_accuracy: Num = None
    accuracy: Num = None
    support_rate: Num = described("share of verdicts `supported`", default=None)
    gold_support_rate: Num = None
    in_sample_best_threshold: Num = described("optimistic: picked on these very items", default=None)
    in_sample_best_balanced_accuracy: Num = None
    calibration: LocalCalibration | None = None
    note: str = described("what the threshold rests on", default=None)


class Confusion(Strict):
    both: int
    judge_only: int
    reference_only: int
    neither: int


class CoverageFigures(Strict):
    """The judge's coverage labels against the reference map, as a 2×2 table."""

    n: int
    percent_agreement: Num
    cohen_kappa: Num
    positive_agreement: Num = described("2a/(2a+b+c) on covered")
    confusion: Confusion


class CoverageRate(Strict):
    judge: Num
    reference: Num


class CoverageJudgeJson(Strict):
    """coverage_judge.json: the embedded judge's per-fact coverage (the first personas, sized to the
    demo's time) against the corpus's construction map, which is simulated truth."""

    judge: str
    rubric: str = described("name@hash of the rubric used")
    personas: list[str] = described("the personas whose facts were judged")
    personas_total: int
    facts_judged: int
    requested: int = described("calls asked of the model (0 on a cached rerun)")
    seconds: float
    facts_per_minute: Num = described("null when nothing was asked")
    coverage_threshold: Num
    n_facts: int
    facts_unanswered: int
    pairs: CoverageFigures = described("every (fact, candidate of its persona) pair; absent with no pair",
                                       default=None)
    pairs_by_category: dict[str, CoverageFigures] = described("by the candidate's category", default=None)
    facts: CoverageFigures = described("a fact covered by any candidate, or not", default=None)
    coverage_rate: CoverageRate = described("the share of facts covered, by the judge and by the reference", default=None)
    table1_coverage: Literal["judge", "construction map"] = described(
        "what Table 1's estimated coverage rests on: the judge's labels when every persona was judged")
    note: str


class DemoJson(Strict):
    """demo.json of `memjudge demo --out DIR`."""

    seconds: DemoSeconds
    local_judge: LocalJudgeJson = described("local_judge.json's content")
    summary: dict[str, Json] = described("counts of the simulated corpus (simulate.json's summary)")


class DemoGoldSample(Strict):
    path: str
    n: int
    strategy: Literal["uniform"]
    simulated: Literal[True] = described("the gold is the corpus's construction truth, standing in for hand labels")
    source: str


class DemoConfigJson(Strict):
    """config.json at the top of a demo's folder (each scoring run inside it has a `config` of its own)."""

    command: Literal["demo"]
    judge: str
    threshold: float = described("the embedded judge's threshold, as calibrated")
    threshold_calibration: LocalCalibration
    replicates: int
    replicates_derived: bool = described("replicate 1 copies replicate 0 (the embedded judge is deterministic)")
    simulated_judges: list[str]
    personas: int
    seed: int
    candidates_per_persona: int
    folds: int
    offline: Literal[True]
    gold_sample: DemoGoldSample
