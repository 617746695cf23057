"""The `memjudge` commands' handlers: `cmd_<name>(args) -> int`, one per command.

Each parses nothing (`memjudge.cli.parser` did), calls the Python API and prints; heavy modules
are imported inside the handler that needs them, so `memjudge --help` and the gate stay fast.
"""

from __future__ import annotations

import sys
from pathlib import Path

from memjudge.errors import UsageError

__all__ = [
    "cmd_agreement",
    "cmd_annotate",
    "cmd_batch",
    "cmd_cache",
    "cmd_calibrate",
    "cmd_compare",
    "cmd_demo",
    "cmd_doctor",
    "cmd_estimate",
    "cmd_import",
    "cmd_llama_server",
    "cmd_noise",
    "cmd_panel",
    "cmd_report",
    "cmd_robustness",
    "cmd_sample",
    "cmd_score",
    "cmd_simulate",
]


def cmd_score(args) -> int:
    from memjudge.cli.private import private_overrides
    from memjudge.formats import dumps
    from memjudge.judges.panel import judge_config
    from memjudge.scoring.engine import RunOptions, score_run

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    judge = judge_config(
        args.judge, args.judges_file, base_url=args.base_url, concurrency=args.concurrency, rpm=args.rpm,
        tpm=args.tpm, temperature=args.temperature, seed=args.seed, max_output_tokens=args.max_output_tokens,
        thinking_budget=args.thinking_budget, response_format=args.response_format, logprobs=args.logprobs,
        **private_overrides(args),
    )
    result = score_run(
        args.candidates, args.sources, judge, rubric=args.rubric, facts=args.facts, replicates=args.replicates,
        out=args.out, cache_dir=args.cache_dir, dry_run=args.dry_run, limit=args.limit,
        progress=not (args.no_progress or args.quiet) and sys.stderr.isatty(),
        run=RunOptions(parquet=args.parquet, argv=settings, echo=None if args.json else print, batch=args.batch,
                       batch_fallback=args.batch_fallback),
    )
    s = result.summary
    if args.json:
        print(dumps(s.as_dict(), indent=2))
        return 0
    if s.dry_run:
        cost = f"${s.estimated_cost_usd:.4f}" if s.estimated_cost_usd is not None else "unknown (no prices: set price_input_per_mtok / price_output_per_mtok or price_per_call in --judges-file)"
        print(f"dry run: {s.calls} calls for {s.rows} rows ({s.judge}, {s.rubric}); {s.cached} cached, {s.resumed} in the run's journal, {s.calls - s.cached - s.resumed} to request")
        print(f"estimated tokens: {s.estimated_input_tokens:,} input + {s.estimated_output_tokens:,} output; estimated cost: {cost}"
              + (f" (batch prices: x{s.batch['discount']:g})" if s.batch and s.estimated_cost_usd is not None else ""))
        if s.estimated_cache_tokens:
            c = s.estimated_cache_tokens
            saving = f"; saves ${s.estimated_cache_saving_usd:.4f} (included above)" if s.estimated_cache_saving_usd is not None else ""
            print(f"prompt cache: ~{c['cache_write_tokens']:,} tokens written, ~{c['cached_tokens']:,} read{saving}")
        return 0
    name = "labels.jsonl" if result.labels is not None else "coverage.jsonl"
    assert result.out_dir is not None  # set whenever the run writes, which the CLI's always does
    counts = ", ".join(f"{k} {v}" for k, v in sorted(s.verdicts.items()))
    cost = f", cost ${s.cost_usd:.4f}" if s.cost_usd is not None else ""
    print(f"wrote {result.out_dir / name}: {s.rows} rows{' (' + counts + ')' if counts else ''}")
    if args.quiet:
        return _errors_note(s)
    if s.requested == 0 and s.errors == 0 and not s.batch:
        print(f"all {s.calls} answers from the {'run journal and cache' if s.resumed and s.cached else ('run journal' if s.resumed else 'cache')}: no request made; {s.seconds:.1f} s")
        return 0
    print(f"{s.requested} calls requested ({s.requests} requests, {s.reasks} re-asks, {s.retries} retries), {s.cached} cached, {s.resumed} resumed, {s.errors} without a valid answer; "
          f"tokens {s.tokens.get('input_tokens', 0):,} in / {s.tokens.get('output_tokens', 0):,} out{cost}; {s.seconds:.1f} s")
    if s.tokens.get("cache_write_tokens") or s.tokens.get("cached_tokens"):
        saved = f"; saved ${s.cache_saving_usd:.4f}" if s.cache_saving_usd is not None else ""
        print(f"prompt cache: {s.tokens.get('cache_write_tokens', 0):,} tokens written, {s.tokens.get('cached_tokens', 0):,} read{saved}")
    if s.batch:
        b = s.batch
        print(f"batch: {b['jobs_submitted']} jobs submitted, {b['jobs_found']} found from an earlier run, {b['resubmitted']} requests resubmitted, "
              f"{b['online']} asked online; costs at x{b['discount']:g} (state: {b['state_file']})")
    return _errors_note(s)


def _errors_note(s) -> int:
    if s.errors:
        print(f"memjudge: {s.errors} calls have no valid answer (verdict null, see 'error'); rerun the same command to ask them again", file=sys.stderr)
    return 0


def cmd_cache(args) -> int:
    from memjudge.formats import dumps
    from memjudge.scoring.cache import cache_clear, cache_stats

    if args.cache_command == "stats":
        out = cache_stats(args.cache_dir)
        text = f"{out['directory']}: {out['entries']} answers, {out['size_bytes']:,} bytes (eviction {out['eviction_policy']})"
    else:
        if not args.yes:
            _confirm_clear(args.cache_dir)
        out = cache_clear(args.cache_dir)
        text = f"{out['directory']}: removed {out['removed']} answers"
    print(dumps(out, indent=2) if args.json else text)
    return 0


def _confirm_clear(cache_dir) -> None:
    """The cache holds answers that were paid for: ask on a terminal, refuse without one."""
    from memjudge.scoring.cache import resolve_cache_dir

    where = resolve_cache_dir(cache_dir)
    if not sys.stdin.isatty():
        raise UsageError(f"cache clear: refusing to delete the cached answers in {where} without a terminal to ask; "
                         "add --yes to confirm")
    answer = input(f"Delete every cached answer in {where}? Paid answers cannot be recovered. [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise UsageError("cache clear: nothing deleted")


def _emit_analysis(args, data: dict, text: str, filename: str | None, notes=()) -> int:
    """Shared tail of analysis commands: RUN_DIR/filename for `report` (None: the command wrote
    its files itself), JSON or a table on stdout."""
    from memjudge.formats import dumps, write_json

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
    from memjudge.formats import read_labels
    from memjudge.stats.noise import noise

    res = noise(read_labels(args.labels), seed=args.seed, B=args.bootstrap)
    return _emit_analysis(args, res.to_json(), res.to_text(), "noise.json", res.notes)


def cmd_agreement(args) -> int:
    from memjudge.formats import read_gold, read_labels
    from memjudge.stats.agreement import agreement

    labels = read_labels(args.labels)
    gold = read_gold(args.gold) if args.gold else None
    notes: list[str] = []
    if gold is not None and "annotator" in gold.columns and gold["annotator"].nunique() > 1:
        # several annotators: each is a rater `human:NAME` beside the judges (spec §10)
        import pandas as pd

        from memjudge.annotate.gold import gold_raters

        humans, notes = gold_raters(gold, labels, args.replicate)
        labels, gold = pd.concat([labels, humans], ignore_index=True), None
    res = agreement(labels, gold=gold, replicate=args.replicate, seed=args.seed, B=args.bootstrap,
                    label_set=args.label_set)
    res.notes.extend(notes)
    return _emit_analysis(args, res.to_json(), res.to_text(), "agreement.json", res.notes)


def cmd_compare(args) -> int:
    from memjudge.comparison import compare

    res = compare(
        args.candidates, list(args.labels), args.coverage, judge=args.judge, replicate=args.replicate,
        gate=args.gate, floor=args.floor, repeats=args.repeats, folds=args.folds, seed=args.seed,
        per_category=args.per_category_method, gold=args.gold, strict_binary=args.strict_binary,
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
    return _emit_analysis(args, res.to_json(), text, None, res.notes())  # write_run wrote compare.json


def cmd_robustness(args) -> int:
    from memjudge.comparison.robustness import robustness

    res = robustness(
        args.candidates, list(args.labels), list(args.coverage) if args.coverage else None,
        gate=args.gate, floor=args.floor, repeats=args.repeats, folds=args.folds, seed=args.seed,
        per_category=args.per_category_method, gold=args.gold, strict_binary=args.strict_binary,
    )
    text = res.render() + (f"\n\nwrote robustness.json to {args.out}" if args.out else "")
    return _emit_analysis(args, res.to_json(), text, "robustness.json", res.notes())


def cmd_report(args) -> int:
    from memjudge.reporting import parse_formats, report

    res = report(args.run_dir, formats=parse_formats(args.format), dpi=args.dpi)
    if args.open:
        _open_in_browser(res)
    if getattr(args, "json", False):
        from memjudge.formats import dumps

        print(dumps(res.to_dict(), indent=2))
        return 0
    for p in res.written:
        print(p)
    if res.absent:
        print("absent from the run (not in the report): " + ", ".join(res.absent), file=sys.stderr)
    return 0


def _open_in_browser(res) -> None:
    import webbrowser

    html = next((p for p in res.written if str(p).endswith(".html")), None)
    if html is None:
        raise UsageError("report --open: no report.html was written (add html to --format)")
    if not webbrowser.open(Path(html).resolve().as_uri()):
        print(f"memjudge: could not open a browser; the report is {Path(html).resolve()}", file=sys.stderr)


def cmd_simulate(args) -> int:
    from memjudge.formats import dumps
    from memjudge.simulation import simulate

    corpus = simulate(preset=args.preset, seed=args.seed, personas=args.personas, config=args.config, out=args.out)
    summary = dict(corpus.summary(), out=args.out, preset=args.preset, seed=args.seed, simulated=True,
                   files={name: f"{args.out}/{name}.jsonl" for name in corpus.FILES})
    if args.extractor_variant:
        summary["variant"] = _simulate_variant(args, corpus)
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
        if args.extractor_variant:
            v = summary["variant"]
            print(f"variant {v['spec']}: {v['candidates']} candidates over the same {v['personas']} personas "
                  f"-> {v['out']}; support {100 * v['support']:.2f}% overall, values "
                  f"{100 * (v['support_values'] or 0):.1f}%, other {100 * (v['support_other'] or 0):.1f}%; "
                  f"write-all coverage {100 * v['coverage']:.1f}%")
    return 0


def _simulate_variant(args, corpus) -> dict:
    """The second extractor's corpus (--extractor-variant), written; its summary."""
    from memjudge.simulation.variant import extractor_variant, parse_variant

    out = args.variant_out or str(Path(args.out) / "variant")
    variant = extractor_variant(corpus, parse_variant(args.extractor_variant, corpus.truth["category"].unique()),
                                seed=args.seed)
    variant.write(out)
    return dict(variant.summary(), spec=args.extractor_variant, out=out)


def cmd_demo(args) -> int:
    from memjudge.demo import demo
    from memjudge.formats import dumps

    res = demo(args.out, args.personas, seed=args.seed, cache_dir=args.cache_dir,
               progress=not (args.no_progress or args.quiet) and sys.stderr.isatty(),
               echo=(lambda line: None) if args.quiet else (lambda line: print(line, file=sys.stderr)) if args.json else print)
    if args.json:
        print(dumps(res.as_dict(), indent=2))
        return 0
    if res.report:
        html = Path(res.report).with_suffix(".html")
        print(f"report: {Path(res.report).resolve()}" + (f"\n        {html.resolve()}" if html.is_file() else ""))
    else:
        print(f"report: {Path(res.out).resolve()}")
    return 0


def cmd_calibrate(args) -> int:
    from memjudge.formats import dumps
    from memjudge.stats.thresholds import calibrate

    if args.target == "coverage_rate" and not args.coverage:
        raise UsageError("--target coverage_rate matches the share of reference facts covered: it needs --coverage")
    if args.coverage:
        from memjudge.stats.coverage import calibrate_coverage_files

        cal = calibrate_coverage_files(args.labels, args.gold, args.judge, target=args.target)
    else:
        cal = calibrate(args.labels, args.gold, args.judge, target=args.target, own=args.own_threshold)
    if args.panel is not None:
        from memjudge.judges.panel import write_threshold

        # Statistics return the threshold; the command writes it.
        if args.coverage:
            write_threshold(args.panel, cal.judge, cal.threshold, key="coverage_threshold")
        else:
            write_threshold(args.panel, cal.judge, cal.threshold, cal.category_thresholds)
        cal.panel = str(args.panel)
    if args.json:
        print(dumps(cal.as_dict(), indent=2))
    else:
        rest = " (the other categories)" if cal.category_thresholds else ""
        print(f"{cal.judge}: threshold {cal.threshold:+.4f}{rest} on judge_score ({cal.target} {cal.target_value:.3f}; "
              f"{cal.n} items, {cal.n_supported} supported, {cal.n_unsupported} unsupported)")
        for c, t in cal.category_thresholds.items():
            print(f"  category {c}: threshold {t:+.4f} of its own")
        print(f"  balanced accuracy {cal.balanced_accuracy:.3f}, accuracy {cal.accuracy:.3f}, AUC {cal.auc:.3f} "
              "(in-sample: report quality on other data)")
        print(f"  written to {cal.panel}: use it with --judges-file {cal.panel}")
    return 0


def cmd_import(args) -> int:
    from memjudge._util.registry import memory_system_names
    from memjudge.formats import dumps
    from memjudge.importers import get_importer, import_dataset

    if args.dataset in memory_system_names():
        from memjudge.cli.inputs import cmd_import_memory

        return cmd_import_memory(args)
    if args.map:
        raise UsageError(f"memjudge import {args.dataset}: --map is for a memory system's export")

    importer = get_importer(args.dataset)
    if getattr(importer, "writes", None) == "gold":  # label-studio: one export file in, one gold file out
        summary = importer.import_gold(args.folder, args.out)
        if args.json:
            print(dumps(summary, indent=2))
        else:
            print(f"{args.dataset}: {summary['gold_rows']:,} gold labels by {len(summary['annotators'])} annotator(s) "
                  f"({', '.join(summary['annotators'])}) from {summary['tasks']:,} tasks → {args.out}")
            print(f"  {summary['annotations']:,} annotations: {summary['cancelled']:,} cancelled/skipped, "
                  f"{summary['without_verdict']:,} without a verdict, {summary['superseded']:,} superseded by a later one")
        return 0
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


def cmd_annotate(args) -> int:
    from memjudge.annotate.items import judge_views, load_items

    items = load_items(args.items, args.sources)
    if args.export == "label-studio":
        from memjudge.annotate.label_studio import export_tasks

        tasks_path, config = export_tasks(items, args.out)
        print(f"wrote {len(items):,} Label Studio tasks to {tasks_path} and their labelling config to {config}")
        print("  then: memjudge import label-studio EXPORT.json --out GOLD.jsonl (Label Studio: Export → JSON)")
        return 0
    from memjudge.web.annotate import Session, serve
    from memjudge.web.app import annotator_name, check_port

    check_port(args.port)
    session = Session(items, args.out, annotator_name(args.annotator), judge=judge_views(args.show_judge) if args.show_judge else None)
    if session.writer.repaired:
        print(f"memjudge: {args.out}: {session.writer.repaired}", file=sys.stderr, flush=True)
    serve(session, args.host, args.port, open_browser=not args.no_browser)
    print(f"stopped: {len(session.decisions):,} of {session.total:,} items labelled by {session.annotator} "
          f"({session.written:,} decisions this run) in {args.out}", file=sys.stderr)
    return 0


def cmd_panel(args) -> int:
    from pathlib import Path

    from memjudge.stats.panel import panel

    if Path(args.out).suffix.lower() not in (".jsonl", ".csv", ".parquet"):
        raise UsageError(f"memjudge panel: --out must be a labels file (.jsonl, .csv or .parquet), got {args.out!r}")
    judges = [j.strip() for j in args.judges.split(",") if j.strip()] if args.judges else None
    res = panel(args.labels, judges=judges, method=args.method, replicate=args.replicate, by=args.by,
                gold=args.gold, B=args.bootstrap, seed=args.seed)
    labels_path, summary_path = res.write(args.out)
    text = res.to_text() + f"\n\nwrote {labels_path} (judge {res.judge}) and {summary_path}"
    return _emit_analysis(args, res.to_json(), text, None, res.notes)  # write() wrote panel.json


def cmd_batch(args) -> int:
    from memjudge.formats import dumps
    from memjudge.scoring.batch import batch_cancel, batch_status

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


def cmd_sample(args) -> int:
    from pathlib import Path

    from memjudge.formats import dumps, frame_records, write_atomic, write_jsonl
    from memjudge.stats.active_sampling import sample

    out = Path(args.out)
    if out.suffix not in (".jsonl", ".csv"):
        raise UsageError(f"--out must end in .jsonl or .csv, got {args.out!r}")
    rows = sample(args.candidates, args.n, labels=args.labels, strategy=args.strategy, by=args.by, seed=args.seed,
                  sources=args.sources, top_up=args.top_up, judge=args.judge, replicate=args.replicate,
                  uncertainty=args.uncertainty, mix=args.mix, min_prob=args.min_prob, gold=args.gold)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        write_atomic(out, rows.to_csv(index=False))  # to_csv(out) would follow a link planted there
    else:
        write_jsonl(out, frame_records(rows))
    info = {"out": str(out), "rows": len(rows), "new_rows": len(rows) - rows.attrs["existing"],
            "population": rows.attrs["population"], "strategy": args.strategy, "judge": rows.attrs["judge"],
            "seed": args.seed, "strata": rows.attrs["strata"]}
    if "design" in rows.attrs:  # --strategy active
        info["design"] = rows.attrs["design"]
    if args.json:
        print(dumps(info, indent=2))
        return 0
    print(f"{info['rows']} rows ({info['new_rows']} new) of {info['population']} candidates → {out} "
          f"({args.strategy}, seed {args.seed})")
    if "design" in info:
        d = info["design"]
        print(f"  signal {d['signal']}; uncertainty {d['uncertainty']}")
        print(f"  mixed with uniform: W = {d['mix_w']:g} ({d['mix_w_chosen']}); floor {d['min_prob']:.4g}; "
              f"expected {d['expected_new']:.1f} new rows; {d['items_at_prob_1']} rows at inclusion_prob 1")
    if len(info["strata"]) > 1:
        for k, v in info["strata"].items():
            print(f"  {k}: {v['sampled']} of {v['size']}")
    return 0


def cmd_estimate(args) -> int:
    from memjudge.stats.estimate import estimate

    if args.plan and args.half_width is None:
        raise UsageError("--plan needs --half-width, e.g. --half-width 0.02")
    if args.half_width is not None and not args.plan:
        raise UsageError("--half-width goes with --plan")
    res = estimate(list(args.labels), args.gold, judge=args.judge, replicate=args.replicate, by=args.by,
                   interval=args.interval, sample=args.sample, B=args.bootstrap, seed=args.seed,
                   half_width=args.half_width if args.plan else None)
    text = res.render() + (f"\n\nwrote estimate.json to {args.out}" if args.out else "")
    return _emit_analysis(args, res.to_dict(), text, "estimate.json", res.notes)


# --- doctor, llama-server (issue 54) ---------------------------------------------------------


def cmd_doctor(args) -> int:
    from memjudge.doctor import doctor, doctor_text
    from memjudge.formats import dumps

    report = doctor(self_test=not args.no_self_test, rerun=args.rerun)
    print(dumps(report, indent=2) if args.json else doctor_text(report))
    return 0 if report["ok"] else 1


def cmd_llama_server(args) -> int:
    from memjudge.judges.local_server import serve

    return serve(args.server_args)
