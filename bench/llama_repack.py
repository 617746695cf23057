"""What llama.cpp's weight repacking (extra buffer types) is worth to the embedded judge (issue 54).

    python bench/llama_repack.py [--threads 2] [--repeats 3]

The embedded judge loads its model with repacking wherever the self-test of
judges/local_runtime passes, and without it where repacking crashes (AMX under some VMs). The
other choice would have been never to repack. This measures what that would cost on the
installed build: the packaged model loaded twice in one process, with and without extra buffer
types, each timed on what the judge does, in turns (so both see the same load): prompt tokens in
the judge's chunks of 64 after a 512-token prefix, and single tokens (a verdict word's). Printed:
tokens per second, best of the repeats, and the ratio without/with, with the build's features
and the machine's load. To compare builds, run it under each (PYTHONPATH to another
llama_cpp first).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.judges.local_runtime import extra_buffer_types, llama_build  # noqa: E402
from memjudge.judges.local_weights import (  # noqa: E402
    DEFAULT_MODEL,
    import_llama_cpp,
    packaged_model_path,
    usable_cores,
)
from memjudge.simulation import simulate  # noqa: E402

PREFIX = 512
CHUNK = 64
CHUNKS = 4  # prompt tokens timed per repeat: CHUNKS * CHUNK
SINGLES = 16


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the judge's)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    llama_cpp = import_llama_cpp()
    threads = args.threads or usable_cores()
    path = packaged_model_path(DEFAULT_MODEL)
    models = {}
    for on in (True, False):
        t = time.perf_counter()
        with extra_buffer_types(on):
            models[on] = llama_cpp.Llama(model_path=str(path), n_ctx=2048, n_batch=512, n_threads=threads,
                                         n_threads_batch=threads, logits_all=False, verbose=False)
        assert bool(models[on].model_params.use_extra_bufts) == on
        print(f"loaded {'with' if on else 'without'} extra buffer types in {time.perf_counter() - t:.1f} s",
              flush=True)
    text = "\n\n".join(simulate("paper", seed=0, personas=4).sources["source"])
    tokens = models[True].tokenize(text.encode(), add_bos=False, special=False)
    need = PREFIX + CHUNKS * CHUNK + SINGLES
    if len(tokens) < need:
        raise SystemExit(f"only {len(tokens)} tokens of source text")
    for llm in models.values():
        llm.n_tokens = 0
        llm.eval(tokens[:PREFIX])

    def prompt_rate(llm) -> float:
        llm.n_tokens = PREFIX
        start = time.perf_counter()
        for i in range(CHUNKS):
            llm.eval(tokens[PREFIX + i * CHUNK: PREFIX + (i + 1) * CHUNK])
        return CHUNKS * CHUNK / (time.perf_counter() - start)

    def single_rate(llm) -> float:
        llm.n_tokens = PREFIX
        start = time.perf_counter()
        for i in range(SINGLES):
            llm.eval([tokens[PREFIX + i]])
        return SINGLES / (time.perf_counter() - start)

    load = os.getloadavg()
    rates: dict[tuple[bool, str], list[float]] = {}
    for _ in range(args.repeats):
        for on in (True, False):
            rates.setdefault((on, "prompt"), []).append(prompt_rate(models[on]))
            rates.setdefault((on, "single"), []).append(single_rate(models[on]))
    b = llama_build()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.2f} -> {os.getloadavg()[0]:.2f}, "
          f"{threads} threads, {DEFAULT_MODEL}, best of {args.repeats}")
    print(f"build: llama-cpp-python {b.version}, {' '.join(b.features)} (sha256 {b.sha256[:12]}, {b.library})")
    print(f"{'what':<34} {'with':>8} {'without':>8} {'without/with':>13}")
    for kind, label in (("prompt", f"prompt tokens/s ({CHUNK} at once)"), ("single", "single tokens/s")):
        on, off = max(rates[(True, kind)]), max(rates[(False, kind)])
        print(f"{label:<34} {on:>8.1f} {off:>8.1f} {off / on:>13.2f}")


if __name__ == "__main__":
    main()
