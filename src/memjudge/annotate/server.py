"""The labelling server behind `memjudge annotate`: a Starlette app served by uvicorn.

Contract:
- Every request needs the per-run secret token (printed in the URL): GET requests in the
  `token` query parameter or the `X-Memjudge-Token` header, state-changing requests (POST) in
  the header only; otherwise 403 and nothing happens. A custom header also means a page of
  another origin cannot post (the browser would need a CORS preflight, which is never granted).
- `POST /api/label` with a JSON object `{index, assertion_id, verdict, note}` appends one row
  to the gold file and fsyncs it before answering; the page moves on only after the answer.
  Anything malformed (not JSON, wrong content type, unknown or missing fields, a verdict not
  in supported/unsupported/partial, an index out of range, an assertion_id that is not the
  item at that index) gets a 4xx and writes nothing.
- The page never builds HTML from data (textContent only), and its Content-Security-Policy
  allows only its own nonce'd inline script and same-origin requests.
- The judge's verdicts are sent only when the session was started with `--show-judge`.
"""

from __future__ import annotations

import hmac
import json
import secrets
import socket
import sys
import threading
from importlib import resources
from pathlib import Path

import pandas as pd
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from memjudge.annotate.gold import VERDICTS, GoldWriter, read_gold_rows
from memjudge.errors import UsageError

TOKEN_HEADER = "x-memjudge-token"
MAX_BODY = 64 * 1024
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
        self.token = token or secrets.token_urlsafe(24)
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
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    def close(self) -> None:
        self.writer.close()


def _plain(v):
    return None if v is None or (isinstance(v, float) and v != v) else v


# ---------------------------------------------------------------------------------------
# the app


def _page_html() -> str:
    return resources.files("memjudge.annotate").joinpath("page.html").read_text(encoding="utf-8")


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


def create_app(session: Session) -> _SecurityHeaders:
    page_template = _page_html()

    def authorised(request: Request, allow_query: bool) -> bool:
        given = request.headers.get(TOKEN_HEADER)
        if given is None and allow_query:
            given = request.query_params.get("token")
        return session.check_token(given)

    async def page(request: Request) -> Response:
        if not authorised(request, allow_query=True):
            return HTMLResponse("<!doctype html><title>memjudge annotate</title><p>Forbidden: open the URL that "
                                "<code>memjudge annotate</code> printed (it carries this run's token).</p>", status_code=403)
        nonce = secrets.token_urlsafe(16)
        html = page_template.replace("{{NONCE}}", nonce)
        csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
               "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
        return HTMLResponse(html, headers={"Content-Security-Policy": csp})

    async def state(request: Request) -> Response:
        if not authorised(request, allow_query=True):
            return _error(403, "missing or wrong token")
        return JSONResponse({"total": session.total, "annotator": session.annotator, "resume": session.resume_index(),
                             "labelled": len(session.decisions), "show_judge": session.judge is not None,
                             "out": session.out.name, "verdicts": list(VERDICTS)})

    async def item(request: Request) -> Response:
        if not authorised(request, allow_query=True):
            return _error(403, "missing or wrong token")
        i = request.path_params["index"]
        if not 0 <= i < session.total:
            return _error(404, f"no item {i} (items are 0..{session.total - 1})")
        return JSONResponse(session.item(i))

    async def label(request: Request) -> Response:
        if not authorised(request, allow_query=False):
            return _error(403, "missing or wrong token")
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            return _error(415, "expected Content-Type: application/json")
        body = await request.body()
        if len(body) > MAX_BODY:
            return _error(413, f"request body over {MAX_BODY} bytes")
        try:
            data = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return _error(400, "body is not valid JSON")
        if not isinstance(data, dict):
            return _error(400, "body must be a JSON object")
        unknown = set(data) - LABEL_FIELDS
        missing = {"index", "assertion_id", "verdict"} - set(data)
        if unknown or missing:
            return _error(400, f"fields must be {sorted(LABEL_FIELDS)}" + (f"; unknown {sorted(unknown)}" if unknown else "")
                          + (f"; missing {sorted(missing)}" if missing else ""))
        i, aid, verdict, note = data["index"], data["assertion_id"], data["verdict"], data.get("note")
        if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < session.total:
            return _error(400, f"'index' must be an integer in 0..{session.total - 1}")
        if not isinstance(aid, str) or aid != session.ids[i]:
            return _error(409, f"item {i} is not {aid!r} (reload the page)")
        if verdict not in VERDICTS:
            return _error(400, f"'verdict' must be one of {', '.join(VERDICTS)}")
        if note is not None and (not isinstance(note, str) or len(note) > MAX_NOTE):
            return _error(400, f"'note' must be a string of at most {MAX_NOTE} characters, or null")
        note = note.strip() if isinstance(note, str) else None
        try:
            row = session.label(i, verdict, note or None)
        except OSError as e:  # disk full, file gone: say so, and the page stays on the item
            return _error(500, f"could not write {session.out}: {e.strerror or e}")
        return JSONResponse({"ok": True, "row": row, "labelled": len(session.decisions), "next": i + 1})

    app = Starlette(routes=[
        Route("/", page, methods=["GET"]),
        Route("/api/state", state, methods=["GET"]),
        Route("/api/item/{index:int}", item, methods=["GET"]),
        Route("/api/label", label, methods=["POST"]),
    ])
    return _SecurityHeaders(app)


class _SecurityHeaders:
    """Headers on every response: no caching (the token is in the URL, the data is private),
    no referrer (it would carry the token), no sniffing, no framing."""

    HEADERS = [(b"cache-control", b"no-store"), (b"referrer-policy", b"no-referrer"),
               (b"x-content-type-options", b"nosniff"), (b"x-frame-options", b"DENY")]

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = list(message.get("headers", [])) + self.HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


# ---------------------------------------------------------------------------------------
# running it


LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one), bound before the URL is printed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise UsageError(f"--host {host!r}: {e.strerror}") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port} ({e.strerror}); try another --port, or --port 0 for a free one") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_for(sock: socket.socket, host: str, token: str) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def serve(session: Session, host: str = "127.0.0.1", port: int = 8765, open_browser: bool = True, echo=print) -> str:
    """Print the URL (first line of stdout, flushed), serve until Ctrl-C or SIGTERM, return the URL."""
    import uvicorn

    sock = bind(host, port)
    url = url_for(sock, host, session.token)
    print(url, flush=True)
    if host not in LOOPBACK:
        print(f"memjudge: warning: serving on {host}, not loopback: anyone who can reach it and has the URL can label",
              file=sys.stderr, flush=True)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            super().handle_exit(sig, frame)
            # Stop quietly: uvicorn would re-raise the signal after shutting down, but a
            # stopped labelling session is a normal end (every decision is already on disk).
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(create_app(session), log_level="warning", access_log=False, lifespan="off")
    server = _Server(config)
    if open_browser:
        import webbrowser

        threading.Timer(0.3, webbrowser.open, [url]).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        session.close()
    return url


__all__ = ["Session", "bind", "create_app", "serve", "url_for"]
