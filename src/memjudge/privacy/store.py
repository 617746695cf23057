"""The run folder's private files: `private/` (mode 0700) holding the placeholder map and the
detection cache, each mode 0600, written without following a planted link."""

from __future__ import annotations

import os
from pathlib import Path

PRIVATE_DIR = "private"
MAP_FILE = "map.json"
DETECTIONS_FILE = "detections.jsonl"

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def private_dir(run_dir: str | os.PathLike[str]) -> Path:
    """RUN/private, made mode 0700 (and set so if it was not)."""
    from memjudge._util.files import make_dir, refuse_links

    folder = Path(run_dir) / PRIVATE_DIR
    refuse_links([folder, folder / MAP_FILE, folder / DETECTIONS_FILE, folder / (MAP_FILE + ".tmp")])
    make_dir(folder, "private folder")
    os.chmod(folder, 0o700)
    return folder


def write_private(path: Path, text: str) -> None:
    """Replace `path` with `text` in one step; the file is mode 0600 from its first byte."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | _NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def append_private(path: Path, text: str) -> None:
    """Append `text` to `path` (created mode 0600)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


__all__ = ["DETECTIONS_FILE", "MAP_FILE", "PRIVATE_DIR", "append_private", "private_dir", "write_private"]
