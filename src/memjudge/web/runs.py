"""What `memjudge view` reads: run folders as `memjudge score`, `compare` and `panel` left them,
checked as a whole before anything is served or written.

A run folder holds a labels file (`labels.jsonl`, or `.parquet` / `.csv`) and the
`config.json` in which `score` recorded its candidates and sources (given on the command line
instead, they win). Its policies are those `compare` fitted on all personas (`sweep.json`'s
``fitted``, what ``--export-policy`` writes) and every exported policy file in the folder;
`--policy FILE` adds more. `--labels FILE` adds labels files that are not runs of their own
(a panel's consensus labels, `memjudge panel --out`). A gold file is read the way
`memjudge.formats.read_gold` reads it (the latest row per assertion and annotator).

Bad input is one `InputError` naming the file (and line): a run folder without labels, labels
naming assertions the candidates file lacks, gold rows naming unknown assertions.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pandas as pd

from memjudge.errors import InputError, UsageError
from memjudge.gate import FORMAT as POLICY_FORMAT
from memjudge.gate import Policy, load_policy

LABEL_FILES = ("labels.jsonl", "labels.parquet", "labels.csv")


@dataclass
class Column:
    """One judge (and rubric) of one run: a column of verdicts in the page."""

    key: str        # unique in the page and in links: the judge, or RUN/JUDGE when a judge is in several runs
    run: str
    judge: str
    rubric: str
    replicates: list[int]


@dataclass
class NamedPolicy:
    key: str        # RUN/NAME
    run: str
    name: str
    where: str      # the file it came from
    policy: Policy


@dataclass
class Views:
    """Everything the page shows, read and checked."""

    items: pd.DataFrame                  # one row per assertion (candidates' columns, extras kept)
    sources: dict[str, str]              # persona_id → source
    labels: pd.DataFrame                 # every label row, with `column` (a Column's key)
    columns: list[Column]
    policies: list[NamedPolicy]
    gold: pd.DataFrame | None            # standing gold rows (assertion_id, verdict, annotator?, note?, labelled_at?)
    gold_path: Path | None
    gold_writable: bool
    runs: list[tuple[str, Path]]
    notes: list[str] = field(default_factory=list)


def _labels_file(run: Path) -> Path:
    if not run.is_dir():
        raise InputError(run, "is not a run folder (expected a folder written by `memjudge score`)")
    for name in LABEL_FILES:
        if (run / name).is_file():
            return run / name
    raise InputError(run, "no labels file (labels.jsonl) in this run folder: run `memjudge score ... --out` into it first")


def _recorded_input(run: Path, key: str) -> Path | None:
    """The path `score` recorded for an input, as given then (relative to where it ran, which is
    most often here) or, failing that, relative to the run folder's parent."""
    cfg = run / "config.json"
    if not cfg.is_file():
        cfg = run / "cascade.json"  # memjudge cascade's folder records its inputs there
        if not cfg.is_file():
            return None
    try:
        entry = (json.loads(cfg.read_text(encoding="utf-8")).get("inputs") or {}).get(key)
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
        raise InputError(cfg, f"not a memjudge config.json ({e})") from None
    path = entry.get("path") if isinstance(entry, dict) else entry
    if not isinstance(path, str) or path.startswith("<"):
        return None
    p = Path(path)
    for candidate in (p, run.parent / p, run / p):
        if candidate.is_file():
            return candidate
    raise InputError(cfg, f"records {key} {path!r}, which does not exist here: give --{key} FILE")


def _sweep_policies(run: Path, name: str) -> list[NamedPolicy]:
    """The policies `compare` fitted on all personas, as the gate's Policy (sweep.json ``fitted``)."""
    path = run / "sweep.json"
    if not path.is_file():
        return []
    try:
        fitted = json.loads(path.read_text(encoding="utf-8")).get("fitted") or {}
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as e:
        raise InputError(path, f"not a memjudge sweep.json ({e})") from None
    out = []
    for kind, f in fitted.items():
        t = f.get("threshold")
        if kind == "global":
            d = {"thresholds": {}, "default_threshold": t}
        elif kind == "targeted":
            d = {"thresholds": {str(g): t for g in f.get("gate") or []}, "default_threshold": None, "gate": f.get("gate")}
        elif kind == "per_category" and isinstance(t, dict):
            d = {"thresholds": t, "default_threshold": None}
        else:
            continue
        policy = Policy.from_dict({"format": POLICY_FORMAT, "version": 1, "kind": kind, **d}, str(path))
        out.append(NamedPolicy(f"{name}/{kind}", name, kind, str(path), policy))
    return out


def _policy_files(run: Path, name: str) -> list[NamedPolicy]:
    out = []
    for path in sorted(run.glob("*.json")):
        try:
            head = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError, OSError):
            continue
        if isinstance(head, dict) and head.get("format") == POLICY_FORMAT:
            out.append(NamedPolicy(f"{name}/{path.stem}", name, path.stem, str(path), load_policy(path)))
    return out


def _unique_names(paths: list[Path]) -> list[str]:
    names: list[str] = []
    for p in paths:
        base = p.name or str(p)
        name, k = base, 2
        while name in names:
            name, k = f"{base}~{k}", k + 1
        names.append(name)
    return names


def load_views(run_dirs, *, candidates=None, sources=None, gold=None, labels=(), policies=()) -> Views:
    """Read and check every input of `memjudge view`; nothing is served or written before this."""
    from memjudge.formats import LINE, check_sources_cover, read_candidates, read_gold, read_labels, read_sources

    runs = [Path(r) for r in run_dirs]
    if not runs:
        raise UsageError("memjudge view: give at least one run folder")
    names = _unique_names(runs)
    label_files: list[tuple[str, Path]] = [(n, _labels_file(r)) for n, r in zip(names, runs)]
    extra = [Path(p) for p in labels]
    label_files += list(zip(_unique_names(extra), extra))
    cand_paths = [Path(candidates)] if candidates else []
    src_paths = [Path(sources)] if sources else []
    for r in runs:
        if not candidates and (p := _recorded_input(r, "candidates")) is not None and p not in cand_paths:
            cand_paths.append(p)
        if not sources and (p := _recorded_input(r, "sources")) is not None and p not in src_paths:
            src_paths.append(p)
    if not cand_paths:
        raise InputError(runs[0] / "config.json", "names no candidates file: give --candidates FILE")

    frames = [read_candidates(p, keep_line=False) for p in cand_paths]
    items = pd.concat(frames, ignore_index=True).drop_duplicates("assertion_id", keep="first").reset_index(drop=True)
    if src_paths:
        src = pd.concat([read_sources(p) for p in src_paths], ignore_index=True).drop_duplicates("persona_id")
        check_sources_cover(items, src, cand_paths[0], src_paths[0])
        source_map = dict(zip(src["persona_id"].astype(str), src["source"].astype(str)))
    elif "source" in items.columns:
        source_map = {str(p): str(s) for p, s in zip(items["persona_id"], items["source"]) if isinstance(s, str)}
    else:
        raise InputError(cand_paths[0], "no sources: the run's config.json names none and there is no 'source' column; give --sources FILE")
    known = set(items["assertion_id"])

    parts = []
    for name, path in label_files:
        lab = read_labels(path, keep_line=True)
        bad = ~lab["assertion_id"].isin(known)
        if bad.any():
            row = lab[bad].iloc[0]
            raise InputError(path, f"names assertion {row['assertion_id']!r}, which the candidates file "
                                   f"{cand_paths[0]} lacks (give the right --candidates)", int(row[LINE]))
        parts.append(lab.drop(columns=[LINE]).assign(run=name))
    all_labels = pd.concat(parts, ignore_index=True)

    # A column per (run, judge, rubric); the judge's name alone when no other run has it.
    groups = all_labels.groupby(["run", "judge", "rubric"], sort=False)["replicate"].unique()
    judge_runs = all_labels.groupby(["judge", "rubric"])["run"].nunique()
    columns = []
    for group, reps in groups.items():
        run, judge, rubric = cast(tuple[str, str, str], group)
        many_rubrics = all_labels.loc[all_labels["judge"] == judge, "rubric"].nunique() > 1
        key = f"{run}/{judge}" if judge_runs[(judge, rubric)] > 1 else judge
        key = f"{key}@{rubric}" if many_rubrics else key
        columns.append(Column(key, run, judge, rubric, sorted(int(r) for r in reps)))
    key_of = {(c.run, c.judge, c.rubric): c.key for c in columns}
    all_labels["column"] = [key_of[k] for k in zip(all_labels["run"], all_labels["judge"], all_labels["rubric"])]

    named: list[NamedPolicy] = []
    for name, r in zip(names, runs):
        named += _sweep_policies(r, name) + _policy_files(r, name)
    for p in policies:
        named.append(NamedPolicy(f"file/{Path(p).stem}", "file", Path(p).stem, str(p), load_policy(p)))

    gold_frame, gold_path, writable = None, None, False
    if gold is not None:
        gold_path = Path(gold)
        if gold_path.is_dir():
            raise InputError(gold_path, "is a directory, expected a gold file (.jsonl)")
        if gold_path.is_file() and gold_path.read_bytes().strip():
            gold_frame = read_gold(gold_path, keep_line=True)
            bad = ~gold_frame["assertion_id"].isin(known)
            if bad.any():
                row = gold_frame[bad].iloc[0]
                raise InputError(gold_path, f"names assertion {row['assertion_id']!r}, which is not among the runs' items",
                                 int(row[LINE]))
            gold_frame = gold_frame.drop(columns=[LINE])
            writable = "annotator" in gold_frame.columns
        else:
            writable = True
    return Views(items=items, sources=source_map, labels=all_labels, columns=columns, policies=named,
                 gold=gold_frame, gold_path=gold_path, gold_writable=writable, runs=list(zip(names, runs)))


__all__ = ["Column", "NamedPolicy", "Views", "load_views"]
