"""The shape of `diff.json` (spec §12), defined once as dataclasses: the JSON is ``asdict`` of
`DiffResult` made plain (NaN → null), so a JSON schema can be generated from these classes
(``pydantic.TypeAdapter(DiffResult).json_schema()``).

Every figure is a `Figure`: the one estimate shape ``{"value", "lo", "hi"}`` plus ``n``, what it
counts (valid verdicts of a run, paired items, common personas). A compared figure is a `Triple`
``{"base", "new", "difference"}`` with difference = NEW − BASE.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Annotated, Any

from pydantic import Field as PydanticField

from memjudge.formats.estimate import Estimate

__all__ = ["Changed", "Counts", "DiffResult", "Figure", "Gate", "GoldDiff", "JudgeDiff", "McNemar", "Triple"]


@dataclass(frozen=True)
class Figure:
    """A value with its 95% interval (lo, hi; null when not computable) and its count n."""

    value: float | None
    lo: float | None
    hi: float | None
    n: int | None

    @classmethod
    def of(cls, est: Estimate, n: int | None) -> Figure:
        return cls(est.value, est.lo, est.hi, None if n is None else int(n))

    @property
    def estimate(self) -> Estimate:
        return Estimate(self.value, self.lo, self.hi)


@dataclass(frozen=True)
class Triple:
    """BASE, NEW and NEW − BASE."""

    base: Figure
    new: Figure
    difference: Figure


@dataclass(frozen=True)
class McNemar:
    """Discordant pairs: b = supported in BASE only, c = supported in NEW only; exact two-sided p."""

    b: int
    c: int
    p_value: float
    pairs: int


@dataclass(frozen=True)
class Changed:
    """An item whose verdict differs between the runs (null = no valid verdict)."""

    assertion_id: str
    persona_id: str
    category: str
    base: str | None
    new: str | None


@dataclass(frozen=True)
class JudgeDiff:
    """One judge's overall support rates in both runs and their difference."""

    judge: str
    overall: Triple


@dataclass(frozen=True)
class Counts:
    """Candidates side by side: an extractor that writes more is not better by writing more."""

    candidates: dict[str, int]                 # {"base", "new"}, common personas
    null_verdicts: dict[str, int]              # {"base", "new"}: no valid verdict, left out of rates
    per_persona: Triple                        # mean candidates per common persona
    by_category: dict[str, dict[str, int]]     # category -> {"base", "new"}


@dataclass(frozen=True)
class GoldDiff:
    """Judge-independent figures from gold labels. personas mode: PPI++ support rates (each run's
    gold on its own items); items mode (one candidate set, so one true support rate): each run's
    accuracy against gold on the gold items both runs judged."""

    method: str                                 # "ppi++" or "accuracy"
    n_gold: dict[str, int]                      # {"base", "new"}: gold items among each run's
    overall: Triple
    by_category: dict[str, Triple] = field(default_factory=dict)


@dataclass(frozen=True)
class Gate:
    """The CI gate's decision: `figure` (overall or a category) decided it, with its interval."""

    rule: str                   # "fail_if_worse" or "require_noninferior" (or both, joined by "+")
    margin: float
    failed: bool
    reason: str
    figure: str | None = None
    personas_needed: int | None = None   # require_noninferior, underpowered: personas in all
    items_needed: int | None = None      # ... and items in all at the present items per persona


@dataclass
class DiffResult:
    """Everything `memjudge diff` computes; ``to_dict()`` is diff.json."""

    mode: str                                   # "personas" (other candidates) or "items" (same candidates)
    judge: str
    judge_base: str
    judge_new: str
    replicate: int | str
    level: float
    B: int
    seed: int
    personas_common: int
    personas_only_base: list[str]
    personas_only_new: list[str]
    overall: Triple
    by_category: dict[str, Triple] = field(default_factory=dict)
    counts: Counts | None = None
    mcnemar: McNemar | None = None
    changed: list[Changed] | None = None
    coverage: Triple | None = None
    table1: dict[str, dict[str, dict[str, float | None]]] | None = None
    gold: GoldDiff | None = None
    judges: list[JudgeDiff] = field(default_factory=list)
    judges_agree_on_sign: bool | None = None
    gate: Gate | None = None
    base_run: str | None = None
    new_run: str | None = None
    notes: list[str] = field(default_factory=list)
    # The resampled differences NEW − BASE, columns overall then `by_category` in order: what the
    # gate takes at a family-wise level (not part of diff.json).
    draws: Annotated[Any, PydanticField(exclude=True)] = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        from memjudge.formats import json_safe

        d = asdict(replace(self, draws=None))
        d.pop("draws")
        if self.gate is None:
            d.pop("gate")
        return json_safe(d)

    to_json = to_dict

    @property
    def units(self) -> str:
        return "paired items" if self.mode == "items" else "personas"

    def render(self) -> str:
        from memjudge.diff.text import render_text

        return render_text(self)

    def summary_markdown(self) -> str:
        from memjudge.diff.text import render_markdown

        return render_markdown(self)
