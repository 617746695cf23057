"""Synthetic personas with known truth (`memjudge simulate`).

A persona is a bundle of facts across categories (work, location, family, hobbies, health,
preferences, education, and values/beliefs), written into a source document in several
styles (journal notes, social posts, messages to a friend, a profile blurb). A simulated
per-category extractor then emits candidate assertions with confidences: supported ones
restate or paraphrase a fact; unsupported ones are over-inferences (a value read into a weak
cue), fabrications, contradictions, or a friend's trait attributed to the user. Because the
corpus is built, its gold labels and its fact → assertion map are known exactly.

Layout: `generator` (presets, the corpus-wide allocation of counts, confidences and support,
`simulate`, the gold files), `persona` (one persona's facts, source and assertion text),
`lexicon` (the word lists).
"""

from __future__ import annotations

from memjudge.simulation.generator import (
    GOLD,
    KINDS,
    SUPPORTED,
    UNSUPPORTED,
    VALUES,
    Corpus,
    gold_coverage,
    gold_labels,
    load_preset,
    preset_names,
    simulate,
    stated_by,
)

__all__ = [
    "GOLD", "KINDS", "SUPPORTED", "UNSUPPORTED", "VALUES", "Corpus", "gold_coverage", "gold_labels", "load_preset",
    "preset_names", "simulate", "stated_by",
]
