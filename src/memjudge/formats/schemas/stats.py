"""noise.json, agreement.json, estimate.json and panel.json (written by `memjudge.stats`)."""

from __future__ import annotations

from typing import Literal

from memjudge.formats.schemas.common import Estimate, Num, Strict, described

# -- noise.json: NoiseResult.to_json ------------------------------------------------------


class CategoryNoise(Strict):
    items: int = described("items of the category with at least two valid replicates")
    flip_rate: Estimate


class JudgeNoise(Strict):
    judge: str
    rubric: str = described("the rubric id, name@hash")
    items: int = described("items with at least two valid replicates")
    replicates: int
    excluded_null: int = described("label rows with a null verdict, left out")
    flip_rate: Estimate = described("chance that two replicates of an item differ, averaged over items")
    any_flip_rate: Estimate = described("share of items whose replicates are not all the same")
    by_construction: bool = described(
        "true when the judge's later replicates are copies of the first: its flip rate is zero by construction, not measured",
        default=False)
    by_category: dict[str, CategoryNoise] = described("per category, by name")


class NoiseJson(Strict):
    """`memjudge noise --out RUN` / `--json`."""

    judges: list[JudgeNoise] = described("one entry per (judge, rubric)")


# -- agreement.json: AgreementResult.to_json ------------------------------------------------


class Pair(Strict):
    a: str
    b: str
    n: int = described("items both raters labelled")
    percent_agreement: Estimate
    cohen_kappa: Estimate
    gwet_ac1: Estimate
    positive_agreement: Estimate = described("2a/(2a+b+c) on `supported`")
    negative_agreement: Estimate = described("2d/(2d+b+c): every label but `supported` counts as negative")
    confusion: dict[str, dict[str, int]] = described("rows: a's label, columns: b's label")


class GoldAgreement(Strict):
    judge: str
    n: int
    accuracy: Estimate
    cohen_kappa: Estimate
    unsupported_precision: Estimate
    unsupported_recall: Estimate


class AgreementJson(Strict):
    """`memjudge agreement --out RUN` / `--json`."""

    judges: list[str] = described("the raters (a judge, `judge [rubric]`, or `human:NAME`)")
    items: int
    pairs: list[Pair]
    krippendorff_alpha: Estimate = described("nominal α over all raters")
    fleiss_kappa: Estimate = described("Fleiss' κ on items every rater labelled")
    gold: list[GoldAgreement] = described("each judge against --gold (empty without it)")


# -- estimate.json: EstimateResult.to_dict ------------------------------------------------


class GoldCounts(Strict):
    rows: int = described("rows in the gold file")
    items: int = described("items with a gold verdict")
    matched: int = described("gold items found in the labels")
    unmatched: int = described("gold items in no labels, left out")
    null_judge_verdict: int = described("gold items whose judge verdict is null (count as 'not supported' in PPI++)")
    non_verdicts: int = described("rows with skip, unsure, …")
    ties: int = described("items whose annotators tie: no gold verdict")
    annotators: int


class EstimateGroup(Strict):
    group: str = described('"all" or the category')
    n_items: int
    n_gold: int
    judge_accuracy_on_gold: Num
    judge_only: Estimate = described("supported / valid verdicts of the judge")
    gold_only: Estimate = described("the (weighted) mean of the gold labels")
    ppi: Estimate = described("PPI++: λ × judge mean on items without gold (ipw: on every item) + the gold's "
                              "mean of Y − λŶ (ipw: weighted 1/inclusion_prob)")
    ppi_lambda: Num = described("λ of the PPI++ estimate (1 = plain PPI, 0 = gold only)")
    effective_gold_n: Num = described("equal weights: n_gold × var(gold only) / var(PPI++); a sample design "
                                      "(estimator ipw): the uniform gold sample size with PPI's variance; "
                                      "never above n_items")


class Plan(Strict):
    half_width: float
    n_gold_needed: int | None
    n_more: int | None
    reachable: bool
    predicted_half_width: float | None = described("when reachable", default=None)
    design_effect: float | None = described("when reachable: the pilot's measured / modelled variance", default=None)
    predicted_half_width_all_gold: float | None = described("when not reachable with every item labelled", default=None)
    note: str | None = described("when not reachable: why", default=None)


class EstimateJson(Strict):
    """`memjudge estimate --out RUN` / `--json`."""

    judge: str
    replicate: int | Literal["majority"]
    n_items: int
    n_gold: int
    interval: Literal["bootstrap", "clt"]
    level: float
    B: int | None = described("bootstrap resamples (null for --interval clt)")
    seed: int
    weighted: bool = described("gold items weighted by 1/inclusion_prob")
    estimator: Literal["ppi++", "ipw"] = described(
        "ppi++: ppi_py's PPI++ (equal weights); ipw: inverse-probability-weighted PPI (Zrnic & Candès 2024), "
        "the judge's mean over every item and the gold weighted 1/inclusion_prob")
    gold: GoldCounts
    groups: list[EstimateGroup] = described('"all" first, then one per category with --by category')
    plan: Plan | None = described("with --plan --half-width H")
    notes: list[str]


# -- panel.json: PanelResult.to_json ------------------------------------------------------


class JudgeErrors(Strict):
    judge: str
    sensitivity: Estimate = described("P(says supported | truly supported)")
    specificity: Estimate = described("P(says anything else | truly not supported)")
    confusion: dict[str, dict[str, Num]] | None = described(
        "e[said][true] = P(judge says `said` | true class `true`); not in by_category", default=None)
    gold_sensitivity: Estimate | None = described("with --gold: the same rate measured on gold", default=None)
    gold_specificity: Estimate | None = described("with --gold", default=None)
    gold_n: int | None = described("with --gold: items with gold", default=None)
    n_items: int | None = described("in by_category: the category's items", default=None)


class CategoryPanel(Strict):
    category: str
    n_items: int
    iterations: int
    prior: dict[str, Estimate]
    judge_errors: list[JudgeErrors]


class PanelGold(Strict):
    n_items: int
    accuracy: dict[str, Estimate] = described("each judge's and the panel's accuracy against gold")
    panel_sensitivity: Estimate
    panel_specificity: Estimate


class PanelDefinitions(Strict):
    sensitivity: str
    specificity: str
    interval: str


class PanelJson(Strict):
    """`memjudge panel ... --out DIR/NAME.jsonl` writes DIR/panel.json beside the consensus labels."""

    method: Literal["dawid-skene", "one-coin", "majority"]
    judge: str = described("the consensus judge's name, panel:METHOD(A+B+…)")
    judges: list[str]
    labels: list[str] = described("the classes of the model")
    n_items: int
    iterations: int
    converged: bool
    n_iter: int = described("the EM's iteration limit")
    tol: float = described("the EM's stopping tolerance")
    prior: dict[str, Num]
    prior_interval: dict[str, Estimate]
    judge_errors: list[JudgeErrors]
    by_category: list[CategoryPanel] = described("with --by category (empty without it)")
    gold: PanelGold | None = described("with --gold")
    replicate: int | Literal["majority"]
    B: int
    seed: int
    personas: int
    simulated: bool = described("every judge of the panel is simulated (sim:)")
    verdicts: dict[str, int] = described("consensus verdict counts (null counted as \"null\")")
    definitions: PanelDefinitions
    notes: list[str]
