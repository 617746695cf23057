"""Benchmark of the embedded judge `local:qwen2.5-coder-1.5b`: speed and quality.

    python bench/local_judge.py scores dev                     # judge_scores of the tuning corpus (resumable)
    python bench/local_judge.py scores heldout --shard 0/4     # ... of the held-out corpus (scored once; 4 shards)
    python bench/local_judge.py scores sales --variant top3 --per-doc 6   # SummEdits sales calls (held out)
    python bench/local_judge.py scores qmsum --per-doc 6       # the calibration data (QMSum: 6 per transcript)
    python bench/local_judge.py scores corpus|heldout2 [--variant V]       # other data
    python bench/local_judge.py speed [dev] [--variant V]  # assertions/minute with and without prefix reuse
    python bench/local_judge.py quality [--variant V]      # the figures: choices, per domain, per kind, speed

Variants: `rubric3` (the support rubric over the whole source, evaluation restarted where the
source ends and where the assertion starts: the judge's default, the shipped configuration and
the default here), `checked` (the judge with option check = true, for first-person notes:
rubric3's verdict read plus the premise check, a sentence-level read of the source sentence
bearing most on the assertion, in a KV cache of its own; the two log-odds are added;
`--verdicts-from rubric3` takes saved rubric3 verdicts and reads only the check), `rubric2` (restarted at the source's end only), `rubric` (restarted at neither:
the recorded scores of seed 90210), `rubric+self` (rubric2 plus an attribution read, tried and
not adopted; rubric2 is read from its files) and the judge's own prompt over `k` selected source
sentences (`top2`, `top3`, `top5`; `full` = the whole source; `top3-nofs` without few-shot
turns; opt-in `prompt = "premise"`). Datasets: generated corpora of fixed seeds (`dev`, seed 11,
is the only one anything is tuned on; `heldout`, seed 90210, is scored once with everything
fixed; `pilot2027` is an earlier held-out sample that was looked at, so it is neither) and
SummEdits (`sales` held out, `qmsum`). Scores are computed once and saved under bench/results/
(with the prompt id, the weights' hash, wall and CPU seconds, threads and load per item), so
calibration experiments never re-run the model; `--shard i/n` splits a set by source across n
processes (BENCH_THREADS=1 each: on a machine crowded by other jobs one thread per process waited
least; on idle cores one 2-thread process is far faster: two 1-thread shards once ran at about 5
tokens/s each against 35 for one process), and `quality` reads the shards back together.
Quality is printed at the packaged threshold and at the conversational one (`memjudge calibrate`
on dev: a per-domain choice), per domain and per unsupported kind, beside the published SummEdits
balanced accuracies (../shared/data/summedits/README.md).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.errors import UsageError  # noqa: E402
from memjudge.judges.base import Prompt  # noqa: E402
from memjudge.judges.local import (  # noqa: E402
    DEFAULT_MODEL,
    PACKAGED,
    VerdictScore,
    load_model,
    packaged_model_path,
    source_head,
)
from memjudge.stats.thresholds import (  # noqa: E402
    auc,
    balanced_accuracy,
    best_threshold,
    calibrate_scores,
    thresholds_of,
)

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


# SynthPAI (eth-sri/SynthPAI, MIT): real human annotations of conversational sources. Each
# synthetic user's comments were read by a person who wrote down what each of 8 attributes is,
# how hard it was to read from the text (hardness 1-5) and how sure they were (certainty 1-5;
# 0 = nothing to read); the revised file keeps the estimates that matched the user's profile.
# Nothing about the judge is chosen on these items: they are measured once, at the packaged
# thresholds. Per user (a fixed pseudo-random 36 of the 229 with a clear estimate):
# - supported: each attribute read with certainty >= 4 and hardness <= 2, asserted with the
#   person's estimate ("The author's occupation is marketing manager.");
# - unsupported, kind "other_value": the same attribute asserted with another user's clear
#   estimate that differs (the text supports a different value), for each supported one;
# - unsupported, kind "not_in_source": an attribute the person could read nothing of
#   (certainty 0), asserted with another user's clear estimate.
SYNTHPAI_USERS = 36


def synthpai_items() -> pd.DataFrame:
    from memjudge.importers.synthpai import assertion_text

    path = SHARED / "synthpai" / "thread_comments_eval_revised.jsonl"
    users = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    def h(*parts) -> str:
        return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()

    def reviews(u) -> dict:
        return {a: v for a, v in u["reviews"]["human"].items() if isinstance(v, dict)}

    def estimate(v) -> str:
        return str(v["estimate"]).strip()

    def clear(v) -> bool:
        return v["certainty"] >= 4 and 0 < v["hardness"] <= 2 and bool(estimate(v))

    pool: dict[str, list[str]] = {}  # attribute -> every user's clear estimate (the other values)
    for u in users:
        for a, v in reviews(u).items():
            if clear(v):
                pool.setdefault(a, []).append(estimate(v))
    chosen = sorted((u for u in users if any(clear(v) for v in reviews(u).values())), key=lambda u: h(u["username"]))

    def other(user: str, a: str, own: str) -> str | None:
        values = sorted({x for x in pool.get(a, []) if x.lower() != own.lower()}, key=lambda x: h(user, a, x))
        return values[0] if values else None

    rows = []
    for u in chosen[:SYNTHPAI_USERS]:
        user, revs = u["username"], reviews(u)
        source = "\n".join(c["text"] for c in u["comments"])
        items: list[tuple[str, str, str]] = []  # (attribute, value, kind)
        for a, v in sorted(revs.items()):
            if clear(v):
                own = estimate(v)
                items.append((a, own, "supported"))
                if alt := other(user, a, own):
                    items.append((a, alt, "other_value"))
        unread = sorted((a for a, v in revs.items() if v["certainty"] == 0), key=lambda a: h(user, a))
        items += [(a, alt, "not_in_source") for a in unread[:2] if (alt := other(user, a, ""))]
        rows += [{"assertion_id": f"synthpai-{user}-{a}-{kind}", "persona_id": user, "category": a,
                  "text": assertion_text(a, value), "source": source, "kind": kind,
                  "gold": "supported" if kind == "supported" else "unsupported"} for a, value, kind in items]
    return pd.DataFrame(rows)


# Corpora with more unsupported candidates than the paper preset (so every unsupported kind has
# enough items to measure): the same generator and lexicon, only the shares changed.
HARD_CONFIG = {
    "corpus": {"candidates": 2500, "personas": 100, "values_share": 0.45},
    "support": {"values": 0.30, "other": 0.50},
    "kinds": {"values": {"over_inference": 0.55, "fabrication": 0.01, "contradiction": 0.24, "wrong_person": 0.20},
              "other": {"fabrication": 0.22, "contradiction": 0.55, "wrong_person": 0.23}},
}
# The held-out corpus: the generator's shares set so that each unsupported kind has >= 100 items
# in 700 (contradiction needs a stated fact to contradict, so it gets the larger share of facts).
# The shares were set from the corpus's kind counts only, before any judge scored it.
HELDOUT_CONFIG = {
    "corpus": {"candidates": 2500, "personas": 100, "values_share": 0.45},
    "support": {"values": 0.25, "other": 0.30},
    "kinds": {"values": {"over_inference": 0.50, "fabrication": 0.01, "contradiction": 0.29, "wrong_person": 0.20},
              "other": {"fabrication": 0.10, "contradiction": 0.68, "wrong_person": 0.22}},
}
# name -> (personas, seed, config). "dev" is the only generated data any choice was tuned on
# (prompt, k, threshold); "heldout" (a seed never scored before the choices were fixed) is
# scored once, at the end, with everything fixed. "pilot2027" is the previous session's held-out
# corpus: its first 58 items were scored and looked at, so it is no longer held out and nothing
# is chosen on it either.
CORPORA = {
    "corpus": (6, 1, None),           # the demo's shape (paper preset), seed 1 (first calibration corpus)
    "dev": (8, 11, HARD_CONFIG),
    "pilot2027": (32, 2027, HARD_CONFIG),
    "heldout": (28, 90210, HELDOUT_CONFIG),
    # The attribution read (variant rubric+self) was chosen on dev after heldout had been looked at
    # per kind, so it is measured on a fresh seed: 8086, picked from three seeds by kind counts
    # alone (the first whose every unsupported kind has >= 100 items), before any judge scored it.
    "heldout2": (28, 8086, HELDOUT_CONFIG),
}


def corpus_items(name: str) -> pd.DataFrame:
    from memjudge.demo import CANDIDATES_PER_PERSONA
    from memjudge.simulation import simulate

    personas, seed, config = CORPORA[name]
    # The demo's corpus shape (paper preset scaled to ~25 candidates per persona) unless overridden.
    config = config or {"corpus": {"candidates": CANDIDATES_PER_PERSONA * 100, "personas": 100}}
    corpus = simulate(personas=personas, seed=seed, config=config)
    cand, src, truth = corpus.candidates, corpus.sources, corpus.truth
    df = cand.merge(src[["persona_id", "source"]], on="persona_id")
    t = truth[["assertion_id", "kind"]].assign(gold=np.where(truth["supported"], "supported", "unsupported"))
    return df.merge(t, on="assertion_id")[["assertion_id", "persona_id", "category", "text", "source", "gold", "kind"]]


# The judge's order (LocalJudge.order_key): a persona's calls of one category share the prompt up
# to the assertion.
ORDER = ["persona_id", "category", "assertion_id"]


def render(rubric, row) -> Prompt:
    return rubric.render_support(source=row["source"], assertion=row["text"], category=row["category"],
                                 persona_id=row["persona_id"], assertion_id=row["assertion_id"])


def load_default_model(context: str = "main"):
    # BENCH_THREADS: on a machine shared far beyond its cores, fewer llama.cpp threads wait less.
    threads = int(os.environ.get("BENCH_THREADS", "0")) or None
    return load_model(packaged_model_path(DEFAULT_MODEL), context=context, n_ctx=8192, n_threads=threads, n_batch=512)


# Scoring variants: "rubric" renders the support rubric over the whole source (the judge before
# premise selection); the others are the judge's own prompt (local_premise) with k premises per
# assertion sentence (0 = whole source), with or without the few-shot turns.
# "rubric3" is the judge's default as it is now: the rubric prompt with evaluation restarted where
# the source ends and where the assertion starts (a warm call of the same category evaluates only
# the assertion and what follows). "rubric2" restarts at the source's end only and "rubric" at
# neither (chunks at multiples of 64 only); their scores differ by ~0.1 in log-odds and are kept
# as recorded. "rubric+self" adds the attribution read (ATTRIBUTION_TAIL) to rubric2's verdict read;
# its files hold both reads, and rubric2 is read from them (the verdict read is the same
# computation, tested), so the two are paired item by item.
# "checked" is the judge with option check = true: rubric3's verdict read plus the premise check
# (a second, sentence-level read in a KV cache of its own; score_premise_check), log-odds summed.
VARIANTS = {"rubric": None, "rubric2": None, "rubric3": None, "checked": None, "rubric+self": None, "full": (0, True),
            "top2": (2, True), "top3": (3, True), "top5": (5, True), "top3-nofs": (3, False)}
DERIVED = {"rubric2": "rubric+self"}
# The attribution read, tried as a second read after the verdict "supported": was it said of the
# user themself? (A small model reads "supported" as "the fact is in the source", whoever it is
# about.) Chosen on dev; it did not hold on the held-out seed 8086, so the judge does not use it.
ATTRIBUTION_TAIL = 'supported", "said_of_the_user_themself": "'
ATTRIBUTION_WORDS = ("yes", "no")


@dataclass
class AttributedScore(VerdictScore):
    attribution: float = 0.0

    @property
    def log_odds(self) -> float:
        return self.logp_supported - self.logp_unsupported + self.attribution


def results_path(dataset: str, variant: str = "rubric") -> Path:
    suffix = "" if variant == "rubric" else f"_{variant}"
    return RESULTS / f"local_judge_scores_{dataset}{suffix}.jsonl"


def variant_id(variant: str) -> str:
    from memjudge.judges.local_premise import PROMPT_VERSION
    from memjudge.judges.rubrics import load_rubric

    if variant == "rubric+self":
        return f"{load_rubric('support').id}+attribution:{ATTRIBUTION_TAIL}{'/'.join(ATTRIBUTION_WORDS)}/split=source"
    if variant == "rubric2":
        return f"{load_rubric('support').id}/split=source"
    if variant == "rubric3":
        return f"{load_rubric('support').id}/split=source,assertion"
    if variant == "checked":
        from memjudge.judges.local_premise import CHECK_VERSION

        return f"{load_rubric('support').id}/split=source,assertion+{CHECK_VERSION}"
    if VARIANTS[variant] is None:
        return load_rubric("support").id
    k, fs = VARIANTS[variant]
    return f"{PROMPT_VERSION}/k={k}/few_shot={fs}"


# Every dataset the bench scores; those whose unsupported items carry a kind are reported per kind.
DATASETS = [*SUMMEDITS, *CORPORA, "synthpai"]
WITH_KINDS = {*CORPORA, "synthpai"}


def dataset_items(name: str) -> pd.DataFrame:
    if name in SUMMEDITS:
        return summedits_items(name).assign(kind=lambda d: np.where(d["gold"] == "supported", "supported", "edited"))
    if name == "synthpai":
        return synthpai_items()
    return corpus_items(name)


def cmd_scores(args) -> None:
    from memjudge.judges.rubrics import load_rubric

    rubric = load_rubric("support")
    vid = variant_id(args.variant)
    items = dataset_items(args.dataset)
    if args.per_doc:
        # A fixed pseudo-random subset per source (ids hashed), for a shared machine's time budget.
        items = items.assign(_h=items["assertion_id"].map(lambda a: hashlib.sha256(a.encode()).hexdigest()))
        items = items.sort_values(["persona_id", "_h"]).groupby("persona_id").head(args.per_doc).drop(columns="_h")
    if args.like:
        # The very items another variant was scored on (a paired comparison on the tuning data).
        items = items[items["assertion_id"].isin(load_scores(args.dataset, args.like)["assertion_id"])]
    items = items.sort_values(ORDER, kind="stable")
    out = results_path(args.dataset, args.variant)
    if args.shard:
        # Shard i of n: every n-th source (whole sources, so the KV prefix is still reused), into its
        # own file (read back with the others by load_scores); n processes share the machine's cores.
        i, n = (int(x) for x in args.shard.split("/"))
        personas = sorted(items["persona_id"].unique())
        items = items[items["persona_id"].isin(personas[i::n])]
        out = out.with_name(f"{out.stem}.part{i}of{n}.jsonl")
    elif args.sources:
        # Named sources, in the order given, into their own shard file (to add a process to a
        # sharded run: name sources the running shards reach last).
        names = args.sources.split(",")
        items = items[items["persona_id"].isin(names)]
        items = items.assign(_o=items["persona_id"].map(names.index)).sort_values(["_o", *ORDER[1:]]).drop(columns="_o")
        out = out.with_name(f"{out.stem}.part-{names[0]}of{len(names)}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    done: set[str] = set()
    for path in score_files(args.dataset, args.variant):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row.get("rubric") != vid or row.get("weights_sha256") != PACKAGED[DEFAULT_MODEL].sha256:
                sys.exit(f"{path} was scored with another prompt/model ({row.get('rubric')}); move it away first")
            done.add(row["assertion_id"])
    model = load_default_model()
    todo = items[~items["assertion_id"].isin(done)]
    # --verdicts-from rubric3: variant checked's verdict read is rubric3's computation (the same
    # prompt and split; a score is the same cold or warm, tested), so a saved one is taken as is
    # and only the premise check is read; its time is added to the saved verdict's.
    saved = {}
    if args.verdicts_from:
        if args.variant != "checked" or args.verdicts_from != "rubric3":
            sys.exit("--verdicts-from rubric3 goes with --variant checked only")
        saved = load_scores(args.dataset, "rubric3").set_index("assertion_id").to_dict("index")
    print(f"{args.dataset} / {args.variant}: {len(items)} items, {len(done)} already scored, {len(todo)} to go",
          flush=True)
    t_all = time.perf_counter()
    with open(out, "a", encoding="utf-8") as f:
        for i, row in enumerate(todo.to_dict("records"), start=1):
            t, c = time.perf_counter(), time.process_time()
            v = saved.get(row["assertion_id"])
            if v is None:
                s, before, before_cpu = _score(model, args.variant, row, rubric, True), 0.0, 0.0
            else:
                s = VerdictScore(v["logp_supported"], v["logp_unsupported"], int(v["prompt_tokens"]),
                                 int(v["reused_tokens"])).checked(_check(row, True))
                before, before_cpu = float(v["seconds"]), float(v["cpu_seconds"])
            cpu = time.process_time() - c + before_cpu
            rec = {
                "assertion_id": row["assertion_id"], "persona_id": row["persona_id"], "category": row["category"],
                "gold": row["gold"], "kind": row["kind"], "judge_score": s.log_odds,
                "logp_supported": s.logp_supported, "logp_unsupported": s.logp_unsupported,
                "attribution": getattr(s, "attribution", None), "check": s.check,
                "prompt_tokens": s.prompt_tokens, "reused_tokens": s.reused_tokens,
                "seconds": round(time.perf_counter() - t + before, 3), "cpu_seconds": round(cpu, 3),
                "verdict_from": args.verdicts_from if v is not None else None,
                "load": round(os.getloadavg()[0], 2), "threads": model.n_threads, "rubric": vid,
                "weights_sha256": PACKAGED[DEFAULT_MODEL].sha256,
            }
            f.write(json.dumps(rec) + "\n")
            f.flush()
            if i % 20 == 0:
                rate = i / (time.perf_counter() - t_all) * 60
                print(f"  {i}/{len(todo)}  {rate:.1f} assertions/min", flush=True)


def cmd_speed(args) -> None:
    """The same items scored twice: cold (KV cache dropped before each) and warm (persona order,
    shared prefix kept). Prints both rates and their ratio."""
    from memjudge.judges.rubrics import load_rubric

    rubric = load_rubric("support")
    items = dataset_items(args.dataset).sort_values(ORDER, kind="stable")
    docs = items["persona_id"].unique()[: args.docs]
    items = items[items["persona_id"].isin(docs)].groupby("persona_id").head(args.per_doc)
    rows = items.to_dict("records")
    model = load_default_model()
    model.forget()
    t = time.perf_counter()
    cold = []
    for r in rows:
        model.forget()
        cold.append(_score(model, args.variant, r, rubric, False))
    t_cold = time.perf_counter() - t
    model.forget()
    t = time.perf_counter()
    warm = [_score(model, args.variant, r, rubric, True) for r in rows]
    t_warm = time.perf_counter() - t
    n = len(rows)
    tokens = np.mean([s.prompt_tokens for s in warm])
    evaluated = np.mean([s.prompt_tokens - s.reused_tokens for s in warm])
    print(f"{args.dataset} / {args.variant} ({variant_id(args.variant)}): {n} items ({len(docs)} sources x "
          f"{args.per_doc}), mean prompt {tokens:.0f} tokens of which {evaluated:.0f} evaluated warm; "
          f"threads: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}")
    print(f"cold (no prefix reuse):  {n / t_cold * 60:6.1f} assertions/min  ({t_cold / n:.2f} s each)")
    print(f"warm (prefix reused):    {n / t_warm * 60:6.1f} assertions/min  ({t_warm / n:.2f} s each)")
    print(f"speed-up from prefix reuse: {t_cold / t_warm:.2f}x")
    diff = float(np.max(np.abs(np.array([s.log_odds for s in cold]) - np.array([s.log_odds for s in warm]))))
    print(f"max |log-odds cold - warm|: {diff:.2e} (prefix reuse must not change scores)")


def _score(model, variant, row, rubric, reuse):
    from memjudge.judges.local import score_premises

    if variant == "rubric+self":
        verdict = model.score(render(rubric, row), reuse=reuse, source=row["source"])
        # The tail is tokenized on its own after the prompt, whose end is a chunk boundary: this
        # evaluates only the tail, reusing the prompt just evaluated (cold or warm alike).
        text = model.render(render(rubric, row))
        attr = model.score_text(text, ATTRIBUTION_WORDS, shared=source_head(text, row["source"]), tail=ATTRIBUTION_TAIL)
        evaluated = (verdict.prompt_tokens - verdict.reused_tokens) + (attr.prompt_tokens - attr.reused_tokens)
        return AttributedScore(verdict.logp_supported, verdict.logp_unsupported, attr.prompt_tokens,
                               attr.prompt_tokens - evaluated, attribution=attr.log_odds)
    if variant == "rubric2":
        return model.score(render(rubric, row), reuse=reuse, source=row["source"])
    if variant == "rubric3":
        return model.score(render(rubric, row), reuse=reuse, source=row["source"], assertion=row["text"])
    if variant == "checked":
        verdict = _score(model, "rubric3", row, rubric, reuse)
        return verdict.checked(_check(row, reuse))
    if VARIANTS[variant] is None:
        return model.score(render(rubric, row), reuse=reuse)
    k, fs = VARIANTS[variant]
    return score_premises(model, row["source"], row["text"], k, few_shot=fs, reuse=reuse)


def _check(row, reuse):
    from memjudge.judges.local import score_premise_check

    model = load_default_model("check")
    if not reuse:
        model.forget()
    return score_premise_check(model, row["source"], row["text"], reuse=reuse)


def score_files(dataset: str, variant: str = "rubric") -> list[Path]:
    """The score file of a dataset and variant, and its shards (scores --shard i/n)."""
    path = results_path(dataset, DERIVED.get(variant, variant))
    return [p for p in [path, *sorted(path.parent.glob(f"{path.stem}.part*of*.jsonl"))]
            if p.exists() and p.stat().st_size > 0]


def load_scores(dataset: str, variant: str = "rubric") -> pd.DataFrame:
    paths = score_files(dataset, variant)
    if not paths:
        raise SystemExit(f"no scores of {dataset}/{variant}: run `python bench/local_judge.py scores {dataset} "
                         f"--variant {variant}` first")
    # An item scored twice (overlapping shards) counts once: the first file's score.
    df = pd.concat([pd.read_json(p, lines=True) for p in paths], ignore_index=True).drop_duplicates("assertion_id")
    if variant in DERIVED:  # the verdict read alone, whose prompt ends before the attribution tail
        df = df.assign(judge_score=df["logp_supported"] - df["logp_unsupported"], rubric=variant_id(variant))
    if "kind" not in df.columns and dataset in CORPORA:  # files scored before kinds were recorded
        df = df.merge(corpus_items(dataset)[["assertion_id", "kind"]], on="assertion_id", how="left")
    return df


def have(dataset: str, variant: str) -> bool:
    return bool(score_files(dataset, variant))


def cluster_interval(df, threshold, B=2000, seed=0) -> tuple[tuple[float, float], tuple[float, float]]:
    """95% percentile intervals of AUC and balanced accuracy, resampling source documents (summaries
    of one document are not independent)."""
    rng = np.random.default_rng(seed)
    scores, gold = df["judge_score"].to_numpy(float), (df["gold"] == "supported").to_numpy()
    groups = [np.asarray(ix) for ix in df.reset_index(drop=True).groupby("persona_id").indices.values()]
    aucs, bas = [], []
    for _ in range(B):
        rows = np.concatenate([groups[i] for i in rng.integers(0, len(groups), len(groups))])
        s, y = scores[rows], gold[rows]
        if y.all() or (~y).all():
            continue
        aucs.append(auc(s, y))
        bas.append(balanced_accuracy(s, y, threshold))
    return tuple(np.percentile(aucs, [2.5, 97.5])), tuple(np.percentile(bas, [2.5, 97.5]))


def quality_row(name, df, threshold) -> dict:
    s, y = df["judge_score"].to_numpy(float), (df["gold"] == "supported").to_numpy()
    (a_lo, a_hi), (b_lo, b_hi) = cluster_interval(df, threshold)
    return {"data": name, "n": len(df), "docs": df["persona_id"].nunique(), "unsupported": int((~y).sum()),
            "AUC": auc(s, y), "AUC 95% CI": f"{a_lo:.3f}-{a_hi:.3f}",
            "BA at t": balanced_accuracy(s, y, threshold), "BA 95% CI": f"{b_lo:.3f}-{b_hi:.3f}",
            "support rate": float((s >= threshold).mean()), "gold rate": float(y.mean()),
            "best BA (in-sample)": best_threshold(s, y)[1], "in-sample t": best_threshold(s, y)[0],
            "s/item": float(np.median(df["seconds"])) if "seconds" in df else float("nan")}


def kind_rows(name, df, threshold) -> list[dict]:
    """Per unsupported kind: how many, the share flagged unsupported at the threshold, and the AUC
    of supported items against that kind alone."""
    sup = df[df["gold"] == "supported"]
    rows = []
    for kind, g in df[df["gold"] == "unsupported"].groupby("kind"):
        both = pd.concat([sup, g])
        rows.append({"data": name, "kind": kind, "n": len(g),
                     "flagged unsupported": float((g["judge_score"] < threshold).mean()),
                     "AUC vs supported": auc(both["judge_score"], both["gold"] == "supported")})
    rows.append({"data": name, "kind": "supported", "n": len(sup),
                 "flagged unsupported": float((sup["judge_score"] < threshold).mean()), "AUC vs supported": float("nan")})
    return rows


def table(rows) -> str:
    return pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}")


# The shipped configuration (chosen on the tuning data only, see CHOICES): the rubric prompt,
# the judge's default. Its packaged threshold serves documents (SummEdits); conversational notes
# get their own threshold from `memjudge calibrate` with gold of that domain, which the bench
# stands in for by calibrating on the tuning corpus (dev) and applying it to the held-out one.
PACKAGED_VARIANT = "rubric3"
DATASET_NOTES = {
    "dev": "generated, seed 11, 8 personas, HARD_CONFIG (TUNING: prompt and the conversational threshold chosen here)",
    "corpus": "generated, seed 1, 6 personas, the demo's shape (paper preset: 92% supported)",
    "pilot2027": "generated, seed 2027, 32 personas, HARD_CONFIG (previous session's pilot, 58 items; looked at)",
    "heldout": "generated, seed 90210, 28 personas, HELDOUT_CONFIG (HELD OUT: scored once, nothing chosen on it)",
    "heldout2": "generated, seed 8086, 28 personas, HELDOUT_CONFIG (HELD OUT for rubric2, rubric3, rubric+self and checked: scored once by each, nothing chosen on it)",
    "sales": "SummEdits Sales Call, 520 summaries of 18 transcripts (held out)",
    "qmsum": "SummEdits QMSum, 96 items (calibration data of the packaged rubric threshold)",
    "synthpai": "SynthPAI, 204 assertions about 36 users from their own comments, gold from a person's reading "
                "(real human annotations of conversational text; HELD OUT: scored once, nothing chosen on it)",
}
# Each choice, the data it was made on, and what decided it (the figures are recomputed below).
CHOICES = [
    ("prompt: rubric (default) vs premise selection (top3)", "dev (seed 11), the 42 items scored with both",
     "AUC tie (0.751 vs 0.753); the rubric prompt is kept: it is the one measured on SummEdits sales calls "
     "(AUC 0.824) and on idle cores; the premise prompt was measured on neither"),
    ("premise count k = 3, few-shot turns", "none (fixed before any scoring)", "not tuned"),
    ("packaged rubric threshold (documents): +0.63 for rubric, +0.495 for rubric2, +0.40 for rubric3", "qmsum (96) + corpus (seed 1, 150)",
     "memjudge calibrate, balanced accuracy, on each variant's own scores"),
    ("conversational threshold (per domain)", "dev (seed 11), each variant's own scores (rubric: 42 items, rubric2 and rubric3: 200)",
     "memjudge calibrate, balanced accuracy; one threshold for values and facts"),
    ("premise threshold +0.36 (opt-in prompt)", "dev (seed 11), premise scores (66)", "memjudge calibrate"),
    ("held-out corpus shares (HELDOUT_CONFIG, 28 personas)", "heldout kind counts only, before any scoring",
     ">= 100 items of every unsupported kind"),
    ("attribution read (rubric+self): its wording, the words yes/no, weight 1 (plain sum)", "dev (seed 11), 200 items",
     "AUC of the sum 0.811 vs the verdict read alone 0.772 (wrong person 0.51 vs 0.37); three other wordings "
     "(\"subject\": the user / someone else; \"the source says this about\"; an \"about\" field before the verdict) "
     "were worse than chance; weight 0.5 gave 0.801"),
    ("packaged attribution threshold (rubric+self)", "qmsum (96) + corpus (seed 1, 150)",
     "memjudge calibrate, balanced accuracy (as the rubric threshold was)"),
    ("second held-out seed 8086 (heldout2)", "kind counts of seeds 31337, 4711, 8086 only, before any scoring",
     "the first with >= 100 items of every unsupported kind"),
    ("premise check (checked): its wording, one premise per assertion sentence, weight 1 (plain sum)",
     "dev (seed 11), 200 items (rubric3 verdicts + the check)",
     "AUC of the sum 0.798 vs the verdict alone 0.774 (over-inference 0.74 -> 0.82; wrong person 0.38 -> 0.32, "
     "the model reads it as 'does this sentence carry the statement?', not who it is about); weights 0.5/1.5/2/3 "
     "gave 0.793/0.797/0.796/0.791; a reversed wording ('about someone other than the writer?') and a generated "
     "'who is this about?' answer (always 'the writer', 30 of 30) did not read attribution either"),
    ("packaged thresholds of the judge with the check (checked): -1.00, values -0.25 of their own (was +0.83, "
     "one threshold chosen on qmsum + corpus like the rubric's)", "dev (seed 11), 200 items",
     "memjudge calibrate --own-threshold values, balanced accuracy: the check is the setting for notes, so its "
     "thresholds are chosen on notes; values (over-inference's home) get their own, measured last session as "
     "held-out BA 72.3 vs 69.9 for one threshold from dev, and shipped now that the judge takes a table"),
    ("the check is opt-in (check = true), not the default", "the first 101 sales items (3 transcripts), the only "
     "held-out data the choice looked at", "AUC 0.830 without the check, 0.780 with it (the check alone 0.577): on "
     "transcripts 'the writer' means nothing; scoring the other 419 was stopped"),
]


def packaged_threshold(variant: str) -> float:
    """The judge's packaged threshold for the prompt a variant scores with (rubric+self, which
    the judge does not ship, gets the one chosen as the packaged one was: on qmsum + corpus)."""
    weights = PACKAGED[DEFAULT_MODEL]
    if variant == "rubric":
        return 0.63  # the packaged thresholds while the judge scored so (calibrated as now)
    if variant == "rubric2":
        return 0.495
    if variant == "rubric+self":
        calib = pd.concat([load_scores(d, variant) for d in ("qmsum", "corpus") if have(d, variant)])
        return calibrate_scores(calib["judge_score"], calib["gold"] == "supported", DEFAULT_MODEL).threshold
    if variant == "checked":
        return weights.check_threshold
    return weights.threshold if VARIANTS[variant] is None else weights.premise_threshold


def packaged_own(variant: str) -> dict[str, float]:
    """Categories with a packaged threshold of their own (the judge with the check: values)."""
    return dict(PACKAGED[DEFAULT_MODEL].check_category_thresholds) if variant == "checked" else {}


def against(df: pd.DataFrame, threshold: float, own: dict[str, float]) -> tuple[pd.DataFrame, float]:
    """Scores and the cut that judge each item against its category's threshold: with categories
    of their own, the scores shifted by each item's threshold and cut at 0 (AUC is then the
    rule's ranking); otherwise the scores as they are, cut at `threshold`."""
    if not own:
        return df, threshold
    return df.assign(judge_score=df["judge_score"] - thresholds_of(df["category"], threshold, own)), 0.0


def domain_threshold(variant: str) -> float | None:
    """The conversational threshold: `memjudge calibrate` (balanced accuracy) on the tuning corpus."""
    if not have("dev", variant):
        return None
    dev = load_scores("dev", variant)
    return calibrate_scores(dev["judge_score"], dev["gold"] == "supported", DEFAULT_MODEL).threshold


def speed_row(name: str, df: pd.DataFrame) -> dict:
    """Wall-clock rate as scored on this shared machine, and the rate its CPU time implies for
    idle cores (process CPU time per item, all threads; one single-threaded process per core,
    as `scores --shard` runs them)."""
    row = {"data": name, "n": len(df), "median s": float(np.median(df["seconds"])),
           "wall /min": 60 * len(df) / float(df["seconds"].sum())}
    if "cpu_seconds" in df:
        threads = int(df["threads"].max()) if "threads" in df else 0
        cpu = float(df["cpu_seconds"].mean())
        row.update({"threads": threads, "cpu s/item": cpu, "per core /min": 60 / cpu,
                    "2 cores /min": 2 * 60 / cpu if threads == 1 else float("nan"),
                    "load (mean)": float(df["load"].mean()) if "load" in df else float("nan")})
    return row


def cmd_quality(args) -> None:
    variant = args.variant
    weights = PACKAGED[DEFAULT_MODEL]
    # The packaged thresholds: of the rubric prompt, and of the premise prompt (variant top3).
    packaged, own = packaged_threshold(variant), packaged_own(variant)
    conv = domain_threshold(variant)
    own_text = "".join(f", {c} {t:+.3f} of their own" for c, t in own.items())
    print(f"judge: local:{DEFAULT_MODEL}, variant {variant} ({variant_id(variant)}); packaged threshold "
          f"{packaged:+.3f}{own_text}; conversational threshold "
          f"{'n/a' if conv is None else f'{conv:+.2f}'} (memjudge calibrate on dev)")
    print(f"weights sha256 {weights.sha256[:16]}...; load average now {os.getloadavg()[0]:.2f}")
    print("\ndata:")
    for d, note in DATASET_NOTES.items():
        if have(d, variant):
            ids = sorted(set(load_scores(d, variant)["rubric"]))
            print(f"  {d:<9} {note}; prompt id {', '.join(ids)}")
    print("\nchoices (each made on the data named, never on the held-out sets):")
    for what, data, how in CHOICES:
        print(f"  - {what}\n      on: {data}\n      by: {how}")

    # 1. The choice of variant, on the tuning data only (and paired on the items scored with both).
    print("\nvariants on the tuning data (dev), AUC and in-sample best balanced accuracy:")
    rows = []
    scored = {v: load_scores("dev", v) for v in VARIANTS if have("dev", v)}
    common = set.intersection(*(set(df["assertion_id"]) for df in scored.values())) if scored else set()
    for v, df in scored.items():
        s, y = df["judge_score"].to_numpy(float), (df["gold"] == "supported").to_numpy()
        pair = df[df["assertion_id"].isin(common)]
        rows.append({"variant": v, "prompt": variant_id(v), "n": len(df), "AUC": auc(s, y),
                     f"AUC on the {len(common)} common": auc(pair["judge_score"], pair["gold"] == "supported"),
                     "best BA": best_threshold(s, y)[1], "at t": best_threshold(s, y)[0]})
    print(table(rows) if rows else "  (no dev scores)")

    # 2. Thresholds, as `memjudge calibrate` picks them, on the calibration sets.
    calib_sets = [d for d in args.calibrate_on.split(",") if d and have(d, variant)]
    if calib_sets:
        calib = pd.concat([load_scores(d, variant) for d in calib_sets], ignore_index=True)
        cal = calibrate_scores(calib["judge_score"], calib["gold"] == "supported", DEFAULT_MODEL)
        print(f"\ncalibration on {'+'.join(calib_sets)} ({len(calib)} items): threshold {cal.threshold:+.3f} "
              f"(balanced accuracy {cal.balanced_accuracy:.3f}, AUC {cal.auc:.3f}); packaged: {packaged:+.3f}"
              f"{own_text}{' (chosen on dev, below)' if own else ''}")
        # Per-category thresholds (values vs the fact categories), on the same data.
        for name, part in (("values", calib[calib["category"] == "values"]),
                           ("facts", calib[~calib["category"].isin(["values", "summary"])])):
            y = part["gold"] == "supported"
            if y.any() and (~y).any():
                t, ba = best_threshold(part["judge_score"], y)
                print(f"  {name}: {len(part)} items, best threshold {t:+.2f} (balanced accuracy {ba:.3f}; "
                      f"at the pooled threshold {balanced_accuracy(part['judge_score'], y, cal.threshold):.3f})")

    # Values with a threshold of their own, chosen on dev as `memjudge calibrate --own-threshold
    # values` picks them: the packaged pair of the judge with the check; for the other variants
    # measured beside the one threshold, not shipped.
    per_category = []
    if have("dev", variant):
        dev = load_scores("dev", variant)
        try:
            cal = calibrate_scores(dev["judge_score"], dev["gold"] == "supported", DEFAULT_MODEL,
                                   categories=dev["category"], own=["values"])
        except UsageError as e:
            print(f"calibration on dev with values of their own: {e}")
        else:
            shipped = (set(own) == {"values"} and abs(cal.threshold - packaged) < 0.005
                       and abs(cal.category_thresholds["values"] - own["values"]) < 0.005)
            print(f"calibration on dev ({len(dev)} items), values of their own: threshold {cal.threshold:+.3f}, "
                  f"values {cal.category_thresholds['values']:+.3f} (balanced accuracy {cal.balanced_accuracy:.3f}, "
                  f"AUC of the rule {cal.auc:.3f}); {'these are packaged' if shipped else 'measured, not shipped'}")
            if not shipped:
                per_category = [("per-category (dev)", cal.threshold, cal.category_thresholds)]

    # 3. Quality per domain, at the packaged threshold and at the conversational one; per kind.
    thresholds = ([("packaged", packaged, own)] + ([("conversational", conv, {})] if conv is not None else [])
                  + per_category)
    for label, t, cats in thresholds:
        rows, krows = [], []
        for d in DATASET_NOTES:
            if have(d, variant):
                df, cut = against(load_scores(d, variant), t, cats)
                rows.append(quality_row(d, df, cut))
                if d in WITH_KINDS:
                    krows += kind_rows(d, df, cut)
        named = f"{label} threshold {t:+.3f}" + "".join(f", {c} {x:+.3f}" for c, x in cats.items())
        shifted = " (scores shifted by each item's threshold, cut at 0)" if cats else ""
        print(f"\nquality at the {named}{shifted} (95% intervals resample sources/personas):")
        print(table(rows))
        if krows:
            print(f"\nper unsupported kind at the {named} (AUC of the supported items against that kind alone):")
            print(table(krows))
    if have("sales", variant):
        sales, cut = against(load_scores("sales", variant), packaged, own)
        ba = 100 * balanced_accuracy(sales["judge_score"], sales["gold"] == "supported", cut)
        print(f"\nSummEdits Sales Call, balanced accuracy (held out, {len(sales)} items, packaged threshold): "
              f"local:{DEFAULT_MODEL} {ba:.1f}")
        for name, v in PUBLISHED_SALES.items():
            print(f"  {name:<11} {v:5.1f}   ratio local/{name}: {ba / v:.2f}")
    # 4. Speed as the scores were computed.
    print("\nspeed while scoring (wall: this shared machine at its load; per core / 2 cores: from process CPU "
          "time per item, each source's first, cold evaluation included; on a crowded machine CPU time is "
          "inflated by contention for caches and memory bandwidth, so these are lower bounds for idle cores; "
          "see `speed` for a controlled cold/warm measurement):")
    print(table([speed_row(d, load_scores(d, variant)) for d in DATASET_NOTES if have(d, variant)]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("scores")
    s.add_argument("dataset", choices=DATASETS)
    s.add_argument("--variant", choices=[v for v in VARIANTS if v not in DERIVED], default=PACKAGED_VARIANT)
    s.add_argument("--per-doc", type=int, default=0, help="score only this many items per source (0 = all)")
    s.add_argument("--like", choices=list(VARIANTS), help="score only the items already scored with this variant")
    s.add_argument("--shard", help="i/n: score every n-th source from the i-th (0-based), into its own file")
    s.add_argument("--sources", help="comma-separated source (persona) ids to score, in this order, into their own file")
    s.add_argument("--verdicts-from", choices=["rubric3"],
                   help="with --variant checked: take saved rubric3 verdict reads, read only the premise check")
    s.set_defaults(func=cmd_scores)
    sp = sub.add_parser("speed")
    sp.add_argument("dataset", nargs="?", choices=DATASETS, default="dev")
    sp.add_argument("--variant", choices=list(VARIANTS), default=PACKAGED_VARIANT)
    sp.add_argument("--docs", type=int, default=2)
    sp.add_argument("--per-doc", type=int, default=5)
    sp.set_defaults(func=cmd_speed)
    q = sub.add_parser("quality")
    q.add_argument("--variant", choices=list(VARIANTS), default=PACKAGED_VARIANT)
    q.add_argument("--calibrate-on", default="dev")
    q.set_defaults(func=cmd_quality)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
