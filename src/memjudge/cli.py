"""The `memjudge` command line: parses arguments, calls the Python API, prints.

Any `MemjudgeError` becomes one line on stderr and exit status 2. Each command's handler
is `cmd_<name>(args) -> int`; heavy modules are imported inside handlers so that
`memjudge --help` and the gate stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

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


def _add_verbosity(parser) -> None:
    g = parser.add_mutually_exclusive_group()
    g.add_argument("--quiet", "-q", action="store_true", help="print only results and errors (no progress bar)")
    g.add_argument("--verbose", "-v", action="store_true", help="also log every retry and failed request on stderr")


def _presets() -> list[str]:
    # Listed from the package data, not through memjudge.simulation: --help must not import pandas.
    from importlib import resources

    return sorted(p.name[:-5] for p in resources.files("memjudge").joinpath("presets").iterdir() if p.name.endswith(".toml"))


# Written out so that --help imports nothing heavy; tests check them against the registries.
DATASETS_HELP = "synthpai, xsumfaith, label-studio"
TARGETS_HELP = "balanced_accuracy (default), accuracy, youden, f1_unsupported"
STRICT_BINARY_HELP = ("a verdict other than supported/unsupported (e.g. partial) is no valid verdict, left out of "
                      "faithfulness and support rates (default: valid and not supported)")


def build_parser() -> argparse.ArgumentParser:
    from memjudge import __version__

    p = _Parser(prog="memjudge", description="LLM-judge evaluation harness for the write boundary of agent memory.")
    p.add_argument("--version", action="version", version=f"memjudge {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    # --- score -------------------------------------------------------------------------
    s = sub.add_parser("score", help="label candidates' source support (or coverage) with a judge")
    s.add_argument("candidates", help="candidate assertions (JSONL, CSV or Parquet)")
    s.add_argument("--sources", required=True, help="one source per persona (persona_id, source)")
    s.add_argument("--judge", required=True, help="PROVIDER:MODEL, e.g. gemini:gemini-2.5-flash, openai:gpt-4o-mini, local:qwen2.5-coder-1.5b, sim:NAME")
    s.add_argument("--judges-file", help="judges.toml panel with generation parameters, limits and prices")
    s.add_argument("--base-url", help="endpoint of an OpenAI-compatible server (vLLM, Ollama, llama.cpp), with /v1")
    s.add_argument("--rubric", default="support", help="support (default), coverage, or a path to a rubric .toml file")
    s.add_argument("--facts", help="reference facts for the coverage rubric (without them the judge lists the facts)")
    s.add_argument("--replicates", type=_positive_int, default=1, help="score each item R times (replicate indices 0..R-1)")
    s.add_argument("--limit", type=_positive_int, metavar="N",
                   help="score only the first N personas (in file order): a quick look before paying for a run")
    s.add_argument("--concurrency", type=_positive_int, help="requests in flight at once (default 16, or the panel's)")
    s.add_argument("--rpm", type=float, help="requests per minute limit")
    s.add_argument("--tpm", type=float, help="tokens per minute limit (estimated from the prompt length)")
    s.add_argument("--temperature", type=float, help="sampling temperature (default 0)")
    s.add_argument("--seed", type=int, help="sampling seed, where the provider honours one")
    s.add_argument("--max-output-tokens", type=_positive_int, help="answer token limit (default 1024; thinking counts too)")
    s.add_argument("--thinking-budget", type=int, help="Gemini thinking tokens (0 turns thinking off on 2.5 Flash)")
    s.add_argument("--out", default=None, help="run directory (default runs/<judge>-<rubric>)")
    s.add_argument("--cache-dir", help="answer cache (default $MEMJUDGE_CACHE_DIR or ~/.cache/memjudge)")
    s.add_argument("--parquet", action="store_true", help="also write labels.parquet")
    s.add_argument("--response-format", choices=["auto", "json_schema", "json_object", "text"],
                   help="how the answer's JSON is asked for (openai:, gemini:); auto (default) falls back from a strict schema to JSON mode to text")
    s.add_argument("--logprobs", action=argparse.BooleanOptionalAction, default=None,
                   help="ask for token log-probabilities and record the verdict's log-odds as judge_score (default on)")
    s.add_argument("--dry-run", action="store_true", help="validate everything and estimate calls, tokens and cost without calling")
    s.add_argument("--batch", action="store_true", help="use the provider's batch API (about half price, within 24 h)")
    s.add_argument("--batch-fallback", choices=["resubmit", "online"], default="resubmit",
                   help="batch lines that failed: resubmit in a new job (default) or ask online")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_verbosity(s)
    s.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    s.set_defaults(func=cmd_score)

    # --- cache -------------------------------------------------------------------------
    c = sub.add_parser("cache", help="inspect or clear the answer cache")
    csub = c.add_subparsers(dest="cache_command", metavar="ACTION", parser_class=_Parser)
    csub.required = True
    for name, helptext in (("stats", "entries, size and location"), ("clear", "delete every cached answer (asks first)")):
        cc = csub.add_parser(name, help=helptext, description=helptext)
        cc.add_argument("--cache-dir", help="the cache (default $MEMJUDGE_CACHE_DIR or ~/.cache/memjudge)")
        if name == "clear":
            cc.add_argument("--yes", "-y", action="store_true",
                            help="do not ask (needed without a terminal): paid answers are deleted")
        cc.add_argument("--json", action="store_true", help="print the result as JSON")
        cc.set_defaults(func=cmd_cache)

    # --- noise -------------------------------------------------------------------------
    n = sub.add_parser("noise", help="re-score flip rates per judge")
    n.add_argument("labels", nargs="+", help="labels files (score output or an import); concatenated")
    n.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    n.add_argument("--bootstrap", type=_positive_int, default=2000, metavar="B", help="persona-cluster bootstrap resamples (default 2000)")
    n.add_argument("--out", metavar="RUN_DIR", help="write noise.json there (for memjudge report)")
    n.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    n.set_defaults(func=cmd_noise)

    # --- agreement ---------------------------------------------------------------------
    a = sub.add_parser("agreement", help="agreement between judges (and with gold labels)")
    a.add_argument("labels", nargs="+", help="labels files of the judges to compare; concatenated")
    a.add_argument("--gold", help="gold labels (assertion_id, verdict[, annotator]): each judge is also scored against them")
    a.add_argument("--replicate", type=_replicate_choice, default=0,
                   help="which replicate stands for a judge: an index (default 0) or 'majority' of its replicates")
    a.add_argument("--label-set", metavar="L1,L2,...",
                   help="the labels a judge could give (e.g. supported,unsupported,partial): Gwet's AC1 uses their "
                        "number as q (default: the labels each pair used)")
    a.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    a.add_argument("--bootstrap", type=_positive_int, default=2000, metavar="B", help="persona-cluster bootstrap resamples (default 2000)")
    a.add_argument("--out", metavar="RUN_DIR", help="write agreement.json there (for memjudge report)")
    a.add_argument("--json", action="store_true", help="print the JSON instead of the tables")
    a.set_defaults(func=cmd_agreement)

    # --- compare -----------------------------------------------------------------------
    m = sub.add_parser("compare", help="write-all vs global vs targeted retention policies (Table 1)")
    m.add_argument("candidates", help="candidates with confidence (persona_id, assertion_id, category, confidence, text)")
    m.add_argument("--labels", required=True, nargs="+", help="the judge's support labels (score output)")
    m.add_argument("--coverage", help="coverage.jsonl (score --rubric coverage): enables estimated coverage")
    m.add_argument("--judge", help="which judge's labels to use when the files hold several")
    m.add_argument("--replicate", type=_replicate_choice, default=0, help="a replicate index (default 0) or 'majority'")
    m.add_argument("--gate", default="values",
                   help="gated categories of the targeted policy: a comma list, or 'auto' (lowest-support category, chosen in each fit fold)")
    m.add_argument("--floor", type=float, default=0.8, help="minimum retention when fitting a threshold (default 0.8)")
    m.add_argument("--repeats", type=_positive_int, default=20, help="repetitions of K-fold CV over personas (default 20)")
    m.add_argument("--folds", type=_positive_int, default=5, help="folds K (default 5)")
    m.add_argument("--seed", type=int, default=0, help="seed of the fold assignment and the bootstrap (default 0)")
    m.add_argument("--out", metavar="RUN_DIR", help="write compare.json, sweep.json, calibration.json there")
    m.add_argument("--export-policy", metavar="PATH",
                   help="write the --policy fitted on all personas as a policy JSON for memjudge.gate")
    m.add_argument("--policy", choices=["targeted", "global", "per_category"], default="targeted",
                   help="which policy --export-policy writes (default targeted)")
    m.add_argument("--per-category-method", choices=["greedy", "exact"], default="greedy",
                   help="per_category fit: greedy coordinate ascent (default, linear) or the exact optimum")
    m.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    m.add_argument("--gold", help="hand labels (assertion_id, verdict[, annotator, labelled_at]; a labelled `memjudge "
                                  "sample` file is weighted by its inclusion_prob): held-out faithfulness also "
                                  "estimated by PPI++ (thresholds still fitted on the judge's labels)")
    m.add_argument("--strict-binary", action="store_true", help=STRICT_BINARY_HELP)
    m.set_defaults(func=cmd_compare)

    # --- robustness --------------------------------------------------------------------
    r = sub.add_parser("robustness", help="does the policy ordering survive a change of judge?")
    r.add_argument("candidates", help="candidates with confidence")
    r.add_argument("--labels", required=True, nargs="+", help="labels of every judge (and replicate) to compare under")
    r.add_argument("--coverage", nargs="+", help="coverage files (each judge's, or one for all)")
    r.add_argument("--gate", default="values", help="gated categories (comma list) or 'auto'")
    r.add_argument("--floor", type=float, default=0.8, help="minimum retention when fitting (default 0.8)")
    r.add_argument("--repeats", type=_positive_int, default=20, help="CV repetitions (default 20)")
    r.add_argument("--folds", type=_positive_int, default=5, help="folds K (default 5)")
    r.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    r.add_argument("--per-category-method", choices=["greedy", "exact"], default="greedy",
                   help="per_category fit: greedy (default) or exact")
    r.add_argument("--out", metavar="RUN_DIR", help="write robustness.json there (for memjudge report)")
    r.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    r.add_argument("--gold", help="hand labels: each judge's held-out faithfulness also estimated by PPI++")
    r.add_argument("--strict-binary", action="store_true", help=STRICT_BINARY_HELP)
    r.set_defaults(func=cmd_robustness)

    # --- report ------------------------------------------------------------------------
    rp = sub.add_parser("report", help="Markdown/HTML report with figures from a run directory")
    rp.add_argument("run_dir", help="a run directory holding the analyses' JSON")
    rp.add_argument("--format", default="md,html", help="comma list of md, html (figures are always written)")
    rp.add_argument("--json", action="store_true", help="print what was written and which parts were found as JSON")
    rp.add_argument("--dpi", type=_positive_int, default=200, help="resolution of the PNG figures (default 200)")
    rp.add_argument("--open", action="store_true", help="open report.html in the web browser when written")
    rp.set_defaults(func=cmd_report)

    # --- simulate ----------------------------------------------------------------------
    sm = sub.add_parser("simulate", help="generate synthetic personas with known truth")
    sm.add_argument("--preset", default="paper", help=f"generator settings (default paper; known: {', '.join(_presets())})")
    sm.add_argument("--seed", type=int, default=0, help="seed (default 0): same seed, same corpus")
    sm.add_argument("--personas", type=_positive_int, help="number of personas (default: the preset's)")
    sm.add_argument("--config", help="a TOML file overriding any of the preset's settings")
    sm.add_argument("--out", required=True, help="folder for candidates, sources, facts, truth, gold labels")
    sm.add_argument("--json", action="store_true", help="print the summary as JSON")
    sm.set_defaults(func=cmd_simulate)

    # --- demo --------------------------------------------------------------------------
    d = sub.add_parser("demo", help="the whole study offline with the embedded judge")
    d.add_argument("--out", default="runs/demo", help="run directory (default runs/demo)")
    d.add_argument("--personas", type=_positive_int, help="personas in the generated corpus (default 10)")
    d.add_argument("--cache-dir", help="answer cache (default $MEMJUDGE_CACHE_DIR or ~/.cache/memjudge)")
    d.add_argument("--no-progress", action="store_true", help="no progress bar")
    d.add_argument("--seed", type=int, default=0, help="corpus seed (default 0)")
    _add_verbosity(d)
    d.add_argument("--json", action="store_true", help="print the result as JSON")
    d.set_defaults(func=cmd_demo)

    # --- calibrate ---------------------------------------------------------------------
    cb = sub.add_parser("calibrate", help="pick a judge's threshold on judge_score against gold labels")
    cb.add_argument("labels", nargs="+", help="labels with judge_score (score output)")
    cb.add_argument("--gold", required=True, help="gold labels (assertion_id, verdict)")
    cb.add_argument("--judge", required=True, help="the judge whose threshold to pick")
    cb.add_argument("--target", default="balanced_accuracy", help=f"what the threshold maximises: {TARGETS_HELP}")
    cb.add_argument("--panel", default="judges.toml", help="judge panel file to write the threshold into")
    cb.add_argument("--json", action="store_true", help="print the result as JSON")
    cb.set_defaults(func=cmd_calibrate)

    # --- import ------------------------------------------------------------------------
    im = sub.add_parser("import", help="convert a public dataset into memjudge's formats")
    im.add_argument("dataset", help=f"the dataset's name: {DATASETS_HELP}")
    im.add_argument("folder", help="the dataset's folder (or file)")
    im.add_argument("--out", required=True, help="folder for candidates, sources, labels and import.json")
    im.add_argument("--json", action="store_true", help="print the summary as JSON")
    im.set_defaults(func=cmd_import)

    # --- annotate ----------------------------------------------------------------------
    an = sub.add_parser("annotate", help="label items by hand in the browser (gold labels), or export them for Label Studio")
    an.add_argument("items", help="items to label: the output of `memjudge sample` or any candidates file")
    an.add_argument("--sources", help="sources, one per persona (default: a 'source' column in ITEMS)")
    an.add_argument("--out", required=True, help="gold file to append to (JSONL); with --export, the tasks file to write")
    an.add_argument("--annotator", help="your name in the gold file (default: the login name)")
    an.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    an.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    an.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    an.add_argument("--show-judge", nargs="+", metavar="LABELS", help="show these labels files' verdicts and evidence (not blind)")
    an.add_argument("--export", choices=["label-studio"], help="write Label Studio tasks (--out TASKS.json) and their labelling config instead of serving")
    an.set_defaults(func=cmd_annotate)

    # --- panel -------------------------------------------------------------------------
    pn = sub.add_parser("panel", help="consensus verdicts of several judges and each judge's error rates without gold")
    pn.add_argument("labels", nargs="+", help="labels files of two or more judges (spec §6)")
    pn.add_argument("--judges", help="comma-separated judges of the panel (default: every judge in the labels)")
    pn.add_argument("--method", choices=["majority", "dawid-skene", "one-coin"], default="dawid-skene",
                    help="dawid-skene (default; a confusion matrix per judge), one-coin (one accuracy per judge) or majority (ties: no verdict)")
    pn.add_argument("--replicate", type=_replicate_choice, default=0,
                    help="which verdict stands for a judge with replicates: an index (default 0) or 'majority'")
    pn.add_argument("--by", choices=["category"], help="error rates per category as well")
    pn.add_argument("--gold", help="gold labels: each judge's sensitivity and specificity measured beside the estimate")
    pn.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    pn.add_argument("--bootstrap", type=_positive_int, default=2000, metavar="B", help="persona-cluster bootstrap resamples (default 2000)")
    pn.add_argument("--out", required=True, help="the panel's labels file (.jsonl, .csv, .parquet); panel.json is written beside it")
    pn.add_argument("--json", action="store_true", help="print panel.json to stdout")
    pn.set_defaults(func=cmd_panel)

    # --- batch -------------------------------------------------------------------------
    b = sub.add_parser("batch", help="status or cancel of a run's provider batch jobs")
    bsub = b.add_subparsers(dest="batch_command", metavar="ACTION", parser_class=_Parser)
    bsub.required = True
    for name, helptext in (("status", "each batch job of a run: state, requests, done"),
                           ("cancel", "cancel a run's open batch jobs at the provider")):
        bb = bsub.add_parser(name, help=helptext, description=helptext)
        bb.add_argument("run_dir", help="the run directory of a `score --batch` run")
        bb.add_argument("--base-url", help="the provider's endpoint, if not the one recorded")
        bb.add_argument("--json", action="store_true", help="print the jobs as JSON")
        bb.set_defaults(func=cmd_batch)

    # --- sample ------------------------------------------------------------------------
    sa = sub.add_parser("sample", help="draw the assertions to label by hand (with inclusion probabilities)")
    sa.add_argument("candidates", help="the candidates to sample from (JSONL, CSV or Parquet)")
    sa.add_argument("--n", type=_positive_int, required=True, help="rows to draw (with --top-up: rows to add)")
    sa.add_argument("--labels", nargs="+", help="a judge's labels: Neyman allocation, strata by its verdict")
    sa.add_argument("--judge", help="the judge in --labels (when they hold several)")
    sa.add_argument("--replicate", type=_replicate_choice, default=0, help="with --labels: the replicate index (default 0) or 'majority'")
    sa.add_argument("--strategy", choices=["uniform", "stratified"], default="uniform", help="uniform (a simple random sample, default) or stratified (Neyman allocation with --labels)")
    sa.add_argument("--by", help="stratum fields: category, verdict or category,verdict (stratified only)")
    sa.add_argument("--seed", type=int, default=0, help="seed (default 0): same seed, same sample")
    sa.add_argument("--sources", help="copy each persona's source text into the rows (else a source_ref pointer)")
    sa.add_argument("--top-up", help="an existing sample file: keep its rows and add --n new ones")
    sa.add_argument("--out", required=True, help="the sample file to write (.jsonl or .csv)")
    sa.add_argument("--json", action="store_true", help="print the summary as JSON")
    sa.set_defaults(func=cmd_sample)

    # --- estimate ----------------------------------------------------------------------
    es = sub.add_parser("estimate", help="support rates: judge only, gold only and PPI++ (prediction-powered)")
    es.add_argument("labels", nargs="+", help="the judge's labels (score output); concatenated")
    es.add_argument("--gold", required=True, help="hand labels: assertion_id, verdict[, annotator, labelled_at, inclusion_prob]")
    es.add_argument("--sample", help="the sample file the gold items were drawn by (its inclusion_prob weights)")
    es.add_argument("--judge", help="which judge when the labels hold several")
    es.add_argument("--replicate", type=_replicate_choice, default=0, help="a replicate index (default 0) or 'majority'")
    es.add_argument("--by", choices=["category"], help="also per category")
    es.add_argument("--interval", choices=["bootstrap", "clt"], default="bootstrap",
                    help="persona-cluster bootstrap (default) or the iid CLT interval")
    es.add_argument("--bootstrap", type=_positive_int, default=2000, metavar="B", help="bootstrap resamples (default 2000)")
    es.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    es.add_argument("--plan", action="store_true", help="how many gold labels reach --half-width")
    es.add_argument("--half-width", type=float, help="target PPI++ interval half-width for --plan, e.g. 0.02")
    es.add_argument("--out", metavar="RUN_DIR", help="write estimate.json there (for memjudge report)")
    es.add_argument("--json", action="store_true", help="print the JSON instead of the table")
    es.set_defaults(func=cmd_estimate)
    return p


# ---------------------------------------------------------------------------------------
# handlers (one per command; each imports what it needs)


def cmd_score(args) -> int:
    from memjudge.scoring.engine import score_run
    from memjudge.formats import dumps

    settings = {k: v for k, v in vars(args).items() if k != "func"}
    result = score_run(
        args.candidates, args.sources, args.judge, rubric=args.rubric, facts=args.facts,
        replicates=args.replicates, out=args.out, cache_dir=args.cache_dir, dry_run=args.dry_run,
        progress=not (args.no_progress or args.quiet) and sys.stderr.isatty(), parquet=args.parquet,
        judges_file=args.judges_file, base_url=args.base_url, concurrency=args.concurrency,
        rpm=args.rpm, tpm=args.tpm, temperature=args.temperature, seed=args.seed,
        max_output_tokens=args.max_output_tokens, thinking_budget=args.thinking_budget,
        response_format=args.response_format, logprobs=args.logprobs,
        argv=settings, echo=None if args.json else print,
        batch=args.batch, batch_fallback=args.batch_fallback, limit=args.limit,
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
    if args.quiet:
        return _errors_note(s)
    if s.requested == 0 and s.errors == 0 and not s.batch:
        print(f"all {s.calls} answers from the {'run journal and cache' if s.resumed and s.cached else ('run journal' if s.resumed else 'cache')}: no request made; {s.seconds:.1f} s")
        return 0
    print(f"{s.requested} calls requested ({s.requests} requests, {s.reasks} re-asks, {s.retries} retries), {s.cached} cached, {s.resumed} resumed, {s.errors} without a valid answer; "
          f"tokens {s.tokens.get('input_tokens', 0):,} in / {s.tokens.get('output_tokens', 0):,} out{cost}; {s.seconds:.1f} s")
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
    from memjudge.scoring.cache import cache_clear, cache_stats
    from memjudge.formats import dumps

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
    from memjudge.stats.agreement import agreement
    from memjudge.formats import read_gold, read_labels

    labels = read_labels(args.labels)
    gold = read_gold(args.gold) if args.gold else None
    notes = []
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
    from memjudge.stats.thresholds import calibrate
    from memjudge.formats import dumps

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
    from memjudge.importers import get_importer, import_dataset
    from memjudge.formats import dumps

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
        print(f"  then: memjudge import label-studio EXPORT.json --out GOLD.jsonl (Label Studio: Export → JSON)")
        return 0
    import getpass

    from memjudge.annotate.server import Session, serve

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {args.port}")
    annotator = args.annotator
    if annotator is None:
        try:
            annotator = getpass.getuser()
        except (OSError, KeyError):  # no login name (some containers)
            raise UsageError("no login name to use as the annotator: give --annotator NAME") from None
    session = Session(items, args.out, annotator, judge=judge_views(args.show_judge) if args.show_judge else None)
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
    from memjudge.scoring.batch import batch_cancel, batch_status
    from memjudge.formats import dumps

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

    from memjudge.formats import dumps, frame_records, write_jsonl
    from memjudge.stats.sampling import sample

    out = Path(args.out)
    if out.suffix not in (".jsonl", ".csv"):
        raise UsageError(f"--out must end in .jsonl or .csv, got {args.out!r}")
    rows = sample(args.candidates, args.n, labels=args.labels, strategy=args.strategy, by=args.by, seed=args.seed,
                  sources=args.sources, top_up=args.top_up, judge=args.judge, replicate=args.replicate)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".csv":
        rows.to_csv(out, index=False)
    else:
        write_jsonl(out, frame_records(rows))
    info = {"out": str(out), "rows": len(rows), "new_rows": len(rows) - rows.attrs["existing"],
            "population": rows.attrs["population"], "strategy": args.strategy, "judge": rows.attrs["judge"],
            "seed": args.seed, "strata": rows.attrs["strata"]}
    if args.json:
        print(dumps(info, indent=2))
        return 0
    print(f"{info['rows']} rows ({info['new_rows']} new) of {info['population']} candidates → {out} "
          f"({args.strategy}, seed {args.seed})")
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


# ---------------------------------------------------------------------------------------


def _load_dotenv() -> None:
    """Keys from a `.env` file in the working folder, as Inspect AI reads them; the environment
    wins over the file, and memjudge never writes it. MEMJUDGE_NO_DOTENV=1 switches it off."""
    if os.environ.get("MEMJUDGE_NO_DOTENV"):
        return
    path = Path.cwd() / ".env"
    if path.is_file():
        from dotenv import load_dotenv

        load_dotenv(path, override=False)


def _setup_logging(args) -> None:
    """--verbose: the engine's log of retries and failed requests on stderr."""
    if getattr(args, "verbose", False):
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("memjudge: %(message)s"))
        log = logging.getLogger("memjudge")
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    try:
        _load_dotenv()
        args = build_parser().parse_args(argv)
        _setup_logging(args)
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
