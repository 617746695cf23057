"""The page's data: a columnar index over every item (what the filters need, sent once) and
each item's detail (what the open item shows).

The page filters in the browser over the index (a string of one-character codes per column:
100,000 items × 6 verdict columns is 600 kB, and a filter is a loop over typed arrays; see
bench/view.py). Nothing in it is computed here that the analyses compute otherwise: an item's
flip flag is `memjudge.stats.noise.item_flips`, the function `noise.json`'s rates average; a
policy's decision is `memjudge.gate.Policy.admit`, the gate itself; gold is the standing rows
`read_gold` keeps. Disagreement, errors, gold mismatch and changes between runs depend on
which judges are shown, so the page derives them from the verdict codes with the definitions
of spec §11 (docs/view.md).

Codes (one character per item): verdicts ``chr(48 + k)`` for the k-th name in ``verdicts``,
``-`` a null verdict (an error), ``_`` no label row; flips ``1`` / ``0`` / ``.`` (fewer than
two valid replicates); policies ``1`` keeps / ``0`` drops / ``.`` no confidence.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from memjudge.web.runs import Views

CORE = ("assertion_id", "persona_id", "category", "confidence", "text")
LABEL_KEYS = ("assertion_id", "persona_id", "category", "judge", "rubric", "replicate", "run", "column")
NO_ROW, NULL = "_", "-"


def _codes(codes: np.ndarray) -> str:
    """-2 → '_', -1 → '-', k → chr(48 + k)."""
    out = np.where(codes >= 0, codes + 48, np.where(codes == -1, ord(NULL), ord(NO_ROW))).astype(np.uint32)
    return out.tobytes().decode("utf-32-le") if len(out) else ""


def _num(v):
    if v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(f) or math.isinf(f) else f


def display(v):
    """A cell as the page shows it: text, a number, a boolean or null (lists and objects as JSON)."""
    import json

    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (np.generic,)):
        v = v.item()
    if isinstance(v, np.ndarray):
        v = v.tolist()
    if isinstance(v, float) and math.isinf(v):
        return str(v)
    if isinstance(v, (str, bool, int, float)):
        return v
    try:
        return json.dumps(v, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(v)


class Index:
    """The index and the details of one set of views, built once."""

    def __init__(self, v: Views):
        self.v = v
        items = v.items
        self.ids = items["assertion_id"].astype(str).tolist()
        self.position = {a: i for i, a in enumerate(self.ids)}
        self.n = len(self.ids)
        lab = v.labels
        self.item_of_row = lab["assertion_id"].map(self.position).to_numpy(dtype=np.int64)
        verdict_names = sorted(lab["verdict"].dropna().astype(str).unique())
        if v.gold is not None:
            verdict_names = sorted(set(verdict_names) | set(v.gold["verdict"].astype(str)))
        self.verdicts = verdict_names
        self.code_of = {name: k for k, name in enumerate(verdict_names)}
        # an item's label rows: order[start[i]:start[i + 1]], in file order within the item
        self.order = np.argsort(self.item_of_row, kind="stable")
        self.start = np.searchsorted(self.item_of_row[self.order], np.arange(self.n + 1))
        self.column_rank = {c.key: k for k, c in enumerate(v.columns)}
        self._label_lists: dict | None = None
        self._gold_rows: dict | None = None

    # -- the index --------------------------------------------------------------------------
    def columns(self) -> list[dict]:
        from memjudge.stats.noise import item_flips

        lab = self.v.labels
        vcode = lab["verdict"].map(self.code_of).fillna(-1).to_numpy(dtype=np.int64)
        out = []
        for c in self.v.columns:
            mask = (lab["column"] == c.key).to_numpy()
            rows = np.flatnonzero(mask)
            per_rep = []
            for r in c.replicates:
                sel = rows[lab["replicate"].to_numpy()[rows] == r]
                codes = np.full(self.n, -2, dtype=np.int64)
                codes[self.item_of_row[sel]] = vcode[sel]
                per_rep.append(_codes(codes))
            r0 = rows[lab["replicate"].to_numpy()[rows] == c.replicates[0]]
            raw = pd.to_numeric(lab["judge_score"].to_numpy()[r0], errors="coerce").astype(np.float64)
            score: list | None = None  # null when the judge gives no score at all (most judges): less to send
            if np.isfinite(raw).any():
                score = [None] * self.n
                for i, x in zip(self.item_of_row[r0], raw):
                    score[i] = _num(x)
            flips = item_flips(lab[mask])
            flag = np.full(self.n, ord("."), dtype=np.uint32)
            ok = flips["any_flip"].notna().to_numpy()
            pos = flips["assertion_id"].map(self.position).to_numpy(dtype=np.int64)
            flag[pos[ok]] = np.where(flips["any_flip"].to_numpy()[ok] == 1, ord("1"), ord("0"))
            flip = flag.tobytes().decode("utf-32-le")
            out.append({"key": c.key, "run": c.run, "judge": c.judge, "rubric": c.rubric, "replicates": c.replicates,
                        "verdicts": per_rep, "score": score, "flip": flip})
        return out

    def policies(self) -> list[dict]:
        items = self.v.items
        conf = items["confidence"].to_numpy() if "confidence" in items.columns else np.full(self.n, np.nan)
        cats = items["category"].astype(str).tolist()
        out = []
        for p in self.v.policies:
            keeps = []
            for cat, c in zip(cats, conf):
                c = _num(c)
                keeps.append("." if c is None else "1" if p.policy.admit(cat, c) else "0")
            out.append({"key": p.key, "run": p.run, "name": p.name, "kind": p.policy.kind, "file": p.where,
                        "keeps": "".join(keeps)})
        return out

    def decided(self) -> dict | None:
        """A cascade's labels (`memjudge cascade`): per item, the stage whose answer was trusted,
        ``chr(48 + k)`` for the k-th of ``names`` (in cascade order), ``-`` abstained, ``_`` no
        cascade row. None when no labels carry `decided_by`."""
        lab = self.v.labels
        if "decided_by" not in lab.columns:
            return None
        rows = lab[lab["judge"].astype(str).str.startswith("cascade:") & (lab["replicate"] == 0)]
        if rows.empty:
            return None
        names = list(dict.fromkeys(str(rows["judge"].iloc[0]).removeprefix("cascade:").split(">")))
        names += sorted({str(b) for b in rows["decided_by"].dropna()} - set(names))
        code = {n: k for k, n in enumerate(names)}
        out = np.full(self.n, -2, dtype=np.int64)
        pos = rows["assertion_id"].astype(str).map(self.position).to_numpy(dtype=np.int64)
        out[pos] = [code[str(b)] if isinstance(b, str) else -1 for b in rows["decided_by"]]
        return {"names": names, "codes": _codes(out)}

    def gold_codes(self) -> list[str]:
        """Per item, the standing gold verdicts' codes (one per annotator who labelled it)."""
        out = [""] * self.n
        g = self.v.gold
        if g is None:
            return out
        for aid, verdict in zip(g["assertion_id"].astype(str), g["verdict"].astype(str)):
            i = self.position[aid]
            ch = chr(48 + self.code_of[verdict])
            if ch not in out[i]:
                out[i] += ch
        return out

    def record_gold(self, aid: str, verdict: str, row: dict) -> None:
        """A gold row just appended: the standing rows take it (latest per annotator)."""
        g = self.v.gold
        new = pd.DataFrame([{k: row.get(k) for k in ("assertion_id", "verdict", "annotator", "note", "labelled_at")}])
        if g is None:
            self.v.gold = new
        else:
            keep = ~((g["assertion_id"].astype(str) == aid) & (g.get("annotator", pd.Series(None, index=g.index)) == row["annotator"]))
            self.v.gold = pd.concat([g[keep], new], ignore_index=True)
        self._gold_rows = None
        if verdict not in self.code_of:
            self.code_of[verdict] = len(self.verdicts)
            self.verdicts.append(verdict)

    def index(self, with_sources: bool) -> dict:
        items = self.v.items
        personas, pcode = np.unique(items["persona_id"].astype(str).to_numpy(), return_inverse=True)
        categories, ccode = np.unique(items["category"].astype(str).to_numpy(), return_inverse=True)
        conf = items["confidence"].tolist() if "confidence" in items.columns else [None] * self.n
        out = {
            "n": self.n,
            "ids": self.ids,
            "text": items["text"].astype(str).tolist(),
            "personas": personas.tolist(),
            "persona": pcode.tolist(),
            "categories": categories.tolist(),
            "category": ccode.tolist(),
            "confidence": [_num(c) for c in conf],
            "verdicts": self.verdicts,
            "columns": self.columns(),
            "policies": self.policies(),
            "gold": self.gold_codes(),
            "gold_file": self.v.gold_path.name if self.v.gold_path is not None else None,
            "runs": [name for name, _ in self.v.runs],
            "extra_columns": [c for c in items.columns if c not in CORE],
            "decided": self.decided(),
        }
        if with_sources:
            out["sources"] = [self.v.sources.get(p, "") for p in out["personas"]]
        return out

    # -- one item ---------------------------------------------------------------------------
    def _lists(self):
        """Every label and item column as a Python list, made once: a detail is then a few
        list look-ups, not a DataFrame slice (an export makes 10,000 of them)."""
        if self._label_lists is None:
            lab, items = self.v.labels, self.v.items
            self._label_keys = [k for k in lab.columns if k not in LABEL_KEYS]
            self._label_lists = {k: lab[k].tolist() for k in [*self._label_keys, "column", "replicate"]}
            self._item_keys = [c for c in items.columns if c not in CORE]
            self._item_lists = {k: items[k].tolist() for k in [*self._item_keys, "persona_id"]}
        return self._label_lists, self._item_lists

    def detail(self, i: int, with_source: bool = True) -> dict:
        cols, icols = self._lists()
        rows = []
        for r in self.order[self.start[i]:self.start[i + 1]]:
            rows.append({"column": cols["column"][r], "replicate": int(cols["replicate"][r]),
                         **{k: display(cols[k][r]) for k in self._label_keys}})
        rows.sort(key=lambda d: (self.column_rank[d["column"]], d["replicate"]))
        gold = []
        g = self.v.gold
        if g is not None:
            if self._gold_rows is None:
                self._gold_rows = {}
                for gr in g.to_dict("records"):
                    self._gold_rows.setdefault(str(gr["assertion_id"]), []).append(
                        {k: display(gr.get(k)) for k in ("verdict", "annotator", "note", "labelled_at")})
            gold = self._gold_rows.get(self.ids[i], [])
        out = {"i": i, "assertion_id": self.ids[i], "extra": {c: display(icols[c][i]) for c in self._item_keys},
               "labels": rows, "gold": gold}
        if with_source:
            out["source"] = self.v.sources.get(str(icols["persona_id"][i]), "")
        return out

    def source_matches(self, q: str) -> list[int]:
        """The personas (their codes in the index) whose source contains q, case-insensitively."""
        q = q.casefold()
        personas = sorted(set(self.v.items["persona_id"].astype(str)))
        return [k for k, p in enumerate(personas) if q in self.v.sources.get(p, "").casefold()]


__all__ = ["Index", "display"]
