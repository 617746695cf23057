"""`memjudge doctor`: can the embedded judge run here, and if not, what fixes it (issue 54).

It reports the llama.cpp build that is installed (llama-cpp-python's version, its libraries'
sha256, the CPU features it was compiled to use) beside the CPU's own, whether the packaged
weights are installed and verified, whether the self-test of judges/local_runtime passes (a child
process loads the model and evaluates a prompt: with weight repacking, and without it if that
crashes), and whether llama.cpp's server can be started. Each problem comes with its fix. The
result is a plain dict (`--json` prints it); `ok` is false when the embedded judge cannot run.
"""

from __future__ import annotations

import importlib.util
import json
import platform
from typing import Any

from memjudge.judges.local_runtime import (
    NAMED_FLAGS,
    PORTABLE_CMAKE_ARGS,
    RECIPE_CMAKE_ARGS,
    REPACK_ENV,
    cpu_flags,
    cpu_model,
    llama_build,
    repack_decision,
)
from memjudge.judges.local_server import SERVER_MODULES
from memjudge.judges.local_weights import (
    DEFAULT_MODEL,
    INSTALL_HINT,
    PACKAGED,
    assembled_path,
    packaged_model_path,
    usable_cores,
)

__all__ = ["FEATURES", "doctor", "doctor_text"]

# CPU flag (Linux's name) -> the feature llama.cpp's CPU backend names in its system info when a
# build uses it (ggml-cpu.cpp, ggml_backend_cpu_get_features).
FEATURES = {"ssse3": "SSSE3", "avx": "AVX", "avx_vnni": "AVX_VNNI", "avx2": "AVX2", "f16c": "F16C", "fma": "FMA",
            "bmi2": "BMI2", "avx512f": "AVX512", "avx512vbmi": "AVX512_VBMI", "avx512_vnni": "AVX512_VNNI",
            "avx512_bf16": "AVX512_BF16", "amx_int8": "AMX_INT8"}
REBUILD = (f'CMAKE_ARGS="{RECIPE_CMAKE_ARGS}" pip install --no-cache-dir --force-reinstall --no-deps '
           '"llama-cpp-python==VERSION" (the recipe of install/llama-cpp.env; without --no-cache-dir pip reinstalls the '
           'wheel it built before: its cache is keyed by the source, not by CMAKE_ARGS)')


def doctor(*, self_test: bool = True, rerun: bool = False) -> dict[str, Any]:
    """The report (module docstring). `self_test`: run the self-test if no outcome is remembered
    for this build, CPU and model (a few seconds; it assembles and verifies the packaged weights
    first if they never were, about half a minute); `rerun`: run it even if one is."""
    from memjudge import __version__

    problems: list[dict[str, str]] = []
    flags = cpu_flags()
    report: dict[str, Any] = {
        "memjudge_version": __version__, "python": platform.python_version(), "platform": platform.platform(),
        "cpu": {"model": cpu_model(), "cores": usable_cores(), "flags": [f for f in NAMED_FLAGS if f in flags]},
    }
    report["llama_cpp"] = build = _build(flags, problems)
    report["weights"] = weights = _weights(problems)
    report["self_test"] = None
    if build["installed"] and self_test and weights["installed"]:
        report["self_test"] = _self_test(rerun, build, problems)
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    report["server"] = {"installed": build["installed"] and not missing, "missing": missing,
                        "command": "memjudge llama-server --chat_format chatml --host 127.0.0.1 --port 8000"}
    report["problems"] = problems
    report["ok"] = not any(p["severity"] == "error" for p in problems)
    return report


def _build(flags: frozenset[str], problems: list[dict[str, str]]) -> dict[str, Any]:
    if importlib.util.find_spec("llama_cpp") is None:
        problems.append({"severity": "error", "what": "llama-cpp-python is not installed",
                         "fix": f"{INSTALL_HINT}, with CMAKE_ARGS=\"{RECIPE_CMAKE_ARGS}\" (install/llama-cpp.env)"})
        return {"installed": False}
    try:
        b = llama_build()
    except Exception as e:  # noqa: BLE001 - a library that does not load is what doctor is for
        problems.append({"severity": "error", "what": f"llama-cpp-python does not load: {type(e).__name__}: {e}",
                         "fix": REBUILD.replace("VERSION", "0.3.36")})
        return {"installed": True, "loads": False}
    used = set(b.features)
    unused = [FEATURES[f] for f in FEATURES if f in flags and FEATURES[f] not in used]
    foreign = [FEATURES[f] for f in FEATURES if FEATURES[f] in used and flags and f not in flags]
    out = {"installed": True, "loads": True, **b.as_dict(), "cpu_features_unused": unused,
           "features_cpu_lacks": foreign}
    fix = REBUILD.replace("VERSION", b.version)
    if foreign:
        problems.append({"severity": "error", "what": f"this llama.cpp build uses {', '.join(foreign)}, which this CPU "
                                                      "lacks (a build made on another machine)", "fix": fix})
    if unused:
        problems.append({"severity": "note", "what": f"this llama.cpp build does not use {', '.join(unused)} of this "
                                                     "CPU (built with portable flags, or a wheel from pip's cache): a "
                                                     "native build may be faster", "fix": fix})
    return out


def _weights(problems: list[dict[str, str]]) -> dict[str, Any]:
    w = PACKAGED[DEFAULT_MODEL]
    have = [p for p in w.packages if importlib.util.find_spec(p) is not None]
    path = assembled_path(w)
    marker = path.with_name(path.name + ".verified.json")
    verified = False
    if path.is_file():
        try:
            rec = json.loads(marker.read_text(encoding="utf-8"))
            st = path.stat()
            verified = rec == {"sha256": w.sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
        except (OSError, ValueError):
            pass
    out = {"model": f"local:{DEFAULT_MODEL}", "packages": f"{len(have)} of {len(w.packages)}",
           "installed": len(have) == len(w.packages) or verified, "file": str(path) if path.is_file() else None,
           "verified": verified, "sha256": w.sha256, "size": w.size}
    if not out["installed"]:
        problems.append({"severity": "error", "what": f"the weights of local:{DEFAULT_MODEL} are not installed "
                                                      f"({out['packages']} packages)", "fix": INSTALL_HINT})
    return out


def _self_test(rerun: bool, build: dict[str, Any], problems: list[dict[str, str]]) -> dict[str, Any] | None:
    if not build.get("loads"):
        return None
    from memjudge.errors import MemjudgeError

    try:
        model = packaged_model_path(DEFAULT_MODEL)  # joined and verified on first use
        decision = repack_decision(model, rerun=rerun)
    except MemjudgeError as e:
        problems.append({"severity": "error", "what": str(e), "fix": f"reinstall the weights: {INSTALL_HINT}"})
        return None
    out = decision.as_dict()
    fix = REBUILD.replace("VERSION", build["version"])
    if decision.reason == "self-test failed":
        problems.append({"severity": "error", "what": "the model crashes llama.cpp on this CPU with and without weight "
                                                      "repacking", "fix": _portable(fix)})
    elif decision.fallback:
        problems.append({"severity": "note", "what": "llama.cpp crashed with weight repacking (extra buffer types) "
                                                     "on this CPU; the embedded judge and `memjudge llama-server` load "
                                                     "without it (correct, somewhat slower)",
                         "fix": "nothing to do; or a build without the crashing kernels: " + _portable(fix)})
    elif decision.reason == "self-test inconclusive":
        t = decision.tests[-1] if decision.tests else {}
        problems.append({"severity": "warning", "what": f"the self-test did not finish ({t.get('outcome')}: "
                                                        f"{t.get('error', '')})".rstrip(": )") + ")",
                         "fix": "run `memjudge doctor --rerun` on a quieter machine"})
    return out


def _portable(fix: str) -> str:
    """The rebuild for a baseline x86-64 CPU (AVX2) instead of this one."""
    return fix.replace(f'CMAKE_ARGS="{RECIPE_CMAKE_ARGS}"', f'CMAKE_ARGS="{PORTABLE_CMAKE_ARGS}"', 1)


def doctor_text(report: dict[str, Any]) -> str:
    """The report as lines for a terminal."""
    cpu = report["cpu"]
    lines = [f"memjudge {report['memjudge_version']}, Python {report['python']}, {report['platform']}",
             f"CPU: {cpu['model']} ({cpu['cores']} cores for this process); features: {' '.join(cpu['flags']) or '-'}"]
    b = report["llama_cpp"]
    if b.get("loads"):
        lines.append(f"llama.cpp: llama-cpp-python {b['version']} ({b['library']}, sha256 {b['sha256'][:12]}), built "
                     f"for {' '.join(b['features'])}")
    w = report["weights"]
    state = "verified" if w["verified"] else ("installed, not yet joined" if w["installed"] else "missing")
    lines.append(f"weights: {w['model']}: {w['packages']} packages, {state}" + (f" ({w['file']})" if w["file"] else ""))
    t = report["self_test"]
    if t is not None:
        runs = ", ".join(f"{'with' if x['extra_buffer_types'] else 'without'} repacking: {x.get('signal') or x['outcome']}"
                         f" in {x.get('seconds', 0):.1f} s" for x in t["tests"])
        how = "remembered" if t["cached"] else ("set by " + REPACK_ENV if not t["tests"] else "run now")
        lines.append(f"self-test ({how}): {t['reason']}; loads {'with' if t['extra_buffer_types'] else 'without'} "
                     f"weight repacking" + (f" ({runs})" if runs else ""))
    s = report["server"]
    lines.append("server: " + (f"installed: {s['command']}" if s["installed"] else f"missing {', '.join(s['missing'])}"))
    for p in report["problems"]:
        lines.append(f"{p['severity']}: {p['what']}; fix: {p['fix']}")
    lines.append("ok: the embedded judge runs here" if report["ok"] else "not ok: the embedded judge cannot run here")
    return "\n".join(lines)
