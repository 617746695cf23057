"""What Anthropic's prompt caching saves per 1,000 candidates, at the list prices memjudge
ships as defaults (memjudge.judges.anthropic.PRICES, as read on PRICES_READ), by memjudge's own
dry-run estimate (`score --dry-run`: the calls' rendered prompts, each persona's marked source
written once and read by the persona's later calls; a source under the model's minimum
cacheable length is not marked).

    python bench/prompt_cache.py [--shared ../shared/data]

Corpora: the paper's simulated corpus (`memjudge simulate --preset paper`: 100 personas, 4,715
candidates); the same with every source five times as long (a longer memory, as chat
histories are); SynthPAI (300 users, 37,880 candidates), when the shared data folder is there.
Nothing is called: no key, no network.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from memjudge.judges import JudgeConfig
from memjudge.judges.anthropic import PRICES_READ
from memjudge.scoring.cost import estimate_tokens
from memjudge.scoring.engine import score_run

MODELS = ("claude-sonnet-4-5", "claude-haiku-4-5")


def corpora(work: Path, shared: Path | None) -> dict[str, tuple[pd.DataFrame, pd.DataFrame]]:
    sim = work / "sim"
    subprocess.run([sys.executable, "-m", "memjudge", "simulate", "--preset", "paper", "--out", str(sim)], check=True,
                   capture_output=True)
    cands = pd.read_json(sim / "candidates.jsonl", lines=True)
    srcs = pd.read_json(sim / "sources.jsonl", lines=True)
    out = {"paper corpus (simulated)": (cands, srcs),
           "paper corpus, sources x5": (cands, srcs.assign(source=[("\n\n".join([s] * 5)) for s in srcs["source"]]))}
    if shared is not None and (shared / "synthpai" / "predictions_compact.csv").is_file():
        sp = work / "synthpai"
        subprocess.run([sys.executable, "-m", "memjudge", "import", "synthpai", str(shared / "synthpai"), "--out", str(sp)],
                       check=True, capture_output=True)
        out["SynthPAI (300 users)"] = (pd.read_json(sp / "candidates.jsonl", lines=True), pd.read_json(sp / "sources.jsonl", lines=True))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", type=Path, default=Path(__file__).resolve().parents[1].parent / "shared" / "data")
    args = ap.parse_args()
    print(f"prompt caching per 1,000 candidates at Anthropic's list prices as read {PRICES_READ} (dry-run estimates)")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for name, (cands, srcs) in corpora(work, args.shared if args.shared.is_dir() else None).items():
            per = len(cands) / srcs["persona_id"].nunique()
            tokens = srcs["source"].map(estimate_tokens)
            print(f"\n{name}: {len(cands):,} candidates, {per:.1f} per persona, source ~{tokens.mean():,.0f} tokens "
                  f"(median {tokens.median():,.0f})")
            for model in MODELS:
                costs = {}
                for cache in (False, True):
                    judge = JudgeConfig(spec=f"anthropic:{model}", options={"prompt_cache": cache})
                    s = score_run(cands, srcs, judge, out=work / "dry", progress=False, dry_run=True,
                                  cache_dir=work / "cache").summary
                    costs[cache] = (s.estimated_cost_usd, s.estimated_cache_tokens or {})
                k = 1000 / len(cands)
                plain, cached = costs[False][0] * k, costs[True][0] * k
                est = costs[True][1]
                marked = est.get("cache_write_tokens", 0) + est.get("cached_tokens", 0)
                print(f"  {model:18s} ${plain:7.3f} unmarked  ${cached:7.3f} cached  saving ${plain - cached:6.3f} "
                      f"({(plain - cached) / plain:5.1%}); marked prefix tokens {marked * k:,.0f} per 1,000 "
                      f"({est.get('cache_write_tokens', 0) * k:,.0f} written)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
