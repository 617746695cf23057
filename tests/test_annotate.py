"""`memjudge annotate` in a real headless Chromium (system package, driven by Playwright).

The server runs as `python -m memjudge annotate ...` in a subprocess (as a user runs it) and is
killed with SIGKILL mid-session to prove nothing acknowledged is lost. Skipped only when
/usr/bin/chromium is absent; CI installs it (.ci/run) and sets MEMJUDGE_REQUIRE_CHROMIUM=1,
which turns the skip into a failure.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import _PROVIDER_ENV, ROOT
from memjudge.formats import read_gold

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_SOURCE = "Persona p0 wrote: I go hiking in the Alps every summer.\n<script>alert(2)</script><b>bold?</b>"

ITEMS = [
    {"assertion_id": "a0", "persona_id": "p0", "category": "activities", "text": "The user enjoys hiking in the Alps", "inclusion_prob": 0.25},
    {"assertion_id": "a1", "persona_id": "p1", "category": "values", "text": "The user values honesty", "inclusion_prob": 0.5},
    {"assertion_id": "a2", "persona_id": "p0", "category": "facts", "text": HOSTILE, "inclusion_prob": 0.25},
    {"assertion_id": "a3", "persona_id": "p1", "category": "facts", "text": "The user has two cats", "inclusion_prob": 0.5},
    {"assertion_id": "a4", "persona_id": "p0", "category": "facts", "text": "The user lives in Geneva", "inclusion_prob": 0.25},
    {"assertion_id": "a5", "persona_id": "p1", "category": "values", "text": "The user dislikes crowds", "inclusion_prob": 0.5},
    {"assertion_id": "a6", "persona_id": "p0", "category": "facts", "text": "The user plays the cello", "inclusion_prob": 0.25},
    {"assertion_id": "a7", "persona_id": "p1", "category": "facts", "text": "The user speaks French", "inclusion_prob": 0.5},
]
SOURCES = [
    {"persona_id": "p0", "source": HOSTILE_SOURCE},
    {"persona_id": "p1", "source": "Persona p1 wrote: honesty matters most to me. My two cats sleep all day."},
]


def _write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path):
    return _write_jsonl(tmp_path / "to_label.jsonl", ITEMS), _write_jsonl(tmp_path / "sources.jsonl", SOURCES)


class Annotate:
    """`python -m memjudge annotate ARGS` in a subprocess; `url` is the first line of its stdout."""

    def __init__(self, *args):
        env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "memjudge", "annotate", *map(str, args),
                                      "--port", "0", "--no-browser"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        if not ready:
            self.kill()
            pytest.fail("memjudge annotate printed no URL within 120 s")
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            self.proc.wait(10)
            pytest.fail(f"memjudge annotate exited {self.proc.returncode}: {self.proc.stderr.read()}")
        self.base = self.url.split("/?token=")[0]
        self.token = self.url.split("token=")[1]

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def post(self, body: bytes, token: str | None, ctype="application/json") -> int:
        headers = {"Content-Type": ctype}
        if token is not None:
            headers["X-Memjudge-Token"] = token
        req = urllib.request.Request(self.base + "/api/label", data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


def _press(page, key: str, progress: str):
    from playwright.sync_api import expect

    page.keyboard.press(key)
    expect(page.locator("#progress")).to_have_text(progress)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_label_with_keyboard_kill_resume_and_safety(browser, data, tmp_path):
    from playwright.sync_api import expect

    items, sources = data
    gold = tmp_path / "gold.jsonl"
    server = Annotate(items, "--sources", sources, "--out", gold, "--annotator", "alice")
    assert server.url.startswith("http://127.0.0.1:") and "/?token=" in server.url
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(server.url)
        assert "memjudge annotate" in page.title()
        expect(page.locator("#progress")).to_have_text("1 / 8")
        expect(page.locator("#assertion")).to_have_text(ITEMS[0]["text"])
        expect(page.locator("#category")).to_have_text("activities")
        # the assertion's words that occur in the source are highlighted; blind: no judge shown
        assert sorted(page.locator("#source mark").all_inner_texts()) == ["Alps", "hiking"]
        expect(page.locator("#judge")).to_be_hidden()

        _press(page, "s", "2 / 8")
        # typing a note (with s, u, p, k, b in it) triggers no shortcut
        page.keyboard.press("n")
        page.keyboard.type("sub kbp: unsure")
        expect(page.locator("#progress")).to_have_text("2 / 8")
        expect(page.locator("#note")).to_have_value("sub kbp: unsure")
        page.keyboard.press("Escape")
        _press(page, "u", "3 / 8")

        # hostile text renders as text: no element injected, no dialog
        expect(page.locator("#assertion")).to_have_text(HOSTILE)
        expect(page.locator("#source")).to_contain_text("<script>alert(2)</script><b>bold?</b>")
        assert page.locator("img").count() == 0
        assert page.locator("#source b, #source script, #assertion *").count() == 0
        assert page.locator("script").count() == 1  # the page's own
        assert dialogs == []
        assert page.locator("#note").input_value() == ""  # a new item starts without the last note

        _press(page, "p", "4 / 8")
        _press(page, "s", "5 / 8")
        _press(page, "u", "6 / 8")
        # back to item 5 and change it
        _press(page, "b", "5 / 8")
        expect(page.locator("#current")).to_contain_text("unsupported")
        _press(page, "p", "6 / 8")
        # skip and back write nothing
        _press(page, "k", "7 / 8")
        _press(page, "b", "6 / 8")

        # refused: a post without the token (from the page's own origin), a wrong token,
        # and malformed posts with the right token; nothing is written
        before = gold.read_bytes()
        status = page.evaluate("""() => fetch('/api/label', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                   body: JSON.stringify({index: 5, assertion_id: 'a5', verdict: 'supported'})}).then(r => r.status)""")
        assert status == 403
        good = json.dumps({"index": 5, "assertion_id": "a5", "verdict": "supported"}).encode()
        assert server.post(good, None) == 403
        assert server.post(good, "x" * len(server.token)) == 403
        assert server.post(b"{not json", server.token) == 400
        assert server.post(json.dumps({"index": 5, "assertion_id": "a5", "verdict": "maybe"}).encode(), server.token) == 400
        assert server.post(json.dumps({"index": 5, "assertion_id": "a6", "verdict": "supported"}).encode(), server.token) == 409
        assert server.post(good, server.token, ctype="text/plain") == 415
        assert gold.read_bytes() == before
        assert dialogs == []
        server.kill()  # SIGKILL: no shutdown code runs
        page.keyboard.press("s")  # the open page says the server is gone and stays on the item
        expect(page.locator("#status")).to_contain_text("the server does not answer")
        expect(page.locator("#progress")).to_have_text("6 / 8")
    finally:
        page.close()
        server.kill()

    rows = _rows(gold)
    assert [(r["assertion_id"], r["verdict"], r["note"]) for r in rows] == [
        ("a0", "supported", None), ("a1", "unsupported", "sub kbp: unsure"), ("a2", "partial", None),
        ("a3", "supported", None), ("a4", "unsupported", None), ("a4", "partial", None)]
    assert {r["annotator"] for r in rows} == {"alice"}
    assert all(r["labelled_at"].endswith("Z") for r in rows)
    standing = read_gold(gold)
    assert dict(zip(standing["assertion_id"], standing["verdict"])) == {
        "a0": "supported", "a1": "unsupported", "a2": "partial", "a3": "supported", "a4": "partial"}

    # the same command again resumes at the first unlabelled item, item 6
    again = Annotate(items, "--sources", sources, "--out", gold, "--annotator", "alice")
    page = browser.new_page()
    try:
        assert again.token != server.token
        assert again.post(json.dumps({"index": 5, "assertion_id": "a5", "verdict": "supported"}).encode(), server.token) == 403
        page.goto(again.url)
        expect(page.locator("#progress")).to_have_text("6 / 8")
        expect(page.locator("#assertion")).to_have_text(ITEMS[5]["text"])
        expect(page.locator("#current")).to_have_text("not labelled yet")
        expect(page.locator("#count")).to_have_text("5 / 8")
        # back shows the changed decision
        _press(page, "b", "5 / 8")
        expect(page.locator("#current")).to_contain_text("partial")
        _press(page, "k", "6 / 8")
        _press(page, "s", "7 / 8")
    finally:
        page.close()
    again.proc.send_signal(signal.SIGTERM)  # a normal stop: exit 0 and a summary
    assert again.proc.wait(60) == 0
    assert "6 of 8 items labelled by alice" in again.proc.stderr.read()
    assert [r["assertion_id"] for r in _rows(gold)] == ["a0", "a1", "a2", "a3", "a4", "a4", "a5"]


def test_show_judge_and_buttons(browser, tmp_path):
    """--show-judge shows each judge's verdict and evidence (escaped); the buttons do what the keys do."""
    from playwright.sync_api import expect

    rows = [dict(r, source=SOURCES[0 if r["persona_id"] == "p0" else 1]["source"]) for r in ITEMS[:3]]
    items = _write_jsonl(tmp_path / "items.jsonl", rows)  # sources in the file itself
    labels = _write_jsonl(tmp_path / "labels.jsonl", [
        {"assertion_id": r["assertion_id"], "persona_id": r["persona_id"], "category": r["category"], "judge": "sim:x",
         "rubric": "support", "replicate": 0, "verdict": "supported", "evidence": HOSTILE + " quoted"} for r in ITEMS[:3]])
    gold = tmp_path / "gold.jsonl"
    server = Annotate(items, "--out", gold, "--annotator", "bob", "--show-judge", labels)
    page = browser.new_page()
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(server.url)
        expect(page.locator("#progress")).to_have_text("1 / 3")
        expect(page.locator("#judge")).to_be_visible()
        expect(page.locator("#judge-list")).to_contain_text("sim:x: supported")
        expect(page.locator("#judge-list")).to_contain_text(HOSTILE + " quoted")
        assert page.locator("img").count() == 0
        page.click("#btn-u")
        expect(page.locator("#progress")).to_have_text("2 / 3")
        page.click("#btn-k")
        expect(page.locator("#progress")).to_have_text("3 / 3")
        page.click("#btn-b")
        expect(page.locator("#progress")).to_have_text("2 / 3")
        page.click("#btn-s")
        expect(page.locator("#progress")).to_have_text("3 / 3")
        page.click("#btn-p")
        expect(page.locator("#progress")).to_have_text("done")
        expect(page.locator("#done-text")).to_contain_text("3 of 3 items labelled")
        assert dialogs == []
    finally:
        page.close()
        server.kill()
    assert [(r["assertion_id"], r["verdict"], r["annotator"]) for r in _rows(gold)] == [
        ("a0", "unsupported", "bob"), ("a1", "supported", "bob"), ("a2", "partial", "bob")]
