"""Synthetic personas with known truth (`memjudge simulate`).

A persona is a bundle of facts across categories (work, location, family, hobbies, health,
preferences, education, and values/beliefs), written into a source document in several
styles (journal notes, social posts, messages to a friend, a profile blurb). A simulated
per-category extractor then emits candidate assertions with confidences: supported ones
restate or paraphrase a fact; unsupported ones are over-inferences (a value read into a weak
cue), fabrications, contradictions, or a friend's trait attributed to the user. Because the
corpus is built, its gold labels and its fact → assertion map are known exactly.

The generator works top-down so that a preset can be calibrated to published figures:
(1) candidates per persona and per category, (2) a confidence per candidate, (3) which
candidates are unsupported (an exact share per group, drawn with odds falling with
confidence), (4) the facts the supported ones state and the unsupported ones' kinds,
(5) the text. Every knob lives in a preset TOML (`presets/paper.toml`); `--config FILE`
overrides any of them.
"""

from __future__ import annotations

import copy
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memjudge.simulation import lexicon as lex
from memjudge.errors import InputError, UsageError
from memjudge.formats import read_toml

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
KINDS = ("supported", "over_inference", "fabrication", "contradiction", "wrong_person")
VALUES = "values"
GOLD = "gold"


# ---------------------------------------------------------------------------------------
# presets


def preset_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("memjudge").joinpath("presets").iterdir() if p.name.endswith(".toml"))


def _merge(base: dict, over: dict, path: str, where: str = "") -> dict:
    """Overrides may only name keys the preset has (a typo must not be silently ignored)."""
    out = copy.deepcopy(base)
    for k, v in over.items():
        key = f"{where}{k}"
        if k not in base:
            raise InputError(path, f"unknown setting {key!r} (known here: {', '.join(sorted(base))})")
        if isinstance(base[k], dict):
            if not isinstance(v, dict):
                raise InputError(path, f"setting {key!r} must be a table")
            out[k] = _merge(base[k], v, path, key + ".")
        else:
            if isinstance(v, dict):
                raise InputError(path, f"setting {key!r} must be a value, not a table")
            if isinstance(base[k], (int, float)) and not isinstance(base[k], bool):
                if isinstance(v, bool) or not isinstance(v, (int, float)):
                    raise InputError(path, f"setting {key!r} must be a number, found {v!r}")
            out[k] = v
    return out


def load_preset(preset: str = "paper", config: str | Path | dict | None = None) -> dict:
    """The preset's parameters, with a TOML file's (or a dict's) overrides applied."""
    if preset not in preset_names():
        raise UsageError(f"unknown preset {preset!r} (known: {', '.join(preset_names())})")
    base = tomllib.loads(resources.files("memjudge").joinpath("presets", f"{preset}.toml").read_text(encoding="utf-8"))
    if config is None:
        params = base
    elif isinstance(config, dict):
        params = _merge(base, config, "<config>")
    else:
        path = Path(config)
        params = _merge(base, read_toml(path), str(path))
    _check_params(params, str(config) if config is not None and not isinstance(config, dict) else f"preset {preset}")
    return params


def _check_params(p: dict, where: str) -> None:
    def bad(msg):
        raise InputError(where, msg)

    c = p["corpus"]
    if c["personas"] < 1 or c["candidates"] < c["personas"]:
        bad("corpus.candidates must be at least corpus.personas >= 1")
    for key in ("values_share",):
        if not 0 <= c[key] <= 1:
            bad(f"corpus.{key} must be in [0, 1]")
    for key in ("values", "other"):
        if not 0 <= p["support"][key] <= 1:
            bad(f"support.{key} must be in [0, 1]")
    cats = p["categories"]
    unknown = [k for k in cats if k not in lex.SLOTS]
    if unknown:
        bad(f"categories: unknown category {unknown[0]!r} (known: {', '.join(lex.SLOTS)})")
    if any(v < 0 for v in cats.values()) or sum(cats.values()) <= 0:
        bad("categories: weights must be >= 0 with a positive sum")
    for group, allowed in (("values", ("over_inference", "fabrication", "contradiction", "wrong_person")),
                           ("other", ("fabrication", "contradiction", "wrong_person"))):
        kinds = p["kinds"][group]
        if any(v < 0 for v in kinds.values()) or sum(kinds.values()) <= 0:
            bad(f"kinds.{group}: shares must be >= 0 with a positive sum")
        for k in kinds:
            if k not in allowed:
                bad(f"kinds.{group}: kind {k!r} not possible here (allowed: {', '.join(allowed)})")
    for name, dist in p["confidence"].items():
        if not (0 <= dist["low"] < dist["high"] <= 1 and dist["low"] <= dist["mean"] <= dist["high"]):
            bad(f"confidence.{name}: need 0 <= low <= mean <= high <= 1 and low < high")
        if not (0 < dist["step"] <= 0.5 and dist["concentration"] > 0):
            bad(f"confidence.{name}: need 0 < step <= 0.5 and concentration > 0")
    for key, v in p["structure"].items():
        if not 0 <= v <= 1:
            bad(f"structure.{key} must be in [0, 1]")


# ---------------------------------------------------------------------------------------
# the corpus


@dataclass
class Corpus:
    """A generated corpus: the memjudge input files plus the truth behind them."""

    candidates: pd.DataFrame
    sources: pd.DataFrame
    facts: pd.DataFrame
    labels: pd.DataFrame
    coverage: pd.DataFrame
    truth: pd.DataFrame
    params: dict = field(default_factory=dict)

    FILES = ("candidates", "sources", "facts", "labels", "coverage", "truth")

    def write(self, out) -> dict[str, str]:
        """Write the six JSONL files into `out`; returns name → path."""
        from memjudge.formats import frame_records, write_json, write_jsonl

        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        paths = {}
        for name in self.FILES:
            path = out / f"{name}.jsonl"
            write_jsonl(path, frame_records(getattr(self, name)))
            paths[name] = str(path)
        write_json(out / "simulate.json", {"simulated": True, "params": self.params, "summary": self.summary()})
        return paths

    def summary(self) -> dict[str, Any]:
        t = self.truth
        vals = t["category"] == VALUES
        covered = self.coverage["covered_by"].map(len) > 0
        return {
            "personas": int(self.sources.shape[0]),
            "candidates": int(t.shape[0]),
            "facts": int(self.facts.shape[0]),
            "values_share": float(vals.mean()),
            "support": float(t["supported"].mean()),
            "support_values": float(t.loc[vals, "supported"].mean()) if vals.any() else None,
            "support_other": float(t.loc[~vals, "supported"].mean()) if (~vals).any() else None,
            "coverage": float(covered.mean()),
            "kinds": {k: int(v) for k, v in t["kind"].value_counts().items()},
        }


# ---------------------------------------------------------------------------------------
# step 1-3: counts, confidences, support (vectorised over the whole corpus)


def _beta_conf(rng, dist: dict, n: int) -> np.ndarray:
    """Confidence on [low, high] from a beta with the given mean and concentration, rounded
    to `step` as an extractor prints it (LLMs favour round numbers; the ties are what make a
    threshold's retention jump past the floor).

    Stratified draws (one uniform per n-tile, shuffled) keep the corpus-level distribution
    close to the declared one, so a calibrated preset lands near its targets for any seed
    while each persona's candidates still vary at random."""
    from scipy.stats import beta as beta_dist

    if n == 0:
        return np.zeros(0)
    lo, hi = dist["low"], dist["high"]
    m = (dist["mean"] - lo) / (hi - lo)
    m = min(max(m, 1e-3), 1 - 1e-3)
    k = dist["concentration"]
    u = (rng.permutation(n) + rng.random(n)) / n
    x = lo + (hi - lo) * beta_dist.ppf(u, m * k, (1 - m) * k)
    step = dist["step"]
    return np.clip(np.round(np.round(x / step) * step, 6), lo, hi)


def _choose_unsupported(rng, conf: np.ndarray, persona_effect: np.ndarray, rate: float, slope: float) -> np.ndarray:
    """Exactly round(rate·n) unsupported, drawn without replacement with weight falling with
    confidence (Efraimidis–Spirakis keys), so support rises with confidence."""
    n = conf.size
    k = int(round(rate * n))
    out = np.zeros(n, dtype=bool)
    if k <= 0 or n == 0:
        return out
    w = np.exp(-slope * conf + persona_effect)
    keys = np.log(rng.random(n)) / w
    out[np.argsort(-keys)[:k]] = True
    return out


def _allocate(params: dict, n_personas: int, rng) -> pd.DataFrame:
    c = params["corpus"]
    total = int(round(c["candidates"] * n_personas / c["personas"]))
    total = max(total, n_personas)
    size = rng.lognormal(0.0, c["size_dispersion"], n_personas)
    k = c["values_share_concentration"]
    share = rng.beta(c["values_share"] * k, (1 - c["values_share"]) * k, n_personas) if 0 < c["values_share"] < 1 else np.full(n_personas, c["values_share"])
    n_values = int(round(c["values_share"] * total))
    pv = size * share
    po = size * (1 - share)
    nv = rng.multinomial(n_values, pv / pv.sum()) if n_values else np.zeros(n_personas, int)
    no = rng.multinomial(total - n_values, po / po.sum()) if total > n_values else np.zeros(n_personas, int)
    # A persona with nothing extracted would have no candidates at all; give it one.
    empty = (nv + no) == 0
    if empty.any():
        donors = np.argsort(-(no))[: int(empty.sum())]
        no[donors] -= 1
        no[empty] += 1

    cats = [k for k, v in params["categories"].items() if v > 0]
    cw = np.array([params["categories"][k] for k in cats], dtype=float)
    rows_p, rows_cat = [], []
    for p in range(n_personas):
        rows_p += [p] * int(nv[p])
        rows_cat += [VALUES] * int(nv[p])
        rows_p += [p] * int(no[p])
        rows_cat += list(np.array(cats)[rng.choice(len(cats), size=int(no[p]), p=cw / cw.sum())])
    df = pd.DataFrame({"p": np.array(rows_p, dtype=int), "category": rows_cat})
    conf = np.empty(len(df))
    implied = np.zeros(len(df), dtype=bool)
    is_v = (df["category"] == VALUES).to_numpy()
    conf[is_v] = _beta_conf(rng, params["confidence"]["values"], int(is_v.sum()))
    no_ = int((~is_v).sum())
    imp = np.zeros(no_, dtype=bool)
    imp[rng.permutation(no_)[: int(round(params["structure"]["implied_share"] * no_))]] = True
    co = np.where(imp, _beta_conf(rng, params["confidence"]["other_implied"], no_),
                  _beta_conf(rng, params["confidence"]["other_explicit"], no_))
    conf[~is_v] = co
    implied[~is_v] = imp
    df["confidence"] = np.clip(conf, 0.0, 1.0)
    df["implied"] = implied
    effect = rng.normal(0.0, params["support"]["persona_sd"], n_personas)[df["p"].to_numpy()]
    unsup = np.zeros(len(df), dtype=bool)
    s = params["support"]
    unsup[is_v] = _choose_unsupported(rng, df["confidence"].to_numpy()[is_v], effect[is_v], 1 - s["values"], s["values_slope"])
    unsup[~is_v] = _choose_unsupported(rng, df["confidence"].to_numpy()[~is_v], effect[~is_v], 1 - s["other"], s["other_slope"])
    df["supported"] = ~unsup
    return df


# ---------------------------------------------------------------------------------------
# step 4-5: facts, kinds and text (per persona)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _negate_vp(vp: str) -> str:
    """'values tradition' → 'does not value tradition'; 'is religious' → 'is not religious'."""
    head, _, rest = vp.partition(" ")
    if head == "is":
        return f"is not {rest}"
    if head == "has":
        return f"does not have {rest}"
    base = head[:-1] if head.endswith("s") else head
    return f"does not {base} {rest}".strip()


class _Persona:
    """Builds one persona's facts, assertions and source from its allocated candidates."""

    def __init__(self, idx: int, pid: str, rng: np.random.Generator, params: dict):
        self.pid = pid
        self.rng = rng
        self.params = params
        self.name = lex.NAMES[idx % len(lex.NAMES)]
        self.subject = self._pick(lex.SUBJECTS)
        self.facts: list[dict] = []        # {fact_id, category, text, sentence, stated, slot, option}
        self.sentences: list[str] = []     # source sentences (facts, cues, friends, fillers)
        self.used: dict[tuple[str, str], set[int]] = {}   # (category, slot) → options used
        self.values_held: list[int] = []
        self.behaviours_used: set[tuple[int, int]] = set()
        self.values_held_false: set[int] = set()
        self.template_start: dict[tuple[str, str], int] = {}
        others = [n for n in lex.NAMES if n != self.name]
        self.friend_names = list(rng.permutation(others))

    def _pick(self, seq):
        """One element of `seq`, uniformly (one draw of the persona's generator)."""
        return seq[int(self.rng.integers(len(seq)))]

    # -- choosing slot options --------------------------------------------------------
    def _free_options(self, category: str):
        """(slot, option index) pairs the persona can still take in this category."""
        free = []
        for slot in lex.SLOTS[category]:
            used = self.used.get((category, slot["name"]), set())
            if slot["single"] and used:
                continue
            free += [(slot, i) for i in range(len(slot["options"])) if i not in used]
        return free

    def _fields(self, slot: dict, i: int) -> dict:
        opt = dict(slot["options"][i])
        opt.setdefault("name", self.friend_names[0])
        opt.setdefault("field", self._pick(lex.FIELDS))
        opt.setdefault("town", self._pick(lex.TOWNS))
        opt.setdefault("n", self._pick(lex.NUMBERS))
        # An option's own phrases may hold placeholders ("is married to {name}").
        return {k: v.format(**opt) if isinstance(v, str) and "{" in v else v for k, v in opt.items()}

    def _render_vp(self, slot: dict, fields: dict, variant: int = 0) -> str:
        vps = slot["vp"]
        return vps[variant % len(vps)].format(**fields)

    def _assertion_text(self, vp: str, variant: int = 0) -> str:
        suffixes = ("", "", " (mentioned in their posts)", " (stated by the user)")
        subj = self.subject if variant < 2 else lex.SUBJECTS[variant % len(lex.SUBJECTS)]
        text = _cap(f"{subj}{vp}") if subj else _cap(vp)
        return text + suffixes[variant % len(suffixes)] + "."

    def new_fact(self, category: str, implied: bool, covered: bool = True) -> dict | None:
        free = self._free_options(category)
        if implied:
            with_cue = [(s, i) for s, i in free if "cue" in s["options"][i]]
            free = with_cue or free
        if not free:
            return None
        slot, i = self._pick(free)
        self.used.setdefault((category, slot["name"]), set()).add(i)
        fields = self._fields(slot, i)
        if implied and "cue" in fields:
            sentence, stated = fields["cue"], "implied"
        else:
            # Rotate through the slot's templates so two trips are not told the same way.
            firsts = slot["first"]
            start = self.template_start.setdefault((category, slot["name"]), int(self.rng.integers(len(firsts))))
            k = start + len(self.used[(category, slot["name"])]) - 1
            sentence, stated = firsts[k % len(firsts)].format(**fields), "explicit"
        return self._add_fact(category=category, text=_cap(self._render_vp(slot, fields)) + ".", sentence=sentence,
                              stated=stated, slot=slot, option=i, fields=fields)

    def _add_fact(self, **fact) -> dict:
        """A new fact of the persona, numbered in order, its sentence one of the source's."""
        fact = dict(fact_id=f"{self.pid}-f{len(self.facts) + 1:03d}", **fact, n_assertions=0)
        self.facts.append(fact)
        self.sentences.append(fact["sentence"])
        return fact

    def restate(self, fact: dict) -> str:
        """An assertion stating `fact`, worded differently from earlier ones."""
        k = fact["n_assertions"]
        fact["n_assertions"] += 1
        if "vp" in fact:  # values and behaviours carry their own phrases
            vps = fact["vp"]
            return self._assertion_text(vps[k % len(vps)], k)
        return self._assertion_text(self._render_vp(fact["slot"], fact["fields"], k), k)

    def state(self, row: dict, fact: dict, text: str | None = None) -> None:
        """Make candidate `row` a supported assertion of `fact` (worded `text`, else restated)."""
        row.update(kind="supported", text=self.restate(fact) if text is None else text, facts=[fact["fact_id"]],
                   evidence=fact["sentence"], stated=fact["stated"])

    # -- values ------------------------------------------------------------------------
    def _new_value(self) -> int | None:
        free = [i for i in range(len(lex.VALUES)) if i not in self.values_held and not self._conflicts(i)]
        if not free:
            return None
        v = self._pick(free)
        self.values_held.append(v)
        return v

    def _conflicts(self, v: int) -> bool:
        pair = {"is politically progressive", "is politically conservative"}
        held = {lex.VALUES[h]["vp"] for h in self.values_held}
        return lex.VALUES[v]["vp"] in pair and bool(held & pair)

    def value_fact(self, v: int) -> dict:
        """The explicit statement of value v (the reference fact values assertions paraphrase)."""
        for f in self.facts:
            if f.get("value") == v and f["category"] == VALUES:
                return f
        val = lex.VALUES[v]
        sentence = self._pick(val["first"])
        return self._add_fact(category=VALUES, text=_cap(val["vp"]) + ".", sentence=sentence, stated="explicit",
                              value=v, vp=[val["vp"], *val["para"]])

    def behaviour_fact(self) -> tuple[dict, int] | None:
        """A behaviour of a held value (or a newly held one) that the value can be read from."""
        order = list(self.values_held) + [i for i in self.rng.permutation(len(lex.VALUES)) if i not in self.values_held]
        for v in order:
            if self._conflicts(v) and v not in self.values_held:
                continue
            for b, (cat, vp, sentence) in enumerate(lex.VALUES[v]["behave"]):
                if (v, b) in self.behaviours_used:
                    continue
                if v not in self.values_held:
                    self.values_held.append(v)
                self.behaviours_used.add((v, b))
                fact = self._add_fact(category=cat, text=_cap(vp) + ".", sentence=sentence, stated="explicit",
                                      behaviour=(v, b), vp=[vp])
                return fact, v
        return None

    def value_reading(self, v: int, behaviour: dict) -> str:
        """A value read from a behaviour the source states: supported, and it states the behaviour."""
        val = lex.VALUES[v]
        phrase = self._pick([val["vp"], *val["para"]])
        b = behaviour["vp"][0]
        forms = [f"{phrase}, as they {_plural_vp(b)}", f"{phrase} (they {_plural_vp(b)})", f"{phrase}: {b}"]
        return self._assertion_text(self._pick(forms))

    # -- unsupported -----------------------------------------------------------------
    def fabrication(self, category: str) -> str:
        if category == VALUES:
            v = self._unheld_value()
            return self._assertion_text(lex.VALUES[v]["vp"] if v is not None else "values honesty above all")
        free = self._free_options(category)
        slot, i = self._pick(free)
        self.used.setdefault((category, slot["name"]), set()).add(i)  # never later stated as true
        return self._assertion_text(self._render_vp(slot, self._fields(slot, i)))

    def contradiction(self, category: str) -> tuple[str, str | None]:
        if category == VALUES:
            held = [f for f in self.facts if f["category"] == VALUES]
            if held:
                f = self._pick(held)
                return self._assertion_text(_negate_vp(f["vp"][0])), f["fact_id"]
            return self.fabrication(category), None
        mine = [f for f in self.facts if f["category"] == category and "slot" in f]
        if not mine:
            return self.fabrication(category), None
        f = self._pick(mine)
        slot = f["slot"]
        if slot["single"]:
            alts = [i for i in range(len(slot["options"])) if i != f["option"]]
            if alts:
                i = self._pick(alts)
                fields = self._fields(slot, i)
                return self._assertion_text(self._render_vp(slot, fields)), f["fact_id"]
        neg = slot.get("neg")
        if neg:
            return self._assertion_text(neg.format(**f["fields"])), f["fact_id"]
        return self._assertion_text(_negate_vp(self._render_vp(slot, f["fields"]))), f["fact_id"]

    def wrong_person(self, category: str) -> tuple[str, str]:
        # A relative's family is the user's family too: family traits go to friends only.
        relations = lex.FRIENDS if category == "family" else lex.RELATIONS
        who = f"my {self._pick(relations)} {self.friend_names[1 + len(self.sentences) % (len(self.friend_names) - 1)]}"
        if category == VALUES:
            v = self._unheld_value()
            vp = lex.VALUES[v]["vp"] if v is not None else "values honesty above all"
            sentence = _cap(f"{who} {vp}, and it shows in everything they do.")
        else:
            free = self._free_options(category)
            slot, i = self._pick(free)
            self.used.setdefault((category, slot["name"]), set()).add(i)
            vp = self._render_vp(slot, self._fields(slot, i))
            sentence = _cap(f"{who} {vp}.")
        self.sentences.append(sentence)
        return self._assertion_text(vp), sentence

    def over_inference(self) -> tuple[str, str]:
        v = self._unheld_value()
        if v is None:
            v = 0
        val = lex.VALUES[v]
        cue = self._pick(val["weak"])
        if cue not in self.sentences:
            self.sentences.append(cue)
        phrase = self._pick([val["vp"], *val["para"]])
        return self._assertion_text(phrase), cue

    def _unheld_value(self) -> int | None:
        free = [i for i in range(len(lex.VALUES)) if i not in self.values_held]
        if not free:
            return None
        v = self._pick(free)
        # An over-inferred or fabricated value must stay false: never held later either.
        self.values_held.append(v)
        self.values_held_false.add(v)
        return v

    # -- source ------------------------------------------------------------------------
    def source(self) -> str:
        rng = self.rng
        sents = list(self.sentences)
        n_fill = max(1, len(sents) // 6)
        sents += [lex.FILLER[i] for i in rng.choice(len(lex.FILLER), size=min(n_fill, len(lex.FILLER)), replace=False)]
        order = rng.permutation(len(sents))
        sents = [sents[i] for i in order]
        n_pieces = int(min(max(2, round(len(sents) / 7)), 9))
        n_pieces = min(n_pieces, len(sents))
        sizes = 1 + rng.multinomial(len(sents) - n_pieces, rng.dirichlet(np.full(n_pieces, 4.0)))
        pieces = np.split(np.array(sents, dtype=object), np.cumsum(sizes)[:-1])
        styles = ["profile"] + list(rng.choice(["journal", "post", "message"], size=len(pieces) - 1))
        out = []
        for style, piece in zip(styles, pieces):
            st = lex.STYLES[style]
            fill = dict(name=self.name, friend=self.friend_names[-1], day=self._pick(lex.DAYS))
            opener = self._pick(st["open"]).format(**fill)
            closer = self._pick(st["close"])
            body = " ".join(piece)
            out.append(" ".join(x for x in (opener, body, closer) if x))
        return "\n\n".join(out)


def _plural_vp(vp: str) -> str:
    """'volunteers at a food bank' → 'volunteer at a food bank' (after 'they')."""
    head, _, rest = vp.partition(" ")
    if head in ("never", "always", "often", "rarely", "also"):
        return f"{head} {_plural_vp(rest)}"
    irregular = {"is": "are", "has": "have", "does": "do", "goes": "go"}
    if head in irregular:
        base = irregular[head]
    elif head.endswith("ies"):
        base = head[:-3] + "y"
    elif head.endswith(("shes", "ches", "sses", "xes")):
        base = head[:-2]
    elif head.endswith("s"):
        base = head[:-1]
    else:
        base = head
    return f"{base} {rest}".strip()


_ATTRIBUTIONS = ("mentioned in their posts", "stated by the user", "from their messages", "noted in a journal entry",
                 "per their profile", "said in a message to a friend", "according to their notes", "mentioned more than once")


def _dedupe_texts(rows: list[dict]) -> None:
    """An extractor's output is deduplicated before the write boundary: make every text of a
    persona distinct by attributing repeats to where they were read."""
    seen: set[str] = set()
    for r in rows:
        text = r["text"]
        k = 0
        while text in seen:
            tag = _ATTRIBUTIONS[k] if k < len(_ATTRIBUTIONS) else f"mention {k - len(_ATTRIBUTIONS) + 2}"
            text = f"{r['text'][:-1]} ({tag})."
            k += 1
        r["text"] = text
        seen.add(text)


def _build_persona(idx: int, pid: str, cands: pd.DataFrame, params: dict, rng) -> tuple[list[dict], list[dict], str]:
    """(assertions, facts, source) for one persona; `cands` has category, confidence,
    implied, supported (from the corpus-wide allocation)."""
    P = _Persona(idx, pid, rng, params)
    st = params["structure"]
    kinds_cfg = params["kinds"]
    rows: list[dict] = [dict(category=c, confidence=float(x), implied=bool(i), supported=bool(s))
                        for c, x, i, s in zip(cands["category"], cands["confidence"], cands["implied"], cands["supported"])]
    # Highest confidence first: a fact's first (canonical) statement is its surest one.
    order = sorted(range(len(rows)), key=lambda j: -rows[j]["confidence"])
    unassigned_explicit = {c: [] for c in lex.SLOTS}
    for j in order:
        r = rows[j]
        if r["category"] != VALUES and r["supported"] and not r["implied"]:
            unassigned_explicit[r["category"]].append(j)

    # Supported values: paraphrases of explicit value statements, or readings of behaviours.
    for j in order:
        r = rows[j]
        if r["category"] != VALUES or not r["supported"]:
            continue
        if rng.random() < st["values_statement_share"]:
            mine = [f for f in P.facts if f["category"] == VALUES]
            if mine and rng.random() < st["values_duplicate"]:
                f = P._pick(mine)
            else:
                v = P._new_value()
                f = P.value_fact(v) if v is not None else mine[0]
            P.state(r, f)
        else:
            behaviours = [f for f in P.facts if "behaviour" in f]
            got = None
            if behaviours and rng.random() < st["values_duplicate"]:
                f = P._pick(behaviours)
                got = (f, f["behaviour"][0])
            if got is None:
                got = P.behaviour_fact()
            if got is None:  # every behaviour taken: state a value instead
                v = P._new_value()
                f = P.value_fact(v if v is not None else P.values_held[0])
                P.state(r, f)
                continue
            f, v = got
            P.state(r, f, P.value_reading(v, f))
            if f["n_assertions"] == 0 and rng.random() < st["behaviour_extracted"]:
                pool = unassigned_explicit.get(f["category"], [])
                if pool:
                    k = pool.pop(int(rng.integers(len(pool))))
                    P.state(rows[k], f)

    # Supported others: implied facts are stated once (the extractor's only, unsure, reading);
    # explicit ones are sometimes restated by a second assertion.
    for j in order:
        r = rows[j]
        if r["category"] == VALUES or not r["supported"] or "kind" in r:
            continue
        cat = r["category"]
        f = None
        if not r["implied"]:
            mine = [f for f in P.facts if f["category"] == cat and f["stated"] == "explicit" and f["n_assertions"] > 0 and "slot" in f]
            if mine and rng.random() < st["explicit_duplicate"]:
                f = P._pick(mine)
        if f is None:
            f = P.new_fact(cat, implied=r["implied"])
        if f is None:  # this category's bank is used up for the persona: take any other
            for alt in rng.permutation(list(params["categories"])):
                f = P.new_fact(str(alt), implied=r["implied"])
                if f is not None:
                    r["category"] = str(alt)
                    break
        P.state(r, f)

    # Facts of the source that no candidate states (the extractor missed them).
    n_facts = len(P.facts)
    miss = params["structure"]["missed_facts"]
    n_missed = int(rng.binomial(max(n_facts, 1), miss / (1 - miss))) if miss < 1 else 0
    cats = [c for c, w in params["categories"].items() if w > 0]
    for _ in range(n_missed):
        if rng.random() < params["structure"]["missed_values_share"]:
            v = P._new_value()
            if v is not None:
                P.value_fact(v)
                continue
        P.new_fact(P._pick(cats), implied=bool(rng.random() < st["implied_share"]))

    # Unsupported candidates, by kind.
    for j in order:
        r = rows[j]
        if r["supported"]:
            continue
        group = "values" if r["category"] == VALUES else "other"
        names = list(kinds_cfg[group])
        w = np.array([kinds_cfg[group][k] for k in names], dtype=float)
        kind = names[int(rng.choice(len(names), p=w / w.sum()))]
        cat = r["category"]
        if cat != VALUES and not P._free_options(cat) and kind in ("fabrication", "wrong_person"):
            kind = "contradiction"
        cue = contradicts = None
        if kind == "over_inference":
            text, cue = P.over_inference()
        elif kind == "fabrication":
            text = P.fabrication(cat)
        elif kind == "contradiction":
            text, contradicts = P.contradiction(cat)
            if contradicts is None:
                kind = "fabrication"
        else:
            text, cue = P.wrong_person(cat)
        r.update(kind=kind, text=text, facts=[], evidence="", cue=cue, contradicts=contradicts)

    _dedupe_texts(rows)
    source = P.source()
    facts = [dict(persona_id=pid, fact_id=f["fact_id"], text=f["text"], category=f["category"], stated=f["stated"],
                  sentence=f["sentence"]) for f in P.facts]
    for r in rows:
        r.setdefault("cue", None)
        r.setdefault("contradicts", None)
        r.setdefault("stated", None)
    return rows, facts, source


# ---------------------------------------------------------------------------------------
# public API


def simulate(preset: str = "paper", seed: int = 0, personas: int | None = None, config=None, out=None) -> Corpus:
    """Generate a corpus with known truth. `personas` overrides the preset's count (the
    number of candidates scales with it); `config` is a TOML path or a dict of overrides."""
    params = load_preset(preset, config)
    n = int(personas if personas is not None else params["corpus"]["personas"])
    if n < 1:
        raise UsageError("personas must be at least 1")
    rng = np.random.default_rng(seed)
    alloc = _allocate(params, n, rng)
    width = max(3, len(str(n)))
    cand_rows, fact_rows, src_rows, truth_rows = [], [], [], []
    groups = dict(tuple(alloc.groupby("p", sort=True)))
    for p in range(n):
        pid = f"p{p + 1:0{width}d}"
        cands = groups.get(p)
        if cands is None:
            continue
        rows, facts, source = _build_persona(p, pid, cands, params, rng)
        src_rows.append(dict(persona_id=pid, source=source))
        fact_rows += facts
        for k, r in enumerate(rows, start=1):
            aid = f"{pid}-a{k:03d}"
            cand_rows.append(dict(persona_id=pid, assertion_id=aid, category=r["category"], confidence=r["confidence"], text=r["text"]))
            truth_rows.append(dict(assertion_id=aid, persona_id=pid, category=r["category"], confidence=r["confidence"],
                                   kind=r["kind"], supported=r["kind"] == "supported", fact_ids=r["facts"],
                                   evidence=r["evidence"], cue=r["cue"], contradicts=r["contradicts"],
                                   stated=r["stated"]))
    candidates = pd.DataFrame(cand_rows)
    truth = pd.DataFrame(truth_rows)
    facts = pd.DataFrame(fact_rows)
    sources = pd.DataFrame(src_rows)
    labels = gold_labels(truth)
    coverage = gold_coverage(facts, truth)
    params = copy.deepcopy(params)
    params["corpus"]["personas_generated"] = n
    params["seed"] = seed
    params["preset"] = preset
    corpus = Corpus(candidates, sources, facts, labels, coverage, truth, params)
    if out is not None:
        corpus.write(out)
    return corpus


def gold_labels(truth: pd.DataFrame) -> pd.DataFrame:
    """Labels file rows (spec §6) with judge `gold`: the verdicts known by construction."""
    return pd.DataFrame({
        "assertion_id": truth["assertion_id"], "persona_id": truth["persona_id"], "category": truth["category"],
        "judge": GOLD, "rubric": "support", "replicate": 0,
        "verdict": np.where(truth["supported"], SUPPORTED, UNSUPPORTED),
        "judge_score": None, "evidence": truth["evidence"], "evidence_found": truth["evidence"].str.len() > 0,
        "rationale": "by construction (" + truth["kind"] + ")", "error": None, "cached": False, "usage": None,
        "latency_s": None, "simulated": True,
    })


def stated_by(assertion_ids, fact_ids) -> dict[str, list[str]]:
    """Fact id → the assertions stating it, from the truth's `fact_ids` lists (None: none)."""
    stated: dict[str, list[str]] = {}
    for aid, fids in zip(assertion_ids, fact_ids):
        for f in fids or []:
            stated.setdefault(str(f), []).append(aid)
    return stated


def gold_coverage(facts: pd.DataFrame, truth: pd.DataFrame) -> pd.DataFrame:
    """Coverage rows with judge `gold`: each reference fact and the assertions stating it."""
    stated = stated_by(truth["assertion_id"], truth["fact_ids"])
    return pd.DataFrame({
        "persona_id": facts["persona_id"], "fact_id": facts["fact_id"], "fact_text": facts["text"],
        "covered_by": [stated.get(f, []) for f in facts["fact_id"]],
        "judge": GOLD, "rubric": "coverage", "replicate": 0, "error": None, "simulated": True,
    })
