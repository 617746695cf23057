"""One run's inputs pseudonymised (`protect`), and what would be replaced (`privacy_check`).

`protect` reads the run folder's map and detection cache (if any), detects what they lack,
extends the map, writes both back (mode 0600) and returns the candidates, sources and facts with
stand-ins, plus the `Restorer` that maps the judge's answers back. The caller (the scorer) builds
its prompts, and so its cache keys, from these frames only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memjudge.privacy.detect import DetectionCache, Detector, detect_all
from memjudge.privacy.entities import STYLES
from memjudge.privacy.mapping import PrivacyMap, Pseudonymised
from memjudge.privacy.restore import Restorer
from memjudge.privacy.store import DETECTIONS_FILE, MAP_FILE, PRIVATE_DIR, private_dir

# Stand-ins used when a judge's settings name none: measured in docs/private.md (bench/private.py).
DEFAULT_STYLE = "placeholder"


@dataclass(frozen=True)
class PrivacySettings:
    """What `--private` replaces and how: a judge's `private_entities`, `private_style`,
    `private_patterns_only` (JudgeConfig)."""

    entities: tuple[str, ...] | None = None
    style: str = DEFAULT_STYLE
    patterns_only: bool = False

    def __post_init__(self):
        if self.style not in STYLES:
            raise ValueError(f"private_style must be one of {', '.join(STYLES)}, got {self.style!r}")

    @classmethod
    def of(cls, config: Any) -> PrivacySettings:
        ents = getattr(config, "private_entities", None)
        return cls(tuple(ents) if ents is not None else None, getattr(config, "private_style", None) or DEFAULT_STYLE,
                   bool(getattr(config, "private_patterns_only", False)))


@dataclass
class Protection:
    candidates: pd.DataFrame
    sources: pd.DataFrame
    facts: pd.DataFrame | None
    restorer: Restorer
    recognisers: dict[str, Any]
    stats: dict[str, Any] = field(default_factory=dict)
    map_file: Path | None = None

    def describe(self) -> dict[str, Any]:
        """config.json's `privacy` (no original text in it)."""
        return {"applied": True, "style": self.restorer.map.style, "recognisers": self.recognisers,
                "map_file": str(self.map_file) if self.map_file else None, **self.stats}


def _persona_texts(cands: pd.DataFrame, srcs: pd.DataFrame, facts: pd.DataFrame | None):
    """persona -> (source, [candidate row indexes], [fact row indexes])."""
    by: dict[str, tuple[str, list[int], list[int]]] = {pid: (src, [], []) for pid, src in zip(srcs["persona_id"], srcs["source"])}
    for i, pid in enumerate(cands["persona_id"]):
        by.setdefault(pid, ("", [], []))[1].append(i)
    if facts is not None:
        for i, pid in enumerate(facts["persona_id"]):
            if pid in by:
                by[pid][2].append(i)
    return by


def protect(cands: pd.DataFrame, srcs: pd.DataFrame, facts: pd.DataFrame | None, settings: PrivacySettings,
            run_dir: Path | None, detector: Detector | None = None) -> Protection:
    """The inputs with stand-ins in place of what the recognisers find (see module doc)."""
    t0 = time.perf_counter()
    detector = detector or Detector(settings.entities, patterns_only=settings.patterns_only)
    identity = detector.identity()
    folder = private_dir(run_dir) if run_dir is not None else None
    source_of = dict(zip(srcs["persona_id"], srcs["source"]))
    if folder is not None and (folder / MAP_FILE).is_file():
        pmap = PrivacyMap.load(folder / MAP_FILE, settings.style, source_of)
        pmap.recognisers = identity
    else:
        pmap = PrivacyMap(settings.style, identity)
    cache = DetectionCache(folder / DETECTIONS_FILE if folder is not None else None, identity)

    texts_c, texts_f = cands["text"].tolist(), facts["text"].tolist() if facts is not None else []
    by = _persona_texts(cands, srcs, facts)
    all_texts = [src for src, _c, _f in by.values()] + texts_c + texts_f
    detected_before = len(cache.spans)
    spans = dict(zip(all_texts, detect_all(detector, all_texts, cache)))
    t_detect = time.perf_counter() - t0

    new_c, new_f = list(texts_c), list(texts_f)
    new_src: dict[str, str] = {}
    held: dict[str, tuple[str, Pseudonymised]] = {}
    counts: dict[str, int] = {}
    for pid, (src, ci, fi) in by.items():
        texts = [src] + [texts_c[i] for i in ci] + [texts_f[i] for i in fi]
        done = pmap.pseudonymise(pid, texts, [spans[t] for t in texts], src if pid in source_of else None)
        if pid in source_of:
            new_src[pid] = done[0].text
            held[pid] = (src, done[0])
        for i, p in zip(ci, done[1:1 + len(ci)]):
            new_c[i] = p.text
        for i, p in zip(fi, done[1 + len(ci):]):
            new_f[i] = p.text
        for e in pmap.persona(pid).entities:
            counts[e.entity] = counts.get(e.entity, 0) + 1
    out_c = cands.copy()
    out_c["text"] = new_c
    out_s = srcs.copy()
    out_s["source"] = [new_src.get(pid, s) for pid, s in zip(srcs["persona_id"], srcs["source"])]
    out_f = None
    if facts is not None:
        out_f = facts.copy()
        out_f["text"] = new_f
    map_file = None
    if folder is not None:
        map_file = folder / MAP_FILE
        pmap.save(map_file)
        cache.save()
    stats = {"entities_replaced": dict(sorted(counts.items())), "texts": len(set(all_texts)),
             "texts_detected": len(cache.spans) - detected_before if folder is not None else len(set(all_texts)),
             "detection_seconds": round(t_detect, 3)}
    return Protection(out_c, out_s, out_f, Restorer(pmap, held), identity, stats, map_file)


def privacy_check(cands: pd.DataFrame, srcs: pd.DataFrame, settings: PrivacySettings, examples: int = 3,
                  detector: Detector | None = None) -> dict[str, Any]:
    """What `--private` would replace, per entity type and persona, with examples (original ->
    stand-in). Nothing is written, nothing is sent."""
    p = protect(cands, srcs, None, settings, None, detector=detector)
    pmap = p.restorer.map
    by_type: dict[str, dict[str, Any]] = {}
    personas: dict[str, dict[str, int]] = {}
    for pid, pm in pmap.personas.items():
        for e in pm.entities:
            t = by_type.setdefault(e.entity, {"entities": 0, "personas": 0, "examples": []})
            t["entities"] += 1
            personas.setdefault(pid, {})
            personas[pid][e.entity] = personas[pid].get(e.entity, 0) + 1
            if len(t["examples"]) < examples:
                t["examples"].append({"persona_id": pid, "original": e.original, "stand_in": e.stand_in})
    for entity, v in by_type.items():
        v["personas"] = sum(1 for c in personas.values() if entity in c)
    return {"style": settings.style, "recognisers": p.recognisers, "personas": len(pmap.personas),
            "texts": p.stats["texts"], "detection_seconds": p.stats["detection_seconds"],
            "by_type": dict(sorted(by_type.items())), "by_persona": personas}


__all__ = ["DEFAULT_STYLE", "PRIVATE_DIR", "PrivacySettings", "Protection", "privacy_check", "protect"]
