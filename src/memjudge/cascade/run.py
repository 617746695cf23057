"""`memjudge cascade`: the stages in turn, each through the ordinary scorer, on the items the
stages before it did not trust; thresholds certified on gold items (memjudge.stats.cascade).

Layout of the output folder:

    calibration/<k>-<judge>/   every stage on the gold items and the selection sample (a run folder each)
    stages/<k>-<judge>/        stage k on the items that reached it (a run folder each)
    labels.jsonl               one row per candidate: the deciding stage's answer, `decided_by`
    cascade.json               thresholds, the certificate, counts and costs (docs/schemas/cascade.schema.json)
    queue.jsonl                the abstained items, for `memjudge annotate`

Every run folder keeps its journal, and answers go to the cache: a rerun after a kill asks only
what no earlier run received.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memjudge.cascade.stages import Stage, make_stages
from memjudge.errors import InputError, UsageError

CASCADE_FILE = "cascade.json"
QUEUE_FILE = "queue.jsonl"
ABSTAINED = "abstained: no stage trusted its answer (in the annotation queue, queue.jsonl)"


@dataclass
class CascadeResult:
    labels: pd.DataFrame | None  # None for a dry run
    info: dict[str, Any]  # cascade.json, or the dry run's estimate
    out_dir: Path


def cascade_name(stages: list[Stage]) -> str:
    """The judge column of a cascade's labels: one rater, whichever stage decided."""
    return "cascade:" + ">".join(s.spec for s in stages)


def run_cascade(candidates, sources, stages, *, gold=None, gold_sample: int | None = None, target: float = 0.95,
                delta: float = 0.1, out: str | os.PathLike = "runs/cascade", judges_file=None, select: int | None = None,
                seed: int = 0, cache_dir=None, progress: bool = False, batch: bool = False, dry_run: bool = False,
                argv: dict | None = None) -> CascadeResult:
    """Run a certified cascade (spec §14). `stages`: judge specs (looked up in `judges_file`) or
    JudgeConfigs, cheapest first. Gold: `gold`, a gold file or frame of people's labels, or
    `gold_sample=N` random candidates labelled by the last stage (the certificate is then
    agreement with that judge). `select` candidates outside the gold items (default: as many
    as the gold items) are answered by every stage to choose the thresholds' path; 0, or one
    stage, chooses it on a third of the gold items instead."""
    from memjudge import formats as io
    from memjudge.judges import JudgeConfig
    from memjudge.stats.cascade import check_target

    check_target(target, delta)
    if (gold is None) == (gold_sample is None):
        raise UsageError("give the gold items: --gold FILE (people's labels) or --gold-sample N (the last stage's labels)")
    specs = [s.spec if isinstance(s, JudgeConfig) else s for s in stages]
    made = make_stages(specs, judges_file)
    for st, given in zip(made, stages):
        if isinstance(given, JudgeConfig):
            st.config = given
            st.check()
    out_dir = Path(out)
    cands = candidates if isinstance(candidates, pd.DataFrame) else io.read_candidates(candidates)
    srcs = sources if isinstance(sources, pd.DataFrame) else io.read_sources(sources)
    io.check_sources_cover(cands, srcs, candidates if not isinstance(candidates, pd.DataFrame) else "candidates",
                           sources if not isinstance(sources, pd.DataFrame) else "sources")
    ids = cands["assertion_id"].astype(str)
    cands = cands.assign(assertion_id=ids)
    gold_ids, gold_verdict = _gold(gold, gold_sample, ids, seed)
    rest = ids[~ids.isin(set(gold_ids))].to_numpy()
    n_select = 0 if len(made) == 1 else min(len(gold_ids) if select is None else select, rest.size)
    if n_select < 0:
        raise UsageError(f"--select must be >= 0, got {select}")
    rng = np.random.default_rng(seed + 1)
    select_ids = list(rng.choice(rest, n_select, replace=False)) if n_select else []
    calib = cands[ids.isin(set(gold_ids) | set(select_ids))]

    if dry_run:
        return CascadeResult(None, _dry_run(made, cands, calib, srcs, out_dir, cache_dir, batch), out_dir)

    def score(stage: Stage, items: pd.DataFrame, where: str):
        from memjudge.scoring.engine import RunOptions, score_run

        res = score_run(items, srcs, stage.config, replicates=stage.replicates, out=out_dir / where / stage.folder,
                        cache_dir=cache_dir, progress=progress, run=RunOptions(batch=batch, argv=argv))
        return res

    # 1. Every stage on the gold items and the selection sample.
    calib_runs = [score(st, calib, "calibration") for st in made]
    calib_answers = [st.answers(r.labels).set_index("assertion_id") for st, r in zip(made, calib_runs)]
    last = calib_answers[-1]
    if gold_verdict is None:  # the last stage's labels are the gold
        have = [a for a in gold_ids if last.loc[a, "verdict"] is not None]
        gold_verdict = {a: str(last.loc[a, "verdict"]) for a in have}
        gold_ids = have
    g_conf = np.column_stack([a.loc[gold_ids, "confidence"].to_numpy(dtype=float) for a in calib_answers])
    g_right = np.column_stack([a.loc[gold_ids, "verdict"].to_numpy() == np.array([gold_verdict[x] for x in gold_ids], dtype=object)
                               for a in calib_answers])
    from memjudge.stats.cascade import certify_cascade

    sel = None
    if select_ids:
        s_ids = [a for a in select_ids if last.loc[a, "verdict"] is not None]
        s_conf = np.column_stack([a.loc[s_ids, "confidence"].to_numpy(dtype=float) for a in calib_answers])
        s_right = np.column_stack([a.loc[s_ids, "verdict"].to_numpy() == last.loc[s_ids, "verdict"].to_numpy() for a in calib_answers])
        sel = (s_conf, s_right)
    cert = certify_cascade(g_conf, g_right, target, delta, select=sel, seed=seed)

    # 2. The stages in turn, each on what the ones before did not trust.
    remaining = cands
    rows: list[pd.DataFrame] = []
    stage_runs: list[Any] = []
    asked, decided = [], []
    for st, thr in zip(made, cert.thresholds):
        if not cert.certified or remaining.empty:
            stage_runs.append(None)
            asked.append(0)
            decided.append(0)
            continue
        res = score(st, remaining, "stages")
        stage_runs.append(res)
        ans = st.answers(res.labels).set_index("assertion_id")
        conf = ans.loc[remaining["assertion_id"], "confidence"].to_numpy(dtype=float)
        with np.errstate(invalid="ignore"):
            trusted = conf >= thr if thr is not None else np.zeros(conf.size, bool)
        took = remaining["assertion_id"].to_numpy()[trusted]
        first = res.labels[(res.labels["replicate"] == 0) & res.labels["assertion_id"].isin(set(took))].copy()
        first["verdict"] = first["assertion_id"].map(ans["verdict"])
        first["decided_by"] = st.spec
        rows.append(first)
        asked.append(len(remaining))
        decided.append(int(trusted.sum()))
        remaining = remaining[~trusted]
    name = cascade_name(made)
    labels = _labels(cands, rows, remaining, name, str(calib_runs[0].labels["rubric"].iloc[0]))
    labels["judge"] = name

    # 3. The files.
    info = _info(made, cert, cands, labels, calib_runs, stage_runs, asked, decided, target, delta, gold, gold_sample,
                 len(select_ids), out_dir)
    info["inputs"] = {"candidates": None if isinstance(candidates, pd.DataFrame) else str(candidates),
                      "sources": None if isinstance(sources, pd.DataFrame) else str(sources)}
    io.check_dir(out_dir)
    io.write_jsonl(out_dir / "labels.jsonl", io.frame_records(labels))
    queue = cands[cands["assertion_id"].isin(set(remaining["assertion_id"]))] if len(remaining) else cands.iloc[:0]
    io.write_jsonl(out_dir / QUEUE_FILE, io.frame_records(queue))
    io.write_json(out_dir / CASCADE_FILE, info)
    return CascadeResult(labels, info, out_dir)


def _gold(gold, gold_sample, ids: pd.Series, seed: int) -> tuple[list[str], dict[str, str] | None]:
    """(gold assertion ids, their verdicts or None for the last stage's)."""
    if gold_sample is not None:
        if isinstance(gold_sample, bool) or not isinstance(gold_sample, int) or gold_sample < 1:
            raise UsageError(f"--gold-sample must be an integer >= 1, got {gold_sample!r}")
        if gold_sample > len(ids):
            raise UsageError(f"--gold-sample {gold_sample} is more than the {len(ids)} candidates")
        rng = np.random.default_rng(seed)
        return sorted(rng.choice(ids.to_numpy(), gold_sample, replace=False).tolist()), None
    from memjudge.formats import read_gold

    df = gold if isinstance(gold, pd.DataFrame) else read_gold(gold)
    where = gold if not isinstance(gold, pd.DataFrame) else "gold"
    df = df.assign(assertion_id=df["assertion_id"].astype(str))
    known = set(ids)
    stray = [a for a in df["assertion_id"] if a not in known]
    if stray:
        raise InputError(where, f"{len(set(stray))} gold assertion ids are not among the candidates (first: {stray[0]!r})")
    # several annotators: the majority verdict; a tie leaves the item out
    verdicts: dict[str, str] = {}
    for aid, grp in df.groupby("assertion_id", sort=True):
        counts = grp["verdict"].value_counts()
        if len(counts) == 1 or counts.iloc[0] > counts.iloc[1]:
            verdicts[str(aid)] = str(counts.index[0])
    return sorted(verdicts), verdicts


def _labels(cands: pd.DataFrame, decided_rows: list[pd.DataFrame], remaining: pd.DataFrame, name: str, rubric: str) -> pd.DataFrame:
    from memjudge.formats import LABEL_COLUMNS

    parts = [r for r in decided_rows if not r.empty]
    abst = pd.DataFrame({"assertion_id": remaining["assertion_id"].to_numpy(), "persona_id": remaining["persona_id"].to_numpy(),
                         "category": remaining["category"].to_numpy()})
    for col in LABEL_COLUMNS:
        if col not in abst.columns:
            abst[col] = None
    abst["replicate"] = 0
    abst["error"] = ABSTAINED
    abst["decided_by"] = None
    abst["judge"] = name
    abst["rubric"] = rubric
    frame = pd.concat([*(p[LABEL_COLUMNS + ["decided_by"]] for p in parts), abst[LABEL_COLUMNS + ["decided_by"]]],
                      ignore_index=True) if parts else abst[LABEL_COLUMNS + ["decided_by"]]
    order = {a: i for i, a in enumerate(cands["assertion_id"])}
    frame = frame.assign(_o=frame["assertion_id"].map(order)).sort_values("_o", kind="stable").drop(columns="_o")
    frame = frame.astype({"judge_score": object, "verdict": object, "decided_by": object})
    frame["judge_score"] = [None if v is None or (isinstance(v, float) and np.isnan(v)) else v for v in frame["judge_score"]]
    return frame.reset_index(drop=True)


def _usage_cost(stage: Stage, frames: list[pd.DataFrame]) -> tuple[int, float | None]:
    """(calls, cost) of the distinct answers a stage gave over its runs (an item asked in the
    calibration and again in its stage run is one call: the second is the cache's)."""
    from memjudge.scoring.cost import price_usd

    if not frames:
        return 0, price_usd(stage.config, {}, 0)
    rows = pd.concat([f[["assertion_id", "replicate", "usage"]] for f in frames], ignore_index=True)
    rows = rows.drop_duplicates(["assertion_id", "replicate"])
    tokens: dict[str, int] = {}
    for u in rows["usage"]:
        if isinstance(u, dict):
            for k, v in u.items():
                if isinstance(v, (int, float)):
                    tokens[k] = tokens.get(k, 0) + int(v)
    return len(rows), price_usd(stage.config, tokens, len(rows))


def _info(stages, cert, cands, labels, calib_runs, stage_runs, asked, decided, target, delta, gold, gold_sample, n_select,
          out_dir) -> dict[str, Any]:
    n = len(cands)
    stage_info = []
    costs: list[float | None] = []
    last_calls, last_cost = 0, None
    for st, cal, run, a, d, thr in zip(stages, calib_runs, stage_runs, asked, decided, cert.thresholds):
        frames = [cal.labels] + ([run.labels] if run is not None else [])
        calls, cost = _usage_cost(st, frames)
        costs.append(cost)
        last_calls, last_cost = calls, cost
        stage_info.append({"judge": st.spec, "confidence": st.confidence, "threshold": thr, "asked": a, "decided": d,
                           "calls": calls, "cost_usd": cost, "run": str(out_dir / "stages" / st.folder) if run is not None else None})
    total = None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))
    top = None if last_cost is None or last_calls == 0 else last_cost / last_calls * n * stages[-1].replicates
    n_decided = int(labels["decided_by"].notna().sum())
    people = gold is not None
    who = "the gold labels (people's)" if people else f"the last stage, {stages[-1].spec} (agreement with the strongest judge, not with people)"
    cal = {k: v for k, v in cert.as_dict().items() if k not in ("decided_by", "target", "delta", "thresholds")}
    if cert.certified:
        guarantee = (f"With probability at least {1 - delta:.0%} over the draw of the {cert.n} gold items, the verdicts the cascade "
                     f"trusts agree with {who} on at least {target:.1%} of such items (Clopper-Pearson bound "
                     f"{cal['agreement_bound']:.2%} from {cert.errors} wrong of {cert.trusted} trusted gold items). "
                     f"Not certified: any single item, items unlike the gold items, the {n - n_decided} abstained items "
                     f"(left to people){'' if people else ', or agreement with people'}.")
    else:
        guarantee = f"Nothing is certified: {cert.message}."
    return {
        "target": target, "delta": delta, "certified": cert.certified,
        "gold": {"kind": "people" if people else "last_stage", "file": None if gold is None or isinstance(gold, pd.DataFrame) else str(gold),
                 "n": cert.n, "sample": gold_sample},
        "calibration": {**cal, "select_items": n_select},
        "stages": stage_info,
        "candidates": n, "decided": n_decided, "decided_share": n_decided / n if n else 0.0, "abstained": n - n_decided,
        "queue": str(out_dir / QUEUE_FILE),
        "cost_usd": total, "top_judge_cost_usd": top,
        "cost_share": None if total is None or not top else total / top,
        "guarantee": guarantee,
    }


def _dry_run(stages, cands, calib, srcs, out_dir, cache_dir, batch) -> dict[str, Any]:
    from memjudge.scoring.cost import has_prices
    from memjudge.scoring.engine import RunOptions, score_run

    for st in stages:
        if not has_prices(st.config):
            raise UsageError(f"stage {st.index + 1} ({st.spec}): no prices for a cost: set price_input_per_mtok / "
                             "price_output_per_mtok or price_per_call in --judges-file")
    def est(st: Stage, items, where: str) -> tuple[float, int]:
        # as if nothing were cached: the comparison is with the last stage asked about every item
        r = score_run(items, srcs, st.config, replicates=st.replicates, out=out_dir / where / st.folder, cache_dir=cache_dir,
                      dry_run=True, progress=False, run=RunOptions(batch=batch, use_cache=False, write=batch))
        return r.summary.estimated_cost_usd or 0.0, r.summary.calls

    rows = []
    for st in stages:
        c_cost, c_calls = est(st, calib, "calibration")
        a_cost, a_calls = est(st, cands, "stages")
        rows.append({"judge": st.spec, "calibration_calls": c_calls, "calibration_cost_usd": c_cost,
                     "all_items_calls": a_calls, "all_items_cost_usd": a_cost})
    calib_total = sum(r["calibration_cost_usd"] for r in rows)
    return {
        "dry_run": True, "candidates": len(cands), "calibration_items": len(calib), "stages": rows,
        "calibration_cost_usd": calib_total,
        # the calibration items' answers are the cache's when the stages reach them again
        "at_least_usd": calib_total + rows[0]["all_items_cost_usd"] - rows[0]["calibration_cost_usd"],
        "at_most_usd": sum(r["all_items_cost_usd"] for r in rows),
        "top_judge_cost_usd": rows[-1]["all_items_cost_usd"],
    }


__all__ = ["CASCADE_FILE", "QUEUE_FILE", "CascadeResult", "cascade_name", "run_cascade"]
