"""--private's two figures (issue 52, docs/private.md): detection is faster than the judge, and a
judge still judges the pseudonymised texts.

    python bench/private.py detect            # the tour corpus (simulate --preset paper): 4,715 candidates
    python bench/private.py judge --personas 2 # the demo corpus: the embedded judge with and without stand-ins
    python bench/private.py quotes            # quotes from pseudonymised sources, mapped back, found in the originals

`detect` times detection and mapping of the paper preset's corpus (100 sources and 4,715
candidates; the facts too, apart), cold (no detection cache), once the recognisers are loaded
(their load is printed apart), as wall and CPU seconds with the machine's load.

`judge` scores the demo's corpus (its first N personas: the paper preset scaled to 25 candidates a
persona, seed 0) with the embedded judge (`local:qwen2.5-coder-1.5b`, the demo's options) three
times: on the original texts, with typed placeholders and with realistic surrogates (the texts
pseudonymised exactly as `--private` does; `--private` itself never touches a `local:` judge, which
sends nothing). Per kind of stand-in: Cohen's kappa of the verdicts against the original run's
(sklearn), and the share of answers whose quote, mapped back, is found in the original source,
against the original run's share. With --neutral, a fourth run on a neutral rewrite (the same
texts with an assertion's leading "User" written "The user"): the judge's own kappa under a change that hides
nothing, to read beside the others.

`quotes`: the embedded judge gives its verdict by log-odds and quotes nothing, so the evidence
figure needs quotes: for each of the tour corpus's candidates, the source sentence sharing most
words with it is taken as a judge would quote it, from the pseudonymised source, mapped back and
checked against the original source (`evidence_found`), beside the same on the original texts.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

LOCAL_JUDGE = "local:qwen2.5-coder-1.5b"


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f}"


def cmd_detect(args) -> None:
    from memjudge.privacy import PrivacySettings, protect
    from memjudge.privacy.detect import Detector
    from memjudge.simulation import simulate

    corpus = simulate(preset="paper", seed=0)
    cands, srcs, facts = corpus.candidates, corpus.sources, corpus.facts
    print(f"tour corpus: {len(srcs)} sources ({srcs['source'].str.len().sum():,} characters), {len(cands):,} candidates, "
          f"{len(facts):,} facts; {load()}")
    t, c = time.perf_counter(), time.process_time()
    detector = Detector()
    detector.identity()
    print(f"recognisers loaded: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU")
    for label, f in (("sources + candidates", None), ("sources + candidates + facts", facts)):
        t, c = time.perf_counter(), time.process_time()
        p = protect(cands, srcs, f, PrivacySettings(style=args.style), None, detector=detector)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        print(f"{label}: {p.stats['texts']:,} distinct texts detected and mapped in {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"({1000 * wall / len(cands):.2f} s wall, {1000 * cpu / len(cands):.2f} s CPU per 1,000 candidates); "
              f"replaced {p.stats['entities_replaced']}; {load()}")


def _score(judge, cands, srcs, out: Path, cache_dir):
    from memjudge.scoring.engine import score_run

    return score_run(cands, srcs, judge, out=out, cache_dir=cache_dir, progress=False).labels


def _neutral(cands: pd.DataFrame) -> pd.DataFrame:
    out = cands.copy()
    out["text"] = [("The user " + t[5:]) if t.startswith("User ") else t.replace("The user", "This user") for t in out["text"]]
    return out


def cmd_judge(args) -> None:
    from sklearn.metrics import cohen_kappa_score

    from memjudge.demo import CANDIDATES_PER_PERSONA, LOCAL_OPTIONS
    from memjudge.judges import make_judge
    from memjudge.judges.rubrics import evidence_found
    from memjudge.privacy import PrivacySettings, protect
    from memjudge.simulation import simulate

    scale = {"corpus": {"candidates": CANDIDATES_PER_PERSONA * 100, "personas": 100}}
    corpus = simulate(preset="paper", seed=0, personas=args.personas, config=scale)
    cands, srcs = corpus.candidates, corpus.sources
    print(f"demo corpus: {len(srcs)} personas, {len(cands)} candidates (paper preset, 25 a persona, seed 0); {load()}")
    judge = make_judge(LOCAL_JUDGE, options=dict(LOCAL_OPTIONS))
    out = Path(tempfile.mkdtemp(prefix="bench-private-"))
    cache_dir = args.cache_dir
    t0 = time.perf_counter()
    base = _score(judge, cands, srcs, out / "original", cache_dir)
    source_of = dict(zip(srcs["persona_id"], srcs["source"]))
    base_found = base["evidence_found"].fillna(False).astype(bool)
    print(f"original: {len(base)} verdicts in {time.perf_counter() - t0:.0f} s; {base['verdict'].value_counts().to_dict()}; "
          f"evidence found {base_found.mean():.3f}; {load()}")
    rows = []
    for style in args.styles:
        t = time.perf_counter()
        p = protect(cands, srcs, None, PrivacySettings(style=style), None)
        labels = _score(judge, p.candidates, p.sources, out / style, cache_dir)
        merged = base[["assertion_id", "verdict"]].merge(labels[["assertion_id", "persona_id", "verdict", "evidence"]],
                                                         on="assertion_id", suffixes=("_orig", "_priv"))
        back = [p.restorer.evidence(pid, ev) for pid, ev in zip(merged["persona_id"], merged["evidence"])]
        found = pd.Series([bool(evidence_found(ev, source_of[pid])) for pid, ev in zip(merged["persona_id"], back)])
        kappa = cohen_kappa_score(merged["verdict_orig"].fillna("null"), merged["verdict_priv"].fillna("null"))
        agree = (merged["verdict_orig"] == merged["verdict_priv"]).mean()
        rows.append((style, kappa, agree, found.mean(), found.mean() / base_found.mean() if base_found.mean() else float("nan")))
        own = int((p.candidates["text"] != cands["text"]).sum())
        touched = int(cands["persona_id"].map(dict(zip(srcs["persona_id"], p.sources["source"] != srcs["source"]))).sum())
        print(f"{style}: kappa {kappa:.3f}, agreement {agree:.3f}, evidence found {found.mean():.3f} "
              f"({rows[-1][4]:.1%} of the original's), {p.stats['entities_replaced']} replaced, invented placeholders "
              f"{p.restorer.counts()['invented_placeholders']}; {own} assertions changed themselves, {touched} judged against "
              f"a changed source; {time.perf_counter() - t:.0f} s; {load()}")
    if args.neutral:
        t = time.perf_counter()
        labels = _score(judge, _neutral(cands), srcs, out / "neutral", cache_dir)
        merged = base[["assertion_id", "verdict"]].merge(labels[["assertion_id", "verdict"]], on="assertion_id", suffixes=("_o", "_n"))
        kappa = cohen_kappa_score(merged["verdict_o"].fillna("null"), merged["verdict_n"].fillna("null"))
        changed = int((_neutral(cands)["text"] != cands["text"]).sum())
        print(f"neutral rewrite ('User ...' -> 'The user ...', {changed} of {len(cands)} assertions changed): kappa {kappa:.3f} against the original; "
              f"{time.perf_counter() - t:.0f} s; {load()}")
    print(f"total {time.perf_counter() - t0:.0f} s for {len(cands)} candidates x {1 + len(args.styles) + bool(args.neutral)} runs")


def _quote(source: str, text: str) -> str:
    """What a judge quotes: the source's sentence sharing the most words with the assertion."""
    import re

    words = set(re.findall(r"\w+", text.lower()))
    sentences = [x for x in re.split(r"(?<=[.!?])\s+", source) if x.strip()]
    return max(sentences, key=lambda x: len(words & set(re.findall(r"\w+", x.lower()))))


def cmd_quotes(args) -> None:
    from memjudge.judges.rubrics import evidence_found
    from memjudge.privacy import PrivacySettings, protect
    from memjudge.simulation import simulate

    corpus = simulate(preset="paper", seed=0)
    cands, srcs = corpus.candidates, corpus.sources
    source_of = dict(zip(srcs["persona_id"], srcs["source"]))
    base = [bool(evidence_found(_quote(source_of[p], t), source_of[p])) for p, t in zip(cands["persona_id"], cands["text"])]
    print(f"tour corpus, {len(cands):,} candidates; a quote is the source sentence sharing most words with the assertion; "
          f"original texts: {sum(base) / len(base):.4f} found; {load()}")
    for style in args.styles:
        p = protect(cands, srcs, None, PrivacySettings(style=style), None)
        sent = dict(zip(p.sources["persona_id"], p.sources["source"]))
        back = [p.restorer.evidence(pid, _quote(sent[pid], t)) for pid, t in zip(p.candidates["persona_id"], p.candidates["text"])]
        found = [bool(evidence_found(q, source_of[pid])) for pid, q in zip(cands["persona_id"], back)]
        changed = sum(q != _quote(source_of[pid], t) for pid, t, q in zip(cands["persona_id"], cands["text"], back))
        print(f"{style}: quotes taken from the pseudonymised sources and mapped back: {sum(found) / len(found):.4f} found in the "
              f"original source ({sum(found) / sum(base):.2%} of the original's); {changed} of {len(found)} quotes differ from "
              f"the quote chosen on the original texts (stand-ins change which sentence shares most words)")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="what", required=True)
    d = sub.add_parser("detect")
    d.add_argument("--style", default="placeholder", choices=["placeholder", "surrogate"])
    d.set_defaults(func=cmd_detect)
    q = sub.add_parser("quotes")
    q.add_argument("--styles", nargs="+", default=["placeholder", "surrogate"])
    q.set_defaults(func=cmd_quotes)
    j = sub.add_parser("judge")
    j.add_argument("--personas", type=int, default=2)
    j.add_argument("--styles", nargs="+", default=["placeholder", "surrogate"])
    j.add_argument("--neutral", action="store_true")
    j.add_argument("--cache-dir", default=None, help="the answer cache (default: memjudge's own)")
    j.set_defaults(func=cmd_judge)
    args = p.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
