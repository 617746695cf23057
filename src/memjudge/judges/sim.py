"""Simulated judges `sim:NAME`: answer from a corpus's truth through a declared noise model.

For simulation studies only (spec §3): every answer says it is simulated, and the engine marks
the run `simulated: true` from `Judge.simulated`. The noise model, declared in a panel file:

    [[judge]]
    spec = "sim:paper"
    [judge.options]
    truth = "runs/sim/truth.jsonl"      # or the corpus folder written by `memjudge simulate`
    sensitivity = 0.98                  # P(says supported | supported); a number or a table per category
    specificity = { default = 0.93, values = 0.90 }   # P(says unsupported | unsupported)
    leniency = 0.15                     # P(accepts an over-inference) (replaces specificity for them)
    strictness = 0.0                    # P(rejects a supported assertion read from an implied fact)
    flip_rate = 0.0471                  # P(two re-scores of one item differ)
    hard_flip = 2.0                     # hard items (over-inferences, implied facts, a friend's trait) flip this many times as often
    coverage_recall = 0.97              # P(a stating assertion is listed for its fact)
    coverage_false = 0.01               # P(a fact gets one wrong assertion id listed)
    confidence_auc = 0.85               # AUC of |judge_score| at telling right answers from wrong ones (0.5: no signal)
    shared_difficulty = 0.0             # correlation of sim judges' errors through an item difficulty they share
    seed = 0

Each item has a modal verdict, drawn once; each replicate flips it independently with an
item's probability e_i, so two replicates differ with probability 2e_i(1 - e_i). The e_i are
proportional to the item's hardness (1, or `hard_flip` for hard items) and scaled so that
their mean pairwise disagreement over the truth file's items is exactly the declared
flip_rate. The modal verdict's probability is set so that a single replicate's rate of
"supported" is the declared one (sensitivity, 1 - specificity, leniency, ...): those are the
rates measured against gold. (A declared rate beyond what the flip rate allows, e.g.
sensitivity above 1 - e_i, is clipped to the nearest possible one.) Every draw is a hash of
(seed, assertion, replicate): answers are deterministic, hence cacheable, and a new
replicate is a new draw.

Items hard for one judge are hard for others (shared_difficulty = s): the modal draw reads a
normal latent w = sqrt(s)·d_i + sqrt(1 - s)·v_ij, where d_i (a hash of the assertion alone) is
shared by every sim judge on the corpus and v_ij is the judge's own; the judge errs where w is
large. w is a standard normal whatever s, so every declared rate above holds; two judges'
latents correlate by s, hence their errors too (s = 0: independent judges, the draws earlier
versions made).

Every support answer has a `judge_score`, signed as the embedded and hosted judges' log-odds
(log P(supported) - log P(unsupported): > 0 says supported). Its size is softplus(2z) with
z = mu·[the answer is right] + N(0, 1) drawn per replicate, so that |judge_score| tells right
answers from wrong ones with an AUC of exactly Phi(mu / sqrt 2) = confidence_auc (binormal).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from statistics import NormalDist
from typing import Any

from memjudge.errors import InputError, UsageError
from memjudge.judges.base import Judge, JudgeAnswer, JudgeCall, JudgeConfig, Usage

# Built-in noise models by NAME; any other NAME starts from "paper". `paper` mirrors the
# paper's primary judge: a 4.71% re-score flip rate.
PROFILES: dict[str, dict[str, Any]] = {
    "paper": dict(sensitivity=0.985, specificity=0.90, leniency=0.20, strictness=0.0, flip_rate=0.0471,
                  hard_flip=2.0, coverage_recall=0.97, coverage_false=0.01,
                  confidence_auc=0.85, shared_difficulty=0.0),
    "lenient": dict(sensitivity=0.99, specificity=0.85, leniency=0.60, strictness=0.0, flip_rate=0.03,
                    hard_flip=3.0, coverage_recall=0.99, coverage_false=0.03,
                  confidence_auc=0.85, shared_difficulty=0.0),
    "strict": dict(sensitivity=0.93, specificity=0.97, leniency=0.03, strictness=0.30, flip_rate=0.06,
                   hard_flip=3.0, coverage_recall=0.92, coverage_false=0.0,
                  confidence_auc=0.85, shared_difficulty=0.0),
    "noisy": dict(sensitivity=0.90, specificity=0.75, leniency=0.40, strictness=0.10, flip_rate=0.12,
                  hard_flip=1.0, coverage_recall=0.85, coverage_false=0.05,
                  confidence_auc=0.85, shared_difficulty=0.0),
    "perfect": dict(sensitivity=1.0, specificity=1.0, leniency=0.0, strictness=0.0, flip_rate=0.0,
                    hard_flip=1.0, coverage_recall=1.0, coverage_false=0.0, confidence_auc=0.85, shared_difficulty=0.0),
}
OPTIONS = ("truth", "profile", "seed", *PROFILES["paper"])
_TRUTH_CACHE: dict[str, _Truth] = {}


HARD_KINDS = ("over_inference", "wrong_person")


def _did_you_mean(name: str, known) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def flip_probability(flip_rate: float) -> float:
    """Per-replicate flip probability e with 2e(1 - e) = flip_rate (pairwise disagreement)."""
    if not 0 <= flip_rate <= 0.5:
        raise UsageError(f"flip_rate must be in [0, 0.5], got {flip_rate}")
    return (1 - math.sqrt(1 - 2 * flip_rate)) / 2


def flip_scale(flip_rate: float, hardness: list[float]) -> float:
    """c such that e_i = min(c·h_i, 1/2) gives mean 2e_i(1 - e_i) = flip_rate (bisection;
    the mean is increasing in c)."""
    if not 0 <= flip_rate <= 0.5:
        raise UsageError(f"flip_rate must be in [0, 0.5], got {flip_rate}")
    if flip_rate == 0 or not hardness:
        return 0.0
    import numpy as np

    h = np.asarray(hardness, dtype=float)

    def mean_flip(c):
        e = np.minimum(c * h, 0.5)
        return float(np.mean(2 * e * (1 - e)))

    lo, hi = 0.0, 0.5 / h.min()
    for _ in range(80):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mean_flip(mid) < flip_rate else (lo, mid)
    return (lo + hi) / 2


def _uniform(*parts: Any) -> float:
    digest = hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2.0**64


_NORMAL = NormalDist()


def _normal(u: float) -> float:
    """The standard normal quantile of a _uniform draw (kept inside (0, 1): it may be 0)."""
    return _NORMAL.inv_cdf(min(max(u, 2.0**-64), 1 - 2.0**-53))


def confidence_shift(auc: float) -> float:
    """mu with Phi(mu / sqrt 2) = auc: the binormal AUC of N(mu, 1) against N(0, 1)."""
    return math.sqrt(2) * _NORMAL.inv_cdf(auc) if auc > 0.5 else 0.0


def score_size(z: float) -> float:
    """|judge_score| of a confidence latent z: softplus(2z), increasing, so the AUC is z's."""
    x = 2 * z
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


class _Truth:
    """truth.jsonl (and facts.jsonl beside it, if any) of a simulated corpus. What only a
    coverage answer reads (the facts, each fact's stating assertions, each persona's
    assertions) is read when one first needs it: a support run of a million candidates never
    holds it (~300 MB)."""

    def __init__(self, path: Path):
        self.path = path
        df = self._table()
        ids = df["assertion_id"].astype(str).tolist()
        self.kind = dict(zip(ids, df["kind"]))
        self.category = dict(zip(ids, df.get("category", [None] * len(df))))
        self.evidence = dict(zip(ids, df.get("evidence", [""] * len(df))))
        self.cue = dict(zip(ids, df.get("cue", [None] * len(df))))
        self.stated = dict(zip(ids, df.get("stated", [None] * len(df))))
        self._facts: dict[str, list[tuple[str, str]]] | None = None
        self._by_persona: tuple[dict[str, list[str]], dict[str, list[str]]] | None = None

    def _table(self):
        from memjudge.formats import read_table

        df = read_table(self.path)
        for col in ("assertion_id", "persona_id", "kind"):
            if col not in df.columns:
                raise InputError(self.path, f"missing required column {col!r} (is this a truth.jsonl from memjudge simulate?)")
        return df

    def _coverage_index(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        if self._by_persona is None:
            from memjudge.simulation import stated_by

            df = self._table()
            ids = df["assertion_id"].astype(str).tolist()
            by_persona: dict[str, list[str]] = {}
            for aid, pid in zip(ids, df["persona_id"].astype(str)):
                by_persona.setdefault(pid, []).append(aid)
            self._by_persona = by_persona, stated_by(ids, df.get("fact_ids", [[]] * len(df)))
        return self._by_persona

    @property
    def persona_assertions(self) -> dict[str, list[str]]:
        """persona -> its assertion ids, in file order."""
        return self._coverage_index()[0]

    @property
    def stated_by(self) -> dict[str, list[str]]:
        """fact id -> the assertions stating it (`memjudge.simulation.stated_by`)."""
        return self._coverage_index()[1]

    @property
    def facts(self) -> dict[str, list[tuple[str, str]]]:
        """persona -> (fact id, text) of facts.jsonl beside the truth file."""
        if self._facts is None:
            self._facts = {}
            facts_path = self.path.with_name("facts.jsonl")
            if facts_path.is_file():
                from memjudge.formats import read_facts

                facts = read_facts(facts_path)
                for pid, fid, text in zip(facts["persona_id"], facts["fact_id"], facts["text"]):
                    self._facts.setdefault(pid, []).append((fid, text))
        return self._facts

    @staticmethod
    def file(where) -> Path:
        """The truth file named by the `truth` option: truth.jsonl itself or its folder."""
        path = Path(where)
        return path / "truth.jsonl" if path.is_dir() else path

    @classmethod
    def load(cls, where) -> _Truth:
        path = cls.file(where)
        if not path.is_file():
            raise InputError(path, "no such file (the sim judge's `truth` option: truth.jsonl or the folder of memjudge simulate)")
        key = str(path.resolve())
        if key not in _TRUTH_CACHE:
            _TRUTH_CACHE[key] = cls(path)
        return _TRUTH_CACHE[key]


def _block(text: str, name: str) -> list[tuple[str, str]] | None:
    """(id, text) entries of a <<<NAME ... NAME>>> list block of a rendered prompt, or None."""
    from memjudge.judges.rubrics import list_entries

    m = re.search(rf"<<<{name}\n(.*?)\n?{name}>>>", text, re.S)
    if m is None:
        return None
    return list_entries(m.group(1))


class SimJudge(Judge):
    prefix = "sim"
    simulated = True

    def __init__(self, config: JudgeConfig):
        super().__init__(config)
        opts = dict(config.options)
        self.check_options(OPTIONS)
        # A NAME that is no profile is a custom judge only when its noise model is declared
        # (options.profile or a noise setting); otherwise it is a typo (sim:papr), not "paper".
        declared = "profile" in opts or any(k in opts for k in PROFILES["paper"])
        if self.model not in PROFILES and not declared:
            raise UsageError(f"judge {config.spec}: unknown simulated profile {self.model!r}{_did_you_mean(self.model, PROFILES)} "
                             f"(known: {', '.join(PROFILES)}; a custom name needs options.profile or noise settings)")
        profile = opts.get("profile", self.model if self.model in PROFILES else "paper")
        if profile not in PROFILES:
            raise UsageError(f"judge {config.spec}: unknown profile {profile!r}{_did_you_mean(str(profile), PROFILES)} (known: {', '.join(PROFILES)})")
        model = dict(PROFILES[profile])
        model.update({k: v for k, v in opts.items() if k in model})
        for k in ("sensitivity", "specificity"):
            v = model[k]
            table = v if isinstance(v, dict) else {"default": v}
            for cat, p in table.items():
                if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p <= 1:
                    raise UsageError(f"judge {config.spec}: {k}[{cat}] must be a probability, got {p!r}")
            model[k] = {str(c): float(p) for c, p in table.items()}
            model[k].setdefault("default", PROFILES[profile][k])
        for k in ("leniency", "strictness", "coverage_recall", "coverage_false", "flip_rate"):
            v = model[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise UsageError(f"judge {config.spec}: {k} must be a probability, got {v!r}")
        for k in ("confidence_auc", "shared_difficulty"):
            v = model[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise UsageError(f"judge {config.spec}: {k} must be a number in [0, 1], got {v!r}")
        if not 0.5 <= model["confidence_auc"] < 1:
            raise UsageError(f"judge {config.spec}: confidence_auc must be in [0.5, 1) (0.5: no signal), got {model['confidence_auc']!r}")
        if model["flip_rate"] > 0.5:
            raise UsageError(f"judge {config.spec}: flip_rate must be at most 0.5 (two replicates of a coin toss)")
        h = model["hard_flip"]
        if isinstance(h, bool) or not isinstance(h, (int, float)) or h < 1:
            raise UsageError(f"judge {config.spec}: hard_flip must be a number >= 1, got {h!r}")
        self.noise = model
        self.profile = profile
        self._flip_c: float | None = None
        self._mu = confidence_shift(float(model["confidence_auc"]))
        seed = opts.get("seed", config.seed)
        self.seed = int(seed) if seed is not None else 0
        if "truth" not in opts:
            raise UsageError(f"judge {config.spec}: needs options.truth (truth.jsonl or the folder written by memjudge simulate)")
        self.truth_path = opts["truth"]
        self._truth: _Truth | None = None

    def identity(self) -> dict[str, Any]:
        """The truth file's content is part of what the answers depend on: re-simulating into
        the same folder must not reuse cached answers about the old corpus."""
        ident = super().identity()
        path = _Truth.file(self.truth_path)
        ident["truth_sha256"] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        # Answers carry a judge_score since the confidence model: an answer cached before has none.
        ident["confidence"] = {k: self.noise[k] for k in ("confidence_auc", "shared_difficulty")}
        return ident

    @property
    def truth(self) -> _Truth:
        if self._truth is None:
            self._truth = _Truth.load(self.truth_path)
        return self._truth

    # -- the noise model ------------------------------------------------------------------
    def _rate(self, name: str, category: str | None) -> float:
        table = self.noise[name]
        return table.get(category or "", table["default"])

    def p_supported(self, kind: str, category: str | None, stated: str | None) -> float:
        """P(the modal verdict is 'supported') for an assertion of this kind."""
        if kind == "supported":
            p = self._rate("sensitivity", category)
            if stated == "implied":
                p *= 1 - self.noise["strictness"]
            return p
        if kind == "over_inference":
            return self.noise["leniency"]
        return 1 - self._rate("specificity", category)

    def hardness(self, kind: str, stated: str | None) -> float:
        hard = kind in HARD_KINDS or (kind == "supported" and stated == "implied")
        return float(self.noise["hard_flip"]) if hard else 1.0

    def flip_p(self, assertion_id: str) -> float:
        """This item's per-replicate flip probability e_i."""
        t = self.truth
        if self._flip_c is None:
            self._flip_c = flip_scale(float(self.noise["flip_rate"]),
                                      [self.hardness(k, t.stated.get(a)) for a, k in t.kind.items()])
        return min(self._flip_c * self.hardness(t.kind[assertion_id], t.stated.get(assertion_id)), 0.5)

    def verdict(self, assertion_id: str, replicate: int) -> tuple[str, bool]:
        """(verdict, flipped) for one replicate of one assertion."""
        t = self.truth
        if assertion_id not in t.kind:
            raise KeyError(f"assertion {assertion_id!r} is not in the sim judge's truth file {t.path}")
        kind = t.kind[assertion_id]
        p = self.p_supported(kind, t.category.get(assertion_id), t.stated.get(assertion_id))
        e = self.flip_p(assertion_id)
        # Modal probability m with m(1 - e) + (1 - m)e = p: a replicate says "supported" at rate p.
        m = min(max((p - e) / (1 - 2 * e), 0.0), 1.0) if e < 0.5 else p
        u = _uniform(self.seed, "verdict", assertion_id)
        s = float(self.noise["shared_difficulty"])
        if s > 0:
            # A uniform again, large where the item is hard: a supported item's modal verdict is
            # wrong for u >= m, another's for u < m.
            w = math.sqrt(s) * _normal(_uniform("difficulty", assertion_id)) + math.sqrt(1 - s) * _normal(u)
            u = _NORMAL.cdf(w) if kind == "supported" else 1 - _NORMAL.cdf(w)
        modal = u < m
        flipped = _uniform(self.seed, "flip", assertion_id, replicate) < e
        return ("supported" if modal != flipped else "unsupported"), flipped

    def judge_score(self, assertion_id: str, replicate: int, verdict: str) -> float:
        """The answer's signed log-odds: its size says how sure the judge is, at the declared AUC."""
        right = (verdict == "supported") == (self.truth.kind[assertion_id] == "supported")
        z = self._mu * right + _normal(_uniform(self.seed, "confidence", assertion_id, replicate))
        size = score_size(z)
        return size if verdict == "supported" else -size

    def labels(self, candidates, replicates: int = 1):
        """Support labels for every candidate and replicate, without the scoring engine:
        the same verdicts `memjudge score --judge sim:...` writes (a fast path for
        simulation studies at full scale). Columns of spec §6; `simulated` is True."""
        import pandas as pd

        rows = []
        for aid, pid, cat in zip(candidates["assertion_id"].astype(str), candidates["persona_id"].astype(str), candidates["category"].astype(str)):
            for r in range(replicates):
                obj = self._support_answer(aid, r)
                rows.append((aid, pid, cat, r, obj["verdict"], obj["evidence"], obj["rationale"],
                             self.judge_score(aid, r, obj["verdict"])))
        df = pd.DataFrame(rows, columns=["assertion_id", "persona_id", "category", "replicate", "verdict", "evidence", "rationale",
                                         "judge_score"])
        from memjudge.judges.rubrics import load_rubric

        df.insert(3, "judge", self.spec)
        df.insert(4, "rubric", load_rubric("support").id)  # as the engine names it
        df["evidence_found"] = df["evidence"].str.len() > 0
        df["error"] = None
        df["cached"] = False
        df["usage"] = None
        df["latency_s"] = None
        df["simulated"] = True
        from memjudge.formats import LABEL_COLUMNS

        return df[LABEL_COLUMNS + ["simulated"]]

    def coverage_labels(self, facts, candidates, replicates: int = 1):
        """Coverage rows (the `memjudge score --rubric coverage` format) for every persona and
        replicate, without the scoring engine; the same answers the engine path gives."""
        import pandas as pd

        shown: dict[str, list[str]] = {}
        for aid, pid in zip(candidates["assertion_id"].astype(str), candidates["persona_id"].astype(str)):
            shown.setdefault(pid, []).append(aid)
        by_p: dict[str, list[tuple[str, str]]] = {}
        for pid, fid, text in zip(facts["persona_id"].astype(str), facts["fact_id"].astype(str), facts["text"]):
            by_p.setdefault(pid, []).append((fid, text))
        from memjudge.judges.rubrics import load_rubric

        rubric = load_rubric("coverage").id
        rows = []
        for pid, fl in by_p.items():
            if pid not in shown:
                continue
            for r in range(replicates):
                for f in self._coverage_answer(pid, fl, shown[pid], r)["facts"]:
                    rows.append((pid, f["fact_id"], f["fact"], f["covered_by"], self.spec, rubric, r, None))
        return pd.DataFrame(rows, columns=["persona_id", "fact_id", "fact_text", "covered_by", "judge", "rubric", "replicate", "error"])

    # -- answers ------------------------------------------------------------------------
    async def generate(self, call: JudgeCall) -> JudgeAnswer:
        from memjudge.formats import rubric_name

        score = None
        if rubric_name(call.rubric) == "coverage" or ("assertion_id" not in call.item and "persona_id" in call.item):
            obj = self._coverage(call)
        else:
            obj = self._support(call)
            score = self.judge_score(str(call.item["assertion_id"]), call.replicate, obj["verdict"])
        text = json.dumps(obj, ensure_ascii=False)
        prompt_chars = len(call.prompt.system) + len(call.prompt.user)
        usage = Usage(input_tokens=prompt_chars // 4, output_tokens=max(1, len(text) // 4))
        return JudgeAnswer(text=text, finish_reason="stop", usage=usage, model_version=f"simulated:{self.profile}",
                           judge_score=score, parsed=obj)

    def _support(self, call: JudgeCall) -> dict[str, Any]:
        return self._support_answer(str(call.item["assertion_id"]), call.replicate)

    def _support_answer(self, aid: str, replicate: int) -> dict[str, Any]:
        verdict, flipped = self.verdict(aid, replicate)
        t = self.truth
        evidence = ""
        if verdict == "supported":
            # A judge that accepts an over-inference quotes the weak cue it read it from.
            evidence = t.evidence.get(aid) or t.cue.get(aid) or ""
            if not isinstance(evidence, str):
                evidence = ""
        note = "; a re-score flip" if flipped else ""
        return {"verdict": verdict, "evidence": evidence, "rationale": f"simulated judge {self.spec} (noise model '{self.profile}'){note}"}

    def _coverage(self, call: JudgeCall) -> dict[str, Any]:
        pid = str(call.item["persona_id"])
        facts = _block(call.prompt.user, "FACTS") or self.truth.facts.get(pid, [])
        shown = _block(call.prompt.user, "ASSERTIONS")
        allowed = [a for a, _ in shown] if shown else self.truth.persona_assertions.get(pid, [])
        return self._coverage_answer(pid, facts, allowed, call.replicate)

    def _coverage_answer(self, pid: str, facts, allowed: list[str], replicate: int) -> dict[str, Any]:
        """Each stating assertion is listed with probability coverage_recall; with probability
        coverage_false a fact also gets one wrong id (of an assertion shown for the persona)."""
        t = self.truth
        allowed_set = set(allowed)
        recall, false = self.noise["coverage_recall"], self.noise["coverage_false"]
        out = []
        for fid, text in facts:
            ids = [a for a in t.stated_by.get(fid, []) if a in allowed_set
                   and _uniform(self.seed, "cover", pid, fid, a, replicate) < recall]
            if allowed and _uniform(self.seed, "cover-false", pid, fid, replicate) < false:
                wrong = allowed[int(_uniform(self.seed, "cover-which", pid, fid, replicate) * len(allowed))]
                if wrong not in ids:
                    ids.append(wrong)
            out.append({"fact_id": fid, "fact": text, "covered_by": ids})
        return {"facts": out}
