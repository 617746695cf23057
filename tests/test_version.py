"""`memjudge --version`, the installed package's version and CHANGELOG.md's newest release are one
number (issue #33): pyproject.toml reads it from `memjudge.__version__`."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import memjudge

ROOT = Path(__file__).resolve().parents[1]
RELEASE = re.compile(r"^## \[(\d+\.\d+\.\d+)\] - (\d{4}-\d{2}-\d{2})$", re.M)


def _releases() -> list[str]:
    return RELEASE.findall((ROOT / "CHANGELOG.md").read_text(encoding="utf-8"))


def test_the_version_is_the_changelogs_newest_release():
    releases = _releases()
    assert releases, "CHANGELOG.md has no '## [X.Y.Z] - YYYY-MM-DD' release heading"
    newest = releases[0][0]
    assert memjudge.__version__ == newest
    out = subprocess.run([sys.executable, "-m", "memjudge", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"memjudge {newest}"
    assert version("memjudge") == newest, "reinstall the project (pip install -e .): its metadata is older"


def test_pyproject_takes_the_version_from_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "memjudge.__version__"}


def test_the_changelog_keeps_an_unreleased_section_above_newer_first_releases():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    heads = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    assert heads[0] == "Unreleased"
    numbers = [tuple(map(int, v.split("."))) for v, _ in _releases()]
    assert numbers == sorted(numbers, reverse=True), "releases newest first"
    dates = [d for _, d in _releases()]
    assert dates == sorted(dates, reverse=True)
