"""What both screenshot scripts share: start a memjudge page server, drive the page in headless
Chromium (the system's /usr/bin/chromium, as the browser tests do), stop the server, and save a
palette PNG (small enough to ship in the repository)."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

MEMJUDGE = [sys.executable, "-m", "memjudge"]
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def capture(command: list[str], viewport: tuple[int, int], drive: Callable, out: Path, cwd: Path) -> None:
    """Run `memjudge COMMAND ...` (it prints its URL first), call `drive(page, url)`, save `out`."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    server = subprocess.Popen(MEMJUDGE + command, stdout=subprocess.PIPE, text=True, cwd=cwd)
    url = server.stdout.readline().strip()
    shot = cwd / "shot.png"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            drive(page, url)
            page.screenshot(path=str(shot))
            browser.close()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    Image.open(shot).convert("RGB").quantize(colors=64).save(out, optimize=True)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
