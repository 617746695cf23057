"""What every memjudge page shares, once: the token, the pages' Content-Security-Policy, the
security headers, the JSON body checks of a POST, the loopback socket and the uvicorn runner.
`memjudge annotate` and `memjudge view` are two modes of this one app (`memjudge.web.annotate`,
`memjudge.web.view`): they add routes, never a second token scheme or server.

Contract:
- Every request needs the per-run secret token (printed in the URL): GET requests in the
  `token` query parameter or the `X-Memjudge-Token` header, state-changing requests (POST) in
  the header only; otherwise 403 and nothing happens. A custom header also means a page of
  another origin cannot post (the browser would need a CORS preflight, which is never granted).
- A page never builds HTML from data (textContent only), and its Content-Security-Policy
  allows only its own nonce'd inline script and style and same-origin requests (an exported
  file: its own script and style by hash, and no request at all).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import socket
import sys
import threading
from collections.abc import Callable
from importlib import resources

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from memjudge.errors import UsageError

TOKEN_HEADER = "x-memjudge-token"
MAX_BODY = 64 * 1024
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def new_token() -> str:
    return secrets.token_urlsafe(24)


def check_token(token: str, given: str | None) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def authorised(request: Request, token: str, allow_query: bool) -> bool:
    given = request.headers.get(TOKEN_HEADER)
    if given is None and allow_query:
        given = request.query_params.get("token")
    return check_token(token, given)


def page_template(name: str) -> str:
    """A page of this package with the common script (common.js) inlined where it asks for it."""
    files = resources.files("memjudge.web")
    page = files.joinpath(name).read_text(encoding="utf-8")
    return page.replace("  /* memjudge:common.js */\n", files.joinpath("common.js").read_text(encoding="utf-8"), 1)


def error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": message}, status_code=status)


def forbidden_page(command: str) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><title>memjudge {command}</title><p>Forbidden: open the URL that "
                        f"<code>memjudge {command}</code> printed (it carries this run's token).</p>", status_code=403)


def served_page(template: str, boot=None) -> HTMLResponse:
    """The page with a fresh nonce on its inline script and style, and the CSP that allows only
    them; `boot` (any JSON) fills the page's `{{BOOT}}` data element, after the nonce, so data
    never meets a placeholder."""
    nonce = secrets.token_urlsafe(16)
    csp = (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; connect-src 'self'; "
           "img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
    html = template.replace("{{NONCE}}", nonce)
    if boot is not None:
        html = html.replace("{{BOOT}}", embed_json(boot), 1)
    return HTMLResponse(html, headers={"Content-Security-Policy": csp})


_INLINE = re.compile(r"<(script|style) nonce=\"\{\{NONCE\}\}\">(.*?)</\1>", re.S)


def standalone_page(template: str, boot) -> str:
    """The page for a file opened from disk: no server to send a header, so the CSP is a meta
    element allowing its own inline script and style by their sha256 and nothing else (no
    connect-src: the file cannot make a request). `boot` fills `{{BOOT}}` as in `served_page`."""
    hashes: dict[str, list[str]] = {"script": [], "style": []}

    def strip(m: re.Match) -> str:
        digest = base64.b64encode(hashlib.sha256(m.group(2).encode("utf-8")).digest()).decode()
        hashes[m.group(1)].append(f"'sha256-{digest}'")
        return f"<{m.group(1)}>{m.group(2)}</{m.group(1)}>"

    html = _INLINE.sub(strip, template)
    csp = (f"default-src 'none'; script-src {' '.join(hashes['script'])}; style-src {' '.join(hashes['style'])}; "
           "img-src 'none'; base-uri 'none'; form-action 'none'")
    html = html.replace("<head>", f'<head>\n<meta http-equiv="Content-Security-Policy" content="{csp}">', 1)
    return html.replace("{{BOOT}}", embed_json(boot), 1)


def embed_json(data) -> str:
    """JSON safe inside a `<script type="application/json">` element: no `<` at all, so no
    `</script>` or `<!--` from the data can end or change the element."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")


async def json_body(request: Request, fields: set[str], required: set[str]) -> dict | JSONResponse:
    """The POST's JSON object, or the 4xx answer that refuses it (nothing is written then)."""
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype != "application/json":
        return error(415, "expected Content-Type: application/json")
    body = await request.body()
    if len(body) > MAX_BODY:
        return error(413, f"request body over {MAX_BODY} bytes")
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return error(400, "body is not valid JSON")
    if not isinstance(data, dict):
        return error(400, "body must be a JSON object")
    unknown = set(data) - fields
    missing = required - set(data)
    if unknown or missing:
        return error(400, f"fields must be {sorted(fields)}" + (f"; unknown {sorted(unknown)}" if unknown else "")
                     + (f"; missing {sorted(missing)}" if missing else ""))
    return data


def check_note(note, limit: int) -> str | None | JSONResponse:
    if note is not None and (not isinstance(note, str) or len(note) > limit):
        return error(400, f"'note' must be a string of at most {limit} characters, or null")
    return (note.strip() or None) if isinstance(note, str) else None


class SecurityHeaders:
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


def plain_response(data) -> Response:
    """A JSON answer of data already made JSON-safe (NaN-free), written compactly."""
    return Response(json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False),
                    media_type="application/json")


# ---------------------------------------------------------------------------------------
# running it


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


def annotator_name(given: str | None) -> str:
    """The name gold rows are written under: the one given, else the login name."""
    if given is not None:
        return given
    import getpass

    try:
        return getpass.getuser()
    except (OSError, KeyError):  # no login name (some containers)
        raise UsageError("no login name to use as the annotator: give --annotator NAME") from None


def check_port(port: int) -> None:
    if not 0 <= port <= 65535:
        raise UsageError(f"--port must be in 0..65535, got {port}")


def run(app, token: str, host: str, port: int, open_browser: bool, on_close: Callable[[], None], what: str) -> str:
    """Print the URL (first line of stdout, flushed), serve until Ctrl-C or SIGTERM, return the URL."""
    import uvicorn

    sock = bind(host, port)
    url = url_for(sock, host, token)
    print(url, flush=True)
    if host not in LOOPBACK:
        print(f"memjudge: warning: serving on {host}, not loopback: anyone who can reach it and has the URL can {what}",
              file=sys.stderr, flush=True)

    class _Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            super().handle_exit(sig, frame)
            # Stop quietly: uvicorn would re-raise the signal after shutting down, but a
            # stopped session is a normal end (every decision is already on disk).
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = _Server(config)
    if open_browser:
        import webbrowser

        threading.Timer(0.3, webbrowser.open, [url]).start()
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
        on_close()
    return url


__all__ = ["LOOPBACK", "MAX_BODY", "TOKEN_HEADER", "SecurityHeaders", "annotator_name", "authorised", "bind", "check_note", "check_port",
           "check_token", "embed_json", "error", "forbidden_page", "json_body", "new_token", "page_template",
           "plain_response", "run", "served_page", "standalone_page", "url_for"]
