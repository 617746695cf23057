"""`memjudge diff BASE_RUN NEW_RUN`: its arguments and its handler (spec §12).

Exit status: 0, or 1 when a gate (``--fail-if-worse``, ``--require-noninferior``) fails; 2 for
bad input, as every command. The table (or ``--json``) is printed either way, and ``--out`` /
``--summary`` are written before the status is returned, so a failing CI job still shows why.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["add_diff_parser", "cmd_diff"]


def _margin(text: str) -> float:
    import argparse

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a margin such as 0.02 (2 points), got {text!r}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"a margin is a share in [0, 1) (0.02 = 2 points), got {v}")
    return v


def add_diff_parser(sub, positive_int, replicate_choice) -> None:
    d = sub.add_parser("diff", help="did NEW get better than BASE? paired differences with intervals, and a CI gate")
    d.add_argument("base", metavar="BASE_RUN", help="the run folder to compare against (labels.jsonl, ...)")
    d.add_argument("new", metavar="NEW_RUN", help="the run folder of the change")
    d.add_argument("--judge", help="the judge whose verdicts are compared (default: the one both runs hold)")
    d.add_argument("--replicate", type=replicate_choice, default=0, help="replicate index or 'majority' (default 0)")
    d.add_argument("--gold", help="gold labels (assertion_id, verdict): PPI++ differences beside the judge-only ones")
    d.add_argument("--by", choices=["category"], help="also per category")
    d.add_argument("--mode", choices=["auto", "personas", "items"], default="auto",
                   help="personas: other candidates over the same personas; items: the same candidates "
                        "(default auto: items when both runs label the same assertion ids)")
    d.add_argument("--bootstrap", type=positive_int, default=2000, help="bootstrap resamples B (default 2000)")
    d.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    d.add_argument("--fail-if-worse", type=_margin, metavar="MARGIN",
                   help="exit 1 when NEW is worse by more than MARGIN (e.g. 0.02) with 95%% confidence")
    d.add_argument("--require-noninferior", type=_margin, metavar="MARGIN",
                   help="exit 1 unless NEW is shown no worse than BASE - MARGIN (interval's lower end above -MARGIN)")
    d.add_argument("--gate-categories", nargs="+", metavar="CATEGORY",
                   help="categories the gate checks beside the overall rate (default with --by category: all)")
    d.add_argument("--summary", metavar="FILE.md", help="write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when set)")
    d.add_argument("--out", metavar="DIR", help="write diff.json there (for memjudge report and memjudge view)")
    d.add_argument("--json", action="store_true", help="print diff.json to stdout")
    d.set_defaults(func=cmd_diff)


def cmd_diff(args) -> int:
    from memjudge.diff import apply_gate, diff_runs
    from memjudge.errors import UsageError
    from memjudge.formats import dumps, write_atomic, write_json

    if args.gate_categories and args.by != "category":
        raise UsageError("--gate-categories needs --by category")
    res = diff_runs(args.base, args.new, judge=args.judge, replicate=args.replicate, by=args.by, mode=args.mode,
                    gold=args.gold, B=args.bootstrap, seed=args.seed)
    res = apply_gate(res, fail_if_worse=args.fail_if_worse, require_noninferior=args.require_noninferior,
                     categories=args.gate_categories)
    data = res.to_dict()
    text = res.render()
    if args.out:
        write_json(Path(args.out) / "diff.json", data)
        text += f"\n\nwrote diff.json to {args.out}"
    summary = res.summary_markdown()
    if args.summary:
        write_atomic(Path(args.summary), summary)
    step = os.environ.get("GITHUB_STEP_SUMMARY")
    if step:
        with open(step, "a", encoding="utf-8") as fh:
            fh.write(summary + "\n")
    if args.json:
        print(dumps(data, indent=2))
        for note in res.notes:
            print(f"memjudge: note: {note}", file=sys.stderr)
    else:
        print(text)
    if res.gate is not None and res.gate.failed:
        print(f"memjudge diff: gate {res.gate.reason}", file=sys.stderr)
        return 1
    return 0
