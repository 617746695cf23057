"""`memjudge cascade CANDIDATES --stage J1 --stage J2 ...`: its arguments and its handler (spec §14)."""

from __future__ import annotations

import sys

__all__ = ["add_cascade_parser", "cmd_cascade"]


def _share(name: str, lo: float, hi: float):
    import argparse

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not lo < v < hi:
            raise argparse.ArgumentTypeError(f"{name} must be in ({lo:g}, {hi:g}), got {v:g}")
        return v

    return parse


def add_cascade_parser(sub, positive_int) -> None:
    c = sub.add_parser("cascade", help="label with the cheapest judge it can trust, escalating the rest; agreement certified on gold")
    c.add_argument("candidates", help="candidate assertions (JSONL, CSV or Parquet)")
    c.add_argument("--sources", required=True, help="one source per persona (persona_id, source)")
    c.add_argument("--stage", action="append", required=True, metavar="JUDGE",
                   help="a judge, cheapest first (repeat: --stage A --stage B ...); its settings and prices from --judges-file")
    c.add_argument("--judges-file", help="judges.toml: each stage's settings, prices, and `replicates` for a judge without judge_score")
    g = c.add_mutually_exclusive_group(required=True)
    g.add_argument("--gold", help="people's labels of some candidates (assertion_id, verdict; a memjudge annotate gold file)")
    g.add_argument("--gold-sample", type=positive_int, metavar="N",
                   help="no people's labels: N random candidates labelled by the last stage (certifies agreement with that judge)")
    c.add_argument("--target", type=_share("--target", 0.5, 1), default=0.95,
                   help="agreement to certify on the trusted items (default 0.95)")
    c.add_argument("--delta", type=_share("--delta", 0, 0.5), default=0.1,
                   help="chance the certificate may be wrong (default 0.1)")
    c.add_argument("--select", type=int, metavar="N",
                   help="other candidates every stage answers to choose the thresholds' path (default: as many as the gold items; "
                        "0: a third of the gold items instead)")
    c.add_argument("--seed", type=int, default=0, help="seed of the samples drawn (default 0)")
    c.add_argument("--out", required=True, help="output folder (labels.jsonl, cascade.json, queue.jsonl, a run folder per stage)")
    c.add_argument("--cache-dir", help="answer cache (default $MEMJUDGE_CACHE_DIR or ~/.cache/memjudge)")
    c.add_argument("--batch", action="store_true", help="use the providers' batch APIs (about half price, within 24 h)")
    c.add_argument("--dry-run", action="store_true", help="estimate calls and cost, against the last stage alone, without calling")
    c.add_argument("--no-progress", action="store_true", help="no progress bar")
    c.add_argument("--json", action="store_true", help="print cascade.json (or the dry run's estimate) as JSON")
    c.set_defaults(func=cmd_cascade)


def cmd_cascade(args) -> int:
    from memjudge.cascade import run_cascade
    from memjudge.formats import dumps

    if args.select is not None and args.select < 0:
        from memjudge.errors import UsageError

        raise UsageError(f"--select must be >= 0, got {args.select}")
    settings = {k: v for k, v in vars(args).items() if k != "func"}
    res = run_cascade(args.candidates, args.sources, args.stage, gold=args.gold, gold_sample=args.gold_sample,
                      target=args.target, delta=args.delta, out=args.out, judges_file=args.judges_file, select=args.select,
                      seed=args.seed, cache_dir=args.cache_dir, progress=not args.no_progress and sys.stderr.isatty(),
                      batch=args.batch, dry_run=args.dry_run, argv=settings)
    info = res.info
    if args.json:
        print(dumps(info, indent=2))
        return 0
    if args.dry_run:
        print(f"dry run: {info['candidates']} candidates, {info['calibration_items']} calibration items answered by every stage")
        for s in info["stages"]:
            print(f"  {s['judge']}: calibration {s['calibration_calls']} calls ${s['calibration_cost_usd']:.4f}; "
                  f"at most {s['all_items_calls']} calls ${s['all_items_cost_usd']:.4f} on the candidates")
        print(f"expected cost: between ${info['at_least_usd']:.4f} (the first stage trusts every item) and "
              f"${info['at_most_usd']:.4f} (every stage asked about every item); the last stage alone: ${info['top_judge_cost_usd']:.4f}")
        return 0
    gold = "people's labels" if info["gold"]["kind"] == "people" else "the last stage's labels (agreement with the strongest judge)"
    print(f"wrote {res.out_dir / 'labels.jsonl'}: {info['decided']} of {info['candidates']} decided "
          f"({info['decided_share']:.1%}), {info['abstained']} abstained → {info['queue']}")
    for s in info["stages"]:
        thr = "trusts nothing" if s["threshold"] is None else f"threshold {s['threshold']:.4g}"
        cost = "" if s["cost_usd"] is None else f", ${s['cost_usd']:.4f}"
        print(f"  {s['judge']} ({s['confidence']}, {thr}): asked {s['asked']}, decided {s['decided']}; {s['calls']} calls{cost}")
    if info["cost_usd"] is not None and info["top_judge_cost_usd"]:
        print(f"cost ${info['cost_usd']:.4f} (gold calls included) against ${info['top_judge_cost_usd']:.4f} for the last stage "
              f"alone ({info['cost_share']:.0%})")
    print(f"gold: {info['calibration']['n']} items, {gold}")
    print(info["guarantee"])
    return 0
