"""One shape for a figure with its interval: `Estimate(value, lo, hi)`.

Every writer stores an interval as ``{"value": v, "lo": lo, "hi": hi}`` (missing parts are
``null``), so every reader takes it back with `Estimate.from_dict` and nothing needs to guess
at other spellings. `value` is the point estimate; `lo`/`hi` bound its interval (its level is
stated by the figure that owns it, 95% unless said otherwise). Non-finite numbers are stored
as ``null``: JSON has no NaN.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memjudge._util.text import num


@dataclass(frozen=True)
class Estimate:
    """A point estimate and its interval; any part may be None (not computable)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None

    def __post_init__(self) -> None:
        for name in ("value", "lo", "hi"):
            object.__setattr__(self, name, num(getattr(self, name)))

    @property
    def has_interval(self) -> bool:
        return self.lo is not None and self.hi is not None

    def to_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "lo": self.lo, "hi": self.hi}

    @classmethod
    def from_dict(cls, d: Any) -> Estimate:
        """The stored shape back; None or a non-dict gives an empty estimate."""
        if not isinstance(d, dict):
            return cls(None)
        return cls(d.get("value"), d.get("lo"), d.get("hi"))

    def scaled(self, factor: float) -> Estimate:
        """The same estimate in other units (e.g. ×100 for percent)."""
        return Estimate(*(None if x is None else x * factor for x in (self.value, self.lo, self.hi)))
