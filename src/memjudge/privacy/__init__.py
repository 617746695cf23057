"""Private by design (spec §16): what users told their agent never reaches a judge on a network
in the clear.

Before a judge that sends text over a network (`Judge.sends_text`) is asked, the PII in the
sources, candidates and facts is found (`detect`: Presidio's recognisers and spaCy's English
NER, imported here only, and only when used) and replaced per persona by consistent stand-ins
(`mapping`); the judge's evidence and rationales are mapped back (`restore`) before the
evidence check and every output. The map lives in the run folder (`store`, mode 0600) and is
seen by no other package.
"""

from __future__ import annotations

from memjudge.privacy.entities import DEFAULT_ENTITIES, KNOWN_ENTITIES, STYLES, check_entities

__all__ = ["DEFAULT_ENTITIES", "KNOWN_ENTITIES", "STYLES", "PrivacySettings", "PrivacyUnavailable", "Protection", "check_entities",
           "privacy_check", "protect"]


def __getattr__(name: str):
    # pandas and the detector only when a private run needs them: judges/base.py reads the
    # entity names from here.
    if name in ("PrivacySettings", "Protection", "privacy_check", "protect"):
        from memjudge.privacy import guard as _protect

        return getattr(_protect, name)
    if name == "PrivacyUnavailable":
        from memjudge.privacy.detect import PrivacyUnavailable

        return PrivacyUnavailable
    raise AttributeError(name)
