"""The `memjudge` command line: parses arguments, calls the Python API, prints.

Any `MemjudgeError` becomes one line on stderr and exit status 2. The arguments are in
`memjudge.cli.parser`; each command's handler is `cmd_<name>(args) -> int` in
`memjudge.cli.commands`, importing heavy modules inside, so that `memjudge --help` and the
gate stay fast.
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path
from typing import NoReturn

from memjudge.cli.inputs import apply_maps
from memjudge.cli.parser import build_parser, parse_args
from memjudge.errors import MemjudgeError, UsageError

__all__ = ["build_parser", "main", "run"]


def _load_dotenv() -> None:
    """Keys from a `.env` file in the working folder, as Inspect AI reads them; the environment
    wins over the file, and memjudge never writes it. MEMJUDGE_NO_DOTENV=1 switches it off."""
    if os.environ.get("MEMJUDGE_NO_DOTENV"):
        return
    path = Path.cwd() / ".env"
    if path.is_file():
        from dotenv import load_dotenv

        load_dotenv(path, override=False)


def _setup_logging(args) -> None:
    """--verbose: the engine's log of retries and failed requests on stderr."""
    if getattr(args, "verbose", False):
        import logging

        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("memjudge: %(message)s"))
        log = logging.getLogger("memjudge")
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def main(argv: list[str] | None = None) -> int:
    try:
        _load_dotenv()
        args = parse_args(argv)
        apply_maps(args)
        _setup_logging(args)
        return int(args.func(args) or 0)
    except MemjudgeError as e:
        msg = str(e)
        print(msg if msg.startswith("memjudge") or not isinstance(e, UsageError) else f"memjudge: {msg}", file=sys.stderr)
        return 2
    except (FileExistsError, NotADirectoryError, IsADirectoryError, PermissionError) as e:
        # A path the user named that cannot be written as asked: their fix, so one line.
        if e.filename is None:
            raise
        print(f"memjudge: {e.filename}: {e.strerror}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("memjudge: interrupted; answers received so far are saved, rerun the same command to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


def run() -> NoReturn:
    """The `memjudge` program (`python -m memjudge`, the console script): `main()`, then exit.

    On the way out, one collection finalizes what the run left in reference cycles (the SQLite
    connections of the cache's writer threads among them: closing the last one checkpoints the
    cache's write-ahead log), then the collector is frozen: the interpreter's own collections
    while it tears its modules down would walk every object pandas and the run left again, a
    tenth of a one-second cached rerun, to free what the process's end frees anyway. atexit
    handlers still run.

    A command that loads llama.cpp runs as a watched child (`memjudge.cli.supervise`): a native
    crash then ends in one line that says what failed, what the run kept and what to do."""
    from memjudge.cli import supervise

    if not supervise.child_setup():
        argv = sys.argv[1:]
        args = supervise.supervised_command(argv)
        if args is not None:
            sys.exit(supervise.run_supervised(argv, args))
    code = main()
    gc.collect()
    gc.freeze()
    sys.exit(code)
