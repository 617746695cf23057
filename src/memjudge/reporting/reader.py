"""The run folder reader: `load_run` parses every known file of a run directory into a `Run`.

A malformed file is an `InputError` naming it; an absent one is simply not in `Run.data`
(the report says which command writes it, see `PARTS`). Also here: the facts about a run
that every part of the report asks (which judges are simulated, whether "gold" is a
generated corpus's construction truth, which categories are gated).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from memjudge.errors import InputError
from memjudge.formats import decode_file
from memjudge.formats.documents import parse_json

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
    "coverage_judge.json": ("coverage_judge", "memjudge demo"),
    "demo.json": ("demo", "memjudge demo"),
    "sweep.json": ("sweep", "memjudge compare ... --out RUN_DIR"),
    "calibration.json": ("calibration", "memjudge compare ... --out RUN_DIR"),
    "robustness.json": ("robustness", "memjudge robustness CANDIDATES --labels LABELS... --out RUN_DIR"),
    "panel.json": ("panel", "memjudge panel LABELS... --out RUN_DIR/panel.jsonl"),
    "estimate.json": ("estimate", "memjudge estimate LABELS --gold GOLD --by category --out RUN_DIR"),
    "diff.json": ("diff", "memjudge diff BASE_RUN NEW_RUN --out NEW_RUN"),
    "cascade.json": ("cascade", "memjudge cascade CANDIDATES --stage J1 --stage J2 --gold GOLD --out DIR"),
}


# Parts that describe a run rather than analyse it: not listed as missing when absent.
QUIET_PARTS = {"configuration", "compare_inputs", "simulation", "scoring", "judge_quality", "demo", "diff", "coverage_judge",
               "cascade"}
POLICY_NAMES = {"write_all": "Write-all", "global": "Global threshold", "targeted": "Targeted",
                 "per_category": "Per-category thresholds"}
METRIC_NAMES = {"faithfulness": "faithfulness", "retention": "retention", "coverage": "estimated coverage"}
METRICS_ORDER = ("faithfulness", "retention", "coverage")


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
        return any((d / "truth.jsonl").is_file() or simulated_marker(d / "simulate.json") for d in dirs)


def simulated_marker(path: Path) -> bool:
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
    obj = parse_json(path, text)
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


def _estimates(path: Path, where: str, obj, keys) -> None:
    """Each of `keys` in `obj`, when present, is an `Estimate` object ``{"value", "lo", "hi"}``
    (or null). A bare number or a ``[lo, hi]`` pair is how older memjudge versions wrote some of
    them: named as such, since the report would otherwise show the figure as missing."""
    for k in keys:
        v = obj.get(k) if isinstance(obj, dict) else None
        if v is not None and not (isinstance(v, dict) and "value" in v):
            raise InputError(path, f"{where}{k} is not an estimate {{\"value\", \"lo\", \"hi\"}} (written by an "
                                   f"older memjudge? rerun the command that wrote {path.name})")


def _validate(data: dict, files: dict) -> None:
    """The few keys without which a part cannot be reported at all, and the shape of every
    estimate the report prints (`Estimate`)."""
    if "noise" in data:
        j = data["noise"].get("judges")
        _need(isinstance(j, list) and all(isinstance(x, dict) and "judge" in x for x in j), files["noise"],
              "'judges' must be a list of objects with a 'judge' key")
        for i, x in enumerate(j):
            _estimates(files["noise"], f"judges[{i}].", x, ("flip_rate", "any_flip_rate"))
            for cat, c in (x.get("by_category") or {}).items():
                _estimates(files["noise"], f"judges[{i}].by_category.{cat}.", c, ("flip_rate",))
    if "agreement" in data:
        agr = data["agreement"]
        p = agr.get("pairs", [])
        _need(isinstance(p, list) and all(isinstance(x, dict) and "a" in x and "b" in x for x in p),
              files["agreement"], "'pairs' must be a list of objects with 'a' and 'b'")
        _estimates(files["agreement"], "", agr, ("krippendorff_alpha", "fleiss_kappa"))
        for i, x in enumerate(p):
            _estimates(files["agreement"], f"pairs[{i}].", x, ("percent_agreement", "cohen_kappa", "gwet_ac1",
                                                               "positive_agreement", "negative_agreement"))
        for i, x in enumerate(agr.get("gold") or []):
            _estimates(files["agreement"], f"gold[{i}].", x, ("accuracy", "cohen_kappa", "unsupported_precision",
                                                              "unsupported_recall"))
    if "compare" in data:
        c = data["compare"]
        _need(isinstance(c.get("policies"), dict), files["compare"], "'policies' must be an object keyed by policy")
        for name, pol in c["policies"].items():
            _need(isinstance(pol, dict) and isinstance(pol.get("faithfulness"), dict), files["compare"],
                  f"policy {name!r} has no 'faithfulness' {{value, sd}}")
            _estimates(files["compare"], f"policies.{name}.", pol, METRICS_ORDER)
        _estimates(files["compare"], "paired.", c.get("paired"), METRICS_ORDER)
        _need(isinstance(c.get("folds_detail", []), list), files["compare"], "'folds_detail' must be a list")
    if "estimate" in data:
        g = data["estimate"].get("groups")
        _need(isinstance(g, list) and all(isinstance(x, dict) and "group" in x for x in g), files["estimate"],
              "'groups' must be a list of objects with a 'group' key")
        for x in g:
            _estimates(files["estimate"], f"groups[{x['group']}].", x, ("judge_only", "gold_only", "ppi"))
    if "robustness" in data:
        j = data["robustness"].get("units", [])
        _need(isinstance(j, list) and all(isinstance(x, dict) for x in j), files["robustness"],
              "'units' must be a list of objects")
        for i, x in enumerate(j):
            _estimates(files["robustness"], f"units[{i}].", x, ("overall",))
    if "panel" in data:
        j = data["panel"].get("judge_errors")
        _need(isinstance(j, list) and all(isinstance(x, dict) and "judge" in x for x in j), files["panel"],
              "'judge_errors' must be a list of objects with a 'judge' key")


def gated_categories(run: Run) -> list[str]:
    for part in ("compare", "robustness", "sweep"):
        g = (run.get(part) or {}).get("gate")
        if isinstance(g, list):
            return [str(x) for x in g]
    return []


def is_simulated(judge: str) -> bool:
    # a panel with a simulated member (panel:<method>(sim:a+...)) is simulated too
    judge = str(judge)
    return judge.startswith("sim:") or (judge.startswith("panel:") and ("(sim:" in judge or "+sim:" in judge))


def judge_label(judge: object, run: Run | None = None) -> str:
    """A judge's name as shown, marked when its labels are simulated."""
    name = str(judge)  # whatever the run's JSON holds there
    if is_simulated(name):
        return f"{name} (simulated)"
    if name in ("gold", "gold labels") and run is not None and run.simulated_truth:
        return f"{name} (simulated truth)"
    return name


def simulated_gold(run: Run) -> bool:
    """Gold labels that are a generated corpus's construction truth (the demo's sample, or a
    gold file beside a simulated corpus)."""
    cfg = run.get("configuration") or {}
    if isinstance(cfg.get("gold_sample"), dict) and cfg["gold_sample"].get("simulated"):
        return True
    path = ((run.get("compare") or {}).get("gold") or {}).get("path")
    if isinstance(path, str) and path:
        d = Path(path).parent
        return (d / "truth.jsonl").is_file() or simulated_marker(d / "simulate.json")
    return False
