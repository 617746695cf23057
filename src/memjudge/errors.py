"""Errors that the CLI turns into one line on stderr and exit status 2."""

from __future__ import annotations


class MemjudgeError(Exception):
    """Any problem a user can fix; printed as one line, never as a traceback."""


class InputError(MemjudgeError):
    """Bad input, located at `path` and (when one applies) a 1-based `line`."""

    def __init__(self, path, message: str, line: int | None = None):
        self.path = str(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class UsageError(MemjudgeError):
    """Bad arguments: unknown provider, replicates < 1, unknown rubric, ..."""
