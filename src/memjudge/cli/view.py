"""`memjudge view`: its arguments and its handler (the page: `memjudge.web.view`)."""

from __future__ import annotations

import sys


def add_parser(sub) -> None:
    vw = sub.add_parser("view", help="see the items behind every number: a local page over run folders (or one HTML file)")
    vw.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run folders written by `memjudge score` (and compare, noise)")
    vw.add_argument("--gold", help="gold labels to show; in the annotate format (or a new file) the page records into it")
    vw.add_argument("--annotator", help="your name in the gold file (default: the login name)")
    vw.add_argument("--candidates", help="the candidates (default: the one each run's config.json records)")
    vw.add_argument("--sources", help="the sources (default: the one each run's config.json records)")
    vw.add_argument("--labels", nargs="+", default=[], metavar="LABELS",
                    help="more labels files to show beside the runs (e.g. a panel's, `memjudge panel --out`)")
    vw.add_argument("--policy", nargs="+", default=[], metavar="POLICY",
                    help="exported policy files to show (those in each run folder, and compare's fitted ones, always are)")
    vw.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, loopback only)")
    vw.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    vw.add_argument("--no-browser", action="store_true", help="print the URL only; do not open a browser")
    vw.add_argument("--export", metavar="FILE.html", help="write one self-contained, read-only HTML file instead of serving")
    vw.add_argument("--limit", type=int, metavar="N", help="--export: keep the first N items (default 10,000)")
    vw.set_defaults(func=cmd_view)


def cmd_view(args) -> int:
    from memjudge.errors import UsageError
    from memjudge.web.app import annotator_name, check_port
    from memjudge.web.runs import load_views
    from memjudge.web.view import EXPORT_DEFAULT_LIMIT, ViewSession, export_html, serve

    if args.limit is not None and not args.export:
        raise UsageError("memjudge view: --limit goes with --export")
    if args.export and not str(args.export).lower().endswith((".html", ".htm")):
        raise UsageError(f"memjudge view: --export must name an .html file, got {args.export!r}")
    views = load_views(args.runs, candidates=args.candidates, sources=args.sources, gold=args.gold,
                       labels=args.labels, policies=args.policy)
    if args.export:
        limit = args.limit if args.limit is not None else EXPORT_DEFAULT_LIMIT
        kept, total, size = export_html(views, args.export, limit)
        print(f"wrote {args.export} ({size / 1e6:.1f} MB): {kept:,} of {total:,} items"
              + (f" (the first {kept:,}; --limit N keeps more, at a size a browser may not open)" if kept < total else ""))
        return 0
    check_port(args.port)
    session = ViewSession(views, annotator=annotator_name(args.annotator) if views.gold_writable else None)
    if session.writer is not None and session.writer.repaired:
        print(f"memjudge: {args.gold}: {session.writer.repaired}", file=sys.stderr, flush=True)
    serve(session, args.host, args.port, open_browser=not args.no_browser)
    if session.writer is not None:
        print(f"stopped: {session.written:,} gold labels recorded by {session.annotator} in {args.gold}", file=sys.stderr)
    return 0


__all__ = ["add_parser", "cmd_view"]
