"""Realistic stand-ins: another name, another city, a well-formed fake e-mail address or phone
number, chosen per persona and entity number from fixed lists (so the same inputs give the same
prompts, and the answer cache hits on a rerun). A surrogate never occurs in the persona's own
texts and is never given to two entities of one persona, so mapping back is unambiguous.
Numbers come from ranges reserved for fiction and documentation (555-01xx, 192.0.2.x, example.org).
"""

from __future__ import annotations

import hashlib

FIRST = ("Anna", "Ben", "Clara", "David", "Elena", "Felix", "Grace", "Hugo", "Iris", "Jonas", "Karin", "Leo", "Mira",
         "Nils", "Olga", "Pablo", "Rosa", "Simon", "Tessa", "Umar", "Vera", "Walter", "Yara", "Zoe", "Amelie", "Bruno",
         "Carmen", "Dmitri", "Esther", "Fabian", "Greta", "Henrik", "Ines", "Jakob", "Lena", "Marco", "Nora", "Oskar")
LAST = ("Abbott", "Brennan", "Castell", "Delacroix", "Eriksen", "Fontaine", "Gallagher", "Hartmann", "Ibarra", "Jansen",
        "Kowal", "Lindqvist", "Moreau", "Navarro", "Okafor", "Petrov", "Quinlan", "Rasmussen", "Sorensen", "Takahashi",
        "Underwood", "Valdez", "Whitfield", "Yilmaz", "Zeller", "Ashby", "Bergstrom", "Calloway", "Dunmore", "Esposito")
CITIES = ("Lisbon", "Tallinn", "Ghent", "Bergen", "Porto", "Graz", "Lyon", "Utrecht", "Krakow", "Seville", "Turin",
          "Aarhus", "Leipzig", "Bilbao", "Malmo", "Bratislava", "Ljubljana", "Nantes", "Bologna", "Cork", "Tampere",
          "Brno", "Gdansk", "Salzburg", "Valencia", "Antwerp", "Dresden", "Uppsala", "Trieste", "Galway")
ORGS = ("Northwind Traders", "Blue Heron Labs", "Cobalt Works", "Larkspur Health", "Meridian Foods", "Quillfeather Press",
        "Redstone Logistics", "Silverline Media", "Tidewater Energy", "Westbrook Partners", "Amberfield School",
        "Granite Peak Bank", "Harbourview Clinic", "Juniper Systems", "Kestrel Insurance")
STREETS = ("Linden", "Maple", "Harbour", "Orchard", "Chestnut", "Willow", "Beacon", "Mill", "Garden", "Station")


def _pick(options: tuple[str, ...], seed: str, taken: str, used: set[str]) -> str:
    start = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    for k in range(len(options)):
        cand = options[(start + k) % len(options)]
        if cand not in taken and cand not in used:
            return cand
    return ""


def surrogate(entity: str, persona: str, n: int, original: str, taken: str, used: set[str]) -> str:
    """The n-th `entity` of `persona`'s stand-in: not in `taken` (its texts), not in `used`."""
    seed = f"{persona}\0{entity}\0{n}"
    for attempt in range(50):
        s = _candidate(entity, f"{seed}\0{attempt}", n + attempt, original, taken, used)
        if s and s not in taken and s not in used:
            return s
    return f"<{entity}_{n}>"  # every realistic choice was taken: a typed placeholder, still unambiguous


def _candidate(entity: str, seed: str, n: int, original: str, taken: str, used: set[str]) -> str:
    h = int(hashlib.sha256(seed.encode()).hexdigest()[:8], 16)
    if entity == "PERSON":
        first = _pick(FIRST, seed + "f", taken, used)
        last = _pick(LAST, seed + "l", taken, used)
        return last if len(original.split()) == 1 else f"{first} {last}"
    if entity == "LOCATION":
        return _pick(CITIES, seed, taken, used)
    if entity == "ORGANIZATION":
        return _pick(ORGS, seed, taken, used)
    if entity == "EMAIL_ADDRESS":
        return f"{FIRST[h % len(FIRST)].lower()}.{LAST[(h >> 8) % len(LAST)].lower()}{n}@example.org"
    if entity == "PHONE_NUMBER":
        return f"+1 202 555 01{(h + n) % 100:02d}"
    if entity == "STREET_ADDRESS":
        return f"{h % 90 + 10} {STREETS[(h >> 8) % len(STREETS)]} Street"
    if entity == "IP_ADDRESS":
        return f"192.0.2.{(h + n) % 254 + 1}"
    if entity == "URL":
        return f"https://www.example.org/p{h % 9000 + 1000}"
    if entity == "IBAN_CODE":
        return f"XX00 0000 0000 {h % 10000:04d} {(h >> 16) % 10000:04d}"
    if entity == "CREDIT_CARD":
        return f"0000 0000 0000 {h % 10000:04d}"
    if entity == "DATE_OF_BIRTH":
        return f"{h % 28 + 1} {('March', 'June', 'September', 'November')[h % 4]} {1950 + h % 50}"
    return f"<{entity}_{n}>"


__all__ = ["surrogate"]
