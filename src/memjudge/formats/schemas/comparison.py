"""compare.json, compare_inputs.json, sweep.json, calibration.json and robustness.json
(written by `memjudge.comparison`)."""

from __future__ import annotations

from typing import Literal

from memjudge.formats.schemas.common import Change, EstimateN, MeanSd, Num, Paired, Strict, described

Threshold = float | dict[str, Num] | None  # null = keep all (−∞); per_category: {category: threshold}
Gate = list[str] | Literal["auto"]


class Figures(Strict):
    faithfulness: Num
    retention: Num
    coverage: Num = described("null without a coverage file (or with no judged fact)")


class WriteAllCi(Strict):
    faithfulness: EstimateN = described("the overall support rate, persona-cluster bootstrap")
    coverage: EstimateN | None


class PolicySummary(Strict):
    faithfulness: MeanSd
    retention: MeanSd
    coverage: MeanSd | None
    delta_faithfulness: Num = described("fold mean − full-sample write-all")
    delta_coverage: Num


class PairedMetrics(Strict):
    faithfulness: Paired | None
    retention: Paired | None
    coverage: Paired | None


class ChangeMetrics(Strict):
    faithfulness: Change | None
    retention: Change | None
    coverage: Change | None


class Fold(Strict):
    repeat: int
    fold: int
    policy: str = described("write_all, global, targeted or per_category")
    threshold: Threshold
    faithfulness: Num
    retention: Num
    coverage: Num


class GoldWriteAll(Strict):
    judge: Num
    ppi: Num
    # "lambda" is a Python keyword: the model names it lambda_ and the JSON key is "lambda"
    lambda_: Num = described("λ of the PPI++ estimate", alias="lambda")
    n_gold: int


class GoldPolicy(Strict):
    judge: MeanSd
    ppi: MeanSd
    delta_faithfulness_ppi: Num
    n_folds: int
    folds_without_gold: int
    folds_undefined: int
    gold_per_fold: Num


class PairedPpi(Paired):
    n_folds: int


class GoldPaired(Strict):
    judge: Paired | None
    ppi: PairedPpi | None


class Ordering(Strict):
    judge: bool | None = described("targeted ≥ global on the judge's fold means")
    ppi: bool | None = described("the paired PPI++ mean ≥ 0")
    survives: bool | None = described("the two agree")


class GoldFold(Strict):
    repeat: int
    fold: int
    policy: str
    n_gold: int
    n_unlabelled: int
    ppi: Num
    lambda_: Num = described("λ of the fold's PPI++ estimate", alias="lambda")


class GoldCompare(Strict):
    path: str
    n_gold: int
    n_matched: int
    n_unmatched: int
    n_null_judge: int
    notes: list[str]
    weighted: bool
    judge_accuracy_on_gold: Num
    write_all: GoldWriteAll
    policies: dict[str, GoldPolicy]
    paired: GoldPaired
    ordering: Ordering
    folds_detail: list[GoldFold]


class CompareJson(Strict):
    """`memjudge compare --out RUN` / `--json` (`CompareResult.to_json`)."""

    judge: str | None
    floor: float
    gate: Gate
    repeats: int
    folds: int
    seed: int
    B: int
    strict_binary: bool
    write_all: Figures = described("the full-sample write-all figures")
    write_all_ci: WriteAllCi
    policies: dict[str, PolicySummary] = described("global, targeted, per_category: fold mean ± SD")
    paired: PairedMetrics = described("targeted − global, per fold")
    paired_vs_write_all: dict[str, ChangeMetrics] = described("each policy − write-all, per fold")
    folds_detail: list[Fold]
    gold: GoldCompare | None = described("with --gold: PPI++ held-out faithfulness", default=None)
    notes: list[str]


class CompareInputs(Strict):
    """compare_inputs.json: the inputs of `memjudge compare --out RUN`, for `memjudge report`."""

    candidates: str
    labels: list[str]
    coverage: str | None
    judge: str | None
    replicate: int | Literal["majority"]
    per_category_method: Literal["greedy", "exact"]


class SweepPoint(Strict):
    threshold: float | None
    faithfulness: Num
    retention: Num
    coverage: Num


class FittedPoint(SweepPoint):
    threshold: Threshold  # type: ignore[assignment]
    gate: list[str] | None = described("targeted: the gated categories", default=None)


class SweepJson(Strict):
    """sweep.json: every global and targeted threshold on the full sample, and each policy fitted on all personas."""

    judge: str | None
    replicate: int | Literal["majority"]
    floor: float
    gate: list[str]
    write_all: Figures
    global_: list[SweepPoint] = described("the global-threshold sweep", alias="global")
    targeted: list[SweepPoint]
    fitted: dict[str, FittedPoint]


class SupportCounts(Strict):
    """Support within a group of candidates, with its persona-cluster interval."""

    n: int
    valid: int = described("candidates with a valid verdict")
    supported: int
    support_rate: Num
    ci_lo: Num
    ci_hi: Num


class Bin(SupportCounts):
    conf_lo: float
    conf_hi: float


class CategoryCalibration(SupportCounts):
    category: str
    binning: Literal["distinct", "deciles"] = described("one bin per confidence value, or ten of width 0.1")
    bins: list[Bin]


class CalibrationJson(Strict):
    """calibration.json (`memjudge compare --out RUN`): support rate per confidence bin within each category."""

    judge: str | None
    replicate: int | Literal["majority"]
    B: int
    level: float
    categories: list[CategoryCalibration]


# -- robustness.json ------------------------------------------------------------------------


class CategorySupport(Strict):
    category: str
    n: int
    valid: int
    supported: int
    support_rate: Num
    lo: Num
    hi: Num


class UnitTable(Strict):
    write_all: Figures
    write_all_ci: WriteAllCi
    policies: dict[str, PolicySummary]
    paired: PairedMetrics
    paired_vs_write_all: dict[str, ChangeMetrics]
    gold: GoldCompare | None = described("with --gold", default=None)


class Unit(Strict):
    judge: str
    replicate: int
    n_candidates: int
    n_valid: int
    has_coverage: bool
    categories: list[CategorySupport]
    overall: EstimateN
    lowest_category: str | None
    gated: list[str]
    p_gated_lowest: Num
    table: UnitTable = described("Table 1 refitted under this unit's labels, as in compare.json")
    notes: list[str]


class Kendall(Strict):
    judge_a: str
    judge_b: str
    tau: Num
    p_value: Num
    n_categories: int


class Counts(Strict):
    judges: int
    units: int


class CoverageCounts(Counts):
    judges_with_coverage: int
    units_with_coverage: int


class PpiCounts(Counts):
    judges_defined: int
    units_defined: int
    survives_judges: int = described("judges whose own ordering survives the PPI++ correction")
    survives_units: int


class RobustnessSummary(Strict):
    judges: int
    units: int
    faithfulness: Counts = described("judges / units whose targeted ≥ global on faithfulness")
    coverage: CoverageCounts
    lowest_is_gated: Counts
    faithfulness_ppi: PpiCounts | None = described("with --gold", default=None)


class RobustnessJson(Strict):
    """`memjudge robustness --out RUN` / `--json`."""

    gate: Gate
    floor: float
    repeats: int
    folds: int
    seed: int
    B: int
    strict_binary: bool
    units: list[Unit] = described("one per judge and replicate")
    kendall: list[Kendall]
    summary: RobustnessSummary

