"""One simulated persona: its facts, the source that states them, and its candidates' text
(steps 4-5 of the generator, `memjudge.simulation.generator`).

`build_persona` takes the candidates the corpus-wide allocation gave a persona (category,
confidence, implied, supported) and returns their assertions (text, the facts they state, and
for an unsupported one its kind), the persona's reference facts and its source document. All
randomness comes from the generator passed in, so a seed reproduces the corpus exactly.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from memjudge.simulation import lexicon as lex

__all__ = ["KINDS", "SUPPORTED", "UNSUPPORTED", "VALUES", "Persona", "build_persona"]

SUPPORTED = "supported"
UNSUPPORTED = "unsupported"
KINDS = ("supported", "over_inference", "fabrication", "contradiction", "wrong_person")
VALUES = "values"


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


class Persona:
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


def build_persona(idx: int, pid: str, cands: pd.DataFrame, params: dict, rng) -> tuple[list[dict], list[dict], str]:
    """(assertions, facts, source) for one persona; `cands` has category, confidence,
    implied, supported (from the corpus-wide allocation)."""
    P = Persona(idx, pid, rng, params)
    st = params["structure"]
    kinds_cfg = params["kinds"]
    rows: list[dict] = [dict(category=c, confidence=float(x), implied=bool(i), supported=bool(s))
                        for c, x, i, s in zip(cands["category"], cands["confidence"], cands["implied"], cands["supported"])]
    # Highest confidence first: a fact's first (canonical) statement is its surest one.
    order = sorted(range(len(rows)), key=lambda j: -rows[j]["confidence"])
    unassigned_explicit: dict[str, list[int]] = {c: [] for c in lex.SLOTS}
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
