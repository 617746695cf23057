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
import subprocess
import tempfile
from pathlib import Path

from screenshot import MEMJUDGE, capture

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "annotate.png"


def main() -> None:
    from playwright.sync_api import expect

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        subprocess.run(MEMJUDGE + ["import", "synthpai", str(ROOT / "tests/data/synthpai_sample"), "--out", str(tmp / "sp")],
                       check=True, capture_output=True)
        rows = [json.loads(x) for x in (tmp / "sp/candidates.jsonl").read_text(encoding="utf-8").splitlines()]
        rows = [r for r in rows if r.get("rank") == 0][:200]
        (tmp / "to_label.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")

        def drive(page, url: str) -> None:
            page.goto(url)
            for i, key in enumerate("suussupusus"):
                expect(page.locator("#progress")).to_have_text(f"{i + 1} / {len(rows)}")
                page.keyboard.press(key)
            expect(page.locator("#progress")).to_have_text(f"12 / {len(rows)}")
            page.keyboard.press("n")
            page.keyboard.type("mentions NZ and Oriental Bay; city not named")

        capture(["annotate", str(tmp / "to_label.jsonl"), "--sources", str(tmp / "sp/sources.jsonl"),
                 "--out", str(tmp / "gold.jsonl"), "--annotator", "alice", "--port", "0", "--no-browser"],
                (1200, 640), drive, OUT, tmp)


if __name__ == "__main__":
    main()
