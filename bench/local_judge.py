"""Benchmark of the embedded judge `local:qwen2.5-coder-1.5b`: speed and quality.

    python bench/local_judge.py scores sales     # judge_scores of SummEdits sales calls (resumable)
    python bench/local_judge.py scores qmsum     # ... of SummEdits QMSum (calibration data)
    python bench/local_judge.py scores corpus    # ... of a generated corpus (memjudge.simulate)
    python bench/local_judge.py speed            # assertions/minute with and without prefix reuse
    python bench/local_judge.py quality          # calibrate on QMSum (+corpus), report held out on sales calls

Scores are computed once and saved under bench/results/ (with the rubric id and the weights'
hash), so calibration experiments never re-run the model. Quality is printed beside the
published SummEdits balanced accuracies (../shared/data/summedits/README.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.calibrate import auc, balanced_accuracy, best_threshold, calibrate_scores  # noqa: E402
from memjudge.judges.base import Prompt  # noqa: E402
from memjudge.judges.local import DEFAULT_MODEL, PACKAGED, load_model, packaged_model_path  # noqa: E402

SHARED = Path(os.environ.get("MEMJUDGE_SHARED_DATA", ROOT.parent / "shared" / "data"))
RESULTS = ROOT / "bench" / "results"
SUMMEDITS = {"sales": "summedits_sales_call.json", "qmsum": "summedits_qmsumm.json"}
# Published balanced accuracies on the Sales Call domain (SummEdits README, zero-shot).
PUBLISHED_SALES = {"Mistral-7b": 63.4, "Llama2-13b": 63.1, "Vicuna-13b": 57.9, "ChatGPT": 79.4,
                   "Claude v2": 81.0, "GPT-4": 87.9, "Human": 91.8}


def summedits_items(name: str) -> pd.DataFrame:
    """SummEdits as memjudge rows: persona = one source document, assertion = one summary."""
    raw = json.loads((SHARED / "summedits" / SUMMEDITS[name]).read_text(encoding="utf-8"))
    docs: dict[str, str] = {}
    rows = []
    for item in raw:
        doc_id = docs.setdefault(item["doc"], f"{name}-doc{len(docs):02d}")
        rows.append({
            "assertion_id": item["id"], "persona_id": doc_id, "category": "summary",
            "text": item["summary"], "source": item["doc"],
            "gold": "supported" if str(item["label"]) == "1" else "unsupported",
        })
    return pd.DataFrame(rows)


def corpus_items(personas: int, seed: int) -> pd.DataFrame:
    from memjudge.simulate import simulate

    from memjudge.demo import CANDIDATES_PER_PERSONA

    # The demo's corpus shape (paper preset scaled to ~25 candidates per persona), another seed.
    scale = {"corpus": {"candidates": CANDIDATES_PER_PERSONA * 100, "personas": 100}}
    corpus = simulate(personas=personas, seed=seed, config=scale)
    cand, src, gold = corpus.candidates, corpus.sources, corpus.labels
    df = cand.merge(src[["persona_id", "source"]], on="persona_id")
    g = gold[["assertion_id", "verdict"]].rename(columns={"verdict": "gold"})
    return df.merge(g, on="assertion_id")[["assertion_id", "persona_id", "category", "text", "source", "gold"]]


def render(rubric, row) -> Prompt:
    return rubric.render_support(source=row["source"], assertion=row["text"], category=row["category"],
                                 persona_id=row["persona_id"], assertion_id=row["assertion_id"])


def load_default_model():
    return load_model(packaged_model_path(DEFAULT_MODEL), n_ctx=8192, n_threads=None, n_batch=512)


def results_path(dataset: str) -> Path:
    return RESULTS / f"local_judge_scores_{dataset}.jsonl"


def cmd_scores(args) -> None:
    from memjudge.rubrics import load_rubric

    rubric = load_rubric("support")
    items = summedits_items(args.dataset) if args.dataset in SUMMEDITS else corpus_items(args.personas, args.seed)
    if args.per_doc:
        # A fixed pseudo-random subset per source (ids hashed), for a shared machine's time budget.
        items = items.assign(_h=items["assertion_id"].map(lambda a: hashlib.sha256(a.encode()).hexdigest()))
        items = items.sort_values(["persona_id", "_h"]).groupby("persona_id").head(args.per_doc).drop(columns="_h")
    items = items.sort_values(["persona_id", "assertion_id"], kind="stable")
    out = results_path(args.dataset)
    out.parent.mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    if out.exists():
        for line in out.read_text().splitlines():
            row = json.loads(line)
            if row.get("rubric") != rubric.id or row.get("weights_sha256") != PACKAGED[DEFAULT_MODEL].sha256:
                sys.exit(f"{out} was scored with another rubric/model ({row.get('rubric')}); move it away first")
            done.add(row["assertion_id"])
    model = load_default_model()
    todo = items[~items["assertion_id"].isin(done)]
    print(f"{args.dataset}: {len(items)} items, {len(done)} already scored, {len(todo)} to go", flush=True)
    t_all = time.perf_counter()
    with open(out, "a", encoding="utf-8") as f:
        for i, row in enumerate(todo.to_dict("records"), start=1):
            t = time.perf_counter()
            s = model.score(render(rubric, row))
            rec = {
                "assertion_id": row["assertion_id"], "persona_id": row["persona_id"], "category": row["category"],
                "gold": row["gold"], "judge_score": s.log_odds, "logp_supported": s.logp_supported,
                "logp_unsupported": s.logp_unsupported, "prompt_tokens": s.prompt_tokens,
                "reused_tokens": s.reused_tokens, "seconds": round(time.perf_counter() - t, 3),
                "rubric": rubric.id, "weights_sha256": PACKAGED[DEFAULT_MODEL].sha256,
            }
            f.write(json.dumps(rec) + "\n")
            f.flush()
            if i % 20 == 0:
                rate = i / (time.perf_counter() - t_all) * 60
                print(f"  {i}/{len(todo)}  {rate:.1f} assertions/min", flush=True)


def cmd_speed(args) -> None:
    """The same items scored twice: cold (KV cache dropped before each) and warm (persona order,
    prefix kept). Prints both rates and their ratio."""
    from memjudge.rubrics import load_rubric

    rubric = load_rubric("support")
    items = summedits_items("sales").sort_values(["persona_id", "assertion_id"], kind="stable")
    docs = items["persona_id"].unique()[: args.docs]
    items = items[items["persona_id"].isin(docs)].groupby("persona_id").head(args.per_doc)
    prompts = [render(rubric, r) for r in items.to_dict("records")]
    model = load_default_model()
    model.forget()
    t = time.perf_counter()
    cold = []
    for p in prompts:
        model.forget()
        cold.append(model.score(p, reuse=False).log_odds)
    t_cold = time.perf_counter() - t
    model.forget()
    t = time.perf_counter()
    warm = [model.score(p).log_odds for p in prompts]
    t_warm = time.perf_counter() - t
    n = len(prompts)
    tokens = np.mean([model.llm.tokenize(model.render(p).encode(), add_bos=False, special=True).__len__() for p in prompts])
    print(f"items: {n} ({len(docs)} sources x {args.per_doc} assertions, mean prompt {tokens:.0f} tokens), "
          f"threads: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    print(f"cold (no prefix reuse):  {n / t_cold * 60:6.1f} assertions/min  ({t_cold / n:.2f} s each)")
    print(f"warm (prefix reused):    {n / t_warm * 60:6.1f} assertions/min  ({t_warm / n:.2f} s each)")
    print(f"speed-up from prefix reuse: {t_cold / t_warm:.2f}x")
    diff = float(np.max(np.abs(np.array(cold) - np.array(warm))))
    print(f"max |log-odds cold - warm|: {diff:.2e} (prefix reuse must not change scores)")


def load_scores(dataset: str) -> pd.DataFrame:
    path = results_path(dataset)
    if not path.exists():
        raise SystemExit(f"{path} missing: run `python bench/local_judge.py scores {dataset}` first")
    return pd.read_json(path, lines=True)


def cluster_interval(df, threshold, B=2000, seed=0) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% percentile intervals of AUC and balanced accuracy, resampling source documents (summaries
    of one document are not independent)."""
    rng = np.random.default_rng(seed)
    groups = [g for _, g in df.groupby("persona_id")]
    aucs, bas = [], []
    for _ in range(B):
        sample = pd.concat([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        s, y = sample["judge_score"].to_numpy(float), (sample["gold"] == "supported").to_numpy()
        if y.all() or (~y).all():
            continue
        aucs.append(auc(s, y))
        bas.append(balanced_accuracy(s, y, threshold))
    return tuple(np.percentile(aucs, [2.5, 97.5])), tuple(np.percentile(bas, [2.5, 97.5]))


def quality_row(name, df, threshold) -> dict:
    s, y = df["judge_score"].to_numpy(float), (df["gold"] == "supported").to_numpy()
    (a_lo, a_hi), (b_lo, b_hi) = cluster_interval(df, threshold)
    return {"data": name, "n": len(df), "docs": df["persona_id"].nunique(), "supported": int(y.sum()),
            "AUC": auc(s, y), "AUC 95% CI": f"{a_lo:.3f}-{a_hi:.3f}",
            "BA at calibrated t": balanced_accuracy(s, y, threshold), "BA 95% CI": f"{b_lo:.3f}-{b_hi:.3f}",
            "best BA (in-sample t)": best_threshold(s, y)[1], "in-sample t": best_threshold(s, y)[0]}


def cmd_quality(args) -> None:
    calib_sets = [d for d in args.calibrate_on.split(",") if d and results_path(d).exists()]
    calib = pd.concat([load_scores(d) for d in calib_sets], ignore_index=True)
    # The same choice `memjudge calibrate` makes (balanced accuracy, pooled calibration items).
    cal = calibrate_scores(calib["judge_score"], calib["gold"] == "supported", DEFAULT_MODEL)
    t_cal = round(cal.threshold, 2)
    print(f"calibration on {'+'.join(calib_sets)} ({len(calib)} items): threshold {t_cal:+.2f} "
          f"(balanced accuracy {cal.balanced_accuracy:.3f}, AUC {cal.auc:.3f}); "
          f"packaged default: {PACKAGED[DEFAULT_MODEL].threshold:+.2f}")
    rows = [quality_row(d, load_scores(d), t_cal) for d in calib_sets]
    held = [d for d in ("sales",) if d not in calib_sets and results_path(d).exists()]
    rows += [quality_row(d + " (held out)", load_scores(d), t_cal) for d in held]
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if held:
        sales = load_scores("sales")
        ba = 100 * balanced_accuracy(sales["judge_score"], sales["gold"] == "supported", t_cal)
        print(f"\nSummEdits Sales Call, balanced accuracy (held out): local:{DEFAULT_MODEL} {ba:.1f}")
        for name, v in PUBLISHED_SALES.items():
            print(f"  {name:<11} {v:5.1f}   ratio local/{name}: {ba / v:.2f}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scores")
    s.add_argument("dataset", choices=["sales", "qmsum", "corpus"])
    s.add_argument("--personas", type=int, default=12)
    s.add_argument("--seed", type=int, default=1)
    s.add_argument("--per-doc", type=int, default=0, help="score only this many items per source (0 = all)")
    s.set_defaults(func=cmd_scores)
    sp = sub.add_parser("speed")
    sp.add_argument("--docs", type=int, default=3)
    sp.add_argument("--per-doc", type=int, default=5)
    sp.set_defaults(func=cmd_speed)
    q = sub.add_parser("quality")
    q.add_argument("--calibrate-on", default="qmsum,corpus")
    q.set_defaults(func=cmd_quality)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
