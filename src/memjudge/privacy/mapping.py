"""The placeholder map: per persona, each entity found anywhere in its texts gets one stand-in,
used in its source and in every candidate and fact about it.

Two kinds of stand-in: typed placeholders (`<PERSON_1>`, `<LOCATION_2>`) and consistent realistic
surrogates (another name, another city, a well-formed fake e-mail address). Every form of an
entity is replaced wherever it occurs in the persona's texts, not only where the recognisers
saw it: one detection protects every mention. Forms that differ only in layout (a phone number
with or without blanks) and a person's first or last name alone are the same entity.

The map is the only place the originals live: the run folder's `private/map.json` (mode 0600).
It records each persona's source digest, so a map is never applied to another run's inputs.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memjudge.errors import InputError
from memjudge.privacy.detect import Span
from memjudge.privacy.surrogates import surrogate

MAP_FORMAT = "memjudge-privacy-map"
MAP_VERSION = 1

# Entities whose layout does not make a new one: compared on their letters and digits.
_LAYOUT_FREE = {"PHONE_NUMBER", "CREDIT_CARD", "IBAN_CODE", "US_SSN", "US_ITIN", "UK_NHS", "US_BANK_NUMBER"}
_CASE_FREE = {"EMAIL_ADDRESS", "URL"}
_NAMES = {"PERSON", "ORGANIZATION"}
# When two recognisers call the same words differently, the first of these wins.
_PRIORITY = ("EMAIL_ADDRESS", "IBAN_CODE", "CREDIT_CARD", "PHONE_NUMBER", "STREET_ADDRESS", "DATE_OF_BIRTH", "PERSON",
             "LOCATION", "ORGANIZATION")


def entity_key(entity: str, surface: str) -> str:
    if entity in _LAYOUT_FREE:
        return "".join(ch for ch in surface.upper() if ch.isalnum())
    if entity in _CASE_FREE:
        return surface.casefold()
    return " ".join(surface.split())


def placeholder(entity: str, n: int) -> str:
    return f"<{entity}_{n}>"


PLACEHOLDER = re.compile(r"<([A-Z][A-Z_]*)_(\d+)>")


def source_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class Entity:
    entity: str
    original: str      # the first form seen (what a bare stand-in is mapped back to)
    stand_in: str
    forms: dict[str, str] = field(default_factory=dict)  # every original form -> its stand-in


@dataclass
class PersonaMap:
    persona: str
    source_sha256: str | None = None
    entities: list[Entity] = field(default_factory=list)
    _by_key: dict[tuple[str, str], int] = field(default_factory=dict)
    _by_form: dict[str, int] = field(default_factory=dict)
    _counts: dict[str, int] = field(default_factory=dict)

    def _index(self) -> None:
        self._by_key.clear()
        self._by_form.clear()
        self._counts.clear()
        for i, e in enumerate(self.entities):
            self._counts[e.entity] = self._counts.get(e.entity, 0) + 1
            for form in e.forms:
                self._by_form.setdefault(form, i)
                self._by_key.setdefault((e.entity, entity_key(e.entity, form)), i)

    def forms(self) -> dict[str, str]:
        """original form -> stand-in, every entity's."""
        return {f: s for e in self.entities for f, s in e.forms.items()}

    def register(self, surface: str, entity: str, style: str, taken: str) -> None:
        """One detected form. `taken`: the persona's texts, which a surrogate must not occur in."""
        if surface in self._by_form:
            return
        key = (entity, entity_key(entity, surface))
        i = self._by_key.get(key)
        if i is None and entity in _NAMES:
            i = self._name_part(surface)
        if i is not None:
            e = self.entities[i]
            e.forms[surface] = _part_stand_in(e, surface) if style == "surrogate" and e.entity in _NAMES else e.stand_in
            self._by_form[surface] = i
            self._by_key.setdefault(key, i)
            return
        n = self._counts.get(entity, 0) + 1
        self._counts[entity] = n
        used = {s for e in self.entities for s in e.forms.values()}
        stand_in = placeholder(entity, n) if style == "placeholder" else surrogate(entity, self.persona, n, surface, taken, used)
        e = Entity(entity, surface, stand_in, {surface: stand_in})
        self.entities.append(e)
        i = len(self.entities) - 1
        self._by_form[surface] = i
        self._by_key[key] = i
        if entity == "PERSON":  # the first and last names alone are the same person
            words = surface.split()
            if len(words) > 1:
                for w in (words[0], words[-1]):
                    if len(w) > 2 and w[0].isupper() and w not in self._by_form:
                        e.forms[w] = _part_stand_in(e, w) if style == "surrogate" else stand_in
                        self._by_form[w] = i

    def _name_part(self, surface: str) -> int | None:
        """The person (or organisation) whose name has `surface` as one of its words: the NER
        may call the same name a person in one sentence and an organisation in the next."""
        words = surface.split()
        if len(words) != 1:
            return None
        for i, e in enumerate(self.entities):
            if e.entity in _NAMES and surface in e.original.split():
                return i
        return None


def _part_stand_in(e: Entity, part: str) -> str:
    """A surrogate person's first or last name for the original's."""
    words, stand = e.original.split(), e.stand_in.split()
    if len(words) > 1 and len(stand) > 1:
        if part == words[0]:
            return stand[0]
        if part == words[-1]:
            return stand[-1]
    return e.stand_in


@dataclass
class Pseudonymised:
    """One text with its stand-ins, and where each replaced piece came from:
    `segments` are (start, end) in the new text and (start, end) in the original, in order."""

    text: str
    segments: list[tuple[int, int, int, int]]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """(start, end) of the new text as offsets of the original."""
        return self._to_original(start, False), self._to_original(end, True)

    def _to_original(self, pos: int, is_end: bool) -> int:
        starts = [s[0] for s in self.segments]
        i = bisect.bisect_right(starts, pos - 1 if is_end else pos) - 1
        if i < 0:
            return pos
        ps, pe, os_, oe = self.segments[i]
        if (ps < pos <= pe) if is_end else (ps <= pos < pe):
            return oe if is_end else os_
        return pos + (oe - pe)


class PrivacyMap:
    """Every persona's entities and stand-ins; saved as JSON (mode 0600) in the run folder."""

    def __init__(self, style: str, recognisers: dict[str, Any] | None = None):
        self.style = style
        self.recognisers = recognisers or {}
        self.personas: dict[str, PersonaMap] = {}

    def persona(self, pid: str) -> PersonaMap:
        pm = self.personas.get(pid)
        if pm is None:
            pm = self.personas[pid] = PersonaMap(pid)
        return pm

    def pseudonymise(self, pid: str, texts: Sequence[str], spans: Sequence[list[Span]], source: str | None) -> list[Pseudonymised]:
        """The persona's texts (its source first, when given) with every known form replaced."""
        pm = self.persona(pid)
        if source is not None:
            pm.source_sha256 = source_digest(source)
        taken = "\n".join(texts)
        for text, found in zip(texts, spans):
            for s in sorted(found, key=lambda s: (_PRIORITY.index(s.entity) if s.entity in _PRIORITY else len(_PRIORITY), s.start)):
                pm.register(text[s.start:s.end], s.entity, self.style, taken)
        return replace_forms(pm.forms(), texts)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": MAP_FORMAT, "version": MAP_VERSION, "style": self.style, "recognisers": self.recognisers,
            "personas": {pid: {"source_sha256": pm.source_sha256,
                               "entities": [{"type": e.entity, "original": e.original, "stand_in": e.stand_in, "forms": e.forms}
                                            for e in pm.entities]}
                         for pid, pm in self.personas.items()},
        }

    def save(self, path: Path) -> None:
        from memjudge.privacy.store import write_private

        write_private(path, json.dumps(self.to_json(), ensure_ascii=False, indent=1) + "\n")

    @classmethod
    def load(cls, path: Path, style: str, sources: dict[str, str]) -> PrivacyMap:
        """The run folder's map, checked to be this run's: its format, its kind of stand-in and
        each persona's source (by digest). InputError (one line, naming the file) otherwise;
        the message never quotes the map's contents."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise InputError(path, "not a memjudge privacy map (unreadable JSON); it is not this run's: move it away") from None
        if not isinstance(data, dict) or data.get("format") != MAP_FORMAT or not isinstance(data.get("personas"), dict):
            raise InputError(path, "not a memjudge privacy map; it is not this run's: move it away or use another --out")
        if data.get("version") != MAP_VERSION:
            raise InputError(path, f"privacy map version {data.get('version')!r}, this memjudge reads {MAP_VERSION}")
        if data.get("style") != style:
            raise InputError(path, f"this map's stand-ins are {data.get('style')!r}, the run asks for {style!r}: "
                                   "use another --out (a map is never mixed)")
        m = cls(style, data.get("recognisers") or {})
        for pid, p in data["personas"].items():
            want = sources.get(pid)
            if want is not None and p.get("source_sha256") not in (None, source_digest(want)):
                raise InputError(path, f"the placeholder map is not this run's: persona {pid!r}'s source differs from the one "
                                       "it was made for; use another --out (or move the folder's private/ away)")
            pm = m.persona(pid)
            pm.source_sha256 = p.get("source_sha256")
            try:
                pm.entities = [Entity(e["type"], e["original"], e["stand_in"], dict(e["forms"])) for e in p.get("entities", [])]
            except (KeyError, TypeError):
                raise InputError(path, f"persona {pid!r}: a damaged entry; move the map away and run again") from None
            pm._index()
        return m


def replace_forms(forms: dict[str, str], texts: Iterable[str]) -> list[Pseudonymised]:
    """Each text with every form (longest first, whole words only) replaced by its stand-in."""
    if not forms:
        return [Pseudonymised(t, []) for t in texts]
    pattern = re.compile(r"(?<![\w@.+-])(?:" + "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True)) + r")(?![\w@-])")
    out = []
    for text in texts:
        pieces: list[str] = []
        segments: list[tuple[int, int, int, int]] = []
        last, pos = 0, 0
        for m in pattern.finditer(text):
            before = text[last:m.start()]
            pieces.append(before)
            pos += len(before)
            stand_in = forms[m.group(0)]
            pieces.append(stand_in)
            segments.append((pos, pos + len(stand_in), m.start(), m.end()))
            pos += len(stand_in)
            last = m.end()
        pieces.append(text[last:])
        out.append(Pseudonymised("".join(pieces), segments))
    return out


__all__ = ["MAP_FORMAT", "PLACEHOLDER", "Entity", "PersonaMap", "PrivacyMap", "Pseudonymised", "entity_key", "placeholder",
           "replace_forms", "source_digest"]
