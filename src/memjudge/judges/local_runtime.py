"""llama.cpp as this machine runs it: the installed build, the CPU, and the self-test that decides
whether the embedded judge may load its weights into llama.cpp's extra buffer types.

Why (issue 54): llama-cpp-python is compiled on install, by default for the CPU it runs on
(GGML_NATIVE). On a CPU that advertises AMX, such a build repacks the weights at load time for its
AMX kernels (an "extra buffer type"), and where the CPU or its VM does not really run AMX the
first evaluation dies of SIGILL, taking the process with it. The same build decodes correctly with
the model's `use_extra_bufts = False` (no repacking), a field `Llama()` does not expose.

So the first time a build meets a CPU and a model, a child process loads the model as the judge
will and evaluates a prompt of `PROBE_TOKENS` tokens, then one more token (`selftest`). A single
token would not do: llama.cpp's AMX matrix kernel uses its tiles only for two or more rows at once
(ggml-cpu/amx/mmq.cpp: one row goes to an AVX-512 VNNI kernel), and the judge evaluates prompts in
chunks of 64. If the child dies of a signal, a second child tries the same without extra buffer
types; if that one passes, the judge loads that way from then on. The outcome is remembered in
the cache folder (`$MEMJUDGE_CACHE_DIR/selftest/`), keyed by the build (llama-cpp-python's version
and the sha256 of its libraries), the CPU's flags and the model file, so a rebuild, another CPU or
another model is tested again, and nothing else is. MEMJUDGE_LLAMA_REPACK=on|off skips the test.

Standard library only until a model is loaded (the child imports llama_cpp, the parent only to
hash and describe the build), so the command line can describe a broken install.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memjudge._util.files import write_json
from memjudge.errors import MemjudgeError, UsageError
from memjudge.judges.local_weights import cache_root, import_llama_cpp, usable_cores

__all__ = [
    "PORTABLE_CMAKE_ARGS", "RECIPE_CMAKE_ARGS", "REPACK_ENV", "Build", "RepackDecision", "cpu_flags", "describe", "llama_build", "new_llama",
    "repack_decision", "selftest", "use_repack",
]

SELFTEST_VERSION = 1
# A judge's chunk (local.EVAL_CHUNK): long enough that AMX takes its tile path (see the docstring).
PROBE_TOKENS = 64
SELFTEST_TIMEOUT_S = 600.0
REPACK_ENV = "MEMJUDGE_LLAMA_REPACK"  # auto (default) | on | off
# The project's recipe (install/llama-cpp.env, which the README's install and .ci/run source; a
# test keeps the two equal): llama.cpp for the CPU it is built on, without its image library.
RECIPE_CMAKE_ARGS = "-DLLAVA_BUILD=OFF"
# The flags of a build for any x86-64 CPU with AVX2 (Haswell, 2013, and later): what `doctor`
# tells a user whose build crashes even without repacking.
PORTABLE_CMAKE_ARGS = "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
# CPU flags worth naming (Linux /proc/cpuinfo spelling): what a llama.cpp CPU build may use.
NAMED_FLAGS = ("avx", "avx2", "fma", "f16c", "bmi2", "avx_vnni", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
               "avx512_bf16", "amx_tile", "amx_int8", "amx_bf16")


# ---------------------------------------------------------------------------------------
# the build and the CPU


@dataclass(frozen=True)
class Build:
    """The installed llama-cpp-python: version, library folder, sha256 over its libraries, and the
    CPU features it was compiled to use (llama.cpp's system info: AVX2, AVX512, AMX_INT8, ...)."""

    version: str
    library: str
    sha256: str
    features: tuple[str, ...]
    system_info: str

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "features": list(self.features)}


_BUILD: Build | None = None


def llama_build() -> Build:
    """The installed build (imports llama_cpp once; hashes its libraries, ~20 ms)."""
    global _BUILD
    if _BUILD is None:
        llama_cpp = import_llama_cpp()
        lib = Path(llama_cpp.__file__).parent / "lib"
        h = hashlib.sha256(str(getattr(llama_cpp, "__version__", "?")).encode())
        for f in sorted(p for p in lib.glob("*") if p.is_file() and p.suffix in (".so", ".dylib", ".dll")):
            h.update(f.name.encode() + b"\0" + f.read_bytes())
        info = llama_cpp.llama_print_system_info().decode("utf-8", "replace")
        # "CPU : SSE3 = 1 | AVX2 = 1 | ... | REPACK = 1 |": the names set to 1
        pairs = (part.partition("=") for part in info.split("|"))
        feats = tuple(k.split(":")[-1].strip() for k, _, v in pairs if v.strip() == "1")
        _BUILD = Build(str(getattr(llama_cpp, "__version__", "?")), str(lib), h.hexdigest(), feats, info.strip(" |"))
    return _BUILD


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags as Linux names them (first `flags` line of /proc/cpuinfo); empty
    elsewhere (the key then holds the platform's processor name only)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("flags"):
                return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


# ---------------------------------------------------------------------------------------
# the self-test


@dataclass
class RepackDecision:
    """Whether the model is loaded with llama.cpp's extra buffer types (weight repacking), and why."""

    extra_buffer_types: bool
    reason: str  # "self-test passed", "fallback", "MEMJUDGE_LLAMA_REPACK=off", "self-test inconclusive", ...
    tests: list[dict] = field(default_factory=list)  # each child: extra_buffer_types, outcome, signal, seconds
    key: str = ""
    record: str | None = None  # the remembered outcome's file
    cached: bool = False  # read from the record (no child ran in this process)

    @property
    def fallback(self) -> bool:
        """The build crashed with extra buffer types and runs without them."""
        return self.reason == "fallback"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"fallback": self.fallback}

    def line(self, model: str) -> str:
        """The one line that says a fallback is in force."""
        crash = next((t for t in self.tests if t.get("signal")), {})
        return (f"memjudge: llama.cpp crashed ({crash.get('signal', 'a signal')}) in a test load of {model} with weight "
                "repacking (extra buffer types; on a CPU that advertises AMX its kernels may not run), so the embedded "
                "judge loads it without repacking on this build and CPU (correct, somewhat slower); "
                "`memjudge doctor` says more")


def selftest_key(model: Path) -> str:
    """Build x CPU x model x test version. The model by name, size and modification time: a hard
    link or a copy of the same file shares them, a re-assembled or edited file does not."""
    b = llama_build()
    st = Path(model).stat()
    material = [SELFTEST_VERSION, b.version, b.sha256, sorted(cpu_flags()) or cpu_model(), platform.machine(),
                Path(model).name, st.st_size, st.st_mtime_ns, PROBE_TOKENS]
    return hashlib.sha256(json.dumps(material).encode()).hexdigest()


def _record_path(key: str, cache_dir: Path | None = None) -> Path:
    return Path(cache_dir or cache_root()) / "selftest" / f"{key[:40]}.json"


def selftest(model: Path, extra_buffer_types: bool, *, timeout_s: float = SELFTEST_TIMEOUT_S) -> dict:
    """Load `model` in a child process and evaluate PROBE_TOKENS tokens, then one: its outcome
    ("ok", "signal" with the signal's name, "error" with the child's last line, "timeout")."""
    cmd = [sys.executable, "-m", "memjudge.judges.local_runtime", str(model),
           "--extra-buffer-types", "on" if extra_buffer_types else "off"]
    env = {**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")}
    t = time.perf_counter()
    out: dict[str, Any] = {"extra_buffer_types": extra_buffer_types}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return out | {"outcome": "timeout", "seconds": round(time.perf_counter() - t, 2)}
    out["seconds"] = round(time.perf_counter() - t, 2)
    if proc.returncode < 0:
        return out | {"outcome": "signal", "signal": signal_name(-proc.returncode)}
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        return out | {"outcome": "error", "error": last[:300]}
    return out | {"outcome": "ok"}


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


_DECISIONS: dict[str, RepackDecision] = {}
_DECIDE_LOCK = threading.Lock()


def repack_decision(model: Path, *, cache_dir: Path | None = None, rerun: bool = False) -> RepackDecision:
    """How `model` is loaded on this build and CPU: MEMJUDGE_LLAMA_REPACK if set to on/off, else
    the remembered self-test, else the self-test now (a few seconds: a model load in a child, two
    when the first crashes). `rerun`: test again even if an outcome is remembered."""
    forced = os.environ.get(REPACK_ENV, "auto").strip().lower()
    if forced in ("on", "off"):
        return RepackDecision(forced == "on", f"{REPACK_ENV}={forced}")
    if forced not in ("", "auto"):
        raise UsageError(f"{REPACK_ENV} must be auto, on or off, got {forced!r}")
    key = selftest_key(model)
    path = _record_path(key, cache_dir)
    with _DECIDE_LOCK:
        if not rerun and key in _DECISIONS:
            return _DECISIONS[key]
        if not rerun:
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
                decision = RepackDecision(bool(rec["extra_buffer_types"]), str(rec["reason"]), list(rec["tests"]), key,
                                          str(path), cached=True)
                _DECISIONS[key] = decision
                return decision
            except (OSError, ValueError, KeyError, TypeError):
                pass
        decision = _decide(model, key, path)
        _DECISIONS[key] = decision
        return decision


def _decide(model: Path, key: str, path: Path) -> RepackDecision:
    first = selftest(model, True)
    tests = [first]
    if first["outcome"] == "ok":
        decision = RepackDecision(True, "self-test passed", tests, key)
    elif first["outcome"] == "signal":
        second = selftest(model, False)
        tests.append(second)
        if second["outcome"] != "ok":
            decision = RepackDecision(False, "self-test failed", tests, key)
        else:
            decision = RepackDecision(False, "fallback", tests, key)
    else:
        # Not a crash (a timeout on a busy machine, an unreadable file): nothing is learnt about
        # the build, so nothing is remembered; the load in this process will say what is wrong.
        return RepackDecision(True, "self-test inconclusive", tests, key)
    decision.record = str(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"key": key, "extra_buffer_types": decision.extra_buffer_types, "reason": decision.reason,
                      "tests": tests, "build": llama_build().as_dict(), "cpu": cpu_model(),
                      "model": str(model), "tested_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}, indent=2)
    return decision


def use_repack(model: Path, name: str) -> RepackDecision:
    """The decision for loading `model` (named `name` in messages): a build that crashes with and
    without repacking is a one-line error with the fix; a fallback says so once per process."""
    decision = repack_decision(model)
    if decision.reason == "self-test failed":
        crash = ", ".join(f"{t['outcome']} {t.get('signal') or t.get('error') or ''}".strip() for t in decision.tests)
        raise MemjudgeError(
            f"{name}: llama.cpp crashes on this CPU loading {Path(model).name}, with and without weight repacking "
            f"({crash}): rebuild llama-cpp-python for a baseline x86-64 CPU: CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" "
            "pip install --no-cache-dir --force-reinstall --no-deps llama-cpp-python (docs/local-judge.md)")
    if decision.fallback and decision.key not in _SAID:
        _SAID.add(decision.key)
        print(decision.line(name), file=sys.stderr, flush=True)
    return decision


_SAID: set[str] = set()
_PARAMS_LOCK = threading.Lock()


@contextlib.contextmanager
def extra_buffer_types(on: bool):
    """While open, llama-cpp-python's `Llama()` builds its model parameters with
    `use_extra_bufts = on` (it reads llama_model_default_params(), which it does not let a caller
    change); the server's model loader goes through the same call."""
    if on:
        yield
        return
    lib = import_llama_cpp().llama_cpp
    with _PARAMS_LOCK:
        original = lib.llama_model_default_params

        def params():
            p = original()
            p.use_extra_bufts = False
            return p

        lib.llama_model_default_params = params
        try:
            yield
        finally:
            lib.llama_model_default_params = original


def describe(decision: RepackDecision) -> dict[str, Any]:
    """What a run's config.json records of llama.cpp: the build and how the weights were loaded."""
    b = llama_build()
    return {"version": b.version, "library_sha256": b.sha256, "features": list(b.features),
            "extra_buffer_types": decision.extra_buffer_types, "repack": decision.reason,
            "self_test": decision.tests or None}


def new_llama(model: Path, name: str, llama_cpp: Any = None, **kwargs):
    """`llama_cpp.Llama(model_path=model, **kwargs)` loaded as the self-test decided, and the
    decision. `llama_cpp`: the module (default: import_llama_cpp())."""
    decision = use_repack(model, name)
    llama_cpp = llama_cpp or import_llama_cpp()
    with extra_buffer_types(decision.extra_buffer_types):
        llm = llama_cpp.Llama(model_path=str(model), **kwargs)
    params = getattr(llm, "model_params", None)
    if params is not None and bool(params.use_extra_bufts) != decision.extra_buffer_types:
        raise MemjudgeError(f"{name}: llama-cpp-python {llama_build().version} did not take use_extra_bufts = "
                            f"{decision.extra_buffer_types} (its Llama() builds its parameters another way)")
    return llm, decision


# ---------------------------------------------------------------------------------------
# the child


def _probe(model: str, extra: bool) -> None:
    """The self-test's child: load as the judge does, evaluate PROBE_TOKENS tokens at once, then one."""
    import math

    llama_cpp = import_llama_cpp()
    threads = usable_cores()
    with extra_buffer_types(extra):
        llm = llama_cpp.Llama(model_path=model, n_ctx=512, n_batch=512, n_threads=threads, n_threads_batch=threads,
                              logits_all=False, verbose=False)
    text = " ".join(["The writer lives in Zurich and values honesty over career."] * 12)
    tokens = llm.tokenize(text.encode(), add_bos=False, special=False)[:PROBE_TOKENS]
    if len(tokens) < PROBE_TOKENS:
        raise SystemExit(f"only {len(tokens)} probe tokens")
    llm.eval(tokens)
    llm.eval([tokens[0]])
    n_vocab = llm.n_vocab()
    logits = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
    if not all(math.isfinite(logits[i]) for i in range(0, n_vocab, max(1, n_vocab // 997))):
        raise SystemExit("non-finite logits")
    print(json.dumps({"ok": True, "tokens": len(tokens) + 1, "use_extra_bufts": bool(llm.model_params.use_extra_bufts)}))


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description="memjudge's llama.cpp self-test (a child process)")
    ap.add_argument("model")
    ap.add_argument("--extra-buffer-types", choices=["on", "off"], default="on")
    a = ap.parse_args()
    _probe(a.model, a.extra_buffer_types == "on")
