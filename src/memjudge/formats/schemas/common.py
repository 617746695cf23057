"""The shapes every JSON file shares: the strict base model and the interval types.

A model here describes what a writer puts in its file, key for key: `Strict` forbids a key the
model does not name, and a field without a default must be present (it may still be null where
its type says so). A field with a default is a key that only some runs write (`--gold`, a
coverage file, …); its description says when.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Num = float | None  # a finite number, or null where it cannot be computed (JSON has no NaN)


class Strict(BaseModel):
    """A JSON object with exactly the keys of the model (undocumented keys are refused)."""

    model_config = ConfigDict(extra="forbid")


class Open(BaseModel):
    """A JSON object with the keys of the model and any others (carried-over input columns)."""

    model_config = ConfigDict(extra="allow")


class Estimate(Strict):
    """A figure with its interval (`memjudge.formats.Estimate`); 95% unless the file says otherwise."""

    value: Num
    lo: Num
    hi: Num


class EstimateN(Estimate):
    """An estimate with its denominator `n` (valid verdicts, or judged reference facts)."""

    n: int | None


class MeanSd(Estimate):
    """A fold mean (`value`) with the SD over folds (`sd`); `lo`/`hi` are null (no interval)."""

    sd: Num


class Change(Estimate):
    """Per-fold differences: their mean (`value`), 2.5/97.5 percentiles, folds with the sign of the mean."""

    same_sign: int | None


class Paired(Change):
    """`Change` plus the Nadeau–Bengio corrected resampled-t interval."""

    nb_lo: Num
    nb_hi: Num


Json = Any  # a value whose shape is the input's or a preset's (documented, not fixed)


def described(text: str, **kw: Any) -> Any:
    """A field with a description (shown in the manual's schema pages)."""
    return Field(description=text, **kw)
