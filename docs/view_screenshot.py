"""Regenerate docs/view.png: the `memjudge view` page on simulated runs, in headless Chromium.

Data: `memjudge simulate --personas 20` (seed 0), scored by sim:paper and sim:noisy with two
replicates each (the commands of docs/view.md). The page shows the items the two judges
disagree on and opens the first of them whose evidence quote is in the source. Run from the
repository root:

    python docs/view_screenshot.py
"""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

from screenshot import MEMJUDGE, capture

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "view.png"
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
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sim = tmp / "sim"
        subprocess.run(MEMJUDGE + ["simulate", "--personas", "20", "--out", str(sim)], check=True, capture_output=True)
        (tmp / "judges.toml").write_text(JUDGES.format(sim=sim), encoding="utf-8")
        for judge, run in (("sim:paper", "paper"), ("sim:noisy", "noisy")):
            subprocess.run(MEMJUDGE + ["score", str(sim / "candidates.jsonl"), "--sources", str(sim / "sources.jsonl"),
                                       "--judge", judge, "--judges-file", str(tmp / "judges.toml"), "--replicates", "2",
                                       "--out", str(tmp / run), "--no-progress"], check=True, capture_output=True, cwd=tmp)

        def drive(page, url: str) -> None:
            page.goto(url + "#disagree=1")
            page.wait_for_function("() => document.body.dataset.ready === '1'", timeout=120_000)
            for _ in range(40):  # the first disagreement whose evidence is highlighted
                page.keyboard.press("j")
                page.wait_for_function("() => !document.body.dataset.busy")
                if page.locator("#d-source mark").count():
                    break

        capture(["view", str(tmp / "paper"), str(tmp / "noisy"), "--gold", str(tmp / "gold.jsonl"),
                 "--annotator", "alice", "--port", "0", "--no-browser"], (1500, 820), drive, OUT, tmp)


if __name__ == "__main__":
    main()
