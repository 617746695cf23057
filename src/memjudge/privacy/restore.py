"""Answers back in the user's terms: a judge's evidence and rationale with each stand-in mapped
back to what it stood for, before the evidence check and every output.

A quote the judge took from the pseudonymised source is found there (blanks as they come) and
replaced by the very words of the original source at that place, so the evidence check sees
what the user's source says. Anything else (a rationale, a quote not found) has each stand-in
replaced by the entity's first form. A placeholder the judge made up (not in the map) is left
as it is and counted (`invented`).
"""

from __future__ import annotations

import re
from typing import Any

from memjudge.privacy.mapping import PLACEHOLDER, PrivacyMap, Pseudonymised


class Restorer:
    """Maps a persona's judge answers back. `sources`: persona -> (original source, its
    pseudonymised form)."""

    def __init__(self, pmap: PrivacyMap, sources: dict[str, tuple[str, Pseudonymised]]):
        self.map = pmap
        self.sources = sources
        self._back: dict[str, tuple[dict[str, str], re.Pattern | None]] = {}
        self.invented: set[tuple[str, str]] = set()   # (persona, placeholder) the map does not know
        self.restored: set[tuple[str, str]] = set()   # (persona, quote) found in the pseudonymised source

    def _reverse(self, pid: str) -> tuple[dict[str, str], re.Pattern | None]:
        got = self._back.get(pid)
        if got is None:
            back: dict[str, str] = {}
            pm = self.map.personas.get(pid)
            for e in pm.entities if pm else []:
                back.setdefault(e.stand_in, e.original)
                for form, stand in e.forms.items():
                    back.setdefault(stand, form)
            pattern = re.compile("|".join(re.escape(s) for s in sorted(back, key=len, reverse=True))) if back else None
            got = self._back[pid] = (back, pattern)
        return got

    def text(self, pid: str, text: Any) -> Any:
        """`text` with every stand-in of the persona mapped back (non-text as it is)."""
        if not isinstance(text, str) or not text:
            return text
        back, pattern = self._reverse(pid)
        if pattern is not None:
            text = pattern.sub(lambda m: back[m.group(0)], text)
        if self.map.style == "placeholder" or "<" in text:
            for m in PLACEHOLDER.finditer(text):
                self.invented.add((pid, m.group(0)))
        return text

    def evidence(self, pid: str, quote: Any) -> Any:
        """A quote from the pseudonymised source as the original source words it; else `text`."""
        if not isinstance(quote, str) or not quote.strip():
            return quote
        held = self.sources.get(pid)
        if held is not None:
            original, pseudo = held
            words = quote.split()
            m = re.search(r"\s+".join(re.escape(w) for w in words), pseudo.text)
            if m is not None:
                start, end = pseudo.original_span(m.start(), m.end())
                self.restored.add((pid, quote))
                return original[start:end]
        return self.text(pid, quote)

    def answer(self, pid: str, answer: dict) -> dict:
        """A support answer with `evidence` and `rationale` mapped back; a coverage answer's
        judge-listed fact texts and rationales too."""
        out = dict(answer)
        if "evidence" in out:
            out["evidence"] = self.evidence(pid, out["evidence"])
        for k in ("rationale", "fact"):
            if k in out:
                out[k] = self.text(pid, out[k])
        if isinstance(out.get("facts"), list):
            out["facts"] = [self.answer(pid, f) if isinstance(f, dict) else f for f in out["facts"]]
        return out

    def counts(self) -> dict[str, int]:
        return {"invented_placeholders": len(self.invented), "quotes_restored_from_source": len(self.restored)}


__all__ = ["Restorer"]
