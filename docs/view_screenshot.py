"""Regenerate docs/view.png: the `memjudge view` page on simulated runs, in headless Chromium.

Data: `memjudge simulate --personas 20` (seed 0), scored by sim:paper and sim:noisy with two
replicates each (the commands of docs/view.md). The page shows the items the two judges
disagree on and opens the first of them whose evidence quote is in the source. Run from the
repository root:

    python docs/view_screenshot.py
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "view.png"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
JUDGES = """
[[judge]]
spec = "sim:paper"
[judge.options]
truth = "{sim}"

[[judge]]
spec = "sim:noisy"
[judge.options]
truth = "{sim}"
"""


def main() -> None:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        memjudge = [sys.executable, "-m", "memjudge"]
        sim = tmp / "sim"
        subprocess.run(memjudge + ["simulate", "--personas", "20", "--out", str(sim)], check=True, capture_output=True)
        (tmp / "judges.toml").write_text(JUDGES.format(sim=sim), encoding="utf-8")
        for judge, run in (("sim:paper", "paper"), ("sim:noisy", "noisy")):
            subprocess.run(memjudge + ["score", str(sim / "candidates.jsonl"), "--sources", str(sim / "sources.jsonl"),
                                       "--judge", judge, "--judges-file", str(tmp / "judges.toml"), "--replicates", "2",
                                       "--out", str(tmp / run), "--no-progress"], check=True, capture_output=True, cwd=tmp)
        server = subprocess.Popen(memjudge + ["view", str(tmp / "paper"), str(tmp / "noisy"), "--gold", str(tmp / "gold.jsonl"),
                                              "--annotator", "alice", "--port", "0", "--no-browser"],
                                  stdout=subprocess.PIPE, text=True, cwd=tmp)
        url = server.stdout.readline().strip()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                page = browser.new_page(viewport={"width": 1500, "height": 820})
                page.goto(url + "#disagree=1")
                page.wait_for_function("() => document.body.dataset.ready === '1'", timeout=120_000)
                for _ in range(40):  # the first disagreement whose evidence is highlighted
                    page.keyboard.press("j")
                    page.wait_for_function("() => !document.body.dataset.busy")
                    if page.locator("#d-source mark").count():
                        break
                page.screenshot(path=str(tmp / "shot.png"))
                browser.close()
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
        from PIL import Image

        Image.open(tmp / "shot.png").convert("RGB").quantize(colors=64).save(OUT, optimize=True)
    print(f"wrote {OUT} ({OUT.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
