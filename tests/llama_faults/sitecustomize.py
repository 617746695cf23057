"""A llama.cpp build that crashes, for tests/test_llama_crash.py (issue 54): imported at the start
of every Python process whose PYTHONPATH holds this folder, it wraps llama-cpp-python's bindings.

MEMJUDGE_TEST_SIGILL=repack: a decode dies of SIGILL (a real signal, on the decoding thread) when
the model was loaded with extra buffer types, as a native build's AMX kernels do on a CPU that
advertises AMX but does not run it; loaded with `use_extra_bufts = False` it decodes normally.
MEMJUDGE_TEST_SIGILL=after:N: the process's decode number N + 1 dies of SIGILL however the model
was loaded: a crash that no self-test foresees (a self-test decodes twice).
"""

import os

_MODE = os.environ.get("MEMJUDGE_TEST_SIGILL", "")

if _MODE:
    import signal
    import threading

    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import llama_cpp.llama_cpp as _lib

    _state = {"extra": None, "decodes": 0}
    _load, _decode = _lib.llama_model_load_from_file, _lib.llama_decode

    def _load_from_file(path, params):
        _state["extra"] = bool(params.use_extra_bufts)
        return _load(path, params)

    def _decode_or_die(ctx, batch):
        _state["decodes"] += 1
        after = int(_MODE.split(":", 1)[1]) if _MODE.startswith("after:") else None
        if (_MODE == "repack" and _state["extra"]) or (after is not None and _state["decodes"] > after):
            signal.pthread_kill(threading.get_ident(), signal.SIGILL)
        return _decode(ctx, batch)

    _lib.llama_model_load_from_file = _load_from_file
    _lib.llama_decode = _decode_or_die
