"""`memjudge report`: a run directory's JSON turned into Markdown, HTML and figures.

The report never recomputes a statistic. Every number it prints or draws is read from the
files the analysis commands wrote with `--out RUN_DIR`:

- `config.json`, `labels.jsonl`, `coverage.jsonl` (`memjudge score` / `memjudge simulate`),
- `noise.json` and `agreement.json` (`memjudge noise` / `memjudge agreement`),
- `compare.json`, `sweep.json`, `calibration.json` (`memjudge compare`),
- `robustness.json` (`memjudge robustness`).

Any of them may be absent: the report covers the parts present and says which are missing
and which command writes them. The readers below accept the documented formats and are
lenient about optional keys (a missing interval is drawn without error bars, a coefficient
may be a number or `{"value", "ci"}`), because those commands evolve independently.

Layout: the document is first built as a list of blocks (heading, paragraph, table, figure,
note) and then rendered twice, to Markdown and to self-contained HTML (figures inlined as
base64 PNG, every string from data escaped).
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Iterable, Sequence

import pandas as pd

from memjudge.errors import InputError, UsageError
from memjudge.io import decode_file

FORMATS = ("md", "html")

# file name -> (part name, the command that writes it)
PARTS: dict[str, tuple[str, str]] = {
    "config.json": ("configuration", "memjudge score / memjudge simulate"),
    "labels.jsonl": ("labels", "memjudge score --out RUN_DIR (or memjudge simulate --out RUN_DIR)"),
    "coverage.jsonl": ("coverage", "memjudge score --rubric coverage --out RUN_DIR (or memjudge simulate)"),
    "noise.json": ("noise", "memjudge noise LABELS --out RUN_DIR"),
    "agreement.json": ("agreement", "memjudge agreement LABELS --out RUN_DIR"),
    "compare.json": ("compare", "memjudge compare CANDIDATES --labels LABELS --out RUN_DIR"),
    "compare_inputs.json": ("compare_inputs", "memjudge compare ... --out RUN_DIR"),
    "simulate.json": ("simulation", "memjudge simulate --out DIR"),
    "summary.json": ("scoring", "memjudge score --out RUN_DIR"),
    "local_judge.json": ("judge_quality", "memjudge demo"),
    "demo.json": ("demo", "memjudge demo"),
    "sweep.json": ("sweep", "memjudge compare ... --out RUN_DIR"),
    "calibration.json": ("calibration", "memjudge compare ... --out RUN_DIR"),
    "robustness.json": ("robustness", "memjudge robustness CANDIDATES --labels LABELS... --out RUN_DIR"),
}
# Parts that describe a run rather than analyse it: not listed as missing when absent.
QUIET_PARTS = {"configuration", "compare_inputs", "simulation", "scoring", "judge_quality", "demo"}
_POLICY_NAMES = {"write_all": "Write-all", "global": "Global threshold", "targeted": "Targeted",
                 "per_category": "Per-category thresholds"}
_METRIC_NAMES = {"faithfulness": "faithfulness", "retention": "retention", "coverage": "estimated coverage"}


@dataclass
class ReportResult:
    """What `report()` wrote and which parts of the run it found."""

    run_dir: Path
    markdown: Path | None
    html: Path | None
    figures: list[Path]
    present: list[str]
    absent: list[str]
    notes: list[str] = field(default_factory=list)

    @property
    def written(self) -> list[Path]:
        return [p for p in (self.markdown, self.html) if p is not None] + list(self.figures)

    def to_dict(self) -> dict:
        return {"run_dir": str(self.run_dir), "markdown": _s(self.markdown), "html": _s(self.html),
                "figures": [str(p) for p in self.figures], "present": self.present, "absent": self.absent,
                "notes": self.notes}


def _s(p):
    return None if p is None else str(p)


# ---------------------------------------------------------------------------------------
# reading the run directory


@dataclass
class Run:
    path: Path
    data: dict[str, Any]  # part name -> parsed JSON (dict) or DataFrame for .jsonl parts
    files: dict[str, Path]

    def get(self, part: str):
        return self.data.get(part)

    @cached_property
    def simulated_truth(self) -> bool:
        """Labels from `memjudge simulate` (judge "gold") are the corpus's construction truth: the
        run directory is the simulated corpus, or the compared labels came from one. Looked up
        once: every "gold" shown anywhere in the report asks."""
        cfg = self.data.get("configuration") or {}
        if str(cfg.get("command", "")) == "simulate" or (self.data.get("simulation") or {}).get("simulated"):
            return True
        dirs = {self.path}
        labels = (self.data.get("compare_inputs") or {}).get("labels") or []
        for p in labels if isinstance(labels, list) else [labels]:
            # a relative path was relative to where compare ran: try there and the run directory
            dirs |= {Path(str(p)).parent, (self.path / str(p)).parent}
        return any((d / "truth.jsonl").is_file() or _simulated_marker(d / "simulate.json") for d in dirs)


def _simulated_marker(path: Path) -> bool:
    try:
        return bool(json.loads(path.read_text(encoding="utf-8")).get("simulated"))
    except (OSError, ValueError, AttributeError, RecursionError):
        return False


def _read_json(path: Path) -> dict:
    try:
        text = decode_file(path)  # empty or not UTF-8 -> InputError, as for every other input
    except OSError as e:
        raise InputError(path, f"cannot read ({e.strerror})") from None
    if not text.strip():
        raise InputError(path, "file is empty")
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(path, f"not valid JSON ({e.msg})", e.lineno) from None
    except RecursionError:
        raise InputError(path, "JSON nested too deeply") from None
    if not isinstance(obj, dict):
        raise InputError(path, f"expected a JSON object, found {type(obj).__name__}")
    return obj


def load_run(run_dir) -> Run:
    """Parse every known file of a run directory; a malformed one is an `InputError` naming it."""
    path = Path(run_dir)
    if not path.exists():
        raise InputError(path, "no such run directory")
    if not path.is_dir():
        raise InputError(path, "is not a directory (expected a run directory)")
    data: dict[str, Any] = {}
    files: dict[str, Path] = {}
    for name, (part, _) in PARTS.items():
        f = path / name
        if not f.is_file():
            continue
        files[part] = f
        if name.endswith(".json"):
            data[part] = _read_json(f)
        elif name == "labels.jsonl":
            from memjudge.io import read_labels

            data[part] = read_labels(f)
        else:
            from memjudge.io import read_coverage

            data[part] = read_coverage(f)
    if not data:
        raise InputError(path, "no memjudge results found (expected any of " + ", ".join(PARTS) + ")")
    _validate(data, files)
    return Run(path, data, files)


def _need(cond: bool, path: Path, what: str) -> None:
    if not cond:
        raise InputError(path, what)


def _validate(data: dict, files: dict) -> None:
    """The few keys without which a part cannot be reported at all."""
    if "noise" in data:
        j = data["noise"].get("judges")
        _need(isinstance(j, list) and all(isinstance(x, dict) and "judge" in x for x in j), files["noise"],
              "'judges' must be a list of objects with a 'judge' key")
    if "agreement" in data:
        p = data["agreement"].get("pairs", [])
        _need(isinstance(p, list) and all(isinstance(x, dict) and "a" in x and "b" in x for x in p),
              files["agreement"], "'pairs' must be a list of objects with 'a' and 'b'")
    if "compare" in data:
        c = data["compare"]
        _need(isinstance(c.get("policies"), dict), files["compare"], "'policies' must be an object keyed by policy")
        for name, pol in c["policies"].items():
            _need(isinstance(pol, dict) and isinstance(pol.get("faithfulness"), dict), files["compare"],
                  f"policy {name!r} has no 'faithfulness' {{mean, sd}}")
        _need(isinstance(c.get("folds_detail", []), list), files["compare"], "'folds_detail' must be a list")
    if "robustness" in data:
        rob = data["robustness"]
        j = rob.get("units", rob.get("judges", []))
        _need(isinstance(j, (list, dict)), files["robustness"], "'units' must be a list of objects")


# ---------------------------------------------------------------------------------------
# lenient accessors


def num(x) -> float | None:
    """A finite number, or None (for null, NaN, strings, booleans)."""
    if isinstance(x, dict):
        for k in ("value", "estimate", "mean", "rate"):
            if k in x:
                return num(x[k])
        return None
    if isinstance(x, bool) or x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def interval(x) -> tuple[float | None, float | None]:
    """[lo, hi], {"lo", "hi"}, {"ci": [...]} or {"value", "ci"} -> (lo, hi)."""
    if isinstance(x, dict):
        if "ci" in x:
            return interval(x["ci"])
        if "lo" in x or "hi" in x:
            return num(x.get("lo")), num(x.get("hi"))
        return None, None
    if isinstance(x, (list, tuple)) and len(x) == 2:
        return num(x[0]), num(x[1])
    return None, None


def _first(d: dict, keys: Iterable[str], default=None):
    for k in keys:
        if isinstance(d, dict) and k in d and d[k] is not None:
            return d[k]
    return default


def _stat(entry, key: str = "mean") -> float | None:
    """One number of a {mean, sd, lo, hi, ...} entry (a policy's metric, a paired difference);
    None when the entry is not an object or the number is missing."""
    return num(entry.get(key)) if isinstance(entry, dict) else None


def _records(obj, key: str) -> list[dict]:
    """A list of objects, or an object keyed by `key`'s value, as a list of dicts with `key`."""
    if isinstance(obj, list):
        return [r for r in obj if isinstance(r, dict)]
    if isinstance(obj, dict):
        out = []
        for k, v in obj.items():
            if isinstance(v, dict):
                out.append({key: k, **v})
            else:
                out.append({key: k, "value": v})
        return out
    return []


def _gated(run: Run) -> list[str]:
    for part in ("compare", "robustness", "sweep"):
        g = (run.get(part) or {}).get("gate")
        if isinstance(g, list):
            return [str(x) for x in g]
        if isinstance(g, str) and g and g != "auto":
            return [x.strip() for x in g.split(",") if x.strip()]
    return []


def is_simulated(judge: str) -> bool:
    return str(judge).startswith("sim:")


def judge_label(judge: str, run: Run | None = None) -> str:
    """A judge's name as shown, marked when its labels are simulated."""
    judge = str(judge)
    if is_simulated(judge):
        return f"{judge} (simulated)"
    if judge == "gold" and run is not None and run.simulated_truth:
        return "gold (simulated truth)"
    return judge


# ---------------------------------------------------------------------------------------
# tidy frames (JSON -> the figures' inputs)


def robustness_units(run: Run) -> list[dict]:
    """robustness.json's units (one per judge, or per judge × replicate), normalised:
    judge, replicate, label, primary (the judge's first unit), categories [{category, rate, lo,
    hi, n}], lowest, gated, p_gated_lowest, table (compare.json's write_all/policies/paired)."""
    rob = run.get("robustness") or {}
    raw = rob.get("units") if rob.get("units") is not None else rob.get("judges", [])
    units = []
    for u in _records(raw, "judge"):
        cats = []
        by = _first(u, ("categories", "support_by_category", "by_category", "support", "category_rates"), [])
        for c in _records(by, "category"):
            lo, hi = interval(_first(c, ("ci", "support_rate_ci", "rate_ci"), c))
            cats.append({"category": str(c.get("category")), "lo": lo, "hi": hi,
                         "rate": num(_first(c, ("support_rate", "rate", "value", "support"))),
                         "n": num(_first(c, ("valid", "n", "items", "count")))})
        g = u.get("gated")
        table = _first(u, ("table", "compare", "table1", "table_1", "comparison"), {})
        units.append({"judge": str(u.get("judge")), "replicate": u.get("replicate"), "categories": cats,
                      "lowest": u.get("lowest_category") or u.get("lowest"),
                      "gated": [str(x) for x in g] if isinstance(g, list) else [str(g)] if isinstance(g, str) else None,
                      "p_gated_lowest": num(_first(u, ("p_gated_lowest", "prob_gated_lowest", "p_lowest"))),
                      "table": table if isinstance(table, dict) else {}})
    per_judge: dict[str, int] = {}
    for u in units:
        per_judge[u["judge"]] = per_judge.get(u["judge"], 0) + 1
    seen = set()
    for u in units:
        several = per_judge[u["judge"]] > 1 and u["replicate"] is not None
        u["label"] = judge_label(u["judge"], run) + (f", replicate {u['replicate']}" if several else "")
        u["primary"] = u["judge"] not in seen
        seen.add(u["judge"])
    return units


def support_rates(run: Run, primary_only: bool = True) -> pd.DataFrame:
    """Per judge (each judge's first unit) and category: rate, lo, hi, n from robustness.json."""
    rows = []
    for u in robustness_units(run):
        if primary_only and not u["primary"]:
            continue
        for c in u["categories"]:
            rows.append({"judge": judge_label(u["judge"], run) if primary_only else u["label"],
                         "raw_judge": u["judge"], **c})
    return pd.DataFrame(rows, columns=["judge", "raw_judge", "category", "rate", "lo", "hi", "n"]).astype(
        {"rate": float, "lo": float, "hi": float, "n": float})


def sweep_frame(run: Run, policy: str = "global") -> pd.DataFrame:
    """One row per candidate threshold of `policy`'s full-sample sweep (sweep.json)."""
    sw = run.get("sweep") or {}
    keys = ("global", "points", "sweep", "thresholds", "curve") if policy == "global" else (policy,)
    pts = _first(sw, keys, [])
    if isinstance(pts, dict) and all(isinstance(v, list) for v in pts.values()):  # columnar
        pts = pd.DataFrame(pts).to_dict("records")
    rows = [{"threshold": num(p.get("threshold")), "faithfulness": num(p.get("faithfulness")),
             "retention": num(p.get("retention")), "coverage": num(p.get("coverage"))}
            for p in (pts if isinstance(pts, list) else []) if isinstance(p, dict)]
    df = pd.DataFrame(rows, columns=["threshold", "faithfulness", "retention", "coverage"]).astype(float)
    return df[df["faithfulness"].notna()]


def policy_points(run: Run) -> pd.DataFrame:
    """Write-all (full sample) and each fitted policy (held-out fold means ± SD) from compare.json;
    when there is no compare.json, the fitted points stored with the sweep (full sample)."""
    cmp_ = run.get("compare")
    rows = []
    if cmp_:
        wa = cmp_.get("write_all") or {}
        if num(wa.get("faithfulness")) is not None:
            rows.append({"label": "Write-all (full sample)", "policy": "write_all", "kind": "full",
                         **{m: num(wa.get(m)) for m in ("faithfulness", "retention", "coverage")}})
        for name, pol in cmp_.get("policies", {}).items():
            if name == "write_all":
                continue
            row = {"label": f"{_POLICY_NAMES.get(name, name)} (held-out mean ± SD)", "policy": name, "kind": "heldout"}
            for m in ("faithfulness", "retention", "coverage"):
                row[m], row[f"{m}_sd"] = _stat(pol.get(m)), _stat(pol.get(m), "sd")
            rows.append(row)
    else:
        fitted = (run.get("sweep") or {}).get("fitted") or {}
        for f in _records(fitted, "policy"):
            rows.append({"label": f"{_POLICY_NAMES.get(f['policy'], f['policy'])} (fitted, full sample)",
                         "policy": f["policy"], "kind": "full",
                         **{m: num(f.get(m)) for m in ("faithfulness", "retention", "coverage")}})
    cols = ["label", "policy", "kind", "faithfulness", "retention", "coverage", "faithfulness_sd", "retention_sd",
            "coverage_sd"]
    return pd.DataFrame(rows, columns=cols)


def calibration_frame(run: Run) -> pd.DataFrame:
    cal = run.get("calibration") or {}
    rows = []
    raw = _first(cal, ("bins", "categories", "by_category"), [])
    recs = []
    if isinstance(raw, dict):  # {CAT: [bins]} or {CAT: {"bins": [...]}}
        for cat, v in raw.items():
            bins = v.get("bins", []) if isinstance(v, dict) else v
            recs += [{"category": cat, **b} for b in bins if isinstance(b, dict)]
    elif isinstance(raw, list):
        for r in raw:
            if isinstance(r, dict) and isinstance(r.get("bins"), list):  # [{category, ..., bins: [...]}]
                recs += [{**b, "category": r.get("category")} for b in r["bins"] if isinstance(b, dict)]
            elif isinstance(r, dict):
                recs.append(r)
    for b in recs:
        lo = num(_first(b, ("conf_lo", "lo", "bin_lo", "low", "confidence_lo")))
        hi = num(_first(b, ("conf_hi", "hi", "bin_hi", "high", "confidence_hi")))
        edges = b.get("bin") or b.get("edges")
        if (lo is None or hi is None) and isinstance(edges, (list, tuple)) and len(edges) == 2:
            lo, hi = num(edges[0]), num(edges[1])
        clo, chi = interval(_first(b, ("ci", "support_rate_ci", "rate_ci"), {}))
        if clo is None and hi is not None:
            clo, chi = num(b.get("ci_lo")), num(b.get("ci_hi"))
        rows.append({"category": str(b.get("category")), "lo": lo, "hi": hi,
                     "n": num(_first(b, ("valid", "n", "count", "items"))),
                     "rate": num(_first(b, ("support_rate", "rate", "support"))), "ci_lo": clo, "ci_hi": chi})
    cols = ["category", "lo", "hi", "n", "rate", "ci_lo", "ci_hi"]
    df = pd.DataFrame(rows, columns=cols)
    return df.astype({c: float for c in cols[1:]}) if not df.empty else df


def flip_frame(run: Run) -> pd.DataFrame:
    rows = []
    judges = (run.get("noise") or {}).get("judges", [])
    several = {n for n in {j["judge"] for j in judges} if sum(j["judge"] == n for j in judges) > 1}
    for j in judges:
        # the rubric is named only where one judge was measured under several
        name = judge_label(j["judge"], run) + (f" [{j.get('rubric')}]" if j["judge"] in several else "")
        lo, hi = interval(j.get("flip_rate_ci"))
        rows.append({"judge": name, "category": "all", "flip_rate": num(j.get("flip_rate")), "lo": lo, "hi": hi,
                     "items": num(j.get("items"))})
        for c in _records(j.get("by_category") or {}, "category"):
            lo, hi = interval(c.get("flip_rate_ci"))
            rows.append({"judge": name, "category": str(c["category"]), "flip_rate": num(c.get("flip_rate")),
                         "lo": lo, "hi": hi, "items": num(c.get("items"))})
    df = pd.DataFrame(rows, columns=["judge", "category", "flip_rate", "lo", "hi", "items"])
    return df.astype({"flip_rate": float, "lo": float, "hi": float, "items": float})


def pair_frame(run: Run) -> pd.DataFrame:
    rows = []
    for p in (run.get("agreement") or {}).get("pairs", []):
        rows.append({"a": judge_label(p["a"], run), "b": judge_label(p["b"], run), "n": num(p.get("n")),
                     "cohen_kappa": num(p.get("cohen_kappa")), "gwet_ac1": num(p.get("gwet_ac1"))})
    return pd.DataFrame(rows, columns=["a", "b", "n", "cohen_kappa", "gwet_ac1"])


def fold_diff_frame(run: Run, a: str = "targeted", b: str = "global") -> pd.DataFrame:
    """Per held-out fold, `a` − `b` for each metric (the pairs the paired comparison summarises)."""
    detail = (run.get("compare") or {}).get("folds_detail") or []
    df = pd.DataFrame([d for d in detail if isinstance(d, dict)])
    if df.empty or not {"repeat", "fold", "policy"} <= set(df.columns):
        return pd.DataFrame(columns=["metric", "repeat", "fold", "difference"])
    rows = []
    for m in ("faithfulness", "retention", "coverage"):
        if m not in df.columns:
            continue
        wide = df.pivot_table(index=["repeat", "fold"], columns="policy", values=m, aggfunc="first", dropna=False)
        if a not in wide.columns or b not in wide.columns:
            continue
        d = (pd.to_numeric(wide[a], errors="coerce") - pd.to_numeric(wide[b], errors="coerce")).dropna()
        rows += [{"metric": m, "repeat": r, "fold": f, "difference": float(v)} for (r, f), v in d.items()]
    return pd.DataFrame(rows, columns=["metric", "repeat", "fold", "difference"])


# ---------------------------------------------------------------------------------------
# number formatting (percent with two decimals, as the paper)


def pct(x, digits: int = 2) -> str:
    v = num(x)
    return "n/a" if v is None else f"{100 * v:.{digits}f}"


def pts(x, digits: int = 2) -> str:
    """A change in percentage points, always signed."""
    v = num(x)
    return "n/a" if v is None else f"{100 * v:+.{digits}f}"


def coef(x, digits: int = 3) -> str:
    v = num(x)
    return "n/a" if v is None else f"{v:.{digits}f}"


def _with_ci(fmt, x, ci) -> str:
    """`fmt(x)`, followed by the interval in brackets when both bounds are numbers."""
    lo, hi = interval(ci)
    return fmt(x) + (f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None and hi is not None else "")


def pct_ci(x, ci) -> str:
    return _with_ci(pct, x, ci)


def coef_ci(x, ci) -> str:
    return _with_ci(coef, x, ci)


def paired_ci(p) -> str:
    """A paired difference {mean, lo, hi} in signed points, its interval in brackets."""
    if _stat(p) is None:
        return "n/a"
    return _with_ci(pts, p["mean"], (p.get("lo"), p.get("hi")))


def _pvalue(x) -> str:
    v = num(x)
    return "n/a" if v is None else "< 0.001" if v < 0.001 else f"{v:.3f}"


def _int(x) -> str:
    v = num(x)
    return "n/a" if v is None else f"{int(round(v)):,}"


# ---------------------------------------------------------------------------------------
# the document model


@dataclass
class Heading:
    text: str
    level: int = 2


@dataclass
class Para:
    text: str


@dataclass
class Note:
    text: str


@dataclass
class Bullets:
    items: list[str]


@dataclass
class Table:
    caption: str
    header: list[str]
    rows: list[list[str]]
    notes: str = ""


@dataclass
class FigureBlock:
    path: Path
    caption: str


def _config_line(c: dict, run: Run | None = None) -> str:
    bits = []
    if c.get("judge") is not None:
        bits.append(f"judge {judge_label(c['judge'], run)}")
    if num(c.get("floor")) is not None:
        bits.append(f"retention floor {pct(c['floor'], 0)}%")
    if c.get("gate") is not None:
        g = c["gate"]
        bits.append("gate auto (the lowest-support category, chosen inside each fit fold)" if g == "auto" else
                    "gated " + (", ".join(map(str, g)) if isinstance(g, list) else str(g)))
    if c.get("repeats") is not None and c.get("folds") is not None:
        bits.append(f"{c['repeats']} × {c['folds']}-fold persona-grouped cross-validation")
    if c.get("seed") is not None:
        bits.append(f"seed {c['seed']}")
    return "; ".join(bits)


def _direction(v: float | None, higher="higher", lower="lower") -> str:
    if v is None:
        return "not comparable"
    return higher if v > 0 else lower if v < 0 else "equal"


def findings(run: Run) -> list[str]:
    """Plain sentences templated from the JSON; their wording follows the sign of each result."""
    out: list[str] = []
    cmp_ = run.get("compare") or {}
    primary = cmp_.get("judge")
    # lowest-support category
    rates = support_rates(run)
    if not rates.empty:
        raw = list(dict.fromkeys(rates["raw_judge"]))
        judge = primary if primary in raw else raw[0]
        sub = rates[rates["raw_judge"] == judge].dropna(subset=["rate"]).sort_values("rate", kind="stable")
        unit = next(u for u in robustness_units(run) if u["judge"] == judge and u["primary"])
        lowest = unit["lowest"]
        if lowest not in set(sub["category"]) and not sub.empty:
            lowest = sub["category"].iloc[0]
        if lowest is not None and not sub.empty:
            low = sub[sub["category"] == lowest].iloc[0]
            rest = sub[sub["category"] != lowest]
            s = (f"Under {judge_label(judge, run)}, the lowest-support category is {lowest} at {pct(low['rate'])}%"
                 + (f" (95% CI {pct(low['lo'])}–{pct(low['hi'])})" if pd.notna(low["lo"]) and pd.notna(low["hi"]) else ""))
            if not rest.empty:
                nxt = rest.iloc[0]
                s += f"; the next lowest is {nxt['category']} at {pct(nxt['rate'])}%"
            s += "."
            gated = unit["gated"] or _gated(run)
            pg = unit["p_gated_lowest"]
            if gated:
                gname = ", ".join(gated)
                if lowest in gated:
                    s += f" That is the gated category ({gname})"
                else:
                    s += f" The gated category ({gname}) is not the lowest under this judge"
                s += (f"; the bootstrap probability that {gname} is the lowest is {coef(pg, 3)}." if pg is not None
                      else ".")
            summ = (run.get("robustness") or {}).get("summary") or {}
            lg = summ.get("lowest_is_gated") if isinstance(summ, dict) else None
            nj = num(summ.get("judges")) if isinstance(summ, dict) else None
            if isinstance(lg, dict) and num(lg.get("judges")) is not None and nj and nj > 1:
                k = int(num(lg["judges"]))
                s += (f" The lowest-support category is the gated one under {'every judge' if k == nj else 'none of the judges' if k == 0 else f'{k} of {int(nj)} judges'}"
                      + (f" ({k} of {int(nj)})" if k == nj else "") + ".")
            out.append(s)
    # targeted vs global
    paired = cmp_.get("paired") or {}
    pols = cmp_.get("policies") or {}
    if paired and "targeted" in pols and "global" in pols:
        n_folds = _n_folds(cmp_)
        parts = []
        for m in ("faithfulness", "coverage", "retention"):
            p = paired.get(m)
            mean = _stat(p)
            if mean is None:
                continue
            # the sentence speaks at the table's precision: a difference that rounds to 0.00 points is "equal"
            d = _direction(round(100 * mean, 2))
            amount = f"{abs(100 * mean):.2f} points" if d != "equal" else ""
            lo, hi = num(p.get("lo")), num(p.get("hi"))
            ci = ""
            if lo is not None and hi is not None:
                excl = "excludes" if (lo > 0 or hi < 0) else "includes"
                ci = f" (95% paired interval {pts(lo)} to {pts(hi)}, which {excl} zero"
                ss = num(p.get("same_sign"))
                if ss is not None and n_folds:
                    ci += f"; same sign in {int(ss)} of {n_folds} folds"
                ci += ")"
            if d == "equal":
                parts.append(f"equal on {_METRIC_NAMES[m]}{'' if mean == 0 else ' to two decimals'}{ci}")
            else:
                parts.append(f"{d} on {_METRIC_NAMES[m]} by {amount}{ci}")
        if parts:
            tf, gf = _stat(pols["targeted"].get("faithfulness")), _stat(pols["global"].get("faithfulness"))
            out.append(f"On held-out personas ({_config_line(cmp_, run)}), the targeted policy reaches {pct(tf)}% "
                       f"faithfulness against {pct(gf)}% for the global threshold. Targeted minus global: "
                       + "; ".join(parts) + ".")
    # ordering across judges
    hold = _ordering_summary(run)
    if hold:
        out.append(hold)
    # the embedded judge against the corpus's truth (memjudge demo)
    q = run.get("judge_quality") or {}
    if num(q.get("auc")) is not None:
        s = (f"The embedded judge {judge_label(q.get('judge', 'local'), run)} separates supported from unsupported "
             f"assertions with AUC {coef(q['auc'])} against the gold labels ({_int(q.get('n'))} items)")
        if num(q.get("balanced_accuracy")) is not None:
            s += f"; balanced accuracy {coef(q['balanced_accuracy'])}"
            if num(q.get("threshold")) is not None:
                s += f" at its calibrated threshold {q['threshold']:+.2f}"
        out.append(s + ".")
    # judge noise
    for j in (run.get("noise") or {}).get("judges", []):
        fr = num(j.get("flip_rate"))
        if fr is None:
            out.append(f"{judge_label(j['judge'], run)}: no flip rate could be computed "
                       f"(no item has two valid replicates).")
            continue
        lo, hi = interval(j.get("flip_rate_ci"))
        verb = "does not flip any of its verdicts" if fr == 0 else f"flips {pct(fr)}% of its verdicts"
        s = f"{judge_label(j['judge'], run)} {verb} when re-scoring identical inputs"
        if lo is not None and hi is not None:
            s += f" (95% CI {pct(lo)}–{pct(hi)}"
            s += f"; {_int(j.get('items'))} items)" if j.get("items") is not None else ")"
        out.append(s + ".")
    # agreement across judges
    agr = run.get("agreement") or {}
    alpha = num(agr.get("krippendorff_alpha"))
    if alpha is not None:
        lo, hi = interval(agr.get("krippendorff_alpha"))
        n_j = len(set(map(str, agr.get("judges") or [])) | {str(p.get(k)) for p in agr.get("pairs", []) for k in "ab"})
        out.append(f"Across {n_j} judges, Krippendorff's α is {coef(alpha)}"
                   + (f" (95% CI {coef(lo)}–{coef(hi)})" if lo is not None and hi is not None else "") + ".")
    gold = [g for g in agr.get("gold") or [] if isinstance(g, dict) and num(g.get("accuracy")) is not None]
    if gold:
        out.append("Against the gold labels: " + "; ".join(
            f"{judge_label(g.get('judge'), run)} is right on {pct(g['accuracy'])}% of {_int(g.get('n'))} items "
            f"(κ {coef(g.get('cohen_kappa'))}, recall of unsupported {coef(g.get('unsupported_recall'))})"
            for g in gold) + ".")
    return out


def _n_folds(c: dict) -> int | None:
    r, k = num(c.get("repeats")), num(c.get("folds"))
    return int(r * k) if r is not None and k is not None else None


def unit_holds(unit: dict) -> dict[str, bool | None]:
    """targeted ≥ global on the held-out fold mean of faithfulness and of coverage (as
    robustness.json's summary counts it); None when a metric was not measured."""
    t = unit["table"] or {}
    pols = t.get("policies") or {}
    out: dict[str, bool | None] = {}
    for m in ("faithfulness", "coverage"):
        tv, gv = _stat((pols.get("targeted") or {}).get(m)), _stat((pols.get("global") or {}).get(m))
        if tv is not None and gv is not None:
            out[m] = tv >= gv
        else:
            v = _stat((t.get("paired") or {}).get(m))
            out[m] = None if v is None else v >= 0
    return out


def _ordering_summary(run: Run) -> str | None:
    rob = run.get("robustness")
    if not rob:
        return None
    summ = rob.get("summary") if isinstance(rob.get("summary"), dict) else {}
    units = robustness_units(run)
    prim = [u for u in units if u["primary"]]
    parts = []
    for m in ("faithfulness", "coverage"):
        sm = summ.get(m)
        failing = [judge_label(u["judge"], run) for u in prim if unit_holds(u)[m] is False]
        ku = nu = None
        if isinstance(sm, dict) and num(sm.get("judges")) is not None:
            k = num(sm["judges"])
            n = num(sm.get("judges_with_coverage")) if m == "coverage" and "judges_with_coverage" in sm \
                else num(summ.get("judges"))
            ku = num(sm.get("units"))
            nu = num(sm.get("units_with_coverage")) if m == "coverage" and "units_with_coverage" in sm \
                else num(summ.get("units"))
        else:
            known = [unit_holds(u)[m] for u in prim if unit_holds(u)[m] is not None]
            k, n = sum(known), len(known)
        if not n:
            continue
        k, n = int(k), int(n)
        if n == 1:
            only = judge_label(prim[0]["judge"], run) if len(prim) == 1 else "the one judge"
            phrase = f"{'holds' if k else 'does not hold'} on {_METRIC_NAMES[m]} under the only judge ({only})"
        elif k == n:
            phrase = f"holds on {_METRIC_NAMES[m]} under every judge ({k} of {n})"
        elif k == 0:
            phrase = f"holds on {_METRIC_NAMES[m]} under none of the {n} judges"
        else:
            phrase = f"holds on {_METRIC_NAMES[m]} under {k} of {n} judges" + \
                     (f" (not under {', '.join(failing)})" if failing else "")
        if ku is not None and nu is not None and nu > n:
            phrase += f" and in {int(ku)} of {int(nu)} judge × replicate units"
        parts.append(phrase)
    if not parts:
        return None
    return "The ordering targeted ≥ global " + "; ".join(parts) + "."


# ---------------------------------------------------------------------------------------
# tables


def table1(c: dict, judge_note: str = "", number: str = "1", run: Run | None = None) -> Table:
    """Table 1 as the paper lays it out: fold mean ± SD in percent, change against write-all in
    points, and the paired targeted − global row with its 95% interval in brackets."""
    header = ["Policy", "Faithfulness (%)", "Retention (%)", "Est. coverage (%)", "Δ faith. vs write-all (pts)",
              "Δ coverage vs write-all (pts)"]
    rows = []
    wa = c.get("write_all") or {}
    rows.append(["Write-all (full sample)", pct(wa.get("faithfulness")), pct(wa.get("retention")),
                 pct(wa.get("coverage")), "—", "—"])
    pols = c.get("policies") or {}
    gate = c.get("gate")
    gate_s = ", ".join(map(str, gate)) if isinstance(gate, list) else (str(gate) if gate else "")

    def ms(pol, m):
        sd = _stat(pol.get(m), "sd")
        return pct(_stat(pol.get(m))) + (f" ± {pct(sd)}" if sd is not None else "")

    for name in [n for n in ("global", "targeted", "per_category") if n in pols] + \
                [n for n in pols if n not in ("write_all", "global", "targeted", "per_category")]:
        pol = pols[name]
        label = _POLICY_NAMES.get(name, name)
        if name == "targeted" and gate_s:
            label = f"Targeted ({gate_s})"
        rows.append([label, ms(pol, "faithfulness"), ms(pol, "retention"), ms(pol, "coverage"),
                     pts(pol.get("delta_faithfulness")), pts(pol.get("delta_coverage"))])
    paired = c.get("paired") or {}
    if paired:
        rows.append(["Targeted − global (paired)", paired_ci(paired.get("faithfulness")),
                     paired_ci(paired.get("retention")), paired_ci(paired.get("coverage")), "", ""])
    nb = []
    n_folds = _n_folds(c)
    for m in ("faithfulness", "retention", "coverage"):
        p = paired.get(m) if isinstance(paired.get(m), dict) else None
        if p and num(p.get("nb_lo")) is not None and num(p.get("nb_hi")) is not None:
            s = f"{_METRIC_NAMES[m]} {pts(p['nb_lo'])} to {pts(p['nb_hi'])}"
            if num(p.get("same_sign")) is not None and n_folds:
                s += f" (same sign in {int(num(p['same_sign']))}/{n_folds} folds)"
            nb.append(s)
    notes = ("Entries are fold means ± standard deviations over held-out folds, in percent; Δ columns are changes "
             "of the fold mean against write-all in points. Write-all is the fixed full-sample reference. Brackets in the final row "
             "are paired 95% intervals (2.5–97.5 percentiles of per-fold differences). Post-threshold coverage "
             "is estimated.")
    if nb:
        notes += " Nadeau–Bengio corrected 95% intervals: " + "; ".join(nb) + "."
    if c.get("write_all") is not None and num((c.get("write_all") or {}).get("coverage")) is None:
        notes += " No coverage file was given, so coverage is n/a."
    cap = f"Table {number}. Held-out retention policies{judge_note}. Data: compare.json — {_config_line(c, run)}."
    return Table(cap, header, rows, notes)


def _noise_tables(run: Run) -> list[Table]:
    noise = run.get("noise") or {}
    judges = noise.get("judges", [])
    rows = [[judge_label(j["judge"], run), str(j.get("rubric", "")), _int(j.get("items")), _int(j.get("replicates")),
             _int(j.get("excluded_null")), pct_ci(j.get("flip_rate"), j.get("flip_rate_ci")),
             pct_ci(j.get("any_flip_rate"), j.get("any_flip_rate_ci"))] for j in judges]
    out = [Table("Judge re-score noise. Data: noise.json (labels with ≥ 2 valid replicates per item).",
                 ["Judge", "Rubric", "Items", "Replicates", "Excluded null", "Flip rate (%) [95% CI]",
                  "Items with any flip (%) [95% CI]"], rows,
                 "Flip rate: probability that two replicates of an item differ, averaged over items. Intervals: "
                 "persona-cluster bootstrap.")]
    cats = list(dict.fromkeys(c for j in judges for c in (j.get("by_category") or {})))
    if cats:
        crow = []
        for c in cats:
            row = [c]
            for j in judges:
                d = (j.get("by_category") or {}).get(c)
                row.append(pct_ci(d.get("flip_rate"), d.get("flip_rate_ci")) + f" (n={_int(d.get('items'))})"
                           if isinstance(d, dict) else "—")
            crow.append(row)
        out.append(Table("Flip rate by category, % [95% CI] (items). Data: noise.json.",
                         ["Category"] + [judge_label(j["judge"], run) for j in judges], crow))
    return out


def _agreement_tables(run: Run) -> list[Table]:
    agr = run.get("agreement") or {}
    out = []
    rows = []
    for p in agr.get("pairs", []):
        ci = p.get("ci") or {}
        rows.append([judge_label(p["a"], run), judge_label(p["b"], run), _int(p.get("n")),
                     pct_ci(p.get("percent_agreement"), ci.get("percent_agreement")),
                     coef_ci(p.get("cohen_kappa"), ci.get("cohen_kappa")),
                     coef_ci(p.get("gwet_ac1"), ci.get("gwet_ac1")),
                     coef(p.get("positive_agreement")), coef(p.get("negative_agreement"))])
    notes = []
    for key, name in (("krippendorff_alpha", "Krippendorff's α (nominal, all judges)"),
                      ("fleiss_kappa", "Fleiss' κ (items every judge labelled)")):
        if key in agr:
            v = agr[key]
            notes.append(f"{name}: {coef_ci(v, v) if isinstance(v, dict) else coef(v)}")
    if agr.get("items") is not None:
        notes.append(f"items: {_int(agr['items'])}")
    if rows or notes:
        out.append(Table("Agreement between judges on shared items. Data: agreement.json.",
                         ["Judge A", "Judge B", "n", "Agreement (%) [95% CI]", "Cohen's κ [95% CI]",
                          "Gwet's AC1 [95% CI]", "Pos. agr.", "Neg. agr."], rows,
                         ("; ".join(notes) + ".") if notes else ""))
    gold = agr.get("gold") or []
    if gold:
        out.append(Table("Judges against gold labels. Data: agreement.json.",
                         ["Judge", "n", "Accuracy (%)", "Cohen's κ", "Precision of unsupported",
                          "Recall of unsupported"],
                         [[judge_label(g.get("judge"), run), _int(g.get("n")), pct(g.get("accuracy")),
                           coef(g.get("cohen_kappa")), coef(g.get("unsupported_precision")),
                           coef(g.get("unsupported_recall"))] for g in gold if isinstance(g, dict)]))
    return out


def _robustness_tables(run: Run) -> list[Table]:
    rob = run.get("robustness") or {}
    out = []
    units = robustness_units(run)
    # every unit as a column while that stays readable; otherwise each judge's first replicate
    rates = support_rates(run, primary_only=len(units) > 6)
    if not rates.empty:
        judges = list(dict.fromkeys(rates["judge"]))
        cats = list(dict.fromkeys(rates["category"]))
        rows = []
        for c in cats:
            row = [c]
            for j in judges:
                r = rates[(rates["judge"] == j) & (rates["category"] == c)]
                row.append(pct_ci(r["rate"].iloc[0], [r["lo"].iloc[0], r["hi"].iloc[0]]) if not r.empty else "—")
            rows.append(row)
        out.append(Table("Support by category, % [95% CI]. Data: robustness.json (persona-cluster bootstrap).",
                         ["Category"] + judges, rows))
    yn = {True: "yes", False: "no", None: "n/a"}
    jrows = []
    for u in units:
        low = u["lowest"]
        rate = next((c["rate"] for c in u["categories"] if c["category"] == low), None)
        low_s = f"{low} ({pct(rate)}%)" if rate is not None else (str(low) if low else "n/a")
        t = u["table"] or {}
        pols, paired = t.get("policies") or {}, t.get("paired") or {}

        def mean(pol, m="faithfulness"):
            return pct(_stat((pols.get(pol) or {}).get(m)))

        h = unit_holds(u)
        jrows.append([u["label"], low_s, ", ".join(u["gated"] or []) or "n/a", coef(u["p_gated_lowest"]),
                      f"{mean('global')} / {mean('targeted')}", paired_ci(paired.get("faithfulness")),
                      paired_ci(paired.get("coverage")),
                      yn[h["faithfulness"]], yn[h["coverage"]]])
    if jrows:
        out.append(Table(f"Robustness across judges. Data: robustness.json — {_config_line(rob, run)}.",
                         ["Judge", "Lowest category (%)", "Gated", "P(gated is lowest)",
                          "Faith. global / targeted (%)", "Targeted − global faith. (pts)",
                          "Targeted − global coverage (pts)", "Targeted ≥ global: faith.", "coverage"], jrows,
                         "Thresholds refit under each judge's labels; faithfulness are held-out fold means; "
                         "brackets are paired 95% intervals (percentiles of per-fold differences); P(gated is "
                         "lowest) is the persona-bootstrap probability. " + (_ordering_summary(run) or "")))
    tau = _first(rob, ("kendall", "kendall_tau_b", "kendall_tau", "tau_b"))
    trows = []
    for t in _records(tau, "pair") if isinstance(tau, (list, dict)) else []:
        a, b = _first(t, ("judge_a", "a")), _first(t, ("judge_b", "b"))
        if a is not None and b is not None:
            trows.append([judge_label(a, run), judge_label(b, run), coef(_first(t, ("tau", "tau_b", "value"))),
                          _pvalue(t.get("p_value")), _int(t.get("n_categories"))])
    if trows:
        out.append(Table("Kendall's τ-b between judges' category support rates. Data: robustness.json.",
                         ["Judge A", "Judge B", "τ-b", "p-value", "Categories"], trows))
    elif num(tau) is not None:
        out.append(Table("Kendall's τ-b between judges' category support rates. Data: robustness.json.",
                         ["Statistic", "Value"], [["τ-b", coef(tau)]]))
    return out


def _calibration_table(run: Run) -> Table | None:
    """The emphasised (gated) category's bins, when calibration.json has it."""
    cal = calibration_frame(run)
    cat = None if cal.empty else _emphasised(run, cal)
    if cat is None:
        return None
    sub = cal[cal["category"] == cat].sort_values("lo", kind="stable")
    rows = [[coef(r.lo, 2) if r.lo == r.hi else f"{coef(r.lo, 2)}–{coef(r.hi, 2)}", _int(r.n),
             pct_ci(r.rate, [r.ci_lo, r.ci_hi])] for r in sub.itertuples()]
    judge = (run.get("calibration") or {}).get("judge")
    jn = f" (judge {judge_label(judge, run)})" if judge else ""
    return Table(f"Calibration of the {cat} category{jn}: support by confidence bin. Data: calibration.json.",
                 ["Confidence bin", "Candidates", "Support (%) [95% CI]"], rows)


# ---------------------------------------------------------------------------------------
# figures


FIGURE_FILES = {
    "support_by_category": "fig_support_by_category.png",
    "faithfulness_vs_coverage": "fig_faithfulness_vs_coverage.png",
    "calibration": "fig_calibration.png",
    "flip_rate": "fig_flip_rate.png",
    "agreement": "fig_agreement.png",
    "fold_differences": "fig_fold_differences.png",
}


def _emphasised(run: Run, cal: pd.DataFrame) -> str | None:
    cats = set(cal["category"])
    for g in _gated(run):
        if g in cats:
            return g
    if "values" in cats:
        return "values"
    return None


def make_figures(run: Run, out_dir: Path, dpi: int | None = None) -> dict[str, tuple[Path, str]]:
    """Render every figure the run's data allows; returns name -> (path, caption)."""
    from memjudge import figures as F

    dpi = dpi or F.DPI
    made: dict[str, tuple[Path, str]] = {}
    rates, flips = support_rates(run), flip_frame(run)
    # one colour and hatch per judge across every figure of the report
    styles = F.judge_styles(list(rates["judge"]) + list(flips["judge"]))

    def save(name, fig, caption):
        path = F.save_png(fig, out_dir / FIGURE_FILES[name], dpi=dpi)
        fig.clf()
        made[name] = (path, caption)

    if not rates.empty:
        gated = _gated(run)
        save("support_by_category", F.support_by_category(rates, gated, styles=styles),
             "Support by category, one bar per judge, with 95% persona-cluster intervals"
             + (f"; gated category shaded ({', '.join(gated)})" if gated else "") + ". Data: robustness.json.")
    sweep, points = sweep_frame(run), policy_points(run)
    if not sweep.empty or not points.empty:
        has_cov = (sweep["coverage"].notna().any() if not sweep.empty else False) or \
                  (points["coverage"].notna().any() if not points.empty else False)
        x = "coverage" if has_cov else "retention"
        floor = num((run.get("compare") or {}).get("floor") or (run.get("sweep") or {}).get("floor"))
        if not sweep.empty:
            sweep = sweep[sweep[x].notna()]
        if not points.empty:
            points = points[points[x].notna() & points["faithfulness"].notna()]
        tsweep = sweep_frame(run, "targeted")
        tsweep = tsweep[tsweep[x].notna()] if not tsweep.empty else tsweep
        gated = ", ".join(_gated(run))
        save("faithfulness_vs_coverage",
             F.faithfulness_vs_coverage(sweep, points, floor=floor, x=x, targeted_sweep=tsweep,
                                        targeted_label=f"Targeted threshold sweep ({gated})" if gated else None,
                                        title=None if x == "coverage" else "Faithfulness vs retention"),
             ("Faithfulness against estimated coverage" if x == "coverage" else
              "Faithfulness against retention (no coverage in this run)")
             + ": the global-threshold sweep on the full sample (curve), write-all and the fitted policies "
             "(held-out fold means ± SD). Data: " + ", ".join(p for p in ("sweep.json", "compare.json")
                                                              if (p[:-5] in run.data)) + ".")
    cal = calibration_frame(run)
    if not cal.empty:
        emph = _emphasised(run, cal)
        judge = (run.get("calibration") or {}).get("judge")
        save("calibration", F.calibration(cal, emph, title=("Calibration: support by confidence bin"
                                                              + (f" — {judge_label(judge, run)}" if judge else ""))),
             "Support rate by confidence bin within each category"
             + (f"; {emph} emphasised with 95% intervals and counts" if emph else "")
             + "; lower panel: candidates per bin. Data: calibration.json.")
    if flips["flip_rate"].notna().any():
        save("flip_rate", F.flip_rate_by_category(flips, styles=styles),
             "Re-score flip rate by category with 95% persona-cluster intervals, per judge. Data: noise.json.")
    pairs = pair_frame(run)
    if not pairs.empty:
        listed = [judge_label(j, run) for j in (run.get("agreement") or {}).get("judges", [])]
        judges = list(dict.fromkeys(listed + list(pairs["a"]) + list(pairs["b"])))
        save("agreement", F.agreement_matrix(pairs, judges),
             "Pairwise Cohen's κ and Gwet's AC1 between judges. Data: agreement.json.")
    diffs = fold_diff_frame(run)
    if not diffs.empty:
        save("fold_differences", F.fold_differences(diffs, (run.get("compare") or {}).get("paired")),
             "Per-fold paired differences targeted − global (points), with the mean, the percentile interval and "
             "the Nadeau–Bengio interval. Data: compare.json (folds_detail, paired).")
    return made


# ---------------------------------------------------------------------------------------
# assembling


def _inventory(run: Run) -> tuple[Table, list[str], list[str]]:
    present, absent, rows = [], [], []
    for name, (part, cmd) in PARTS.items():
        if part in run.data:
            present.append(part)
            obj = run.data[part]
            if isinstance(obj, pd.DataFrame):
                what = f"{len(obj):,} rows"
            else:
                what = ", ".join(list(obj)[:8]) + (", …" if len(obj) > 8 else "")
            rows.append([name, "present", what])
        elif part not in QUIET_PARTS:
            absent.append(part)
            rows.append([name, "absent", f"written by {cmd}"])
    return Table("Contents of the run directory.", ["File", "Status", "Holds / how to produce it"], rows), present, absent


def _labels_summary(run: Run) -> Table | None:
    lab = run.get("labels")
    if lab is None or lab.empty:
        return None
    rows = []
    for (judge, rubric), g in lab.groupby(["judge", "rubric"], sort=False):
        rows.append([judge_label(judge, run), str(rubric), f"{g['assertion_id'].nunique():,}",
                     f"{g['persona_id'].nunique():,}", f"{g['replicate'].nunique():,}",
                     f"{int(g['verdict'].isna().sum()):,}"])
    return Table("Labels in this run (counts of rows, not statistics). Data: labels.jsonl.",
                 ["Judge", "Rubric", "Assertions", "Personas", "Replicates", "Null verdicts"], rows)


def _flatten(obj: dict, prefix: str = "", depth: int = 2) -> list[list[str]]:
    """key.sub → value rows; deeper structures as (shortened) JSON; unset (null) keys left out."""
    rows = []
    for k, v in obj.items():
        key = f"{prefix}{k}"
        if v is None:
            continue
        if isinstance(v, dict) and depth > 1 and v:
            rows += _flatten(v, key + ".", depth - 1)
            continue
        if isinstance(v, (dict, list)):
            v = json.dumps(v, ensure_ascii=False)
        v = str(v)
        rows.append([key, v if len(v) <= 100 else v[:97] + "..."])
    return rows


def _config_table(run: Run) -> Table | None:
    cfg = run.get("configuration")
    if not cfg:
        return None
    return Table("Run configuration. Data: config.json.", ["Key", "Value"], _flatten(cfg))


def _key_table(run: Run, part: str, caption: str) -> Table | None:
    obj = run.get(part)
    return Table(caption, ["Key", "Value"], _flatten(obj)) if obj else None


def _scoring_table(run: Run) -> Table | None:
    summ = run.get("scoring")
    if not summ:
        return None
    return Table("Scoring summary (calls, tokens, cost). Data: summary.json.", ["Key", "Value"], _flatten(summ))


def _simulation_table(run: Run) -> Table | None:
    sim = run.get("simulation")
    summ = (sim or {}).get("summary")
    if not isinstance(summ, dict):
        return None
    rows = []
    for k, v in summ.items():
        if isinstance(v, dict):
            v = ", ".join(f"{a} {b:,}" if isinstance(b, int) else f"{a} {b}" for a, b in v.items())
        elif isinstance(v, float):
            v = f"{pct(v)}%"
        elif isinstance(v, int):
            v = f"{v:,}"
        rows.append([str(k), str(v)])
    return Table("Simulated corpus (construction truth, not a judge). Data: simulate.json.", ["Quantity", "Value"], rows)


def build_document(run: Run, figures: dict[str, tuple[Path, str]]) -> tuple[list, list[str], list[str]]:
    blocks: list = [Heading("memjudge report", 1),
                    Para(f"Run directory: {run.path.resolve().name}. Every number below is read from the JSON "
                         "files in that directory; none is recomputed here.")]
    inv, present, absent = _inventory(run)
    sims = _simulated_judges(run)
    if sims:
        blocks.append(Note("Simulated results: labels from " + ", ".join(sims) + " are simulated (a declared "
                           "noise model, or a generated corpus's construction truth), not a real judge's verdicts."))
    f = findings(run)
    blocks.append(Heading("Findings"))
    blocks.append(Bullets(f) if f else Para("No analysis results (noise, agreement, compare, robustness) in this "
                                            "run, so there are no findings to state."))
    if absent:
        blocks.append(Note("Absent from this run: " + "; ".join(
            f"{n} ({PARTS[n][1]})" for n, (p, _) in PARTS.items() if p in absent) + "."))

    def fig(name):
        if name in figures:
            blocks.append(FigureBlock(*figures[name]))

    cmp_ = run.get("compare")
    if cmp_ or "faithfulness_vs_coverage" in figures:
        blocks.append(Heading("Retention policies"))
        if cmp_:
            blocks.append(table1(cmp_, run=run))
        fig("faithfulness_vs_coverage")
        fig("fold_differences")
    if run.get("robustness") or "calibration" in figures:
        blocks.append(Heading("Category support and robustness across judges"))
        fig("support_by_category")
        blocks += _robustness_tables(run)
        fig("calibration")
        ct = _calibration_table(run)
        if ct:
            blocks.append(ct)
    if run.get("noise"):
        blocks.append(Heading("Judge noise"))
        blocks += _noise_tables(run)
        fig("flip_rate")
    if run.get("agreement"):
        blocks.append(Heading("Agreement between judges"))
        blocks += _agreement_tables(run)
        fig("agreement")
    q = run.get("judge_quality")
    if q:
        blocks.append(Heading("The embedded judge against gold labels"))
        keys = [("judge", "Judge", str), ("n", "Items (replicate 0)", _int), ("auc", "AUC of the log-odds", coef),
                ("balanced_accuracy", "Balanced accuracy at the threshold", coef), ("accuracy", "Accuracy (%)", pct),
                ("threshold", "Threshold (log-odds)", lambda v: f"{num(v):+.2f}" if num(v) is not None else "n/a"),
                ("in_sample_best_threshold", "In-sample best threshold (optimistic)",
                 lambda v: f"{num(v):+.2f}" if num(v) is not None else "n/a"),
                ("in_sample_best_balanced_accuracy", "In-sample best balanced accuracy (optimistic)", coef)]
        rows = [[label, fmt(q[k])] for k, label, fmt in keys if k in q]
        blocks.append(Table("Embedded judge against the corpus's gold labels. Data: local_judge.json.",
                            ["Measure", "Value"], rows, str(q.get("note", ""))))
    blocks.append(Heading("Run"))
    ci = run.get("compare_inputs")
    if ci:
        def show(v):
            # paths relative to the run directory, so that a report moved with its inputs still reads right
            if isinstance(v, list):
                return ", ".join(show(x) for x in v)
            if isinstance(v, str) and os.path.isabs(v) and k in ("candidates", "labels", "coverage"):
                return os.path.relpath(v, run.path.resolve())
            return str(v)

        rows = []
        for k, v in ci.items():
            rows.append([str(k), show(v)])
        blocks.append(Table("Inputs of the policy comparison (paths relative to the run directory). "
                            "Data: compare_inputs.json.", ["Input", "Value"], rows))
    for t in (_config_table(run), _scoring_table(run), _simulation_table(run), _labels_summary(run),
              _key_table(run, "demo", "Demo timings and corpus (seconds; counts). Data: demo.json."), inv):
        if t is not None:
            blocks.append(t)
    if run.get("coverage") is not None:
        cov = run.get("coverage")
        blocks.append(Para(f"coverage.jsonl: {len(cov):,} reference facts over {cov['persona_id'].nunique():,} "
                           "personas (the fact → assertion map used for estimated coverage)."))
    return blocks, present, absent


def _simulated_judges(run: Run) -> list[str]:
    names: list[str] = []
    for part in ("noise", "agreement", "robustness", "compare", "calibration", "sweep"):
        obj = run.get(part)
        if not obj:
            continue
        text = json.dumps(obj)
        names += re.findall(r'"(sim:[^"]+)"', text)
        if run.simulated_truth and '"gold"' in text:
            names.append("gold")
    lab = run.get("labels")
    if lab is not None:
        names += [j for j in lab["judge"].unique() if is_simulated(j) or (j == "gold" and run.simulated_truth)]
    return list(dict.fromkeys(names))


# ---------------------------------------------------------------------------------------
# rendering

# Characters that would start markup; `_` only at a word's edge and `](` only as a link's
# middle, so that names like per_category and intervals like [1.09, 4.17] stay readable raw.
_MD_SPECIAL = re.compile(r"([\\`*<>|#]|(?<!\w)_|_(?!\w)|\[(?=[^\]]*\]\())")


def md_escape(text: str) -> str:
    return _MD_SPECIAL.sub(r"\\\1", str(text)).replace("\n", " ")


_NUMBER = re.compile(r"^[-+]?\d")


def numeric_columns(t: Table) -> list[bool]:
    """Columns whose cells are mostly numbers are right-aligned; text columns stay left."""
    out = []
    for i in range(len(t.header)):
        cells = [r[i] for r in t.rows if i < len(r) and r[i] not in ("", "—", "n/a")]
        out.append(i > 0 and bool(cells) and sum(bool(_NUMBER.match(c)) for c in cells) * 2 >= len(cells))
    return out


def to_markdown(blocks: list, base: Path) -> str:
    out: list[str] = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + md_escape(b.text))
        elif isinstance(b, Para):
            out.append(md_escape(b.text))
        elif isinstance(b, Note):
            out.append("> **Note.** " + md_escape(b.text))
        elif isinstance(b, Bullets):
            out.append("\n".join("- " + md_escape(t) for t in b.items))
        elif isinstance(b, Table):
            lines = ["**" + md_escape(b.caption) + "**", "",
                     "| " + " | ".join(md_escape(h) for h in b.header) + " |",
                     "|" + "|".join("---:" if num_col else "---" for num_col in numeric_columns(b)) + "|"]
            lines += ["| " + " | ".join(md_escape(c) for c in r) + " |" for r in b.rows]
            if b.notes:
                lines += ["", "*" + md_escape(b.notes) + "*"]
            out.append("\n".join(lines))
        elif isinstance(b, FigureBlock):
            rel = b.path.relative_to(base) if b.path.is_relative_to(base) else b.path
            out.append(f"![{md_escape(b.caption)}]({rel.as_posix()})\n\n*{md_escape(b.caption)}*")
    return "\n\n".join(out) + "\n"


_CSS = """
body{font-family:-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;
color:#1a1a1a;line-height:1.45}
h1{font-size:1.6rem;border-bottom:2px solid #0072B2;padding-bottom:.3rem}h2{font-size:1.25rem;margin-top:2rem}
table{border-collapse:collapse;margin:.5rem 0 1rem;font-size:.88rem}
th,td{border-bottom:1px solid #ddd;padding:.25rem .6rem;font-variant-numeric:tabular-nums}
.n{text-align:right}.t{text-align:left}th{border-bottom:2px solid #555}
caption{caption-side:top;text-align:left;font-weight:600;padding-bottom:.3rem}
.tnote{font-size:.82rem;color:#444;margin-top:-.6rem;max-width:55rem}
.note{background:#fff6e5;border-left:4px solid #E69F00;padding:.5rem .8rem}
figure{margin:1rem 0}figure img{max-width:100%;height:auto}figcaption{font-size:.85rem;color:#333}
"""


def to_html(blocks: list) -> str:
    e = html.escape
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           f"<title>{e(next((b.text for b in blocks if isinstance(b, Heading)), 'memjudge report'))}</title>",
           f"<style>{_CSS}</style></head><body>"]
    for b in blocks:
        if isinstance(b, Heading):
            out.append(f"<h{b.level}>{e(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            out.append(f"<p>{e(b.text)}</p>")
        elif isinstance(b, Note):
            out.append(f'<p class="note"><strong>Note.</strong> {e(b.text)}</p>')
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{e(t)}</li>" for t in b.items) + "</ul>")
        elif isinstance(b, Table):
            align = ['class="n"' if n else 'class="t"' for n in numeric_columns(b)]
            rows = "".join("<tr>" + "".join(f"<td {a}>{e(c)}</td>" for a, c in zip(align, r)) + "</tr>"
                           for r in b.rows)
            out.append(f"<table><caption>{e(b.caption)}</caption><thead><tr>"
                       + "".join(f"<th {a}>{e(h)}</th>" for a, h in zip(align, b.header))
                       + f"</tr></thead><tbody>{rows}</tbody></table>")
            if b.notes:
                out.append(f'<p class="tnote">{e(b.notes)}</p>')
        elif isinstance(b, FigureBlock):
            data = base64.b64encode(b.path.read_bytes()).decode("ascii")
            out.append(f'<figure><img alt="{e(b.caption, quote=True)}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{e(b.caption)}</figcaption></figure>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"


def parse_formats(text: str | Sequence[str]) -> tuple[str, ...]:
    items = [x.strip().lower() for x in (text.split(",") if isinstance(text, str) else text) if x.strip()]
    bad = [x for x in items if x not in FORMATS]
    if bad or not items:
        raise UsageError(f"report: unknown --format {', '.join(bad) or '(empty)'} (expected md, html or md,html)")
    return tuple(dict.fromkeys(items))


def report(run_dir, formats: str | Sequence[str] = FORMATS, out_dir=None, dpi: int | None = None) -> ReportResult:
    """Write report.md / report.html and the figures (PNG) for a run directory.

    `out_dir` defaults to the run directory itself.
    """
    formats = parse_formats(formats)
    run = load_run(run_dir)
    out = Path(out_dir) if out_dir is not None else run.path
    out.mkdir(parents=True, exist_ok=True)
    figs = make_figures(run, out, dpi=dpi)
    blocks, present, absent = build_document(run, figs)
    md_path = html_path = None
    if "md" in formats:
        md_path = out / "report.md"
        _write(md_path, to_markdown(blocks, out))
    if "html" in formats:
        html_path = out / "report.html"
        _write(html_path, to_html(blocks))
    notes = [f"absent: {p}" for p in absent]
    return ReportResult(run.path, md_path, html_path, [p for p, _ in figs.values()], present, absent, notes)


def _write(path: Path, text: str) -> None:
    from memjudge.io import write_atomic

    write_atomic(path, text)
