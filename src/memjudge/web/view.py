"""The view mode of the memjudge web app (`memjudge view`): every item of one or more runs, with
its source, each judge's replicates, gold and the policies' decisions, filtered in the page.

Routes (each needs the token, as every route of `memjudge.web.app`):
- `GET /` the page; `GET /api/index` the columnar index (`memjudge.web.index`);
  `GET /api/item/{i}` one item's detail with its source; `GET /api/search?q=` the personas
  whose source contains q (sources stay on the server; the page searches assertions itself).
- `POST /api/gold` `{assertion_id, verdict, note}` (verdict supported / unsupported / partial)
  appends one row to the gold file and fsyncs it before answering, as `memjudge annotate`
  does (`memjudge.annotate.gold.GoldWriter`); only with `--gold FILE` in the annotate format
  (or a new file). Anything malformed gets a 4xx and writes nothing.

`export_html` writes the same page as one file with the index and every kept item's detail
inside, read-only, with a CSP that allows no request.
"""

from __future__ import annotations

import base64
import gzip
import threading
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memjudge.annotate.gold import VERDICTS, GoldWriter
from memjudge.errors import UsageError
from memjudge.web import app as web
from memjudge.web.index import Index
from memjudge.web.runs import Views

GOLD_FIELDS = {"assertion_id", "verdict", "note"}
MAX_NOTE = 5000
MAX_QUERY = 1000
EXPORT_DEFAULT_LIMIT = 10_000


class ViewSession:
    """The index of one set of views, and (with a writable gold file) the writer of gold rows."""

    def __init__(self, views: Views, annotator: str | None = None, token: str | None = None):
        self.views = views
        self.index = Index(views)
        self.token = token or web.new_token()
        self.annotator = annotator
        self.writer: GoldWriter | None = None
        if views.gold_path is not None and views.gold_writable:
            if not annotator or not str(annotator).strip():
                raise UsageError("--annotator must be a non-empty name")
            self.annotator = str(annotator).strip()
            self.writer = GoldWriter(views.gold_path, self.annotator)
        self.static = self.index.index(with_sources=False)
        self.written = 0
        self._lock = threading.Lock()

    def current_index(self) -> dict:
        return {**self.static, "gold": self.index.gold_codes(), "verdicts": self.index.verdicts}

    def record(self, aid: str, verdict: str, note: str | None) -> dict:
        assert self.writer is not None
        with self._lock:
            row = self.writer.append(aid, verdict, note)
            self.index.record_gold(aid, verdict, row)
            self.written += 1
        i = self.index.position[aid]
        return {"ok": True, "row": row, "gold_codes": self.index.gold_codes()[i], "verdicts": self.index.verdicts,
                "gold": self.index.detail(i, with_source=False)["gold"]}

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def create_app(session: ViewSession) -> web.SecurityHeaders:
    template = web.page_template("view.html")
    boot = {"mode": "serve", "gold_writable": session.writer is not None, "annotator": session.annotator}

    def denied(request: Request, allow_query: bool = True) -> Response | None:
        return None if web.authorised(request, session.token, allow_query) else web.error(403, "missing or wrong token")

    async def page(request: Request) -> Response:
        if not web.authorised(request, session.token, allow_query=True):
            return web.forbidden_page("view")
        return web.served_page(template, boot)

    async def index(request: Request) -> Response:
        return denied(request) or web.plain_response(session.current_index())

    async def item(request: Request) -> Response:
        if (no := denied(request)) is not None:
            return no
        i = request.path_params["index"]
        if not 0 <= i < session.index.n:
            return web.error(404, f"no item {i} (items are 0..{session.index.n - 1})")
        return web.plain_response(session.index.detail(i))

    async def search(request: Request) -> Response:
        if (no := denied(request)) is not None:
            return no
        q = request.query_params.get("q", "")
        if not q or len(q) > MAX_QUERY:
            return web.error(400, f"'q' must be 1..{MAX_QUERY} characters")
        return JSONResponse({"personas": session.index.source_matches(q)})

    async def gold(request: Request) -> Response:
        if (no := denied(request, allow_query=False)) is not None:
            return no
        if session.writer is None:
            return web.error(403, "read-only: start memjudge view with --gold FILE to record gold labels")
        data = await web.json_body(request, GOLD_FIELDS, {"assertion_id", "verdict"})
        if isinstance(data, JSONResponse):
            return data
        aid, verdict = data["assertion_id"], data["verdict"]
        if not isinstance(aid, str) or aid not in session.index.position:
            return web.error(400, "'assertion_id' is not an item of these runs")
        if verdict not in VERDICTS:
            return web.error(400, f"'verdict' must be one of {', '.join(VERDICTS)}")
        note = web.check_note(data.get("note"), MAX_NOTE)
        if isinstance(note, JSONResponse):
            return note
        try:
            return JSONResponse(session.record(aid, verdict, note))
        except OSError as e:  # disk full, file gone: say so, and the page stays on the item
            return web.error(500, f"could not write {session.views.gold_path}: {e.strerror or e}")

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]),
        Route("/api/index", index, methods=["GET"]),
        Route("/api/item/{index:int}", item, methods=["GET"]),
        Route("/api/search", search, methods=["GET"]),
        Route("/api/gold", gold, methods=["POST"]),
    ])
    return web.SecurityHeaders(app)


def serve(session: ViewSession, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = True) -> str:
    return web.run(create_app(session), session.token, host, port, open_browser, session.close, "see these runs")


def export_html(views: Views, path, limit: int = EXPORT_DEFAULT_LIMIT) -> tuple[int, int, int]:
    """Write the page as one self-contained read-only file holding the first `limit` items (in
    the runs' order) with their details. Returns (items kept, items in all, bytes written)."""
    from memjudge._util.files import write_atomic

    if limit < 1:
        raise UsageError(f"--limit must be at least 1, got {limit}")
    total = len(views.items)
    if total > limit:
        views = _first_items(views, limit)
    index = Index(views)
    data = index.index(with_sources=True)
    details = {str(i): index.detail(i, with_source=False) for i in range(index.n)}
    note = f"exported {index.n:,} of {total:,} items (the first in the runs' order)" if index.n < total else ""
    # Gzipped (the page inflates it with the browser's own DecompressionStream): label rows
    # repeat their keys and judges' rationales, so 10,000 items fit in a few MB instead of 20.
    packed = gzip.compress(web.embed_json({"index": data, "details": details}).encode("utf-8"), 6, mtime=0)
    html = web.standalone_page(web.page_template("view.html"),
                               {"mode": "export", "gz": base64.b64encode(packed).decode("ascii"), "note": note})
    raw = html.encode("utf-8")
    write_atomic(Path(path), raw)
    return index.n, total, len(raw)


def _first_items(views: Views, limit: int) -> Views:
    from dataclasses import replace

    items = views.items.iloc[:limit].reset_index(drop=True)
    keep = set(items["assertion_id"])
    labels = views.labels[views.labels["assertion_id"].isin(keep)].reset_index(drop=True)
    gold = views.gold[views.gold["assertion_id"].isin(keep)] if views.gold is not None else None
    return replace(views, items=items, labels=labels, gold=gold)


__all__ = ["EXPORT_DEFAULT_LIMIT", "ViewSession", "create_app", "export_html", "serve"]
