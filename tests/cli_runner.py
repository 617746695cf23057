"""`python -m memjudge ARGS` as a child of a warm forkserver (conftest.run_cli).

A fresh interpreter spends one to several seconds importing pandas, pyarrow, scipy and the SDKs
before a command does anything, and the suite runs well over a hundred commands. Each child here
is still a process of its own, forked from a server that imported those libraries once: its
environment, working folder, argv, stdout and stderr (file descriptors 1 and 2) and exit status
are the command's own, an uncaught exception prints its traceback and exits 1, and nothing a
test patched in its own process reaches it. What it cannot show is interpreter start-up itself
(PYTHON* variables, what `import memjudge` costs): run_cli sends such commands to a real
subprocess (`fresh=True`, or an env that sets a PYTHON* variable).

Python 3.11's forkserver does not get the tests folder on its path, so this module itself is
imported by each child (a few milliseconds).
"""

from __future__ import annotations

import os
import runpy
import sys

# Imported once by the forkserver: the heavy libraries a command loads. memjudge itself is left
# to each child (its modules are cheap next to these, and a child then imports the source as it
# is on disk now). The kill loop (kill_target) shares this server.
PRELOAD = ["numpy", "pandas", "pyarrow", "pyarrow.parquet", "scipy.stats", "diskcache", "pydantic", "jinja2", "rich",
           "openai", "httpx", "tenacity", "matplotlib"]


def run(argv: list[str], env: dict[str, str], cwd: str | None, out: str, err: str, nice: int | None = None) -> None:
    """The body of `python -m memjudge ARGV` with this environment and working folder; its stdout
    and stderr go to the files `out` and `err`, its exit status is the process's. `nice`: the
    caller's niceness, which a child of the forkserver would not inherit (conftest.pytest_runtest_setup)."""
    if nice is not None:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except PermissionError:  # lower than the forkserver's needs CAP_SYS_NICE: run at the forkserver's
            pass
    os.environ.clear()
    os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    for fd, path in ((1, out), (2, err)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.argv = ["-m", *argv]  # as `python -m` sets it before running the module
    code: int | str | None = 0
    try:
        runpy.run_module("memjudge", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        code = e.code
    except BaseException:  # what the interpreter does with an uncaught exception
        import traceback

        traceback.print_exc()
        code = 1
    if isinstance(code, str):  # SystemExit("message"): printed, status 1
        print(code, file=sys.stderr)
        code = 1
    try:
        sys.stdout.flush()
    finally:
        sys.stderr.flush()
    sys.exit(code or 0)
