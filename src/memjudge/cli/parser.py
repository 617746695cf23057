"""The `memjudge` command line's arguments: one subparser per command, each bound to its
handler in `memjudge.cli.commands`. Nothing heavy is imported here, so `memjudge --help` stays
fast; the names listed in the help come from `memjudge._util.registry`.
"""

from __future__ import annotations

import argparse

from memjudge._util import registry  # standard library only: --help lists names without pandas
from memjudge.cli import view
from memjudge.cli.cascade import add_cascade_parser
from memjudge.cli.commands import (
    cmd_agreement,
    cmd_annotate,
    cmd_batch,
    cmd_cache,
    cmd_calibrate,
    cmd_compare,
    cmd_demo,
    cmd_estimate,
    cmd_import,
    cmd_noise,
    cmd_panel,
    cmd_report,
    cmd_robustness,
    cmd_sample,
    cmd_score,
    cmd_simulate,
)
from memjudge.cli.diff import add_diff_parser
from memjudge.cli.inputs import add_map
from memjudge.cli.private import add_privacy_check_parser, add_private_flags
from memjudge.errors import UsageError

__all__ = ["build_parser", "parse_args"]


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


STRICT_BINARY_HELP = ("a verdict other than supported/unsupported (e.g. partial) is no valid verdict, left out of "
                      "faithfulness and support rates (default: valid and not supported)")


def _targets_help() -> str:
    return ", ".join(f"{t} (default)" if t == registry.DEFAULT_CALIBRATION_TARGET else t for t in registry.CALIBRATION_TARGETS) \
        + "; with --coverage also coverage_rate (the share of facts covered equals the reference's)"


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
    s.add_argument("--judge", required=True, help="PROVIDER:MODEL, e.g. gemini:gemini-2.5-flash, openai:gpt-4o-mini, anthropic:claude-haiku-4-5, azure:DEPLOYMENT, local:qwen2.5-coder-1.5b, sim:NAME")
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
    s.add_argument("--response-format", choices=["auto", "json_schema", "json_object", "tool", "text"],
                   help="how the answer's JSON is asked for (openai:, azure:, gemini:, anthropic:); auto (default) falls back from a "
                        "strict schema to JSON mode (anthropic: a forced tool) to text")
    s.add_argument("--logprobs", action=argparse.BooleanOptionalAction, default=None,
                   help="ask for token log-probabilities and record the verdict's log-odds as judge_score (default on)")
    s.add_argument("--dry-run", action="store_true", help="validate everything and estimate calls, tokens and cost without calling")
    s.add_argument("--batch", action="store_true", help="use the provider's batch API (about half price, within 24 h)")
    s.add_argument("--batch-fallback", choices=["resubmit", "online"], default="resubmit",
                   help="batch lines that failed: resubmit in a new job (default) or ask online")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_verbosity(s)
    s.add_argument("--json", action="store_true", help="print the run's summary as JSON")
    add_map(s, "candidates")
    add_private_flags(s)  # --private (memjudge.cli.private)
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
    add_map(a, "gold")
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
    add_map(m, "candidates")
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
    add_map(r, "candidates")
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
    sm.add_argument("--preset", default="paper", help=f"generator settings (default paper; known: {', '.join(registry.preset_names())})")
    sm.add_argument("--seed", type=int, default=0, help="seed (default 0): same seed, same corpus")
    sm.add_argument("--personas", type=_positive_int, help="number of personas (default: the preset's)")
    sm.add_argument("--config", help="a TOML file overriding any of the preset's settings")
    sm.add_argument("--out", required=True, help="folder for candidates, sources, facts, truth, gold labels")
    sm.add_argument("--extractor-variant", metavar="GROUP=RATE,...",
                    help="also write a second extractor's candidates over the same personas with these support "
                         "rates (e.g. values=0.70,other=0.95), into --variant-out")
    sm.add_argument("--variant-out", help="folder for the variant (default OUT/variant)")
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
    cb.add_argument("--target", default=registry.DEFAULT_CALIBRATION_TARGET,
                    help=f"what the threshold maximises: {_targets_help()}")
    cb.add_argument("--panel", default="judges.toml", help="judge panel file to write the threshold into")
    cb.add_argument("--own-threshold", action="append", default=[], metavar="CATEGORY",
                    help="give this category a threshold of its own, chosen on its items (repeatable; "
                         "the plain threshold is then chosen on the other categories)")
    cb.add_argument("--coverage", action="store_true",
                    help="the inputs are coverage rows with candidate_scores (score --rubric coverage-fact) and --gold is a "
                         "coverage map: set the judge's coverage_threshold")
    cb.add_argument("--json", action="store_true", help="print the result as JSON")
    add_map(cb, "gold")
    cb.set_defaults(func=cmd_calibrate)

    # --- import ------------------------------------------------------------------------
    im = sub.add_parser("import", help="convert a public dataset or a memory system's export into memjudge's formats")
    im.add_argument("dataset", help=f"the dataset's name: {', '.join(registry.dataset_names())}; or the memory system's: "
                                    f"{', '.join(registry.memory_system_names())}")
    im.add_argument("folder", help="the dataset's folder (or file); the memory system's export (JSON, JSONL, CSV or Parquet)")
    im.add_argument("--out", required=True, help="folder for candidates, sources, labels and import.json")
    im.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_map(im, "candidates", handled=True)
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
    add_map(an, "candidates")
    an.set_defaults(func=cmd_annotate)

    view.add_parser(sub)  # memjudge view: memjudge.cli.view

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
    add_map(pn, "gold")
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
    sa.add_argument("--strategy", choices=["uniform", "stratified", "active"], default="uniform", help="uniform (a simple random sample, default), stratified (Neyman allocation with --labels) or active (where the judge is unsure; --labels)")
    sa.add_argument("--by", help="stratum fields: category, verdict or category,verdict (stratified only)")
    sa.add_argument("--seed", type=int, default=0, help="seed (default 0): same seed, same sample")
    sa.add_argument("--sources", help="copy each persona's source text into the rows (else a source_ref pointer)")
    sa.add_argument("--top-up", help="an existing sample file: keep its rows and add --n new ones")
    sa.add_argument("--out", required=True, help="the sample file to write (.jsonl or .csv)")
    sa.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_map(sa, "candidates")
    # --strategy active (issue 50): how the judge's uncertainty is read and mixed with uniform
    sa.add_argument("--uncertainty", choices=["log-odds", "replicates", "panel"],
                    help="active: the judge's confidence signal (default: log-odds when it has judge_score, panel for a "
                         "panel: judge, else replicates)")
    sa.add_argument("--mix", default="auto", metavar="auto|W",
                    help="active: weight W of uniform sampling in the mix (0 pure active, 1 uniform); auto (default) "
                         "chooses it on --gold, 0.5 without")
    sa.add_argument("--min-prob", type=float, metavar="P",
                    help="active: no item below this inclusion probability before mixing (default 0.1 x n/N)")
    sa.add_argument("--gold", help="active: hand labels in hand (e.g. a labelled first batch, with --top-up) that "
                                   "calibrate the judge's confidence against its real errors and choose W")
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
    add_map(es, "gold")
    es.set_defaults(func=cmd_estimate)

    add_diff_parser(sub, _positive_int, _replicate_choice)
    add_cascade_parser(sub, _positive_int)
    add_privacy_check_parser(sub)  # memjudge privacy-check (memjudge.cli.private)
    _add_llama_parsers(sub)  # memjudge doctor, memjudge llama-server (below)
    return p


# --- doctor, llama-server (issue 54: the embedded judge on every CPU) ---------------------------


def _add_llama_parsers(sub) -> None:
    from memjudge.cli.commands import cmd_doctor, cmd_llama_server

    dr = sub.add_parser("doctor", help="can the embedded judge run here? its llama.cpp build, weights and self-test")
    dr.add_argument("--no-self-test", action="store_true",
                    help="do not run the model's self-test when no outcome is remembered (a few seconds)")
    dr.add_argument("--rerun", action="store_true", help="run the self-test even if an outcome is remembered")
    dr.add_argument("--json", action="store_true", help="print the report as JSON")
    dr.set_defaults(func=cmd_doctor)
    ls = sub.add_parser("llama-server", help="llama-cpp-python's OpenAI-compatible server, loaded as the embedded "
                                             "judge loads its model (the packaged model unless --model)",
                        description="Every argument goes to `python -m llama_cpp.server` (--host, --port, --n_ctx, "
                                    "--chat_format, ...); see docs/servers.md.", add_help=False)
    ls.add_argument("server_args", nargs=argparse.REMAINDER, help="the server's own arguments")
    ls.set_defaults(func=cmd_llama_server)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """build_parser().parse_args(argv), except that `llama-server` passes every argument on."""
    args, extra = build_parser().parse_known_args(argv)
    if extra and args.command != "llama-server":
        raise UsageError(f"memjudge: unrecognized arguments: {' '.join(extra)}")
    if args.command == "llama-server":
        args.server_args = [*extra, *args.server_args]
    return args
