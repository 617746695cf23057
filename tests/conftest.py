"""Shared fixtures: no test may reach a real service, and no test writes outside tmp."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_DATA = ROOT / "tests" / "data"
# CI clones the project beside shared/; a user's clone has none (those tests skip).
SHARED_DATA = Path(os.environ.get("MEMJUDGE_SHARED_DATA", ROOT.parent / "shared" / "data"))

_PROVIDER_ENV = (
    "GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_GENAI_API_VERSION",
    "GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION", "OPENAI_API_KEY", "OPENAI_BASE_URL",
    "OPENAI_ORG_ID", "OPENAI_PROJECT_ID",
)


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch, tmp_path_factory):
    for name in _PROVIDER_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMJUDGE_NO_DOTENV", "1")
    monkeypatch.setenv("MEMJUDGE_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("MPLBACKEND", "Agg")


@pytest.fixture
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA


def run_cli(*args: str, env: dict | None = None, cwd=None, timeout: float = 600):
    """Run `python -m memjudge ARGS` in a subprocess; returns CompletedProcess (text)."""
    import subprocess

    full_env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_ENV}
    full_env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + full_env.get("PYTHONPATH", "")
    # A developer's .env must not put real keys back into a test (tests of .env unset this).
    full_env["MEMJUDGE_NO_DOTENV"] = "1"
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}  # env={"X": None} unsets X
    return subprocess.run(
        [sys.executable, "-m", "memjudge", *map(str, args)],
        capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def fake_server():
    """A running fake Gemini/OpenAI server on 127.0.0.1 (tests/fake_server.py)."""
    from fake_server import FakeServer

    with FakeServer() as server:
        yield server
