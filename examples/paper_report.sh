#!/usr/bin/env bash
# The paper's study as one report, offline and in about a minute: simulate the `paper` preset
# (100 personas, 4,715 candidates), compare policies under the construction truth (Table 1,
# Figure 1b), the category ordering under the truth and three simulated judges (Figure 1a),
# their noise and agreement (flip rates, κ/AC1, accuracy against the truth), and render
# `memjudge report`.
#
#   examples/paper_report.sh [OUT]      (default runs/paper; the report lands in OUT/report)
#
# docs/figures/paper/ holds the figures this script produced.
set -euo pipefail
MEMJUDGE=${MEMJUDGE:-memjudge}
OUT=${1:-runs/paper}
mkdir -p "$OUT"
cd "$OUT"

$MEMJUDGE simulate --preset paper --seed 0 --out corpus

# Three simulated judges with different noise (built-in profiles of memjudge.judges.sim).
cat > judges.toml <<TOML
[[judge]]
spec = "sim:paper"
[judge.options]
truth = "corpus"

[[judge]]
spec = "sim:lenient"
[judge.options]
truth = "corpus"

[[judge]]
spec = "sim:strict"
[judge.options]
truth = "corpus"
TOML
for j in paper lenient strict; do
  $MEMJUDGE score corpus/candidates.jsonl --sources corpus/sources.jsonl --judge "sim:$j" \
    --judges-file judges.toml --replicates 2 --out "sim-$j" --no-progress
done

$MEMJUDGE compare corpus/candidates.jsonl --labels corpus/labels.jsonl --coverage corpus/coverage.jsonl \
  --out report > /dev/null
$MEMJUDGE robustness corpus/candidates.jsonl --labels corpus/labels.jsonl sim-paper/labels.jsonl \
  sim-lenient/labels.jsonl sim-strict/labels.jsonl --coverage corpus/coverage.jsonl --out report > /dev/null
$MEMJUDGE noise sim-paper/labels.jsonl sim-lenient/labels.jsonl sim-strict/labels.jsonl --out report > /dev/null
$MEMJUDGE agreement sim-paper/labels.jsonl sim-lenient/labels.jsonl sim-strict/labels.jsonl \
  --gold corpus/labels.jsonl --out report > /dev/null
$MEMJUDGE report report
