"""`memjudge score` in a child of a warm forkserver, for the SIGKILL loop in test_engine.py:
a fresh interpreter would spend a second or more importing before every kill."""

from __future__ import annotations

import sys

from memjudge import cli

# What a child needs loaded, imported once by the forkserver. (Python 3.11's forkserver does
# not get the tests folder on its path, so this module itself is imported by each child.)
PRELOAD = ["diskcache", "pyarrow.parquet", "memjudge.cli", "memjudge.scoring.engine", "memjudge.scoring.batch.runner", "memjudge.judges.rubrics",
           "memjudge.judges.openai", "openai", "memjudge.judges.anthropic", "anthropic"]


def score(argv: list[str], log: str) -> None:
    """Run the CLI and exit with its status; stdout and stderr go to `log`."""
    with open(log, "a", encoding="utf-8") as f:
        sys.stdout = sys.stderr = f
        code = cli.main(argv)
        f.flush()
    sys.exit(code)
