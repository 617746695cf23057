"""The `memjudge` command line: parses arguments, calls the Python API, prints.

Any `MemjudgeError` becomes one line on stderr and exit status 2. Each command's handler
is `cmd_<name>(args) -> int`; heavy modules are imported inside handlers so that
`memjudge --help` and the gate stay fast.
"""

from __future__ import annotations

import argparse
import sys

from memjudge.errors import MemjudgeError, UsageError


class _Parser(argparse.ArgumentParser):
    """argparse, but bad arguments are one line and exit 2 (no usage dump)."""

    def error(self, message):  # noqa: D401
        raise UsageError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def _replicate_choice(text: str):
    if text == "majority":
        return text
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a replicate index or 'majority', got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"replicate index must be >= 0, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="memjudge", description="LLM-judge evaluation harness for the write boundary of agent memory.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    # --- score -------------------------------------------------------------------------
    s = sub.add_parser("score", help="label candidates' source support (or coverage) with a judge")
    s.add_argument("candidates")
    s.add_argument("--sources", required=True)
    s.add_argument("--judge", required=True, help="PROVIDER:MODEL, e.g. gemini:gemini-2.5-flash, openai:gpt-4o-mini, local:qwen2.5-coder-1.5b, sim:NAME")
    s.add_argument("--judges-file", help="judges.toml panel with generation parameters, limits and prices")
    s.add_argument("--base-url")
    s.add_argument("--rubric", default="support", help="support (default), coverage, or a path to a rubric .toml file")
    s.add_argument("--facts", help="reference facts for the coverage rubric (without them the judge lists the facts)")
    s.add_argument("--replicates", type=_positive_int, default=1, help="score each item R times (replicate indices 0..R-1)")
    s.add_argument("--concurrency", type=_positive_int, help="requests in flight at once (default 16, or the panel's)")
    s.add_argument("--rpm", type=float, help="requests per minute limit")
    s.add_argument("--tpm", type=float, help="tokens per minute limit (estimated from the prompt length)")
    s.add_argument("--temperature", type=float)
    s.add_argument("--seed", type=int)
    s.add_argument("--max-output-tokens", type=_positive_int)
    s.add_argument("--thinking-budget", type=int)
    s.add_argument("--out", default=None, help="run directory (default runs/<judge>-<rubric>)")
    s.add_argument("--cache-dir", help="answer cache (default $MEMJUDGE_CACHE_DIR or ~/.cache/memjudge)")
    s.add_argument("--parquet", action="store_true", help="also write labels.parquet")
    s.add_argument("--dry-run", action="store_true", help="validate everything and estimate calls, tokens and cost without calling")
    s.add_argument("--batch", action="store_true", help="use the provider's batch API (about half price, within 24 h)")
    s.add_argument("--batch-fallback", choices=["resubmit", "online"], default="resubmit")
    s.add_argument("--no-progress", action="store_true")
    s.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    s.set_defaults(func=cmd_score)

    # --- cache -------------------------------------------------------------------------
    c = sub.add_parser("cache", help="inspect or clear the answer cache")
    csub = c.add_subparsers(dest="cache_command", metavar="ACTION", parser_class=_Parser)
    csub.required = True
    for name, helptext in (("stats", "entries, size and location"), ("clear", "delete every cached answer")):
        cc = csub.add_parser(name, help=helptext)
        cc.add_argument("--cache-dir")
        cc.add_argument("--json", action="store_true")
        cc.set_defaults(func=cmd_cache)

    # --- noise -------------------------------------------------------------------------
    n = sub.add_parser("noise", help="re-score flip rates per judge")
    n.add_argument("labels", nargs="+")
    n.add_argument("--seed", type=int, default=0)
    n.add_argument("--bootstrap", type=_positive_int, default=2000, metavar="B", help="persona-cluster bootstrap resamples (default 2000)")
    n.add_argument("--out")
    n.add_argument("--json", action="store_true")
    n.set_defaults(func=cmd_noise)

    # --- agreement ---------------------------------------------------------------------
    a = sub.add_parser("agreement", help="agreement between judges (and with gold labels)")
    a.add_argument("labels", nargs="+")
    a.add_argument("--gold")
    a.add_argument("--replicate", type=_replicate_choice, default=0)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--bootstrap", type=_positive_int, default=2000, metavar="B", help="persona-cluster bootstrap resamples (default 2000)")
    a.add_argument("--out")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_agreement)

    # --- compare -----------------------------------------------------------------------
    m = sub.add_parser("compare", help="write-all vs global vs targeted retention policies (Table 1)")
    m.add_argument("candidates")
    m.add_argument("--labels", required=True, nargs="+")
    m.add_argument("--coverage")
    m.add_argument("--judge")
    m.add_argument("--replicate", type=_replicate_choice, default=0)
    m.add_argument("--gate", default="values")
    m.add_argument("--floor", type=float, default=0.8)
    m.add_argument("--repeats", type=_positive_int, default=20)
    m.add_argument("--folds", type=_positive_int, default=5)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out")
    m.add_argument("--export-policy")
    m.add_argument("--policy", choices=["targeted", "global", "per_category"], default="targeted")
    m.add_argument("--per-category-method", choices=["greedy", "exact"], default="greedy",
                   help="per_category fit: greedy coordinate ascent (default, linear) or the exact optimum")
    m.add_argument("--json", action="store_true")
    m.set_defaults(func=cmd_compare)

    # --- robustness --------------------------------------------------------------------
    r = sub.add_parser("robustness", help="does the policy ordering survive a change of judge?")
    r.add_argument("candidates")
    r.add_argument("--labels", required=True, nargs="+")
    r.add_argument("--coverage", nargs="+")
    r.add_argument("--gate", default="values")
    r.add_argument("--floor", type=float, default=0.8)
    r.add_argument("--repeats", type=_positive_int, default=20)
    r.add_argument("--folds", type=_positive_int, default=5)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--per-category-method", choices=["greedy", "exact"], default="greedy")
    r.add_argument("--out")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_robustness)

    # --- report ------------------------------------------------------------------------
    rp = sub.add_parser("report", help="Markdown/HTML report with figures from a run directory")
    rp.add_argument("run_dir")
    rp.add_argument("--format", default="md,html", help="comma list of md, html (figures are always written)")
    rp.add_argument("--json", action="store_true", help="print what was written and which parts were found as JSON")
    rp.add_argument("--dpi", type=_positive_int, default=200, help="resolution of the PNG figures (default 200)")
    rp.set_defaults(func=cmd_report)

    # --- simulate ----------------------------------------------------------------------
    sm = sub.add_parser("simulate", help="generate synthetic personas with known truth")
    sm.add_argument("--preset", default="paper")
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument("--personas", type=_positive_int)
    sm.add_argument("--config")
    sm.add_argument("--out", required=True)
    sm.add_argument("--json", action="store_true")
    sm.set_defaults(func=cmd_simulate)

    # --- demo --------------------------------------------------------------------------
    d = sub.add_parser("demo", help="the whole study offline with the embedded judge")
    d.add_argument("--out", default="runs/demo")
    d.add_argument("--personas", type=_positive_int)
    d.add_argument("--cache-dir")
    d.add_argument("--no-progress", action="store_true")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_demo)

    # --- calibrate ---------------------------------------------------------------------
    cb = sub.add_parser("calibrate", help="pick a judge's threshold on judge_score against gold labels")
    cb.add_argument("labels", nargs="+")
    cb.add_argument("--gold", required=True)
    cb.add_argument("--judge", required=True)
    cb.add_argument("--target", default="balanced_accuracy")
    cb.add_argument("--panel", default="judges.toml", help="judge panel file to write the threshold into")
    cb.add_argument("--json", action="store_true")
    cb.set_defaults(func=cmd_calibrate)

    # --- import ------------------------------------------------------------------------
    im = sub.add_parser("import", help="convert a public dataset into memjudge's formats")
    im.add_argument("dataset")
    im.add_argument("folder")
    im.add_argument("--out", required=True)
    im.add_argument("--json", action="store_true")
    im.set_defaults(func=cmd_import)

    # --- batch -------------------------------------------------------------------------
    b = sub.add_parser("batch", help="status or cancel of a run's provider batch jobs")
    bsub = b.add_subparsers(dest="batch_command", metavar="ACTION", parser_class=_Parser)
    bsub.required = True
    for name in ("status", "cancel"):
        bb = bsub.add_parser(name)
        bb.add_argument("run_dir")
        bb.add_argument("--base-url")
        bb.add_argument("--json", action="store_true")
        bb.set_defaults(func=cmd_batch)
    return p


# ---------------------------------------------------------------------------------------
# handlers (one per command; each imports what it needs)


def cmd_score(args) -> int:
    from memjudge.engine import score_run
    from memjudge.io import dumps

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    result = score_run(
        args.candidates, args.sources, args.judge, rubric=args.rubric, facts=args.facts,
        replicates=args.replicates, out=args.out, cache_dir=args.cache_dir, dry_run=args.dry_run,
        progress=not args.no_progress and sys.stderr.isatty(), parquet=args.parquet,
        judges_file=args.judges_file, base_url=args.base_url, concurrency=args.concurrency,
        rpm=args.rpm, tpm=args.tpm, temperature=args.temperature, seed=args.seed,
        max_output_tokens=args.max_output_tokens, thinking_budget=args.thinking_budget,
        argv=settings, echo=None if args.json else print,
        batch=args.batch, batch_fallback=args.batch_fallback,
    )
    s = result.summary
    if args.json:
        print(dumps(s.as_dict(), indent=2))
        return 0
    if s.dry_run:
        cost = f"${s.estimated_cost_usd:.4f}" if s.estimated_cost_usd is not None else "unknown (no prices: set price_input_per_mtok / price_output_per_mtok in --judges-file)"
        print(f"dry run: {s.calls} calls for {s.rows} rows ({s.judge}, {s.rubric}); {s.cached} cached, {s.resumed} in the run's journal, {s.calls - s.cached - s.resumed} to request")
        print(f"estimated tokens: {s.estimated_input_tokens:,} input + {s.estimated_output_tokens:,} output; estimated cost: {cost}"
              + (f" (batch prices: x{s.batch['discount']:g})" if s.batch and s.estimated_cost_usd is not None else ""))
        return 0
    name = "labels.jsonl" if result.labels is not None else "coverage.jsonl"
    counts = ", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items()))
    cost = f", cost ${s.cost_usd:.4f}" if s.cost_usd is not None else ""
    print(f"wrote {result.out_dir / name}: {s.rows} rows{' (' + counts + ')' if counts else ''}")
    print(f"{s.requested} calls requested ({s.requests} requests, {s.reasks} re-asks, {s.retries} retries), {s.cached} cached, {s.resumed} resumed, {s.errors} without a valid answer; "
          f"tokens {s.tokens.get('input_tokens', 0):,} in / {s.tokens.get('output_tokens', 0):,} out{cost}; {s.seconds:.1f} s")
    if s.batch:
        b = s.batch
        print(f"batch: {b['jobs_submitted']} jobs submitted, {b['jobs_found']} found from an earlier run, {b['resubmitted']} requests resubmitted, "
              f"{b['online']} asked online; costs at x{b['discount']:g} (state: {b['state_file']})")
    if s.errors:
        print(f"memjudge: {s.errors} calls have no valid answer (verdict null, see 'error'); rerun the same command to ask them again", file=sys.stderr)
    return 0


def cmd_cache(args) -> int:
    from memjudge.cache import cache_clear, cache_stats
    from memjudge.io import dumps

    if args.cache_command == "stats":
        out = cache_stats(args.cache_dir)
        text = f"{out['directory']}: {out['entries']} answers, {out['size_bytes']:,} bytes (eviction {out['eviction_policy']})"
    else:
        out = cache_clear(args.cache_dir)
        text = f"{out['directory']}: removed {out['removed']} answers"
    print(dumps(out, indent=2) if args.json else text)
    return 0


def _emit_analysis(args, data: dict, text: str, filename: str | None, notes=()) -> int:
    """Shared tail of analysis commands: RUN_DIR/filename for `report` (None: the command wrote
    its files itself), JSON or a table on stdout."""
    from memjudge.io import dumps, write_json

    if filename and getattr(args, "out", None):
        from pathlib import Path

        write_json(Path(args.out) / filename, data)
    if args.json:
        print(dumps(data, indent=2))
        for note in notes:
            print(f"memjudge: note: {note}", file=sys.stderr)
    else:
        print(text)
    return 0


def cmd_noise(args) -> int:
    from memjudge.io import read_labels
    from memjudge.noise import noise

    res = noise(read_labels(args.labels), seed=args.seed, B=args.bootstrap)
    return _emit_analysis(args, res.to_json(), res.to_text(), "noise.json", res.notes)


def cmd_agreement(args) -> int:
    from memjudge.agreement import agreement
    from memjudge.io import read_gold, read_labels

    labels = read_labels(args.labels)
    gold = read_gold(args.gold) if args.gold else None
    res = agreement(labels, gold=gold, replicate=args.replicate, seed=args.seed, B=args.bootstrap)
    return _emit_analysis(args, res.to_json(), res.to_text(), "agreement.json", res.notes)


def cmd_compare(args) -> int:
    from memjudge.crossval import compare

    res = compare(
        args.candidates, list(args.labels), args.coverage, judge=args.judge, replicate=args.replicate,
        gate=args.gate, floor=args.floor, repeats=args.repeats, folds=args.folds, seed=args.seed,
        per_category=args.per_category_method,
    )
    if args.out:
        res.write_run(args.out, candidates=args.candidates, labels=args.labels, coverage=args.coverage, seed=args.seed)
    if args.export_policy:
        res.export_policy(args.export_policy, args.policy)
    text = res.render()
    if args.out:
        text += f"\n\nwrote compare.json, sweep.json, calibration.json to {args.out}"
    if args.export_policy:
        text += f"\nwrote the {args.policy} policy (fitted on all personas) to {args.export_policy}"
    return _emit_analysis(args, res.to_json(), text, None)  # write_run wrote compare.json


def cmd_robustness(args) -> int:
    from memjudge.robustness import robustness

    res = robustness(
        args.candidates, list(args.labels), list(args.coverage) if args.coverage else None,
        gate=args.gate, floor=args.floor, repeats=args.repeats, folds=args.folds, seed=args.seed,
        per_category=args.per_category_method,
    )
    text = res.render() + (f"\n\nwrote robustness.json to {args.out}" if args.out else "")
    return _emit_analysis(args, res.to_json(), text, "robustness.json")


def cmd_report(args) -> int:
    from memjudge.report import parse_formats, report

    res = report(args.run_dir, formats=parse_formats(args.format), dpi=args.dpi)
    if getattr(args, "json", False):
        from memjudge.io import dumps

        print(dumps(res.to_dict(), indent=2))
        return 0
    for p in res.written:
        print(p)
    if res.absent:
        print("absent from the run (not in the report): " + ", ".join(res.absent), file=sys.stderr)
    return 0


def cmd_simulate(args) -> int:
    from memjudge.io import dumps
    from memjudge.simulate import simulate

    corpus = simulate(preset=args.preset, seed=args.seed, personas=args.personas, config=args.config, out=args.out)
    summary = dict(corpus.summary(), out=args.out, preset=args.preset, seed=args.seed, simulated=True,
                   files={name: f"{args.out}/{name}.jsonl" for name in corpus.FILES})
    if args.json:
        print(dumps(summary, indent=2))
    else:
        s = summary
        print(f"simulated {s['personas']} personas, {s['candidates']} candidates, {s['facts']} reference facts "
              f"(preset {args.preset}, seed {args.seed}) -> {args.out}")
        print(f"support: {100 * s['support']:.2f}% overall, values {100 * (s['support_values'] or 0):.1f}% "
              f"({100 * s['values_share']:.1f}% of candidates), other {100 * (s['support_other'] or 0):.1f}%; "
              f"write-all coverage {100 * s['coverage']:.1f}%")
        print("kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(s["kinds"].items())))
    return 0


def cmd_demo(args) -> int:
    from memjudge.demo import demo
    from memjudge.io import dumps

    res = demo(args.out, args.personas, seed=args.seed, cache_dir=args.cache_dir,
               progress=not args.no_progress and sys.stderr.isatty(),
               echo=(lambda line: print(line, file=sys.stderr)) if args.json else print)
    if args.json:
        print(dumps(res.as_dict(), indent=2))
    else:
        print(f"report: {res.report or res.out}")
    return 0


def cmd_calibrate(args) -> int:
    from memjudge.calibrate import calibrate
    from memjudge.io import dumps

    cal = calibrate(args.labels, args.gold, args.judge, target=args.target, panel=args.panel)
    if args.json:
        print(dumps(cal.as_dict(), indent=2))
    else:
        print(f"{cal.judge}: threshold {cal.threshold:+.4f} on judge_score ({cal.target} {cal.target_value:.3f}; "
              f"{cal.n} items, {cal.n_supported} supported, {cal.n_unsupported} unsupported)")
        print(f"  balanced accuracy {cal.balanced_accuracy:.3f}, accuracy {cal.accuracy:.3f}, AUC {cal.auc:.3f} "
              "(in-sample: report quality on other data)")
        print(f"  written to {cal.panel}: use it with --judges-file {cal.panel}")
    return 0


def cmd_import(args) -> int:
    from memjudge.importers import import_dataset
    from memjudge.io import dumps

    summary = import_dataset(args.dataset, args.folder, out=args.out).summary()
    if args.json:
        print(dumps(summary, indent=2))
        return 0
    src = "no sources" if summary["sources"] is None else f"{summary['sources']:,} sources"
    print(f"{summary['dataset']}: {summary['candidates']:,} candidates ({summary['personas']:,} personas, "
          f"{len(summary['categories'])} categories), {src}, {summary['labels']:,} labels → {args.out}")
    for judge, j in summary["judges"].items():
        verdicts = ", ".join(f"{k} {v:,}" for k, v in j["verdicts"].items())
        print(f"  {judge}: {j['labels']:,} labels ({verdicts})")
    for note in summary["notes"]:
        print(f"  note: {note}")
    print(f"  licence: {summary['licence']}")
    return 0


def cmd_batch(args) -> int:
    from memjudge.batch import batch_cancel, batch_status
    from memjudge.io import dumps

    rows = (batch_cancel if args.batch_command == "cancel" else batch_status)(args.run_dir, base_url=args.base_url)
    if args.json:
        print(dumps(rows, indent=2))
        return 0
    if not rows:
        print(f"{args.run_dir}: no batch jobs")
    for r in rows:
        counts = r["counts"] or {}
        done = f" {counts.get('completed', 0)}/{counts.get('total', r['requests'])} done" if counts else ""
        where = r["job_id"] or "(not submitted)"
        tail = f", {r['without_answer']} without a valid answer" if r["without_answer"] is not None else ""
        print(f"{where}  {r['status'] or r['state']}  {r['requests']} requests{done}{tail}  submitted {r['submitted_at'] or '-'}  [{r['label']}]")
    return 0


# ---------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        return int(args.func(args) or 0)
    except MemjudgeError as e:
        msg = str(e)
        print(msg if msg.startswith("memjudge") or not isinstance(e, UsageError) else f"memjudge: {msg}", file=sys.stderr)
        return 2
    except (FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError) as e:
        # A path the user named that cannot be written as asked: their fix, so one line.
        if e.filename is None:
            raise
        print(f"memjudge: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memjudge: interrupted; answers received so far are saved, rerun the same command to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
