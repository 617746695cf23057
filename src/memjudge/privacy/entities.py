"""The entity types `--private` knows, by name (standard library only: a judges file's
`private_entities` is checked against them without loading Presidio).

Presidio's own names are kept (`PERSON`, `EMAIL_ADDRESS`, ...); `STREET_ADDRESS` and
`DATE_OF_BIRTH` are memjudge's pattern recognisers (Presidio has none for them).
"""

from __future__ import annotations

# Replaced unless a judge's `private_entities` says otherwise.
DEFAULT_ENTITIES: tuple[str, ...] = (
    "PERSON", "LOCATION", "ORGANIZATION",                       # spaCy's named entities
    "EMAIL_ADDRESS", "PHONE_NUMBER", "IBAN_CODE", "CREDIT_CARD", "IP_ADDRESS", "URL",
    "STREET_ADDRESS", "DATE_OF_BIRTH",                           # memjudge's patterns
    "US_SSN", "US_ITIN", "US_PASSPORT", "US_BANK_NUMBER", "UK_NHS", "CRYPTO", "MEDICAL_LICENSE", "MAC_ADDRESS",
)
# Known but left in the clear by default: every date and nationalities/religions/political
# groups change a judge's task more than they identify someone (add them to private_entities).
OPTIONAL_ENTITIES: tuple[str, ...] = ("DATE_TIME", "NRP", "US_DRIVER_LICENSE", "UUID")
KNOWN_ENTITIES: frozenset[str] = frozenset(DEFAULT_ENTITIES + OPTIONAL_ENTITIES)
# Found by the NER model (the rest are patterns: they run without it).
NER_ENTITIES: frozenset[str] = frozenset({"PERSON", "LOCATION", "ORGANIZATION", "NRP", "DATE_TIME"})

STYLES = ("placeholder", "surrogate")


def check_entities(names) -> list[str]:
    """The names as a list, or ValueError naming the first unknown one."""
    out = []
    for name in names:
        if name not in KNOWN_ENTITIES:
            raise ValueError(f"unknown entity type {name!r} (known: {', '.join(sorted(KNOWN_ENTITIES))})")
        if name not in out:
            out.append(name)
    return out


__all__ = ["DEFAULT_ENTITIES", "KNOWN_ENTITIES", "NER_ENTITIES", "OPTIONAL_ENTITIES", "STYLES", "check_entities"]
