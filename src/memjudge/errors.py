"""Errors that the CLI turns into one line on stderr and exit status 2.

Every problem a user can fix is a `MemjudgeError`; the command line prints it as one line
(``path:line: message`` for bad input) and exits with status 2, never with a traceback. The
tree (where each class is defined)::

    Exception
    └── MemjudgeError                   memjudge.errors: anything a user can fix
        ├── InputError                  memjudge.errors: a bad file, at `path` and 1-based `line`
        ├── UsageError                  memjudge.errors: bad arguments or a refused request
        │   └── PrivacyUnavailable      memjudge.privacy: --private without the [private] extra or its NER model
        ├── PolicyFileError             memjudge.gate: a policy file that cannot be read
        │                               (also a ValueError, as it was before)
        ├── RunStopped                  memjudge.scoring: a run stopped early, its rows written
        ├── AllCallsFailed              memjudge.scoring: every call failed, its rows written
        └── PromptTooLong               memjudge.judges.local: an item too long for the model

Errors that are not the user's to fix stay outside the tree and are handled where they arise:
`memjudge.scoring.rubrics.AnswerError` (a judge's invalid answer: re-asked, then recorded as
the row's ``error``, never coerced into a verdict) and `memjudge.judges.base.RequestTimeout`
(retried). Standard library only, so `memjudge.gate` may import it.
"""

from __future__ import annotations

import os

__all__ = ["InputError", "MemjudgeError", "UsageError"]


class MemjudgeError(Exception):
    """Any problem a user can fix; printed as one line, never as a traceback."""


class InputError(MemjudgeError):
    """Bad input, located at `path` and (when one applies) a 1-based `line`."""

    def __init__(self, path: str | os.PathLike[str], message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class UsageError(MemjudgeError):
    """Bad arguments: unknown provider, replicates < 1, unknown rubric, ..."""
