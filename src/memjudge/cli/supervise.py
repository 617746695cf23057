"""A command that runs llama.cpp in its own process runs as a watched child, so that a native crash
ends it with one line, never with a bare "Illegal instruction" from the shell (issue 54).

`memjudge demo`, `memjudge score --judge local:...` and `memjudge llama-server` load llama.cpp into
the Python process: a fault in its native code (an instruction the CPU does not run, a bad memory
access) kills the process with a signal before Python can say a word. `run()` therefore starts
such a command as `python -m memjudge ARGS` and waits. The child writes Python's stack to a pipe
if a fatal signal arrives (faulthandler); when the child dies of a signal, the parent prints one
line: what failed (the embedded judge's model, in llama.cpp, when llama_cpp's code is on the
crashing thread's stack), what the run kept (its journal's answers: the same command resumes from
them), and what to do; the stack goes to a file in the cache folder. Its exit status is the
shell's, 128 + the signal's number. Ctrl-C reaches the child from the terminal as before.

Every other command runs in one process, as before: no interpreter is started twice for them.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

__all__ = ["SUPERVISED_ENV", "child_setup", "crash_line", "supervised_command", "run_supervised"]

SUPERVISED_ENV = "MEMJUDGE_SUPERVISED"  # set in the child: the pipe's descriptor for faulthandler
_STACK_FILE: IO[str] | None = None


def supervised_command(argv: list[str]) -> Any:
    """The parsed arguments when `argv` is a command to watch, else None (also in the child, with
    MEMJUDGE_NO_SUPERVISE=1, and for arguments that do not parse: main() reports those)."""
    if os.environ.get(SUPERVISED_ENV) is not None or os.environ.get("MEMJUDGE_NO_SUPERVISE"):
        return None
    if not {"demo", "score", "llama-server"} & set(argv):
        return None
    import contextlib
    import io

    from memjudge.cli.parser import parse_args
    from memjudge.errors import MemjudgeError

    try:  # --help or --version print: main() prints them, once
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            args = parse_args(argv)
    except (MemjudgeError, SystemExit):
        return None
    if args.command == "score":
        return args if str(args.judge).startswith("local:") and not args.dry_run else None
    return args if args.command in ("demo", "llama-server") else None


def child_setup() -> bool:
    """In the watched child (True): Python's stack to the parent's pipe on a fatal signal. The
    variable is removed, so the child's own children are not taken for watched ones."""
    global _STACK_FILE
    fd = os.environ.pop(SUPERVISED_ENV, None)
    if fd is None:
        return False
    try:
        _STACK_FILE = os.fdopen(int(fd), "w")
        faulthandler.enable(file=_STACK_FILE, all_threads=True)
    except (ValueError, OSError):
        pass
    _die_with_parent()
    return True


def _die_with_parent() -> None:
    """A watcher killed outright (SIGKILL: a test's timeout, a session's end) must not leave its
    command running a model: Linux's parent-death signal ends the child too."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGTERM), 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:  # the watcher was already gone
        os.kill(os.getpid(), signal.SIGTERM)


def run_supervised(argv: list[str], args: Any) -> int:
    """Run `python -m memjudge ARGV` as a child and return its exit status; on death by a signal,
    print crash_line() first."""
    read_fd, write_fd = os.pipe()
    env = {**os.environ, SUPERVISED_ENV: str(write_fd)}
    started = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "memjudge", *argv], pass_fds=(write_fd,), env=env)
    os.close(write_fd)
    stack: list[bytes] = []
    reader = threading.Thread(target=lambda: stack.append(_read_all(read_fd)), daemon=True)
    reader.start()
    forwarded: list[int] = []

    def forward(sig, _frame):
        forwarded.append(sig)
        proc.send_signal(sig)

    # Ctrl-C reaches the child from the terminal (one process group); a kill of the parent is passed on.
    previous = {s: signal.signal(s, h) for s, h in ((signal.SIGINT, signal.SIG_IGN), (signal.SIGTERM, forward),
                                                     (signal.SIGHUP, forward))}
    try:
        code = proc.wait()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    reader.join(timeout=10)
    if code >= 0:
        return code
    sig = -code
    if not forwarded and sig not in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        text = b"".join(stack).decode("utf-8", "replace")
        print(crash_line(args, sig, text, _save_stack(args.command, text, started)), file=sys.stderr, flush=True)
    return 128 + sig


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as f:
        return f.read()


def _save_stack(command: str, text: str, started: float) -> Path | None:
    if not text.strip():
        return None
    from memjudge.judges.local_weights import cache_root

    try:
        folder = cache_root() / "crashes"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime(started))}-{command}-{os.getpid()}.txt"
        path.write_text(text, encoding="utf-8")
        return path
    except OSError:
        return None


def in_llama_cpp(stack: str) -> bool:
    """Whether llama_cpp's Python code is on the crashing thread's stack (faulthandler marks it
    "Current thread"; its frames run until the next blank line)."""
    at = stack.find("Current thread")
    block = stack[at:].split("\n\n", 1)[0] if at >= 0 else ""
    return f"{os.sep}llama_cpp{os.sep}" in block


def crash_line(args: Any, sig: int, stack: str, stack_file: Path | None) -> str:
    """One line: what failed, what the run kept, what to do."""
    name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else f"signal {sig}"
    what = f"{name}, {(signal.strsignal(sig) or '').lower()}".rstrip(", ")
    command = args.command
    if in_llama_cpp(stack):
        model = "the llama.cpp server's model" if args.command == "llama-server" else "the embedded judge's model"
        failed = f"{command} stopped: {model} crashed in llama.cpp ({what})"
        todo = ("run `memjudge doctor` (it tests this llama.cpp build on this CPU and says the fix); "
                "MEMJUDGE_LLAMA_REPACK=off loads the model without weight repacking")
    elif sig == signal.SIGKILL:
        failed = f"{command} was killed ({what}: the system's out-of-memory killer, or another process)"
        todo = "free memory (the embedded model needs about 1.5 GB) and rerun"
    else:
        failed = f"{command} stopped: a crash in native code outside llama.cpp ({what})"
        todo = "rerun; if it happens again, report it with the stack"
    stack_note = f"; Python stack: {stack_file}" if stack_file else ""
    return f"memjudge: {failed}; kept: {_kept(args)}; next: {todo}{stack_note}"


def _kept(args: Any) -> str:
    """What the run left that a rerun uses: the journals' answers (one line each)."""
    if args.command == "llama-server":
        return "nothing to keep (the server holds no run)"
    if args.command == "demo":
        out = Path(args.out)
        journals = sorted(out.rglob("journal.jsonl")) if out.is_dir() else []
        n = sum(_lines(j) for j in journals)
        return (f"{n} model answers in the journals under {out} and the steps written before the crash: the same "
                "command resumes from them")
    out = _score_out(args)
    journal = out / "journal.jsonl"
    n = _lines(journal)
    if not n:
        return f"no answers yet ({out} has none)"
    return f"{n} answers in {journal} (also in the answer cache): the same command resumes from them"


def _score_out(args: Any) -> Path:
    if args.out:
        return Path(args.out)
    from memjudge.scoring.plan import default_out_dir

    rubric = str(args.rubric)
    try:
        from memjudge.judges.rubrics import load_rubric

        rubric = load_rubric(rubric).name
    except Exception:  # noqa: BLE001 - the child reported a bad rubric itself; the name is only for the message
        pass
    return default_out_dir(str(args.judge), rubric)


def _lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0
