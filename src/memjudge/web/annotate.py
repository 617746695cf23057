"""The annotate mode of the memjudge web app (`memjudge annotate`): one annotator labels a list
of items, one at a time, into a gold file. Token, CSP, headers and the server: `memjudge.web.app`.

Contract:
- `POST /api/label` with a JSON object `{index, assertion_id, verdict, note}` appends one row
  to the gold file and fsyncs it before answering; the page moves on only after the answer.
  Anything malformed (not JSON, wrong content type, unknown or missing fields, a verdict not
  in supported/unsupported/partial, an index out of range, an assertion_id that is not the
  item at that index) gets a 4xx and writes nothing.
- The judge's verdicts are sent only when the session was started with `--show-judge`.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from memjudge.annotate.gold import VERDICTS, GoldWriter, read_gold_rows
from memjudge.errors import UsageError
from memjudge.web import app as web

MAX_NOTE = 5000
LABEL_FIELDS = {"index", "assertion_id", "verdict", "note"}
CORE_COLUMNS = ("assertion_id", "persona_id", "category", "text", "source")


class Session:
    """One annotator labelling one list of items into one gold file."""

    def __init__(self, items: pd.DataFrame, out, annotator: str, judge: dict | None = None, token: str | None = None):
        if not annotator or not str(annotator).strip():
            raise UsageError("--annotator must be a non-empty name")
        self.items = items.reset_index(drop=True)
        self.ids = [str(a) for a in self.items["assertion_id"]]
        self.index_of = {a: i for i, a in enumerate(self.ids)}
        self.annotator = str(annotator).strip()
        self.judge = judge
        self.out = Path(out)
        self.writer = GoldWriter(self.out, self.annotator)  # repairs a torn tail before reading
        try:
            existing = read_gold_rows(self.out)
        except Exception:
            self.writer.close()
            raise
        mine = existing[existing["annotator"].astype(str) == self.annotator]
        self.decisions: dict[str, dict] = {
            str(r.assertion_id): {"verdict": str(r.verdict), "note": r.note if isinstance(r.note, str) else None}
            for r in mine.itertuples(index=False) if str(r.assertion_id) in self.index_of
        }
        self.token = token or web.new_token()
        self.written = 0
        self._lock = threading.Lock()

    @property
    def total(self) -> int:
        return len(self.ids)

    def resume_index(self) -> int:
        """The first item (in input order) this annotator has not labelled; `total` when done."""
        return next((i for i, a in enumerate(self.ids) if a not in self.decisions), self.total)

    def item(self, i: int) -> dict:
        from memjudge.formats import json_safe

        row = self.items.iloc[i]
        aid = self.ids[i]
        out = {"index": i, "total": self.total, **{c: json_safe(_plain(row[c])) for c in CORE_COLUMNS}}
        out["assertion_id"] = aid
        mine = self.decisions.get(aid)
        out["verdict"] = mine["verdict"] if mine else None
        out["note"] = mine["note"] if mine else None
        if self.judge is not None:
            out["judge"] = self.judge.get(aid, [])
        return out

    def label(self, i: int, verdict: str, note: str | None) -> dict:
        aid = self.ids[i]
        with self._lock:
            row = self.writer.append(aid, verdict, note)
            self.decisions[aid] = {"verdict": verdict, "note": row["note"]}
            self.written += 1
        return row

    def check_token(self, given: str | None) -> bool:
        return web.check_token(self.token, given)

    def close(self) -> None:
        self.writer.close()


def _plain(v):
    return None if v is None or (isinstance(v, float) and v != v) else v


# ---------------------------------------------------------------------------------------
# the app


def create_app(session: Session) -> web.SecurityHeaders:
    template = web.page_template("annotate.html")

    async def page(request: Request) -> Response:
        if not web.authorised(request, session.token, allow_query=True):
            return web.forbidden_page("annotate")
        return web.served_page(template)

    async def state(request: Request) -> Response:
        if not web.authorised(request, session.token, allow_query=True):
            return web.error(403, "missing or wrong token")
        return JSONResponse({"total": session.total, "annotator": session.annotator, "resume": session.resume_index(),
                             "labelled": len(session.decisions), "show_judge": session.judge is not None,
                             "out": session.out.name, "verdicts": list(VERDICTS)})

    async def item(request: Request) -> Response:
        if not web.authorised(request, session.token, allow_query=True):
            return web.error(403, "missing or wrong token")
        i = request.path_params["index"]
        if not 0 <= i < session.total:
            return web.error(404, f"no item {i} (items are 0..{session.total - 1})")
        return JSONResponse(session.item(i))

    async def label(request: Request) -> Response:
        if not web.authorised(request, session.token, allow_query=False):
            return web.error(403, "missing or wrong token")
        data = await web.json_body(request, LABEL_FIELDS, {"index", "assertion_id", "verdict"})
        if isinstance(data, JSONResponse):
            return data
        i, aid, verdict = data["index"], data["assertion_id"], data["verdict"]
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < session.total:
            return web.error(400, f"'index' must be an integer in 0..{session.total - 1}")
        if not isinstance(aid, str) or aid != session.ids[i]:
            return web.error(409, f"item {i} is not {aid!r} (reload the page)")
        if verdict not in VERDICTS:
            return web.error(400, f"'verdict' must be one of {', '.join(VERDICTS)}")
        note = web.check_note(data.get("note"), MAX_NOTE)
        if isinstance(note, JSONResponse):
            return note
        try:
            row = session.label(i, verdict, note)
        except OSError as e:  # disk full, file gone: say so, and the page stays on the item
            return web.error(500, f"could not write {session.out}: {e.strerror or e}")
        return JSONResponse({"ok": True, "row": row, "labelled": len(session.decisions), "next": i + 1})

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]),
        Route("/api/state", state, methods=["GET"]),
        Route("/api/item/{index:int}", item, methods=["GET"]),
        Route("/api/label", label, methods=["POST"]),
    ])
    return web.SecurityHeaders(app)


def serve(session: Session, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = True) -> str:
    """Print the URL (first line of stdout, flushed), serve until Ctrl-C or SIGTERM, return the URL."""
    return web.run(create_app(session), session.token, host, port, open_browser, session.close, "label")


__all__ = ["Session", "create_app", "serve"]
