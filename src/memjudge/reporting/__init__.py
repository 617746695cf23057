"""`memjudge report`: a run directory's JSON turned into Markdown, HTML and figures.

The report never recomputes a statistic. Every number it prints or draws is read from the
files the analysis commands wrote with `--out RUN_DIR`:

- `config.json`, `labels.jsonl`, `coverage.jsonl` (`memjudge score` / `memjudge simulate`),
- `noise.json` and `agreement.json` (`memjudge noise` / `memjudge agreement`),
- `compare.json`, `sweep.json`, `calibration.json` (`memjudge compare`),
- `robustness.json` (`memjudge robustness`),
- `panel.json` (`memjudge panel`).
- `estimate.json` (`memjudge estimate`) and the ``gold`` block of `compare.json`
  (`memjudge compare --gold`): the "Judge-corrected estimates" section.

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
from memjudge.formats import decode_file

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
    "panel.json": ("panel", "memjudge panel LABELS... --out RUN_DIR/panel.jsonl"),
    "estimate.json": ("estimate", "memjudge estimate LABELS --gold GOLD --by category --out RUN_DIR"),
}
# Parts that describe a run rather than analyse it: not listed as missing when absent.
QUIET_PARTS = {"configuration", "compare_inputs", "simulation", "scoring", "judge_quality", "demo"}
_POLICY_NAMES = {"write_all": "Write-all", "global": "Global threshold", "targeted": "Targeted",
                 "per_category": "Per-category thresholds"}
_METRIC_NAMES = {"faithfulness": "faithfulness", "retention": "retention", "coverage": "estimated coverage"}
METRICS_ORDER = ("faithfulness", "retention", "coverage")


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
        # The demo compares against its generated corpus's truth (RUN/corpus), as simulate does.
        if str(cfg.get("command", "")) in ("simulate", "demo") or (self.data.get("simulation") or {}).get("simulated"):
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
            from memjudge.formats import read_labels

            data[part] = read_labels(f)
        else:
            from memjudge.formats import read_coverage

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
    if "estimate" in data:
        g = data["estimate"].get("groups")
        _need(isinstance(g, list) and all(isinstance(x, dict) and "group" in x for x in g), files["estimate"],
              "'groups' must be a list of objects with a 'group' key")
    if "robustness" in data:
        rob = data["robustness"]
        j = rob.get("units", rob.get("judges", []))
        _need(isinstance(j, (list, dict)), files["robustness"], "'units' must be a list of objects")
    if "panel" in data:
        j = data["panel"].get("judge_errors")
        _need(isinstance(j, list) and all(isinstance(x, dict) and "judge" in x for x in j), files["panel"],
              "'judge_errors' must be a list of objects with a 'judge' key")


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
    # a panel with a simulated member (panel:<method>(sim:a+...)) is simulated too
    judge = str(judge)
    return judge.startswith("sim:") or (judge.startswith("panel:") and ("(sim:" in judge or "+sim:" in judge))


def judge_label(judge: str, run: Run | None = None) -> str:
    """A judge's name as shown, marked when its labels are simulated."""
    judge = str(judge)
    if is_simulated(judge):
        return f"{judge} (simulated)"
    if judge in ("gold", "gold labels") and run is not None and run.simulated_truth:
        return f"{judge} (simulated truth)"
    return judge


# A judge whose agreement with gold falls below these gets a caveat at the top of the report:
# the figures resting on its labels say as much about the judge as about the memories.
POOR_ACCURACY = 0.80
POOR_KAPPA = 0.40
POOR_AUC = 0.75
POOR_BALANCED_ACCURACY = 0.70


def judge_caveats(run: Run) -> list[str]:
    """One sentence per judge whose measured quality against gold is poor (agreement.json's gold
    block, the embedded judge's local_judge.json), with the figures and what follows."""
    gold_name = "the simulated gold labels" if run.simulated_truth else "the gold labels"
    out = []
    cmp_judge = (run.get("compare") or {}).get("judge")
    for g in (run.get("agreement") or {}).get("gold") or []:
        if not isinstance(g, dict):
            continue
        acc, kappa = num(g.get("accuracy")), num(g.get("cohen_kappa"))
        if (acc is not None and acc < POOR_ACCURACY) or (kappa is not None and kappa < POOR_KAPPA):
            judge = str(g.get("judge"))
            rests = " Table 1 and the findings on retention policies rest on its labels." if judge == cmp_judge else ""
            out.append(f"Judge quality: {judge_label(judge, run)} agrees with {gold_name} on {pct(acc)}% of "
                       f"{_int(g.get('n'))} items (Cohen's κ {coef(kappa)}); its support rates and any figure computed "
                       f"from its labels describe this judge as much as the memories.{rests}")
    q = run.get("judge_quality") or {}
    auc, bacc = num(q.get("auc")), num(q.get("balanced_accuracy"))
    if (auc is not None and auc < POOR_AUC) or (bacc is not None and bacc < POOR_BALANCED_ACCURACY):
        out.append(f"Judge quality: the embedded judge {q.get('judge', '')} separates supported from unsupported "
                   f"assertions only weakly against {gold_name} (AUC {coef(auc)}, balanced accuracy {coef(bacc)}); "
                   "treat its rates as a rough instrument, and check a sample against a stronger judge or hand labels.")
    return out


def what_was_done(run: Run) -> list[str]:
    """What the numbers rest on, from the run's own files: the corpus, the judges, the gold."""
    cfg = run.get("configuration") or {}
    sim = run.get("simulation") or {}
    lab = run.get("labels")
    out = []
    if cfg.get("command") == "demo":
        n_cand = lab["assertion_id"].nunique() if lab is not None else None
        out.append(f"Corpus generated by memjudge simulate (paper preset, seed {cfg.get('seed')}): "
                   f"{_int(cfg.get('personas'))} personas × about {_int(cfg.get('candidates_per_persona'))} candidate "
                   f"assertions each ({_int(n_cand)} in all), with known truth; nothing here is real user data.")
    elif sim or cfg.get("command") == "simulate":
        out.append(f"Corpus generated by memjudge simulate: {_int(sim.get('personas'))} personas, "
                   f"{_int(sim.get('candidates'))} candidates, with known truth; nothing here is real user data.")
    judges = list(dict.fromkeys(lab["judge"].astype(str))) if lab is not None else []
    if not judges:
        for part in ("robustness", "noise", "agreement"):
            judges += re.findall(r'"judge":\s*"([^"]+)"', json.dumps(run.get(part) or {}))
        judges = list(dict.fromkeys(judges))
    real = [j for j in judges if not is_simulated(j) and j != "gold"]
    sims = [j for j in judges if is_simulated(j)]
    if real:
        out.append("Judges that read the sources: " + ", ".join(real) + ".")
    if sims:
        out.append("Simulated judges (a declared noise model applied to the truth, not a model's answers): "
                   + ", ".join(sims) + ".")
    if run.simulated_truth:
        out.append("Gold labels are the generated corpus's construction truth (simulated gold), not hand labels.")
    cmp_ = run.get("compare")
    if cmp_:
        out.append(f"Retention policies compared under {judge_label(str(cmp_.get('judge')), run)}'s labels "
                   f"({_int(_n_folds(cmp_))} held-out folds).")
    return out


# ---------------------------------------------------------------------------------------
# tidy frames (JSON -> the figures' inputs)


def robustness_units(run: Run) -> list[dict]:
    """robustness.json's units (one per judge, or per judge × replicate), normalised:
    judge, replicate, label, primary (the judge's first unit), categories [{category, rate, lo,
    hi, n}], overall {rate, lo, hi, n} (None when absent), lowest, gated, p_gated_lowest, table
    (compare.json's write_all/policies/paired)."""
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
        ov = u.get("overall")
        overall = None
        if isinstance(ov, dict) and num(ov) is not None:
            lo, hi = interval(ov)
            overall = {"rate": num(ov), "lo": lo, "hi": hi, "n": num(_first(ov, ("n", "valid")))}
        units.append({"judge": str(u.get("judge")), "replicate": u.get("replicate"), "categories": cats,
                      "overall": overall,
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
            ov = unit["overall"]
            if ov is not None:
                s += (f"; overall support is {pct(ov['rate'])}%"
                      + (f" (95% CI {pct(ov['lo'])}–{pct(ov['hi'])})" if ov["lo"] is not None and ov["hi"] is not None
                         else ""))
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
    out += corrected_findings(run)
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
        # The judge-level count reads each judge's first replicate; say so when others exist,
        # since the table beside it shows every replicate.
        first = ", first replicate of each" if ku is not None and nu is not None and nu > n else ""
        if n == 1:
            only = judge_label(prim[0]["judge"], run) if len(prim) == 1 else "the one judge"
            phrase = f"{'holds' if k else 'does not hold'} on {_METRIC_NAMES[m]} under the only judge ({only})"
        elif k == n:
            phrase = f"holds on {_METRIC_NAMES[m]} under every judge ({k} of {n}{first})"
        elif k == 0:
            phrase = f"holds on {_METRIC_NAMES[m]} under none of the {n} judges" + (f" ({first[2:]})" if first else "")
        else:
            phrase = f"holds on {_METRIC_NAMES[m]} under {k} of {n} judges" + \
                     (f" ({first[2:]}; not under {', '.join(failing)})" if failing and first else
                      f" (not under {', '.join(failing)})" if failing else f" ({first[2:]})" if first else "")
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
    points, then (spec §8) each policy's paired per-fold change against write-all and the paired
    targeted − global row, with 95% intervals in brackets; write-all carries its persona-cluster
    bootstrap interval when compare.json has one."""
    header = ["Policy", "Faithfulness (%)", "Retention (%)", "Est. coverage (%)", "Δ faith. vs write-all (pts)",
              "Δ coverage vs write-all (pts)"]
    rows = []
    wa = c.get("write_all") or {}
    wa_ci = c.get("write_all_ci") if isinstance(c.get("write_all_ci"), dict) else {}
    rows.append(["Write-all (full sample)", pct_ci(wa.get("faithfulness"), wa_ci.get("faithfulness")),
                 pct(wa.get("retention")), pct_ci(wa.get("coverage"), wa_ci.get("coverage")), "—", "—"])
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
    vs_wa = c.get("paired_vs_write_all") if isinstance(c.get("paired_vs_write_all"), dict) else {}
    n_folds = _n_folds(c)
    same = []
    for name in [n for n in ("global", "targeted", "per_category") if n in vs_wa] + \
                [n for n in vs_wa if n not in ("global", "targeted", "per_category")]:
        ch = vs_wa[name] if isinstance(vs_wa[name], dict) else {}
        rows.append([f"{_POLICY_NAMES.get(name, name)} − write-all (paired)", paired_ci(ch.get("faithfulness")),
                     paired_ci(ch.get("retention")), paired_ci(ch.get("coverage")), "", ""])
        counts = [f"{_METRIC_NAMES[m]} {int(num(ch[m]['same_sign']))}/{n_folds}" for m in METRICS_ORDER
                  if isinstance(ch.get(m), dict) and num(ch[m].get("same_sign")) is not None and n_folds]
        if counts:
            same.append(f"{_POLICY_NAMES.get(name, name).lower()}: " + ", ".join(counts))
    paired = c.get("paired") or {}
    if paired:
        rows.append(["Targeted − global (paired)", paired_ci(paired.get("faithfulness")),
                     paired_ci(paired.get("retention")), paired_ci(paired.get("coverage")), "", ""])
    nb = []
    for m in ("faithfulness", "retention", "coverage"):
        p = paired.get(m) if isinstance(paired.get(m), dict) else None
        if p and num(p.get("nb_lo")) is not None and num(p.get("nb_hi")) is not None:
            s = f"{_METRIC_NAMES[m]} {pts(p['nb_lo'])} to {pts(p['nb_hi'])}"
            if num(p.get("same_sign")) is not None and n_folds:
                s += f" (same sign in {int(num(p['same_sign']))}/{n_folds} folds)"
            nb.append(s)
    notes = ("Entries are fold means ± standard deviations over held-out folds, in percent; Δ columns are changes "
             "of the fold mean against write-all in points. Write-all is the fixed full-sample reference"
             + (" (brackets: 95% persona-cluster bootstrap interval)" if wa_ci else "") + ". ")
    if vs_wa:
        notes += ("Rows '… − write-all (paired)': the change against write-all on the same held-out personas, "
                  "mean of the per-fold changes in points. ")
    notes += ("Brackets in the paired rows are paired 95% intervals (2.5–97.5 percentiles of per-fold "
              "differences). Post-threshold coverage is estimated.")
    if same:
        notes += " Folds with the sign of the mean change against write-all: " + "; ".join(same) + "."
    if nb:
        notes += " Nadeau–Bengio corrected 95% intervals (targeted − global): " + "; ".join(nb) + "."
    if c.get("strict_binary"):
        notes += (" Strict binary: verdicts other than supported/unsupported are left out of faithfulness "
                  "(counted in retention).")
    run_notes = [str(n) for n in c.get("notes") or []]
    if run_notes:
        notes += " Notes: " + "; ".join(run_notes) + "."
    elif c.get("write_all") is not None and num((c.get("write_all") or {}).get("coverage")) is None:
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


def panel_error_frame(run: Run) -> pd.DataFrame:
    """panel.json's judge_errors as rows (judge, measure, value, lo, hi, gold, gold_lo, gold_hi)."""
    rows = []
    for r in (run.get("panel") or {}).get("judge_errors", []):
        for m in ("sensitivity", "specificity"):
            est, gold = r.get(m) or {}, r.get(f"gold_{m}") or {}
            rows.append({"judge": judge_label(r["judge"], run), "measure": m, "value": num(est.get("value")),
                         "lo": num(est.get("lo")), "hi": num(est.get("hi")), "gold": num(gold.get("value")),
                         "gold_lo": num(gold.get("lo")), "gold_hi": num(gold.get("hi"))})
    df = pd.DataFrame(rows, columns=["judge", "measure", "value", "lo", "hi", "gold", "gold_lo", "gold_hi"])
    return df[df["value"].notna()] if not df.empty else df


def _panel_blocks(run: Run, figures: dict) -> list:
    """The judge-panel section (panel.json): consensus, prior, each judge's error rates."""
    pan = run.get("panel")
    if not pan:
        return []

    def ci(e):
        e = e if isinstance(e, dict) else {}
        return coef_ci(e.get("value"), [e.get("lo"), e.get("hi")])

    out: list = [Heading("Judge panel")]
    if pan.get("simulated"):
        out.append(Note("Simulated: the panel's judges are simulated judges with declared error rates."))
    prior = pan.get("prior") or {}
    verdicts = pan.get("verdicts") or {}
    text = (f"{pan.get('judge', 'The panel')}: {_int(pan.get('n_items'))} items, {len(pan.get('judges', []))} judges"
            + (f", {_int(pan.get('iterations'))} EM iterations" if pan.get("method") != "majority" else "")
            + ". Class prior: " + ", ".join(f"{k} {coef(v)}" for k, v in prior.items())
            + (". Consensus verdicts: " + ", ".join(f"{k} {_int(v)}" for k, v in verdicts.items()) if verdicts else "")
            + ".")
    out.append(Para(text))
    errs = pan.get("judge_errors", [])
    gold = any(r.get("gold_sensitivity") for r in errs)
    header = ["Judge", "Sensitivity [95% CI]", "Specificity [95% CI]"]
    if gold:
        header += ["Gold sensitivity [95% CI]", "Gold specificity [95% CI]"]
    rows = []
    for r in errs:
        row = [judge_label(r["judge"], run), ci(r.get("sensitivity")), ci(r.get("specificity"))]
        if gold:
            row += [ci(r.get("gold_sensitivity")), ci(r.get("gold_specificity"))]
        rows.append(row)
    defs = pan.get("definitions") or {}
    if not any(num((r.get("sensitivity") or {}).get("value")) is not None for r in errs):
        out.append(Para("Majority vote has no latent model, so it estimates no error rates "
                        "(memjudge panel --method dawid-skene or one-coin does)."))
        return out
    out.append(Table(f"Each judge's error rates estimated by the panel ({pan.get('method')}) without gold"
                     + (", beside the same measured on gold labels" if gold else "") + ". Data: panel.json.",
                     header, rows, "; ".join(f"{k}: {v}" for k, v in defs.items())))
    g = pan.get("gold") or {}
    if g.get("accuracy"):
        out.append(Table(f"Accuracy against gold ({_int(g.get('n_items'))} items with gold). Data: panel.json.",
                         ["Judge", "Accuracy [95% CI]"],
                         [[judge_label(k, run), ci(v)] for k, v in g["accuracy"].items()]))
    cats = pan.get("by_category") or []
    if cats:
        crow = [[str(c.get("category")), judge_label(r["judge"], run), _int(r.get("n_items")),
                 ci(r.get("sensitivity")), ci(r.get("specificity"))]
                for c in cats for r in c.get("judge_errors", [])]
        out.append(Table("Error rates per category (a separate fit per category). Data: panel.json.",
                         ["Category", "Judge", "Items", "Sensitivity [95% CI]", "Specificity [95% CI]"], crow))
    if "panel_errors" in figures:
        out.append(FigureBlock(*figures["panel_errors"]))
    return out


def _robustness_tables(run: Run) -> list[Table]:
    rob = run.get("robustness") or {}
    out = []
    units = robustness_units(run)
    # every unit as a column while that stays readable; otherwise each judge's first replicate
    primary_only = len(units) > 6
    rates = support_rates(run, primary_only=primary_only)
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
        overall = {}  # column name as in support_rates → the unit's overall rate
        for u in units:
            if u["overall"] is not None and (u["primary"] or not primary_only):
                overall[judge_label(u["judge"], run) if primary_only else u["label"]] = u["overall"]
        if overall:
            rows.append(["Overall (all categories)"] + [
                pct_ci(overall[j]["rate"], (overall[j]["lo"], overall[j]["hi"])) if j in overall else "—"
                for j in judges])
        out.append(Table("Support by category and overall, % [95% CI]. Data: robustness.json (persona-cluster "
                         "bootstrap).", ["Category"] + judges, rows,
                         "Support rate = supported / valid verdicts"
                         + (" (strict binary: verdicts other than supported/unsupported left out)"
                            if rob.get("strict_binary") else
                            "; a verdict other than supported/unsupported (e.g. partial) counts as not supported")
                         + "."))
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
# judge-corrected estimates (estimate.json; compare.json's "gold" block)

_METHODS = (("judge_only", "Judge only"), ("gold_only", "Gold only"), ("ppi", "PPI++"))


def _simulated_gold(run: Run) -> bool:
    """Gold labels that are a generated corpus's construction truth (the demo's sample, or a
    gold file beside a simulated corpus)."""
    cfg = run.get("configuration") or {}
    if isinstance(cfg.get("gold_sample"), dict) and cfg["gold_sample"].get("simulated"):
        return True
    path = ((run.get("compare") or {}).get("gold") or {}).get("path")
    if isinstance(path, str) and path:
        d = Path(path).parent
        return (d / "truth.jsonl").is_file() or _simulated_marker(d / "simulate.json")
    return False


def estimate_frame(run: Run) -> pd.DataFrame:
    """estimate.json as one row per (group, method): value, lo, hi, and the group's counts."""
    rows = []
    for g in (run.get("estimate") or {}).get("groups") or []:
        if not isinstance(g, dict):
            continue
        n_gold, n_items, eff = num(g.get("n_gold")), num(g.get("n_items")), num(g.get("effective_gold_n"))
        label = f"{g['group']}\n{_int(n_gold)} gold / {_int(n_items)}" + (f"; eff. n {_int(eff)}" if eff is not None else "")
        for m, _ in _METHODS:
            e = g.get(m) if isinstance(g.get(m), dict) else {}
            lo, hi = interval(e)
            rows.append({"group": str(g["group"]), "label": label, "method": m, "value": num(e.get("value")),
                         "lo": lo, "hi": hi, "n_gold": n_gold, "n_items": n_items, "effective_gold_n": eff,
                         "lambda": num(e.get("lambda")) if m == "ppi" else None})
    cols = ["group", "label", "method", "value", "lo", "hi", "n_gold", "n_items", "effective_gold_n", "lambda"]
    df = pd.DataFrame(rows, columns=cols)
    return df.astype({c: float for c in cols[3:]})


def _corrected_figures(run: Run, save) -> None:
    from memjudge.reporting import figures as F

    est = estimate_frame(run)
    if not est.empty and est["value"].notna().any():
        e = run.get("estimate") or {}
        iv = "persona-cluster bootstrap" if e.get("interval") == "bootstrap" else "iid CLT"
        save("ppi_forest", F.ppi_forest(est),
             f"Support rate per group three ways, one above the other: the judge's labels alone "
             f"({judge_label(e.get('judge', ''), run)}), the gold labels alone, and PPI++ combining both; "
             f"95% {iv} intervals." + (" Gold labels: simulated (the corpus's construction truth)."
                                       if _simulated_gold(run) else "") + " Data: estimate.json.")


def _estimate_sentence(g: dict, simulated: bool) -> str | None:
    jv, pv = num((g.get("judge_only") or {}).get("value")), num((g.get("ppi") or {}).get("value"))
    if jv is None and pv is None:
        return None
    who = "all items" if g.get("group") == "all" else f"{g.get('group')}"
    s = f"{who}: the judge says {pct(jv)}% supported"
    gold = "simulated gold labels" if simulated else "gold labels"
    if pv is None:
        return s + f"; no PPI++ figure (no {gold} in this group)."
    s += (f"; corrected with {_int(g.get('n_gold'))} {gold}: {pct_ci(pv, g.get('ppi'))}%"
          f" (gold only {pct_ci((g.get('gold_only') or {}).get('value'), g.get('gold_only'))}%")
    eff = num(g.get("effective_gold_n"))
    glo, ghi = interval(g.get("gold_only"))
    if eff is not None and eff > 0 and glo is not None and ghi is not None and ghi > glo:
        s += f"; as precise as {_int(eff)} gold labels alone"
    lo, hi = interval(g.get("ppi"))
    if lo is not None and hi is not None and jv is not None:
        s += ("; the judge's figure lies outside the corrected interval" if not lo <= jv <= hi else
              "; the judge's figure lies inside the corrected interval")
    return s + ")."


def corrected_findings(run: Run) -> list[str]:
    out = []
    est = run.get("estimate") or {}
    top = next((g for g in est.get("groups") or [] if isinstance(g, dict) and g.get("group") == "all"), None)
    if top:
        s = _estimate_sentence(top, _simulated_gold(run))
        if s:
            out.append(f"Support rate corrected with gold labels (judge {judge_label(est.get('judge', ''), run)}), "
                       + s)
    gold = (run.get("compare") or {}).get("gold")
    if isinstance(gold, dict) and isinstance(gold.get("ordering"), dict):
        from memjudge.comparison.gold import ordering_sentence

        out.append("Held-out faithfulness corrected with gold labels (compare --gold): "
                   + ordering_sentence(gold["ordering"], (gold.get("paired") or {}).get("ppi")))
    return out


def table1_ppi(t: Table, c: dict, simulated: bool = False) -> Table:
    """Table 1 with the PPI++ faithfulness column (fold mean ± SD) when compare.json has a
    ``gold`` block (`memjudge compare --gold`); the table unchanged otherwise."""
    gold = c.get("gold")
    if not isinstance(gold, dict) or not isinstance(gold.get("policies"), dict):
        return t
    by_label = {"Write-all (full sample)": "write_all", "Targeted − global (paired)": "paired"}
    for name in gold["policies"]:
        by_label[_POLICY_NAMES.get(name, name)] = name
    gate = c.get("gate")
    if isinstance(gate, list) and gate:
        by_label[f"Targeted ({', '.join(map(str, gate))})"] = "targeted"
    elif isinstance(gate, str) and gate:
        by_label[f"Targeted ({gate})"] = "targeted"
    rows = []
    for r in t.rows:
        key = by_label.get(r[0])
        if key == "write_all":
            cell = pct((gold.get("write_all") or {}).get("ppi"))
        elif key == "paired":
            cell = paired_ci((gold.get("paired") or {}).get("ppi"))
        elif key is not None:
            ppi = (gold["policies"].get(key) or {}).get("ppi")
            sd = _stat(ppi, "sd")
            cell = pct(_stat(ppi)) + (f" ± {pct(sd)}" if sd is not None else "")
        else:
            cell = ""
        rows.append(r[:2] + [cell] + r[2:])
    n = _int(gold.get("n_matched"))
    missing = {k: v.get("folds_without_gold") for k, v in gold["policies"].items()
               if isinstance(v, dict) and num(v.get("folds_without_gold"))}
    note = (f" PPI++ faithfulness: the same held-out retained sets, their support rate estimated from {n} "
            f"{'simulated ' if simulated else ''}gold labels and the judge's verdicts on the rest (prediction-powered "
            "inference, power-tuned λ); thresholds are still fitted on the judge's labels.")
    if missing:
        note += " Folds whose retained set held no gold item have no PPI++ figure: " + ", ".join(
            f"{_POLICY_NAMES.get(k, k)} {_int(v)}" for k, v in missing.items()) + "."
    header = t.header[:2] + ["Faithfulness, PPI++ (%)"] + t.header[2:]
    return Table(t.caption, header, rows, t.notes + note)


def corrected_section(run: Run, figures: dict) -> list:
    """The "Judge-corrected estimates" section: estimate.json's three intervals per group (table,
    forest plot, sentences) and compare.json's PPI++ ordering; names `memjudge estimate` when
    estimate.json is absent."""
    est, gold = run.get("estimate"), (run.get("compare") or {}).get("gold")
    rob_ppi = ((run.get("robustness") or {}).get("summary") or {}).get("faithfulness_ppi")
    if not est and not isinstance(gold, dict) and not isinstance(rob_ppi, dict):
        return []
    simulated = _simulated_gold(run)
    blocks: list = [Heading("Judge-corrected estimates")]
    if simulated:
        blocks.append(Note("Simulated gold: the \"hand labels\" here are the generated corpus's construction truth "
                           "on a random sample, standing in for a person's labels. The corrected figures show what "
                           "a real gold sample of that size would do; they are not a study of real data."))
    if est:
        groups = [g for g in est.get("groups") or [] if isinstance(g, dict)]
        iv = "persona-cluster bootstrap" if est.get("interval") == "bootstrap" else "iid CLT"
        blocks.append(Para(
            f"Judge {judge_label(est.get('judge', ''), run)}; {_int(est.get('n_gold'))} gold labels on "
            f"{_int(est.get('n_items'))} items" + (" (weighted by their inclusion probabilities)" if est.get("weighted")
                                                     else "") +
            f". Judge only: the judge's labels, as every other figure of this report. Gold only: the gold labels "
            f"alone. PPI++: the gold labels corrected by the judge's labels on everything (prediction-powered "
            f"inference; valid whatever the judge's errors, narrower than gold only when the judge is informative). "
            f"Effective gold n: how many gold labels alone would give the PPI++ interval's precision. "
            f"Intervals: 95% {iv}."))
        rows = []
        for g in groups:
            rows.append([str(g.get("group")), _int(g.get("n_items")), _int(g.get("n_gold")),
                         pct(g.get("judge_accuracy_on_gold")),
                         *[pct_ci((g.get(m) or {}).get("value"), g.get(m)) for m, _ in _METHODS],
                         coef((g.get("ppi") or {}).get("lambda"), 2), _int(g.get("effective_gold_n"))])
        blocks.append(Table("Support rate three ways, % [95% CI]. Data: estimate.json.",
                            ["Group", "Items", "Gold", "Judge accuracy on gold (%)", "Judge only", "Gold only",
                             "PPI++", "λ", "Effective gold n"], rows,
                            "λ = 1 is plain PPI, λ = 0 gold only. n/a: undefined (e.g. a group without gold)."))
        if "ppi_forest" in figures:
            blocks.append(FigureBlock(*figures["ppi_forest"]))
        sentences = [s for s in (_estimate_sentence(g, simulated) for g in groups) if s]
        if sentences:
            blocks.append(Bullets(sentences))
        for n in est.get("notes") or []:
            blocks.append(Note(str(n)))
    else:
        blocks.append(Note(f"estimate.json is absent: {PARTS['estimate.json'][1]} writes the support rates "
                           "judge only, gold only and PPI++."))
    if isinstance(gold, dict):
        from memjudge.comparison.gold import ordering_sentence

        wa = gold.get("write_all") or {}
        blocks.append(Para(
            f"Retention policies (compare --gold): Table 1's PPI++ column estimates each policy's held-out "
            f"faithfulness with {_int(gold.get('n_matched'))} {'simulated ' if simulated else ''}gold labels; "
            f"write-all {pct(wa.get('judge'))}% by the judge, {pct(wa.get('ppi'))}% corrected. "
            + ordering_sentence(gold.get("ordering") or {}, (gold.get("paired") or {}).get("ppi"))))
    if isinstance(rob_ppi, dict) and num(rob_ppi.get("judges_defined")):
        n_j = _int(((run.get("robustness") or {}).get("summary") or {}).get("judges"))
        blocks.append(Para(
            f"Across judges (robustness --gold): PPI++ puts targeted ≥ global on held-out faithfulness under "
            f"{_int(rob_ppi.get('judges'))} of {_int(rob_ppi.get('judges_defined'))} judges' labels; each judge's own "
            f"ordering survives the correction for {_int(rob_ppi.get('survives_judges'))} of {n_j} judges. "
            "Data: robustness.json (summary.faithfulness_ppi)."))
    return blocks


# ---------------------------------------------------------------------------------------
# figures


FIGURE_FILES = {
    "support_by_category": "fig_support_by_category.png",
    "faithfulness_vs_coverage": "fig_faithfulness_vs_coverage.png",
    "calibration": "fig_calibration.png",
    "flip_rate": "fig_flip_rate.png",
    "agreement": "fig_agreement.png",
    "fold_differences": "fig_fold_differences.png",
    "panel_errors": "fig_panel_errors.png",
    "ppi_forest": "fig_ppi_forest.png",
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
    from memjudge.reporting import figures as F

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
    pe = panel_error_frame(run)
    if not pe.empty:
        pan = run.get("panel") or {}
        save("panel_errors", F.panel_error_rates(pe),
             f"Each judge's sensitivity and specificity estimated by {pan.get('method', 'the panel')} without gold"
             + (", against the same measured on gold labels (dashed: estimate = measured)" if pe["gold"].notna().any()
                else "") + ", with 95% persona-cluster intervals"
             + (". Simulated judges" if pan.get("simulated") else "") + ". Data: panel.json.")
    _corrected_figures(run, save)
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
    done = what_was_done(run)
    if done:
        blocks += [Heading("What was done"), Bullets(done)]
    for caveat in judge_caveats(run):
        blocks.append(Note(caveat))
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
            blocks.append(table1_ppi(table1(cmp_, run=run), cmp_, _simulated_gold(run)))
        fig("faithfulness_vs_coverage")
        fig("fold_differences")
    blocks += corrected_section(run, figures)
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
    blocks += _panel_blocks(run, figures)
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
    from memjudge.formats import write_atomic

    write_atomic(path, text)
