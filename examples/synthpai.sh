#!/usr/bin/env bash
# The real-judge study on SynthPAI, recorded in docs/synthpai.md:
#   import → agreement between the two judges → robustness and compare under each judge → report.
#
#   examples/synthpai.sh [SYNTHPAI_FOLDER] [OUT]      (defaults: ../shared/data/synthpai, runs/synthpai)
#
# SYNTHPAI_FOLDER holds SynthPAI's predictions_compact.csv and thread_comments_eval_revised.jsonl
# (https://github.com/eth-sri/SynthPAI, MIT); examples/data/synthpai is a 3-user sample of both.
#
# Offline and deterministic (fixed seeds); about a minute on two cores. PYTHON picks the interpreter
# that has memjudge installed (default: python3); REPEATS (default 20, the protocol's R) and
# BOOTSTRAP (agreement resamples, default 2000) exist only to make a quick smoke run.
set -euo pipefail

DATA=${1:-../shared/data/synthpai}
OUT=${2:-runs/synthpai}
PY=${PYTHON:-python3}
REPEATS=${REPEATS:-20}
BOOTSTRAP=${BOOTSTRAP:-2000}
HUMAN=synthpai:human-checked
LLM=synthpai:llm-only
mj() { "$PY" -m memjudge "$@"; }

# 1. Import (37,880 candidates, 56,105 verdicts, 300 sources on the published files).
mj import synthpai "$DATA" --out "$OUT/import"

# 2. The LLM-only judge labelled the guesses of 10 of the 20 models. Cross-judge comparisons use
#    the paired set (candidates both judges labelled), so that a difference between judges is
#    not a difference between item sets. labels_binary.jsonl folds `partial` into `unsupported`,
#    which is how every support rate and policy fit counts it.
"$PY" - "$OUT" "$HUMAN" "$LLM" <<'EOF'
import json
import sys
from pathlib import Path

import memjudge

out, human, llm = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
cand = memjudge.read_candidates(out / "import" / "candidates.jsonl")
lab = memjudge.read_labels(out / "import" / "labels.jsonl")
ids = set(lab.loc[lab["judge"] == human, "assertion_id"]) & set(lab.loc[lab["judge"] == llm, "assertion_id"])
paired = out / "paired"
paired.mkdir(parents=True, exist_ok=True)


def write(frame, name):  # JSONL, missing values as null
    rows = frame.astype(object).where(frame.notna(), None).to_dict("records")
    with open(paired / name, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)


write(cand[cand["assertion_id"].isin(ids)], "candidates.jsonl")
lab = lab[lab["assertion_id"].isin(ids)]
write(lab, "labels.jsonl")
write(lab.assign(verdict=lab["verdict"].replace({"partial": "unsupported"})), "labels_binary.jsonl")
print(f"paired set: {len(ids):,} candidates labelled by both judges")
EOF

STUDY=$OUT/study
mkdir -p "$STUDY"
cp "$OUT/import/labels.jsonl" "$STUDY/labels.jsonl"  # the report summarises the labels it finds in the run
# 3. Agreement between the judges: on their verdicts as given (3 labels), and binary.
mj agreement "$OUT/import/labels.jsonl" --bootstrap "$BOOTSTRAP" --out "$STUDY"
mj agreement "$OUT/paired/labels_binary.jsonl" --bootstrap "$BOOTSTRAP" --out "$OUT/agreement-binary"

# 4. Does the policy ordering survive the change of judge? (gate chosen inside each fit fold)
mj robustness "$OUT/paired/candidates.jsonl" --labels "$OUT/paired/labels.jsonl" --gate auto --repeats "$REPEATS" --out "$STUDY"

# 5. Each judge on its own: --gate auto, and the single lowest-support category under that judge
#    (read from robustness.json) against the global threshold. Human-checked also on all 37,880.
lowest() { "$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(next(u["lowest_category"] for u in d["units"] if u["judge"]==sys.argv[2]))' "$STUDY/robustness.json" "$1"; }
LOW_HUMAN=$(lowest "$HUMAN")
LOW_LLM=$(lowest "$LLM")
echo "lowest-support category: $HUMAN → $LOW_HUMAN, $LLM → $LOW_LLM"
mj compare "$OUT/paired/candidates.jsonl" --labels "$OUT/paired/labels.jsonl" --judge "$HUMAN" --gate auto --repeats "$REPEATS" --out "$STUDY"
mj compare "$OUT/paired/candidates.jsonl" --labels "$OUT/paired/labels.jsonl" --judge "$HUMAN" --gate "$LOW_HUMAN" --repeats "$REPEATS" --out "$OUT/compare/human-$LOW_HUMAN"
mj compare "$OUT/paired/candidates.jsonl" --labels "$OUT/paired/labels.jsonl" --judge "$LLM" --gate auto --repeats "$REPEATS" --out "$OUT/compare/llm-auto"
mj compare "$OUT/paired/candidates.jsonl" --labels "$OUT/paired/labels.jsonl" --judge "$LLM" --gate "$LOW_LLM" --repeats "$REPEATS" --out "$OUT/compare/llm-$LOW_LLM"
mj compare "$OUT/import/candidates.jsonl" --labels "$OUT/import/labels.jsonl" --judge "$HUMAN" --gate auto --repeats "$REPEATS" --out "$OUT/compare/human-all-auto"

# 6. Report with figures.
mj report "$STUDY"
echo "report: $STUDY"
