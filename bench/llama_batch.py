"""How the embedded judge's speed depends on how many tokens llama.cpp evaluates at once.

    python bench/llama_batch.py [--threads 2] [--repeats 2]

The question behind it (issue 37): would the embedded judge, and the suite's model tests, get
faster if the short tails it evaluates after a shared prefix (a persona's assertions, the 5
candidates of a coverage fact: 16-48 tokens each, measured on the demo) were evaluated many at
once, as sequences of one llama.cpp batch? Such batching would change the scores (the attention
sums run over other KV cells), so it is worth a prompt-version bump and a re-calibration only if
the gain is large.

It measures the upper bound of that gain: tails of k tokens of a real source, each evaluated
after the same 1,024-token prefix (the KV cache cut back to the prefix each time), for k from 1
to 256. A batch of n sequences of k tokens does the same matrix products as one sequence of
n * k tokens, so the throughput at n * k is the most batching can reach. Printed: tokens per
second at each k and its ratio to the best, with the machine's load.

Measured 2026-12-04 (bench/results/llama_batch.txt): the throughput is flat from 16 tokens on
(40-55 tokens/s on 2 cores), so batching the tails would gain at most ~20% on them; only
single-token evaluations (a verdict word of several tokens) are half as fast. The model's time is
the number of tokens it evaluates.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from memjudge.judges.local import DEFAULT_MODEL, load_model, packaged_model_path  # noqa: E402
from memjudge.simulation import simulate  # noqa: E402

PREFIX = 1024
SIZES = (1, 4, 8, 16, 24, 32, 48, 64, 128, 256)
PER_SIZE = 256  # tokens evaluated per size and repeat (at least one tail)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None, help="llama.cpp threads (default: the judge's, every usable core)")
    ap.add_argument("--repeats", type=int, default=2)
    args = ap.parse_args()
    model = load_model(packaged_model_path(DEFAULT_MODEL), context="bench", n_ctx=4096, n_threads=args.threads)
    llm = model.llm
    # Real text: the paper preset's sources, as the judge reads them.
    text = "\n\n".join(simulate("paper", seed=0, personas=4).sources["source"])
    tokens = llm.tokenize(text.encode(), add_bos=False, special=False)
    if len(tokens) < PREFIX + max(SIZES):
        raise SystemExit(f"only {len(tokens)} tokens of source text")
    llm.n_tokens = 0
    llm.eval(tokens[:PREFIX])

    def tails(k: int) -> float:
        n = max(1, PER_SIZE // k)
        start = time.perf_counter()
        for i in range(n):
            llm.n_tokens = PREFIX  # back to the prefix: each tail is evaluated after it, as the judge's are
            at = PREFIX + (i * k) % (len(tokens) - PREFIX - k)
            llm.eval(tokens[at:at + k])
        return n * k / (time.perf_counter() - start)

    tails(16)  # warm up
    load = os.getloadavg()
    rate = {k: max(tails(k) for _ in range(args.repeats)) for k in SIZES}
    best = max(rate.values())
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {load[0]:.2f} -> {os.getloadavg()[0]:.2f}, "
          f"{model.n_threads} threads, {DEFAULT_MODEL}, tails after a {PREFIX}-token prefix, best of {args.repeats}")
    print(f"{'tokens at once':>14} {'tokens/s':>9} {'of best':>8}")
    for k, r in rate.items():
        print(f"{k:>14} {r:>9.1f} {r / best:>8.2f}")


if __name__ == "__main__":
    main()
