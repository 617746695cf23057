"""The JSON files memjudge writes are a checked contract (issue #33).

Every schema of `memjudge.formats.schemas.SCHEMAS` is committed as docs/schemas/NAME.schema.json
and must equal what the code generates; the outputs of one small Quickstart-shaped study
(simulate → score → noise → agreement → panel → compare → robustness → sample → estimate →
import, with gold and coverage wherever a command takes them, so that the optional parts are
written too) are validated against them with `jsonschema`: a key the schema requires that is
missing fails, and so does a key it does not name.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from memjudge.formats.schemas import SCHEMAS, json_schema, render
from schema_check import check_folder, errors

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "docs" / "schemas"
BIN = Path(sys.executable).parent

STUDY = r"""
memjudge simulate --preset paper --personas 12 --seed 3 --out c
cat > judges.toml <<'TOML'
[[judge]]
spec = "sim:paper"
[judge.options]
truth = "c"
[[judge]]
spec = "sim:noisy"
[judge.options]
truth = "c"
[[judge]]
spec = "sim:strict"
[judge.options]
truth = "c"
TOML
for j in paper noisy strict; do
  memjudge score c/candidates.jsonl --sources c/sources.jsonl --judge sim:$j --judges-file judges.toml \
      --replicates 2 --out s/$j --no-progress --quiet
done
memjudge score c/candidates.jsonl --sources c/sources.jsonl --judge sim:paper --judges-file judges.toml \
    --rubric coverage --facts c/facts.jsonl --out cov --no-progress --quiet
memjudge sample c/candidates.jsonl --n 80 --labels s/paper/labels.jsonl --strategy stratified \
    --sources c/sources.jsonl --seed 1 --out to_label.jsonl
python - <<'PY'
import json
from memjudge.annotate.gold import GoldWriter
truth = {json.loads(l)["assertion_id"]: json.loads(l)["verdict"] for l in open("c/labels.jsonl")}
with GoldWriter("gold.jsonl", "alice") as w:
    for line in open("to_label.jsonl"):
        w.append(json.loads(line)["assertion_id"], truth[json.loads(line)["assertion_id"]])
PY
memjudge noise s/paper/labels.jsonl s/noisy/labels.jsonl --bootstrap 200 --out run
memjudge agreement s/paper/labels.jsonl s/noisy/labels.jsonl --gold c/labels.jsonl --bootstrap 200 --out run
memjudge panel s/paper/labels.jsonl s/noisy/labels.jsonl s/strict/labels.jsonl --gold c/labels.jsonl \
    --by category --bootstrap 200 --out run/panel.jsonl
memjudge compare c/candidates.jsonl --labels s/paper/labels.jsonl --coverage cov/coverage.jsonl \
    --gold gold.jsonl --repeats 2 --out run --export-policy policy.json
memjudge robustness c/candidates.jsonl --labels s/paper/labels.jsonl s/strict/labels.jsonl \
    --coverage c/coverage.jsonl --gold gold.jsonl --repeats 2 --out rob
memjudge estimate s/paper/labels.jsonl --gold gold.jsonl --sample to_label.jsonl --by category \
    --bootstrap 200 --out run
memjudge estimate s/paper/labels.jsonl --gold gold.jsonl --sample to_label.jsonl --bootstrap 200 \
    --plan --half-width 0.02 --json > plan.json
memjudge sample c/candidates.jsonl --n 40 --labels s/paper/labels.jsonl --strategy active --top-up to_label.jsonl \
    --gold gold.jsonl --sources c/sources.jsonl --seed 2 --out active.jsonl
memjudge estimate s/paper/labels.jsonl --gold gold.jsonl --sample active.jsonl --bootstrap 200 --json \
    > active_estimate.json
memjudge import synthpai examples/data/synthpai --out imp
memjudge diff s/paper s/noisy --by category --fail-if-worse 0.5 --out dif > /dev/null
memjudge cascade c/candidates.jsonl --sources c/sources.jsonl --judges-file judges.toml --stage sim:noisy \
    --stage sim:paper --gold-sample 150 --target 0.9 --out casc --no-progress > /dev/null
python - <<'PY'
import json
names = {"persona_id": "uid", "text": "memory_text", "category": "cat", "confidence": "conf", "assertion_id": "id"}
with open("mapped.jsonl", "w") as f:
    for line in open("c/candidates.jsonl"):
        row = json.loads(line)
        f.write(json.dumps({names.get(k, k): v for k, v in row.items()}) + "\n")
PY
memjudge score mapped.jsonl --map persona_id=uid,text=memory_text,category=cat,confidence=conf,assertion_id=id \
    --sources c/sources.jsonl --judge sim:paper --judges-file judges.toml --out mapped --no-progress --quiet
memjudge simulate --preset paper --seed 0 --personas 6 --out runs/sim6
memjudge import mem0 examples/data/mem0/get_all.jsonl --out mem0
memjudge score mem0/candidates.jsonl --sources examples/data/mem0/conversations.jsonl \
    --judge sim:paper --judges-file examples/data/mem0/sim6.toml --out mem0-sim --no-progress --quiet
"""

# Files of the study that have no default name, and the schema each one follows.
DEMO_SCHEMAS = {"demo", "demo_config", "local_judge", "coverage_judge"}
NAMED = {"to_label.jsonl": "sample", "gold.jsonl": "gold", "plan.json": "estimate", "mem0/import.json": "import_memory",
         "active.jsonl": "sample", "active_estimate.json": "estimate"}


def test_committed_schemas_are_what_the_code_generates():
    names = {s.name for s in SCHEMAS}
    assert len(names) == len(SCHEMAS), "two schemas with one name"
    committed = {p.name for p in COMMITTED.glob("*.schema.json")}
    assert committed == {f"{n}.schema.json" for n in names}, (
        "docs/schemas/ and memjudge.formats.schemas.SCHEMAS differ: run `python -m memjudge.formats.schemas`")
    for s in SCHEMAS:
        assert (COMMITTED / f"{s.name}.schema.json").read_text(encoding="utf-8") == render(s.name), (
            f"docs/schemas/{s.name}.schema.json is stale: run `python -m memjudge.formats.schemas`")
        jsonschema.Draft202012Validator.check_schema(json_schema(s.name))


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("study")
    shutil.copytree(ROOT / "examples", work / "examples")
    # module-scoped, so before conftest's per-test clean-up: no provider key or endpoint gets in
    env = {k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL"))}
    env.update(PATH=str(BIN) + os.pathsep + os.environ.get("PATH", ""), MEMJUDGE_NO_DOTENV="1", MPLBACKEND="Agg",
               MEMJUDGE_CACHE_DIR=str(work / "cache"), HOME=str(work / "cache"))
    proc = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", STUDY], cwd=work, env=env,
                          capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return work


# The two tests of the study share one worker (xdist group), so its ~20 s fixture runs once.
@pytest.mark.xdist_group("study")
@pytest.mark.timeout(1200)
def test_every_output_of_the_study_follows_its_schema(study):
    covered, failures = check_folder(study, NAMED, skip=("examples", "cache"))
    assert not failures, "\n".join(failures)
    # the demo's own files are checked by tests/test_demo.py (its stand-in run and the real model's)
    never = {s.name for s in SCHEMAS} - set(covered) - DEMO_SCHEMAS
    assert not never, f"no real output checked against {sorted(never)}: add the command that writes it to STUDY"
    # the optional parts were written, so their shapes were checked too
    compare = json.loads((study / "run" / "compare.json").read_text())
    assert compare["gold"] is not None and compare["write_all_ci"]["coverage"] is not None
    assert json.loads((study / "plan.json").read_text())["plan"] is not None
    assert json.loads((study / "rob" / "robustness.json").read_text())["summary"].get("faithfulness_ppi")
    assert json.loads((study / "run" / "panel.json").read_text())["gold"] is not None
    # how an input was read is part of config.json: a mapping, sources rendered from transcripts
    assert json.loads((study / "mapped" / "config.json").read_text())["inputs"]["candidates"]["mapping"]["persona_id"] == "uid"
    assert json.loads((study / "mem0-sim" / "config.json").read_text())["inputs"]["sources"]["transcript"]["personas"] == 6


@pytest.mark.xdist_group("study")
def test_a_missing_or_undocumented_key_fails(study):
    compare = json.loads((study / "run" / "compare.json").read_text())
    assert not errors("compare", compare)
    missing = copy.deepcopy(compare)
    del missing["policies"]["targeted"]["faithfulness"]["sd"]
    assert any("'sd' is a required property" in e for e in errors("compare", missing))
    extra = copy.deepcopy(compare)
    extra["paired"]["faithfulness"]["mean"] = 0.01  # the shape the old README described
    assert any("'mean' was unexpected" in e for e in errors("compare", extra))
    estimate = json.loads((study / "run" / "estimate.json").read_text())
    old = copy.deepcopy(estimate)
    old["groups"][0]["ppi"]["lambda"] = old["groups"][0].pop("ppi_lambda")
    errs = errors("estimate", old)
    assert any("'lambda' was unexpected" in e for e in errs) and any("'ppi_lambda'" in e for e in errs)
    summary = json.loads((study / "s" / "paper" / "summary.json").read_text())
    del summary["batch"]  # a dataclass field with a default is still a key every summary has
    assert any("'batch' is a required property" in e for e in errors("summary", summary))


def test_the_shapes_the_old_readme_described_are_gone():
    """compare.json: fold means are {value, lo, hi, sd}; paired {value, lo, hi, same_sign, nb_lo, nb_hi};
    estimate.json: λ is the group's ppi_lambda, not a key of ppi."""
    compare = json_schema("compare")["$defs"]
    assert set(compare["MeanSd"]["properties"]) == {"value", "lo", "hi", "sd"}
    assert set(compare["Paired"]["properties"]) == {"value", "lo", "hi", "same_sign", "nb_lo", "nb_hi"}
    estimate = json_schema("estimate")["$defs"]
    assert set(estimate["Estimate"]["properties"]) == {"value", "lo", "hi"}
    assert "ppi_lambda" in estimate["EstimateGroup"]["required"]
