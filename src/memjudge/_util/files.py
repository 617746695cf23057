"""The one way memjudge writes a file: atomically, durably, never through a planted link.

Contract:

- `write_atomic(path, data)` writes ``PATH.tmp`` and renames it over ``PATH``, so a reader (or a
  kill) sees the old file or the new one, never half of one. Before the rename the data is
  fsynced, and after it the folder, so a power cut cannot leave an empty file behind a rename
  that did happen. A symbolic link at ``PATH`` itself is replaced, not followed.
- ``PATH.tmp`` (and every file of a run folder) is opened with `open_private`, which refuses to
  follow a symbolic link (O_NOFOLLOW): a link planted at a run folder's journal or temporary
  file would otherwise make memjudge write wherever it points. The refusal is a one-line
  `UsageError`.
- `write_lines` streams an iterable of text chunks the same way (JSONL writers);
  `write_json` is `write_atomic` of ``json.dumps(obj, **kw)`` plus a newline, for plain
  (standard library) JSON values: numpy and pandas values go through
  `memjudge.formats.write_json`, which makes them plain first.
- `atomic_file` is the context manager under all of them, for writers that stream or check
  what they wrote before it replaces the old file (a verified download, a re-read panel).

Standard library only (with `memjudge.errors`), so every layer may use it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any

from memjudge.errors import UsageError

__all__ = [
    "atomic_file", "check_dir", "fsync_dir", "make_dir", "open_private", "refuse_links", "temp_path",
    "write_atomic", "write_json", "write_lines",
]

_FLAGS = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
}


def _refuse_link(path: Path) -> UsageError:
    return UsageError(f"{path} is a symbolic link; memjudge does not follow a link it did not create in a run folder: remove it")


def open_private(path: str | os.PathLike[str], mode: str = "w") -> IO[Any]:
    """`open(path, mode)` that refuses to follow a symbolic link at `path` (O_NOFOLLOW).
    Modes: r, rb, w, wb, a, ab; text modes are UTF-8."""
    path = Path(path)
    flags = _FLAGS[mode.replace("b", "")]
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP or path.is_symlink():
            raise _refuse_link(path) from None
        raise
    return os.fdopen(fd, mode) if "b" in mode else os.fdopen(fd, mode, encoding="utf-8")


def refuse_links(paths: Iterable[str | os.PathLike[str]]) -> None:
    """UsageError for the first of `paths` that is a symbolic link (checked before any paid
    request; `open_private` checks again when the file is opened)."""
    for p in paths:
        if Path(p).is_symlink():
            raise _refuse_link(Path(p))


def check_dir(path: str | os.PathLike[str], what: str = "output folder") -> None:
    """UsageError when `path` cannot be a directory: it is a file, or lies under one."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.exists():
            if not p.is_dir():
                raise UsageError(f"{what} {path}: {p} is not a directory")
            return


def make_dir(path: str | os.PathLike[str], what: str = "output folder") -> Path:
    """`path` as a directory, created if needed; one-line UsageError when it cannot be."""
    path = Path(path)
    check_dir(path, what)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{what} {path}: cannot create it ({e.strerror})") from None
    return path


def fsync_dir(folder: str | os.PathLike[str]) -> None:
    """Make a folder's entries (a new or renamed file) durable; a no-op where the OS cannot."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:  # some filesystems refuse fsync on a directory: nothing more to do there
        pass
    finally:
        os.close(fd)


def temp_path(path: str | os.PathLike[str]) -> Path:
    """Where `write_atomic` puts the new contents of `path` before the rename: ``PATH.tmp``."""
    path = Path(path)
    return path.with_name(path.name + ".tmp")


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "w", *, durable: bool = True, unique: bool = False,
                check: Callable[[Path], object] | None = None) -> Iterator[IO[Any]]:
    """A file to write the new contents of `path` into; when the block ends normally it is
    flushed, fsynced (`durable`), checked (`check(temporary_path)`, which may raise) and renamed
    over `path`, then the folder is fsynced. When the block (or `check`) raises, the temporary
    file is removed and `path` is left as it was.

    The temporary file is ``PATH.tmp`` opened with `open_private`, or with ``unique=True`` a
    fresh name beside `path` (``PATH.<random>.part``: several processes may write the same
    file at once, e.g. a shared model cache). Modes: w, wb."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_file writes only: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    if unique:
        fd, name = tempfile.mkstemp(prefix=path.name + ".", suffix=".part", dir=path.parent)
        tmp = Path(name)
        f = os.fdopen(fd, mode) if mode == "wb" else os.fdopen(fd, mode, encoding="utf-8")
    else:
        tmp = temp_path(path)
        f = open_private(tmp, mode)
    try:
        with f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if durable:
        fsync_dir(path.parent)


def write_atomic(path: str | os.PathLike[str], data: str | bytes, *, durable: bool = True,
                 check: Callable[[Path], object] | None = None) -> None:
    """Replace `path`'s contents with `data` (text is UTF-8) in one step (see `atomic_file`)."""
    with atomic_file(path, "wb" if isinstance(data, bytes) else "w", durable=durable, check=check) as f:
        f.write(data)


def write_lines(path: str | os.PathLike[str], chunks: Iterable[str], *, durable: bool = True) -> None:
    """Replace `path`'s contents with the concatenated text `chunks`, streamed (each chunk
    carries its own newline), in one step."""
    with atomic_file(path, "w", durable=durable) as f:
        for chunk in chunks:
            f.write(chunk)


def write_json(path: str | os.PathLike[str], obj: Any, *, durable: bool = True, **dumps_kw: Any) -> None:
    """`json.dumps(obj, **dumps_kw)` and a newline, written with `write_atomic`."""
    write_atomic(path, json.dumps(obj, **dumps_kw) + "\n", durable=durable)
