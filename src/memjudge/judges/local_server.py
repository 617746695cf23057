"""`memjudge llama-server`: llama-cpp-python's OpenAI-compatible server (`python -m llama_cpp.server`)
started the way the embedded judge loads its model (issue 54).

The arguments are the server's own (`--host`, `--port`, `--n_ctx`, `--chat_format`, ...). Added:
the packaged model when no `--model` (or `--config_file`) is given; OMP_WAIT_POLICY=PASSIVE unless
set (its OpenMP threads then sleep between evaluations instead of spinning); and the self-test of
judges/local_runtime: where llama.cpp's weight repacking crashes this build on this CPU, the server
loads the model without it, as the judge does, and says so in one line. `llama_cpp.server` itself
has no setting for that (its model settings do not expose `use_extra_bufts`).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from memjudge.errors import UsageError
from memjudge.judges.local_runtime import extra_buffer_types, use_repack
from memjudge.judges.local_weights import DEFAULT_MODEL, import_llama_cpp, packaged_model_path

__all__ = ["SERVER_MODULES", "serve"]

SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context")


def _model_of(args: list[str]) -> str | None:
    for i, a in enumerate(args):
        if a == "--model" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith("--model="):
            return a.split("=", 1)[1]
    return None


def serve(args: list[str]) -> int:
    """Run the server with `args` until it stops (Ctrl-C); its exit status."""
    missing = [m for m in SERVER_MODULES if importlib.util.find_spec(m) is None]
    if importlib.util.find_spec("llama_cpp") is None or missing:
        raise UsageError(f"llama-server needs llama-cpp-python[server] (missing {', '.join(missing) or 'llama_cpp'}): "
                         'pip install "memjudge[local]"')
    args = list(args)
    model = _model_of(args)
    if model is None and not any(a == "--config_file" or a.startswith("--config_file=") for a in args):
        model = str(packaged_model_path(DEFAULT_MODEL))
        args = ["--model", model, *args]
    repack = True
    if model is not None:
        if not Path(model).is_file():
            raise UsageError(f"llama-server: no such model file {model}")
        repack = use_repack(Path(model), Path(model).name).extra_buffer_types
    import_llama_cpp()  # OMP_WAIT_POLICY before libgomp is loaded
    from llama_cpp.server.__main__ import main

    sys.argv = ["memjudge llama-server", *args]
    # The server builds its Llama() inside main(): the parameters' default holds while it runs.
    with extra_buffer_types(repack):
        try:
            main()
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return 0
