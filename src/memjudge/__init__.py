"""memjudge: an LLM-judge evaluation harness for the write boundary of agent memory.

The public API is the names in `__all__`, each imported lazily on first use (so
`import memjudge.gate` in a memory pipeline pulls in nothing heavy: no numpy, no pandas):

    memjudge.score(...)        -> DataFrame of labels (spec §6)
    memjudge.score_run(...)    -> ScoreResult: labels, run folder, summary (what `memjudge score` runs)
    memjudge.judge_config(...) -> a JudgeConfig: a judges file's settings for a spec, then overrides
                                  (what `memjudge score` builds from --judges-file and its flags)
    memjudge.noise(...)        -> re-score flip rates
    memjudge.agreement(...)    -> cross-judge agreement
    memjudge.calibrate(...)    -> a judge's threshold on judge_score against gold labels
    memjudge.write_threshold(...) -> that threshold written into a judges file (what `calibrate --panel` does)
    memjudge.run_cascade(...)  -> a certified cascade of judges: labels, cascade.json (what `memjudge cascade` runs)
    memjudge.panel(...)        -> a judge panel's consensus labels and each judge's error rates
    memjudge.sample(...)       -> the items to label by hand (inclusion probabilities)
    memjudge.estimate(...)     -> support rates: judge only, gold only, PPI++
    memjudge.compare(...)      -> retention-policy comparison (Table 1)
    memjudge.robustness(...)   -> the comparison under each judge
    memjudge.make_policy(...)  -> a retention policy to fit (WriteAll, GlobalThreshold, Targeted, PerCategory)
    memjudge.simulate(...)     -> a synthetic corpus with known truth
    memjudge.report(...)       -> Markdown/HTML report of a run directory
    memjudge.batch_status(...) / memjudge.batch_cancel(...) -> a run's provider batch jobs
    memjudge.read_candidates(...), read_sources, read_facts, read_labels, read_coverage, read_gold
    memjudge.Table(path, mapping) -> any table read as one of those formats (a column mapping)
    memjudge.import_memories(...) -> a memory system's export (mem0, MemOS, Graphiti, LangMem, Letta) as candidates
    memjudge.Estimate, JudgeConfig, RunOptions, MemjudgeError, InputError, UsageError
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.2.0"

# name -> "module:attribute", imported on first access.
_LAZY = {
    # scoring
    "score": "memjudge.scoring:score",
    "score_run": "memjudge.scoring:score_run",
    "ScoreResult": "memjudge.scoring:ScoreResult",
    "RunOptions": "memjudge.scoring:RunOptions",
    "batch_status": "memjudge.scoring:batch_status",
    "batch_cancel": "memjudge.scoring:batch_cancel",
    # statistics
    "noise": "memjudge.stats.noise:noise",
    "agreement": "memjudge.stats.agreement:agreement",
    "calibrate": "memjudge.stats.thresholds:calibrate",
    "write_threshold": "memjudge.judges.panel:write_threshold",
    "run_cascade": "memjudge.cascade:run_cascade",
    "panel": "memjudge.stats.panel:panel",
    "sample": "memjudge.stats.active_sampling:sample",
    "estimate": "memjudge.stats.estimate:estimate",
    "coverage_agreement": "memjudge.stats.coverage:coverage_agreement",
    # policies and their comparison
    "compare": "memjudge.comparison:compare",
    "robustness": "memjudge.comparison.robustness:robustness",
    "WriteAll": "memjudge.policies:WriteAll",
    "GlobalThreshold": "memjudge.policies:GlobalThreshold",
    "Targeted": "memjudge.policies:Targeted",
    "PerCategory": "memjudge.policies:PerCategory",
    "make_policy": "memjudge.policies:make_policy",
    # corpus and report
    "simulate": "memjudge.simulation:simulate",
    "report": "memjudge.reporting:report",
    # file formats
    "read_candidates": "memjudge.formats:read_candidates",
    "read_sources": "memjudge.formats:read_sources",
    "read_facts": "memjudge.formats:read_facts",
    "read_labels": "memjudge.formats:read_labels",
    "read_coverage": "memjudge.formats:read_coverage",
    "read_gold": "memjudge.formats:read_gold",
    "Table": "memjudge.formats.mapping:Table",
    "import_memories": "memjudge.importers.memory_systems:import_memories",
    "Estimate": "memjudge.formats.estimate:Estimate",
    # judges and errors
    "JudgeConfig": "memjudge.judges.base:JudgeConfig",
    "judge_config": "memjudge.judges.panel:judge_config",
    "MemjudgeError": "memjudge.errors:MemjudgeError",
    "InputError": "memjudge.errors:InputError",
    "UsageError": "memjudge.errors:UsageError",
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'memjudge' has no attribute {name!r}")
    module, attr = target.split(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
