"""The retention gate (spec §9): apply a fitted retention policy at write time.

Standard library only, so a memory pipeline can import it without numpy or pandas::

    from memjudge.gate import load_policy
    policy = load_policy("policy.json")
    if policy.admit(category, confidence):
        memory.write(assertion)

The file is written by ``memjudge compare --export-policy`` (`memjudge.policies.export_policy`)::

    {"format": "memjudge.retention-policy", "version": 1,
     "kind": "write_all" | "global" | "targeted" | "per_category",
     "thresholds": {CATEGORY: number | null},   # per-category thresholds (null = keep all)
     "default_threshold": number | null,         # categories not listed (global: every category)
     "gate": [CATEGORY, ...] | null,             # the gated categories (targeted)
     "floor": 0.8,                               # retention floor it was fitted under
     "fitted_on": {...}}                         # provenance: inputs, judge, fit-set figures

A candidate is admitted when its category's threshold is null or ``confidence >= threshold``:
exactly the comparison used when fitting, so the gate reproduces the fitted decisions.

``confidence`` may be any real number (``numbers.Real``: int, float, fractions, and numpy's
integer and floating scalars such as ``np.float32`` or ``np.int64``, which numpy registers as
real numbers — no numpy import here). A non-number (a string, None, a bool) raises
``TypeError`` and NaN raises ``ValueError``, for every category, gated or not: a bad value is a
bug in the caller whether or not this category happens to have a threshold.
"""

from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field

from memjudge.errors import MemjudgeError  # standard library only, like this module

__all__ = ["FORMAT", "KINDS", "SUPPORTED_VERSIONS", "Policy", "PolicyFileError", "load_policy"]

FORMAT = "memjudge.retention-policy"
SUPPORTED_VERSIONS = (1,)
KINDS = ("write_all", "global", "targeted", "per_category")


class PolicyFileError(MemjudgeError, ValueError):
    """The policy file is missing, not JSON, or not a retention policy this version reads.
    A `MemjudgeError` (the CLI prints it as one line) and, as before, a `ValueError`."""


def _threshold(value, where: str):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise PolicyFileError(f"{where}: threshold must be a number or null, found {value!r}")
    return float(value)


def _confidence(value) -> float:
    # bool is an int to Python but never a confidence
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"confidence must be a real number, got {type(value).__name__}")
    value = float(value)
    if math.isnan(value):
        raise ValueError("confidence is NaN")
    return value


@dataclass(frozen=True)
class Policy:
    kind: str
    thresholds: dict = field(default_factory=dict)
    default_threshold: float | None = None
    gate: tuple | None = None
    floor: float | None = None
    fitted_on: dict = field(default_factory=dict)

    def threshold_for(self, category: str) -> float | None:
        """The threshold applied to `category` (None = admit every confidence)."""
        return self.thresholds.get(str(category), self.default_threshold)

    def admit(self, category: str, confidence: float) -> bool:
        """True if a candidate of this category and confidence should be written to memory."""
        value = _confidence(confidence)
        t = self.threshold_for(category)
        return t is None or value >= t

    @classmethod
    def from_dict(cls, d: dict, where: str = "policy") -> Policy:
        if not isinstance(d, dict):
            raise PolicyFileError(f"{where}: expected a JSON object")
        if d.get("format") != FORMAT:
            raise PolicyFileError(f"{where}: not a memjudge retention policy (format {d.get('format')!r})")
        if d.get("version") not in SUPPORTED_VERSIONS:
            raise PolicyFileError(f"{where}: unsupported policy version {d.get('version')!r}")
        kind = d.get("kind")
        if kind not in KINDS:
            raise PolicyFileError(f"{where}: unknown policy kind {kind!r}")
        raw = d.get("thresholds") or {}
        if not isinstance(raw, dict):
            raise PolicyFileError(f"{where}: 'thresholds' must be an object")
        thresholds = {str(c): _threshold(t, where) for c, t in raw.items()}
        gate = d.get("gate")
        return cls(
            kind=kind,
            thresholds=thresholds,
            default_threshold=_threshold(d.get("default_threshold"), where),
            gate=tuple(gate) if gate is not None else None,
            floor=d.get("floor"),
            fitted_on=dict(d.get("fitted_on") or {}),
        )


def load_policy(path) -> Policy:
    """Read a policy JSON file written by `memjudge compare --export-policy`."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except OSError as e:
        raise PolicyFileError(f"{path}: cannot read ({e.strerror})") from None
    except json.JSONDecodeError as e:
        raise PolicyFileError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except RecursionError:
        raise PolicyFileError(f"{path}: JSON nested too deeply") from None
    return Policy.from_dict(d, str(path))
