"""A second simulated extractor over the same personas (`memjudge simulate --extractor-variant`).

The variant sees the same sources and facts as the corpus and proposes a subset of its
candidates, chosen so that each named group's support rate is exactly the declared one: to
raise a rate it drops unsupported candidates (a stricter filter), to lower it it drops
supported ones (an extractor that misses what it should state), each chosen uniformly at random
within the group, so personas keep their own difficulty. Its truth, gold labels and coverage map
follow from the corpus's by construction, so `memjudge diff` can be checked against a known
difference. Its assertion ids are new (``p001-v001``): another extractor's output, not the same
items.

Spec: ``GROUP=RATE,...`` where GROUP is a category, or ``other`` for every category but values
not named itself; groups not named are kept whole.
"""

from __future__ import annotations

import numpy as np

from memjudge.errors import UsageError
from memjudge.simulation.generator import Corpus, gold_coverage, gold_labels
from memjudge.simulation.persona import VALUES

__all__ = ["extractor_variant", "parse_variant"]

OTHER = "other"


def parse_variant(spec: str, categories) -> dict[str, float]:
    """``"values=0.70,other=0.95"`` → {"values": 0.7, "other": 0.95}; unknown groups and rates
    outside (0, 1] are a `UsageError`."""
    known = set(categories) | {OTHER}
    out: dict[str, float] = {}
    for part in [p.strip() for p in spec.split(",") if p.strip()]:
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep:
            raise UsageError(f"--extractor-variant: expected GROUP=RATE, got {part!r}")
        if name not in known:
            raise UsageError(f"--extractor-variant: unknown group {name!r} (known: {', '.join(sorted(known))})")
        try:
            rate = float(value)
        except ValueError:
            raise UsageError(f"--extractor-variant: {name}: expected a support rate, got {value!r}") from None
        if not 0 < rate <= 1:
            raise UsageError(f"--extractor-variant: {name}: a support rate in (0, 1], got {rate}")
        out[name] = rate
    if not out:
        raise UsageError("--extractor-variant: name at least one GROUP=RATE (e.g. values=0.70)")
    return out


def _keep(rng, supported: np.ndarray, rate: float) -> np.ndarray:
    """Which of a group's candidates the variant keeps so that its support rate is `rate`."""
    s = np.flatnonzero(supported)
    u = np.flatnonzero(~supported)
    keep = np.ones(supported.size, dtype=bool)
    if s.size == 0 and u.size == 0:
        return keep
    if rate >= s.size / supported.size:
        n_u = int(round(s.size * (1 - rate) / rate))
        keep[rng.permutation(u)[n_u:]] = False
    else:
        n_s = int(round(u.size * rate / (1 - rate)))
        keep[rng.permutation(s)[n_s:]] = False
    return keep


def extractor_variant(corpus: Corpus, rates: dict[str, float], seed: int = 0) -> Corpus:
    """The variant corpus (module doc): same sources and facts, thinned candidates, new ids."""
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7A71]))  # apart from the corpus's own stream
    t = corpus.truth
    cat = t["category"].astype(str).to_numpy(dtype=object)
    other = np.where((cat != VALUES) & (OTHER in rates), OTHER, "")
    group = np.where(np.isin(cat, list(rates)), cat, other)
    keep = np.ones(len(t), dtype=bool)
    for g in sorted({str(x) for x in group} - {""}):
        m = group == g
        keep[m] = _keep(rng, t["supported"].to_numpy(bool)[m], rates[g])
    kept = t[keep].reset_index(drop=True)
    new_id = kept["persona_id"] + "-v" + (kept.groupby("persona_id").cumcount() + 1).map("{:03d}".format)
    id_map = dict(zip(kept["assertion_id"], new_id))
    truth = kept.assign(assertion_id=new_id)
    cands = corpus.candidates.set_index("assertion_id").loc[kept["assertion_id"]].reset_index()
    cands["assertion_id"] = cands["assertion_id"].map(id_map)
    params = dict(corpus.params, variant={"rates": dict(rates), "seed": seed, "of": "the corpus in the parent folder"})
    return Corpus(candidates=cands[corpus.candidates.columns], sources=corpus.sources, facts=corpus.facts,
                  labels=gold_labels(truth), coverage=gold_coverage(corpus.facts, truth),
                  truth=truth, params=params)

