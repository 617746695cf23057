"""memjudge: an LLM-judge evaluation harness for the write boundary of agent memory.

The public API is small and imported lazily (so `import memjudge.gate` in a memory
pipeline pulls in nothing heavy):

    memjudge.score(...)       -> DataFrame of labels (spec §6)
    memjudge.noise(...)       -> re-score flip rates
    memjudge.agreement(...)   -> cross-judge agreement
    memjudge.compare(...)     -> retention-policy comparison (Table 1)
    memjudge.robustness(...)  -> the comparison under each judge
    memjudge.simulate(...)    -> a synthetic corpus with known truth
    memjudge.panel(...)       -> a judge panel's consensus labels and each judge's error rates
    memjudge.report(...)      -> Markdown/HTML report of a run directory
    memjudge.sample(...)      -> the items to label by hand (inclusion probabilities)
    memjudge.estimate(...)    -> support rates: judge only, gold only, PPI++
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "score": "memjudge.scoring.engine:score",
    "noise": "memjudge.stats.noise:noise",
    "agreement": "memjudge.stats.agreement:agreement",
    "compare": "memjudge.comparison:compare",
    "robustness": "memjudge.comparison.robustness:robustness",
    "simulate": "memjudge.simulation:simulate",
    "panel": "memjudge.stats.panel:panel",
    "report": "memjudge.reporting:report",
    "estimate": "memjudge.stats.estimate:estimate",
    "sample": "memjudge.stats.sampling:sample",
    "read_candidates": "memjudge.formats:read_candidates",
    "read_sources": "memjudge.formats:read_sources",
    "read_facts": "memjudge.formats:read_facts",
    "read_labels": "memjudge.formats:read_labels",
    "read_coverage": "memjudge.formats:read_coverage",
    "read_gold": "memjudge.formats:read_gold",
    "JudgeConfig": "memjudge.judges.base:JudgeConfig",
    "MemjudgeError": "memjudge.errors:MemjudgeError",
    "InputError": "memjudge.errors:InputError",
    "UsageError": "memjudge.errors:UsageError",
}


def __getattr__(name: str):
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'memjudge' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
