"""Regenerate docs/annotate.png: the `memjudge annotate` page on real data, in headless Chromium.

Data: the SynthPAI sample shipped in tests/data (MIT, SRI Lab ETH Zurich; see
tests/data/README.md), imported with `memjudge import synthpai`; 200 of its candidate
assertions (the first 200 top guesses, rank 0, in file order) are the items. The script
labels the first 11 with the keyboard (a fixed pattern, not a judgement) so the page shows
item 12 of 200, then saves a palette PNG. Run from the repository root:

    python docs/annotate_screenshot.py
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "annotate.png"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def main() -> None:
    from playwright.sync_api import expect, sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        memjudge = [sys.executable, "-m", "memjudge"]
        subprocess.run(memjudge + ["import", "synthpai", str(ROOT / "tests/data/synthpai_sample"), "--out", str(tmp / "sp")],
                       check=True, capture_output=True)
        rows = [json.loads(x) for x in (tmp / "sp/candidates.jsonl").read_text(encoding="utf-8").splitlines()]
        rows = [r for r in rows if r.get("rank") == 0][:200]
        (tmp / "to_label.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        server = subprocess.Popen(memjudge + ["annotate", str(tmp / "to_label.jsonl"), "--sources", str(tmp / "sp/sources.jsonl"),
                                              "--out", str(tmp / "gold.jsonl"), "--annotator", "alice", "--port", "0", "--no-browser"],
                                  stdout=subprocess.PIPE, text=True)
        url = server.stdout.readline().strip()
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 640})
                page.goto(url)
                for i, key in enumerate("suussupusus"):
                    expect(page.locator("#progress")).to_have_text(f"{i + 1} / {len(rows)}")
                    page.keyboard.press(key)
                expect(page.locator("#progress")).to_have_text(f"12 / {len(rows)}")
                page.keyboard.press("n")
                page.keyboard.type("mentions NZ and Oriental Bay; city not named")
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
