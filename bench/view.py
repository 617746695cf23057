"""How fast `memjudge view` opens and filters, and how large its exported file is.

    python bench/view.py                 # 100,000 assertions x 3 judges x 2 replicates (600,000 label rows)
    python bench/view.py --items 20000   # a smaller run

The runs are synthetic (numpy, seed 0): 2,000 personas with a 2,000-character source each, 50
assertions per persona, 8 categories, three judges in three run folders, two replicates each
(about 8% unsupported, 5% flips, 0.5% null verdicts). Figures:

- server: reading the runs and building the index (`load_views` + `ViewSession`), per item;
  the index's size on the wire;
- page (headless Chromium, /usr/bin/chromium): from navigation to the first count shown, and
  each filter's time in the page (the loop over the columnar index; with the first 200 rows
  drawn; and as Playwright sees it, from setting the fragment to the count shown), median of 5;
- export: 10,000 items (the default --limit), its size and the time from opening the file to
  the first count; for more items the command says how many it kept.

The page filters in the browser: the index holds one character per item per replicate, so a
filter is a loop over typed arrays and needs no round trip; only the open item's detail and a
search of the sources ask the server.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
CATEGORIES = ["education", "family", "health", "hobbies", "location", "preferences", "values", "work"]
WORDS = "hiking cello garden Geneva honesty cats vegan weddings clinic tenants parents Sunday rain walks".split()


def make_runs(folder: Path, n_items: int, judges: int = 3, replicates: int = 2, seed: int = 0) -> list[Path]:
    rng = np.random.default_rng(seed)
    per = 50
    n_personas = max(1, n_items // per)
    with open(folder / "sources.jsonl", "w", encoding="utf-8") as f:
        for p in range(n_personas):
            text = " ".join(rng.choice(WORDS, 330))
            f.write(json.dumps({"persona_id": f"p{p:05d}", "source": f"Persona {p} wrote: {text}."}) + "\n")
    pid = [f"p{i // per:05d}" for i in range(n_items)]
    aid = [f"{pid[i]}-a{i % per:03d}" for i in range(n_items)]
    cat = rng.choice(CATEGORIES, n_items)
    conf = np.round(rng.uniform(0.3, 1.0, n_items), 2)
    with open(folder / "candidates.jsonl", "w", encoding="utf-8") as f:
        for i in range(n_items):
            text = f"The user {' '.join(rng.choice(WORDS, 6))}."
            f.write(json.dumps({"persona_id": pid[i], "assertion_id": aid[i], "category": str(cat[i]),
                                "confidence": float(conf[i]), "text": text, "source_app": "bench"}) + "\n")
    truth = rng.random(n_items) > 0.08
    runs = []
    for j in range(judges):
        run = folder / f"judge{j}"
        run.mkdir()
        (run / "config.json").write_text(json.dumps({"inputs": {
            "candidates": {"path": str(folder / "candidates.jsonl")}, "sources": {"path": str(folder / "sources.jsonl")}}}))
        with open(run / "labels.jsonl", "w", encoding="utf-8") as f:
            for r in range(replicates):
                flip = rng.random(n_items) < 0.025
                null = rng.random(n_items) < 0.005
                for i in range(n_items):
                    sup = truth[i] ^ flip[i]
                    f.write(json.dumps({
                        "assertion_id": aid[i], "persona_id": pid[i], "category": str(cat[i]), "judge": f"sim:j{j}",
                        "rubric": "support", "replicate": r, "verdict": None if null[i] else ("supported" if sup else "unsupported"),
                        "judge_score": None, "evidence": "", "evidence_found": None, "rationale": "synthetic",
                        "error": "truncated" if null[i] else None}) + "\n")
        runs.append(run)
    return runs


def page_figures(url: str, fragments: list[str]) -> dict:
    from playwright.sync_api import sync_playwright

    out: dict = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(url, timeout=300_000)
        page.wait_for_function("() => document.body.dataset.ready === '1'", timeout=300_000)
        out["open_ms"] = float(page.evaluate("document.body.dataset.readyMs"))
        out["count"] = int(page.locator("[data-testid=count]").inner_text())
        for frag in fragments:
            filt, total, rtt = [], [], []
            for _ in range(5):
                for f in ("#category=", frag):  # a no-op state between two runs of the filter
                    before = int(page.evaluate("document.body.dataset.applied || 0"))
                    t0 = time.perf_counter()
                    page.evaluate("(f) => { location.hash = f; }", f)
                    page.wait_for_function("(n) => Number(document.body.dataset.applied) > n && !document.body.dataset.busy", arg=before)
                    if f == frag:
                        total.append(float(page.evaluate("document.body.dataset.applyMs")))
                        rtt.append((time.perf_counter() - t0) * 1000)
                        filt.append(float(page.evaluate("document.body.dataset.filterMs")))
            out[frag] = (statistics.median(filt), statistics.median(total), statistics.median(rtt),
                         int(page.locator("[data-testid=count]").inner_text()))
        browser.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=100_000)
    args = ap.parse_args()
    from memjudge.web.runs import load_views
    from memjudge.web.view import ViewSession

    print(f"load (uptime): {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        runs = make_runs(tmp, args.items)
        print(f"made {args.items:,} assertions x 3 judges x 2 replicates in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        views = load_views(runs)
        t1 = time.perf_counter()
        session = ViewSession(views)
        t2 = time.perf_counter()
        wire = json.dumps(session.current_index(), separators=(",", ":")).encode()
        t3 = time.perf_counter()
        n = len(views.items)
        print(f"server: read the runs {t1 - t0:.1f} s ({(t1 - t0) / n * 1e6:.0f} us/item), index {t2 - t1:.1f} s "
              f"({(t2 - t1) / n * 1e6:.0f} us/item), index on the wire {len(wire) / 1e6:.1f} MB "
              f"({len(wire) / n:.0f} bytes/item, serialised in {(t3 - t2) * 1000:.0f} ms), detail of one item "
              f"{_time(lambda: session.index.detail(n // 2)) * 1000:.2f} ms")
        session.close()

        memjudge = [sys.executable, "-m", "memjudge", "view", *map(str, runs)]
        server = subprocess.Popen(memjudge + ["--port", "0", "--no-browser"], stdout=subprocess.PIPE, text=True)
        try:
            url = server.stdout.readline().strip()
            frags = ["#disagree=1", "#flips=1", "#errors=1", "#category=values&disagree=1",
                     "#judges=sim%3Aj0&v.sim%3Aj0=unsupported", "#cmin=0.5&cmax=0.9", "#q=cello%20garden", "#sort=-confidence"]
            fig = page_figures(url, frags)
        finally:
            server.terminate()
            server.wait(60)
        print(f"page: open to first count {fig['open_ms']:.0f} ms ({fig['open_ms'] / n * 1000:.1f} us/item), {fig['count']:,} items")
        print("  filter (median of 5, ms)                    filter  + rows drawn  link followed    items")
        for f in frags:
            a, b, c, d = fig[f]
            print(f"  {f:42s} {a:8.1f} {b:13.1f} {c:14.1f} {d:8,}")

        out = tmp / "view.html"
        t0 = time.perf_counter()
        said = subprocess.run(memjudge + ["--export", str(out)], capture_output=True, text=True, check=True).stdout.strip()
        t_exp = time.perf_counter() - t0
        size = out.stat().st_size
        fig = page_figures(out.as_uri(), ["#disagree=1"])
        kept = fig["count"]
        print(f"export: {said}")
        print(f"  {size / 1e6:.2f} MB ({size / kept:.0f} bytes/item), written in {t_exp:.1f} s (with Python start-up), "
              f"open to first count {fig['open_ms']:.0f} ms, disagree filter {fig['#disagree=1'][0]:.1f} ms in page")
    print(f"load after (uptime): {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}")


def _time(fn, k: int = 20) -> float:
    t0 = time.perf_counter()
    for _ in range(k):
        fn()
    return (time.perf_counter() - t0) / k


if __name__ == "__main__":
    main()
