"""`memjudge view` in a real headless Chromium (the system package, driven by Playwright), as
tests/test_annotate.py drives annotate: the server runs as `python -m memjudge view ...` in a
subprocess and is killed with SIGKILL to prove a recorded gold label is on disk.

The runs: a simulated corpus of 6 personas scored by sim:paper (run `paper`), sim:noisy (run
`noisy`, with a few rows turned into errors) and sim:paper again with another seed (run
`again`: the same judge in two runs, for "changed between runs"), two replicates each; compare
and noise on `paper`. Every count the page shows is checked against the labels computed here.
Skipped only when /usr/bin/chromium is absent; MEMJUDGE_REQUIRE_CHROMIUM=1 (CI) fails instead.
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

import pandas as pd
import pytest

from conftest import _PROVIDER_ENV, ROOT
from memjudge.cli import main
from memjudge.formats import read_candidates, read_labels, read_sources
from memjudge.gate import load_policy

JUDGES = """
[[judge]]
spec = "sim:paper"
[judge.options]
truth = "{sim}"
seed = {seed}

[[judge]]
spec = "sim:noisy"
[judge.options]
truth = "{sim}"
"""


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _score(sim: Path, judge: str, out: Path, seed: int = 0):
    toml = out.parent / f"judges-{seed}.toml"
    toml.write_text(JUDGES.format(sim=sim, seed=seed), encoding="utf-8")
    assert main(["score", str(sim / "candidates.jsonl"), "--sources", str(sim / "sources.jsonl"), "--judge", judge,
                 "--judges-file", str(toml), "--replicates", "2", "--out", str(out), "--no-progress", "--quiet"]) == 0


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("view")
    with pytest.MonkeyPatch.context() as mp:
        for name in _PROVIDER_ENV:
            mp.delenv(name, raising=False)
        mp.setenv("MEMJUDGE_NO_DOTENV", "1")
        mp.setenv("MEMJUDGE_CACHE_DIR", str(base / "cache"))
        mp.chdir(base)
        sim = base / "sim"
        assert main(["simulate", "--personas", "6", "--out", str(sim)]) == 0
        _score(sim, "sim:paper", base / "paper")
        _score(sim, "sim:noisy", base / "noisy")
        _score(sim, "sim:paper", base / "again", seed=1)
        # three items of the noisy run get no valid answer in replicate 1 (a truncated answer)
        path = base / "noisy" / "labels.jsonl"
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        broken = 0
        for r in rows:
            if r["replicate"] == 1 and broken < 3 and r["assertion_id"].endswith("3"):
                r["verdict"], r["error"], broken = None, "truncated: max_output_tokens reached", broken + 1
        _jsonl(path, rows)
        assert main(["compare", str(sim / "candidates.jsonl"), "--labels", str(base / "paper" / "labels.jsonl"),
                     "--out", str(base / "paper"), "--export-policy", str(base / "paper" / "policy.json"),
                     "--repeats", "1"]) == 0
        assert main(["noise", str(base / "paper" / "labels.jsonl"), str(base / "noisy" / "labels.jsonl"),
                     "--out", str(base / "paper"), "--bootstrap", "20"]) == 0
    truth = read_labels(sim / "labels.jsonl")
    gold = [{"assertion_id": a, "verdict": v, "annotator": "sim", "note": None, "labelled_at": "2026-01-01T00:00:00Z"}
            for a, v in zip(truth["assertion_id"][:60], truth["verdict"][:60])]
    _jsonl(base / "gold.jsonl", gold)
    return base


class View:
    """`python -m memjudge view ARGS` in a subprocess; `url` is the first line of its stdout."""

    def __init__(self, *args, cwd=None):
        env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen([sys.executable, "-m", "memjudge", "view", *map(str, args), "--port", "0", "--no-browser"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        ready, _, _ = select.select([self.proc.stdout], [], [], 120)
        if not ready:
            self.kill()
            pytest.fail("memjudge view printed no URL within 120 s")
        self.url = self.proc.stdout.readline().strip()
        if not self.url:
            self.proc.wait(10)
            pytest.fail(f"memjudge view exited {self.proc.returncode}: {self.proc.stderr.read()}")
        self.base, self.token = self.url.split("/?token=")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def post(self, body: dict, token: str | None) -> int:
        headers = {"Content-Type": "application/json", **({"X-Memjudge-Token": token} if token is not None else {})}
        req = urllib.request.Request(self.base + "/api/gold", data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code


def _expected(base: Path) -> dict:
    """Every filter's count, from the labels (pandas), the policy file (the gate) and noise.json."""
    cand = read_candidates(base / "sim" / "candidates.jsonl")
    src = read_sources(base / "sim" / "sources.jsonl").set_index("persona_id")["source"]
    lab = {run: read_labels(base / run / "labels.jsonl") for run in ("paper", "noisy", "again")}
    r0 = {run: df[df["replicate"] == 0].set_index("assertion_id")["verdict"] for run, df in lab.items()}
    frame = pd.DataFrame(r0).reindex(cand["assertion_id"])
    n_distinct = frame.apply(lambda row: row.dropna().nunique(), axis=1)
    noise = {j["judge"]: j for j in json.loads((base / "paper" / "noise.json").read_text())["judges"]}
    gold = pd.read_json(base / "gold.jsonl", lines=True).drop_duplicates(["assertion_id", "annotator"], keep="last")
    standing = gold.groupby("assertion_id")["verdict"].apply(set)
    mism = sum(any(isinstance(v, str) and v != g for v in frame.loc[a] for g in gs) for a, gs in standing.items())
    policy = load_policy(base / "paper" / "policy.json")
    changed = ((frame["paper"] != frame["again"]) & frame["paper"].notna() & frame["again"].notna()).sum()
    q = "garden"
    text_hit = cand["text"].str.lower().str.contains(q) | cand["persona_id"].map(src).str.lower().str.contains(q)
    return {
        "all": len(cand),
        "values": int((cand["category"] == "values").sum()),
        "paper_unsupported": int((r0["paper"] == "unsupported").sum()),
        # noise.json: items with >= 2 valid replicates x the any-flip rate = the items with a flip
        "paper_flips": round(noise["sim:paper"]["items"] * noise["sim:paper"]["any_flip_rate"]["value"]),
        "noisy_flips": round(noise["sim:noisy"]["items"] * noise["sim:noisy"]["any_flip_rate"]["value"]),
        "disagree": int((n_distinct > 1).sum()),
        "disagree_values": int(((n_distinct > 1) & (cand.set_index("assertion_id")["category"] == "values")).sum()),
        "errors": int(lab["noisy"]["verdict"].isna().groupby(lab["noisy"]["assertion_id"]).any().sum()),
        "gold_mismatch": int(mism),
        "changed": int(changed),
        "keeps": sum(policy.admit(c, x) for c, x in zip(cand["category"], cand["confidence"])),
        "conf": int(((cand["confidence"] >= 0.5) & (cand["confidence"] <= 0.9)).sum()),
        "q": int(text_hit.sum()),
    }


def _count(page, fragment: str) -> int:
    """Follow a link to `fragment` in the open page; the count it shows."""
    before = int(page.evaluate("document.body.dataset.applied || 0"))
    page.evaluate("(f) => { location.hash = f; }", fragment)
    page.wait_for_function("(n) => Number(document.body.dataset.applied) > n && !document.body.dataset.busy", arg=before)
    return int(page.locator("[data-testid=count]").inner_text())


def test_filters_deep_links_keys_and_gold(browser, runs, tmp_path):
    from playwright.sync_api import expect

    want = _expected(runs)
    assert want["paper_flips"] > 0 and want["errors"] == 3 and want["disagree"] > 0 and want["changed"] > 0
    gold = tmp_path / "gold.jsonl"  # a copy: this test appends to it, the others read the module's
    gold.write_bytes((runs / "gold.jsonl").read_bytes())
    before = gold.read_bytes()
    server = View(runs / "paper", runs / "noisy", runs / "again", "--gold", gold, "--annotator", "tester")
    assert server.url.startswith("http://127.0.0.1:")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(server.url)
        page.wait_for_function("() => document.body.dataset.ready === '1'")
        assert int(page.locator("[data-testid=count]").inner_text()) == want["all"]
        # each filter alone, then two combined; the judges shown decide disagree/flips/errors
        assert _count(page, "#category=values") == want["values"]
        assert _count(page, "#judges=paper%2Fsim%3Apaper&v.paper%2Fsim%3Apaper=unsupported") == want["paper_unsupported"]
        assert _count(page, "#judges=paper%2Fsim%3Apaper&flips=1") == want["paper_flips"]
        assert _count(page, "#judges=sim%3Anoisy&flips=1") == want["noisy_flips"]
        assert _count(page, "#disagree=1") == want["disagree"]
        assert _count(page, "#disagree=1&category=values") == want["disagree_values"]
        assert _count(page, "#errors=1") == want["errors"]
        assert _count(page, "#gold_mismatch=1") == want["gold_mismatch"]
        assert _count(page, "#changed=1") == want["changed"]
        assert _count(page, "#p.paper%2Fpolicy=keeps") == want["keeps"]
        assert _count(page, "#p.paper%2Fpolicy=drops") == want["all"] - want["keeps"]
        assert _count(page, "#cmin=0.5&cmax=0.9") == want["conf"]
        assert _count(page, "#q=garden") == want["q"]

        # the controls write the fragment: a link reproduces the view
        _count(page, "#category=values")
        page.check("#errors")
        page.wait_for_function("() => location.hash.includes('errors=1')")
        assert "category=values" in page.evaluate("location.hash")

        # a deep link opens an item; its evidence quote is highlighted in the source
        lab = read_labels(runs / "paper" / "labels.jsonl")
        ev = lab[(lab["replicate"] == 0) & lab["evidence"].fillna("").str.len().gt(20)].iloc[0]
        _count(page, f"#item={ev['assertion_id']}")
        expect(page.locator("body")).to_have_attribute("data-item", ev["assertion_id"])
        expect(page.locator("#d-source mark").first).to_have_text(ev["evidence"])
        expect(page.locator("#d-judges")).to_contain_text("found in the source (highlighted)")

        # keyboard: Esc clears, j/k walk the list, / goes to the search box
        ids = read_candidates(runs / "sim" / "candidates.jsonl")["assertion_id"].tolist()
        page.locator("body").press("Escape")
        expect(page.locator("[data-testid=count]")).to_have_text(str(want["all"]))
        expect(page.locator("body")).to_have_attribute("data-item", "")
        page.keyboard.press("j")
        expect(page.locator("body")).to_have_attribute("data-item", ids[0])
        page.keyboard.press("j")
        page.keyboard.press("j")
        page.keyboard.press("k")  # keys pressed while an item loads are queued, not lost
        expect(page.locator("body")).to_have_attribute("data-item", ids[1])
        assert page.evaluate("location.hash") == f"#item={ids[1]}"
        page.keyboard.press("/")
        assert page.evaluate("document.activeElement.id") == "q"
        page.keyboard.type("j")  # typing in the box is no shortcut
        page.keyboard.press("Escape")

        # an error item shows its error, never a blank or a label
        _count(page, "#errors=1")
        page.keyboard.press("j")
        expect(page.locator("#d-judges")).to_contain_text("no valid answer: truncated: max_output_tokens reached")

        # record a gold label, then kill -9 the server: the row is on disk
        first = page.locator("body").get_attribute("data-item")
        page.keyboard.press("n")
        page.keyboard.type("checked by hand")
        page.keyboard.press("Escape")
        page.keyboard.press("u")
        expect(page.locator("#status")).to_contain_text("saved: " + first)
        # refused: no token, a wrong one, a bad verdict, an unknown item; nothing written
        size = gold.stat().st_size
        assert server.post({"assertion_id": first, "verdict": "supported"}, None) == 403
        assert server.post({"assertion_id": first, "verdict": "supported"}, "x" * len(server.token)) == 403
        assert server.post({"assertion_id": first, "verdict": "maybe"}, server.token) == 400
        assert server.post({"assertion_id": "nope", "verdict": "supported"}, server.token) == 400
        assert gold.stat().st_size == size
        server.kill()
        assert dialogs == []
    finally:
        page.close()
        server.kill()
    rows = [json.loads(x) for x in gold.read_text(encoding="utf-8").splitlines()]
    assert gold.read_bytes().startswith(before)
    assert rows[-1]["assertion_id"] == first and rows[-1]["verdict"] == "unsupported"
    assert rows[-1]["annotator"] == "tester" and rows[-1]["note"] == "checked by hand"


def _offline_page(browser, url: str):
    """A page in which every request but the file itself is aborted and recorded."""
    ctx = browser.new_context()
    blocked: list[str] = []

    def route(r):
        if r.request.url.split("#")[0] == url.split("#")[0]:
            r.continue_()
        else:
            blocked.append(r.request.url)
            r.abort()

    ctx.route("**/*", route)
    page = ctx.new_page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    return ctx, page, blocked, requests


def test_exported_file_works_offline(browser, runs, tmp_path, capsys):
    from playwright.sync_api import expect

    want = _expected(runs)
    out = tmp_path / "view.html"
    assert main(["view", str(runs / "paper"), str(runs / "noisy"), str(runs / "again"), "--gold", str(runs / "gold.jsonl"),
                 "--export", str(out)]) == 0
    said = capsys.readouterr().out
    assert said.startswith(f"wrote {out}") and f"{want['all']:,} of {want['all']:,} items" in said
    html = out.read_text(encoding="utf-8")
    assert 'http-equiv="Content-Security-Policy"' in html and "connect-src" not in html and "http://" not in html
    url = out.as_uri()
    ctx, page, blocked, requests = _offline_page(browser, url)
    try:
        page.goto(url + "#disagree=1&category=values")
        page.wait_for_function("() => document.body.dataset.ready === '1'")
        assert int(page.locator("[data-testid=count]").inner_text()) == want["disagree_values"]
        assert _count(page, "#gold_mismatch=1") == want["gold_mismatch"]
        assert _count(page, "#changed=1") == want["changed"]
        cand = read_candidates(runs / "sim" / "candidates.jsonl")
        for sort, order in (("-confidence", cand.sort_values("confidence", ascending=False, kind="stable")),
                            ("confidence", cand.sort_values("confidence", kind="stable")),
                            ("persona", cand.sort_values("persona_id", kind="stable"))):
            _count(page, f"#category=values&sort={sort}")
            ids = page.locator("#rows tr").evaluate_all("rows => rows.map(r => r.dataset.id)")
            assert ids == order.loc[order["category"] == "values", "assertion_id"].tolist()[:200]
        lab = read_labels(runs / "paper" / "labels.jsonl")
        ev = lab[(lab["replicate"] == 0) & lab["evidence"].fillna("").str.len().gt(20)].iloc[-1]
        _count(page, f"#item={ev['assertion_id']}")
        expect(page.locator("#d-source mark").first).to_have_text(ev["evidence"])
        expect(page.locator("#record")).to_be_hidden()  # read-only
        page.keyboard.press("u")
        assert blocked == [] and requests == [url.split("#")[0]]
    finally:
        ctx.close()

    # more items than the limit: the file says how many it kept
    assert main(["view", str(runs / "paper"), "--export", str(tmp_path / "few.html"), "--limit", "50"]) == 0
    assert f"50 of {want['all']:,} items (the first 50" in capsys.readouterr().out


HOSTILE_TEXT = [
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(2)</script>",
    '<a href="javascript:alert(3)">click me</a> javascript:alert(3)',
    "The user \u202eseirots\u202c lives in \u2067Geneva\u2069",
]


def test_hostile_text_never_runs(browser, tmp_path, capsys):
    from playwright.sync_api import expect

    long_line = "The user writes " + "a" * 10_000_000 + " end"
    src = {"p0": "I said <script>alert(5)</script> and <img src=x onerror=alert(6)> javascript:alert(7)\n" + long_line,
           "p1": "Nothing to see \u202e here."}
    cands = [{"assertion_id": f"h{i}", "persona_id": f"p{i % 2}", "category": "facts", "confidence": 0.5, "text": t}
             for i, t in enumerate(HOSTILE_TEXT)]
    run = tmp_path / "run"
    run.mkdir()
    _jsonl(tmp_path / "cands.jsonl", cands)
    _jsonl(tmp_path / "sources.jsonl", [{"persona_id": p, "source": s} for p, s in src.items()])
    (run / "config.json").write_text(json.dumps({"inputs": {"candidates": {"path": str(tmp_path / "cands.jsonl")},
                                                            "sources": {"path": str(tmp_path / "sources.jsonl")}}}))
    _jsonl(run / "labels.jsonl", [
        {"assertion_id": c["assertion_id"], "persona_id": c["persona_id"], "category": "facts", "judge": "sim:x",
         "rubric": "support", "replicate": 0, "verdict": "supported",
         "evidence": "<script>alert(5)</script>" if c["persona_id"] == "p0" else None,
         "rationale": "<img src=x onerror=fetch('http://127.0.0.1:9/')>", "error": None,
         "model_version": '<a href="javascript:alert(8)">m</a>'} for c in cands])
    server = View(run)
    page = browser.new_page()
    dialogs, requests, navigations = [], [], []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.on("request", lambda r: requests.append(r.url))
    page.on("framenavigated", lambda f: navigations.append(f.url))
    try:
        page.goto(server.url)
        page.wait_for_function("() => document.body.dataset.ready === '1'")
        for c in cands:
            _count(page, f"#item={c['assertion_id']}")
            expect(page.locator("#d-text")).to_have_text(c["text"])
        _count(page, "#item=h0")
        expect(page.locator("#d-source mark").first).to_have_text("<script>alert(5)</script>")
        expect(page.locator("#d-source")).to_contain_text("a" * 1000)
        page.locator("#d-text").click()
        page.locator("#rows tr").nth(2).click()
        assert page.locator("img, a, iframe, object, embed").count() == 0
        assert page.locator("script").count() == 2  # the page's own script and its data element
        assert dialogs == [] and {u.split("#")[0] for u in navigations} == {server.url}  # fragment moves only
        assert all(u.startswith(server.base + "/") for u in requests)
    finally:
        page.close()
        server.kill()

    out = tmp_path / "hostile.html"
    assert main(["view", str(run), "--export", str(out)]) == 0
    capsys.readouterr()
    url = out.as_uri()
    ctx, page, blocked, requests = _offline_page(browser, url)
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.goto(url + "#item=h1")
        page.wait_for_function("() => document.body.dataset.ready === '1'")
        expect(page.locator("#d-text")).to_have_text(HOSTILE_TEXT[1])
        assert int(page.locator("[data-testid=count]").inner_text()) == len(cands)
        assert page.locator("img, a, iframe").count() == 0 and page.locator("script").count() == 2
        assert dialogs == [] and blocked == [] and requests == [url]
    finally:
        ctx.close()


def test_bad_input_is_one_line_and_writes_nothing(runs, tmp_path, capsys):
    out = tmp_path / "out.html"
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["view", str(empty), "--export", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{empty}: no labels file") and "\n" not in err

    few = tmp_path / "few.jsonl"
    lines = (runs / "sim" / "candidates.jsonl").read_text(encoding="utf-8").splitlines()
    few.write_text("\n".join(lines[:10]) + "\n", encoding="utf-8")
    assert main(["view", str(runs / "paper"), "--candidates", str(few), "--export", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"{runs / 'paper' / 'labels.jsonl'}:") and "which the candidates file" in err and "\n" not in err

    gold = _jsonl(tmp_path / "gold.jsonl", [{"assertion_id": "p001-a001", "verdict": "supported", "annotator": "a"},
                                            {"assertion_id": "nobody", "verdict": "supported", "annotator": "a"}])
    before = gold.read_bytes()
    assert main(["view", str(runs / "paper"), "--gold", str(gold), "--export", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"{gold}:2: names assertion 'nobody', which is not among the runs' items"
    assert gold.read_bytes() == before and not out.exists()


def test_report_names_the_items_and_the_view_command(runs):
    want = _expected(runs)
    assert main(["report", str(runs / "paper"), "--format", "html"]) == 0
    html = (runs / "paper" / "report.html").read_text(encoding="utf-8")
    assert "memjudge view paper" in html
    assert f"Items behind these figures: {want['all']:,} candidates (judge sim:paper)" in html
    noise = {j["judge"]: j for j in json.loads((runs / "paper" / "noise.json").read_text())["judges"]}
    assert f"sim:paper {noise['sim:paper']['items']:,} items with two valid replicates, {want['paper_flips']:,} of them flip" in html


def test_panel_labels_and_policies_through_the_python_api(runs, tmp_path):
    from memjudge.web.index import Index
    from memjudge.web.runs import load_views

    panel = tmp_path / "panel.jsonl"
    assert main(["panel", str(runs / "paper" / "labels.jsonl"), str(runs / "noisy" / "labels.jsonl"),
                 "--method", "majority", "--bootstrap", "20", "--out", str(panel)]) == 0
    views = load_views([runs / "paper", runs / "noisy"], labels=[panel], gold=runs / "gold.jsonl")
    keys = [c.key for c in views.columns]
    assert keys[:2] == ["sim:paper", "sim:noisy"] and keys[2].startswith("panel:majority(")
    assert {p.key for p in views.policies} == {"paper/global", "paper/targeted", "paper/per_category", "paper/policy"}
    data = Index(views).index(with_sources=True)
    want = _expected(runs)
    assert data["columns"][0]["flip"].count("1") == want["paper_flips"]
    assert data["columns"][0]["score"] is not None  # sim judges' declared confidence (judge_score) is sent
    assert data["policies"][-1]["key"] == "paper/policy" and data["policies"][-1]["keeps"].count("1") == want["keeps"]
    panel_rows = read_labels(panel)
    r0 = panel_rows[panel_rows["replicate"] == 0].set_index("assertion_id")["verdict"]
    codes = data["columns"][2]["verdicts"][0]
    shown = {a: ("-" if c == "-" else data["verdicts"][ord(c) - 48]) for a, c in zip(data["ids"], codes) if c != "_"}
    assert shown == {a: ("-" if v is None else v) for a, v in r0.items()}


def test_a_cascade_folder_filters_by_decided_by(browser, runs, tmp_path):
    """`memjudge cascade`'s folder opens as is (its inputs are in cascade.json); the page filters
    by the stage that decided, or the abstained items, with the counts of labels.jsonl."""
    cascade = tmp_path / "cascade"
    toml = tmp_path / "judges.toml"
    toml.write_text(JUDGES.format(sim=runs / "sim", seed=0), encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEMJUDGE_CACHE_DIR", str(tmp_path / "cache"))
        assert main(["cascade", str(runs / "sim" / "candidates.jsonl"), "--sources", str(runs / "sim" / "sources.jsonl"),
                     "--judges-file", str(toml), "--stage", "sim:noisy", "--stage", "sim:paper", "--gold-sample", "120",
                     "--target", "0.9", "--out", str(cascade), "--no-progress"]) == 0
    lab = read_labels(cascade / "labels.jsonl")
    by = lab["decided_by"].fillna("abstained").value_counts().to_dict()
    server = View(cascade)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    try:
        page.goto(server.url)
        page.wait_for_function("() => document.body.dataset.ready === '1'")
        assert page.locator("#decided-box").is_visible()
        assert page.locator("#decided option").all_inner_texts()[1:3] == ["sim:noisy", "sim:paper"]
        for stage in ("sim:noisy", "sim:paper", "abstained"):
            assert _count(page, "#decided=" + stage.replace(":", "%3A")) == by.get(stage, 0), stage
        assert _count(page, "#") == len(lab)
    finally:
        page.close()
        server.kill()
